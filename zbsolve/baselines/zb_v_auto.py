"""The Zero Bubble authors' ZB-V greedy (Qi et al. 2024, the automatic V schedule), written
from the paper and its public description, at the problem's memory limit.

V-shape placement, split backward: rank r holds stage r (chunk 0, going down) and stage
2P - 1 - r (chunk 1, coming back). Warm-up: chunk 0's first forward runs down the pipe;
from the last rank up, each rank takes as many more chunk-0 forwards as its memory keeps
room for and as fit before chunk 1's first forward reaches it; then ranks catch up so no
rank has fewer forwards than the one before. Steady state, 2M rounds: each rank runs one
input gradient (B; chunk 1 first unless chunk 0's input is already there), then one
forward (the chunk whose input is there, chunk 0 when both are level). Weight gradients
(W) fill waits for input, make room when memory is full, and run last. Two switches
(whether a W may fill a wait longer than the rank's share of idle before an F, before a
B) give four passes; each is rerun once more with the idle it measured as allowance, and
the best by the problem's objective within the memory limit is kept.
"""

from __future__ import annotations

from collections import deque
from functools import lru_cache
from itertools import product

from zbsolve.errors import ScheduleError
from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import change
from zbsolve.problem.problem import Problem
from zbsolve.schedule.simulator import simulate


class _StuckError(Exception):
    """The pass cannot go on: memory is full with no W left, or an input never came."""


class _VPass:
    def __init__(self, problem: Problem, fill_f: bool, fill_b: bool, allowance: list[float] | None) -> None:
        P = self.P = problem.devices
        self.M = problem.microbatches
        pipe = problem.pipes[0]
        self.mbs = list(pipe.microbatches)
        costs = [problem.stage_costs[s.cost] for s in pipe.stages]
        self.cost = {"F": [c.F for c in costs], "B": [c.B for c in costs], "W": [c.W for c in costs]}
        self.memory = {kind: [change(kind, c.activation, c.residual, c.checkpoint) for c in costs] for kind in "FBW"}
        self.device = [s.device for s in pipe.stages]
        self.comm = problem.comm
        self.limit = (list(problem.memory_limit) if problem.memory_limit is not None
                      else [float("inf")] * P)
        self.fill_f, self.fill_b = fill_f, fill_b
        self.allowance = allowance or [0.0] * P
        self.count = {kind: [0] * (2 * P) for kind in "FBW"}
        self.ends: dict[tuple[str, int, int], float] = {}
        self.free = [0.0] * P
        self.held = [0.0] * P
        self.idle = [0.0] * P
        self.pending_w: list[deque[int]] = [deque() for _ in range(P)]
        self.orders: list[list[Op]] = [[] for _ in range(P)]

    def stage(self, rank: int, chunk: int) -> int:
        return rank if chunk == 0 else 2 * self.P - 1 - rank

    def arrival(self, kind: str, s: int) -> float | None:
        """When the input of stage s's next `kind` is there; None if its producer has not run."""
        i = self.count[kind][s]
        if kind == "W":
            return self.ends.get(("B", s, i))
        if kind == "F":
            if s == 0:
                return 0.0
            producer = ("F", s - 1, i)
        else:
            producer = ("F", s, i) if s == 2 * self.P - 1 else ("B", s + 1, i)
        end = self.ends.get(producer)
        if end is None:
            return None
        return end + (0.0 if self.device[producer[1]] == self.device[s] else self.comm)

    def put(self, kind: str, s: int) -> None:
        ready = self.arrival(kind, s)
        if ready is None or self.count[kind][s] >= self.M:
            raise _StuckError
        r, i = self.device[s], self.count[kind][s]
        unhindered = self.free[r] + self.cost[kind][s]
        end = max(unhindered, ready + self.cost[kind][s])
        if any(self.count["F"][self.stage(r, c)] for c in (0, 1)):
            self.idle[r] += end - unhindered
        self.free[r] = end
        self.ends[(kind, s, i)] = end
        self.held[r] += self.memory[kind][s]
        self.count[kind][s] += 1
        self.orders[r].append(Op(kind, 0, s, self.mbs[i]))
        if kind == "B":
            self.pending_w[r].append(s)

    def put_w(self, r: int) -> None:
        self.put("W", self.pending_w[r].popleft())

    def make_room(self, r: int, amount: float) -> None:
        while self.held[r] + amount > self.limit[r] + 1e-12:
            if not self.pending_w[r]:
                raise _StuckError
            self.put_w(r)

    def fill_wait(self, r: int, ready: float, fill_long_wait: bool) -> None:
        """W's that end before the next op's input arrives; one more where the wait left is
        longer than this rank's share of idle, if the switch allows."""
        while self.pending_w[r] and self.free[r] + self.cost["W"][self.pending_w[r][0]] <= ready:
            self.put_w(r)
        share = max(max(self.idle), max(self.allowance) - self.allowance[r]) - self.idle[r]
        if self.pending_w[r] and ready - self.free[r] > share and fill_long_wait:
            self.put_w(r)

    def warm_up(self) -> None:
        P, M, F = self.P, self.M, self.count["F"]
        for r in range(P):
            self.put("F", r)
        for r in range(P - 1, -1, -1):
            back = self.stage(r, 1)
            if r < P - 1:
                comes = self.ends[("F", back - 1, 0)] + self.comm
                act = self.memory["F"][r]
                while (self.held[r] + act * (2 + 2 * r) <= self.limit[r] + 1e-12
                       and self.free[r] + self.cost["F"][r] <= comes and F[r] < M):
                    for j in range(r + 1):
                        if F[j] < M:
                            self.put("F", j)
            self.put("F", back)
        chunk, idle_turns = 0, 0
        for r in range(1, P):
            while idle_turns < 2 and (F[r] + F[self.stage(r, 1)] < F[r - 1] + F[self.stage(r - 1, 1)]
                                      or F[self.stage(r, 1)] <= F[self.stage(r - 1, 1)] < M):
                idle_turns += 1  # both chunks tried and nothing could run: catch-up is over
                for j in range(P - 1, r - 1, -1):
                    s = self.stage(j, chunk)
                    room = self.held[j] + self.memory["F"][s] <= self.limit[j] + 1e-12
                    if F[s] < M and room and self.arrival("F", s) is not None:
                        self.put("F", s)
                        idle_turns = 0
                chunk = 1 - chunk
            idle_turns = 0

    def backward_round(self) -> None:
        P, B = self.P, self.count["B"]
        down, up = [], []  # chunk 1's B runs ranks 0..P-1, chunk 0's P-1..0
        for r in range(P):
            first, second = self.stage(r, 1), self.stage(r, 0)
            if B[second] >= B[first]:
                down.append(r)
            elif r == P - 1 or B[first] >= self.M or self.arrival("B", second) is not None:
                up.append(r)
            else:
                down.append(r)
        for r, chunk in [(r, 0) for r in reversed(up)] + [(r, 1) for r in down]:
            s = self.stage(r, chunk)
            if B[s] >= self.M or self.count["F"][s] <= B[s]:
                continue
            ready = self.arrival("B", s)
            if ready is None:  # its input waits on a rank that ran the other chunk this round
                continue
            self.make_room(r, self.memory["B"][s])
            self.fill_wait(r, ready, chunk == 0 or self.fill_b)
            self.put("B", s)

    def forward_round(self) -> None:
        P, M, F = self.P, self.M, self.count["F"]
        for r in range(P):
            there, back = self.stage(r, 0), self.stage(r, 1)
            if F[back] >= M:
                continue
            if F[back] >= F[there]:
                s = there
            elif r == P - 1 or self.arrival("F", back) is not None:
                s = back
            elif F[there] < M and self.arrival("F", there) is not None:
                s = there
            else:
                continue
            ready = self.arrival("F", s)
            freeable = sum(self.memory["W"][w] for w in self.pending_w[r])
            if F[s] >= M or ready is None or self.held[r] + freeable + self.memory["F"][s] > self.limit[r] + 1e-12:
                continue  # its input is not there, or no room until a B runs
            self.make_room(r, self.memory["F"][s])
            self.fill_wait(r, ready, self.fill_f)
            self.put("F", s)

    def run(self) -> list[list[Op]]:
        self.warm_up()
        done = -1
        while done < (done := len(self.ends)):  # rounds until one places nothing
            self.backward_round()
            self.forward_round()
        for r in range(self.P):
            while self.pending_w[r]:
                self.put_w(r)
        if any(n < self.M for kind in "FBW" for n in self.count[kind]):
            raise _StuckError
        return self.orders


@lru_cache(maxsize=16)
def _best(problem: Problem) -> tuple[tuple[Op, ...], ...] | None:
    """The best pass by the problem's objective among those within the memory limit."""
    best = None
    for fill_f, fill_b in product((True, False), repeat=2):
        allowance = None
        for _ in range(2):
            run = _VPass(problem, fill_f, fill_b, allowance)
            try:
                orders = run.run()
                schedule = simulate(problem, orders, "zb-v-auto")
            except (_StuckError, ScheduleError):
                break
            if not schedule.over_memory_limit() and (best is None or schedule.value < best[0]):
                best = (schedule.value, tuple(tuple(order) for order in orders))
            allowance = run.idle
    return None if best is None else best[1]


def zb_v_auto(problem: Problem) -> list[list[Op]]:
    orders = _best(problem)
    if orders is None:
        raise ScheduleError("the ZB-V greedy found no order within the memory limit")
    return [list(order) for order in orders]


def zb_v_auto_fits(problem: Problem) -> str | None:
    """Why the greedy has no schedule for the problem, or None."""
    if _best(problem) is None:
        return "finds no order within the memory limit"
    return None
