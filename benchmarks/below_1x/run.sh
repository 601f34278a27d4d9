#!/usr/bin/env bash
# Which side of a gap below 1F1B's memory is loose (docs/benchmarks.md, "Below 1x: which
# side is loose"): the rows of the open gaps, and neighbours of the same shape with fewer
# microbatches, each solved deterministically (one worker, CP-SAT's work measure, so a rerun
# repeats) at 60 work units and again at 600 (1200 for the 7B row itself); then the 1.5B
# placements at 4 ranks, on the clock. Each solve's
# table goes to OUT/NAME-UNITS.txt; results.md quotes them. `run.sh windows` runs only the
# last block, the rows again after the bound phase began relaxing neighbouring devices.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-benchmarks/below_1x}
Z=.venv/bin/zbsolve
SEVEN_B="--stages 8 --F 10 --B 10 --W 7 --comm 0.3 --activation 3 --memory-unit GB --memory 20GB"
solve() {  # NAME UNITS ARGS...
  local name=$1 units=$2
  shift 2
  $Z solve "$@" --time-limit "$units" --workers 1 --deterministic -q > "$OUT/$name-$units${SUFFIX:-}.txt" 2>&1
}
if [ "${1:-all}" = all ]; then
for M in 8 12 16 20 24 32; do  # the list scheduler's bound is the static one: where each solve starts
  solve "7b-single-M$M-list" 2 $SEVEN_B --microbatches $M --solver list
done
for M in 8 12 16 20 24; do
  for units in 60 600; do solve "7b-single-M$M" $units $SEVEN_B --microbatches $M; done
done
for units in 60 1200; do solve 7b-single-M32 $units $SEVEN_B --microbatches 32; done
for placement in bidirectional vshape interleaved:2; do
  name=${placement%%:*}
  for M in 8 16; do
    for units in 60 600; do
      solve "1.5b-$name-M$M" $units --profile zb-1.5b --placement $placement --microbatches $M --memory 0.5x
    done
  done
  solve "1.5b-$name-M32" 600 --profile zb-1.5b --placement $placement --microbatches 32 --memory 0.5x
done
# Fewer ranks, the same per-stage costs: 240 s on the clock, one worker each.
for placement in bidirectional interleaved:2 vshape; do
  for M in 8 16; do
    $Z solve --profile zb-1.5b --stages 4 --placement $placement --microbatches $M --memory 0.5x --time-limit 240 \
      --workers 1 --no-deterministic -q > "$OUT/1.5b-P4-${placement%%:*}-M$M-240s.txt" 2>&1
  done
done
fi
# After the bound phase relaxes windows of neighbouring devices (2dc2fce): the same solves,
# written as NAME-UNITS-windows.txt beside the earlier ones.
SUFFIX=-windows
for M in 24 32; do solve "7b-single-M$M" 60 $SEVEN_B --microbatches $M; done
solve 7b-single-M32 600 $SEVEN_B --microbatches 32
for placement in bidirectional interleaved:2 vshape; do
  solve "1.5b-${placement%%:*}-M16" 60 --profile zb-1.5b --placement $placement --microbatches 16 --memory 0.5x
done
