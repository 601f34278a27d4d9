"""Optional overlapped F&B pairs for the CP-SAT model (docs/design.md, "F&B overlap").

A pair runs one F and one full backward of another stage on the same device, both
starting together and both ending `pair_duration` later. Only F&BW pairs are offered: in
split mode the B's own W is absorbed into the pair. Pairing F with a bare B and running
its W later is never better, since the pair lasts the same, W must still run, and its
residual would be held longer.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import Op
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView


class Pairs:
    def __init__(self, model: cp_model.CpModel, data: ProblemView, start: dict, derived: list, state: SearchState,
                 devices: Collection[int] | None = None, within: int | None = None) -> None:
        """Pairs on `devices` (all by default: a relaxation keeps only some). With `within`
        (solver units) and a hint, only an F and a backward that the hint starts at most that
        far apart, or pairs, may pair: a restriction for searches whose proofs are not used."""
        self.data, self.state, self.horizon = data, state, state.horizon
        self.derived = derived  # helper variables, each with its value under a hinted schedule
        self.literal: dict[tuple[Op, Op], cp_model.IntVar] = {}
        self.intervals: list[list] = [[] for _ in data.device_ops]
        member: dict[Op, list] = {}
        length = data.pair_length
        for d, ops in enumerate(data.device_ops):
            if devices is not None and d not in devices:
                continue
            forwards = [op for op in ops if op.kind == "F"]
            backwards = [op for op in ops if op.kind in ("B", "BW")]
            for f in forwards:
                for b in backwards:
                    if (f.pipe, f.stage) == (b.pipe, b.stage) or not self._may_meet(f, b):
                        continue
                    if within is not None and not self._near(f, b, within):
                        continue
                    x = model.new_bool_var(f"pair{f}_{b}")
                    model.add(start[f] == start[b]).OnlyEnforceIf(x)
                    interval = model.new_optional_fixed_size_interval_var(start[f], length, x, f"ip{f}_{b}")
                    self.intervals[d].append(interval)
                    self.literal[(f, b)] = x
                    member.setdefault(f, []).append(x)
                    member.setdefault(b, []).append(x)
        self.paired: dict[Op, cp_model.LinearExpr | int] = {}
        self._alone: dict[Op, cp_model.IntVar] = {}
        for op, literals in member.items():
            model.add_at_most_one(literals)
            self.paired[op] = sum(literals)

    def _may_meet(self, f: Op, b: Op) -> bool:
        """Both halves start together: their start windows must intersect."""
        data = self.data
        latest = min(self.horizon - data.tail[f], self.horizon - data.tail[b])
        return max(data.head[f], data.head[b]) <= latest

    def _near(self, f: Op, b: Op, within: int) -> bool:
        hint = self.state.hint
        return not hint or (f, b) in self.state.hint_pairs or abs(hint[f] - hint[b]) <= within

    def alone(self, model: cp_model.CpModel, op: Op) -> Literal[True] | cp_model.IntVar:
        """A literal true when `op` runs by itself (for W: when its B is not paired)."""
        owner = op.with_kind("B") if op.kind == "W" else op
        if owner not in self.paired:
            return True
        if owner not in self._alone:
            literal = model.new_bool_var(f"alone{owner}")
            model.add(self.paired[owner] == 0).OnlyEnforceIf(literal)
            model.add(self.paired[owner] == 1).OnlyEnforceIf(literal.Not())
            self.derived.append((literal, lambda h: int(owner not in h.paired)))
            self._alone[owner] = literal
        return self._alone[owner]

    def end(self, model: cp_model.CpModel, op: Op, start):
        """When F, B or BW hands on its result: its own end, or the pair's."""
        duration = self.data.duration[op]
        if op not in self.paired:
            return start + duration
        end = model.new_int_var(0, 2 * self.horizon, f"e{op}")  # a variable: intervals need affine ends
        model.add(end == start + duration + (self.data.pair_length - duration) * self.paired[op])
        self.derived.append((end, lambda h: h.end[op]))
        return end

    def chosen(self, solver: cp_model.CpSolver) -> list[tuple[Op, Op]]:
        return [pair for pair, x in self.literal.items() if solver.BooleanValue(x)]

    def hint(self, model: cp_model.CpModel, pairs: set[tuple[Op, Op]]) -> None:
        for pair, x in self.literal.items():
            model.add_hint(x, pair in pairs)


def occupancy(model: cp_model.CpModel, data: ProblemView, start: dict, pairs: Pairs | None, derived: list,
              horizon: int, devices: Collection[int] | None = None) -> tuple[dict, list[list]]:
    """Each op's end (when its result is ready) and the intervals that occupy each device,
    for the ops of `devices` (all by default; the others' lists stay empty)."""
    end: dict[Op, cp_model.LinearExprT] = {}
    device_intervals: list[list[cp_model.IntervalVar]] = [[] for _ in data.device_ops]
    for d, ops in enumerate(data.device_ops):
        if devices is not None and d not in devices:
            continue
        for op in sorted(ops, key=lambda op: op.kind == "W"):  # a W's end may follow its B's
            duration, name = data.duration[op], str(op)
            alone: Literal[True] | cp_model.IntVar = True if pairs is None else pairs.alone(model, op)
            if alone is True or pairs is None:
                device_intervals[d].append(model.new_fixed_size_interval_var(start[op], duration, f"i{name}"))
                end[op] = start[op] + duration
                continue
            device_intervals[d].append(
                model.new_optional_fixed_size_interval_var(start[op], duration, alone, f"i{name}")
            )
            if op.kind != "W":
                end[op] = pairs.end(model, op, start[op])
                continue
            done = model.new_int_var(0, horizon, f"done{name}")  # an absorbed W ends with its pair
            model.add(done == start[op] + duration).OnlyEnforceIf(alone)
            model.add(done == end[op.with_kind("B")]).OnlyEnforceIf(alone.Not())
            derived.append((done, lambda h, op=op: h.end[op]))
            end[op] = done
        if pairs is not None:
            device_intervals[d].extend(pairs.intervals[d])
    return end, device_intervals
