"""Stays that memory keeps apart: below two microbatches' activations on a device.

A microbatch holds a stage's whole activation on its device from the stage's F start to the
end of its backward (B, or BW when fused): its stay. Where each of two activations is more
than half the device's limit, no two such stays overlap, whatever their pipes (DualPipe's
two pipes share each device). Two stays of one microbatch on one device always overlap (the
later stage's lies inside the earlier one's), so a problem where both are that large has no
schedule; such a device is left alone here. The stays then run as on one machine, each at
least as long as the path from its F through the rest of the pipe and back to its backward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import allocates, producer

from .jackson import jackson_jobs
from .paths import least_stays

if TYPE_CHECKING:
    from zbsolve.solvers.view import ProblemView


def stays_bound(data: ProblemView, ops: list[Op]) -> int:
    """Makespan: Jackson's bound over the device's long-held stays, with their F's heads and
    their backwards' tails. Span: their total, as each lies between the device's first op
    and its last. 0 where fewer than two stays are kept apart."""
    if data.memory_limit is None or not ops:
        return 0
    limit = data.limits[data.graph.device(ops[0])]
    forwards = [op for op in ops if allocates(op.kind) and 2 * data.memory_effect[op][0] > limit]
    owners = {(f.pipe, f.microbatch) for f in forwards}
    if len(forwards) < 2 or len(owners) < len(forwards):
        return 0
    backward = producer("I", data.split)
    least_stay = least_stays(data, forwards)
    jobs = []
    for f in forwards:
        b = f.with_kind(backward)
        jobs.append((data.head[f], least_stay[f.pipe, f.stage], data.tail[b] - data.shortest(b)))
    if data.objective == "span":
        return sum(length for _, length, _ in jobs)
    return jackson_jobs(jobs)
