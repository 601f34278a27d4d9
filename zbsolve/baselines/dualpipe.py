"""DualPipe (bidirectional) and DualPipeV (vshape): DeepSeek's per-rank program in 8 steps.

Chunk 0 is the rank's early stage, chunk 1 its late one. A split backward (B) defers its
weight gradient to a per-rank queue that each W pops oldest first; backwards inside
overlapped pairs and unsplit ones are full (BW). Without `fb_overlap` a pair runs F then BW.
"""

from __future__ import annotations

from collections import deque

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import producer
from zbsolve.problem.problem import Problem


class _Rank:
    def __init__(self, chunks: tuple[tuple[int, int, list[int]], ...], overlap: bool) -> None:
        self.chunks = chunks  # (pipe, stage, microbatches) of chunk 0 and chunk 1
        self.overlap = overlap
        self.forwards = [0, 0]
        self.backwards = [0, 0]
        self.deferred: deque[Op] = deque()
        self.order: list = []

    def _op(self, kind: str, chunk: int, counter: list[int]) -> Op:
        pipe, stage, mbs = self.chunks[chunk]
        op = Op(kind, pipe, stage, mbs[counter[chunk]])
        counter[chunk] += 1
        return op

    def forward(self, chunk: int) -> Op:
        op = self._op("F", chunk, self.forwards)
        self.order.append(op)
        return op

    def backward(self, chunk: int, split: bool = False, emit: bool = True) -> Op:
        op = self._op(producer("I", split), chunk, self.backwards)
        if split:
            self.deferred.append(op.with_kind("W"))
        if emit:
            self.order.append(op)
        return op

    def weight(self) -> None:
        self.order.append(self.deferred.popleft())

    def forward_backward(self, f_chunk: int, b_chunk: int) -> None:
        pipe, stage, mbs = self.chunks[f_chunk]
        forward = Op("F", pipe, stage, mbs[self.forwards[f_chunk]])
        self.forwards[f_chunk] += 1
        backward = self.backward(b_chunk, emit=False)
        if self.overlap:
            self.order.append((forward, backward))
        else:
            self.order += [forward, backward]


def _program(rank: _Rank, H: int, h: int, C: int, middle: bool) -> list:
    for _ in range(2 * (H - h - 1)):  # 1: nF0
        rank.forward(0)
    for _ in range(h + 1):  # 2: nF0F1
        rank.forward(0)
        rank.forward(1)
    for _ in range(H - h - 1):  # 3: nB1W1F1
        rank.backward(1, split=True)
        rank.weight()
        rank.forward(1)
    for i in range(C - 2 * H + h + 1):  # 4: nF0B1F1B0
        if i == 0 and middle:
            rank.forward(0)
            rank.backward(1)
        else:
            rank.forward_backward(0, 1)
        rank.forward_backward(1, 0)
    for _ in range(H - h - 1):  # 5: nB1F1B0
        rank.backward(1)
        rank.forward_backward(1, 0)
    split = False
    for i in range(h + 1):  # 6: nB1B0, the second half split
        if i == (h + 1) // 2 and h % 2 == 1:
            split = True
        rank.backward(1, split=split)
        if i == (h + 1) // 2 and h % 2 == 0:
            split = True
        rank.backward(0, split=split)
    for _ in range(H - h - 1):  # 7: nWB0
        rank.weight()
        rank.backward(0, split=True)
    for _ in range(h + 1):  # 8: nW
        rank.weight()
    return rank.order


def dualpipe(problem: Problem) -> list[list]:
    P, C = problem.devices, problem.microbatches // 2
    down, up = problem.pipes
    orders = []
    for r in range(P):
        h = min(r, P - 1 - r)
        mine = ((0, r, list(down.microbatches)), (1, P - 1 - r, list(up.microbatches)))
        chunks = mine if r < P // 2 else (mine[1], mine[0])
        rank = _Rank(chunks, problem.fb_overlap is not None)
        orders.append(_program(rank, P // 2, h, C, middle=r in (P // 2 - 1, P // 2)))
    return orders


def dualpipe_v(problem: Problem) -> list[list]:
    P, M = problem.devices, problem.microbatches
    mbs = list(problem.pipes[0].microbatches)
    orders = []
    for r in range(P):
        rank = _Rank(((0, r, mbs), (0, 2 * P - 1 - r, mbs)), problem.fb_overlap is not None)
        orders.append(_program(rank, P, r, M, middle=r == P - 1))
    return orders
