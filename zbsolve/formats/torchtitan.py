"""A plan handed to torchtitan 0.3.0 (docs/runtime.md, "Running in torchtitan"): the
compute_only schedule CSV, which torchtitan runs under torch's `_PipelineScheduleRuntime`,
and the fields of its `ParallelismConfig` and `TrainingConfig` that make it run this plan."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from zbsolve.errors import ExportError
from zbsolve.formats.atomic_files import write_atomic
from zbsolve.formats.torch_csv import torch_csv
from zbsolve.problem.partition import grouped
from zbsolve.schedule.schedule import Schedule

# torchtitan maps ranks to stages by the schedule it is named: ZBVZeroBubble and DualPipeV a
# V (rank r holds stages r and 2P-1-r), anything else a loop (rank r holds r, r+P, ...). With a
# CSV set the CSV's order runs; the name only gives that mapping.
SCHEDULE_NAMES = {"single": "1F1B", "interleaved": "Interleaved1F1B", "vshape": "ZBVZeroBubble"}
CSV_NAME, CONFIG_NAME = "schedule.csv", "torchtitan.json"


def schedule_name(schedule: Schedule) -> str:
    family = schedule.problem.placement.split(":")[0]
    if family not in SCHEDULE_NAMES:
        raise ExportError(f"torchtitan 0.3.0 maps ranks to stages in a loop or a V; the {schedule.problem.placement} "
                          "placement is neither: solve with --placement vshape (DualPipeV's placement) or "
                          "interleaved:V to run the plan in torchtitan")
    return SCHEDULE_NAMES[family]


def expand_module_names(pattern: str) -> list[list[str]]:
    """`--module-names`: one entry per layer, comma-separated; an entry's modules joined by +
    (norm+lm_head); {a..b} repeats an entry for each number from a to b (layers.{0..31})."""
    layers: list[list[str]] = []
    for entry in (part.strip() for part in pattern.split(",")):
        if not entry:
            raise ExportError(f"--module-names has an empty entry: {pattern!r}")
        match = re.search(r"\{(\d+)\.\.(\d+)\}", entry)
        numbers = [None] if match is None else list(range(int(match.group(1)), int(match.group(2)) + 1))
        if not numbers:
            raise ExportError(f"--module-names: {entry} counts down; write {{a..b}} with a <= b")
        for n in numbers:
            text = entry if match is None else entry[:match.start()] + str(n) + entry[match.end():]
            layers.append([m for m in text.split("+") if m])
    return layers


def stage_modules(schedule: Schedule, module_names: str | None = None) -> list[list[str]]:
    """The modules of each stage, in stage order: `--module-names` grouped by the plan's
    partition, else the profile's names the plan carries."""
    problem = schedule.problem
    if problem.partition is None:
        raise ExportError("this plan's stages are not a profile's layers, so which modules each holds is not known: "
                          "solve with a profile that lists layers (--partition) to export it for torchtitan")
    if module_names is None:
        if problem.stage_modules is None:
            raise ExportError("the plan names no modules: give --module-names")
        return [list(m) for m in problem.stage_modules]
    layers = expand_module_names(module_names)
    if len(layers) != sum(problem.partition):
        raise ExportError(f"--module-names gives {len(layers)} layers; the plan's partition has "
                          f"{sum(problem.partition)}")
    return grouped(layers, problem.partition)


def torchtitan_fragment(schedule: Schedule, csv_path: str, module_names: str | None = None,
                        microbatch_size: int = 1) -> dict:
    """The config fields torchtitan 0.3.0 reads (`ParallelismConfig`, `TrainingConfig`)."""
    if microbatch_size < 1:
        raise ExportError(f"--microbatch-size must be >= 1, got {microbatch_size}")
    problem = schedule.problem
    return {
        "parallelism": {
            "pipeline_parallel_degree": problem.devices,
            "pipeline_parallel_schedule": schedule_name(schedule),
            "pipeline_parallel_schedule_csv": csv_path,
            "module_fqns_per_model_part": stage_modules(schedule, module_names),
            "pipeline_parallel_microbatch_size": microbatch_size,
        },
        "training": {"local_batch_size": problem.microbatches * microbatch_size},
    }


def write_torchtitan(schedule: Schedule, folder: str | os.PathLike, module_names: str | None = None,
                     microbatch_size: int = 1) -> tuple[Path, Path]:
    """FOLDER/schedule.csv and FOLDER/torchtitan.json (the CSV's path in it absolute)."""
    out = Path(folder)
    csv_path = (out / CSV_NAME).resolve()
    fragment = torchtitan_fragment(schedule, str(csv_path), module_names, microbatch_size)  # refuses first
    text = torch_csv(schedule)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(csv_path, text)
    config = (out / CONFIG_NAME).resolve()
    write_atomic(config, json.dumps(fragment, indent=1) + "\n")
    return csv_path, config
