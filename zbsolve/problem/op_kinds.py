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
    FC = "FC"  # forward that keeps only its checkpoint (the recompute lever)
    R = "R"  # recomputation: the forward run again from the checkpoint, before the backward
    FO = "FO"  # forward whose activation is copied to host memory (the offload lever)
    O = "O"  # the copy of an activation to host, on the device's device-to-host channel  # noqa: E741
    L = "L"  # its copy back to the device, on the host-to-device channel


LEVERS = ("recompute", "offload")  # memory levers a problem may let its schedules use (docs/design.md, "Memory levers")


@dataclass(frozen=True)
class Wait:
    """An op waits for `event` ("F": a forward's output, "I": an input gradient, "A": the
    stage's whole activation on the device, "H": the activation on the host) of the same
    microbatch at the stage `offset` from its own in the pipe (-1 the one before, 0 its own,
    +1 the one after); where that stage does not exist, for `otherwise` (None: nothing). A
    wait with `levers` holds only in problems that allow one of them (without them the
    activation is always the forward's)."""

    event: str
    offset: int
    otherwise: Wait | None = None
    levers: tuple[str, ...] = ()


@dataclass(frozen=True)
class KindRow:
    kind: Kind
    # Its duration: the stage's cost field of that name; BW is the fused time where the
    # problem fuses the backward and the costs give one, else B + W (so that bounds hold).
    duration: str
    # Memory as (activation, residual, checkpoint) of its stage's cost record, in multiples of
    # each: allocated at its start and freed at its end. Over the kinds a microbatch runs
    # through a stage (one of `ways`) they sum to zero.
    allocates: Coefficients
    frees: Coefficients
    resource: str  # one of RESOURCES
    torch: str | None  # its action in torch's schedule CSV (_ComputationType), None: torch has none
    produces: tuple[str, ...]  # the events other ops wait for: "F", "I", "A", "H"
    waits: tuple[Wait, ...]
    # B and W exist only where the backward is split; F and BW anywhere (1F1B runs a BW on a
    # split problem, timed B + W)
    split_only: bool
    lever: str | None = None  # the memory lever it belongs to; None: every problem has it


Coefficients = tuple[int, int, int]  # of (activation, residual, checkpoint)
# What runs an op, each one op at a time: the device's compute stream and its two copy channels
# (docs/design.md, "Memory levers"). Copies run beside compute.
RESOURCES = ("compute", "d2h", "h2d")
_BACKWARD_WAITS = (
    Wait("I", +1, otherwise=Wait("F", 0)),  # the next stage's input gradient; the last stage its own F
    Wait("A", 0, levers=("recompute", "offload")),  # its activation back on the device
)

TABLE: dict[str, KindRow] = {  # keyed by Kind; a str enum, so the text form finds a row too
    Kind.F: KindRow(Kind.F, "F", allocates=(1, 0, 0), frees=(0, 0, 0), resource="compute", torch="F",
                    produces=("F", "A"), waits=(Wait("F", -1),), split_only=False),
    Kind.B: KindRow(Kind.B, "B", allocates=(0, 0, 0), frees=(1, -1, 0), resource="compute", torch="I",
                    produces=("I",), waits=_BACKWARD_WAITS, split_only=True),
    Kind.W: KindRow(Kind.W, "W", allocates=(0, 0, 0), frees=(0, 1, 0), resource="compute", torch="W",
                    produces=(), waits=(Wait("I", 0),), split_only=True),
    Kind.BW: KindRow(Kind.BW, "BW", allocates=(0, 0, 0), frees=(1, 0, 0), resource="compute", torch="B",
                     produces=("I",), waits=_BACKWARD_WAITS, split_only=False),
    # the recompute lever: the forward keeps its checkpoint; R allocates the rest of the activation
    Kind.FC: KindRow(Kind.FC, "F", allocates=(0, 0, 1), frees=(0, 0, 0), resource="compute", torch=None,
                     produces=("F",), waits=(Wait("F", -1),), split_only=False, lever="recompute"),
    Kind.R: KindRow(Kind.R, "recompute", allocates=(1, 0, -1), frees=(0, 0, 0), resource="compute", torch=None,
                    produces=("A",), waits=(Wait("F", 0),), split_only=False, lever="recompute"),
    # the offload lever: the activation leaves for the host after the forward and comes back before the backward
    Kind.FO: KindRow(Kind.FO, "F", allocates=(1, 0, 0), frees=(0, 0, 0), resource="compute", torch=None,
                     produces=("F",), waits=(Wait("F", -1),), split_only=False, lever="offload"),
    Kind.O: KindRow(Kind.O, "offload", allocates=(0, 0, 0), frees=(1, 0, 0), resource="d2h", torch=None,
                    produces=("H",), waits=(Wait("F", 0),), split_only=False, lever="offload"),
    Kind.L: KindRow(Kind.L, "offload", allocates=(1, 0, 0), frees=(0, 0, 0), resource="h2d", torch=None,
                    produces=("A",), waits=(Wait("H", 0),), split_only=False, lever="offload"),
}
KINDS = tuple(row.kind.value for row in TABLE.values())  # text forms, in the table's order


def kinds_of(split: bool) -> tuple[str, ...]:
    """The kinds the solvers' models give a microbatch at a stage without levers: F then B and
    W, or F then BW."""
    return tuple(row.kind.value for row in TABLE.values() if row.lever is None
                 and ((row.split_only if split else not row.split_only) or row.kind == Kind.F))


def check_levers(levers: tuple[str, ...]) -> None:
    unknown = [lever for lever in levers if lever not in LEVERS]
    if unknown:
        raise ValueError(f"unknown lever {unknown[0]!r}; the levers are {', '.join(LEVERS)}")


def kinds_allowed(split: bool, levers: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The kinds a problem's schedules may hold: where the backward is split, a fused one too
    (1F1B as a runtime runs it, timed B + W); the kinds of the levers it allows."""
    return tuple(row.kind.value for row in TABLE.values()
                 if (split or not row.split_only) and (row.lever is None or row.lever in levers))


def ways(split: bool, levers: tuple[str, ...] = ()) -> tuple[tuple[str, ...], ...]:
    """The sets of kinds that can take one microbatch through a stage, fused first; with the
    recompute lever, each also with the forward that keeps its checkpoint and an R; with the
    offload lever, each also with the forward whose activation goes to host and back."""
    plain: tuple[tuple[str, ...], ...] = (kinds_of(False), kinds_of(True)) if split else (kinds_of(False),)
    found = plain
    if "recompute" in levers:
        found += tuple(recomputed(way) for way in plain)
    if "offload" in levers:
        found += tuple(offloaded(way) for way in plain)
    return found


def recomputed(way: tuple[str, ...]) -> tuple[str, ...]:
    """A way with its forward recomputed: FC, R, then the backward kinds."""
    return (Kind.FC.value, Kind.R.value) + way[1:]


def offloaded(way: tuple[str, ...]) -> tuple[str, ...]:
    """A way with its activation offloaded: FO, its copy O to host, its copy L back, then the backward kinds."""
    return (Kind.FO.value, Kind.O.value, Kind.L.value) + way[1:]


def is_copy(kind: str) -> bool:
    """Whether an op of `kind` runs on a copy channel rather than the compute stream."""
    return TABLE[kind].resource != "compute"


def allocates(kind: str) -> bool:
    return TABLE[kind].allocates != (0, 0, 0)


def frees(kind: str) -> bool:
    return TABLE[kind].frees != (0, 0, 0)


@dataclass(frozen=True)
class Hold:
    """Memory a microbatch holds at a stage from the start of its `taken` op to the end of its
    `given` op, in multiples of the stage's (activation, residual, checkpoint)."""

    taken: str
    given: str
    coefficients: Coefficients


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
    """The kind that produces `event` ("F", "I", "A") without levers where the backward is split
    or fused: the input gradient is B's, or BW's."""
    return next(k for k in kinds_of(split) if event in TABLE[Kind(k)].produces)


Amount = TypeVar("Amount", int, float)  # memory ticks in the models, the user's unit in the greedy baselines


def amount(coefficients: Coefficients, activation: Amount, residual: Amount, checkpoint: Amount) -> Amount:
    """An allocation or release of the table in the stage's own amounts."""
    return coefficients[0] * activation + coefficients[1] * residual + coefficients[2] * checkpoint


def change(kind: str, activation: Amount, residual: Amount, checkpoint: Amount) -> Amount:
    """How much an op of `kind` leaves its device holding more (less, if negative) once it has run."""
    row = TABLE[kind]
    return (amount(row.allocates, activation, residual, checkpoint)
            - amount(row.frees, activation, residual, checkpoint))


def way_holds(way: tuple[str, ...], activation: Amount, residual: Amount,
              checkpoint: Amount) -> list[tuple[str, str, Amount]]:
    """One way's memory as intervals with non-negative amounts, for cumulative models:
    (kind from whose start, kind to whose end, amount). The way's ops run in order; each
    allocation is pushed, and each release takes back from the latest allocations first, so
    the intervals' amounts at any time sum to what the microbatch holds then."""
    pushed: list[list] = []  # [kind, amount not yet given back]
    found: list[tuple[str, str, Amount]] = []
    for kind in way:
        row = TABLE[kind]
        up = amount(row.allocates, activation, residual, checkpoint)
        if up > 0:
            pushed.append([kind, up])
        down = amount(row.frees, activation, residual, checkpoint)
        while down > 0 and pushed:
            top = pushed[-1]
            taken = min(top[1], down)
            found.append((top[0], kind, taken))
            top[1] -= taken
            down -= taken
            if top[1] == 0:
                pushed.pop()
    return found


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
