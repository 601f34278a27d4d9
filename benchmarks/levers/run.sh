#!/usr/bin/env bash
# The recompute lever against the best schedule without levers and the hand-made schedules with
# every microbatch recomputed (docs/benchmarks.md, "Memory levers"): the 1.5B profile at P=8,
# single and V-shape, M = 24 and 32, at 0.25x, 0.5x and 0.75x, each solved without and with
# --levers recompute for 30 s on the clock (2 workers); and the ~7B single chain of the README
# for 60 s. The checkpoint is the stage's input in bf16: s x b x h x 2 bytes (1.5B: 1024 x 6
# x 2304 x 2 = 0.0283 GB). Each solve's table goes to OUT/NAME.txt; results.md quotes them.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-benchmarks/levers}
Z=.venv/bin/zbsolve
for placement in single vshape; do
  for M in 24 32; do
    for memory in 0.25x 0.5x 0.75x; do
      name="1.5b-$placement-M$M-$memory"
      args=(--profile zb-1.5b --placement $placement --microbatches $M --memory $memory --time-limit 30 -q)
      $Z solve "${args[@]}" > "$OUT/$name-plain.txt" 2>&1 || true  # an infeasible point says so in its file
      $Z solve "${args[@]}" --levers recompute --checkpoint 0.0283 > "$OUT/$name-levers.txt" 2>&1 || true
    done
  done
done
SEVEN_B=(--stages 8 --microbatches 32 --F 10 --B 10 --W 7 --comm 0.3 --activation 3 --memory-unit GB
         --memory 20GB --time-limit 60 -q)
$Z solve "${SEVEN_B[@]}" > "$OUT/7b-single-M32-plain.txt" 2>&1
$Z solve "${SEVEN_B[@]}" --levers recompute --checkpoint 0.05 > "$OUT/7b-single-M32-levers.txt" 2>&1
