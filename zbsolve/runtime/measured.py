"""What ran, against the plan: the measured schedule (the plan's problem, status `measured`),
the verdict (step time, each kind's op time, communication waits, memory), and a profile
calibrated from the run (docs/runtime.md, "Plan against run")."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from zbsolve.errors import UsageError
from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import TABLE, producer
from zbsolve.problem.problem import Problem
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
        steps.append({"origin": origin, "time": end - origin, "ranks": per_rank,
                      "allocator": [b[5] for b in bounds]})  # each rank's allocator peak (CUDA), else 0
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
    kinds: dict[str, list[float]]  # per kind over every op of every step: [ops, measured time, planned time]
    waits: list[float]  # cross-rank waits: a consumer's start after its input's end, where it waited
    overheads: list[float]  # idle gaps before ops whose inputs were ready: the runtime's own time
    peaks_bytes: list[float]  # per rank, the median step's
    allocator_bytes: list[float]  # per rank, the median step's allocator peak above its start (CUDA; else 0)

    def ratio(self, *kinds: str) -> float | None:
        """The kinds' measured time over their planned time, all their ops together (weighted
        by time: a first stage's B of next to nothing weighs next to nothing); None if unplanned."""
        planned = sum(self.kinds[k][2] for k in kinds if k in self.kinds)
        return sum(self.kinds[k][1] for k in kinds if k in self.kinds) / planned if planned > 0 else None


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
                        metrics=_metrics(devices, peaks, problem.one_f_one_b_peak()),
                        solver=SolverInfo("run", status="measured", message=f"median of {len(steps)} steps"))
    kinds: dict[str, list[float]] = {}
    waits, overheads = [], []
    for step in steps:
        for ops in step["ranks"]:
            for kind, stage, _, start, end, _ in ops:
                c = problem.stage_costs[pipe.stages[stage].cost]
                totals = kinds.setdefault(kind, [0, 0.0, 0.0])
                totals[0] += 1
                totals[1] += 1e3 * (end - start)
                totals[2] += c.time(kind, problem.split_backward) - problem.op_overhead  # the op, not its gap
        waited, idle = gaps(problem, [[(k, st, mb, start, end) for k, st, mb, start, end, _ in ops]
                                      for ops in step["ranks"]])
        waits += [1e3 * w for w in waited]
        overheads += [1e3 * g for g in idle]
    return Run(plan, schedule, [1e3 * s["time"] for s in steps], kinds, waits, overheads, peaks_bytes,
               median_step["allocator"])


def gaps(problem: Problem, ranks: list[list[tuple]]) -> tuple[list[float], list[float]]:
    """Waits and overheads of one step, from each rank's (kind, stage, microbatch, start, end)
    in the order it ran. A wait is an op's start after its cross-rank input ended, where the
    input ended after the rank's previous op (the rank sat free until it came); an overhead
    is the gap before an op whose inputs were there when the rank's previous op ended."""
    pipe = problem.pipes[0]
    ends = {}
    for ops in ranks:
        for kind, stage, mb, _, end in ops:
            ends[("B" if kind == "BW" else kind, stage, mb)] = end
    waits, overheads = [], []
    for ops in ranks:
        previous_end = None  # a rank's first op has no gap of its own to measure
        for kind, stage, mb, start, end in ops:
            source = _input_of(kind, stage, mb, len(pipe.stages))
            arrived = ends.get(source) if source else None
            crossed = source is not None and pipe.stages[source[1]].device != pipe.stages[stage].device
            if arrived is not None and crossed and (previous_end is None or arrived > previous_end):
                waits.append(start - arrived)
            elif previous_end is not None:
                overheads.append(start - previous_end)
            previous_end = end
    return waits, overheads


def _input_of(kind: str, stage: int, mb, stages: int) -> tuple | None:
    """The cross-stage input an op waits for, as the op-kind table's waits say: the previous
    stage's F, the next stage's input gradient (keyed B, as `gaps` keys a BW's end)."""
    for wait in TABLE[kind].waits:
        if wait.offset and 0 <= stage + wait.offset < stages:
            return (producer(wait.event, True), stage + wait.offset, mb)
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
        ratio = run.ratio(kind)
        if ratio is not None:
            lines.append(f"{kind}: measured {ratio:.3f} x the plan's time ({run.kinds[kind][0]} ops' time over their "
                         "planned time)")
            if abs(ratio - 1) > DRIFT:
                drift.append(f"{kind} ops")
    comm, overhead = plan.problem.comm, plan.problem.op_overhead
    if run.waits:
        wait = statistics.median(run.waits)
        lines.append(f"comm: planned {comm:g} {unit}{f' + the overhead {overhead:g} {unit}' if overhead else ''}, "
                     f"measured median wait {wait:.3g} {unit} on {len(run.waits)} cross-rank inputs the rank "
                     "sat free for")
    if run.overheads:
        gap = statistics.median(run.overheads)
        lines.append(f"runtime overhead: median gap {gap:.3g} {unit} before {len(run.overheads)} ops whose "
                     f"inputs were there (the plan has {f'{overhead:g} {unit} per op' if overhead else 'none'})")
    per_unit = bytes_per(plan.problem.memory_unit_name)
    if per_unit:
        name = plan.problem.memory_unit_name
        got = [b / per_unit for b in run.peaks_bytes]
        lines.append(f"peak memory per rank: planned {', '.join(f'{p:.4g}' for p in plan.metrics.peak_memory)} "
                     f"{name}, measured {', '.join(f'{p:.4g}' for p in got)} {name} (bytes saved for backward)")
        if any(abs(g - p) > DRIFT * p for g, p in zip(got, plan.metrics.peak_memory) if p):
            drift.append("memory")
        if any(run.allocator_bytes):
            lines.append(f"allocator peak per rank: {', '.join(f'{b / per_unit:.4g}' for b in run.allocator_bytes)} "
                         f"{name} above the step's start (weights and gradients held before it left out)")
    lines.append(f"drifts past {100 * DRIFT:.0f}%: {', '.join(drift)}" if drift
                 else f"plan and run agree within {100 * DRIFT:.0f}%")
    return lines


def calibrated_profile(measured: Schedule, name: str) -> dict:
    """A profile (models/ format) from a measured schedule (docs/runtime.md, "Calibration"):
    per rank-stage and kind the run's mean op time without the runtime's gaps, which go to
    `op_overhead` (the median gap before an op whose inputs were there), the pipe's first
    stage on its own (`first_stage`), comm the median wait for a cross-rank input less that
    overhead, memory as the plan's. A kind the run did not time is estimated (`notes`)."""
    if measured.solver.status != "measured":
        raise UsageError(f"--from-run needs a measured schedule (zbsolve run -o), this one is "
                         f"{measured.solver.status}")
    if not any(t.end > t.start for ops in measured.devices for t in ops):
        raise UsageError("the run timed every op at 0: there is nothing to calibrate from")
    problem = measured.problem
    pipe = problem.pipes[0]
    chunks = len(pipe.stages) // problem.devices
    ranks = [[(t.op.kind, t.op.stage, t.op.microbatch, t.start, t.end) for t in ops] for ops in measured.devices]
    waits, overheads = gaps(problem, ranks)
    overhead = statistics.median(overheads) if overheads else 0.0
    times: dict[tuple[str, int], list[float]] = {}
    for ops in ranks:
        for kind, stage, _, start, end in ops:
            times.setdefault((kind, stage), []).append(end - start)
    # a step is a sum of ops: the mean predicts it, where a median misses a kind's slow tail
    took = {key: statistics.mean(values) * chunks for key, values in times.items()}  # at a rank-stage's scale
    estimated: list[str] = []
    normal = [_normal_record(problem, rank, took, chunks, estimated) for rank in range(problem.devices)]
    timed = [(r, n) for r, n in enumerate(normal) if n]
    for rank, record in enumerate(normal):
        if not record:  # the rank ran only the first stage: its others as the other ranks ran them
            others = statistics.median(n["F"] for _, n in timed) if timed else 0.0
            speed = took[("F", 0)] / others if others > 0 else 1.0  # F timed at 0 elsewhere: no speed to scale by
            for kind in KINDS:
                values = [n[kind] for _, n in timed if kind in n]
                if values:
                    record[kind] = statistics.median(values) * speed
            estimated.append(f"rank-stage {rank} beyond the first stage: the others' times at its F's speed")
    first = _first_record(took)
    stage_costs = []
    for rank, record in enumerate(normal):
        cost = problem.stage_costs[pipe.stages[(rank + 1) * chunks - 1].cost]
        stage_costs.append(_rounded(record) | {"activation": cost.activation * chunks,
                                               "residual": cost.residual * chunks})
    comm = max(0.0, statistics.median(waits) - overhead) if waits else problem.comm
    document = {"name": name, "source": f"calibrated by zbsolve profile --from-run from {measured.solver.message}",
                "time_unit": problem.time_unit, "devices": problem.devices, "microbatches": problem.microbatches,
                "comm": float(f"{comm:.6g}"), "op_overhead": float(f"{overhead:.6g}"), "stage_costs": stage_costs,
                "first_stage": _rounded(first),
                "notes": "mean op times of the run; the runtime's median gap before an op is op_overhead"
                         + (f"; estimated: {'; '.join(estimated)}" if estimated else "")}
    if problem.memory_unit_name:
        document["memory_unit"] = problem.memory_unit_name
    if problem.profile:  # the run's stack: plans of this profile still run with that one's --profile
        document["calibrated_from"] = problem.profile
    return document


KINDS = ("F", "B", "W", "BW")


def _rounded(record: dict) -> dict:
    return {kind: float(f"{record[kind]:.6g}") for kind in KINDS if kind in record}


def _normal_record(problem: Problem, rank: int, took: dict, chunks: int, estimated: list[str]) -> dict:
    """Rank-stage `rank`'s times from its chunks other than the first stage (none: {}); a
    kind the run did not time there from the plan, at the speed the rest ran. A rank-stage
    is a block of layers of the single chain, as profiles give them: chunks rank x V to
    rank x V + V - 1, whichever devices a V or interleaved plan put them on."""
    pipe = problem.pipes[0]
    stages = [k for k in range(rank * chunks, (rank + 1) * chunks) if k]
    if not stages:
        return {}

    def bare(kind: str, k: int) -> float:  # the plan's time without its overhead, at a rank-stage's scale
        c = problem.stage_costs[pipe.stages[k].cost]
        ops = 2 if kind == "BW" and c.fused is None else 1  # B + W: two ops' overheads
        return (c.time(kind, False) - ops * problem.op_overhead) * chunks

    record = {kind: statistics.mean(took[(kind, k)] for k in stages)
              for kind in KINDS if all((kind, k) in took for k in stages)}
    planned = sum(bare(kind, k) for kind in record for k in stages)
    speed = sum(record[kind] for kind in record) * len(stages) / planned if planned > 0 else 1.0
    for kind in KINDS:
        if kind not in record:
            record[kind] = max(0.0, statistics.mean(bare(kind, k) for k in stages) * speed)
            estimated.append(f"rank-stage {rank}'s {kind}: the plan's at the speed the rest ran")
    return record


def _first_record(took: dict) -> dict:
    """The first stage's times: torch skips its B (its input needs no gradient) and W runs
    the whole backward, so a fused run's BW is its W and a split run's W its BW."""
    first = {kind: took[(kind, 0)] for kind in KINDS if (kind, 0) in took}
    if "BW" in first:
        first.setdefault("B", 0.0)
        first.setdefault("W", first["BW"])
    else:
        first["BW"] = first.get("B", 0.0) + first.get("W", 0.0)
    return first
