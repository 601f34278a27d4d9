"""What ran, against the plan: the measured schedule (the plan's problem, status `measured`),
the verdict (step time, each kind's op time, communication waits, memory), and a profile
calibrated from the run (docs/runtime.md, "Plan against run")."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from zbsolve.errors import UsageError
from zbsolve.problem.op_graph import Op
from zbsolve.problem.units import bytes_per
from zbsolve.schedule.schedule import Metrics, Schedule, SolverInfo, TimedOp

DRIFT = 0.10  # a difference past this between plan and run is called out


def _steps(ranks: list[dict]) -> list[dict]:
    """Per measured step: its origin (the earliest start over ranks), its end, and each
    rank's ops in the order they ran with times from the origin."""
    count = 1 + max(r[1] for entry in ranks for r in entry["records"] if r[0] == "step")
    steps = []
    for s in range(count):
        bounds = [next(r for r in entry["records"] if r[0] == "step" and r[1] == s) for entry in ranks]
        origin, end = min(b[3] for b in bounds), max(b[4] for b in bounds)
        per_rank = []
        for entry, bound in zip(ranks, bounds):
            ops = [r for r in entry["records"] if r[0] != "step" and bound[3] <= r[3] <= bound[4]]
            per_rank.append([(r[0], r[1], r[2], r[3] - origin, r[4] - origin, r[5]) for r in ops])
        steps.append({"origin": origin, "time": end - origin, "ranks": per_rank})
    return steps


def _metrics(devices: list[list[TimedOp]], peaks: list[float], unit: float) -> Metrics:
    makespan = max(t.end for ops in devices for t in ops)
    busy = [sum(t.end - t.start for t in ops) for ops in devices]
    span = max(ops[-1].end - ops[0].start for ops in devices)
    return Metrics(makespan=makespan, bubble_rate=1 - sum(busy) / (len(devices) * makespan),
                   span=span, span_bubble_rate=1 - max(busy) / span, busy=tuple(busy), peak_memory=tuple(peaks),
                   peak_memory_x=max(peaks) / unit if unit else 0.0)


def _held_peak(ops: list[tuple]) -> float:
    """Bytes saved for backward a rank held at most: each F's from its start until its W
    (or fused BW) ends, in the order the rank ran them."""
    saved, level, peak = {}, 0.0, 0.0
    for kind, stage, mb, _, _, nbytes in ops:
        if kind == "F":
            saved[(stage, mb)] = nbytes
            level += nbytes
            peak = max(peak, level)
        elif kind in ("W", "BW"):
            level -= saved.pop((stage, mb), 0)
    return peak


@dataclass(frozen=True)
class Run:
    plan: Schedule
    schedule: Schedule  # the median step, as a schedule of the plan's problem
    step_times: list[float]  # every measured step, in the plan's time unit
    ratios: dict[str, list[float]]  # per kind: measured op time over the plan's cost, every op of every step
    waits: list[float]  # cross-rank waits: a consumer's start after its input's end, where it waited
    peaks_bytes: list[float]  # per rank, the median step's


def measured_run(plan: Schedule, ranks: list[dict]) -> Run:
    """The plan's ops as they ran; times in the plan's unit (ms expected: the host clock is in s)."""
    if plan.problem.time_unit != "ms":
        raise UsageError(f"a run is timed in ms; the plan's times are in {plan.problem.time_unit}")
    steps = _steps(ranks)
    median_step = sorted(steps, key=lambda s: s["time"])[len(steps) // 2]
    problem = plan.problem
    pipe = problem.pipes[0]
    devices = [[TimedOp(Op(kind, 0, stage, pipe.microbatches[mb]), 1e3 * start, 1e3 * end)
                for kind, stage, mb, start, end, _ in ops] for ops in median_step["ranks"]]
    peaks_bytes = [_held_peak(ops) for ops in median_step["ranks"]]
    per_unit = bytes_per(problem.memory_unit_name)
    peaks = [b / per_unit for b in peaks_bytes] if per_unit else [0.0] * problem.devices
    schedule = Schedule(name="measured", problem=problem, devices=tuple(tuple(d) for d in devices),
                        metrics=_metrics(devices, peaks, problem.memory_unit()),
                        solver=SolverInfo("run", status="measured", message=f"median of {len(steps)} steps"))
    ratios: dict[str, list[float]] = {}
    waits = []
    for step in steps:
        ends = {(k, st, mb): e for ops in step["ranks"] for k, st, mb, _, e, _ in ops}
        for ops in step["ranks"]:
            previous_end = 0.0
            for kind, stage, mb, start, end, _ in ops:
                c = problem.stage_costs[pipe.stages[stage].cost]
                cost = {"F": c.F, "B": c.B, "W": c.W, "BW": c.B + c.W}[kind]
                took = 1e3 * (end - start)
                if cost > 0:
                    ratios.setdefault(kind, []).append(took / cost)
                source = _input_of(kind, stage, mb, len(pipe.stages))
                if source in ends and pipe.stages[source[1]].device != pipe.stages[stage].device:
                    if start > previous_end + 1e-6:  # the rank waited: the input's arrival set the start
                        waits.append(1e3 * (start - ends[source]))
                previous_end = end
    return Run(plan, schedule, [1e3 * s["time"] for s in steps], ratios, waits, peaks_bytes)


def _input_of(kind: str, stage: int, mb: int, stages: int) -> tuple | None:
    if kind == "F":
        return ("F", stage - 1, mb) if stage else None
    if kind in ("B", "BW"):
        if stage == stages - 1:
            return None
        return ("B", stage + 1, mb)  # split backward only: a fused plan's waits are not counted
    return None


def verdict(run: Run) -> list[str]:
    """Plan against run, line by line; what drifts by more than DRIFT is named."""
    plan, unit = run.plan, run.plan.problem.time_unit
    measured = statistics.median(run.step_times)
    planned = plan.metrics.makespan
    drift = []

    def change(a: float, b: float) -> str:
        return f"{100 * (a - b) / b:+.1f}%" if b else "-"

    lines = [f"step: planned {planned:.6g} {unit}, measured median {measured:.6g} {unit} ({change(measured, planned)}) "
             f"over {len(run.step_times)} steps"]
    if abs(measured - planned) > DRIFT * planned:
        drift.append("the step")
    for kind in ("F", "B", "W", "BW"):
        if kind in run.ratios:
            ratio = statistics.median(run.ratios[kind])
            lines.append(f"{kind}: measured {ratio:.3f} x the plan's cost (median of {len(run.ratios[kind])} ops)")
            if abs(ratio - 1) > DRIFT:
                drift.append(f"{kind} ops")
    comm = plan.problem.comm
    if run.waits:
        wait = statistics.median(run.waits)
        lines.append(f"comm: planned {comm:g} {unit}, measured median wait {wait:.3g} {unit} on "
                     f"{len(run.waits)} cross-rank inputs")
    per_unit = bytes_per(plan.problem.memory_unit_name)
    if per_unit:
        name = plan.problem.memory_unit_name
        got = [b / per_unit for b in run.peaks_bytes]
        lines.append(f"peak memory per rank: planned {', '.join(f'{p:.4g}' for p in plan.metrics.peak_memory)} "
                     f"{name}, measured {', '.join(f'{p:.4g}' for p in got)} {name} (bytes saved for backward)")
        if any(abs(g - p) > DRIFT * p for g, p in zip(got, plan.metrics.peak_memory) if p):
            drift.append("memory")
    lines.append(f"drifts past {100 * DRIFT:.0f}%: {', '.join(drift)}" if drift
                 else f"plan and run agree within {100 * DRIFT:.0f}%")
    return lines


def calibrated_profile(measured: Schedule, name: str) -> dict:
    """A profile (models/ format) from a measured schedule: per kind the median op time (a
    rank-stage's: chunks summed), comm the median wait for a cross-rank input; memory as
    the plan's."""
    if measured.solver.status != "measured":
        raise UsageError(f"--from-run needs a measured schedule (zbsolve run -o), this one is "
                         f"{measured.solver.status}")
    problem = measured.problem
    pipe = problem.pipes[0]
    chunks = len(pipe.stages) // problem.devices
    times: dict[str, list[float]] = {}
    ends = {(t.op.kind, t.op.stage, t.op.microbatch): t.end for ops in measured.devices for t in ops}
    waits = []
    for ops in measured.devices:
        previous = 0.0
        for t in ops:
            times.setdefault(t.op.kind, []).append((t.end - t.start) * chunks)
            source = _input_of(t.op.kind, t.op.stage, pipe.microbatches.index(t.op.microbatch), len(pipe.stages))
            key = None if source is None else (source[0], source[1], pipe.microbatches[source[2]])
            if key in ends and pipe.stages[key[1]].device != pipe.stages[t.op.stage].device and t.start > previous:
                waits.append(t.start - ends[key])
            previous = t.end
    if not {"F", "B", "W"} <= set(times):
        raise UsageError("the run fused B and W: a profile needs them apart; run a plan with split backward")
    first = problem.stage_costs[pipe.stages[0].cost]
    costs = {kind: float(f"{statistics.median(times[kind]):.6g}") for kind in "FBW"}
    costs |= {"activation": first.activation * chunks, "residual": first.residual * chunks}
    document = {"name": name, "source": f"calibrated by zbsolve profile --from-run from {measured.solver.message}",
                "time_unit": problem.time_unit, "devices": problem.devices, "microbatches": problem.microbatches,
                "comm": float(f"{statistics.median(waits):.6g}") if waits else problem.comm, "costs": costs}
    if problem.memory_unit_name:
        document["memory_unit"] = problem.memory_unit_name
    return document
