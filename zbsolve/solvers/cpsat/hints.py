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


# A helper variable and how its value follows from the hinted schedule.
Derived = list[tuple[cp_model.IntVar, Callable[[Hinted], int]]]


def hinted(data: ProblemView, state: SearchState) -> Hinted:
    paired = {op for pair in state.hint_pairs for op in pair}
    end = {}
    for op, start in state.hint.items():
        owner = op.with_kind("B") if op.kind == "W" else op
        if op in paired:
            end[op] = start + data.pair_duration
        elif owner in paired:  # a W absorbed into its B's pair ends with the pair
            end[op] = state.hint[owner] + data.pair_duration
        else:
            end[op] = start + data.duration[op]
    return Hinted(dict(state.hint), end, paired)


def add_hint(model: cp_model.CpModel, data: ProblemView, state: SearchState, start: dict, derived: Derived) -> None:
    schedule = hinted(data, state)
    for op, value in schedule.start.items():
        model.AddHint(start[op], value)
    for var, value in derived:
        model.AddHint(var, value(schedule))
