#!/usr/bin/env bash
# The 6.2B profile's rows of both lever benchmarks (docs/benchmarks.md, "Memory levers"): P=8,
# single and V-shape, M = 24, at 0.25x, 0.5x and 0.75x, each solved for 30 s on the clock (2
# workers) without levers, with --levers recompute (checkpoint: the stage's input in bf16,
# 1024 x 3 x 4096 x 2 bytes = 0.0252 GB) and with --levers offload at 450 GB/s. Outputs go
# beside run.sh's (benchmarks/levers) and benchmarks/offload's, named as theirs.
# `run_6.2b.sh offload` runs the offload rows alone.
set -euo pipefail
ONLY=${1:-all}
cd "$(dirname "$0")/../.."
Z=.venv/bin/zbsolve
for placement in single vshape; do
  for memory in 0.25x 0.5x 0.75x; do
    name="6.2b-$placement-M24-$memory"
    args=(--profile zb-6.2b --placement $placement --microbatches 24 --memory $memory --time-limit 30 -q)
    if [ "$ONLY" = all ]; then
      $Z solve "${args[@]}" > "benchmarks/levers/$name-plain.txt" 2>&1 || true
      $Z solve "${args[@]}" --levers recompute --checkpoint 0.0252 > "benchmarks/levers/$name-levers.txt" 2>&1 || true
    fi
    $Z solve "${args[@]}" --levers offload --host-bandwidth 450GB/s > "benchmarks/offload/$name-450GBps.txt" 2>&1 || true
  done
done
