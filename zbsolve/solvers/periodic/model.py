"""The building block of a periodic schedule, found with a small CP-SAT model.

Microbatch position n of every pipe runs its ops at n * T + offset(op type). The offsets
are chosen so that the repetition is a valid schedule for any number of microbatches:
- dependencies (with comm) hold between the offsets of one microbatch;
- on each device the block's ops, taken modulo T, do not overlap (each op interval and
  its copy shifted by T go into one NoOverlap over [0, 2T));
- memory: a part of an activation held for time h has at most ceil(h / T) copies alive
  at once, so the sum of amount * ceil(h / T) over a device's parts must fit its limit.
The objective is the block's length, so the whole schedule lasts (M - 1) * T + length.
The model has one variable per op type (3 per stage), whatever the number of microbatches.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from zbsolve.ops import Op
from zbsolve.solvers.base import SolveInput


def block_ops(data: SolveInput) -> list[Op]:
    """The ops of each pipe's first microbatch: one per op type."""
    first = {q: pipe.microbatches[0] for q, pipe in enumerate(data.graph.problem.pipes)}
    return [op for op in data.ops if op.microbatch == first[op.pipe]]


def released_by(data: SolveInput, forward: Op) -> list[tuple[Op, int]]:
    """The ops that free a forward's activation, each with the amount it frees."""
    kinds = ("B", "W") if data.split else ("BW",)
    releases = [Op(kind, forward.pipe, forward.stage, forward.microbatch) for kind in kinds]
    return [(op, data.memory_effect[op][1]) for op in releases]


def solve_block(data: SolveInput, period: int, horizon: int,
                time_limit: float) -> tuple[dict[Op, int] | None, float]:
    """Offsets of the block ops for this period (None when none was found in time) and the
    time spent: `time_limit` and the time spent are in seconds, or in CP-SAT's work measure
    for a deterministic solve. Offsets stay below `horizon`."""
    ops = block_ops(data)
    model = cp_model.CpModel()
    # Shifting the whole block changes nothing, so the first pipe's first F sits at 0 and
    # the other ops may fall before it (the block is shifted back to start at 0 below).
    start = {op: model.NewIntVar(-horizon, horizon, f"s{op}") for op in ops}
    model.Add(start[ops[0]] == 0)
    end = {op: start[op] + data.duration[op] for op in ops}
    by_device: dict[int, list] = {}
    for op in ops:
        length = data.duration[op]
        if length > period:
            return None, 0.0
        phase = model.NewIntVar(0, period - 1, f"r{op}")
        turns = model.NewIntVar(-(horizon // period) - 1, horizon // period, f"k{op}")
        model.Add(start[op] == turns * period + phase)
        copies = by_device.setdefault(data.graph.device(op), [])
        copies.append(model.NewFixedSizeIntervalVar(phase, length, f"i{op}"))
        copies.append(model.NewFixedSizeIntervalVar(phase + period, length, f"j{op}"))
        for pred, delay in data.predecessors[op]:
            model.Add(start[op] >= end[pred] + delay)
    for intervals in by_device.values():
        model.AddNoOverlap(intervals)
    if data.memory_limit is not None:
        _add_memory(model, data, ops, start, end, period)
    first = model.NewIntVar(-horizon, 0, "first")
    for op in ops:
        model.Add(first <= start[op])
    length = model.NewIntVar(0, 2 * horizon, "length")
    for op in ops:
        model.Add(length >= end[op] - first)
    model.Minimize(length)
    solver = cp_model.CpSolver()
    if data.deterministic:  # same answer on every run, whatever the machine's load
        solver.parameters.max_deterministic_time = time_limit
        solver.parameters.max_time_in_seconds = 4.0 * time_limit + 10.0
    else:
        solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = data.workers
    solver.parameters.random_seed = data.seed
    code = solver.Solve(model)
    spent = solver.ResponseProto().deterministic_time if data.deterministic else solver.WallTime()
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, spent
    shift = min(solver.Value(start[op]) for op in ops)
    return {op: solver.Value(start[op]) - shift for op in ops}, spent


def _add_memory(model, data: SolveInput, ops: list[Op], start, end, period: int) -> None:
    most = (data.horizon + period - 1) // period + 1
    held: dict[int, list] = {}
    for f in ops:
        if f.kind != "F":
            continue
        for release, amount in released_by(data, f):
            if amount <= 0:
                continue
            copies = model.NewIntVar(1, most, f"c{f}{release.kind}")
            model.Add(copies * period >= end[release] - start[f])
            held.setdefault(data.graph.device(f), []).append((amount, copies))
    for d, parts in held.items():
        model.Add(sum(amount * copies for amount, copies in parts) <= data.memory_limit[d])
