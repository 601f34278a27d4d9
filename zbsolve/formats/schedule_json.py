"""The schedule file (docs/formats.md, "Schedule file"): writer, reader with clear refusals, shipped JSON Schema."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from zbsolve.errors import MissingFileError, ProblemError, ScheduleFileError
from zbsolve.formats.atomic_files import write_atomic
from zbsolve.problem.op_graph import KINDS, Op
from zbsolve.problem.placements import build_pipes, parse_placement
from zbsolve.problem.problem import Pipe, Problem, Stage, StageCost, finite
from zbsolve.schedule.schedule import STATUSES, Metrics, Schedule, SolverInfo, TimedOp

FORMAT = "zbsolve-schedule"
VERSION = 1
COST_KEYS = ("F", "B", "W", "activation", "residual")
FILE_KEYS = ("format", "version", "name", "problem", "devices", "metrics", "solver")
PROBLEM_KEYS = ("devices", "microbatches", "time_unit", "placement", "split_backward", "fb_overlap", "comm",
                "objective", "stage_costs", "pipes", "memory_limit", "memory_unit", "op_overhead", "profile",
                "partition", "stage_modules", "levers")
OP_KEYS = ("kind", "pipe", "stage", "microbatch", "start", "end", "overlap")
METRIC_KEYS = ("makespan", "bubble_rate", "span", "span_bubble_rate", "busy", "peak_memory", "peak_memory_x")
SOLVER_KEYS = ("name", "status", "objective", "bound", "gap", "wall_time_s", "time_limit_s", "message")


def json_schema() -> dict:
    """The JSON Schema of the schedule file, as shipped in the package."""
    text = Path(__file__).with_name("schedule.schema.json").read_text("utf-8")
    return json.loads(text)


def problem_to_dict(problem: Problem) -> dict:
    return {
        "devices": problem.devices,
        "microbatches": problem.microbatches,
        "time_unit": problem.time_unit,
        "placement": problem.placement,
        "split_backward": problem.split_backward,
        "fb_overlap": problem.fb_overlap,
        "comm": problem.comm,
        "objective": problem.objective,
        "stage_costs": [{k: getattr(c, k) for k in COST_KEYS} | ({} if c.fused is None else {"BW": c.fused})
                        | ({} if c.recompute is None else {"recompute": c.recompute})
                        | ({"checkpoint": c.checkpoint} if c.checkpoint else {})
                        | ({} if c.offload is None else {"offload": c.offload})
                        for c in problem.stage_costs],
        "pipes": [
            {
                "stages": [{"device": s.device, "cost": s.cost} for s in pipe.stages],
                "microbatches": list(pipe.microbatches),
            }
            for pipe in problem.pipes
        ],
        "memory_limit": None if problem.memory_limit is None else list(problem.memory_limit),
    } | ({"memory_unit": problem.memory_unit_name} if problem.memory_unit_name else {}) \
      | ({"op_overhead": problem.op_overhead} if problem.op_overhead else {}) \
      | ({"profile": problem.profile} if problem.profile else {}) \
      | ({"partition": list(problem.partition)} if problem.partition else {}) \
      | ({"stage_modules": [list(m) for m in problem.stage_modules]} if problem.stage_modules else {}) \
      | ({"levers": list(problem.levers)} if problem.levers else {})


def schedule_to_dict(schedule: Schedule) -> dict:
    m, s = schedule.metrics, schedule.solver
    devices = []
    for d, ops in enumerate(schedule.devices):
        entries = []
        for t in ops:
            entry: dict[str, Any] = {
                "kind": t.op.kind, "pipe": t.op.pipe, "stage": t.op.stage,
                "microbatch": t.op.microbatch, "start": t.start, "end": t.end,
            }
            if t.overlap is not None:
                entry["overlap"] = t.overlap
            entries.append(entry)
        devices.append({"device": d, "ops": entries})
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": schedule.name,
        "problem": problem_to_dict(schedule.problem),
        "devices": devices,
        "metrics": {
            "makespan": m.makespan, "bubble_rate": m.bubble_rate, "span": m.span,
            "span_bubble_rate": m.span_bubble_rate, "busy": list(m.busy),
            "peak_memory": list(m.peak_memory), "peak_memory_x": m.peak_memory_x,
        },
        "solver": {
            "name": s.name, "status": s.status, "objective": s.objective, "bound": s.bound,
            "gap": s.gap, "wall_time_s": s.wall_time_s, "time_limit_s": s.time_limit_s,
            "message": s.message,
        },
    }


def dumps(schedule: Schedule) -> str:
    """Indented JSON with each op, stage and cost record on one line (files stay readable)."""
    data = schedule_to_dict(schedule)
    leaves: list[str] = []

    def compact(record: dict) -> str:
        leaves.append(json.dumps(record, allow_nan=False))
        return f"@@leaf{len(leaves) - 1}@@"

    problem = data["problem"]
    problem["stage_costs"] = [compact(c) for c in problem["stage_costs"]]
    for pipe in problem["pipes"]:
        pipe["stages"] = [compact(s) for s in pipe["stages"]]
        pipe["microbatches"] = compact(pipe["microbatches"])
    for device in data["devices"]:
        device["ops"] = [compact(o) for o in device["ops"]]
    for key in ("busy", "peak_memory"):
        data["metrics"][key] = compact(data["metrics"][key])
    text = json.dumps(data, indent=1, allow_nan=False)
    return re.sub(r'"@@leaf(\d+)@@"', lambda m: leaves[int(m.group(1))], text) + "\n"


def write_schedule(schedule: Schedule, path: str | os.PathLike) -> None:
    write_atomic(path, dumps(schedule))


# Reading: every access goes through these helpers so a bad file names its key.

def _get(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise ScheduleFileError(f"{where} must be an object")
    if key not in obj:
        raise ScheduleFileError(f"missing key {where}.{key}")
    return obj[key]


def _known(obj: Any, allowed: tuple[str, ...], where: str) -> None:
    """Refuse keys the format does not have: a misspelt or foreign key would be ignored."""
    if isinstance(obj, dict):
        unknown = sorted(set(obj) - set(allowed))
        if unknown:
            raise ScheduleFileError(f"unknown key {where}.{unknown[0]} "
                                    f"(a schedule file has {', '.join(allowed)} there)")


def _typed(value: Any, kinds: tuple, where: str, what: str) -> Any:
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        raise ScheduleFileError(f"{where} must be {what}, got {value!r}")
    return value


def _optional_number(value: Any, where: str) -> float | None:
    return None if value is None else _number(value, where)


def _number(value: Any, where: str) -> float:
    _typed(value, (int, float), where, "a number")
    number = finite(value)
    if number is None:
        raise ScheduleFileError(f"{where} must be finite, got {value!r}")
    return number


def _int(value: Any, where: str) -> int:
    return _typed(value, (int,), where, "an integer")


def _list(value: Any, where: str) -> list:
    return _typed(value, (list,), where, "a list")


def problem_from_dict(data: Any, where: str = "problem") -> Problem:
    _known(data, PROBLEM_KEYS, where)
    costs = []
    for j, c in enumerate(_list(_get(data, "stage_costs", where), f"{where}.stage_costs")):
        at = f"{where}.stage_costs[{j}]"
        _known(c, (*COST_KEYS, "BW", "recompute", "checkpoint", "offload"), at)
        fused = _number(c["BW"], f"{at}.BW") if isinstance(c, dict) and "BW" in c else None
        recompute = _number(c["recompute"], f"{at}.recompute") if isinstance(c, dict) and "recompute" in c else None
        checkpoint = _number(c.get("checkpoint", 0.0), f"{at}.checkpoint") if isinstance(c, dict) else 0.0
        offload = _number(c["offload"], f"{at}.offload") if isinstance(c, dict) and "offload" in c else None
        costs.append(StageCost(**{k: _number(_get(c, k, at), f"{at}.{k}") for k in COST_KEYS}, fused=fused,
                               recompute=recompute, checkpoint=checkpoint, offload=offload))
    pipes = []
    for q, p in enumerate(_list(_get(data, "pipes", where), f"{where}.pipes")):
        at = f"{where}.pipes[{q}]"
        _known(p, ("stages", "microbatches"), at)
        for k, stage in enumerate(_list(_get(p, "stages", at), f"{at}.stages")):
            _known(stage, ("device", "cost"), f"{at}.stages[{k}]")
        stages = tuple(
            Stage(_int(_get(s, "device", f"{at}.stages[{k}]"), f"{at}.stages[{k}].device"),
                  _int(_get(s, "cost", f"{at}.stages[{k}]"), f"{at}.stages[{k}].cost"))
            for k, s in enumerate(_list(_get(p, "stages", at), f"{at}.stages"))
        )
        mbs = tuple(_int(i, f"{at}.microbatches[]") for i in _list(_get(p, "microbatches", at), f"{at}.microbatches"))
        pipes.append(Pipe(stages, mbs))
    limit = _get(data, "memory_limit", where)
    if limit is not None:
        limit = tuple(_number(v, f"{where}.memory_limit[]") for v in _list(limit, f"{where}.memory_limit"))
    split = _typed(_get(data, "split_backward", where), (bool,), f"{where}.split_backward", "true or false")
    placement = _typed(data.get("placement", "custom"), (str,), f"{where}.placement", "a string")
    try:
        problem = Problem(
            devices=_int(_get(data, "devices", where), f"{where}.devices"),
            microbatches=_int(_get(data, "microbatches", where), f"{where}.microbatches"),
            stage_costs=tuple(costs),
            pipes=tuple(pipes),
            comm=_number(_get(data, "comm", where), f"{where}.comm"),
            memory_limit=limit,
            split_backward=split,
            fb_overlap=_optional_number(_get(data, "fb_overlap", where), f"{where}.fb_overlap"),
            objective=_typed(_get(data, "objective", where), (str,), f"{where}.objective", "a string"),
            time_unit=_typed(_get(data, "time_unit", where), (str,), f"{where}.time_unit", "a string"),
            placement=placement,
            memory_unit_name=_typed(data.get("memory_unit"), (str, type(None)), f"{where}.memory_unit",
                                    "a string"),
            op_overhead=_number(data.get("op_overhead", 0.0), f"{where}.op_overhead"),
            profile=_typed(data.get("profile"), (str, type(None)), f"{where}.profile", "a string"),
            partition=None if data.get("partition") is None else tuple(
                _int(n, f"{where}.partition[]") for n in _list(data["partition"], f"{where}.partition")),
            stage_modules=None if data.get("stage_modules") is None else tuple(
                tuple(_typed(m, (str,), f"{where}.stage_modules[][]", "a string")
                      for m in _list(names, f"{where}.stage_modules[]"))
                for names in _list(data["stage_modules"], f"{where}.stage_modules")),
            levers=tuple(_typed(lever, (str,), f"{where}.levers[]", "a string")
                         for lever in _list(data.get("levers", []), f"{where}.levers")),
        )
    except ProblemError as error:
        raise ScheduleFileError(f"{where}: {error}") from None
    _check_placement(problem, where)
    return problem


def _check_placement(problem: Problem, where: str) -> None:
    """A named placement must be one zbsolve knows, and the pipes must be laid out as it
    says; `custom` takes any pipes."""
    if problem.placement == "custom":
        return
    try:
        named, _ = build_pipes(parse_placement(problem.placement), problem.devices, problem.microbatches)
    except ProblemError as error:
        raise ScheduleFileError(f"{where}.placement: {error}") from None
    def layout(pipes) -> list:
        return [([s.device for s in p.stages], list(p.microbatches)) for p in pipes]

    if layout(problem.pipes) != layout(named):
        raise ScheduleFileError(f"{where}.placement is {problem.placement!r}, but the pipes are not laid out that "
                                "way (write \"custom\" for pipes of your own)")


def schedule_from_dict(data: Any) -> Schedule:
    if not isinstance(data, dict):
        raise ScheduleFileError("a schedule file holds one JSON object")
    _known(data, FILE_KEYS, "file")
    if data.get("format") != FORMAT:
        raise ScheduleFileError(f"not a zbsolve schedule file (format is {data.get('format')!r}, expected {FORMAT!r})")
    version = data.get("version")
    if version != VERSION:
        raise ScheduleFileError(
            f"schedule file version {version!r} is not supported: this zbsolve reads version {VERSION}"
        )
    problem = problem_from_dict(_get(data, "problem", "file"))
    devices = []
    for d, entry in enumerate(_list(_get(data, "devices", "file"), "devices")):
        at = f"devices[{d}]"
        if _int(_get(entry, "device", at), f"{at}.device") != d:
            raise ScheduleFileError(f"{at}.device must be {d}")
        ops = []
        _known(entry, ("device", "ops"), at)
        for j, o in enumerate(_list(_get(entry, "ops", at), f"{at}.ops")):
            _known(o, OP_KEYS, f"{at}.ops[{j}]")
            here = f"{at}.ops[{j}]"
            kind = _get(o, "kind", here)
            if kind not in KINDS:
                raise ScheduleFileError(f"{here}.kind must be one of {', '.join(KINDS)}, got {kind!r}")
            op = Op(kind, _int(_get(o, "pipe", here), f"{here}.pipe"),
                    _int(_get(o, "stage", here), f"{here}.stage"),
                    _int(_get(o, "microbatch", here), f"{here}.microbatch"))
            overlap = o.get("overlap")
            if overlap is not None:
                _int(overlap, f"{here}.overlap")
            ops.append(TimedOp(op, _number(_get(o, "start", here), f"{here}.start"),
                               _number(_get(o, "end", here), f"{here}.end"), overlap))
        devices.append(tuple(ops))
    if len(devices) != problem.devices:
        raise ScheduleFileError(f"devices lists {len(devices)} devices, the problem has {problem.devices}")
    m = _get(data, "metrics", "file")
    _known(m, METRIC_KEYS, "metrics")
    metrics = Metrics(
        makespan=_number(_get(m, "makespan", "metrics"), "metrics.makespan"),
        bubble_rate=_number(_get(m, "bubble_rate", "metrics"), "metrics.bubble_rate"),
        span=_number(_get(m, "span", "metrics"), "metrics.span"),
        span_bubble_rate=_number(_get(m, "span_bubble_rate", "metrics"), "metrics.span_bubble_rate"),
        busy=_per_device(m, "busy", problem.devices),
        peak_memory=_per_device(m, "peak_memory", problem.devices),
        peak_memory_x=_number(m.get("peak_memory_x", 0.0), "metrics.peak_memory_x"),
    )
    s = _get(data, "solver", "file")
    _known(s, SOLVER_KEYS, "solver")
    status = _get(s, "status", "solver")
    if status not in STATUSES:
        raise ScheduleFileError(f"solver.status must be one of {', '.join(STATUSES)}, got {status!r}")
    solver = SolverInfo(
        name=_typed(_get(s, "name", "solver"), (str,), "solver.name", "a string"),
        status=status,
        **{k: _optional_number(s.get(k), f"solver.{k}")
           for k in ("objective", "bound", "gap", "wall_time_s", "time_limit_s")},
        message=s.get("message") if isinstance(s.get("message"), str) else None,
    )
    name = _typed(_get(data, "name", "file"), (str,), "name", "a string")
    return Schedule(name=name, problem=problem, devices=tuple(devices), metrics=metrics, solver=solver)


def _per_device(metrics: Any, key: str, devices: int) -> tuple[float, ...]:
    values = _list(_get(metrics, key, "metrics"), f"metrics.{key}")
    if len(values) != devices:
        raise ScheduleFileError(f"metrics.{key} has {len(values)} entries, one per device ({devices}) expected")
    return tuple(_number(v, f"metrics.{key}[{d}]") for d, v in enumerate(values))


def read_schedule(path: str | os.PathLike) -> Schedule:
    """Read a schedule file; ScheduleFileError with a clear reason when it cannot."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such file") from None
    except UnicodeDecodeError as error:
        raise ScheduleFileError(f"{path}: not a text file: {error}") from None
    except OSError as error:
        raise MissingFileError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ScheduleFileError(f"{path}: not valid JSON (truncated?): {error}") from None
    except RecursionError:
        raise ScheduleFileError(f"{path}: nested too deeply to be a schedule file") from None
    try:
        return schedule_from_dict(data)
    except ScheduleFileError as error:
        raise ScheduleFileError(f"{path}: {error}") from None
