"""The starting schedule as a complete solution hint.

CP-SAT takes a hint as its first solution only when every variable has a value. With only
the start times hinted, the 28.3B 1.25x model (9,216 ops) found no solution within 60 s
although the hint was one; the helper variables (memory interval sizes, pair ends, the
objective) are derived here from the hinted starts and pairs, as the model defines them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import Op
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView


@dataclass
class Hinted:
    start: dict[Op, int]
    end: dict[Op, int]  # when each op hands on its result: its own end, or its pair's
    paired: set[Op]  # F, B and BW ops that run in an overlapped pair


# How a helper variable's value follows from the hinted schedule, and the variables with theirs.
Rule = Callable[[Hinted], int]
Derived = list[tuple[cp_model.IntVar, Rule]]


def lasting(first: Op, last: Op) -> Rule:
    """From `first`'s start to `last`'s end."""
    return lambda h: h.end[last] - h.start[first]


def started_before(y: Op, x: Op) -> Rule:
    return lambda h: int(h.start[y] < h.start[x])


def ended_by(y: Op, x: Op) -> Rule:
    return lambda h: int(h.end[y] <= h.start[x])


def first_start(ops: list[Op]) -> Rule:
    return lambda h: min(h.start[op] for op in ops)


def last_end(ops: list[Op]) -> Rule:
    return lambda h: max(h.end[op] for op in ops)


def hinted(data: ProblemView, state: SearchState) -> Hinted:
    if state.hint is None:
        raise ValueError("no hint to complete")
    hint = state.hint
    paired = {op for pair in state.hint_pairs for op in pair}
    end = {}
    for op, start in hint.items():
        owner = op.with_kind("B") if op.kind == "W" else op
        if op in paired:
            end[op] = start + data.pair_length
        elif owner in paired:  # a W absorbed into its B's pair ends with the pair
            end[op] = hint[owner] + data.pair_length
        else:
            end[op] = start + data.duration[op]
    return Hinted(dict(hint), end, paired)


def add_hint(model: cp_model.CpModel, data: ProblemView, state: SearchState, start: dict, derived: Derived) -> None:
    schedule = hinted(data, state)
    for op, value in schedule.start.items():
        model.add_hint(start[op], value)
    for var, rule in derived:
        model.add_hint(var, rule(schedule))
