"""What an op is, by kind, as data (docs/design.md, "Op kinds"): how long it takes, what memory
it allocates at its start and frees at its end, which resource it occupies, what it
produces and what it waits for. The op graph reads this table; the validator states the
same rules in its own words, and tests/problem/test_op_kinds.py holds the two together.

A new kind is a new row here, plus the formulations and bounds whose proofs it changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import TypeVar


class Kind(str, Enum):
    """An op's kind; its value is its text form (`Op.parse`, schedule files). A str enum:
    TABLE[op.kind] finds the row from the text form too."""

    F = "F"  # forward
    B = "B"  # backward for the input gradient
    W = "W"  # backward for the weight gradient
    BW = "BW"  # the whole backward, fused


@dataclass(frozen=True)
class Wait:
    """An op waits for `event` ("F": a forward's output, "I": an input gradient) of the same
    microbatch at the stage `offset` from its own in the pipe (-1 the one before, 0 its own,
    +1 the one after); where that stage does not exist, for `otherwise` (None: nothing)."""

    event: str
    offset: int
    otherwise: Wait | None = None


@dataclass(frozen=True)
class KindRow:
    kind: Kind
    # Its duration: the stage's cost field of that name; BW is the fused time where the
    # problem fuses the backward and the costs give one, else B + W (so that bounds hold).
    duration: str
    # Memory as (activations, residuals) of its stage's cost record, in multiples of each:
    # allocated at its start and freed at its end. Over the kinds a microbatch runs through
    # a stage (F, B, W; or F, BW) they sum to zero.
    allocates: tuple[int, int]
    frees: tuple[int, int]
    resource: str  # "compute": the device's one compute stream
    torch: str | None  # its action in torch's schedule CSV (_ComputationType), None: torch has none
    produces: str | None  # the event other ops wait for: "F", "I", or None
    waits: tuple[Wait, ...]
    # B and W exist only where the backward is split; F and BW anywhere (1F1B runs a BW on a
    # split problem, timed B + W)
    split_only: bool


_BACKWARD_WAIT = Wait("I", +1, otherwise=Wait("F", 0))  # the next stage's input gradient; the last stage its own F

TABLE: dict[str, KindRow] = {  # keyed by Kind; a str enum, so the text form finds a row too
    Kind.F: KindRow(Kind.F, "F", allocates=(1, 0), frees=(0, 0), resource="compute", torch="F", produces="F",
                    waits=(Wait("F", -1),), split_only=False),
    Kind.B: KindRow(Kind.B, "B", allocates=(0, 0), frees=(1, -1), resource="compute", torch="I", produces="I",
                    waits=(_BACKWARD_WAIT,), split_only=True),
    Kind.W: KindRow(Kind.W, "W", allocates=(0, 0), frees=(0, 1), resource="compute", torch="W", produces=None,
                    waits=(Wait("I", 0),), split_only=True),
    Kind.BW: KindRow(Kind.BW, "BW", allocates=(0, 0), frees=(1, 0), resource="compute", torch="B",
                     produces="I",
                     waits=(_BACKWARD_WAIT,), split_only=False),
}
KINDS = tuple(row.kind.value for row in TABLE.values())  # text forms, in the table's order


def kinds_of(split: bool) -> tuple[str, ...]:
    """The kinds the solvers' models give a microbatch at a stage: F then B and W, or F then BW."""
    return tuple(row.kind.value for row in TABLE.values()
                 if (row.split_only if split else not row.split_only) or row.kind == Kind.F)


def kinds_allowed(split: bool) -> tuple[str, ...]:
    """The kinds a problem's schedules may hold: where the backward is split, a fused one too
    (1F1B as a runtime runs it, timed B + W)."""
    return tuple(row.kind.value for row in TABLE.values() if split or not row.split_only)


def ways(split: bool) -> tuple[tuple[str, ...], ...]:
    """The sets of kinds that can take one microbatch through a stage, fused first."""
    return (kinds_of(False), kinds_of(True)) if split else (kinds_of(False),)


def allocates(kind: str) -> bool:
    return TABLE[kind].allocates != (0, 0)


def frees(kind: str) -> bool:
    return TABLE[kind].frees != (0, 0)


@dataclass(frozen=True)
class Hold:
    """Memory a microbatch holds at a stage from the start of its `taken` op to the end of its
    `given` op, in multiples of the stage's (activation, residual)."""

    taken: str
    given: str
    coefficients: tuple[int, int]


@cache
def holds(split: bool) -> tuple[Hold, ...]:
    """The table's memory events as intervals, for models that count memory with cumulative
    constraints: each kind that frees memory gives back part of what the one kind that
    allocates took. A kind that allocates after another (recomputation, a reload) needs
    intervals of its own, which this function does not guess."""
    kinds = kinds_of(split)
    taking = [k for k in kinds if allocates(k)]
    if len(taking) != 1 or any(allocates(k) and frees(k) for k in kinds):
        raise NotImplementedError(f"memory holds for kinds {kinds}: more than one kind allocates")
    return tuple(Hold(taking[0], k, TABLE[k].frees) for k in kinds if frees(k))


@cache
def producer(event: str, split: bool) -> str:
    """The kind that produces `event` ("F", "I") where the backward is split or fused: the
    input gradient is B's, or BW's."""
    return next(k for k in kinds_of(split) if TABLE[Kind(k)].produces == event)


Amount = TypeVar("Amount", int, float)  # memory ticks in the models, the user's unit in the greedy baselines


def amount(coefficients: tuple[int, int], activation: Amount, residual: Amount) -> Amount:
    """An allocation or release of the table in the stage's own amounts."""
    return coefficients[0] * activation + coefficients[1] * residual


def change(kind: str, activation: Amount, residual: Amount) -> Amount:
    """How much an op of `kind` leaves its device holding more (less, if negative) once it has run."""
    row = TABLE[kind]
    return amount(row.allocates, activation, residual) - amount(row.frees, activation, residual)


@dataclass(frozen=True, order=True)
class Op:
    """One unit of work: `kind` of microbatch `microbatch` through `stage` of `pipe`.

    Its text form `pipe.stage KIND microbatch` (e.g. `0.3BW5`) round-trips via `parse`.
    """

    kind: str
    pipe: int
    stage: int
    microbatch: int

    def __str__(self) -> str:
        return f"{self.pipe}.{self.stage}{self.kind}{self.microbatch}"

    def describe(self) -> str:
        return f"{self.kind} pipe {self.pipe} stage {self.stage} microbatch {self.microbatch}"

    def with_kind(self, kind: str) -> Op:
        """The op of `kind` for the same microbatch through the same stage (a B's W)."""
        return Op(kind, self.pipe, self.stage, self.microbatch)

    @staticmethod
    def parse(text: str) -> Op:
        kinds = "|".join(sorted(KINDS, key=len, reverse=True))  # BW before B
        match = re.fullmatch(rf"(\d+)\.(\d+)({kinds})(\d+)", text.strip())
        if not match:
            raise ValueError(f"not an op: {text!r} (expected e.g. 0.3BW5)")
        pipe, stage, kind, mb = match.groups()
        return Op(kind, int(pipe), int(stage), int(mb))
