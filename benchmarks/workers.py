"""How the result after a time limit changes with the number of CP-SAT workers.

    python benchmarks/workers.py run --workers 8 [--time-limit 60] [--instance NAME ...] [--out benchmarks/workers]
    python benchmarks/workers.py pack [--counts 1,2,8,16] [--cores N] [--time-limit 60] [--instance NAME ...]
                                      [--out benchmarks/workers]
    python benchmarks/workers.py report [--out benchmarks/workers]

`run` solves the chosen instances of the standard suite (by default those that the committed
benchmarks/results.json did not prove optimal) with one worker count under a wall-clock limit
(also with one worker, which zbsolve otherwise limits by work), each instance in a fresh
process, and writes DIR/workers-<W>.json. Runs with different counts may go on at the same
time on a machine with enough cores; each row records the load average around its solve, so
the report shows whether they did. `pack` runs every worker count over the instances on one
machine at once, never asking for more workers in all than it has cores: the largest counts
first (a run of all the cores alone), then smaller ones side by side; each row records the
most workers other runs asked for while it ran. `report` gathers DIR/workers-*.json into
DIR/workers.md: solved value, bound, gap and status per instance and worker count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.instances import SUITES  # noqa: E402
from benchmarks.run import fmt, in_child, integer_list, machine, parsed, run_instance  # noqa: E402

HERE = Path(__file__).resolve().parent


def not_proven_optimal(results: Path) -> list[str]:
    rows = json.loads(results.read_text(encoding="utf-8"))["instances"]
    return [row["instance"] for row in rows if row.get("status") not in ("optimal", None)]


def chosen(args: argparse.Namespace) -> dict[str, int] | None:
    """The instances asked for (by default the unproven ones), each with its index in the
    standard suite; None, after saying which, when a name is not in the suite."""
    index = {instance.name: i for i, instance in enumerate(SUITES["standard"]())}
    names = args.instance or not_proven_optimal(HERE / "results.json")
    unknown = [name for name in names if name not in index]
    if unknown:
        print(f"no such instance in the standard suite: {', '.join(unknown)}", file=sys.stderr)
        return None
    return {name: index[name] for name in names}


def solve_row(index: int, name: str, workers: int, time_limit: float) -> dict:
    load_before = os.getloadavg()[0]
    # The clock, not CP-SAT's work measure, limits every count: the question is what a minute buys.
    row = in_child(run_instance, "standard", index, time_limit, workers, "cpsat", False)
    row.update(instance=name, load_before=round(load_before, 1), load_after=round(os.getloadavg()[0], 1))
    return row


def said(row: dict) -> str:
    return row.get("error") or f"{row['solved']:g} (bound {row['bound']:g}, gap {100 * row['gap']:.2f}%)"


def run_settings(workers: int, time_limit: float, **more) -> dict:
    """What a workers-<W>.json records of how its runs went."""
    return {"workers": workers, "time_limit_s": time_limit, "solver": "cpsat",
            "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(), **more}


def save(out: Path, settings: dict, rows: list[dict]) -> None:
    path = out / f"workers-{settings['workers']}.json"
    path.write_text(json.dumps({"settings": settings, "instances": rows}, indent=1) + "\n", encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    index = chosen(args)
    if index is None:
        return 2
    names = list(index)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = run_settings(args.workers, args.time_limit)
    rows = []
    for count, name in enumerate(names, 1):
        print(f"[{count}/{len(names)}] {name}, {args.workers} worker(s) ...", end=" ", flush=True)
        rows.append(solve_row(index[name], name, args.workers, args.time_limit))
        print(said(rows[-1]), flush=True)
        save(out, settings, rows)
    return 0


class Packer:
    """Starts runs while the workers they ask for fit in the cores, in the order given, and
    notes for each run the most workers other runs held while it ran."""

    def __init__(self, cores: int) -> None:
        self.cores = cores
        self.running: dict[int, dict] = {}
        self.changed = threading.Condition()

    def busy(self) -> int:
        return sum(run["workers"] for run in self.running.values())

    def start(self, key: int, workers: int) -> bool:
        """Mark a run started if it fits now (call with `changed` held)."""
        held = self.busy()
        if held + workers > self.cores:
            return False
        for other in self.running.values():
            other["others"] = max(other["others"], held + workers - other["workers"])
        self.running[key] = {"workers": workers, "others": held}
        return True

    def finish(self, key: int) -> int:
        """Mark a run ended (call with `changed` held); the most workers others held meanwhile."""
        self.changed.notify_all()
        return self.running.pop(key)["others"]


def pack(args: argparse.Namespace) -> int:
    index = chosen(args)
    if index is None:
        return 2
    counts = sorted(set(args.counts), reverse=True)
    if counts[0] > args.cores:
        print(f"{counts[0]} workers do not fit in {args.cores} cores (--cores)", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shared = run_settings(0, args.time_limit, packed=f"{', '.join(map(str, counts))} workers on {args.cores} cores")
    settings = {w: {**shared, "workers": w} for w in counts}
    rows: dict[int, list[dict]] = {w: [] for w in counts}
    pending = [(w, name) for w in counts for name in index]
    packer, threads, t0 = Packer(args.cores), [], time.monotonic()

    def solve_one(key: int, workers: int, name: str) -> None:
        try:
            row = solve_row(index[name], name, workers, args.time_limit)
        except Exception as error:  # the run's cores must be handed back whatever happened
            row = {"instance": name, "error": f"{type(error).__name__}: {error}"}
        with packer.changed:
            row["others_workers"] = packer.finish(key)
            rows[workers].append(row)
            rows[workers].sort(key=lambda r: list(index).index(r["instance"]))
            save(out, settings[workers], rows[workers])
            print(f"{time.monotonic() - t0:6.0f} s  done {name}, {workers} worker(s): {said(row)}, "
                  f"others held up to {row['others_workers']}", flush=True)

    with packer.changed:
        while pending:
            fits = next((job for job in pending if packer.start(len(threads), job[0])), None)
            if fits is None:
                packer.changed.wait()
                continue
            pending.remove(fits)
            print(f"{time.monotonic() - t0:6.0f} s  start {fits[1]}, {fits[0]} worker(s)", flush=True)
            threads.append(threading.Thread(target=solve_one, args=(len(threads), *fits)))
            threads[-1].start()
    for thread in threads:
        thread.join()
    return report(args)


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
                     f"OR-Tools {m['ortools']}" + (f"; packed: {s['packed']}" if "packed" in s else "") + ".")
    lines += ["", "Each cell: solved value / gap to the best bound that run proved (status). *load*: the "
              "machine's 1-minute load average before and after each solve, to show runs that shared it; "
              "after a comma, for packed runs, the most workers other runs held while it ran.", "",
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
            cells.append(f"{fmt(row['solved'])} / {100 * row['gap']:.2f}% ({row['status']})")
            loads.append(f"{row['load_before']}-{row['load_after']}"
                         + (f", {row['others_workers']}" if "others_workers" in row else ""))
        lines.append(f"| {name} | {ops} | " + " | ".join(cells) + " | " + " | ".join(loads) + " |")
    (out / "workers.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out / 'workers.md'}")
    return 0


def counts_list(text: str) -> list[int]:
    return integer_list(text, "worker counts", 1)


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
    packing = commands.add_parser("pack", help="run several worker counts side by side within the cores")
    packing.add_argument("--counts", type=counts_list, default=[1, 2, 8, 16],
                         help="worker counts, comma-separated (default 1,2,8,16)")
    packing.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                         help="workers all runs together may hold (default: this machine's cores)")
    packing.add_argument("--time-limit", type=float, default=60.0, help="seconds per instance (default 60)")
    packing.add_argument("--instance", action="append", metavar="NAME",
                         help="as for run (repeatable; default: those benchmarks/results.json did not prove "
                              "optimal)")
    packing.add_argument("--out", default=str(HERE / "workers"), help="folder for workers-<W>.json and workers.md")
    reporting = commands.add_parser("report", help="gather the folder's workers-*.json into workers.md")
    reporting.add_argument("--out", default=str(HERE / "workers"), help="folder holding workers-*.json")
    args = parsed(parser)
    return {"run": run, "pack": pack, "report": report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
