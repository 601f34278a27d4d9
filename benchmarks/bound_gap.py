"""How far the lower bound sits below the optimum, on instances small enough to prove.

    python benchmarks/bound_gap.py [--time-limit 120] [--workers 2] [--only TEXT] [--out benchmarks/bound_gap]

The standard suite's gaps above 3% (V-shape at 0.5x, F&B pairs; see results.md) do not say
whether the schedule or the bound falls short. The `bound-gap` suite holds smaller instances
of those families with the same per-rank costs. Each is solved in a fresh process; where
CP-SAT proves the optimum, (optimum - static bound) / optimum is the shortfall of the bound
that zbsolve computes before any search (`zbsolve.solvers.lower_bound`), which only a
stronger bound can close. Where it proves nothing, the shortfall lies between what CP-SAT's
final bound and what the best schedule say. Writes DIR/bound_gap.json and DIR/bound_gap.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.instances import SUITES, matching  # noqa: E402
from benchmarks.run import fmt, in_child, machine, markdown_table, parsed, ran_on, run_instance  # noqa: E402

HERE = Path(__file__).resolve().parent
SUITE = "bound-gap"


def shortfall(static: float, solved: float, bound: float) -> tuple[float, float]:
    """The static bound's distance below the optimum, as a share of it: at least what the
    final bound shows, at most what the best schedule shows (equal once proven optimal)."""
    return max(0.0, (bound - static) / solved), (solved - static) / solved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per instance (default 120)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", metavar="TEXT",
                        help="only the instance named TEXT, or if none is, those whose name contains TEXT")
    parser.add_argument("--out", default=str(HERE / "bound_gap"), help="output folder")
    args = parsed(parser)
    from zbsolve.solvers import lower_bound

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"suite": SUITE, "workers": args.workers, "time_limit_s": args.time_limit, "solver": "cpsat",
                "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine()}
    instances = SUITES[SUITE]()
    chosen = matching(instances, args.only or "")  # every name contains ""
    if not chosen:
        print(f"no instance of the {SUITE} suite matches {args.only!r}", file=sys.stderr)
        return 2
    rows = []
    for count, index in enumerate(chosen, 1):
        instance = instances[index]
        print(f"[{count}/{len(chosen)}] {instance.name} ...", end=" ", flush=True)
        row = in_child(run_instance, SUITE, index, args.time_limit, args.workers, "cpsat", False)
        if "error" not in row:
            row["static_bound"] = lower_bound(instance.build())
            row["shortfall_min"], row["shortfall_max"] = shortfall(row["static_bound"], row["solved"], row["bound"])
        row.setdefault("instance", instance.name)
        rows.append(row)
        print(row.get("error") or f"{row['solved']:g} {row['status']} (static bound {row['static_bound']:g})",
              flush=True)
        (out / "bound_gap.json").write_text(json.dumps({"settings": settings, "instances": rows}, indent=1) + "\n",
                                            encoding="utf-8")
    write_markdown(out / "bound_gap.md", settings, rows)
    print(f"wrote {out / 'bound_gap.md'}")
    return 0


def write_markdown(path: Path, settings: dict, rows: list[dict]) -> None:
    lines = [
        "# Static bound against the optimum", "",
        f"Suite `{SUITE}`, CP-SAT, {settings['workers']} worker(s), wall clock {settings['time_limit_s']:g} s per "
        f"instance; {ran_on(settings)}.", "",
        "*static bound*: `zbsolve.solvers.lower_bound`, known before any search. *shortfall*: how far it "
        "lies below the optimum, as a share of the optimum; a range where the optimum was not proven "
        "(from CP-SAT's final bound up to the best schedule).", "",
    ]
    cells = []
    for r in rows:
        if "error" in r:
            cells.append([r["instance"], "", "", "", "", f"error: {r['error']}"])
            continue
        low, high = r["shortfall_min"], r["shortfall_max"]
        share = f"{100 * high:.2f}%" if r["status"] == "optimal" else f"{100 * low:.2f}% to {100 * high:.2f}%"
        cells.append([r["instance"], r["ops"], fmt(r["static_bound"]), fmt(r["solved"]), fmt(r["bound"]),
                      r["status"], share, r["total_s"]])
    lines += markdown_table(["instance", "ops", "static bound", "solved", "final bound", "status", "shortfall",
                             "total (s)"], cells)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
