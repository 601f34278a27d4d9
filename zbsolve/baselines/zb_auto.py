"""The Zero Bubble authors' automatic greedy (Qi et al. 2024, section 3: ZB-1p at 1F1B's
memory, ZB-2p at twice it), written from the paper and its public description.

One stage per rank, split backward. Microbatch 0 runs down the pipe; each rank then takes
as many extra forwards as its memory holds and as fit before the first backward reaches it
(fewer than the rank before it). After that, microbatch by microbatch: a forward on every
rank that still has one (a rank runs no more forwards than the next one down, and with
`prefer_b` a rank two forwards ahead of the next one may leave its forward for later),
then the input gradients from the last rank back. Weight gradients (W) fill the wait
before an op whose input has not arrived, make room when memory is full, and run last.
Three switches give eight passes; the best by the problem's objective is kept.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import product

from zbsolve.errors import ScheduleError
from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import change
from zbsolve.problem.problem import Problem
from zbsolve.schedule.simulator import simulate


class _NoRoomError(Exception):
    """Memory is full and no W is left to free any: the pass cannot go on."""


class _Pass:
    def __init__(self, problem: Problem, bubble_before_first_b: bool, prefer_b: bool, fill_gaps: bool) -> None:
        self.P, self.M = problem.devices, problem.microbatches
        self.mbs = list(problem.pipes[0].microbatches)
        costs = [problem.stage_costs[s.cost] for s in problem.pipes[0].stages]
        self.f, self.b, self.w = [c.F for c in costs], [c.B for c in costs], [c.W for c in costs]
        self.act, self.res = [c.activation for c in costs], [c.residual for c in costs]
        self.comm = problem.comm
        self.limit = (list(problem.memory_limit) if problem.memory_limit is not None
                      else [3 * self.M * a + 1.0 for a in self.act])
        self.bubble_before_first_b, self.prefer_b, self.fill_gaps = bubble_before_first_b, prefer_b, fill_gaps
        P = self.P
        self.count = {kind: [0] * P for kind in "FBW"}
        self.free = [0.0] * P  # when each rank's last op ends
        self.held = [0.0] * P
        self.idle = [0.0] * P  # waiting for inputs, after the rank's first forward
        self.ends = {kind: [[0.0] * self.M for _ in range(P)] for kind in "FB"}
        self.orders: list[list[Op]] = [[] for _ in range(P)]

    def put(self, j: int, kind: str) -> None:
        i = self.count[kind][j]
        cost = {"F": self.f, "B": self.b, "W": self.w}[kind][j]
        unhindered = self.free[j] + cost
        end = unhindered
        if kind == "F" and j > 0:
            end = max(end, self.ends["F"][j - 1][i] + self.comm + cost)
        if kind == "B" and j < self.P - 1:
            end = max(end, self.ends["B"][j + 1][i] + self.comm + cost)
        if self.count["F"][j] > 0:
            self.idle[j] += end - unhindered
        self.free[j] = end
        if kind in "FB":
            self.ends[kind][j][i] = end
        self.held[j] += change(kind, self.act[j], self.res[j], 0.0)
        self.count[kind][j] += 1
        self.orders[j].append(Op(kind, 0, j, self.mbs[i]))

    def spare_idle(self, j: int) -> float:
        return max(self.idle) - self.idle[j]

    def fill_before(self, j: int, ready: float) -> None:
        """W's that end before an op's input arrives at `ready`; one more where the wait
        left is longer than this rank's share of idle (or always, with `fill_gaps`)."""
        count, w = self.count, self.w[j]
        while count["W"][j] < count["B"][j] and self.free[j] + w <= ready:
            self.put(j, "W")
        if count["W"][j] < count["B"][j] and self.free[j] < ready:
            if self.fill_gaps or ready - self.free[j] > self.spare_idle(j):
                self.put(j, "W")

    def make_room(self, j: int, amount: float) -> None:
        while self.held[j] + amount > self.limit[j] + 1e-12:
            if self.count["W"][j] >= self.count["B"][j]:
                raise _NoRoomError
            self.put(j, "W")

    def warm_up(self) -> None:
        P, M = self.P, self.M
        for j in range(P):
            self.make_room(j, self.act[j])
            self.put(j, "F")
        extra = [0] * P
        arrives = self.ends["F"][P - 1][0] + self.b[P - 1]  # the first B leaves the last rank
        for j in range(P - 2, -1, -1):
            held, busy = self.held[j], self.free[j]
            while self.count["F"][j] + extra[j] < M and held + self.act[j] <= self.limit[j] + 1e-12:
                if self.bubble_before_first_b and busy + self.f[j] > arrives + self.comm:
                    break
                if not self.bubble_before_first_b and busy >= arrives + self.comm:
                    break
                held += self.act[j]
                busy += self.f[j]
                extra[j] += 1
            arrives = max(busy, arrives + self.comm) + self.b[j]
        for j in range(1, P):  # each rank fewer than the one before it, room allowing
            while 0 < extra[j] >= extra[j - 1] and self.count["F"][j] + extra[j] < M:
                extra[j] -= 1
        for j in range(P):
            for _ in range(extra[j]):
                self.put(j, "F")
        for j in range(P - 1, -1, -1):
            self.put(j, "B")

    def wants_forward(self, j: int) -> bool:
        count = self.count
        if count["F"][j] >= self.M:
            return False
        if not (self.prefer_b and j + 1 < self.P and count["F"][j] >= count["F"][j + 1] + 2):
            return True
        # Two forwards ahead of the next rank: its next F and B bound when this one is needed.
        needed = self.free[j + 1] + self.f[j + 1] + self.b[j + 1] + self.comm
        if self.free[j] >= needed:
            return False
        room, w_time, k = self.held[j] + self.act[j], 0.0, 0
        while room > self.limit[j] + 1e-12 and count["W"][j] + k < count["B"][j]:
            room -= self.res[j]
            w_time += self.w[j]
            k += 1
        if self.free[j] + self.f[j] + w_time <= needed:
            return True
        return needed - self.free[j] > self.spare_idle(j)

    def run(self) -> list[list[Op]]:
        P, M = self.P, self.M
        self.warm_up()
        for i in range(1, M):
            wants = [self.wants_forward(j) for j in range(P)]
            for j in range(P - 2, -1, -1):
                wants[j] = wants[j] and wants[j + 1]
            for j in range(P):
                if not wants[j]:
                    continue
                self.make_room(j, self.act[j])
                if j > 0:
                    self.fill_before(j, self.ends["F"][j - 1][self.count["F"][j]] + self.comm)
                self.put(j, "F")
            for j in range(P - 1, -1, -1):
                if self.count["F"][j] <= i:
                    raise _NoRoomError  # its forward never came: this pass cannot order the ranks
                if j + 1 < P:
                    self.fill_before(j, self.ends["B"][j + 1][i] + self.comm)
                if j == 0 and self.count["F"][j] == M:
                    while self.count["W"][j] < self.count["B"][j]:
                        self.put(j, "W")
                self.put(j, "B")
        for j in range(P):
            while self.count["W"][j] < M:
                self.put(j, "W")
        return self.orders


@lru_cache(maxsize=16)
def _best(problem: Problem) -> tuple[tuple[Op, ...], ...] | None:
    """The best pass by the problem's objective among those that run within the memory limit."""
    best = None
    for switches in product((True, False), repeat=3):
        try:
            orders = _Pass(problem, *switches).run()
            schedule = simulate(problem, orders, "zb-auto")
        except (_NoRoomError, ScheduleError):
            continue
        if not schedule.over_memory_limit() and (best is None or schedule.value < best[0]):
            best = (schedule.value, tuple(tuple(order) for order in orders))
    return None if best is None else best[1]


def zb_auto(problem: Problem) -> list[list[Op]]:
    orders = _best(problem)
    if orders is None:
        raise ScheduleError("the Zero Bubble greedy found no order within the memory limit")
    return [list(order) for order in orders]


def zb_auto_fits(problem: Problem) -> str | None:
    """Why the greedy has no schedule for the problem, or None."""
    if _best(problem) is None:
        return "finds no order within the memory limit"
    return None
