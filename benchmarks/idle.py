"""Where a solved schedule idles, device by device, against zbsolve's static bound.

    python benchmarks/idle.py INSTANCE [INSTANCE ...] [--suite standard] [--time-limit 60]
                              [--workers 2] [--seed 0] [--out benchmarks/idle]

Each instance is solved as `zbsolve solve` solves it (CP-SAT, the limit, the workers, the
seed) and each device's time is split: the start of its first op, its busy time, its idle
before its first backward starts (warm-up), its idle from then until its last F ends
(middle), its idle after that (cool-down), and the time from its last op's end to the end
of the schedule (after). zbsolve's static bound for a device (`zbsolve/solvers/bounds/`)
is its earliest start, its work and a least idle for the warm-up, the cool-down and what
must follow its last op, and for the middle only what memory forces where it cannot cover a
microbatch's round trip (none on the standard suite's V-shapes). On the device whose bound
is the static bound, the gap to that bound is what its middle idle and, apart, the rest of
its idle and its late start exceed the bound's allowances by; the longest middle waits are
listed with the device's memory level when each began. Makespan objective, no F&B pairs.
Writes DIR/idle.md and .json.
"""

from __future__ import annotations

import argparse
import sys
import time
from bisect import bisect_right
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.instances import SUITES  # noqa: E402
from benchmarks.run import fmt, machine, markdown_table, parsed, ran_on  # noqa: E402
from benchmarks.study import chosen_problem, write_study  # noqa: E402

HERE = Path(__file__).resolve().parent
BACKWARD = ("B", "BW")
WAITS_SHOWN = 6  # the longest middle waits listed for the device that sets the bound


def device_idle(timed: list, end: float) -> dict:
    """One device's split of its time (its ops as `TimedOp`s; `end`: the schedule's end),
    with its middle waits, longest first: [when it began, how long, the op waited for]."""
    ops = sorted(timed, key=lambda t: (t.start, t.end))
    first_backward = min((t.start for t in ops if t.op.kind in BACKWARD), default=float("inf"))
    last_forward = max((t.end for t in ops if t.op.kind == "F"), default=float("-inf"))
    split = {"first": ops[0].start, "busy": 0.0, "warm-up": 0.0, "middle": 0.0, "cool-down": 0.0}
    waits = []
    reached = ops[0].start
    for t in ops:
        if t.start > reached:  # idle from `reached` to this op's start
            phase = "warm-up" if t.start <= first_backward else "cool-down" if reached >= last_forward else "middle"
            split[phase] += t.start - reached
            if phase == "middle":
                waits.append([reached, t.start - reached, _label(t.op)])
        split["busy"] += max(0.0, t.end - max(t.start, reached))
        reached = max(reached, t.end)
    split["after"] = end - reached
    split["middle waits"] = sorted(waits, key=lambda wait: -wait[1])
    return split


def _label(op) -> str:
    """B8.4: the B of stage 8, microbatch 4 (with the pipe, p1:B8.4, on a second pipe)."""
    return f"{f'p{op.pipe}:' if op.pipe else ''}{op.kind}{op.stage}.{op.microbatch}"


def account(schedule) -> dict:
    """The per-device split and bounds, and the gap account on the device setting the bound."""
    from zbsolve.ops import OpGraph
    from zbsolve.solvers import bounds
    from zbsolve.solvers.base import build_input

    problem = schedule.problem
    data = build_input(OpGraph(problem), problem.split_backward, problem.objective)
    end = schedule.metrics.makespan
    rows = []
    for d, timed in enumerate(schedule.devices):
        ops = data.device_ops[d]
        if not ops:
            continue
        row = {"device": d, **device_idle(list(timed), end),
               "head": data.value(min(data.head[op] for op in ops)),
               "work": data.value(sum(data.duration[op] for op in ops)),
               "warm-up bound": data.value(bounds.warmup_bound(data, ops)),
               "cool-down bound": data.value(bounds.cooldown_bound(data, ops)),
               "jackson bound": data.value(bounds.jackson_bound(data, ops))}
        row["device bound"] = max(row["warm-up bound"], row["cool-down bound"], row["jackson bound"])
        rows.append(row)
    static = data.value(data.lower_bound())
    setting = max(rows, key=lambda r: r["device bound"])
    result = {"value": end, "static bound": static, "devices": rows, "setting device": None}
    if abs(setting["device bound"] - static) <= 1e-9 * max(1.0, static):
        d = setting["device"]
        # The cool-down bound also counts the middle idle that memory forces (`middle_idle`).
        counted = (data.value(bounds.middle_idle(data, data.forward_chains(d), data.memory_limit[d]))
                   if data.memory_limit is not None and setting["cool-down bound"] == setting["device bound"] else 0.0)
        allowance = static - setting["head"] - setting["work"] - counted
        outside = (setting["first"] - setting["head"] + setting["warm-up"] + setting["cool-down"]
                   + setting["after"])
        result.update({"setting device": d, "allowance": allowance, "outside": outside,
                       "middle": setting["middle"], "middle counted": counted})
        _add_memory_held(schedule, d, setting["middle waits"])
    return result


def _add_memory_held(schedule, device: int, waits: list[list]) -> None:
    """Append to each wait the device's memory level when it began, as a share of its limit
    (None without a limit)."""
    from zbsolve.plot import memory_steps

    limit = schedule.problem.memory_limit
    times, levels = memory_steps(schedule, device)
    for wait in waits:
        held = levels[bisect_right(times, wait[0]) - 1]  # releases at that instant counted
        wait.append(None if limit is None else held / limit[device])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instances", nargs="+", metavar="INSTANCE",
                        help="an instance's exact name, e.g. 'zb-1.5b vshape 0.5x'")
    parser.add_argument("--suite", default="standard", choices=sorted(SUITES))
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve (default 60)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(HERE / "idle"), help="output folder")
    args = parsed(parser)
    from zbsolve.solvers import solve

    problems = [chosen_problem(args.suite, name) for name in args.instances]
    if any(problem is None for problem in problems):
        return 2
    if any(problem.objective != "makespan" for problem in problems):
        print("only makespan instances: the span's bound is counted otherwise", file=sys.stderr)
        return 2
    if any(problem.fb_overlap is not None for problem in problems):
        print("only instances without F&B pairs: a pair's halves overlap, so a device's busy time is not "
              "its work, and their bound is counted otherwise", file=sys.stderr)
        return 2
    settings = {"suite": args.suite, "time_limit_s": args.time_limit, "workers": args.workers, "seed": args.seed,
                "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine()}
    found = []
    for name, problem in zip(args.instances, problems):
        print(f"{name} ...", end=" ", flush=True)
        schedule = solve(problem, "cpsat", time_limit=args.time_limit, workers=args.workers, seed=args.seed)
        found.append({"instance": name, "status": schedule.solver.status, **account(schedule)})
        print(f"{fmt(found[-1]['value'])} ({found[-1]['status']})", flush=True)
    write_study(args.out, "idle", {"settings": settings, "instances": found}, report(settings, found))
    return 0


COLUMNS = ("first", "head", "busy", "warm-up", "middle", "cool-down", "after", "warm-up bound", "cool-down bound",
           "jackson bound")


def report(settings: dict, found: list[dict]) -> str:
    lines = [
        "# Where solved schedules idle", "",
        f"Suite `{settings['suite']}`, CP-SAT, {settings['workers']} worker(s), seed {settings['seed']}, "
        f"{settings['time_limit_s']:g} s per solve; {ran_on(settings)}.", "",
        "Per device, in the instance's time unit: *first*, when its first op starts, and *head*, the earliest "
        "it could; *busy*, its work; its idle *warm-up* (before its first backward starts), *middle* (from then "
        "until its last F ends) and *cool-down* (after that); *after*, from its last op's end to the schedule's "
        "end. The bounds are zbsolve's per device; the largest over devices (or the critical path) is the "
        "static bound, which counts middle idle only where memory cannot cover a microbatch's round trip.",
    ]
    for entry in found:
        lines += ["", f"## {entry['instance']}", "",
                  f"Solved {fmt(entry['value'])} ({entry['status']}); static bound {fmt(entry['static bound'])}; "
                  f"gap {entry['value'] - entry['static bound']:.2f}."]
        if entry["setting device"] is not None:
            counted = entry.get("middle counted", 0.0)
            lines += ["", f"Device {entry['setting device']} sets the bound, which allows it "
                      f"{entry['allowance']:.2f} beyond its head and work for its late start, warm-up, cool-down "
                      f"and after, and {counted:.2f} of middle idle; they take {entry['outside']:.2f}, and its "
                      f"middle idle is {entry['middle']:.2f}: gap = "
                      f"{_hundredths(entry['outside'] - entry['allowance'])} + "
                      f"{_hundredths(entry['middle'] - counted)}."]
            waits = next(r for r in entry["devices"] if r["device"] == entry["setting device"])["middle waits"]
            if waits:
                shown = "; ".join(f"{begun:.2f}, {length:.2f}, {op}, {_share(held)}"
                                  for begun, length, op, held in waits[:WAITS_SHOWN])
                lines += ["", "Its longest middle waits (began at, lasted, before op, memory held then as a share "
                          f"of its limit; B8.4 is the B of stage 8, microbatch 4): {shown}."]
        lines.append("")
        lines += markdown_table(["device", *COLUMNS],
                                [[r["device"], *(f"{r[c]:.2f}" for c in COLUMNS)] for r in entry["devices"]])
    return "\n".join(lines) + "\n"


def _share(held: float | None) -> str:
    return "no limit" if held is None else f"{100 * held:.1f}%"


def _hundredths(value: float) -> str:
    """Two decimals, without the sign of a difference that rounds to zero."""
    return f"{0.0 if abs(value) < 0.005 else value:.2f}"


if __name__ == "__main__":
    sys.exit(main())
