"""Size limits, checked from the problem's numbers before anything large is built.

Figures behind the limits (2-core dev machine, see the issue notes): the simulator and
validator take about 20 µs and 0.6 KB per op, so a million ops is about 20 s and 0.6 GB
per hand-made schedule. The integer programs are far more expensive per op.
"""

from __future__ import annotations

from zbsolve.errors import UsageError
from zbsolve.problem import Problem

MAX_OPS = 1_000_000
MAX_MODEL_OPS = 200_000  # CP-SAT: ops plus overlapped-pair choices
MAX_ORDERING_PAIRS = 500_000  # CBC: one binary per pair of ops on a device, before pruning


class SizeError(UsageError):
    """The problem is too large to handle in reasonable memory or time."""


def op_count(problem: Problem) -> int:
    kinds = 3 if problem.split_backward else 2
    return kinds * sum(len(pipe.stages) * len(pipe.microbatches) for pipe in problem.pipes)


def _per_device(problem: Problem) -> list[list[int]]:
    """Forward count of each stage held by each device (one list entry per stage)."""
    held: list[list[int]] = [[] for _ in range(problem.devices)]
    for pipe in problem.pipes:
        for stage in pipe.stages:
            held[stage.device].append(len(pipe.microbatches))
    return held


def shape(devices: int, microbatches: int, placement: str) -> str:
    return f"P={devices} devices x M={microbatches} microbatches ({placement} placement)"


def _shape(problem: Problem) -> str:
    return shape(problem.devices, problem.microbatches, problem.placement)


def check_size(problem: Problem) -> None:
    """Refuse problems whose op list alone would not fit (every command builds it)."""
    check_op_count(op_count(problem), _shape(problem))


def check_op_count(ops: int, shape_text: str) -> None:
    """Refuse `ops` above MAX_OPS; also called from the bare numbers, before a problem exists."""
    if ops > MAX_OPS:
        raise SizeError(
            f"{shape_text} make {ops:,} ops; zbsolve handles at most {MAX_OPS:,} "
            f"(about 20 us and 0.6 KB each): use fewer microbatches (bubble rates settle once "
            f"M is a few times P) or fewer stages"
        )


def model_size(problem: Problem, solver: str) -> int:
    """What limits each backend: CP-SAT variables, or CBC ordering binaries."""
    held = _per_device(problem)
    if solver == "cbc":
        kinds = 3 if problem.split_backward else 2
        return sum((kinds * sum(c)) * (kinds * sum(c) - 1) // 2 for c in held)
    size = op_count(problem)
    if problem.fb_overlap is not None:  # one choice per F and backward of another stage
        size += sum(f * (sum(c) - f) for c in held for f in c)
    return size


def check_model_size(problem: Problem, solver: str) -> None:
    check_size(problem)
    size = model_size(problem, solver)
    limit = MAX_ORDERING_PAIRS if solver == "cbc" else MAX_MODEL_OPS
    if size <= limit:
        return
    what = "ordering pairs" if solver == "cbc" else (
        "ops and pair choices" if problem.fb_overlap is not None else "ops")
    hint = "use --solver cpsat, which scales further, or" if solver == "cbc" else "use"
    raise SizeError(
        f"{_shape(problem)} need a {solver} model of {size:,} {what}, above its limit of {limit:,}: "
        f"{hint} fewer microbatches (bubble rates settle once M is a few times P), or the "
        f"hand-made schedules (zbsolve compare --no-solve)"
    )
