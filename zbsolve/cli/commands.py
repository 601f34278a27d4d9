"""Sub-commands: each one parses its options, calls the library, prints or writes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace

from zbsolve.baselines import BASELINES, run_baseline
from zbsolve.baselines.reference import one_f_one_b_as_run
from zbsolve.errors import UsageError, ValidationError
from zbsolve.formats.atomic_files import check_separate, check_writable
from zbsolve.formats.chrome_trace import chrome_trace, write_chrome_trace
from zbsolve.formats.torch_csv import torch_csv, write_torch_csv
from zbsolve.runtime.profiling import BACKWARDS, DTYPES
from zbsolve.schedule.schedule import Schedule
from zbsolve.schedule.validator import validate
from zbsolve.solvers import check_solver_options

from .choices import choices_from_args, print_choices, timed_rows
from .inputs import is_csv, read_any
from .options import add_problem_options, problem_from_args
from .outputs import (
    baseline_rows,
    check_compare_outputs,
    check_outputs,
    describe_problem,
    given_rows,
    per_device_memory,
    print_comparison,
    reference_of,
    requested_outputs,
    write_compare_outputs,
    write_outputs,
)
from .run import add_shape_options, register_run, run_calibration, shape_from
from .solve import (
    add_least_memory_option,
    add_solver_options,
    install_stop_handlers,
    interrupted,
    register_solve,
    solve_choices,
    solve_with_progress,
)
from .solve_partition import run_solve_command
from .sweep import register_sweep
from .table import comparison_table

SCHEDULE_FILE_HELP = ("a zbsolve schedule file (JSON), or a torch compute_only CSV (.csv) timed on the problem "
                      "the options below give")


def run_plot(args: argparse.Namespace) -> int:
    from zbsolve.plots.schedule_plot import check_plot_path, plot

    check_plot_path(args.output)
    check_separate({"the schedule file": args.file, "--reference": args.reference}, {"-o": args.output})
    schedule = read_any(args.file, args)
    validate(schedule)
    plot(schedule, args.output, reference=_plot_reference(args.reference, schedule, args))
    print(f"wrote {args.output}")
    return 0


def _plot_reference(choice: str, schedule, args: argparse.Namespace):
    """What `plot --reference` names: 1F1B on the single chain, any baseline of the schedule's
    problem, a second schedule file (JSON, or a CSV timed on the same problem), or none."""
    key = choice.strip().lower()
    if key == "none":
        return None
    if key == "1f1b":
        reference = one_f_one_b_as_run(schedule.problem)
        if reference is None:
            print("zbsolve plot: note: the pipes are hand-built (not a named placement), so there is no "
                  "single chain to run 1F1B on; the schedule is drawn alone", file=sys.stderr)
        return reference
    if key in BASELINES:
        return run_baseline(key, schedule.problem)
    if not os.path.exists(choice):
        raise UsageError(f"--reference must be 1f1b, none, a baseline ({', '.join(BASELINES)}) or a schedule "
                         f"file; {choice!r} is none of them")
    reference = read_any(choice, args, schedule.problem) if is_csv(choice) else read_any(choice, args)
    validate(reference)
    return reference


def run_baseline_command(args: argparse.Namespace) -> int:
    problem = problem_from_args(args)
    check_outputs(args, problem)
    schedule = run_baseline(args.name, problem)
    reference = reference_of(problem, [schedule])
    print(describe_problem(problem))
    print(comparison_table([schedule], reference))
    per_device = per_device_memory(schedule)
    if per_device:
        print(per_device)
    over = schedule.over_memory_limit()
    if over:  # the table flags it; its files would break their own problem's limit
        d = over[0]
        assert problem.memory_limit is not None  # a schedule is over a limit only where there is one
        peak, limit = problem.memory_text(schedule.metrics.peak_memory[d]), problem.memory_text(problem.memory_limit[d])
        breaks = f"{args.name} breaks the memory limit: peak {peak} on device {d}, limit {limit}"
        if any(requested_outputs(args).values()):
            raise ValidationError(f"{breaks}; its files are not written (a schedule file must keep its "
                                  "problem's limit): raise --memory, or --memory none")
        validate(replace(schedule, problem=replace(problem, memory_limit=None)))  # all but the limit holds
        print(f"zbsolve baseline: note: {breaks}", file=sys.stderr)
        return 0
    write_outputs(schedule, args)
    return 0


def run_compare(args: argparse.Namespace) -> int:
    if not args.no_solve:
        check_solver_options(args.solver, args.time_limit, args.workers, args.deterministic, args.seed)
    choices = choices_from_args(args, "compare", solving=not args.no_solve)  # refused before any is timed
    check_compare_outputs(args)
    if len(choices) > 1:
        timed_by_choice = timed_rows(choices, args, "compare", args.schedule)
        stop = install_stop_handlers()
        solved_by_choice: list[Schedule | None] = ([None] * len(choices) if args.no_solve
                            else solve_choices(choices, args, timed_by_choice, stop))
        table, chain_reference, _ = print_choices("compare", choices, solved_by_choice, timed_by_choice)
        write_compare_outputs(args, table, chain_reference)
        return 130 if interrupted(stop, solved_by_choice) else 0
    problem = choices[0].problem
    timed = baseline_rows(problem) + given_rows(args.schedule, args, problem, "compare")  # the table and the start
    solved = [] if args.no_solve else [solve_with_progress(problem, args, timed)]
    rows, reference = print_comparison("compare", problem, solved, timed)
    write_compare_outputs(args, rows, reference)
    return 130 if solved and solved[0].solver.status == "interrupted" else 0


def run_validate(args: argparse.Namespace) -> int:
    schedule = read_any(args.file, args)
    try:
        validate(schedule)
    except ValidationError as error:
        print(f"{args.file}: INVALID: {error}", file=sys.stderr)
        return 1
    m = schedule.metrics
    print(
        f"{args.file}: valid {schedule.name} schedule ({schedule.solver.status}): makespan {m.makespan:g} "
        f"{schedule.problem.time_unit}, bubble {100 * m.bubble_rate:.2f}%, span bubble "
        f"{100 * m.span_bubble_rate:.2f}%, peak memory {m.peak_memory_x:.3f}x U"
    )
    return 0


def run_export(args: argparse.Namespace) -> int:
    to_stdout = args.output == "-"
    if args.format == "torchtitan":
        return _export_torchtitan(args)
    if not to_stdout:
        check_separate({"the schedule file": args.file}, {"-o": args.output})
        check_writable(args.output)
    schedule = read_any(args.file, args)
    validate(schedule)
    if to_stdout:
        sys.stdout.write(torch_csv(schedule, recompute_in_backward=True) if args.format == "torch-csv"
                         else json.dumps(chrome_trace(schedule)) + "\n")
        return 0
    if args.format == "torch-csv":
        note = write_torch_csv(schedule, args.output)
        if note:
            sys.stderr.write(f"zbsolve export: note: {note}\n")
    else:
        write_chrome_trace(schedule, args.output)
    print(f"wrote {args.output}")
    return 0


def _export_torchtitan(args: argparse.Namespace) -> int:
    from zbsolve.formats.torchtitan import write_torchtitan

    if args.output == "-":
        raise UsageError("--format torchtitan writes two files: give -o a folder")
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise UsageError(f"-o {args.output}: --format torchtitan writes into a folder, and this is a file")
    schedule = read_any(args.file, args)
    validate(schedule)
    csv_path, config = write_torchtitan(schedule, args.output, args.module_names, args.microbatch_size)
    print(f"wrote {csv_path} and {config}: set these fields of torchtitan's parallelism and training config "
          "(docs/runtime.md, \"Running in torchtitan\")")
    return 0


def _profile_per_layer(args: argparse.Namespace, shape, name: str) -> int:
    from zbsolve.formats.atomic_files import write_atomic
    from zbsolve.problem.profiles import profile_from_dict
    from zbsolve.runtime.layer_profile import per_layer_document

    if args.backward != "products" or args.probe_runtime:
        raise UsageError("--per-layer times B and W split by hand (--backward products) and takes no "
                         "--probe-runtime: torch's split and its runtime run whole stages")
    document = per_layer_document(shape, args.vocab, args.device, name, args.repeats, args.dtype)
    profile_from_dict(document, args.output)  # what we write must be what solve reads
    write_atomic(args.output, json.dumps(document, indent=1) + "\n")
    layers, unit = document["layers"], document["memory_unit"]
    for layer in (layers[0], layers[1], layers[-1]):
        print(f"{layer['name']:<16} F {layer['F']:.4g} ms, B {layer['B']:.4g} ms, W {layer['W']:.4g} ms, "
              f"activation {layer['activation']:.4g} {unit}")
    print(f"wrote {args.output}: {len(layers)} layers (the embedding, {shape.layers} alike, the head); "
          "solve with --partition")
    return 0


def run_profile(args: argparse.Namespace) -> int:
    from zbsolve.formats.atomic_files import write_atomic
    from zbsolve.problem.profiles import profile_from_dict
    from zbsolve.runtime.profiling import profile_document

    if args.from_run:
        return run_calibration(args)
    check_writable(args.output)
    if args.repeats < 1:
        raise UsageError(f"--repeats must be >= 1, got {args.repeats}")
    shape = shape_from(args)
    name = args.name or os.path.splitext(os.path.basename(args.output))[0]
    if args.per_layer:
        return _profile_per_layer(args, shape, name)
    probe: Callable[..., dict] | None = None
    if args.probe_runtime:
        from zbsolve.runtime.runtime_probe import probe_runtime

        probe = probe_runtime
    document = profile_document(shape, args.device, name, args.repeats, args.dtype, args.backward, probe)
    profile_from_dict(document, args.output)  # what we write must be what solve reads
    write_atomic(args.output, json.dumps(document, indent=1) + "\n")
    c, unit = document["costs"], document["memory_unit"]
    fused = f", fused BW {c['BW']:.4g} ms" if "BW" in c else ""
    print(f"F {c['F']:.4g} ms, B {c['B']:.4g} ms, W {c['W']:.4g} ms{fused}, activation {c['activation']:.4g} "
          f"{unit}, residual {c['residual']:.4g} {unit}, checkpoint {c['checkpoint']:.4g} {unit} (kept when "
          f"recomputed) per rank-stage of {args.layers} layers")
    if "first_stage" in document:
        o = document["first_stage"]
        print(f"the pipe's first stage (its input needs no gradient): F {o['F']:.4g} ms, B {o['B']:.4g} ms, "
              f"W {o['W']:.4g} ms, fused BW {o['BW']:.4g} ms")
    probed = document["measured"].get("runtime_probe")
    if probed is not None:
        factors = ", ".join(f"{kind} {probed['factors'][kind]:.3g}" for kind in ("F", "B", "W", "BW"))
        print(f"in torch's pipeline runtime on {probed['ranks']} CPU ranks the ops took {factors} x their time "
              f"alone (the times above); {document['op_overhead']:.4g} ms between ops (op_overhead), "
              f"{document['comm']:.4g} ms more waiting for a neighbour (comm)")
    print(f"wrote {args.output}")
    return 0


def run_profiles(args: argparse.Namespace) -> int:
    """The shipped profiles, a line each: what `--profile NAME` finds from any folder."""
    from zbsolve.problem.profiles import load_profile, shipped_profiles

    for name, path in shipped_profiles().items():
        profile = load_profile(path)
        c = profile.costs if profile.costs is not None else None
        costs = (f"F {c.F:g} B {c.B:g} W {c.W:g} {profile.time_unit}, activation {c.activation:g} "
                 f"{profile.extra.get('memory_unit', 'units')}" if c is not None
                 else f"{len(profile.layers)} layers (--partition)" if profile.layers is not None
                 else f"{len(profile.stage_costs or ())} per-stage records")
        ranks = f", P={profile.devices}" if profile.devices else ""
        print(f"{name:<20} {costs}{ranks}")
        if args.verbose:
            print(f"{'':<20} {profile.source}")
    print(f"(from {path.parent}; give --profile NAME)")
    return 0


def register(sub: argparse._SubParsersAction, exit_codes: str) -> None:
    def command(name: str, help_text: str, run) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, help=help_text, description=help_text, epilog=exit_codes,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                allow_abbrev=False)  # `--f 1` must not pass for --fb-overlap
        parser.set_defaults(run=run)
        return parser


    register_solve(command, run_solve_command)
    register_sweep(command)
    register_run(command)

    p = command("baseline", "time one hand-made schedule on your problem", run_baseline_command)
    p.add_argument("name", help=f"one of: {', '.join(BASELINES)}")
    add_problem_options(p)
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the schedule file (JSON); refused, like the two below, for a schedule "
                        "over the memory limit, which the table shows flagged")
    p.add_argument("--torch-csv", metavar="FILE", help="write the PyTorch pipelining compute_only CSV")
    p.add_argument("--plot", metavar="FILE", help="draw it beside 1F1B (.png, .svg or .pdf)")

    p = command("compare", "a solve and every applicable hand-made schedule in one table, 1F1B as reference",
                run_compare)
    add_problem_options(p, several=True)
    add_solver_options(p, 10.0)
    add_least_memory_option(p)
    p.add_argument("--no-solve", action="store_true", help="only the hand-made schedules")
    p.add_argument("--schedule", metavar="FILE", action="append",
                   help="a schedule of this problem to compare too (JSON, or a torch compute_only CSV); the solve "
                        "starts from it where it fits; may be given more than once")
    p.add_argument("-o", "--output-dir", metavar="DIR",
                   help="write every schedule of the table that keeps the memory limit as DIR/NAME.json")
    p.add_argument("--table", metavar="FILE", help="write the table as CSV or JSON (.csv or .json), numbers unrounded")

    p = command("validate", "check a schedule file independently; names the first violated op", run_validate)
    p.add_argument("file", help=SCHEDULE_FILE_HELP)
    add_problem_options(p)

    p = command("plot", "draw a schedule file: Gantt chart and memory per device, beside 1F1B", run_plot)
    p.add_argument("file", help=SCHEDULE_FILE_HELP)
    add_problem_options(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="a .png, .svg or .pdf file")
    p.add_argument("--reference", default="1f1b", metavar="1f1b|BASELINE|FILE|none",
                   help="what to draw beside it on one time axis: 1F1B on the single chain (default), any "
                        "baseline of its problem, another schedule file, or none")

    p = command("profile", "measure F, B, W and memory of a GPT-style layer stack with PyTorch", run_profile)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--dtype", choices=DTYPES, default="float32",
                   help="element type of weights, activations and arithmetic (default float32; GPUs train in "
                        "bfloat16, which also halves the memory)")
    p.add_argument("--backward", choices=BACKWARDS, default="products",
                   help="how B and W are split: products (default) times the weight-gradient products alone, "
                        "as a hand-written split runs them; torch times torch.distributed.pipelining's split "
                        "(its W runs autograd again; the pipe's first stage does all of its backward in W), "
                        "for plans that torch's runtime will run")
    p.add_argument("--probe-runtime", action="store_true",
                   help="with --backward torch on the CPU: also run a ZB-H1 plan of the stack with "
                        "torch.distributed.pipelining on 2 CPU ranks (gloo, one thread each) and write the times "
                        "as the runtime ran them (each kind's run time over its time alone), the time it spends "
                        "between ops (op_overhead) and waiting for a neighbour beyond that (comm); a few seconds")
    p.add_argument("--per-layer", action="store_true",
                   help="write a profile that lists layers (for --partition): one GPT layer measured and given to "
                        "each of --layers, the embedding and the LM head with its loss measured apart")
    p.add_argument("--vocab", type=int, default=50257, metavar="V",
                   help="vocabulary size, for --per-layer's embedding and head (default 50257, GPT-2's)")
    add_shape_options(p, " (required unless --from-run)")
    p.add_argument("--from-run", metavar="MEASURED", help="write the profile from a run's measured schedule "
                                                         "(zbsolve run -o) instead of measuring a stack")
    p.add_argument("--repeats", type=int, default=5, help="timed runs after 2 warm-ups; the median is kept")
    p.add_argument("--name", help="profile name (default: the output file's name)")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="profile JSON (the format of the shipped ones: zbsolve profiles)")

    p = command("profiles", "list the cost profiles shipped with zbsolve (--profile NAME finds them anywhere)",
                run_profiles)
    p.add_argument("-v", "--verbose", action="store_true", help="also say where each profile's numbers come from")

    p = command("export", "convert a schedule file to another tool's format", run_export)
    p.add_argument("file", help=SCHEDULE_FILE_HELP)
    add_problem_options(p)
    p.add_argument("--format", required=True, choices=("torch-csv", "chrome-trace", "torchtitan"),
                   help="torchtitan: the compute_only CSV and torchtitan.json, the config fields torchtitan 0.3.0 "
                        "reads, in the folder -o names")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the file to write (a folder for torchtitan); - for standard output")
    p.add_argument("--module-names", metavar="NAMES",
                   help="torchtitan: the model's modules, one entry per layer of the plan's partition, e.g. "
                        "tok_embeddings,layers.{0..21},norm+lm_head (default: the names the profile gave)")
    p.add_argument("--microbatch-size", type=int, default=1, metavar="N",
                   help="torchtitan: samples per microbatch; the local batch is microbatches x N (default 1)")

