#!/usr/bin/env bash
# The committed frontier sweeps (docs/sweeps.md): 1.5B and 6.2B profiles at P=8, four
# placements, M in {16, 24, 32}, memory 0.5x to 2x in eight steps, 30 s per point, two
# single-worker solves at a time. Rerunning finishes whatever a store is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
for model in zb-1.5b zb-6.2b; do
  .venv/bin/zbsolve sweep --profile "models/$model.json" --stages 8 \
    --placements single,interleaved:2,vshape,bidirectional --microbatches 16,24,32 --memory 0.5x:2x:8 \
    --time-limit 30 --workers 1 --no-deterministic --jobs 2 \
    --store "benchmarks/sweep/$model.db" --schedules "${SCHEDULES:-/tmp/zbsolve-sweep}/$model" \
    --report --plot "benchmarks/sweep/$model-frontier.png" --csv "benchmarks/sweep/$model-frontier.csv" \
    > "benchmarks/sweep/$model-frontier.txt"
done
