"""Mirror-image schedules of two-pipe problems (DualPipe's placement), searched first.

On the bidirectional placement with both pipes running the same stages, the map that
swaps the pipes (microbatch i of one pipe for microbatch i of the other) and reflects
the devices carries every schedule to another valid schedule with the same objective.
Searching only schedules equal to their own mirror image halves the free start times:
on 1.5B costs with F&B pairs (576 ops, 60 s, 2 workers) solves found 1048.55, 1055.52
and 1051.00 ms (seeds 0-2) against 1059.01 ms for the whole model alone; without pairs
at 1x memory, 1203.12 and 1195.95 ms (seeds 0, 1) against 1229.95 and 1230.13, and on
6.2B costs 1995.06 and 2033.26 against 2089.63 and 2080.91. The restriction
may exclude every optimum, so what the mirrored model proves is never reported: the
whole model, hinted with its schedule, searches and proves on.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from zbsolve.ops import Op
from zbsolve.solvers.base import SolveInput

# Of the time limit; a mirrored model solved early hands the rest on. On the instance above
# 0.75 found 1051.15 and 1057.15 ms (seeds 0, 1), 0.9 the values quoted there.
MIRROR_SHARE = 0.9
# Above this many ops every worker of the mirrored phase runs large neighbourhood search
# (CP-SAT's use_lns_only): that model's proofs are of no use, and on the 576-op instances
# below it proved nothing in 60 s. 400 ops is where the benchmark still asks for proofs.
# 60 s, 2 workers, seeds 0-2 (0-1), default against LNS only, ms: 1.5B F&B pairs 1058.82,
# 1057.73, 1049.76 against 1044.51, 1056.60, 1043.39; at 1.125x 1050.25, 1058.81 against
# 1049.15, 1049.33; DualPipe's placement at 1x without pairs, 1.5B 1183.75, 1174.11 against
# 1168.24, 1173.78, 6.2B 2004.33, 2043.65 against 2002.06, 1992.97. Small models keep the
# full search: it proves at once and hands the rest of the limit on.
# Where that LNS runs on F&B pairs its neighbourhoods vary their CP-SAT parameters
# (diversify_lns_params): improvements there came in steps of about one pair's saving, as
# if stuck between pair counts. 60 s, 2 workers, seeds 0-7, ms (benchmarks/parameters_pairs*):
# 1.5B with pairs mean 1044.91 (1040.91 to 1049.03) against 1051.70 (1047.84 to 1057.46);
# at 1.125x 1049.05 (1042.76 to 1057.77) against 1050.60 (1048.55 to 1057.61); 14.6B with
# pairs 1418.81 (1416.12 to 1423.21) against 1418.02 (1414.37 to 1421.80), within its spread.
# A repeat of seeds 0-3 on 1.5B went the other way (1050.32 against 1047.37): over twelve
# runs of each, 1046.71 against 1050.26 ms.
SEARCH_ONLY_ABOVE_OPS = 400
# From this many ops with F&B pairs the mirrored phase takes the whole limit and its best
# schedule is the answer, with pair window search once it stalls (`pair_window`); without
# pairs window search runs there instead, as a rule. On
# 14.6B with pairs (2,304 ops, 60 s, 2 workers) the whole model after it never improved on
# it in four runs (seeds 0-3) and its presolve took one solve 3.4 s past its limit; alone,
# seeds 0-2 gave 1433.62, 1431.91 and 1427.42 ms against 1434.08, 1432.49 and 1431.91. On
# 1.5B with pairs (576 ops, same settings, 2026-11-27; alone, with the pair cut below)
# seeds 0-5 gave 1046.94, 1048.44, 1049.76, 1041.32, 1048.87 and 1049.05 ms (mean
# 1047.40) against 1056.87, 1048.69, 1049.98, 1049.32, 1041.06 and 1050.41 (mean 1049.39)
# with the whole model after 90% of the limit; at 1.125x seeds 0-7 gave 1049.65, 1044.51,
# 1049.81, 1049.76, 1049.76, 1050.41, 1042.13 and 1049.15 (mean 1048.15) against 1050.41,
# 1057.59, 1049.65, 1049.76 and 1049.15 (seeds 0, 4-7; mean 1051.31). The whole model
# raised no bound there. On small models it matters: P=4 M=8 at 0.5x with pairs, the best
# mirror image is 33 and the optimum 32.
ALONE_FROM_OPS = 500
# Where the mirrored phase is the answer, its pairs are only those of an F and a backward
# that the starting schedule starts at most this many pair lengths apart (or pairs): the
# model shrinks (14.6B, 2,304 ops: 1,430 of 18,432 candidate pairs from DualPipe's
# schedule) and its search goes further. 60 s, 2 workers, 14.6B with pairs, seeds 0-3, ms:
# 1418.68, 1412.66, 1416.63, 1414.24 against 1423.13, 1424.82, 1418.98, 1421.98 with every
# pair; 1.5 pair lengths 1417.55, 1410.68, 1424.26, 1417.85; 6 pair lengths 1420.23,
# 1418.99, 1416.17, 1415.03; two 30 s rounds, the second's pairs around the first's best,
# 1420.98, 1417.19, 1414.36, 1415.50; at 1.125x memory (seeds 0, 1) 1413.41, 1419.34
# against 1424.05, 1423.67 with every pair. When ALONE_FROM_OPS was 1,000 and the whole
# model followed at 576 ops, the cut there (1.5B with pairs) gave 1048.44, 1048.44,
# 1049.50, 1054.89 against 1057.13, 1042.11, 1041.06, 1041.51 with every pair (at 1.125x,
# 1049.76, 1043.36, 1049.76, 1050.41 against 1049.15, 1050.85, 1050.06, 1049.76); at 6
# pair lengths 1054.76, 1041.48, 1040.77, 1049.81 (at 1.125x 1049.15, 1049.62, 1049.75,
# 1049.76): no clear change. Alone, it comes with the phase (see ALONE_FROM_OPS).
PAIRS_WITHIN = 3.0


def pairs_within(data: SolveInput) -> int | None:
    """How far apart (solver units) the starting schedule may start the halves of a pair
    in the mirrored model (see `Pairs`), or None for no restriction."""
    if data.pair_duration is None or len(data.ops) < ALONE_FROM_OPS:
        return None
    return int(PAIRS_WITHIN * data.pair_duration)


def twins(data: SolveInput) -> dict[Op, Op] | None:
    """Each op's mirror image, when swapping the two pipes is a symmetry of the problem:
    same durations, memory effects and dependencies with their delays, devices mapped one
    to one onto devices with the same memory limit, and no op's image on its own device
    (two images running together there would have to overlap). None otherwise."""
    pipes = data.graph.problem.pipes
    if len(pipes) != 2 or len(pipes[0].microbatches) != len(pipes[1].microbatches):
        return None
    index = [{i: n for n, i in enumerate(pipe.microbatches)} for pipe in pipes]
    twin = {op: Op(op.kind, 1 - op.pipe, op.stage, pipes[1 - op.pipe].microbatches[index[op.pipe][op.microbatch]])
            for op in data.ops}
    device = data.graph.device
    reflect: dict[int, int] = {}
    for op, image in twin.items():
        if image not in data.duration or reflect.setdefault(device(op), device(image)) != device(image):
            return None
        if device(op) == device(image) or data.duration[op] != data.duration[image]:
            return None
        if data.memory_effect[op] != data.memory_effect[image]:
            return None
        if {(twin[p], delay) for p, delay in data.predecessors[op]} != set(data.predecessors[image]):
            return None
    if data.memory_limit is not None and any(data.memory_limit[d] != data.memory_limit[e] for d, e in reflect.items()):
        return None
    return twin


def add_mirror(model: cp_model.CpModel, start: dict, pair_literals: dict, twin: dict[Op, Op]) -> None:
    """Each op starts with its image, and each pair is chosen with its image."""
    for op, image in twin.items():
        if op.pipe == 0:
            model.Add(start[op] == start[image])
    for (forward, backward), chosen in pair_literals.items():
        image = pair_literals.get((twin[forward], twin[backward]))
        model.Add(chosen == (image if image is not None else 0))
