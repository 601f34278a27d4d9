"""The points of a sweep: every combination of rank count, placement, microbatch count,
memory limit, objective and (for a profile that lists layers) partition, each carrying the
costs it is solved with (a point travels to another process or another machine alone)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from itertools import product

from zbsolve.errors import UsageError
from zbsolve.problem import partition
from zbsolve.problem.op_kinds import LEVERS
from zbsolve.problem.partition import Layer, Split
from zbsolve.problem.placements import build_problem, check_shape, costs_for, overlap_from_fraction, parse_placement
from zbsolve.problem.problem import OBJECTIVES, Problem, StageCost
from zbsolve.problem.profiles import Profile

PARTITION_HELP = ("for a profile that lists layers: even (the default), torchtitan (first and last stage one layer "
                  "less), balanced (stage times balanced), auto (chosen with the schedule, bounded over every "
                  "split) or layers per stage written with / (4/5/5/4)")
RANGE_HELP = "a list (0.5x,1x,2x) or a range FROM:TO:STEPS of relative limits (0.5x:2x:8, both ends included)"


def parse_list(text: str, what: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise UsageError(f"{what} must be a comma-separated list, got {text!r}")
    return list(dict.fromkeys(items))  # repeats run once


def parse_counts(text: str, what: str) -> list[int]:
    counts = []
    for item in parse_list(text, what):
        if not re.fullmatch(r"\d{1,6}", item) or int(item) < 1:
            raise UsageError(f"{what}: each entry must be a whole number >= 1, got {item!r}")
        counts.append(int(item))
    return counts


_RANGE = re.compile(r"\s*([\d.]+)x\s*:\s*([\d.]+)x\s*:\s*(\d{1,4})\s*")


def range_steps(text: str) -> int | None:
    """The steps a `a:b:n` range asks for (None for a list)."""
    match = _RANGE.fullmatch(text)
    return int(match.group(3)) if match else None


def parse_memory_grid(text: str) -> list[str]:
    """Memory limits as `build_problem` reads them; `a:b:n` is n relative limits from a to b,
    at four significant digits (steps closer than that are one limit, solved once)."""
    match = _RANGE.fullmatch(text)
    if match:
        low, high, steps = float(match.group(1)), float(match.group(2)), int(match.group(3))
        if steps < 2 or not 0 < low < high:
            raise UsageError(f"--memory range needs 0 < FROM < TO and at least 2 steps, got {text!r}")
        return list(dict.fromkeys(f"{low + (high - low) * k / (steps - 1):.4g}x" for k in range(steps)))
    if ":" in text:
        raise UsageError(f"--memory must be {RANGE_HELP}, got {text!r}")
    return parse_list(text, "--memory")


@dataclass(frozen=True)
class Point:
    devices: int
    placement: str
    microbatches: int
    memory: str
    objective: str
    partition: str | None = None  # a profile that lists layers: a named split, auto or N/N/...
    levers: str | None = None  # the memory lever its schedules may use (recompute or offload), None: none

    @property
    def key(self) -> str:
        key = f"P={self.devices} {self.placement} M={self.microbatches} memory={self.memory} {self.objective}"
        key = key if self.partition is None else f"{key} partition={self.partition}"
        return key if self.levers is None else f"{key} levers={self.levers}"


@dataclass(frozen=True)
class CostModel:
    """Costs per rank-stage for any rank count: the profile's for its own count, else scaled
    by layers per rank (a profile that names its model's layers), or the same for every P."""

    rank_costs: tuple[StageCost, ...]  # for `devices` ranks
    devices: int | None
    layers: int | None
    comm: float
    split_backward: bool
    fb_overlap: float | None
    time_unit: str
    memory_unit: str | None = None
    fb_overlap_fraction: float | None = None  # a share of F + B: the pair's length follows each point's costs
    first_stage: tuple[tuple[str, float], ...] | None = None  # the pipe's first stage's fields, for `devices` ranks
    op_overhead: float = 0.0
    layer_costs: tuple[Layer, ...] | None = None  # a profile that lists layers: each point's split of them

    def costs_for(self, P: int) -> list[StageCost]:
        if self.devices is None:
            return [self.rank_costs[0]] * P
        if P == self.devices:
            return list(self.rank_costs)
        share = self._share(P)
        if len(set(self.rank_costs)) > 1:  # the first stage apart: `first_stage` scales on its own
            raise UsageError(f"the profile's stages differ; it can only be swept at its own {self.devices} ranks")
        return [self.rank_costs[0].scaled(share)] * P

    def first_stage_for(self, P: int) -> dict | None:
        """The first stage's fields for P ranks, scaled as `costs_for` scales the rest."""
        if self.first_stage is None:
            return None
        return {k: v * self._share(P) for k, v in self.first_stage}

    def _share(self, P: int) -> float:
        """A rank-stage's share of the layers at P ranks against the costs' own."""
        if self.devices is None or P == self.devices:
            return 1.0
        if self.layers is None:
            raise UsageError(f"the costs are for {self.devices} ranks; --stages {P} needs a profile whose "
                             "model names its layers (model.layers), so per-stage costs can follow P")
        return self.devices / P


def cost_model(profile: Profile | None, rank_costs: list[StageCost], devices: int, comm: float,
               split_backward: bool, fb_overlap: float | None, time_unit: str,
               fb_overlap_fraction: float | None = None) -> CostModel:
    layers = profile.extra.get("model", {}).get("layers") if profile is not None else None
    unit = profile.extra.get("memory_unit") if profile is not None else None
    # Costs scale with P only from a profile that says for how many ranks it was made; a
    # measured stack (zbsolve profile) is one rank-stage whatever P is, as for `solve`.
    if profile is not None and profile.layers is not None:  # each point's costs come from its split
        return CostModel((), None, None, comm, split_backward, fb_overlap, time_unit,
                         unit if isinstance(unit, str) else None, fb_overlap_fraction, layer_costs=profile.layers)
    return CostModel(tuple(rank_costs), None if profile is None or profile.devices is None else devices,
                     layers if isinstance(layers, int) and layers > 0 else None,
                     comm, split_backward, fb_overlap, time_unit, unit if isinstance(unit, str) else None,
                     fb_overlap_fraction)


def parse_partition_grid(text: str) -> list[str]:
    """`--partition` of a sweep: named splits, auto, or layers per stage as N/N/..."""
    found = []
    for item in parse_list(text, "--partition"):
        name = item.lower()
        if name not in (*partition.NAMED_SPLITS, "auto") and not re.fullmatch(r"\d{1,4}(/\d{1,4})+", name):
            raise UsageError(f"--partition: each entry must be even, torchtitan, balanced, auto or layers per "
                             f"stage written with / (4/5/5/4), got {item!r}")
        found.append(name)
    return list(dict.fromkeys(found))


def parse_levers_grid(text: str) -> list[str | None]:
    """`--levers` of a sweep: each entry none, a lever, or levers joined by + (none: the point
    without levers)."""
    found: list[str | None] = []
    for item in parse_list(text, "--levers"):
        names = [part.strip() for part in item.strip().lower().split("+")]
        if names != ["none"] and not all(name in LEVERS for name in names):
            raise UsageError(f"--levers: each entry must be none, one of {', '.join(LEVERS)}, or levers joined by + "
                             f"(recompute+offload), got {item!r}")
        found.append(None if names == ["none"] else "+".join(sorted(set(names), key=LEVERS.index)))
    return list(dict.fromkeys(found))


def points(stages: list[int], placements: list[str], microbatches: list[int], memories: list[str],
           objectives: list[str], costs: CostModel, partitions: list[str] | None = None,
           levers: list[str | None] | None = None) -> list[Point]:
    """Every combination, checked before anything runs: a typo fails now, not an hour in."""
    for name in placements:
        parse_placement(name)
    for objective in objectives:
        if objective not in OBJECTIVES:
            raise UsageError(f"--objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if partitions is not None and costs.layer_costs is None:
        raise UsageError("--partition needs a --profile that lists layers ('layers' in the profile; see "
                         "zbsolve/models/zb-1.5b-layers.json)")
    splits: list[str | None] = [None] if costs.layer_costs is None else list(partitions or ["even"])
    if "auto" in splits and (objectives != ["makespan"] or costs.fb_overlap is not None
                             or costs.fb_overlap_fraction is not None):
        raise UsageError("--partition auto bounds the makespan over every split: it takes --objective makespan "
                         "and no --fb-overlap")
    choices = levers or [None]
    if any(choices) and (objectives != ["makespan"] or costs.fb_overlap is not None
                         or costs.fb_overlap_fraction is not None or "auto" in splits):
        raise UsageError("--levers are solved for the makespan, without --fb-overlap or --partition auto")
    found = []
    for P, placement, M, memory, objective, split, lever in product(stages, placements, microbatches, memories,
                                                                    objectives, splits, choices):
        check_shape(parse_placement(placement), P, M, costs.split_backward)
        found.append(Point(P, parse_placement(placement).name, M, memory, objective, split, lever))
    for point in found:
        problem_of(point, costs)  # an odd count for bidirectional, a malformed limit or split: refused here
    return found


def split_of(point: Point, layers: tuple[Layer, ...], split_backward: bool) -> Split:
    """The split a point's problem is built on (auto: the even one, the search's first)."""
    stages = partition.stage_count(point.placement, point.devices, point.microbatches)
    name = point.partition or "even"
    if name in partition.NAMED_SPLITS or name == "auto":
        return partition.named_split("even" if name == "auto" else name, layers, stages, split_backward)
    return partition.parse_split(name, len(layers), stages, sep="/")


def layered_problems(point: Point, costs: CostModel) -> Callable[[Split], Problem]:
    """The problem of each split of the profile's layers at this point (every split held to
    the limit the even split's multiple gives, as `solve --partition` does)."""
    layers = costs.layer_costs
    assert layers is not None
    overlap = costs.fb_overlap
    if costs.fb_overlap_fraction is not None:  # a share of F + B: of the even split's stages
        overlap = overlap_from_fraction(costs.fb_overlap_fraction, partition.even_stage_costs(
            layers, point.placement, point.devices, point.microbatches))
    return partition.split_problems(
        layers, point.devices, point.microbatches, placement=point.placement,
        memory=None if point.memory == "none" else point.memory, comm=costs.comm,
        split_backward=costs.split_backward, fb_overlap=overlap, objective=point.objective,
        time_unit=costs.time_unit, memory_unit_name=costs.memory_unit, op_overhead=costs.op_overhead,
        levers=() if point.levers is None else (point.levers,))


def problem_of(point: Point, costs: CostModel) -> Problem:
    """The point's problem; for `auto`, the even split's (the search's first)."""
    if costs.layer_costs is not None:
        return layered_problems(point, costs)(split_of(point, costs.layer_costs, costs.split_backward))
    rank_costs = costs.costs_for(point.devices)
    first = costs.first_stage_for(point.devices)
    overlap = costs.fb_overlap
    if costs.fb_overlap_fraction is not None:
        overlap = overlap_from_fraction(costs.fb_overlap_fraction,
                                        costs_for(parse_placement(point.placement), rank_costs, first))
    return build_problem(point.devices, point.microbatches, rank_costs,
                         placement=point.placement, comm=costs.comm,
                         memory=None if point.memory == "none" else point.memory,
                         split_backward=costs.split_backward, fb_overlap=overlap,
                         objective=point.objective, time_unit=costs.time_unit, memory_unit_name=costs.memory_unit,
                         first_stage=first, op_overhead=costs.op_overhead,
                         levers=() if point.levers is None else tuple(point.levers.split("+")))


def _cost_record(cost: StageCost) -> dict:
    """The fields a record sets: the optional ones (a fused time, the recompute lever's) only
    where given, so that stores made before they existed keep their settings."""
    unset = {"fused": None, "recompute": None, "checkpoint": 0.0, "offload": None}
    return {k: v for k, v in asdict(cost).items() if k not in unset or v != unset[k]}


def to_dict(costs: CostModel) -> dict:
    data = asdict(costs)
    # a fused time only where given, so that stores made before it existed keep their settings
    data["rank_costs"] = [_cost_record(c) for c in costs.rank_costs]
    for key, unset in (("first_stage", None), ("op_overhead", 0.0), ("layer_costs", None)):  # as for a fused time
        if data[key] == unset:
            del data[key]
    if costs.layer_costs is not None:
        data["layer_costs"] = [{"name": layer.name, "modules": list(layer.modules), "cost": _cost_record(layer.cost)}
                               for layer in costs.layer_costs]
    return data


def from_dict(data: dict) -> CostModel:
    first, layers = data.get("first_stage"), data.get("layer_costs")
    return replace(CostModel(**{**data, "rank_costs": (), "layer_costs": None}),
                   rank_costs=tuple(StageCost(**c) for c in data["rank_costs"]),
                   first_stage=None if first is None else tuple((k, v) for k, v in first),
                   layer_costs=None if layers is None else tuple(
                       Layer(layer["name"], tuple(layer["modules"]), StageCost(**layer["cost"])) for layer in layers))
