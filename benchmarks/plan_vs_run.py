"""Plan against run on this machine: a layer stack profiled with `zbsolve profile`, plans
solved from it (and 1F1B), each executed by `zbsolve run` on P=2 CPU processes with one
thread each; then a profile calibrated from the first run, the plans solved again from it
and run again. Writes benchmarks/plan_vs_run/results.{md,json} with the verdicts, the
measured schedules, traces and plan-against-run plots.

    python benchmarks/plan_vs_run.py [--hidden 256] [--steps 10] [--out benchmarks/plan_vs_run]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = [("single", "1x", "solve"), ("single", "2x", "solve"), ("vshape", "1x", "solve"), ("single", "1x", "1f1b")]


def zbsolve(*args: str) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "zbsolve", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, check=False)
    if done.returncode:
        raise SystemExit(f"zbsolve {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def plan(out: Path, profile: Path, placement: str, memory: str, how: str, tag: str) -> Path:
    path = out / f"plan-{tag}-{placement}-{memory}-{how}.json"
    common = ["--profile", str(profile), "--stages", "2", "--microbatches", "8", "--placement", placement,
              "--memory", memory, "-o", str(path)]
    if how == "1f1b":
        zbsolve("baseline", "1f1b", *common)
    else:
        zbsolve("solve", *common, "--time-limit", "20", "--workers", "1", "-q")
    return path


def run(out: Path, plan_path: Path, stack: Path, steps: int) -> dict:
    measured = plan_path.with_name(plan_path.name.replace("plan-", "measured-"))
    text = zbsolve("run", str(plan_path), "--profile", str(stack), "--steps", str(steps), "--warmup", "3",
                   "-o", str(measured), "--trace", str(measured.with_suffix(".trace.json")))
    step = re.search(r"planned ([\d.]+) ms, measured median ([\d.]+) ms", text)
    zbsolve("plot", str(plan_path), "--reference", str(measured), "-o", str(measured.with_suffix(".png")))
    return {"planned_ms": float(step.group(1)), "measured_ms": float(step.group(2)), "verdict": text.strip(),
            "measured": measured.name}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "plan_vs_run"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stack = out / "stack.json"
    zbsolve("profile", "--device", "cpu", "--layers", "2", "--hidden", str(args.hidden), "--heads", "4",
            "--seq", "128", "--microbatch-size", "2", "-o", str(stack))
    rows = []
    for tag, profile in (("profiled", stack), ("calibrated", out / "calibrated.json")):
        for placement, memory, how in CASES:
            path = plan(out, profile, placement, memory, how, tag)
            result = run(out, path, stack, args.steps)
            rows.append({"profile": tag, "placement": placement, "memory": memory, "plan": how, **result})
            print(f"{tag} {placement} {memory} {how}: planned {result['planned_ms']} ms, measured "
                  f"{result['measured_ms']} ms", flush=True)
            if tag == "profiled" and not (out / "calibrated.json").exists():
                zbsolve("profile", "--from-run", str(out / result["measured"]), "-o", str(out / "calibrated.json"))
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    (out / "results.json").write_text(json.dumps({"machine": machine, "date": time.strftime("%Y-%m-%d %H:%M"),
                                                  "hidden": args.hidden, "steps": args.steps, "rows": rows},
                                                 indent=1) + "\n")
    lines = ["# Plan against run", "",
             f"P=2 ranks on the CPU, one thread each (gloo), M=8; a stack of 2 GPT layers, hidden {args.hidden}, "
             f"4 heads, sequence 128, microbatch size 2; {args.steps} measured steps after 3 warm-ups; {machine}; "
             f"{time.strftime('%Y-%m-%d %H:%M')}. `calibrated`: the profile written from the first run "
             "(`zbsolve profile --from-run`), plans solved again from it.", "",
             "| profile | placement | memory | plan | planned (ms) | measured median (ms) | off by |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        off = 100 * (r["measured_ms"] - r["planned_ms"]) / r["planned_ms"]
        lines.append(f"| {r['profile']} | {r['placement']} | {r['memory']} | {r['plan']} | {r['planned_ms']} | "
                     f"{r['measured_ms']} | {off:+.1f}% |")
    lines += ["", "Verdicts:", ""]
    for r in rows:
        lines += [f"- {r['profile']} {r['placement']} {r['memory']} {r['plan']}:", "", "  ```",
                  *[f"  {line}" for line in r["verdict"].splitlines()], "  ```", ""]
    (out / "results.md").write_text("\n".join(lines))
    print(f"wrote {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
