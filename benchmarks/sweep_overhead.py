"""Wall time of one sweep run three ways: one local process, two local processes, and a local
Ray instance; the same deterministic (work-limited) solves each time, so the differences are
the ways' own costs. Writes benchmarks/sweep/overhead.{json,md}.

    python benchmarks/sweep_overhead.py [--time-limit 2] [--out benchmarks/sweep]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRID = ["--profile", str(ROOT / "models" / "zb-1.5b.json"), "--stages", "8", "--placements", "single",
        "--microbatches", "16,24", "--memory", "0.5x:2x:8", "--workers", "1", "--deterministic", "-q"]
WAYS = {"pool, --jobs 1": ["--jobs", "1"], "pool, --jobs 2": ["--jobs", "2"], "Ray (local, 2 CPUs)": ["--ray", "local"]}


def run(way: list[str], store: Path, time_limit: float) -> float:
    began = time.monotonic()
    subprocess.run([sys.executable, "-m", "zbsolve", "sweep", *GRID, "--time-limit", str(time_limit),
                    "--store", str(store), *way], check=True, cwd=ROOT, capture_output=True)
    return time.monotonic() - began


def values(store: Path) -> list:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT key, name, value, status FROM results ORDER BY key, name").fetchall()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=2.0, help="work units per point (default 2)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "sweep"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, stores = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, way in WAYS.items():
            store = Path(scratch) / f"{len(stores)}.db"
            seconds = run(way, store, args.time_limit)
            stores[name] = values(store)
            rows.append({"way": name, "wall_s": round(seconds, 2)})
            print(f"{name}: {seconds:.1f} s", flush=True)
    points = len({key for key, *_ in next(iter(stores.values()))})
    same = all(v == next(iter(stores.values())) for v in stores.values())
    pool2 = next(r["wall_s"] for r in rows if r["way"] == "pool, --jobs 2")
    ray = next(r["wall_s"] for r in rows if r["way"].startswith("Ray"))
    result = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
              "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M"),
              "points": points, "time_limit_work_units": args.time_limit, "rows": rows,
              "same_results": same, "ray_overhead_per_point_s": round((ray - pool2) / points, 2)}
    (out / "overhead.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = ["# Sweep overhead", "",
             f"{points} points (1.5B profile, P=8, single, M in {{16, 24}}, memory 0.5x to 2x in eight steps), "
             f"deterministic solves of {args.time_limit:g} work units, one worker each; {result['machine']}, "
             f"Python {result['python']}, {result['date']}.", "",
             "| way | wall time (s) |", "|---|---|"]
    lines += [f"| {r['way']} | {r['wall_s']} |" for r in rows]
    lines += ["", f"The three stores hold the same values and statuses: {'yes' if same else 'no'}. "
              f"Ray's overhead per point against the two-process pool: {result['ray_overhead_per_point_s']} s "
              "(its start included)."]
    (out / "overhead.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'overhead.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
