"""How the result after a time limit changes with the number of CP-SAT workers.

    python benchmarks/workers.py run --workers 8 [--time-limit 60] [--instance NAME ...] [--out benchmarks/workers]
    python benchmarks/workers.py report [--out benchmarks/workers]

`run` solves the chosen instances of the standard suite (by default those that the committed
benchmarks/results.json did not prove optimal) with one worker count under a wall-clock limit
(also with one worker, which zbsolve otherwise limits by work), each instance in a fresh
process, and writes DIR/workers-<W>.json. Runs with different counts may go on at the same
time on a machine with enough cores; each row records the load average around its solve, so
the report shows whether they did. `report` gathers DIR/workers-*.json into DIR/workers.md: solved
value, bound, gap and status per instance and worker count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.instances import SUITES  # noqa: E402
from benchmarks.run import _fmt, _in_child, machine, parsed, run_instance  # noqa: E402

HERE = Path(__file__).resolve().parent


def not_proven_optimal(results: Path) -> list[str]:
    rows = json.loads(results.read_text(encoding="utf-8"))["instances"]
    return [row["instance"] for row in rows if row.get("status") not in ("optimal", None)]


def run(args: argparse.Namespace) -> int:
    instances = SUITES["standard"]()
    names = args.instance or not_proven_optimal(HERE / "results.json")
    index = {instance.name: i for i, instance in enumerate(instances)}
    unknown = [name for name in names if name not in index]
    if unknown:
        print(f"no such instance in the standard suite: {', '.join(unknown)}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"workers": args.workers, "time_limit_s": args.time_limit, "solver": "cpsat",
                "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine()}
    rows = []
    for count, name in enumerate(names, 1):
        print(f"[{count}/{len(names)}] {name}, {args.workers} worker(s) ...", end=" ", flush=True)
        load_before = os.getloadavg()[0]
        # The clock, not CP-SAT's work measure, limits every count: the question is what a minute buys.
        row = _in_child(run_instance, "standard", index[name], args.time_limit, args.workers, "cpsat", False)
        row.update(instance=name, load_before=round(load_before, 1), load_after=round(os.getloadavg()[0], 1))
        rows.append(row)
        print(row.get("error") or f"{row['solved']:g} (bound {row['bound']:g}, gap {100 * row['gap']:.2f}%)",
              flush=True)
        path = out / f"workers-{args.workers}.json"
        path.write_text(json.dumps({"settings": settings, "instances": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


def report(args: argparse.Namespace) -> int:
    out = Path(args.out)
    runs = sorted((json.loads(path.read_text(encoding="utf-8")) for path in out.glob("workers-*.json")),
                  key=lambda found: found["settings"]["workers"])
    if not runs:
        print(f"no workers-*.json in {out}", file=sys.stderr)
        return 2
    counts = [found["settings"]["workers"] for found in runs]
    lines = ["# Gap after the time limit against CP-SAT workers", ""]
    for found in runs:
        s, m = found["settings"], found["settings"]["machine"]
        lines.append(f"- {s['workers']} worker(s): {s['time_limit_s']:g} s per instance, run {s['date']} on "
                     f"{m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Python {m['python']}, "
                     f"OR-Tools {m['ortools']}.")
    lines += ["", "Each cell: solved value / gap to the best bound that run proved (status). *load*: the "
              "machine's 1-minute load average before and after each solve, to show runs that shared it.", "",
              "| instance | ops | " + " | ".join(f"{w} worker(s)" for w in counts) + " | "
              + " | ".join(f"load ({w})" for w in counts) + " |",
              "|---|---|" + "---|" * (2 * len(counts))]
    names = list(dict.fromkeys(row["instance"] for found in runs for row in found["instances"]))
    for name in names:
        cells, loads, ops = [], [], "-"
        for found in runs:
            row = next((r for r in found["instances"] if r["instance"] == name), None)
            if row is None or "error" in row:
                cells.append(row["error"] if row else "-")
                loads.append("-")
                continue
            ops = row["ops"]
            cells.append(f"{_fmt(row['solved'])} / {100 * row['gap']:.2f}% ({row['status']})")
            loads.append(f"{row['load_before']}-{row['load_after']}")
        lines.append(f"| {name} | {ops} | " + " | ".join(cells) + " | " + " | ".join(loads) + " |")
    (out / "workers.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out / 'workers.md'}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    solving = commands.add_parser("run", help="solve the chosen instances with one worker count")
    solving.add_argument("--workers", type=int, required=True)
    solving.add_argument("--time-limit", type=float, default=60.0, help="seconds per instance (default 60)")
    solving.add_argument("--instance", action="append", metavar="NAME",
                         help="an instance of the standard suite, by its full name (repeatable; default: those "
                              "benchmarks/results.json did not prove optimal)")
    solving.add_argument("--out", default=str(HERE / "workers"), help="folder for workers-<W>.json")
    reporting = commands.add_parser("report", help="gather the folder's workers-*.json into workers.md")
    reporting.add_argument("--out", default=str(HERE / "workers"), help="folder holding workers-*.json")
    args = parsed(parser)
    return run(args) if args.command == "run" else report(args)


if __name__ == "__main__":
    sys.exit(main())
