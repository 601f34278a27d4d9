"""Priority rules: which ready op a device starts. Lower keys go first."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zbsolve.problem.op_graph import Op

KIND_ORDER = {
    "backward first": {"B": 0, "BW": 0, "F": 1, "W": 2},  # ZB-H1/H2-like: W fills gaps
    "forward first": {"F": 0, "B": 1, "BW": 1, "W": 2},  # GPipe-like within the caps
    "weights early": {"B": 0, "BW": 0, "W": 1, "F": 2},  # 1F1B-like: W right after B
}


@dataclass(frozen=True)
class Rule:
    name: str
    key: Callable[[Op, int, int], tuple]  # (op, its tail, its microbatch position) -> sort key
    pairs: bool = True  # run an F and a backward of another stage as one overlapped pair


def _by_kind(order: dict[str, int]) -> Callable[[Op, int, int], tuple]:
    return lambda op, tail, position: (order[op.kind], position, -tail)


def _critical(op: Op, tail: int, position: int) -> tuple:
    return (-tail, position)


RULES = (
    Rule("backward first", _by_kind(KIND_ORDER["backward first"])),
    Rule("critical path", _critical),
    Rule("forward first", _by_kind(KIND_ORDER["forward first"])),
    Rule("weights early", _by_kind(KIND_ORDER["weights early"])),
    Rule("backward first, no pairs", _by_kind(KIND_ORDER["backward first"]), pairs=False),
)
