"""Lower bounds on the objective, from relaxations that any schedule must satisfy.

Every bound here is in solver units and is valid for the problem as the solvers see it
(split or fused backward, F&B pairs, memory limits). The reported bound of a solve is
the best of these and of what the backend proves. `jackson` treats one device as a single
machine with heads and tails; `memory` adds the idle a memory limit forces before, between
and after a device's backwards (its knapsacks in `fill`); `span` measures all of them from
a device's first op; `stays` keeps apart what memory below two microbatches cannot hold
together; `area` fits what memory holds over time to the stays it must hold; `paths`
holds the longest-path passes they share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .area import area_bound
from .jackson import jackson_bound
from .memory import cooldown_bound, middle_idle, warmup_bound
from .paths import UNREACHED, Paths, microbatch_reach
from .span import span_bound
from .stays import stays_bound

if TYPE_CHECKING:
    from zbsolve.problem.op_graph import Op
    from zbsolve.solvers.view import ProblemView

__all__ = ["DEVICE_BOUND_WORK", "UNREACHED", "Paths", "area_bound", "bounded_devices", "cooldown_bound", "device_bound",
           "jackson_bound", "lower_bound", "microbatch_reach", "middle_idle", "span_bound", "stays_bound",
           "warmup_bound"]


# About how many steps of the per-device bounds take 10 s on the 2-core machine (2-4 us
# each). Above that a long pipeline of few microbatches (P = 5000, M = 2 spent five minutes
# in them before this) bounds a sample of its devices instead.
DEVICE_BOUND_WORK = 3_000_000


def bounded_devices(data: ProblemView) -> list[int]:
    """The devices whose own bounds are computed: every one, unless that would take more
    than DEVICE_BOUND_WORK steps; then devices spread evenly by index (the ends included)
    and the busiest others, as many as that allows. Each device's bound holds on its
    own, so any subset gives a valid bound, at worst a weaker one.

    Steps per device: at span, the longest-path passes over every op (up to four, and a
    one-machine bound on each other device in up to two frames: about twice the op count);
    at makespan, the cool-down's paths through a microbatch from each stage here, about 3
    steps per op."""
    devices = [d for d, ops in enumerate(data.device_ops) if ops]
    if data.objective == "span":
        each = 2 * len(data.ops)
    else:
        longest = max(len(ops) for ops in data.microbatch_ops.values())
        each = 3 * longest * max(len(data.forward_chains(d)) for d in devices)
    room = max(2, DEVICE_BOUND_WORK // max(1, each))
    if len(devices) <= room:
        return devices
    spread = max(2, room // 2)  # the first and last device (longest tail, longest head) among them
    chosen = {devices[round(j * (len(devices) - 1) / (spread - 1))] for j in range(spread)}
    work = {d: sum(data.duration[op] for op in data.device_ops[d]) for d in devices}
    for d in sorted(devices, key=lambda d: (-work[d], d)):
        if len(chosen) >= room:
            break
        chosen.add(d)
    return sorted(chosen)


def lower_bound(data: ProblemView) -> int:
    """The best of the critical path and each device's Jackson, warm-up, cool-down, stays and
    area bounds (for the span objective, each device's span, stays and area bounds), over
    `bounded_devices`; and the same of `data.bound_view`, which has every memory edge."""
    own = own_bound(data)
    return own if data.bound_view is None else max(own, lower_bound(data.bound_view))


def own_bound(data: ProblemView) -> int:
    devices = bounded_devices(data)
    if data.objective == "span":
        paths = Paths(data)
        return max((max(span_bound(data, d, paths), stays_bound(data, data.device_ops[d]),
                        area_bound(data, data.device_ops[d])) for d in devices), default=0)
    best = max((data.head[op] + data.tail[op] for op in data.ops), default=0)  # critical path
    for d in devices:
        best = max(best, device_bound(data, data.device_ops[d], floor=best))
    return best


def device_bound(data: ProblemView, ops: list[Op], floor: int = 0) -> int:
    """The makespan bounds of one device's `ops` (Jackson's, warm-up, cool-down, stays,
    area): the best of them, or `floor` where none is higher (the area bound stops early
    below it)."""
    best = max(floor, jackson_bound(data, ops), warmup_bound(data, ops), cooldown_bound(data, ops),
               stays_bound(data, ops))
    return max(best, area_bound(data, ops, floor=best))
