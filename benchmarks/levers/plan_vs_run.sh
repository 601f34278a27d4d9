#!/usr/bin/env bash
# Recomputation's real cost on the CPU runtime (docs/benchmarks.md, "Memory levers"): the
# calibrated profile of benchmarks/plan_vs_run (P=2, M=8; 2 GPT layers, hidden 256, 4 heads,
# sequence 128, microbatch size 2, float32), solved at 0.75x with --levers recompute
# (checkpoint: the stage's input, 2 x 128 x 256 x 4 bytes = 0.262144 MB) and without, each
# run three times with zbsolve run (10 steps after 3 warm-ups). Outputs in OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-benchmarks/levers/plan_vs_run}
Z=.venv/bin/zbsolve
PROFILE=benchmarks/plan_vs_run/calibrated.json
STACK=(--layers 2 --hidden 256 --heads 4 --seq 128 --microbatch-size 2 --steps 10 --warmup 3)
$Z solve --profile $PROFILE --stages 2 --microbatches 8 --memory 0.75x --levers recompute --checkpoint 0.262144 \
  --time-limit 20 -q -o "$OUT/plan-recompute.json" > "$OUT/solve-recompute.txt"
$Z solve --profile $PROFILE --stages 2 --microbatches 8 --memory 0.75x --time-limit 20 -q \
  -o "$OUT/plan-plain.json" > "$OUT/solve-plain.txt"
for run in 1 2 3; do
  for plan in recompute plain; do
    $Z run "$OUT/plan-$plan.json" --profile $PROFILE "${STACK[@]}" -o "$OUT/measured-$plan-$run.json" \
      > "$OUT/run-$plan-$run.txt" 2>&1
  done
done
