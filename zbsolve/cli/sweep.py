"""`zbsolve sweep` and `zbsolve frontier`: solve a grid of configurations into a store, and
show which ones are worth their memory (docs/sweeps.md)."""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import replace
from pathlib import Path

from zbsolve.errors import UsageError
from zbsolve.formats.atomic_files import check_separate, check_writable, write_atomic
from zbsolve.plots.schedule_plot import check_plot_path
from zbsolve.problem.profiles import load_profile
from zbsolve.solvers import check_solver_options
from zbsolve.sweep.driver import Report, SolverSettings, default_jobs, run_sweep, store_settings
from zbsolve.sweep.frontier import frontier, frontier_csv, frontier_json, frontier_table
from zbsolve.sweep.grid import (
    PARTITION_HELP,
    RANGE_HELP,
    cost_model,
    parse_counts,
    parse_levers_grid,
    parse_list,
    parse_memory_grid,
    parse_partition_grid,
    points,
    range_steps,
)
from zbsolve.sweep.store import Store

from .options import (
    add_cost_options,
    check_cost_flags,
    comm_from_args,
    first_stage_from_args,
    memory_unit_from_args,
    parse_fb_overlap,
    rank_costs_from_args,
)
from .partition import check_partition_options
from .solve import add_solver_options

PLACEMENTS = "single,interleaved:2,vshape,bidirectional"


def register_sweep(command) -> None:
    p = command("sweep", "solve every configuration of a grid into a store and show the memory-time frontier",
                run_sweep_command)
    grid = p.add_argument_group("grid (comma-separated lists)")
    grid.add_argument("--stages", "-p", metavar="LIST",
                      help="rank counts (default: the profile's); other counts than the profile's scale its "
                           "per-stage costs by layers per rank, which needs the profile's model.layers")
    grid.add_argument("--placements", default=PLACEMENTS, metavar="LIST", help=f"default {PLACEMENTS}")
    grid.add_argument("--microbatches", "-m", metavar="LIST", help="microbatch counts (default: the profile's)")
    grid.add_argument("--memory", default="0.5x:2x:4", metavar="LIMITS",
                      help=f"per-device activation memory limits: {RANGE_HELP}, absolute amounts, or none "
                           "(default 0.5x:2x:4)")
    grid.add_argument("--objective", default="makespan", metavar="LIST", help="makespan, span or both")
    grid.add_argument("--partition", metavar="LIST", help=PARTITION_HELP)
    grid.add_argument("--levers", metavar="LIST", default="none",
                      help="memory levers each point may use, as a grid dimension: none, recompute, offload, or "
                           "levers joined by + (none,recompute,offload,recompute+offload compares them; default none)")
    add_cost_options(p.add_argument_group("costs"))
    add_solver_options(p, 30.0)
    out = p.add_argument_group("where it runs and what it writes")
    out.add_argument("--store", default="sweep.db", metavar="FILE",
                     help="SQLite file of results (default sweep.db); rerun with it to finish what is missing")
    out.add_argument("--schedules", metavar="DIR", help="folder for each point's schedule file "
                                                        "(default: STORE's name with -schedules)")
    out.add_argument("--jobs", type=int, metavar="N",
                     help="points solved at once in local processes (default: cores / --workers)")
    out.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                     help="run each point as a task on an existing Ray cluster (default address: auto; "
                          "'local' starts one here); needs pip install 'zbsolve[cluster]'")
    out.add_argument("--report", action="store_true", help="print the frontier when done")
    add_frontier_outputs(out)

    p = command("frontier", "print and draw the memory-time frontier of a sweep store", run_frontier_command)
    p.add_argument("store", help="a store written by zbsolve sweep")
    add_frontier_outputs(p)


def add_frontier_outputs(group) -> None:
    group.add_argument("--plot", metavar="FILE", help="draw the frontier (.png, .svg or .pdf)")
    group.add_argument("--csv", metavar="FILE", help="every solved point with its frontier flags, as CSV")
    group.add_argument("--json", metavar="FILE", help="the same as JSON, with the baselines' best points")


def _check_frontier_outputs(args: argparse.Namespace, store: str) -> None:
    if args.plot:
        check_plot_path(args.plot)
    for path in (args.csv, args.json):
        if path:
            check_writable(path)
    check_separate({"the store": store}, {"--plot": args.plot, "--csv": args.csv, "--json": args.json})


def _write_frontier(args: argparse.Namespace, store: Store, show: bool) -> None:
    try:
        found = frontier(store.results(), store.settings)
    except (TypeError, ValueError, KeyError, AttributeError) as error:  # rows whose fields are not numbers
        raise UsageError(f"{store.path}: the store is damaged (its results do not read: "
                         f"{type(error).__name__}: {error})") from None
    if not found.points:
        print("no point of this store is solved yet")
        return
    if show:
        print(frontier_table(found))
    if args.plot:
        from zbsolve.sweep.frontier_plot import plot_frontier

        plot_frontier(found, args.plot)
        print(f"wrote {args.plot}")
    for path, text in ((args.csv, frontier_csv), (args.json, frontier_json)):
        if path:
            write_atomic(path, text(found))
            print(f"wrote {path}")


def _progress(quiet: bool, unit: str):
    best: dict[str, float] = {}

    def report(r: Report) -> None:
        solved = r.outcome["rows"].get("solved")
        if solved is not None and solved["value"] < best.get(r.point.placement, float("inf")):
            best[r.point.placement] = solved["value"]
        if quiet:
            return
        if solved is None:
            what = f"{r.outcome['status']}: {r.outcome.get('error') or r.outcome.get('message')}"
        else:
            gap = "" if solved["gap"] is None else f", gap {100 * solved['gap']:.2f}%"
            what = f"{solved['value']:.6g} {unit} ({solved['status']}{gap})"
        bests = ", ".join(f"{k} {v:.6g}" for k, v in best.items())
        left = "" if r.left_s is None else f" · about {_duration(r.left_s)} left"
        sys.stderr.write(f"[{r.done}/{r.total}] {r.point.key}: {what} · best: {bests}{left}\n")

    return report


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def run_sweep_command(args: argparse.Namespace) -> int:
    check_cost_flags(args)
    check_solver_options(args.solver, args.time_limit, args.workers, args.deterministic, args.seed)
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {args.jobs}")
    if args.jobs is not None and args.ray is not None:
        raise UsageError("--jobs is for local processes; with --ray the cluster decides")
    profile = load_profile(args.profile) if args.profile else None
    check_partition_options(args, profile)
    stages = parse_counts(args.stages, "--stages") if args.stages else (
        [profile.devices] if profile and profile.devices else None)
    microbatches = parse_counts(args.microbatches, "--microbatches") if args.microbatches else (
        [profile.microbatches] if profile and profile.microbatches else None)
    if stages is None or microbatches is None:
        raise UsageError("--stages and --microbatches are required (or a --profile that names them)")
    base_P = profile.devices if profile and profile.devices else stages[0]
    overlap = parse_fb_overlap(args.fb_overlap)
    layered = profile is not None and profile.layers is not None  # each point's costs come from its split
    costs = cost_model(profile, [] if layered else rank_costs_from_args(
                           args, profile, profile.rank_costs(base_P) if profile else None, base_P),
                       base_P, comm_from_args(args, profile), not args.no_split_backward,
                       overlap[1] if overlap and overlap[0] == "time" else None,
                       args.time_unit or (profile.time_unit if profile else "ms"),
                       overlap[1] if overlap and overlap[0] == "fraction" else None)
    first = first_stage_from_args(args, profile)
    costs = replace(costs, memory_unit=memory_unit_from_args(args, profile),
                    first_stage=None if first is None else tuple(sorted(first.items())),
                    op_overhead=profile.op_overhead if profile else 0.0)
    memories = parse_memory_grid(args.memory)
    steps = range_steps(args.memory)
    if steps is not None and steps > len(memories) and not args.quiet:
        limits = f"{len(memories)} distinct limit{'' if len(memories) == 1 else 's'}"
        sys.stderr.write(f"zbsolve sweep: note: --memory {args.memory} gives {limits}, not {steps}: limits are "
                         "kept to four significant digits, and closer steps are one\n")
    grid = points(stages, parse_list(args.placements, "--placements"), microbatches,
                  memories, parse_list(args.objective, "--objective"), costs,
                  None if args.partition is None else parse_partition_grid(args.partition),
                  parse_levers_grid(args.levers))
    _check_frontier_outputs(args, args.store)
    check_writable(args.store)
    settings = SolverSettings(args.solver, args.time_limit, args.workers, args.seed, args.deterministic)
    store = Store(args.store, store_settings(costs, settings))
    schedules = Path(args.schedules) if args.schedules else Path(args.store).with_name(
        Path(args.store).stem + "-schedules")
    jobs = args.jobs or default_jobs(args.workers)
    where = f"on Ray ({args.ray})" if args.ray is not None else f"{jobs} at a time"
    if not args.quiet:
        count = f"{len(grid)} point{'' if len(grid) == 1 else 's'}"
        sys.stderr.write(f"zbsolve sweep: {count}, {args.time_limit:g} s each, {where}; store {args.store}\n")
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # the store is left whole either way
    try:
        solved, before, held = run_sweep(store, grid, schedules, jobs=jobs, ray=args.ray,
                                         progress=_progress(args.quiet, costs.time_unit),
                                         notify=_note)
    except KeyboardInterrupt:
        done = sum(1 for p in store.points() if p["state"] == "done")
        sys.stderr.write(f"zbsolve sweep: stopped with {done} of {len(grid)} points in {args.store}; "
                         "the same command finishes the rest\n")
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    failed = [p for p in store.points() if p["state"] == "failed"]
    print(f"{solved} points solved now, {before} found done in {args.store}"
          + (f", {held} being solved by another sweep" if held else "")
          + (f"; {len(failed)} failed (first: {failed[0]['key']}: {failed[0]['message']})" if failed else ""))
    _write_frontier(args, store, args.report)
    store.close()
    return 1 if failed else 0


def run_frontier_command(args: argparse.Namespace) -> int:
    _check_frontier_outputs(args, args.store)
    store = Store(args.store)
    _write_frontier(args, store, True)
    store.close()
    return 0


def _note(text: str) -> None:
    print(f"zbsolve sweep: note: {text}", file=sys.stderr)
