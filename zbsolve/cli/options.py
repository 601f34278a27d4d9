"""Problem options shared by `solve`, `baseline` and `compare` (docs/design.md, "Command line")."""

from __future__ import annotations

import argparse
import math
import re
import sys
import warnings
from dataclasses import replace

from zbsolve.errors import ProblemError, ProblemWarning, UsageError
from zbsolve.problem import partition
from zbsolve.problem.op_kinds import LEVERS
from zbsolve.problem.placements import (
    MEMORY_HELP,
    PLACEMENT_HELP,
    build_problem,
    check_shape,
    costs_for,
    overlap_from_fraction,
    parse_placement,
)
from zbsolve.problem.problem import OBJECTIVES, Problem, StageCost
from zbsolve.problem.profiles import Profile, load_profile
from zbsolve.problem.units import copy_time

from .partition import COST_FLAGS, add_partition_option, check_partition_options, layered_problem, split_from_args

# What `--placement auto` tries (cli/choices.py): each placement family once, interleaved at two chunks.
AUTO_PLACEMENTS = ("single", "interleaved:2", "vshape", "bidirectional")
PLACEMENTS_HELP = (f"{PLACEMENT_HELP}; a list of them (single,vshape); or auto: {', '.join(AUTO_PLACEMENTS)}, "
                   "each that fits P, M and the memory limit. Several are solved in turn, sharing --time-limit, in "
                   "one table, and the fastest that fits is the answer (default single)")


def add_problem_options(parser: argparse.ArgumentParser, several: bool = False) -> None:
    """The problem's options; `several`: --placement may name several placements (solve, compare)."""
    group = parser.add_argument_group("problem")
    group.add_argument("--stages", "-p", type=int, metavar="P",
                       help="pipeline-parallel degree: number of ranks (the papers' p)")
    group.add_argument("--microbatches", "-m", type=int, metavar="M", help="microbatches per step")
    group.add_argument("--placement", default="single",
                       help=PLACEMENTS_HELP if several else f"{PLACEMENT_HELP} (default single)")
    add_cost_options(group)
    group.add_argument("--memory", metavar="LIMIT",
                       help=f"per-device memory limit: {help_text(MEMORY_HELP)} (default none)")
    group.add_argument("--objective", default="makespan", choices=OBJECTIVES, help="what to minimise")
    group.add_argument("--levers", metavar="LIST", default="",
                       help=f"memory levers the solve may choose per stage and microbatch: {', '.join(LEVERS)} "
                            "(recompute: a forward keeps only its --checkpoint and runs again, as R, before its "
                            "backward; offload: its activation is copied to host after it and back before its "
                            "backward, beside compute, in --offload time each way); default none")
    add_partition_option(group)


def help_text(text: str) -> str:
    """A shared phrase as argparse help, which formats it with %: a bare % (as in N%) breaks --help."""
    return text.replace("%", "%%")


def add_cost_options(group: argparse._ArgumentGroup) -> None:
    """Where the costs come from; `problem_from_args` and the sweep read them the same way."""
    group.add_argument("--profile", metavar="FILE", help="cost profile JSON (see models/); flags below win")
    group.add_argument("--F", type=float, metavar="T", help="forward time per rank-stage (default 1)")
    group.add_argument("--B", type=float, metavar="T", help="input-gradient backward time (default 1)")
    group.add_argument("--W", type=float, metavar="T", help="weight-gradient backward time (default 1)")
    group.add_argument("--comm", type=float, metavar="C", help="latency on cross-device edges (default 0)")
    group.add_argument("--activation", type=float, metavar="A",
                       help="memory one forward allocates per rank-stage (default 1)")
    group.add_argument("--residual", type=float, metavar="R",
                       help="memory held after B until W (default 0.5 x activation)")
    group.add_argument("--recompute", type=float, metavar="T",
                       help="time of a recomputation R per rank-stage (default: the forward's time)")
    group.add_argument("--checkpoint", type=float, metavar="A",
                       help="memory a recomputed forward keeps until its R (the stage's input; default 0)")
    group.add_argument("--offload", type=float, metavar="T",
                       help="time of one copy of a rank-stage's activation to host or back (the offload lever)")
    group.add_argument("--host-bandwidth", metavar="RATE",
                       help="device-host copy bandwidth, such as 25GB/s: gives --offload as activation / RATE "
                            "(needs a memory unit: a profile's memory_unit or --memory-unit)")
    group.add_argument("--fb-overlap", metavar="T|FRACTION",
                       help="duration of an overlapped F&B pair (DualPipe), between max(F, B + W) and "
                       "F + B + W (a pair absorbs its W), or as a share of F + B (80%%, 0.8x: the pair takes "
                       "0.8 (F + B) + W); default: no overlap")
    split = group.add_mutually_exclusive_group()
    split.add_argument("--no-split-backward", action="store_true",
                       help="keep backward fused (BW): no separate B and W ops")
    split.add_argument("--split-backward", action="store_true",
                       help="split B and W only; by default solve and compare also solve with the fused backward "
                            "where the costs give a BW faster than B + W, and answer the faster")
    group.add_argument("--time-unit", help="unit of all times (default: the profile's, else ms)")
    group.add_argument("--memory-unit", metavar="UNIT",
                       help="what --activation, --residual and plain --memory amounts count, such as GB or MB "
                            "(default: the profile's memory_unit); lets --memory take 40GB or 38GiB")


def _check_flag(name: str, value: float | None) -> None:
    """Name the flag itself, not the stage record it ends up in."""
    if value is None:
        return
    if not math.isfinite(value):
        raise UsageError(f"--{name} must be a finite number, got {value}")
    if name in ("fb-overlap", "F", "recompute", "offload") and value <= 0:  # no length: see StageCost.checked
        raise UsageError(f"--{name} must be > 0, got {value:g}")
    if value < 0:
        raise UsageError(f"--{name} must be >= 0, got {value:g}")


def check_cost_flags(args: argparse.Namespace) -> None:
    for name in ("F", "B", "W", "comm", "activation", "residual", "recompute", "checkpoint", "offload"):
        _check_flag(name, getattr(args, name))
    parse_fb_overlap(args.fb_overlap)


def levers_from_args(args: argparse.Namespace) -> tuple[str, ...]:
    """`--levers` as names; an unknown one is refused with the list."""
    names = tuple(part.strip().lower() for part in (getattr(args, "levers", "") or "").split(",") if part.strip())
    unknown = [name for name in names if name not in LEVERS]
    if unknown:
        raise UsageError(f"--levers: unknown lever {unknown[0]!r}; choose from {', '.join(LEVERS)}")
    return names


def parse_fb_overlap(text: str | None) -> tuple[str, float] | None:
    """`--fb-overlap` as ("time", T) or ("fraction", f of F + B)."""
    if text is None:
        return None
    value = text.strip().lower()
    match = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*(%|x)", value)
    if match:
        fraction = float(match.group(1)) / (100 if match.group(2) == "%" else 1)
        if not 0 < fraction <= 1:
            raise UsageError(f"--fb-overlap as a share of F + B must be above 0 and at most 100%, got {text}")
        return "fraction", fraction
    try:
        number = float(value)
    except ValueError:
        raise UsageError(f"--fb-overlap must be a time or a share of F + B (80% or 0.8x), got {text!r}") from None
    _check_flag("fb-overlap", number)
    return "time", number


def fb_overlap_for(text: str | None, placement: str, rank_costs: list[StageCost]) -> float | None:
    """The pair length for the problem: the time given, or the share of its stages' F + B."""
    given = parse_fb_overlap(text)
    if given is None or given[0] == "time":
        return None if given is None else given[1]
    return overlap_from_fraction(given[1], costs_for(parse_placement(placement), rank_costs))


def rank_costs_from_args(args: argparse.Namespace, profile: Profile | None,
                         base: list[StageCost] | None, devices: int) -> list[StageCost]:
    """The profile's records per rank-stage (`base`), or unit costs, with the flags applied."""
    if base is None:
        base = [StageCost(1.0, 1.0, 1.0, 1.0, 0.5)] * devices
    flags = {k: getattr(args, k) for k in COST_FLAGS if getattr(args, k) is not None}
    if "activation" in flags and "residual" not in flags:
        flags["residual"] = 0.5 * flags["activation"]
    if "B" in flags or "W" in flags:
        flags["fused"] = None  # a profile's fused time was measured with its own B and W
    costs = [replace(c, **flags) for c in base]
    if getattr(args, "host_bandwidth", None) is None:
        return costs
    try:  # a copy's time from the bandwidth, where no --offload (or profile's) gives it
        return [c if c.offload is not None else replace(c, offload=copy_time(
            c.activation, memory_unit_from_args(args, profile), time_unit_from_args(args, profile),
            args.host_bandwidth)) for c in costs]
    except ProblemError as bad:
        raise UsageError(f"--host-bandwidth: {bad}") from None


def time_unit_from_args(args: argparse.Namespace, profile: Profile | None) -> str:
    return args.time_unit if args.time_unit is not None else (profile.time_unit if profile else "ms")


def first_stage_from_args(args: argparse.Namespace, profile: Profile | None) -> dict | None:
    """The profile's first-stage record, unless F, B or W are given by flag: it was measured
    with the profile's own."""
    if profile is None or any(getattr(args, k) is not None for k in ("F", "B", "W")):
        return None
    return profile.first_stage


def memory_unit_from_args(args: argparse.Namespace, profile: Profile | None) -> str | None:
    if args.memory_unit is not None:
        return args.memory_unit
    unit = profile.extra.get("memory_unit") if profile is not None else None
    return unit if isinstance(unit, str) else None


def comm_from_args(args: argparse.Namespace, profile: Profile | None) -> float:
    if args.comm is not None:
        return args.comm
    return profile.comm if profile is not None and profile.comm is not None else 0.0


def problem_from_args(args: argparse.Namespace, placement: str | None = None, split_backward: bool | None = None,
                      notes: bool = True) -> Problem:
    """The problem the options give; `placement` and `split_backward` in place of the options'
    (one of several a command solves), `notes` False where an earlier one said them."""
    profile, common = problem_parts(args, placement, split_backward)
    if profile is not None and profile.layers is not None:
        stages = partition.stage_count(common["placement"], common["devices"], common["microbatches"])
        split = split_from_args(args, profile, stages)
        if split is None:  # auto: solve runs it apart (cli/solve_partition.py); no other command chooses
            raise UsageError(f"--partition auto chooses the split with a solve: use zbsolve solve; "
                             f"zbsolve {args.command} takes even or layers per stage (N,N,...)")
        return layered_problem(profile, common, split)
    return _problem(args, profile, common, notes)


def problem_parts(args: argparse.Namespace, placement: str | None = None,
                  split_backward: bool | None = None) -> tuple[Profile | None, dict]:
    """The profile and what build_problem takes, the costs apart (`rank_costs` where the profile
    gives per-rank costs; a layered profile's come from a partition)."""
    placement = args.placement if placement is None else placement
    split = (not args.no_split_backward) if split_backward is None else split_backward
    check_cost_flags(args)
    profile = load_profile(args.profile) if args.profile else None
    devices = args.stages if args.stages is not None else (profile.devices if profile else None)
    microbatches = args.microbatches if args.microbatches is not None else (
        profile.microbatches if profile else None)
    if devices is None:
        raise UsageError("--stages is required (or a --profile that names its devices)")
    if microbatches is None:
        raise UsageError("--microbatches is required (or a --profile that names its microbatches)")
    if devices < 1:
        raise UsageError(f"--stages must be >= 1, got {devices}")
    if microbatches < 1:
        raise UsageError(f"--microbatches must be >= 1, got {microbatches}")
    check_shape(parse_placement(placement), devices, microbatches, split)
    check_partition_options(args, profile)
    layered = profile is not None and profile.layers is not None
    rank_costs = None if layered else rank_costs_from_args(
        args, profile, profile.rank_costs(devices) if profile else None, devices)
    if profile is not None and profile.layers is not None:  # a share of F + B: of the even split's stages
        even = partition.even_stage_costs(profile.layers, placement, devices, microbatches)
        given = parse_fb_overlap(args.fb_overlap)
        fb_overlap = given[1] if given and given[0] == "time" else (
            None if given is None else overlap_from_fraction(given[1], even))
    else:
        assert rank_costs is not None
        fb_overlap = fb_overlap_for(args.fb_overlap, placement, rank_costs)
    time_unit = time_unit_from_args(args, profile)
    if layered and getattr(args, "host_bandwidth", None) is not None:
        raise UsageError("--host-bandwidth does not apply to a profile that lists layers yet: give a profile of "
                         "per-rank costs")
    return profile, dict(
        devices=devices, microbatches=microbatches, rank_costs=rank_costs,
        placement=placement, comm=comm_from_args(args, profile),
        memory=args.memory if args.memory is not None else (profile.memory if profile else None),
        split_backward=split, fb_overlap=fb_overlap, objective=args.objective,
        time_unit=time_unit,
        memory_unit_name=memory_unit_from_args(args, profile),
        op_overhead=profile.op_overhead if profile else 0.0, levers=levers_from_args(args),
    )


def _problem(args: argparse.Namespace, profile: Profile | None, common: dict, notes: bool) -> Problem:
    devices = common["devices"]
    options = {k: v for k, v in common.items() if k not in ("devices", "microbatches", "rank_costs")}
    with warnings.catch_warnings():  # said below, naming the option as typed
        warnings.simplefilter("ignore", ProblemWarning)
        problem = build_problem(devices, common["microbatches"], common["rank_costs"],
                                first_stage=first_stage_from_args(args, profile), **options)
    if profile is not None:
        problem = replace(problem, profile=profile.fingerprint)
    warning = problem.overlap_warning("--fb-overlap")
    if not notes:
        return problem
    if warning:
        sys.stderr.write(f"zbsolve {args.command}: warning: {warning}\n")
    if profile is not None and profile.devices is not None and devices != profile.devices:
        sys.stderr.write(
            f"zbsolve {args.command}: note: the profile's costs are per rank-stage of a {profile.devices}-rank "
            f"split; with --stages {devices} each rank keeps them as they are (they are not rescaled to "
            f"{profile.devices}/{devices} of that): measure a profile for {devices} ranks, or give --F, --B, --W\n")
    return problem
