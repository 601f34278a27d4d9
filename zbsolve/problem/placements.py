"""Named placements (docs/design.md, "The problem") turned into explicit pipes, and memory-limit shorthands."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from zbsolve.errors import ProblemError
from zbsolve.problem.problem import Pipe, Problem, Stage, StageCost, check_count, finite
from zbsolve.problem.size import check_op_count, shape
from zbsolve.problem.units import amount_in, bytes_per

PLACEMENT_HELP = "single, interleaved:V (V >= 1), vshape or bidirectional"


@dataclass(frozen=True)
class Placement:
    kind: str  # single | interleaved | vshape | bidirectional
    chunks: int = 1  # model chunks per rank and pipe

    @property
    def name(self) -> str:
        return f"interleaved:{self.chunks}" if self.kind == "interleaved" else self.kind


def parse_placement(text: str) -> Placement:
    value = text.strip().lower()
    if value in ("single", "vshape", "bidirectional"):
        return Placement(value, 2 if value == "vshape" else 1)
    match = re.fullmatch(r"interleaved:(-?\d{1,18})", value)  # longer is a typo, and int() refuses 4,300 digits
    if match:
        chunks = int(match.group(1))
        if chunks < 1:
            raise ProblemError(f"placement interleaved:V needs V >= 1, got interleaved:{chunks}")
        return Placement("interleaved", chunks)
    raise ProblemError(f"placement must be {PLACEMENT_HELP}; got {text!r}")


def check_shape(placement: Placement, devices: int, microbatches: int, split_backward: bool) -> None:
    """Refuse a shape whose op list would not fit, from the numbers alone: building the pipes
    or one cost record per device first would exhaust memory on a mistyped count."""
    kinds = 3 if split_backward else 2  # a microbatch passes chunks x P stages (P on each DualPipe pipe)
    check_op_count(kinds * placement.chunks * devices * microbatches,
                   shape(devices, microbatches, placement.name))


def _chunked_costs(rank_costs: Sequence[StageCost], chunks: int) -> list[StageCost]:
    """Virtual stage j holds a 1/V slice of the layers of rank-stage j // V."""
    return [rank_costs[j // chunks].scaled(1.0 / chunks) for j in range(chunks * len(rank_costs))]


def build_pipes(placement: Placement, devices: int, microbatches: int) -> tuple[tuple[Pipe, ...], int]:
    """Return the pipes of a named placement and how many cost records they index."""
    P, M = devices, microbatches
    every = tuple(range(M))
    if placement.kind == "single":
        return (Pipe(tuple(Stage(k, k) for k in range(P)), every),), P
    if placement.kind == "interleaved":
        V = placement.chunks
        return (Pipe(tuple(Stage(k % P, k) for k in range(V * P)), every),), V * P
    if placement.kind == "vshape":
        stages = tuple(Stage(k if k < P else 2 * P - 1 - k, k) for k in range(2 * P))
        return (Pipe(stages, every),), 2 * P
    if P % 2 or M % 2:
        raise ProblemError(
            f"placement bidirectional needs an even number of devices and microbatches, "
            f"got devices={P}, microbatches={M}"
        )
    half = M // 2
    down = Pipe(tuple(Stage(k, k) for k in range(P)), tuple(range(half)))
    up = Pipe(tuple(Stage(P - 1 - k, k) for k in range(P)), tuple(range(half, M)))
    return (down, up), P


def costs_for(placement: Placement, rank_costs: Sequence[StageCost], first_stage: Mapping[str, float] | None = None,
              op_overhead: float = 0.0) -> list[StageCost]:
    """One record per stage, as the pipes index them. `first_stage` replaces fields of the
    record of a pipe's first stage (whose input needs no gradient) at the rank-stage's scale,
    before a chunk takes its share; `op_overhead` is added to every op's time after it, since
    a runtime spends it per op whatever the op holds (docs/design.md, "Runtime costs")."""
    chunked = placement.kind in ("interleaved", "vshape")
    records = _chunked_costs(rank_costs, placement.chunks) if chunked else list(rank_costs)
    if first_stage:
        records[0] = replace(rank_costs[0], **first_stage).scaled(1.0 / placement.chunks if chunked else 1.0)
    if op_overhead:
        records = [c.with_overhead(op_overhead) for c in records]
    return records


MEMORY_HELP = (
    "none, Nx or N% (N times U, 1F1B's peak: the most any device holds under 1F1B), Nx-own (N times each "
    "device's own 1F1B peak), an absolute amount in "
    "the costs' memory unit or with a unit of its own (40GB, 40G, 38GiB), or one amount per device "
    "separated by commas; it covers the activations held for backward, not weights or optimizer state"
)


def _refuse_bare_amounts(text: str, bare: list[str], unit: str | None) -> None:
    """A bare number typed where the costs count bytes is ambiguous: `1.5` was meant as 1.5x
    as often as 1.5 GB. Where the unit is no byte unit a bare number is the only way to write it."""
    if bytes_per(unit) is None:
        return
    if bare:
        raise ProblemError(f"memory {text.strip()!r}: {bare[0]!r} is a bare number and the costs count memory in "
                           f"{unit}: write {bare[0]}x for {bare[0]} times U (1F1B's peak) or {bare[0]}{unit} "
                           "for an amount")


def _factor(text: str) -> float:
    """A positive finite multiple; ValueError otherwise (reported as a malformed limit)."""
    factor = float(text)
    if not math.isfinite(factor) or factor <= 0:
        raise ValueError
    return factor


def parse_memory(
    text: str | float | Sequence[float] | None, problem_without_limit: Problem
) -> tuple[float, ...] | None:
    """Resolve a memory-limit spec against the problem's U unit (docs/design.md, "The problem")."""
    P = problem_without_limit.devices
    if text is None:
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        amount = finite(text)
        if amount is None:
            raise ProblemError(f"memory must be a finite amount; got {text!r}")
        return (amount,) * P
    if isinstance(text, (list, tuple)):
        return tuple(float(v) for v in text)
    value = str(text).strip().lower()
    if value == "none":
        return None
    if not value:
        raise ProblemError(f"memory is empty: give {MEMORY_HELP}")
    try:
        if value.endswith("x-own"):
            factor = _factor(value[:-len("x-own")])
            peaks = problem_without_limit.one_f_one_b_peaks()
            if not all(peaks):
                raise ProblemError(f"memory {text!r} is a multiple of each device's 1F1B peak, which is 0 on "
                                   "a device without activation; give an absolute limit or none")
            return tuple(factor * peak for peak in peaks)
        if value.endswith(("x", "%")):
            factor = _factor(value[:-1]) / (100 if value.endswith("%") else 1)
            unit = problem_without_limit.one_f_one_b_peak()
            if unit == 0:
                raise ProblemError(f"memory {text!r} is a multiple of U, 1F1B's peak, which is 0 here "
                                   "(no stage has an activation); give an absolute limit or none")
            return (factor * unit,) * P
        unit_name = problem_without_limit.memory_unit_name
        pieces = [p.strip() for p in str(text).strip().split(",")]
        converted = [amount_in(p, unit_name) for p in pieces]  # None: a bare number
        _refuse_bare_amounts(str(text), [p for p, c in zip(pieces, converted) if c is None], unit_name)
        parts = [float(p) if c is None else c for p, c in zip(pieces, converted)]
    except ValueError:
        raise ProblemError(f"memory must be {MEMORY_HELP}; got {text!r}") from None
    if not all(math.isfinite(p) and p > 0 for p in parts):
        raise ProblemError(f"memory amounts must be positive and finite; got {text!r}")
    if len(parts) == 1:
        return (parts[0],) * P
    if len(parts) != P:
        raise ProblemError(f"memory gives {len(parts)} per-device amounts for {P} devices")
    return tuple(parts)


def build_problem(
    devices: int,
    microbatches: int,
    rank_costs: Sequence[StageCost] | StageCost,
    *,
    placement: str | Placement = "single",
    comm: float = 0.0,
    memory: str | float | Sequence[float] | None = None,
    split_backward: bool = True,
    fb_overlap: float | None = None,
    objective: str = "makespan",
    time_unit: str = "ms",
    memory_unit_name: str | None = None,
    first_stage: Mapping[str, float] | None = None,
    op_overhead: float = 0.0,
    per_stage: bool = False,
    levers: Sequence[str] = (),
) -> Problem:
    """Build a Problem from a named placement and one cost record per rank-stage.

    `rank_costs` is either one record used for every rank-stage or a list of P records.
    With V chunks per rank each chunk gets 1/V of its rank-stage's costs and memory;
    `first_stage` and `op_overhead` as `costs_for` reads them. With `per_stage` the list
    gives every stage its own record instead (V x P of them, in the pipe's stage order: a
    layer partition's sums), and `first_stage` does not apply.
    """
    check_count("devices", devices)
    check_count("microbatches", microbatches)
    where = placement if isinstance(placement, Placement) else parse_placement(placement)
    check_shape(where, devices, microbatches, split_backward)
    if isinstance(rank_costs, StageCost):
        rank_costs = [rank_costs] * devices
    pipes, records = build_pipes(where, devices, microbatches)
    if per_stage:
        if len(rank_costs) != records or first_stage:
            raise ProblemError(f"per-stage costs give {len(rank_costs)} records for {records} stages"
                               + (" and a first stage of their own" if first_stage else ""))
        rank_costs = list(rank_costs)
    elif len(rank_costs) != devices:
        raise ProblemError(
            f"stage costs give {len(rank_costs)} rank-stages for {devices} devices"
        )
    checked = [c.checked(f"stage {i}") for i, c in enumerate(rank_costs)]
    if first_stage:
        replace(checked[0], **first_stage).checked("the first stage")
    overhead = finite(op_overhead)
    if overhead is None or overhead < 0:
        raise ProblemError(f"the per-op overhead must be a finite time >= 0, got {op_overhead!r}")
    stage_costs = ([c.with_overhead(overhead) if overhead else c for c in checked] if per_stage
                   else costs_for(where, checked, first_stage, overhead))
    common: dict[str, Any] = dict(
        devices=devices, microbatches=microbatches, stage_costs=tuple(stage_costs),
        pipes=pipes, comm=comm, split_backward=split_backward, fb_overlap=fb_overlap,
        objective=objective, time_unit=time_unit, placement=where.name, memory_unit_name=memory_unit_name,
        op_overhead=overhead, levers=tuple(levers),
    )
    if memory is None:
        return Problem(**common)
    # The memory unit does not depend on pairs; without them this helper does not warn a second time.
    limit = parse_memory(memory, Problem(**{**common, "fb_overlap": None}))
    return Problem(**common, memory_limit=limit)


def overlap_from_fraction(fraction: float, stage_costs: Sequence[StageCost]) -> float:
    """The length of an F&B pair whose F and B overlap into `fraction` of F + B, its W after
    them (a pair absorbs its W); the stages must agree on F, B and W for one length to hold."""
    if not 0 < fraction <= 1:
        raise ProblemError(f"an F&B overlap as a fraction of F + B must be above 0 and at most 1, got {fraction:g}")
    if len({(c.F, c.B, c.W) for c in stage_costs}) > 1:
        raise ProblemError("an F&B overlap as a fraction of F + B needs the same F, B and W on every stage; "
                           "give the pair's length as a time instead")
    c = stage_costs[0]
    return fraction * (c.F + c.B) + c.W


def chunks_on_devices(problem: Problem) -> dict[tuple[int, int], int]:
    """Each (pipe, stage)'s chunk on its device: its place among the stages that device
    holds, pipes in order (a V's way down is chunk 0 and its way back chunk 1)."""
    seen: dict[int, int] = {}
    found = {}
    for q, pipe in enumerate(problem.pipes):
        for k, stage in enumerate(pipe.stages):
            found[q, k] = seen.get(stage.device, 0)
            seen[stage.device] = found[q, k] + 1
    return found
