"""Mirror-image schedules of two-pipe problems (DualPipe's placement), searched first.

On the bidirectional placement with both pipes running the same stages, the map that
swaps the pipes (microbatch i of one pipe for microbatch i of the other) and reflects
the devices carries every schedule to another valid schedule with the same objective.
Searching only schedules equal to their own mirror image halves the free start times, and
found shorter schedules within a solve's limit than the whole model alone. The restriction
may exclude every optimum, so what the mirrored model proves is never reported: the
whole model, hinted with its schedule, searches and proves on.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import Op
from zbsolve.solvers.view import ProblemView

# Of the time limit; a mirrored model solved early hands the rest on.
MIRROR_SHARE = 0.9
# Above this many ops every worker of the mirrored phase runs large neighbourhood search
# (CP-SAT's use_lns_only): that model's proofs are of no use there. Small models keep the
# full search: it proves at once and hands the rest of the limit on. With F&B pairs that
# LNS varies its neighbourhoods' parameters (diversify_lns_params): its gains came in steps
# of about one pair's saving, as if stuck between pair counts.
SEARCH_ONLY_ABOVE_OPS = 400
# From this many ops with F&B pairs the mirrored phase takes the whole limit and its best
# schedule is the answer, with pair window search once it stalls (`pair_window`): the whole
# model after it did not improve on it at that size. On small models the whole model still
# matters (P=4 M=8 at 0.5x with pairs: the best mirror image is 33, the optimum 32).
ALONE_FROM_OPS = 500
# Where the mirrored phase is the answer, its pairs are only those of an F and a backward
# that the starting schedule starts at most this many pair lengths apart (or pairs): the
# model shrinks by an order of magnitude and its search goes further.
PAIRS_WITHIN = 3.0


def pairs_within(data: ProblemView) -> int | None:
    """How far apart (solver units) the starting schedule may start the halves of a pair
    in the mirrored model (see `Pairs`), or None for no restriction."""
    if data.pair_duration is None or len(data.ops) < ALONE_FROM_OPS:
        return None
    return int(PAIRS_WITHIN * data.pair_length)


def twins(data: ProblemView) -> dict[Op, Op] | None:
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
    if data.memory_limit is not None and any(data.limits[d] != data.limits[e] for d, e in reflect.items()):
        return None
    return twin


def add_mirror(model: cp_model.CpModel, start: dict, pair_literals: dict, twin: dict[Op, Op]) -> None:
    """Each op starts with its image, and each pair is chosen with its image."""
    for op, image in twin.items():
        if op.pipe == 0:
            model.add(start[op] == start[image])
    for (forward, backward), chosen in pair_literals.items():
        mirrored = pair_literals.get((twin[forward], twin[backward]))
        model.add(chosen == (mirrored if mirrored is not None else 0))
