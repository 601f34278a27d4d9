"""Plan against run on this machine: a layer stack profiled with `zbsolve profile` (B and W
split by hand; `--backward torch`, torch's own split; and that with `--probe-runtime`, the
runtime's time between ops and its waits), plans solved from each (and 1F1B), each executed
by `zbsolve run` on P=2 CPU processes with one thread each; then each plan solved again from
a profile calibrated from one run of the probed single-chain 1x plan and run again. Writes
benchmarks/plan_vs_run/results.{md,json} with the verdicts, the measured schedules, traces
and plan-against-run plots.

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
sys.path.insert(0, str(ROOT))
from benchmarks.speed import speed_reference  # noqa: E402

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
        zbsolve("baseline", "1f1b", *common, "--no-split-backward")  # BW at the profile's fused time
    else:
        # The split solve: the fused backward is the 1f1b case (a plain solve would also try it).
        zbsolve("solve", *common, "--split-backward", "--time-limit", "20", "--workers", "1", "-q")
    return path


def run(out: Path, plan_path: Path, stack: Path, steps: int, repeats: int) -> dict:
    """`zbsolve run` the plan `repeats` times; the first run's files, verdict and plot are kept."""
    measured = plan_path.with_name(plan_path.name.replace("plan-", "measured-"))
    medians, verdict = [], ""
    for i in range(repeats):
        files = ["-o", str(measured), "--trace", str(measured.with_suffix(".trace.json"))] if i == 0 else []
        text = zbsolve("run", str(plan_path), "--profile", str(stack), "--steps", str(steps), "--warmup", "3", *files)
        step = re.search(r"planned ([\d.]+) ms, measured median ([\d.]+) ms", text)
        planned = float(step.group(1))
        medians.append(float(step.group(2)))
        verdict = verdict or text.strip()
    zbsolve("plot", str(plan_path), "--reference", str(measured), "-o", str(measured.with_suffix(".png")))
    return {"planned_ms": planned, "measured_ms": medians, "verdict": verdict, "measured": measured.name}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each plan (the machine's speed drifts)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "plan_vs_run"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shape = ["--layers", "2", "--hidden", str(args.hidden), "--heads", "4", "--seq", "128", "--microbatch-size", "2"]
    profiled_at = speed_reference()  # the VM's speed drifts: each row says how fast it ran against this
    stack, split, probed = out / "stack.json", out / "stack-torch.json", out / "stack-probed.json"
    zbsolve("profile", "--device", "cpu", *shape, "-o", str(stack))
    zbsolve("profile", "--device", "cpu", *shape, "--backward", "torch", "-o", str(split))
    zbsolve("profile", "--device", "cpu", *shape, "--backward", "torch", "--probe-runtime", "-o", str(probed))
    rows = []

    def case(tag: str, profile: Path, placement: str, memory: str, how: str) -> dict:
        path = plan(out, profile, placement, memory, how, tag)
        speed = speed_reference()
        result = run(out, path, stack, args.steps, args.repeats)
        rows.append({"profile": tag, "placement": placement, "memory": memory, "plan": how, "speed": speed,
                     **result})
        print(f"{tag} {placement} {memory} {how}: planned {result['planned_ms']} ms, measured "
              f"{result['measured_ms']} ms", flush=True)
        return result

    calibrated = out / "calibrated.json"
    for tag, profile in (("products", stack), ("torch-split", split), ("probed", probed)):
        for placement, memory, how in CASES:
            result = case(tag, profile, placement, memory, how)
            if (tag, placement, memory, how) == ("probed", "single", "1x", "solve"):  # one run calibrates all
                zbsolve("profile", "--from-run", str(out / result["measured"]), "-o", str(calibrated))
    for placement, memory, how in CASES:
        case("calibrated", calibrated, placement, memory, how)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    (out / "results.json").write_text(json.dumps({"machine": machine, "date": time.strftime("%Y-%m-%d %H:%M"),
                                                  "hidden": args.hidden, "steps": args.steps, "repeats": args.repeats,
                                                  "speed_at_profiling": profiled_at, "rows": rows},
                                                 indent=1) + "\n")
    lines = ["# Plan against run", "",
             f"P=2 ranks on the CPU, one thread each (gloo), M=8; a stack of 2 GPT layers, hidden {args.hidden}, "
             f"4 heads, sequence 128, microbatch size 2; {args.steps} measured steps after 3 warm-ups; {machine}; "
             f"{time.strftime('%Y-%m-%d %H:%M')}. Profiles: `products` (`zbsolve profile`, W the weight products "
             "alone), `torch-split` (`zbsolve profile --backward torch`), `probed` (that with `--probe-runtime`: "
             "op_overhead and comm from a ZB-H1 run of the stack), `calibrated` (`zbsolve profile "
             "--from-run` on the first run of the probed single 1x solved plan), plans solved from each (1F1B with "
             "its backward fused, BW at the profile's fused time where it gives one); every plan run several "
             "times, the verdict of its first run below. Speed: the seconds of `benchmarks/speed.py`'s fixed "
             f"Python work just before a row's runs, against {profiled_at['python_s']:g} s before the profiles "
             "(more is slower).", "",
             f"| profile | placement | memory | plan | planned (ms) | measured median, {args.repeats} runs (ms) | "
             "off by | speed (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        off = [100 * (m - r["planned_ms"]) / r["planned_ms"] for m in r["measured_ms"]]
        lines.append(f"| {r['profile']} | {r['placement']} | {r['memory']} | {r['plan']} | {r['planned_ms']} | "
                     f"{', '.join(f'{m:.1f}' for m in r['measured_ms'])} | {', '.join(f'{o:+.1f}%' for o in off)} | "
                     f"{r['speed']['python_s']:g} |")
    lines += ["", "Verdicts:", ""]
    for r in rows:
        lines += [f"- {r['profile']} {r['placement']} {r['memory']} {r['plan']}:", "", "  ```",
                  *[f"  {line}" for line in r["verdict"].splitlines()], "  ```", ""]
    (out / "results.md").write_text("\n".join(lines))
    print(f"wrote {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
