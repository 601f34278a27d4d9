"""The MILP with the recompute lever (docs/solving.md, "Memory levers"): the model of `model`
plus, for each forward, a binary x that chooses recomputation, the start of its R (which
counts only where x is 1), R's order against the device's other ops, and memory levels that
follow the choices. Products of a choice and an order binary are linearised exactly.

The view is the problem's relaxation; `data.lever_graph` is the problem itself."""

from __future__ import annotations

from typing import Any

import pulp

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import Kind, kinds_of
from zbsolve.solvers.view import ProblemView

from .model import _Model

Order = Any  # 0 or 1, an ordering binary, or 1 minus one: whether one op runs before another


class LeverModel(_Model):
    def __init__(self, data: ProblemView, horizon: int, bound: int) -> None:
        graph = data.lever_graph
        assert graph is not None
        self.graph = graph
        self.products = 0  # linearised products made
        super().__init__(data, horizon, bound)
        self.bound_by_dependencies()

    def _disjunctions(self) -> None:
        super()._disjunctions()
        d, H, graph = self.data, self.horizon, self.graph
        self.backward = backward = kinds_of(d.split)[1]  # B or BW: what waits for the activation
        self.forwards = [op for op in d.ops if op.kind == Kind.F.value]
        self.x = {f: pulp.LpVariable(f"x{self.index[f]}", cat="Binary") for f in self.forwards}
        self.r = {f: pulp.LpVariable(f"r{self.index[f]}", 0, H) for f in self.forwards}
        self.length = {f: graph.duration(f.with_kind(Kind.R.value)) // d.unit for f in self.forwards}
        self.r_order: dict[tuple[Op, Op], Order] = {}  # (R's forward, op or R's forward): 1 if R first
        for f in self.forwards:
            x, r, n = self.x[f], self.r[f], self.length[f]
            b = f.with_kind(backward)
            self.prob += r >= self.start[f] + d.duration[f] - H * (1 - x)
            self.prob += self.start[b] >= r + n - H * (1 - x)
            for g in d.device_ops[graph.device(f)]:
                if self._r_fixed(f, g) is not None:
                    continue
                y = pulp.LpVariable(f"yr{self.index[f]}_{self.index[g]}", cat="Binary")
                self.r_order[(f, g)] = y
                self.prob += self.start[g] >= r + n - H * (1 - y) - H * (1 - x)
                self.prob += r >= self.start[g] + d.duration[g] - H * y - H * (1 - x)
        for i, f in enumerate(self.forwards):
            for g in self.forwards[i + 1:]:
                if graph.device(f) != graph.device(g):
                    continue
                y = pulp.LpVariable(f"yrr{self.index[f]}_{self.index[g]}", cat="Binary")
                self.r_order[(f, g.with_kind(Kind.R.value))] = y
                both = 2 - self.x[f] - self.x[g]
                self.prob += self.r[g] >= self.r[f] + self.length[f] - H * (1 - y) - H * both
                self.prob += self.r[f] >= self.r[g] + self.length[g] - H * y - H * both

    def _r_fixed(self, f: Op, g: Op) -> int | None:
        """1 if f's R surely runs before op g, 0 if surely after, None if open: R runs after
        its forward and before its backward, so their ancestors and descendants are fixed."""
        b = f.with_kind(self.backward)
        if g == f or self.ancestors[f] >> self.index[g] & 1:
            return 0
        if g == b or self.ancestors[g] >> self.index[b] & 1:
            return 1
        return None

    def _r_before(self, f: Op, g: Op) -> Order:
        """1 if f's R runs before op g (an R is named by its own kind)."""
        if g.kind == Kind.R.value:
            own = g.with_kind(Kind.F.value)
            if (f, g) in self.r_order:
                return self.r_order[(f, g)]
            return 1 - self.r_order[(own, f.with_kind(Kind.R.value))]
        fixed = self._r_fixed(f, g)
        return fixed if fixed is not None else self.r_order[(f, g)]

    def _before_r(self, g: Op, f: Op) -> Order:
        """1 if op g (F, B, W or BW) runs before f's R."""
        fixed = self._r_fixed(f, g)
        return 1 - fixed if fixed is not None else 1 - self.r_order[(f, g)]

    def _times(self, x: pulp.LpVariable, p: Order, sign: int) -> Order:
        """x times a 0/1 expression p (constant, binary, or 1 - binary), exact where the
        constraint it enters pushes it (`sign` > 0: towards 0, so only its lower bounds)."""
        if isinstance(p, int):
            return x if p else 0
        z = pulp.LpVariable(f"z{self.products}", 0, 1)
        self.products += 1
        if sign > 0:
            self.prob += z >= x + p - 1
        else:
            self.prob += z <= x
            self.prob += z <= p
        return z

    def _memory(self) -> None:
        d, graph = self.data, self.graph
        for device, ops in enumerate(d.device_ops):
            limit = graph.memory_limit[device] if graph.memory_limit is not None else None
            if limit is None:
                continue
            forwards = [f for f in self.forwards if graph.device(f) == device]
            most = 2 * sum(self._amounts(f)[0] for f in forwards)  # above any level the device can reach
            for f in forwards:  # the level once each forward has started, and each R
                a, c = self._amounts(f)
                level = a - (a - c) * self.x[f] + self._held(ops, forwards, lambda g, f=f: self.precedes(g, f),
                                                              lambda h, f=f: self._r_before(h, f), skip=f)
                self.prob += level <= limit
                before = self._held(ops, forwards, lambda g, f=f: self._before_r(g, f),
                                    lambda h, f=f: self._r_before(h, f.with_kind(Kind.R.value)), skip=f,
                                    as_checkpoint=True)
                self.prob += (a - c) + before <= limit + most * (1 - self.x[f])

    def _amounts(self, f: Op) -> tuple[int, int]:
        activation, _, checkpoint = self.graph.stage_memory(f.pipe, f.stage)
        return activation, checkpoint

    def _held(self, ops: list[Op], forwards: list[Op], first, r_first, skip: Op, as_checkpoint: bool = False):
        """What the device holds from the ops that ran before a moment: each F (its
        activation, or its checkpoint where recomputed), each R run, each release. `first(g)`
        says whether op g ran before it, `r_first(h)` whether h's R did; `skip`: the forward
        whose start (or R's start) the moment is, counted as its checkpoint when `as_checkpoint`
        (an R runs after its FC)."""
        terms = []
        for g in ops:
            if g == skip:
                if as_checkpoint:
                    terms.append(self._amounts(g)[1])
                continue
            p = first(g)
            allocated, released = self.graph.memory_effect(g)
            if g.kind == Kind.F.value:
                a, c = self._amounts(g)
                terms.append(a * p - (a - c) * self._times(self.x[g], p, -1))
            elif allocated - released:
                terms.append((allocated - released) * p)
        for h in forwards:
            if h == skip:
                continue
            a, c = self._amounts(h)
            if a > c:
                terms.append((a - c) * self._times(self.x[h], r_first(h), +1))
        return pulp.lpSum(terms)

    def set_hint(self, hint: dict[Op, int]) -> None:
        plain = {op: hint.get(op, hint.get(op.with_kind(Kind.FC.value), 0)) for op in self.start}
        super().set_hint(plain)
        for f in self.forwards:
            r = hint.get(f.with_kind(Kind.R.value))
            self.x[f].setInitialValue(1 if r is not None else 0)
            self.r[f].setInitialValue(r if r is not None else plain[f] + self.data.duration[f])
        for (f, g), y in self.r_order.items():
            r = hint.get(f.with_kind(Kind.R.value))
            other = hint.get(g) if g.kind == Kind.R.value else plain[g]
            if isinstance(y, pulp.LpVariable):
                y.setInitialValue(1 if r is not None and other is not None and r < other else 0)

    def starts(self) -> dict[Op, int]:
        found: dict[Op, int] = {}
        for op, var in self.start.items():
            recomputes = op.kind == Kind.F.value and round(self.x[op].value() or 0) == 1
            found[op.with_kind(Kind.FC.value) if recomputes else op] = round(var.value())
            if recomputes:
                found[op.with_kind(Kind.R.value)] = round(self.r[op].value())
        return found
