"""One list-scheduling pass under one rule and one in-flight cap."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import TABLE, allocates
from zbsolve.solvers.view import ProblemView

from .rules import Rule

# A microbatch leaves a device's in-flight count once the backwards that produce its input
# gradient there (B or BW) have run.
BACKWARD = tuple(row.kind.value for row in TABLE.values() if "I" in row.produces)


@dataclass
class Layout:
    """What every pass needs and no pass changes (computed once per solve)."""

    chains: list[list[list[Op]]]  # per device: its chains (ordered ones are taken in order)
    ordered: list[list[bool]]
    entry_stage: dict[tuple[int, int], int]  # (device, pipe) -> first stage of the pipe there
    reserve: dict[tuple[int, int], int]  # (device, pipe) -> activation of one microbatch there
    device_reserves: list[dict[int, int]]  # per device: pipe -> the same activations, by device
    depth: dict[tuple[int, int], float]  # (device, pipe) -> stages to the pipe's end, per stage held
    backwards_held: dict[tuple[int, int], int]  # (device, pipe) -> backward ops per microbatch
    spare: list[int]  # per device: the largest activation of an F that does not bring a new microbatch
    entering: dict[Op, int]  # each pipe's first F's -> the microbatch's place in its pipe
    pace_unit: int  # the busiest device's work per microbatch place (no idle at all)


def layout(data: ProblemView) -> Layout:
    chains: list[list[list[Op]]] = [[] for _ in data.device_ops]
    ordered: list[list[bool]] = [[] for _ in data.device_ops]
    for chain in data.chains:
        d = data.graph.device(chain[0])
        chains[d].append(chain)
        ordered[d].append(data.ordered(chain))
    entry: dict[tuple[int, int], int] = {}  # (device, pipe) -> the stage a microbatch enters there
    reserve: dict[tuple[int, int], int] = {}
    count: dict[tuple[int, int], int] = {}
    for op in data.ops:
        if not allocates(op.kind) or op.microbatch != data.graph.problem.pipes[op.pipe].microbatches[0]:
            continue
        key = (data.graph.device(op), op.pipe)
        entry[key] = min(entry.get(key, op.stage), op.stage)
        reserve[key] = reserve.get(key, 0) + data.memory_effect[op][0]
        count[key] = count.get(key, 0) + 1
    stages = {q: len(pipe.stages) for q, pipe in enumerate(data.graph.problem.pipes)}
    depth = {key: (stages[key[1]] - entry[key]) / count[key] for key in entry}
    spare = [0] * len(data.device_ops)
    for op in data.ops:
        d = data.graph.device(op)
        if allocates(op.kind) and op.stage != entry[(d, op.pipe)]:
            spare[d] = max(spare[d], data.memory_effect[op][0])
    places = [{m: n for n, m in enumerate(pipe.microbatches)} for pipe in data.graph.problem.pipes]
    entering = {op: places[op.pipe][op.microbatch] for op in data.ops if not data.predecessors[op]}
    busiest = max(sum(data.duration[op] for op in ops) for ops in data.device_ops)
    pace_unit = max(1, busiest // max(len(p) for p in places))
    by_device: list[dict[int, int]] = [{} for _ in data.device_ops]
    for (d, q), activation in reserve.items():
        by_device[d][q] = activation
    return Layout(chains, ordered, entry, reserve, by_device, depth, count, spare, entering, pace_unit)


class ListRun:
    """`whole`: a microbatch entering a device reserves the activation of all its stages
    there, which cannot deadlock; otherwise each F takes only its own and a new microbatch
    must leave room for one later-stage F (unless `room` is off), which holds more
    microbatches in flight when memory is tight but may deadlock (the pass then reports
    itself incomplete). `pace`: microbatch n may not enter the pipe before (n - head) * pace
    (the first head + 1 enter at once), which keeps memory from filling up with
    microbatches that then wait on each other. `limit`: the per-device memory the pass
    holds to, the problem's own unless a tighter one is given. `across`: a microbatch
    entering its pipe reserves its activation on every device of the pipe at once; slow,
    but it cannot deadlock where a device cannot hold one microbatch of each of its pipes
    (two pipes may otherwise each fill a device the other needs next)."""

    def __init__(self, data: ProblemView, shared: Layout, stop: threading.Event, rule: Rule, cap: float | None,
                 whole: bool = True,
                 room: bool = True, pace: int | None = None, head: int = 0,
                 limit: list[int] | None = None, across: bool = False) -> None:
        self.data, self.rule, self.cap, self.whole = data, rule, cap, whole or across
        self.stop = stop  # set: the solve was interrupted
        self.room, self.pace, self.head, self.across = room, pace, head, across
        self.limit = data.memory_limit if limit is None else limit
        # earliest start of each pipe's first F's: computed once, `_ready` runs per candidate
        self.release = {} if pace is None else {op: pace * max(0, n - head) for op, n in shared.entering.items()}
        self.layout = shared
        devices = len(data.device_ops)
        self.starts: dict[Op, int] = {}
        self.ends: dict[Op, int] = {}
        self.pairs: list[tuple[Op, Op]] = []
        self.free = [0] * devices
        self.committed = [0] * devices
        self.inflight: dict[tuple[int, int], int] = {key: 0 for key in self.layout.entry_stage}
        self.admitted: dict[tuple[int, int], int] = {key: 0 for key in self.layout.entry_stage}
        self.pending: dict[tuple[int, int, int], int] = {}
        self.position = [[0] * len(c) for c in self.layout.chains]
        self.unordered = [[set(c) if not o else None for c, o in zip(cs, os)]
                          for cs, os in zip(self.layout.chains, self.layout.ordered)]
        self.complete = self._run()

    # --- the pass -------------------------------------------------------------------
    def _run(self) -> bool:
        devices = len(self.data.device_ops)
        options = [self._option(d) for d in range(devices)]
        remaining = len(self.data.ops)
        while remaining:
            if self.stop.is_set():
                return False
            ready = [(option[0], d) for d, option in enumerate(options) if option is not None]
            if not ready:
                return False  # every device waits on memory another device holds
            best = min(ready)[1]  # the earliest start; the lowest device among equals
            chosen = options[best]
            assert chosen is not None  # a device of `ready`
            start, slot = chosen
            remaining -= self._place(best, start, slot)
            # Across the pipe, a release here may admit a microbatch whose pipe starts elsewhere.
            touched = range(devices) if self.across else (
                {best} | {self.data.graph.device(s) for op in slot for s, _ in self.data.successors[op]})
            for d in touched:
                options[d] = self._option(d)
        return True

    def _candidates(self, d: int):
        for j, chain in enumerate(self.layout.chains[d]):
            pending = self.unordered[d][j]
            if pending is None:
                if self.position[d][j] < len(chain):
                    yield chain[self.position[d][j]]
            else:
                yield from pending

    def _option(self, d: int) -> tuple[int, tuple[Op, ...]] | None:
        """The earliest start on device d and the slot the rule picks for it."""
        ready: list[tuple[int, Op]] = []
        for op in self._candidates(d):
            r = self._ready(op)
            if r is None or (allocates(op.kind) and not self._admissible(d, op)):
                continue
            ready.append((max(r, self.free[d]), op))
        if not ready:
            return None
        t = min(r for r, _ in ready)
        now = [op for r, op in ready if r == t]
        key = self._key
        chosen = min(now, key=key)
        if self.rule.pairs and self.data.pair_duration is not None:
            partners = [op for op in now if self._may_pair(chosen, op) and self._saves(chosen, op)]
            if partners:
                return t, self._pair(chosen, min(partners, key=key))
            waited = self._partner_worth_waiting_for(chosen, t, ready)
            if waited is not None:
                return waited[0], self._pair(chosen, waited[1])
        return t, (chosen,)

    @staticmethod
    def _may_pair(a: Op, b: Op) -> bool:
        """An F and a backward of another stage."""
        return ((a.kind == "F") != (b.kind == "F") and "W" not in (a.kind, b.kind)
                and (a.pipe, a.stage) != (b.pipe, b.stage))

    @staticmethod
    def _pair(a: Op, b: Op) -> tuple[Op, Op]:
        return (a, b) if a.kind == "F" else (b, a)

    def _partner_worth_waiting_for(self, chosen: Op, t: int, ready: list[tuple[int, Op]]) -> tuple[int, Op] | None:
        """The earliest partner, ready after t, whose pair started when it is ready would
        end before the two ran one after the other from t (with the W a pair absorbs): the
        device then idles until the pair starts. Pairs of ops ready at one moment alone
        were rare, and left the list scheduler behind DualPipe's own schedule."""
        if chosen.kind == "W":
            return None
        serial = t + self.data.duration[chosen] + self._absorbed_length(chosen)
        worth = [(r, op) for r, op in ready if r > t and self._may_pair(chosen, op)
                 and r + self.data.pair_length < max(serial, r) + self.data.duration[op] + self._absorbed_length(op)]
        return min(worth, key=lambda item: (item[0], self._key(item[1])), default=None)

    def _key(self, op: Op) -> tuple:
        return self.rule.key(op, self.data.tail[op], op.microbatch)

    def _saves(self, a: Op, b: Op) -> bool:
        f, back = (a, b) if a.kind == "F" else (b, a)
        alone = self.data.duration[f] + self.data.duration[back] + self._absorbed_length(back)
        return self.data.pair_length < alone

    def _absorbed_length(self, back: Op) -> int:
        return self.data.duration[back.with_kind("W")] if back.kind == "B" else 0

    def _ready(self, op: Op) -> int | None:
        r = self.release.get(op, 0)
        for pred, delay in self.data.predecessors[op]:
            end = self.ends.get(pred)
            if end is None:
                return None
            r = max(r, end + delay)
        return r

    def _admissible(self, d: int, f: Op) -> bool:
        """An F that brings a new microbatch to this device must fit its whole activation
        here (later stages of it are then covered), keep room for one microbatch of every
        other pipe that has none here yet (so two pipes cannot lock each other out), and
        stay within the in-flight cap."""
        key = (d, f.pipe)
        limit = self.limit
        if self.across:
            if limit is None or f not in self.layout.entering:  # reserved when it entered the pipe
                return True
            return all(self.committed[e] + r <= limit[e] for (e, q), r in self.layout.reserve.items() if q == f.pipe)
        activation = self.data.memory_effect[f][0]
        if f.stage != self.layout.entry_stage[key]:
            return self.whole or limit is None or self.committed[d] + activation <= limit[d]
        if self.cap is not None and self.inflight[key] >= max(1, math.ceil(self.cap * self.layout.depth[key])):
            return False
        if limit is None:
            return True
        need = self.committed[d] + (self.layout.reserve[key] if self.whole
                                    else activation + (self.layout.spare[d] if self.room else 0))
        here = self.layout.device_reserves[d]
        others = [r for q, r in here.items() if q != f.pipe
                  and self.inflight[(d, q)] == 0 and self.admitted[(d, q)] < self._microbatches(q)]
        if others and sum(here.values()) <= limit[d]:
            need += sum(others)
        return need <= limit[d]

    def _microbatches(self, pipe: int) -> int:
        return len(self.data.graph.problem.pipes[pipe].microbatches)

    def _place(self, d: int, start: int, slot: tuple[Op, ...]) -> int:
        data = self.data
        length = data.pair_length if len(slot) == 2 else data.duration[slot[0]]
        end = start + length
        placed = list(slot)
        if len(slot) == 2:
            self.pairs.append(slot)
            if slot[1].kind == "B":  # the pair absorbs this microbatch's W
                w = slot[1].with_kind("W")
                placed.append(w)
        for op in placed:
            self.starts[op], self.ends[op] = start, end
            self._advance(d, op)
            self._account(d, op)
        self.free[d] = end
        return len(placed)

    def _advance(self, d: int, op: Op) -> None:
        for j, chain in enumerate(self.layout.chains[d]):
            if (chain[0].kind, chain[0].pipe, chain[0].stage) != (op.kind, op.pipe, op.stage):
                continue
            pending = self.unordered[d][j]
            if pending is None:
                self.position[d][j] += 1
            else:
                pending.discard(op)
            return

    def _account(self, d: int, op: Op) -> None:
        key = (d, op.pipe)
        entering = allocates(op.kind) and op.stage == self.layout.entry_stage[key]
        if self.across:
            if op in self.layout.entering:  # its activation on every device of the pipe, reserved at once
                for (e, q), r in self.layout.reserve.items():
                    if q == op.pipe:
                        self.committed[e] += r
        elif allocates(op.kind) and not self.whole:
            self.committed[d] += self.data.memory_effect[op][0]
        elif entering:  # the whole microbatch's activation here, reserved at once
            self.committed[d] += self.layout.reserve[key]
        if entering:
            self.inflight[key] += 1
            self.admitted[key] += 1
            self.pending[(d, op.pipe, op.microbatch)] = self.layout.backwards_held[key]
        self.committed[d] -= self.data.memory_effect[op][1]
        if op.kind in BACKWARD:
            mb = (d, op.pipe, op.microbatch)
            self.pending[mb] -= 1
            if self.pending[mb] == 0:
                self.inflight[key] -= 1

    # --- results ----------------------------------------------------------------------
    def objective(self) -> int:
        return self.data.objective_of(self.starts, self.ends)
