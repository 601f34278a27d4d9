"""Problem size: op counts, and the limit every command checks before it builds anything.

Solver backends declare their own model limits (`zbsolve.solvers.registry`). What the
limits are measured from is in docs/solving.md ("Sizes").
"""

from __future__ import annotations

from zbsolve.errors import UsageError
from zbsolve.problem.problem import Problem

MAX_OPS = 1_000_000


class SizeError(UsageError):
    """The problem is too large to handle in reasonable memory or time."""


def op_count(problem: Problem) -> int:
    kinds = 3 if problem.split_backward else 2
    return kinds * sum(len(pipe.stages) * len(pipe.microbatches) for pipe in problem.pipes)


def forwards_per_stage(problem: Problem) -> list[list[int]]:
    """Forward count of each stage held by each device (one list entry per stage)."""
    held: list[list[int]] = [[] for _ in range(problem.devices)]
    for pipe in problem.pipes:
        for stage in pipe.stages:
            held[stage.device].append(len(pipe.microbatches))
    return held


def shape(devices: int, microbatches: int, placement: str) -> str:
    return f"P={devices} devices x M={microbatches} microbatches ({placement} placement)"


def describe_shape(problem: Problem) -> str:
    return shape(problem.devices, problem.microbatches, problem.placement)


def check_size(problem: Problem) -> None:
    """Refuse problems whose op list alone would not fit (every command builds it)."""
    check_op_count(op_count(problem), describe_shape(problem))


def check_op_count(ops: int, shape_text: str) -> None:
    """Refuse `ops` above MAX_OPS; also called from the bare numbers, before a problem exists."""
    if ops > MAX_OPS:
        raise SizeError(
            f"{shape_text} make {ops:,} ops; zbsolve handles at most {MAX_OPS:,} "
            f"(about 20 us and 0.6 KB each): use fewer microbatches (bubble rates settle once "
            f"M is a few times P) or fewer stages"
        )
