#!/usr/bin/env bash
# The offload lever against the best schedule without levers and the hand-made schedules with
# the PipeOffload rule's copies (docs/benchmarks.md, "Memory levers: offload"): the 1.5B profile
# at P=8, single and V-shape, M = 24, at 0.25x, 0.5x and 0.75x, each solved with --levers offload
# for 30 s on the clock (2 workers) at two host bandwidths: 25 GB/s (PCIe 4 x16 as measured in
# practice) and 450 GB/s (a chip-to-chip link's one direction); and the ~7B single chain of the
# README for 60 s with offload and with both levers at 25 GB/s. The solves without levers are
# benchmarks/levers' (same settings). Each solve's table goes to OUT/NAME.txt; results.md quotes them.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-benchmarks/offload}
Z=.venv/bin/zbsolve
for placement in single vshape; do
  for memory in 0.25x 0.5x 0.75x; do
    for bandwidth in 25GB/s 450GB/s; do
      name="1.5b-$placement-M24-$memory-${bandwidth%GB/s}GBps"
      $Z solve --profile zb-1.5b --placement $placement --microbatches 24 --memory $memory --time-limit 30 -q \
        --levers offload --host-bandwidth $bandwidth > "$OUT/$name.txt" 2>&1 || true
    done
  done
done
SEVEN_B=(--stages 8 --microbatches 32 --F 10 --B 10 --W 7 --comm 0.3 --activation 3 --memory-unit GB
         --memory 20GB --time-limit 60 -q --host-bandwidth 25GB/s)
$Z solve "${SEVEN_B[@]}" --levers offload > "$OUT/7b-single-M32-25GBps.txt" 2>&1
$Z solve "${SEVEN_B[@]}" --levers recompute,offload --checkpoint 0.05 > "$OUT/7b-single-M32-25GBps-both.txt" 2>&1
