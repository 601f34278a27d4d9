"""`--partition` for profiles that list layers (docs/design.md, "Layer partitions"): the
problem of one split, and `solve --partition auto`, which chooses the split with the schedule."""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from dataclasses import replace

from zbsolve.errors import ProblemWarning, UsageError
from zbsolve.problem import partition
from zbsolve.problem.partition import Split
from zbsolve.problem.placements import build_pipes, build_problem, parse_memory, parse_placement
from zbsolve.problem.problem import Problem
from zbsolve.problem.profiles import Profile
from zbsolve.solvers.partition_search import PartitionAnswer, search

PARTITION_HELP = ("which layers each stage holds, for a profile that lists layers: even (the transformer layers "
                  "spread evenly, the embedding with the first stage and the head with the last; the default), "
                  "layers per stage in pipe order (4,5,5,4; V x P numbers for interleaved:V and vshape), or auto "
                  "(solve only: chosen with the schedule, with a bound over every split)")
COST_FLAGS = ("F", "B", "W", "activation", "residual")


def add_partition_option(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--partition", metavar="auto|even|N,N,...", help=PARTITION_HELP)


def stage_count(placement: str, devices: int, microbatches: int) -> int:
    """How many stages (cost records) the placement has: P, V x P or 2P."""
    return build_pipes(parse_placement(placement), devices, microbatches)[1]


def check_partition_options(args: argparse.Namespace, profile: Profile | None) -> None:
    text = getattr(args, "partition", None)
    if profile is None or profile.layers is None:
        if text is not None:
            raise UsageError("--partition needs a --profile that lists layers ('layers' in the profile; see "
                             "zbsolve/models/zb-1.5b-layers.json)")
        return
    given = [f"--{k}" for k in COST_FLAGS if getattr(args, k, None) is not None]
    if given:
        raise UsageError(f"{given[0]} does not apply to a profile that lists layers: its layers give the costs")
    if text is not None and text.strip().lower() == "auto" and args.objective != "makespan":
        raise UsageError("--partition auto bounds the makespan over every split; it takes --objective makespan")
    if text is not None and text.strip().lower() == "auto" and args.fb_overlap is not None:
        raise UsageError("--partition auto does not take --fb-overlap: its bound over every split counts each "
                         "op's own time, which an overlapped pair shortens")


def split_from_args(args: argparse.Namespace, profile: Profile, stages: int) -> Split | None:
    """The split `--partition` names; None for auto (the search chooses it)."""
    assert profile.layers is not None
    text = (getattr(args, "partition", None) or "even").strip().lower()
    if text == "auto":
        return None
    if text == "even":
        return partition.even_split(profile.layers, stages)
    return partition.parse_split(text, len(profile.layers), stages)


def layered_problem(args: argparse.Namespace, profile: Profile, common: dict, split: Split | None) -> Problem:
    """The problem of one split of the profile's layers; `split` None: the even one (auto's
    first). A memory limit given as a multiple of U is resolved once, on the even split, so
    that every split is held to the same amounts."""
    layers = profile.layers
    assert layers is not None
    placement, devices, microbatches = common["placement"], common["devices"], common["microbatches"]
    stages = stage_count(placement, devices, microbatches)
    even = partition.even_split(layers, stages)
    chosen = even if split is None else split
    options = {k: v for k, v in common.items() if k not in ("devices", "microbatches", "memory", "rank_costs")}

    def build(split: Split, memory) -> Problem:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ProblemWarning)
            return build_problem(devices, microbatches, partition.stage_costs(layers, split),
                                 per_stage=True, memory=memory, **options)

    memory = common["memory"]
    if memory is not None:
        memory = parse_memory(memory, build(even, None))
    problem = build(chosen, memory)
    return replace(problem, partition=chosen, stage_modules=partition.stage_modules(layers, chosen),
                   profile=profile.fingerprint)


def solve_partitions(args: argparse.Namespace, profile: Profile, common: dict, stop) -> PartitionAnswer:
    """`--partition auto`: the search, its progress said on stderr."""
    assert profile.layers is not None
    stages = stage_count(common["placement"], common["devices"], common["microbatches"])
    quiet = getattr(args, "quiet", False)

    def said(line: str) -> None:
        if not quiet:
            print(f"zbsolve solve: {line}", file=sys.stderr)

    return search(profile.layers, stages, lambda split: layered_problem(args, profile, common, split),
                  solver=args.solver, time_limit=args.time_limit, workers=args.workers, seed=args.seed,
                  deterministic=args.deterministic, stop=stop, heard=said)


def partition_lines(answer: PartitionAnswer, unit: str) -> list[str]:
    """The splits solved, then the answer with the bound over every split."""
    lines = ["partition (layers per stage)   makespan            bound     how"]
    for found in answer.solved:
        split = ",".join(map(str, found.split))
        shown = "-" if found.schedule is None else f"{found.schedule.value:.6g} {unit}"
        bound = "none fits" if math.isinf(found.bound) else f"{found.bound:.6g}"
        status = "" if found.schedule is None else found.schedule.solver.status
        lines.append(f"{split:<30} {shown:>15} {bound:>12}     {found.name} {status}".rstrip())
    best = answer.best
    if best.schedule is None:
        return lines
    value = best.schedule.value
    gap = (value - answer.bound) / value if value and math.isfinite(answer.bound) else 0.0
    lines.append(f"answer: partition {','.join(map(str, best.split))} ({best.name}), {value:.6g} {unit}; no "
                 f"contiguous split can take less than {answer.bound:.6g} {unit} ({answer.note}): within "
                 f"{100 * gap:.2f}%")
    return lines
