"""Benchmark zbsolve's solver on instance families and write results.md and results.json.

    python benchmarks/run.py [--suite standard|quick] [--time-limit 60] [--workers 2]
                             [--solver cpsat] [--no-scaling] [--out benchmarks] [--only TEXT]

Each instance runs in a fresh process, so its peak memory is its own. Per instance: ops
count, the best hand-made schedule within the memory limit and its value, the solved
value, the lower bound, the gap, the status, the time to the first and to the best
solution, and the process's peak resident memory. The scaling part measures model build
time and memory against ops count. Each run, and each --only rerun, first times fixed work
(the speed reference), so that results taken on machines of one description but of
different speed can be told apart; a rerun warns when its speed is far from the earlier run's.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.instances import SCALING_OPS, SUITES, matching, uniform  # noqa: E402
from benchmarks.speed import reference_text, speed_apart, speed_reference  # noqa: E402


def parsed(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The arguments, with the solver options zbsolve would refuse refused here (exit 2),
    before any instance runs or any result file is overwritten."""
    from zbsolve.errors import UsageError
    from zbsolve.solvers import check_solver_options

    args = parser.parse_args()
    if hasattr(args, "time_limit"):
        try:
            check_solver_options(getattr(args, "solver", "cpsat"), args.time_limit, getattr(args, "workers", 1))
        except UsageError as error:
            parser.error(str(error))
    return args


def integer_list(text: str, what: str, least: int, most: int | None = None) -> list[int]:
    """The integers of a comma-separated option, each from `least` to `most` (no top when
    None); else an argparse error that names them `what`."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must be integers, got {text!r}") from None
    if any(value < least or (most is not None and value > most) for value in values):
        span = f">= {least}" if most is None else f"from {least} to {most}"
        raise argparse.ArgumentTypeError(f"{what} must be integers {span}, got {text!r}")
    return values


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def run_instance(suite: str, index: int, time_limit: float, workers: int, solver: str,
                 deterministic: bool | None = None, seed: int = 0) -> dict:
    from zbsolve.baselines import applicable, run_baseline
    from zbsolve.problem.op_graph import OpGraph
    from zbsolve.problem.size import op_count
    from zbsolve.solvers import solve
    from zbsolve.solvers.warm_start import best_fitting_baseline

    instance = SUITES[suite]()[index]
    limit = instance.time_limit or time_limit
    problem = instance.build()
    t0 = time.monotonic()
    graph = OpGraph(problem)
    timed = [run_baseline(name, problem, graph) for name in applicable(problem)]
    best = best_fitting_baseline(problem, graph, timed)
    baseline_s = time.monotonic() - t0
    seen: dict = {"first": None, "best": None, "value": None}

    def progress(value, bound, elapsed):
        now = time.monotonic() - t0
        if value is None:
            return
        if seen["first"] is None:
            seen["first"] = now
        if seen["value"] is None or value < seen["value"] - 1e-9:
            seen["value"], seen["best"] = value, now

    t0 = time.monotonic()
    # The baselines timed above are the solve's start too, as on the command line: timed once.
    solved = solve(problem, solver, time_limit=limit, workers=workers, progress=progress, deterministic=deterministic,
                   seed=seed, baselines=timed)
    total = time.monotonic() - t0
    value = solved.value
    if seen["value"] is None or value < seen["value"] - 1e-9:  # the warm start won, or no backend ran
        seen["best"] = total if seen["value"] is None else seen["best"]
    return {
        "family": instance.family, "instance": instance.name, "ops": op_count(problem),
        "objective": problem.objective, "time_unit": problem.time_unit,
        "best_hand_made": best.name if best else None,
        "best_hand_made_value": best.value if best else None,
        "baselines_s": round(baseline_s, 2),
        "solved": value, "bound": solved.solver.bound, "gap": solved.solver.gap,
        "status": solved.solver.status, "message": solved.solver.message,
        "time_limit_s": limit,
        "first_solution_s": round(seen["first"] if seen["first"] is not None else total, 2),
        "best_solution_s": round(seen["best"] if seen["best"] is not None else total, 2),
        "total_s": round(total, 2), "peak_rss_mb": round(_peak_rss_mb(), 1),
        "not_worse_than_hand_made": best is None or value <= best.value + 1e-9,
        # Every generator users run (zbsolve's hand-made ones, torch's orders, the Zero Bubble
        # greedy), each with its value and whether it fits the memory limit.
        "peers": {s.name: {"value": s.value, "fits": not s.over_memory_limit()} for s in timed},
    }


def run_scaling(target_ops: int) -> dict:
    from zbsolve.problem.op_graph import OpGraph
    from zbsolve.solvers.cpsat.formulation import build_model
    from zbsolve.solvers.state import SearchState
    from zbsolve.solvers.view import build_view

    P = 32
    M = max(1, round(target_ops / (3 * P)))
    problem = uniform(P, M, memory="1.5x")
    before = _peak_rss_mb()
    t0 = time.monotonic()
    data = build_view(OpGraph(problem), True, "makespan")
    input_s = time.monotonic() - t0
    t0 = time.monotonic()
    build_model(data, SearchState(data))
    model_s = time.monotonic() - t0
    return {"P": P, "M": M, "ops": len(data.ops), "input_build_s": round(input_s, 2),
            "cpsat_build_s": round(model_s, 2), "rss_before_mb": round(before, 1),
            "peak_rss_mb": round(_peak_rss_mb(), 1)}


def in_child(function, *args) -> dict:
    """Run in a fresh process; a crash or an error is recorded, not raised."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1, maxtasksperchild=1) as pool:
        try:
            return pool.apply(function, args)
        except Exception as error:  # the result table says what went wrong
            return {"error": f"{type(error).__name__}: {error}"}


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import ortools

    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(memory_gb, 1),
            "python": platform.python_version(), "ortools": ortools.__version__, "system": platform.platform()}


def ran_on(settings: dict) -> str:
    """When and where a study ran, for its markdown header."""
    m = settings["machine"]
    return (f"run {settings['date']} on {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
            f"OR-Tools {m['ortools']}")


def fmt(value, digits: int = 6) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def markdown_table(header: list[str], rows: list[list]) -> list[str]:
    """A markdown table's lines; a short row (an error's) is padded with empty cells."""
    def line(cells: list) -> str:
        cells = [*cells, *[""] * (len(header) - len(cells))]
        return "|" + "|".join(f" {cell} " if cell != "" else " " for cell in cells) + "|"

    return [line(header), "|" + "---|" * len(header), *(line(row) for row in rows)]


def write_markdown(path: Path, settings: dict, rows: list[dict], scaling: list[dict]) -> None:
    m = settings["machine"]
    lines = [
        "# zbsolve benchmark results", "",
        f"Suite `{settings['suite']}`, solver {settings['solver']}, {settings['workers']} worker(s), "
        f"{settings['time_limit_s']:g} s per instance unless noted; run {settings['date']}"
        + "".join(f"; rerun {r}" for r in settings.get("rerun", [])) + ".", "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Python {m['python']}, "
        f"OR-Tools {m['ortools']}"
        + (f"; {reference_text(settings['speed_reference'])}" if "speed_reference" in settings else "")
        + ".", "",
        "Values are in each instance's time unit. *first* and *best*: seconds from the start of the "
        "solve (after the hand-made schedules) to its first and best reported schedule; the first is "
        "the starting schedule (the best fitting hand-made one or the list scheduler's), reported "
        "before the backend runs. *RSS*: the instance process's peak resident memory.", "",
    ]
    cells = []
    for r in rows:
        if "error" in r:
            cells.append([r.get("family", ""), r.get("instance", ""), *[""] * 6, f"error: {r['error']}"])
            continue
        cells.append([r["family"], r["instance"], r["ops"], r["best_hand_made"] or "-", fmt(r["best_hand_made_value"]),
                      fmt(r["solved"]), fmt(r["bound"]), f"{100 * r['gap']:.2f}%", r["status"],
                      r["first_solution_s"], r["best_solution_s"], r["total_s"], r["peak_rss_mb"]])
    lines += markdown_table(["family", "instance", "ops", "best hand-made", "value", "solved", "bound", "gap",
                             "status", "first (s)", "best (s)", "total (s)", "RSS (MB)"], cells)
    lines += ["", *peers_table(rows)]
    lines += ["", *summary(rows)]
    if scaling:
        lines += ["", "## Build time and memory against ops count (uniform single, P=32, 1.5x)", ""]
        lines += markdown_table(
            ["ops", "M", "zbsolve input (s)", "CP-SAT model (s)", "RSS before (MB)", "peak RSS (MB)"],
            [[f"error: {r['error']}"] if "error" in r else
             [r["ops"], r["M"], r["input_build_s"], r["cpsat_build_s"], r["rss_before_mb"], r["peak_rss_mb"]]
             for r in scaling])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def faster_peers(row: dict) -> list[str]:
    """The peers that fit the memory limit and beat the solve (there should be none)."""
    return [name for name, p in row.get("peers", {}).items() if p["fits"] and p["value"] < row["solved"] - 1e-9]


def peers_table(rows: list[dict]) -> list[str]:
    """Each instance's solve and bound beside every generator's value; "over" marks one above
    the memory limit, which the solve may not use."""
    lines = ["## Peers", "",
             "Every schedule generator that fits the instance's placement, timed on its costs: zbsolve's "
             "hand-made schedules, the orders torch ships (checked op for op against torch's generators) "
             "and the Zero Bubble authors' generators (`zb-auto`, `zb-v-auto`, `v-min`, `v-half`).", ""]
    cells = []
    for r in rows:
        if "error" in r or "peers" not in r:
            continue
        peers = ", ".join(f"{name} {fmt(p['value'])}" + ("" if p["fits"] else " (over)")
                          for name, p in sorted(r["peers"].items(), key=lambda item: item[1]["value"]))
        cells.append([r["instance"], fmt(r["solved"]), fmt(r["bound"]), ", ".join(faster_peers(r)) or "none",
                      peers or "-"])
    return lines + markdown_table(["instance", "solved", "bound", "faster peer", "peers (value)"], cells)


def summary(rows: list[dict]) -> list[str]:
    ok = [r for r in rows if "error" not in r]
    if not ok:
        return ["No instance finished."]
    worse = [r["instance"] for r in ok if not r["not_worse_than_hand_made"]]
    small = sorted(r["gap"] for r in ok if r["ops"] <= 3000)
    tiny = [r for r in ok if r["ops"] <= 400]
    lines = ["## Summary", "",
             f"- Instances: {len(ok)} finished, {len(rows) - len(ok)} failed.",
             f"- Worse than the best fitting hand-made schedule: {', '.join(worse) if worse else 'none'}.",
             f"- A peer that fits is faster: {', '.join(r['instance'] for r in ok if faster_peers(r)) or 'none'}.",
             f"- Proven optimal: {sum(r['status'] == 'optimal' for r in ok)} of {len(ok)}."]
    if small:
        median = statistics.median(small)
        lines.append(f"- Instances with at most 3,000 ops: {len(small)}; gap median {100 * median:.2f}%, "
                     f"worst {100 * small[-1]:.2f}%.")
    if tiny:
        lines.append(f"- Instances with at most 400 ops: {len(tiny)}; proven optimal "
                     f"{sum(r['status'] == 'optimal' for r in tiny)}.")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=sorted(SUITES), default="standard")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per instance (default 60)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--solver", default="cpsat")
    parser.add_argument("--no-scaling", action="store_true", help="skip the build-time/memory part")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent), help="folder for the results")
    parser.add_argument("--only", metavar="TEXT",
                        help="run only the instance named TEXT, or if none is, those whose name contains "
                             "TEXT, replacing their rows in the folder's results.json (same suite and settings) "
                             "and keeping the rest")
    args = parsed(parser)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    instances = SUITES[args.suite]()
    settings = {"suite": args.suite, "solver": args.solver, "workers": args.workers,
                "time_limit_s": args.time_limit, "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine()}
    if args.only:
        return _rerun(args, out, settings, instances)
    _measure_speed(settings)
    rows: list[dict] = []
    for index, instance in enumerate(instances):
        rows.append(_run_one(args, index, instance, len(instances)))
        _save(out, settings, rows, [])
    scaling = []
    if not args.no_scaling:
        for n in SCALING_OPS if args.suite == "standard" else SCALING_OPS[:1]:
            print(f"scaling: about {n} ops ...", end=" ", flush=True)
            scaling.append(in_child(run_scaling, n))
            print(scaling[-1], flush=True)
    _save(out, settings, rows, scaling)
    print(f"wrote {out / 'results.md'} and {out / 'results.json'}")
    return 0


def _run_one(args, index: int, instance, count: int) -> dict:
    print(f"[{index + 1}/{count}] {instance.name} ...", end=" ", flush=True)
    row = in_child(run_instance, args.suite, index, args.time_limit, args.workers, args.solver)
    row.setdefault("family", instance.family)
    row.setdefault("instance", instance.name)
    print(row.get("error") or f"{row['solved']:g} ({row['status']}, gap {100 * row['gap']:.2f}%, "
                               f"{row['total_s']} s)", flush=True)
    return row


def _rerun(args, out: Path, settings: dict, instances) -> int:
    """Rerun the matching instances of an earlier run with the same settings."""
    try:
        earlier = json.loads((out / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"--only needs an earlier {out / 'results.json'}: {error}", file=sys.stderr)
        return 2
    same = ("suite", "solver", "workers", "time_limit_s")
    if any(earlier["settings"][key] != settings[key] for key in same):
        print(f"--only: the earlier run used other settings ({', '.join(same)} must match)", file=sys.stderr)
        return 2
    rows = {row["instance"]: row for row in earlier["instances"]}
    chosen = [(i, instances[i]) for i in matching(instances, args.only)]
    if not chosen:
        print(f"--only: no instance name contains {args.only!r}", file=sys.stderr)
        return 2
    _measure_speed(settings)
    apart = speed_apart(earlier["settings"].get("speed_reference"), settings.get("speed_reference"))
    if apart:
        print(f"--only: warning: {apart}; the rows it replaces were measured at another speed than the "
              "rows it keeps", file=sys.stderr)
    for index, instance in chosen:
        rows[instance.name] = _run_one(args, index, instance, len(instances))
    kept = earlier["settings"]
    speed = f" ({reference_text(settings['speed_reference'])})" if "speed_reference" in settings else ""
    kept["rerun"] = kept.get("rerun", []) + [f"{settings['date']}{speed}: {', '.join(i.name for _, i in chosen)}"]
    ordered = [rows[i.name] for i in instances if i.name in rows]
    _save(out, kept, ordered, earlier.get("scaling", []))
    print(f"wrote {out / 'results.md'} and {out / 'results.json'}")
    return 0


def _measure_speed(settings: dict) -> None:
    reference = in_child(speed_reference)
    if "error" not in reference:  # not worth losing the run for
        settings["speed_reference"] = reference


def _save(out: Path, settings: dict, rows: list[dict], scaling: list[dict]) -> None:
    (out / "results.json").write_text(json.dumps({"settings": settings, "instances": rows, "scaling": scaling},
                                                 indent=1) + "\n", encoding="utf-8")
    write_markdown(out / "results.md", settings, rows, scaling)


if __name__ == "__main__":
    sys.exit(main())
