"""The MILP with the offload lever (docs/solving.md, "Memory levers"): the model of `model`
plus, for each forward, a binary o that sends its activation to host, the starts of its
copy to host O and back L (which count only where o is 1), each channel's copies one at a
time, and memory levels counted over time, since copies run beside compute.

A device's level can only rise where something allocates: at a forward's start and at a
reload's start. At each such moment the level is the device's allocations that started by
then less its releases that ended by then. For compute ops of one device that is the order
binaries; for a copy against a moment it is a binary of its own, either forced to 1 where
the event happened (an allocation: counting it can only raise the level) or allowed to be 1
only where it did (a release). Both levers together are refused (`__init__`).

The view is the problem's relaxation (with offload it holds no memory); `data.lever_graph`
is the problem itself, whose memory effects and limits these constraints use."""

from __future__ import annotations

from collections.abc import Callable

import pulp

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import Kind, kinds_of
from zbsolve.solvers.view import ProblemView

from .model import _Model

Hinted = Callable[[dict[Op, int]], int]  # a binary's value in a hinted schedule's starts


class OffloadModel(_Model):
    def __init__(self, data: ProblemView, horizon: int, bound: int) -> None:
        graph = data.lever_graph
        assert graph is not None and graph.problem.levers == ("offload",)
        self.graph = graph
        self.hinted: list[tuple[pulp.LpVariable, Hinted]] = []
        super().__init__(data, horizon, bound)
        self.bound_by_dependencies()
        self._copy_memory()

    def _disjunctions(self) -> None:
        super()._disjunctions()
        d, H, graph = self.data, self.horizon, self.graph
        self.backward = kinds_of(d.split)[1]  # B or BW: what waits for the reload
        self.forwards = [op for op in d.ops if op.kind == Kind.F.value]
        self.o = {f: pulp.LpVariable(f"o{self.index[f]}", cat="Binary") for f in self.forwards}
        self.out = {f: pulp.LpVariable(f"so{self.index[f]}", 0, H) for f in self.forwards}
        self.back = {f: pulp.LpVariable(f"sl{self.index[f]}", 0, H) for f in self.forwards}
        self.copy = {f: graph.duration(f.with_kind(Kind.O.value)) // d.unit for f in self.forwards}
        for f in self.forwards:
            off = H * (1 - self.o[f])
            self.prob += self.out[f] >= self.start[f] + d.duration[f] - off
            self.prob += self.back[f] >= self.out[f] + self.copy[f] - off
            self.prob += self.start[f.with_kind(self.backward)] >= self.back[f] + self.copy[f] - off
        for i, f in enumerate(self.forwards):  # each channel carries one copy at a time
            for g in self.forwards[i + 1:]:
                if graph.device(f) != graph.device(g):
                    continue
                both = H * (2 - self.o[f] - self.o[g])
                for name, starts in (("yo", self.out), ("yl", self.back)):
                    y = pulp.LpVariable(f"{name}{self.index[f]}_{self.index[g]}", cat="Binary")
                    self.prob += starts[g] >= starts[f] + self.copy[f] - H * (1 - y) - both
                    self.prob += starts[f] >= starts[g] + self.copy[g] - H * y - both
                    kind = Kind.O.value if name == "yo" else Kind.L.value
                    self.hinted.append((y, _earlier(f.with_kind(kind), g.with_kind(kind))))

    def _memory(self) -> None:
        """The view holds no memory: `_copy_memory` counts the problem's, once every
        variable exists."""

    def _copy_memory(self) -> None:
        graph = self.graph
        if graph.memory_limit is None:
            return
        for device, ops in enumerate(self.data.device_ops):
            forwards = [f for f in self.forwards if graph.device(f) == device]
            limit = graph.memory_limit[device]
            most = 2 * sum(graph.memory_effect(f)[0] for f in forwards)  # above any level reached
            for a in forwards:  # at each forward's start
                level = [graph.memory_effect(a)[0]]
                for g in ops:
                    allocated, released = graph.memory_effect(g)
                    if g != a and allocated != released:
                        level.append((allocated - released) * self.precedes(g, a))
                level += self._copies_by(forwards, self.start[a], a.with_kind("F"), skip=None)
                self.prob += pulp.lpSum(level) <= limit
            for a in forwards:  # at each reload's start, where a is offloaded
                moment, tag = self.back[a], a.with_kind("L")
                level = [graph.memory_effect(a)[0]]  # its F and O cancel; its L allocates
                for g in ops:
                    if g == a:
                        continue
                    allocated, released = graph.memory_effect(g)
                    if allocated:
                        level.append(allocated * self._forced(self.start[g], moment, g, tag))
                    if released:
                        level.append(-released * self._allowed(self.start[g] + self.data.duration[g], moment, g, tag))
                level += self._copies_by(forwards, moment, tag, skip=a)
                self.prob += pulp.lpSum(level) <= limit + most * (1 - self.o[a])

    def _copies_by(self, forwards: list[Op], moment, tag: Op, skip: Op | None) -> list:
        """What the device's copies changed by `moment`: each copy to host that ended frees its
        activation, each reload that started holds it again."""
        terms = []
        for g in forwards:
            if g in (skip, tag.with_kind("F")):
                continue
            amount = self.graph.memory_effect(g)[0]
            sent = self._allowed(self.out[g] + self.copy[g], moment, g.with_kind("O"), tag, self.o[g])
            back = self._forced(self.back[g], moment, g.with_kind("L"), tag, self.o[g])
            terms += [-amount * sent, amount * back]
        return terms

    def _forced(self, start, moment, op: Op, tag: Op, active=None) -> pulp.LpVariable:
        """A binary that must be 1 where `op` (active) started by `moment` (whole times: else
        it starts at least one unit later)."""
        z = pulp.LpVariable(f"u{len(self.hinted)}", cat="Binary")
        M = self.horizon + 1
        self.prob += start >= moment + 1 - M * z - (M * (1 - active) if active is not None else 0)
        if active is not None:
            self.prob += z <= active
        self.hinted.append((z, _by(op, 0, tag)))
        return z

    def _allowed(self, end, moment, op: Op, tag: Op, active=None) -> pulp.LpVariable:
        """A binary that may be 1 only where `op` (active) ended by `moment`."""
        z = pulp.LpVariable(f"v{len(self.hinted)}", cat="Binary")
        self.prob += end <= moment + self.horizon * (1 - z)
        if active is not None:
            self.prob += z <= active
        length = self.data.duration.get(op, 0) if op.kind not in ("O", "L") else self.copy[op.with_kind("F")]
        self.hinted.append((z, _by(op, length, tag)))
        return z

    def set_hint(self, hint: dict[Op, int]) -> None:
        plain = {op: hint.get(op, hint.get(op.with_kind(Kind.FO.value), 0)) for op in self.start}
        super().set_hint(plain)
        starts = dict(plain)
        for f in self.forwards:
            sent = f.with_kind(Kind.O.value) in hint
            self.o[f].setInitialValue(int(sent))
            out = hint.get(f.with_kind(Kind.O.value), plain[f] + self.data.duration[f])
            back = hint.get(f.with_kind(Kind.L.value), out + self.copy[f])
            self.out[f].setInitialValue(out)
            self.back[f].setInitialValue(back)
            starts[f.with_kind("F")] = plain[f]
            if sent:
                starts[f.with_kind("O")], starts[f.with_kind("L")] = out, back
        for var, value in self.hinted:
            var.setInitialValue(value(starts))

    def starts(self) -> dict[Op, int]:
        found: dict[Op, int] = {}
        for op, var in self.start.items():
            sent = op.kind == Kind.F.value and round(self.o[op].value() or 0) == 1
            found[op.with_kind(Kind.FO.value) if sent else op] = round(var.value())
            if sent:
                found[op.with_kind(Kind.O.value)] = round(self.out[op].value())
                found[op.with_kind(Kind.L.value)] = round(self.back[op].value())
        return found


def _earlier(a: Op, b: Op) -> Hinted:
    """1 where both copies ran in the hinted schedule and a started first."""
    return lambda s: int(a in s and b in s and s[a] < s[b])


def _by(op: Op, length: int, tag: Op) -> Hinted:
    """1 where both ran in the hinted schedule and `op` started (`length` 0) or ended by
    `tag`'s start."""
    return lambda s: int(op in s and tag in s and s[op] + length <= s[tag])
