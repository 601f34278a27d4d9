"""Cost profiles, shipped (`zbsolve/models/*.json`) or the user's own: one cost record per
rank-stage of the single placement.

A profile gives either uniform `costs` (any number of ranks), a list `stage_costs` of
one record per rank-stage, or a list `layers` of one record per layer (with its `name` and
the `modules` a runtime gives it), which a partition groups into stages; plus optional
`overrides` for single rank-stages (negative indices count from the last), `first_stage`
for the pipe's first stage (on whatever rank and chunk it lies) and a runtime's
`op_overhead` per op. Unknown keys are refused so a typo is never ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from zbsolve.errors import ProfileError
from zbsolve.problem import partition
from zbsolve.problem.partition import Layer
from zbsolve.problem.problem import StageCost, finite

# BW: a fused backward's own time, if not B + W; recompute and checkpoint: the recompute lever's
# R time (if not the F's) and what a recomputed forward keeps (docs/design.md, "Memory levers")
COST_KEYS = ("F", "B", "W", "activation", "residual", "BW", "recompute", "checkpoint", "offload")
PROFILE_KEYS = {
    "name", "source", "time_unit", "memory_unit", "devices", "microbatches", "comm", "memory",
    "costs", "stage_costs", "overrides", "first_stage", "op_overhead", "model", "notes", "measured",
    "calibrated_from", "layers",
}
LAYER_KEYS = ("name", "modules")


@dataclass(frozen=True)
class Profile:
    name: str
    source: str
    time_unit: str = "ms"
    devices: int | None = None
    microbatches: int | None = None
    comm: float | None = None
    memory: str | float | None = None
    costs: StageCost | None = None
    stage_costs: tuple[StageCost, ...] | None = None
    layers: tuple[Layer, ...] | None = None
    overrides: tuple[tuple[int, dict], ...] = ()
    first_stage: dict | None = None  # fields of the pipe's first stage, whose input needs no gradient
    op_overhead: float = 0.0  # the runtime's time per op, whatever the op holds
    extra: dict = field(default_factory=dict)
    # name:first 12 hex digits of the SHA-256 of the profile's JSON (keys sorted), then " from " and the
    # fingerprint of the profile whose plan ran, for a profile calibrated from a run (`calibrated_from`)
    fingerprint: str = ""

    def rank_costs(self, devices: int) -> list[StageCost]:
        """One record per rank-stage for `devices` ranks, overrides applied."""
        if self.stage_costs is not None:
            if len(self.stage_costs) != devices:
                raise ProfileError(
                    f"profile {self.name} has stage_costs for {len(self.stage_costs)} ranks, "
                    f"the problem has {devices} (--stages); use a profile with uniform costs"
                )
            records = list(self.stage_costs)
        elif self.costs is not None:
            records = [self.costs] * devices
        elif self.layers is not None:  # where no partition is asked for: the even one
            records = partition.stage_costs(self.layers, partition.even_split(self.layers, devices))
        else:
            raise ProfileError(f"profile {self.name} gives no costs")
        for index, values in self.overrides:
            if not -devices <= index < devices:
                raise ProfileError(
                    f"profile {self.name}: override for stage {index} is outside 0..{devices - 1}"
                )
            records[index] = replace(records[index], **values)
        return records


def _number(value: Any, where: str) -> float:
    number = finite(value)
    if number is None:
        raise ProfileError(f"{where} must be a finite number, got {value!r}")
    if number < 0:
        raise ProfileError(f"{where} must be >= 0, got {value!r}")
    return number


def cost_fields(record: Any, where: str, *, partial: bool = False) -> dict:
    """A cost record's fields, checked, as StageCost names them (`BW` is `fused`)."""
    if not isinstance(record, dict):
        raise ProfileError(f"{where} must be an object with keys {', '.join(COST_KEYS)}")
    allowed = set(COST_KEYS) | ({"stage"} if partial else set())
    unknown = sorted(set(record) - allowed)
    if unknown:
        raise ProfileError(f"{where} has unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
    if not partial:
        for key in ("F", "B", "W"):
            if key not in record:
                raise ProfileError(f"{where} is missing key {key!r}")
    values = {k: _number(record[k], f"{where}.{k}") for k in COST_KEYS if k in record}
    if "BW" in values:
        values["fused"] = values.pop("BW")  # StageCost's field; BW is its property
    return values


def _cost(record: Any, where: str) -> StageCost:
    values = cost_fields(record, where)
    values.setdefault("activation", 1.0)
    values.setdefault("residual", 0.5 * values["activation"])
    if values["residual"] > values["activation"]:
        raise ProfileError(f"{where}.residual must be <= activation")
    return StageCost(**values)


def _layers(records: Any, origin: str) -> tuple[Layer, ...]:
    if not isinstance(records, list) or len(records) < 2:
        raise ProfileError(f"{origin}: 'layers' must be a list of at least two per-layer records")
    found, names = [], set()
    for i, record in enumerate(records):
        where = f"{origin}: layers[{i}]"
        if not isinstance(record, dict):
            raise ProfileError(f"{where} must be an object with a name and costs")
        unknown = sorted(set(record) - set(COST_KEYS) - set(LAYER_KEYS))
        if unknown:
            raise ProfileError(f"{where} has unknown key {unknown[0]!r} (allowed: "
                               f"{', '.join(sorted((*COST_KEYS, *LAYER_KEYS)))})")
        name = record.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ProfileError(f"{where}.name must be a non-empty string (its module name, e.g. layers.{i})")
        if name in names:
            raise ProfileError(f"{where}: the name {name!r} is given twice")
        names.add(name)
        modules = record.get("modules", [name])
        if not isinstance(modules, list) or not modules or not all(isinstance(m, str) and m for m in modules):
            raise ProfileError(f"{where}.modules must be a list of module names")
        cost = _cost({k: v for k, v in record.items() if k not in LAYER_KEYS}, where)
        found.append(Layer(name, tuple(modules), cost))
    return tuple(found)


def profile_from_dict(data: Any, origin: str = "profile") -> Profile:
    if not isinstance(data, dict):
        raise ProfileError(f"{origin}: a profile is one JSON object")
    unknown = sorted(set(data) - PROFILE_KEYS)
    if unknown:
        raise ProfileError(f"{origin}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(PROFILE_KEYS))})")
    for key in ("name", "source"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise ProfileError(f"{origin}: key {key!r} must be a non-empty string")
    if sum(key in data for key in ("costs", "stage_costs", "layers")) != 1:
        raise ProfileError(f"{origin}: give exactly one of 'costs' (uniform), 'stage_costs' (per rank) or "
                           "'layers' (per layer)")
    layers = None if "layers" not in data else _layers(data["layers"], origin)
    stage_costs = None
    if "stage_costs" in data:
        if not isinstance(data["stage_costs"], list) or not data["stage_costs"]:
            raise ProfileError(f"{origin}: 'stage_costs' must be a non-empty list")
        stage_costs = tuple(_cost(c, f"{origin}: stage_costs[{i}]") for i, c in enumerate(data["stage_costs"]))
    overrides = []
    if not isinstance(data.get("overrides", []), list):
        raise ProfileError(f"{origin}: 'overrides' must be a list of per-stage records")
    for j, entry in enumerate(data.get("overrides", [])):
        where = f"{origin}: overrides[{j}]"
        fields = cost_fields(entry, where, partial=True)
        stage = entry.get("stage")
        if isinstance(stage, bool) or not isinstance(stage, int):
            raise ProfileError(f"{where}.stage must be an integer rank-stage index, got {stage!r}")
        overrides.append((stage, fields))
    first_stage = None
    if "first_stage" in data:
        first_stage = cost_fields(data["first_stage"], f"{origin}: first_stage", partial=True)
        if "stage" in data["first_stage"]:
            raise ProfileError(f"{origin}: first_stage is the pipe's first stage; it takes no 'stage'")
    counts = {}
    for key in ("devices", "microbatches"):
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ProfileError(f"{origin}: {key!r} must be an integer >= 1, got {value!r}")
        counts[key] = value
    if stage_costs is not None and counts["devices"] not in (None, len(stage_costs)):
        raise ProfileError(f"{origin}: 'devices' is {counts['devices']} but stage_costs has {len(stage_costs)} records")
    memory = data.get("memory")
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, (str, int, float))):
        raise ProfileError(f"{origin}: 'memory' must be a string like '1.5x' or a number, got {memory!r}")
    time_unit = data.get("time_unit", "ms")
    if not isinstance(time_unit, str) or not time_unit:
        raise ProfileError(f"{origin}: 'time_unit' must be a non-empty string")
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    fingerprint = f"{data['name']}:{hashlib.sha256(canonical).hexdigest()[:12]}"
    lineage = data.get("calibrated_from")
    if lineage is not None:
        if not isinstance(lineage, str) or not lineage.strip():
            raise ProfileError(f"{origin}: 'calibrated_from' must be the fingerprint of a profile, a string")
        fingerprint += f" from {lineage}"
    return Profile(
        fingerprint=fingerprint,
        name=data["name"], source=data["source"], time_unit=time_unit,
        devices=counts["devices"] if stage_costs is None else len(stage_costs),
        microbatches=counts["microbatches"],
        comm=None if "comm" not in data else _number(data["comm"], f"{origin}: comm"),
        memory=memory,
        costs=None if "costs" not in data else _cost(data["costs"], f"{origin}: costs"),
        stage_costs=stage_costs,
        layers=layers,
        overrides=tuple(overrides),
        first_stage=first_stage,
        op_overhead=_number(data.get("op_overhead", 0.0), f"{origin}: op_overhead"),
        extra={k: data[k] for k in ("model", "notes", "measured", "memory_unit") if k in data},
    )


SHIPPED = Path(__file__).resolve().parent.parent / "models"  # installed with the package


def shipped_profiles() -> dict[str, Path]:
    """The profiles that come with zbsolve, by name (the file's name without .json)."""
    return {p.stem: p for p in sorted(SHIPPED.glob("*.json"))}


def resolve_profile(path: str | os.PathLike) -> Path:
    """A file that exists, else a shipped profile named by it: `zb-6.2b`, `zb-6.2b.json` or
    `models/zb-6.2b.json` (the checkout's path, typed in another folder)."""
    given = Path(path)
    if given.exists():
        return given
    shipped = shipped_profiles()
    name = given.name[:-len(".json")] if given.name.endswith(".json") else given.name  # zb-6.2b has a "suffix"
    if given.parent in (Path("."), Path("models")) and name in shipped:
        return shipped[name]
    raise ProfileError(f"profile {path}: no such file, nor a shipped profile (zbsolve profiles lists them: "
                       f"{', '.join(shipped)})")


def load_profile(path: str | os.PathLike) -> Profile:
    try:
        path = resolve_profile(path)
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise ProfileError(f"profile {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ProfileError(f"profile {path}: cannot read: {error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ProfileError(f"profile {path}: not valid JSON: {error}") from None
    except RecursionError:
        raise ProfileError(f"profile {path}: nested too deeply to be a profile") from None
    return profile_from_dict(data, f"profile {path}")
