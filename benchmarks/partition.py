"""`--partition auto` against the splits users run: the heavy-ends profile (zb-1.5b-layers:
embedding, 22 layers, LM head) and one whose last stage is 1.6x the others under the even
split, P = 4 and 8, M = 2P and 4P, single, interleaved:2 and vshape, at 1x and 1.5x. Each
case: the even split, torchtitan's default and the time-balanced split, each solved, and
auto's answer with its bound over every split. Deterministic (one worker, work units).
Writes benchmarks/partition/results.{md,json}.

    python benchmarks/partition.py [--time-limit 8] [--out benchmarks/partition]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from zbsolve.problem import partition  # noqa: E402
from zbsolve.problem.partition import Layer  # noqa: E402
from zbsolve.problem.problem import StageCost  # noqa: E402
from zbsolve.problem.profiles import load_profile  # noqa: E402
from zbsolve.solvers.partition_search import search  # noqa: E402


def last_stage_heavy(devices: int, body: int = 32) -> list[Layer]:
    """Uniform layers (F 10, B 10, W 7 ms; 3 GB held, 1 GB until W) and a head that makes the
    even split's last stage 1.6x the others: 0.6 of a stage's layers."""
    layer = StageCost(10.0, 10.0, 7.0, 3.0, 1.0)
    share = 0.6 * body / devices
    head = StageCost(10.0 * share, 10.0 * share, 7.0 * share, 3.0 * share, 1.0 * share)
    return ([Layer("tok_embeddings", ("tok_embeddings",), StageCost(0.1, 0.0, 0.1, 0.01, 0.0))]
            + [Layer(f"layers.{i}", (f"layers.{i}",), layer) for i in range(body)]
            + [Layer("lm_head", ("norm", "lm_head"), head)])


def run_case(layers: list[Layer], devices: int, microbatches: int, placement: str, memory: str, comm: float,
             limit: float) -> dict:
    stages = partition.stage_count(placement, devices, microbatches)
    even = partition.even_split(layers, stages)
    problems = partition.split_problems(layers, devices, microbatches, placement=placement, comm=comm, memory=memory)
    began = time.monotonic()
    answer = search(layers, stages, problems, solver="cpsat", time_limit=limit, workers=1)
    took = time.monotonic() - began
    named = {s.name: s for s in answer.named}
    splits = partition.torchtitan_split(layers, stages), partition.balanced_split(layers, stages)

    def value(split):
        found = next((s for s in answer.solved if s.split == split), None)
        return None if found is None or found.schedule is None else found.schedule.value

    best = answer.best
    row = {
        "placement": placement, "devices": devices, "microbatches": microbatches, "memory": memory,
        "even": value(even), "torchtitan": value(splits[0]), "balanced": value(splits[1]),
        "auto": None if best.schedule is None else best.schedule.value, "auto_split": list(best.split),
        "auto_from": best.name, "bound": answer.bound, "splits": answer.splits, "solved": len(answer.solved),
        "how": answer.note, "seconds": round(took, 1), "named": sorted(named),
    }
    others = [v for v in (row["even"], row["torchtitan"], row["balanced"]) if v is not None]
    row["gap"] = None if row["auto"] is None else (row["auto"] - row["bound"]) / row["auto"]
    row["never_slower"] = row["auto"] is not None and all(row["auto"] <= v + 1e-9 for v in others)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=8.0, help="work units per case, shared by its solves")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "partition"))
    args = parser.parse_args()
    heavy = load_profile("zb-1.5b-layers")
    assert heavy.layers is not None
    profiles = {"zb-1.5b-layers": lambda P: list(heavy.layers or ()), "last stage 1.6x": last_stage_heavy}
    comms = {"zb-1.5b-layers": heavy.comm or 0.0, "last stage 1.6x": 0.3}
    rows = []
    for name, layers_for in profiles.items():
        for P in (4, 8):
            for M in (2 * P, 4 * P):
                for placement in ("single", "interleaved:2", "vshape"):
                    for memory in ("1x", "1.5x"):
                        row = {"profile": name, **run_case(layers_for(P), P, M, placement, memory, comms[name],
                                                           args.time_limit)}
                        rows.append(row)
                        print(f"{name} P={P} M={M} {placement} {memory}: auto {row['auto']} "
                              f"({','.join(map(str, row['auto_split']))}), even {row['even']}, "
                              f"gap {100 * (row['gap'] or 0):.2f}%, {row['seconds']} s", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"time_limit_work_units": args.time_limit, "workers": 1, "solver": "cpsat",
                "date": time.strftime("%Y-%m-%d %H:%M"), "python": platform.python_version(),
                "machine": platform.processor() or platform.machine()}
    (out / "results.json").write_text(json.dumps({"settings": settings, "cases": rows}, indent=1) + "\n")
    (out / "results.md").write_text(table(rows, settings))
    print(f"wrote {out / 'results.md'} and {out / 'results.json'}")


def table(rows: list[dict], settings: dict) -> str:
    def ms(v):
        return "-" if v is None else f"{v:.1f}"

    lines = [f"# --partition auto against the splits users run ({settings['date']}, "
             f"{settings['time_limit_work_units']:g} work units a case, one worker)", "",
             "Makespans in ms; `auto` is the best split found, `bound` no contiguous split can beat, `gap` "
             "(auto - bound) / auto; `≤` whether auto is no slower than each split users run.", "",
             "| profile | P | M | placement | memory | even | torchtitan | balanced | auto | split | bound | gap | ≤ |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        gap = "-" if r["gap"] is None else f"{100 * r['gap']:.2f}%"
        lines.append(f"| {r['profile']} | {r['devices']} | {r['microbatches']} | {r['placement']} | {r['memory']} | "
                     f"{ms(r['even'])} | {ms(r['torchtitan'])} | {ms(r['balanced'])} | {ms(r['auto'])} | "
                     f"{','.join(map(str, r['auto_split']))} | {ms(r['bound'])} | "
                     f"{gap} | {'yes' if r['never_slower'] else 'NO'} |")
    gaps = sorted(r["gap"] for r in rows if r["gap"] is not None)
    p8 = sorted(r["gap"] for r in rows if r["gap"] is not None and r["devices"] == 8)
    lines += ["", f"Cases: {len(rows)}; auto no slower than every split users run in "
              f"{sum(r['never_slower'] for r in rows)}; gap median {100 * gaps[len(gaps) // 2]:.2f}%, "
              f"worst {100 * gaps[-1]:.2f}%; at P=8 median {100 * p8[len(p8) // 2]:.2f}%, worst {100 * p8[-1]:.2f}%.",
              ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
