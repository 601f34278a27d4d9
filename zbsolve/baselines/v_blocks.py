"""V-Min and V-Half (Qi et al. 2024, "Pipeline Parallelism with Controllable Memory"),
written from the paper's building blocks.

Rank r holds stage r (chunk 0) and stage 2P - 1 - r (chunk 1). A building block gives, in
unit slots, when each rank runs one microbatch's four passes (F of chunk 0, F of chunk 1,
B of chunk 1, B of chunk 0); repeating it every six slots gives the microbatches. A block's
lifespan sets the memory: V-Min holds about a third of 1F1B's activations, V-Half half.
W's fill the free slots after their B. Then ops are squeezed: each moves to the earliest
free slot after its inputs where the rank's count of held activations does not exceed the
pattern's peak, and the W's are placed again. The slot order per rank is the schedule;
zbsolve's simulator times it with the problem's costs.
"""

from __future__ import annotations

from zbsolve.problem.op_graph import Op
from zbsolve.problem.problem import Problem

_PERIOD = 6  # slots per microbatch on a rank: F, B and W of two chunks
_PASSES = (("F", 0), ("F", 1), ("B", 1), ("B", 0))
_HELD = {"F": 1, "B": 0, "W": -1}  # activations a rank holds after each kind (the blocks' count)


def _v_min_block(P: int, r: int) -> tuple[int, int, int, int]:
    gap = 2 if P % 3 == 0 else 0  # keeps the four passes on distinct slots modulo six
    return r, 2 * P - 1 - r, 2 * P + gap + r, 4 * P + gap - 1 - r


def _v_half_block(P: int, r: int) -> tuple[int, int, int, int]:
    gap = 3 if P % 2 == 0 else 0
    return 2 * r, 3 * P - 2 - r, 3 * P + gap + 2 * r - 1, 6 * P + gap - r - 2


class _Grid:
    """Slots per rank: `at[(kind, stage, k)]` is the slot of microbatch index k's op."""

    def __init__(self, P: int, M: int, block) -> None:
        self.P, self.M = P, M
        self.at: dict[tuple[str, int, int], int] = {}
        for r in range(P):
            for (kind, chunk), offset in zip(_PASSES, block(P, r)):
                for k in range(M):
                    self.at[(kind, self.stage(r, chunk), k)] = offset + _PERIOD * k

    def stage(self, r: int, chunk: int) -> int:
        return r if chunk == 0 else 2 * self.P - 1 - r

    def rank(self, stage: int) -> int:
        return stage if stage < self.P else 2 * self.P - 1 - stage

    def deps(self, key: tuple[str, int, int]) -> list[tuple[str, int, int]]:
        kind, s, k = key
        found = [(kind, s, k - 1)] if k else []  # microbatches keep their order per stage
        if kind == "F" and s > 0:
            found.append(("F", s - 1, k))
        elif kind == "B":
            found.append(("F", s, k) if s == 2 * self.P - 1 else ("B", s + 1, k))
        elif kind == "W":
            found.append(("B", s, k))
        return found

    def place_w(self) -> None:
        """Put each rank's W's, oldest B first, in the free slots after their B."""
        for key in [key for key in self.at if key[0] == "W"]:
            del self.at[key]
        for r in range(self.P):
            taken = {slot: key for key, slot in self.at.items() if self.rank(key[1]) == r}
            done = sorted((slot, key[1], key[2]) for slot, key in taken.items() if key[0] == "B")
            waiting: list[tuple[int, int]] = []
            slot = n = 0
            while n < len(done) or waiting:
                while n < len(done) and done[n][0] < slot:
                    waiting.append(done[n][1:])
                    n += 1
                if slot not in taken and waiting:
                    s, k = waiting.pop(0)
                    self.at[("W", s, k)] = slot
                slot += 1

    def squeeze(self) -> None:
        """Move each op to the earliest free slot after its inputs that keeps the rank's
        count of held activations (F adds one, W frees one) within the pattern's peak."""
        end = max(self.at.values()) + 1
        held = [[0] * (end + 1) for _ in range(self.P)]
        used: list[set[int]] = [set() for _ in range(self.P)]
        for (kind, s, _), slot in self.at.items():
            r = self.rank(s)
            used[r].add(slot)
            step = _HELD[kind]
            for t in range(slot, end + 1):
                held[r][t] += step
        peak = [max(row) for row in held]
        for key in sorted(self.at, key=self.at.__getitem__):
            r, slot = self.rank(key[1]), self.at[key]
            earliest = max((self.at[d] + 1 for d in self.deps(key)), default=0)
            for t in range(earliest, slot):
                if t in used[r] or (key[0] == "F" and max(held[r][t:slot]) + 1 > peak[r]):
                    continue
                used[r].discard(slot)
                used[r].add(t)
                self.at[key] = t
                step = _HELD[key[0]]
                for u in range(t, slot):
                    held[r][u] += step
                break

    def orders(self, mbs: list[int]) -> list[list[Op]]:
        rows: list[list[tuple[int, Op]]] = [[] for _ in range(self.P)]
        for (kind, s, k), slot in self.at.items():
            rows[self.rank(s)].append((slot, Op(kind, 0, s, mbs[k])))
        return [[op for _, op in sorted(row, key=lambda item: item[0])] for row in rows]


def _from_block(problem: Problem, block) -> list[list[Op]]:
    mbs = list(problem.pipes[0].microbatches)
    grid = _Grid(problem.devices, len(mbs), block)
    grid.place_w()
    grid.squeeze()
    grid.place_w()
    return grid.orders(mbs)


def v_min(problem: Problem) -> list[list[Op]]:
    return _from_block(problem, _v_min_block)


def v_half(problem: Problem) -> list[list[Op]]:
    return _from_block(problem, _v_half_block)
