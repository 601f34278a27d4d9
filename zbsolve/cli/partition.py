"""`--partition` for profiles that list layers (docs/design.md, "Layer partitions"): the
problem of one split, and `solve --partition auto`, which chooses the split with the schedule."""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from collections.abc import Callable
from dataclasses import replace

from zbsolve.errors import ProblemWarning, UsageError
from zbsolve.problem import partition
from zbsolve.problem.partition import Split
from zbsolve.problem.problem import Problem
from zbsolve.problem.profiles import Profile
from zbsolve.solvers.partition_search import PartitionAnswer, search

PARTITION_HELP = ("which layers each stage holds, for a profile that lists layers: even (the transformer layers "
                  "spread evenly, the embedding with the first stage and the head with the last; the default), "
                  "layers per stage in pipe order (4,5,5,4; V x P numbers for interleaved:V and vshape), or auto "
                  "(solve only: chosen with the schedule, with a bound over every split)")
# the per-rank cost flags (options.py reads them too)
COST_FLAGS = ("F", "B", "W", "activation", "residual", "recompute", "checkpoint", "offload")


def asks_auto(args: argparse.Namespace) -> bool:
    return (getattr(args, "partition", None) or "").strip().lower() == "auto"


def add_partition_option(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--partition", metavar="auto|even|N,N,...", help=PARTITION_HELP)


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
    if asks_auto(args) and args.objective != "makespan":
        raise UsageError("--partition auto bounds the makespan over every split; it takes --objective makespan")
    if asks_auto(args) and args.fb_overlap is not None:
        raise UsageError("--partition auto does not take --fb-overlap: its bound over every split counts each "
                         "op's own time, which an overlapped pair shortens")


def split_from_args(args: argparse.Namespace, profile: Profile, stages: int) -> Split | None:
    """The split `--partition` names; None for auto (the search chooses it)."""
    assert profile.layers is not None
    if asks_auto(args):
        return None
    text = (getattr(args, "partition", None) or "even").strip().lower()
    if text == "even":
        return partition.even_split(profile.layers, stages)
    return partition.parse_split(text, len(profile.layers), stages)


def layered_problems(profile: Profile, common: dict) -> Callable[[Split], Problem]:
    """The problem of each split of the profile's layers (`partition.split_problems`: every
    split held to the same memory), named by the profile."""
    layers = profile.layers
    assert layers is not None
    options = {k: v for k, v in common.items() if k not in ("devices", "microbatches", "rank_costs")}
    with warnings.catch_warnings():  # said where the command builds its problem
        warnings.simplefilter("ignore", ProblemWarning)
        problems = partition.split_problems(layers, common["devices"], common["microbatches"], **options)

    def problem_for(split: Split) -> Problem:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ProblemWarning)
            return replace(problems(split), profile=profile.fingerprint)

    return problem_for


def layered_problem(profile: Profile, common: dict, split: Split | None) -> Problem:
    """The problem of one split of the profile's layers; `split` None: the even one (auto's first)."""
    assert profile.layers is not None
    stages = partition.stage_count(common["placement"], common["devices"], common["microbatches"])
    chosen = partition.even_split(profile.layers, stages) if split is None else split
    return layered_problems(profile, common)(chosen)


def solve_partitions(args: argparse.Namespace, profile: Profile, common: dict, stop) -> PartitionAnswer:
    """`--partition auto`: the search, its progress said on stderr."""
    assert profile.layers is not None
    stages = partition.stage_count(common["placement"], common["devices"], common["microbatches"])
    quiet = getattr(args, "quiet", False)

    def said(line: str) -> None:
        if not quiet:
            print(f"zbsolve solve: {line}", file=sys.stderr)

    return search(profile.layers, stages, layered_problems(profile, common),
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
    best, chosen = answer.best, answer.bounded()
    if chosen is None:
        return lines
    value, gap = chosen.value, chosen.solver.gap or 0.0
    lines.append(f"answer: partition {','.join(map(str, best.split))} ({best.name}), {value:.6g} {unit}; no "
                 f"contiguous split can take less than {answer.bound:.6g} {unit} ({answer.note}): within "
                 f"{100 * gap:.2f}%")
    return lines
