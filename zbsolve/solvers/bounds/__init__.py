"""Lower bounds on the objective, from relaxations that any schedule must satisfy.

Every bound here is in solver units and is valid for the problem as the solvers see it
(split or fused backward, F&B pairs, memory limits). The reported bound of a solve is
the best of these and of what the backend proves. `jackson` treats one device as a single
machine with heads and tails; `memory` adds the idle a memory limit forces before, between
and after a device's backwards (its knapsacks in `fill`); `span` measures all of them from
a device's first op; `paths` holds the longest-path passes they share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .jackson import jackson_bound
from .memory import cooldown_bound, middle_idle, warmup_bound
from .paths import UNREACHED, Paths, microbatch_reach
from .span import span_bound

if TYPE_CHECKING:
    from zbsolve.solvers.base import SolveInput

__all__ = ["UNREACHED", "Paths", "cooldown_bound", "jackson_bound", "lower_bound", "microbatch_reach",
           "middle_idle", "span_bound", "warmup_bound"]


def lower_bound(data: SolveInput) -> int:
    """The best of the critical path and each device's Jackson, warm-up and cool-down bounds
    (for the span objective, each device's span bound)."""
    if data.objective == "span":
        paths = Paths(data)
        return max((span_bound(data, d, paths) for d, ops in enumerate(data.device_ops) if ops), default=0)
    best = max((data.head[op] + data.tail[op] for op in data.ops), default=0)  # critical path
    for ops in data.device_ops:
        if ops:
            best = max(best, jackson_bound(data, ops), warmup_bound(data, ops), cooldown_bound(data, ops))
    return best
