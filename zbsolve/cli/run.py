"""`zbsolve run`: execute a plan with PyTorch on this machine, one process per rank,
and hold the plan to what ran (docs/runtime.md, "Plan against run")."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from zbsolve.errors import UsageError
from zbsolve.formats.atomic_files import check_separate, check_writable, write_atomic
from zbsolve.formats.chrome_trace import write_chrome_trace
from zbsolve.formats.schedule_json import read_schedule, write_schedule
from zbsolve.problem.profiles import load_profile, profile_from_dict
from zbsolve.runtime.profiling import DTYPES
from zbsolve.schedule.validator import validate

SHAPE = (("layers", "--layers"), ("hidden", "--hidden"), ("heads", "--heads"), ("sequence", "--seq"),
         ("microbatch_size", "--microbatch-size"))


def add_shape_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--layers", type=int, help=f"layers per rank-stage{what}")
    parser.add_argument("--hidden", type=int, help=f"hidden size{what}")
    parser.add_argument("--heads", type=int, help=f"attention heads{what}")
    parser.add_argument("--seq", type=int, help=f"sequence length{what}")
    parser.add_argument("--microbatch-size", type=int, help=f"samples per microbatch{what}")


def shape_from(args: argparse.Namespace, model: dict | None = None):
    """The layer stack: flags, else the model a `zbsolve profile` profile records."""
    from zbsolve.runtime.profiling import LayerShape

    values = {}
    for field, option in SHAPE:
        given = getattr(args, "seq" if field == "sequence" else field)
        value = given if given is not None else (model or {}).get(field)
        if value is None:
            raise UsageError(f"{option} is required (or a --profile made by zbsolve profile, which records it)")
        values[field] = value
    shape = LayerShape(**values)
    shape.check()
    return shape


def register_run(command) -> None:
    p = command("run", "execute a plan with PyTorch (one process per rank: CPU, or a GPU each), measure every "
                       "op, and compare plan and run", run_run)
    p.add_argument("plan", help="a zbsolve schedule file (JSON)")
    p.add_argument("--profile", metavar="FILE", help="the profile the plan was made from: its model gives the "
                                                     "layer stack (zbsolve profile records it)")
    add_shape_options(p, " (default: the profile's)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cpu (default): one process per rank, gloo, one thread each; cuda: one GPU per rank, "
                        "NCCL, ops timed with CUDA events and each rank's allocator peak reported")
    p.add_argument("--dtype", choices=DTYPES, help="element type of the stack (default: the profile's, else "
                                                   "float32)")
    p.add_argument("--steps", type=int, default=10, help="measured steps (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="steps run first and not measured (default 3)")
    p.add_argument("-o", "--output", metavar="FILE", help="the measured schedule (status measured: the median "
                                                          "step's ops, the plan's problem)")
    p.add_argument("--trace", metavar="FILE", help="a Chrome trace of the measured step")


def run_run(args: argparse.Namespace) -> int:
    from zbsolve.runtime.execute import run_plan
    from zbsolve.runtime.measured import measured_run, verdict

    outputs = {"-o": args.output, "--trace": args.trace}
    check_separate({"the plan": args.plan, "--profile": args.profile}, outputs)
    for path in outputs.values():
        if path:
            check_writable(path)
    plan = read_schedule(args.plan)
    validate(plan)
    profile = load_profile(args.profile) if args.profile else None
    check_plan_profile(plan, profile, args.plan, args.profile)
    extra = profile.extra if profile is not None else {}
    model, measured = extra.get("model"), extra.get("measured")
    shape = shape_from(args, model if isinstance(model, dict) else None)
    dtype = args.dtype or (measured.get("dtype") if isinstance(measured, dict) else None) or "float32"
    where = "GPUs" if args.device == "cuda" else "CPU processes, one thread each"
    cores = os.cpu_count() or 1
    if args.device == "cpu" and plan.problem.devices > cores:
        print(f"zbsolve run: warning: {plan.problem.devices} ranks share {cores} cores: each runs slower than the "
              "plan's costs say, and the verdict will show it", file=sys.stderr)
    if plan.offloaded():
        here = ("pinned host memory, on a copy stream" if args.device == "cuda" else
                "host memory, on CPU the ranks' own: the copies run and free nothing")
        print(f"zbsolve run: note: the plan offloads {plan.offloaded()} microbatch-stages; torch has no action for "
              f"copies, so what their forwards save goes to {here}; it comes back when the backward first needs it, "
              "not where the plan put the copy back, and the memory measured counts none of it",
              file=sys.stderr)
    if plan.recomputed():
        print(f"zbsolve run: note: the plan recomputes {plan.recomputed()} microbatch-stages; torch has no action for "
              "it, so they run under activation checkpointing and recompute inside their backward: the measured "
              "backward times include their R's, and the memory measured per forward counts whole activations",
              file=sys.stderr)
    print(f"running {plan.name} ({plan.problem.placement}, P={plan.problem.devices}, M={plan.problem.microbatches}) "
          f"on {plan.problem.devices} {where}, {dtype}: {args.warmup} warm-up and {args.steps} measured steps",
          file=sys.stderr)
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # stops the ranks, exits 130
    try:
        records = run_plan(plan, shape, args.steps, args.warmup, args.device, dtype)
    finally:
        signal.signal(signal.SIGTERM, previous)
    run = measured_run(plan, records)
    validate(run.schedule)  # every op once, one at a time in order, after its inputs
    lines = verdict(run)
    for line in lines:
        print(line)
    if args.output:
        write_schedule(run.schedule, args.output)
        print(f"wrote {args.output}")
        if lines[-1].startswith("drifts past"):
            print(f"to plan with what ran: zbsolve profile --from-run {args.output} -o calibrated.json, then solve "
                  "with --profile calibrated.json")
    if args.trace:
        write_chrome_trace(run.schedule, args.trace)
        print(f"wrote {args.trace}")
    return 0


def check_plan_profile(plan, profile, plan_path: str, profile_path: str | None) -> None:
    """A plan runs with the profile it was solved from (the one its file names): another
    profile's stack is not what the plan's times describe, and the verdict would only measure
    that difference."""
    made_from = plan.problem.profile
    if profile is None or made_from is None or profile.fingerprint.split(" from ")[0] in made_from.split(" from "):
        return  # its own profile, or the one whose run calibrated it (its stack)
    raise UsageError(f"{plan_path} was solved from profile {made_from}, and --profile {profile_path} is "
                     f"{profile.fingerprint}: run a plan with its own profile, or give the stack with --layers, "
                     "--hidden, --heads, --seq and --microbatch-size instead of --profile")


def run_calibration(args: argparse.Namespace) -> int:
    """`zbsolve profile --from-run MEASURED -o NAME.json`."""
    from zbsolve.runtime.measured import calibrated_profile

    if args.probe_runtime:
        raise UsageError("--probe-runtime measures a stack's runtime; --from-run takes it from the run")
    check_separate({"the measured schedule": args.from_run}, {"-o": args.output})
    check_writable(args.output)
    measured = read_schedule(args.from_run)
    validate(measured)
    name = args.name or os.path.splitext(os.path.basename(args.output))[0]
    document = calibrated_profile(measured, name)
    profile_from_dict(document, args.output)  # what we write must be what solve reads
    write_atomic(args.output, json.dumps(document, indent=1) + "\n")
    for rank, c in enumerate(document["stage_costs"]):
        fused = f", fused BW {c['BW']:.4g} ms" if "BW" in c else ""
        print(f"rank-stage {rank}: F {c['F']:.4g} ms, B {c['B']:.4g} ms, W {c['W']:.4g} ms{fused}")
    c = document["first_stage"]
    print(f"the pipe's first stage: F {c['F']:.4g} ms, B {c['B']:.4g} ms, W {c['W']:.4g} ms, fused BW {c['BW']:.4g} ms")
    print(f"op_overhead {document['op_overhead']:.4g} ms, comm {document['comm']:.4g} ms; {document['notes']}; "
          f"from {args.from_run}")
    print(f"wrote {args.output}")
    return 0
