"""Window search: re-order the ops of one window of time, the rest as is.

Each step frees the ops that start in a window of the best schedule and builds a small
model with only those as variables: every other op is a constant (a fixed interval on its
device and in its memory profile), so a step costs in proportion to its window, not to
the instance. The window's ops minimise the latest end plus the longest path from there
to the end of the schedule through the ops that stay (for the span: per device, from the
device's first start to the longest path reaching its last op); then every op is re-timed
as early as its dependencies and its device's order allow (which keeps memory peaks,
docs/design.md, "Time"; for the span each device's first op keeps its start, since starting it
earlier only lengthens that device's span), and the result is kept when its objective is
no worse. F&B pairs have their own search (`pair_window`).

Packing a window early without those paths almost never gained; with them the schedule
keeps falling from where the whole model stopped.
"""

from __future__ import annotations

import random
import time

from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import holds
from zbsolve.schedule.timing import earliest_times
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView

WINDOW_OPS = 200  # ops freed per step at first (see `run_steps`)
UNREACHABLE = -(1 << 62)  # no path from an op to a device's last op (real paths are >= 0)


def search(data: ProblemView, settings: RunSettings, state: SearchState, starts: dict[Op, int], seconds: float,
           on_better) -> tuple[dict[Op, int], int, int]:
    """Improve `starts` (a valid schedule in solver units) for `seconds` of wall time;
    returns (starts, steps, improvements). `on_better(starts, makespan)` hears of each gain."""
    assert data.pair_duration is None
    best = compressed(data, starts, releases(data, starts))
    value = data.objective_of(best)
    better = 0

    def step(size: int, seconds: float, rng: random.Random) -> bool:
        nonlocal best, value, better
        order = sorted(data.ops, key=lambda op: best[op])
        first = rng.randrange(max(1, len(order) - size + 1))
        found, proved = _reorder(data, settings, best, order[first:first + size], seconds, rng.randrange(1 << 30))
        candidate = None if found is None else compressed(data, found, releases(data, found))
        new = None if candidate is None else data.objective_of(candidate)
        shorter = new is not None and new < value
        if candidate is not None and new is not None and new <= value:
            if shorter:
                better += 1
                on_better(candidate, new)
            best, value = candidate, new
        # A window that ran out of time but still shortened the schedule is not too wide:
        # most gains come from such steps, and shrinking after them did worse.
        return proved or shorter

    steps = run_steps(settings, state, seconds, WINDOW_OPS, len(data.ops), step)
    return best, steps, better


def run_steps(settings: RunSettings, state: SearchState, seconds: float, size: int, most: int, step) -> int:
    """Call `step(size, seconds, rng)` until `seconds` of wall time pass or the solve is
    stopped, each with at most 2 s; the window widens after a step that returns True (it
    was proven or shortened the schedule) and narrows after the others. Returns the count."""
    rng = random.Random(settings.seed)
    steps = 0
    began = time.monotonic()
    while not state.stop.is_set():
        left = seconds - (time.monotonic() - began)
        if left < 0.5:
            break
        grows = step(size, min(left, 2.0), rng)
        steps += 1
        size = min(most, int(size * 1.2)) if grows else max(20, int(size * 0.8))
    return steps


def releases(data: ProblemView, starts: dict[Op, int]) -> dict[Op, int]:
    """For the span, each device's first op, which re-timing must not start earlier."""
    if data.objective == "makespan":
        return {}
    return {min(ops, key=starts.__getitem__): min(starts[op] for op in ops) for ops in data.device_ops if ops}


def compressed(data: ProblemView, starts: dict[Op, int], release: dict[Op, int] | None = None) -> dict[Op, int]:
    """Every op as early as its dependencies, its device's order and its release (if any) allow."""
    orders = [[(op,) for op in sorted(ops, key=lambda op: (starts[op], data.rank[op]))] for ops in data.device_ops]
    timed = earliest_times(orders, lambda op: data.predecessors[op], lambda op: (op,),
                           lambda slot: data.duration[slot[0]], release)
    return {slot[0]: start for device in timed for slot, start, _ in device}


def _reorder(data: ProblemView, settings: RunSettings, starts: dict[Op, int], free: list[Op], seconds: float,
             seed: int):
    """The window's ops re-ordered, the rest fixed; None when nothing was found in time."""
    chosen = set(free)
    low = min(starts[op] for op in free)
    high = max(starts[op] + data.duration[op] for op in free)
    model = cp_model.CpModel()
    start = {op: model.new_int_var(low, high - data.duration[op], "") for op in free}

    def begin(op: Op):
        return start[op] if op in chosen else starts[op]

    def end(op: Op):
        return begin(op) + data.duration[op]

    on_device: dict[int, list] = {}
    for d, ops in enumerate(data.device_ops):
        for op in ops:
            if op in chosen:
                on_device.setdefault(d, []).append(model.new_fixed_size_interval_var(start[op], data.duration[op], ""))
    for d, intervals in on_device.items():
        for op in data.device_ops[d]:
            if op not in chosen and starts[op] < high and end(op) > low:
                intervals.append(model.new_fixed_size_interval_var(starts[op], data.duration[op], ""))
        model.add_no_overlap(intervals)
    for op in data.ops:
        for pred, delay in data.predecessors[op]:
            if op in chosen or pred in chosen:
                model.add(begin(op) >= end(pred) + delay)
    if data.memory_limit is not None:
        _memory(model, data, starts, chosen, begin, end, low, high)
    after = _tails(data, starts, chosen, high)
    if data.objective == "makespan":
        _latest_end(model, data, free, start, {op: paths[0] for op, paths in after.items()}, low, high)
    else:
        _longest_span(model, data, starts, chosen, start, after, high)
    for op in free:
        model.add_hint(start[op], starts[op])
    solver = step_solver(settings, seconds, seed)
    code = solver.Solve(model)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, False
    found = dict(starts)
    found.update({op: solver.Value(var) for op, var in start.items()})
    return found, code == cp_model.OPTIMAL


def _latest_end(model, data: ProblemView, free: list[Op], start, after: dict[Op, int], low: int, high: int) -> None:
    latest = high + max(after.values())
    worst = model.new_int_var(0, latest, "")
    for op in free:
        model.add(worst >= start[op] + data.duration[op] + after[op])
    prefer_early(model, worst, list(start.values()), low, high - low, latest)


def prefer_early(model, worst, starts: list, low: int, spread: int, latest: int) -> None:
    """Minimise `worst` (at most `latest`) first; among equals, every start (at least `low`,
    at most `spread` later) as early as it goes, when the weighted sum stays within
    CP-SAT's 64-bit integers."""
    weight = len(starts) * spread + 1
    if weight * latest < 2**62:
        model.minimize(worst * weight + sum(var - low for var in starts))
    else:
        model.minimize(worst)


def step_solver(settings: RunSettings, seconds: float, seed: int) -> cp_model.CpSolver:
    """A solver for one step: `seconds` of wall time, the solve's workers, its own seed."""
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = int(settings.workers)
    solver.parameters.random_seed = seed
    solver.parameters.catch_sigint_signal = False
    return solver


def _longest_span(model, data: ProblemView, starts, chosen: set[Op], start, after: dict[Op, list[int]],
                  high: int) -> None:
    """Per device: its first start (a freed op's, or the first op that stays) to the longest
    path from a freed op to its last op. The longest of those first, then their sum, so that
    devices off the critical one shorten too."""
    latest = high + max(max(paths) for paths in after.values())
    spans = []
    for d, ops in enumerate(data.device_ops):
        reaching = [(op, after[op][d]) for op in after if after[op][d] >= 0]
        if not reaching:
            continue
        stays = [starts[op] for op in ops if op not in chosen]
        first = model.new_int_var(0, min(stays) if stays else latest, "")
        for op in ops:
            if op in chosen:
                model.add(first <= start[op])
        span = model.new_int_var(0, latest, "")
        for op, path in reaching:
            model.add(span >= start[op] + data.duration[op] + path - first)
        spans.append(span)
    worst = model.new_int_var(0, latest, "")
    for span in spans:
        model.add(worst >= span)
    weight = len(spans) * latest + 1
    model.minimize(worst * weight + sum(spans) if weight * latest < 2**62 else worst)


def _memory(model, data: ProblemView, starts, chosen: set[Op], begin, end, low: int, high: int) -> None:
    """Each device's memory within [low, high]: fixed holdings as constant intervals (cut to
    the window), holdings with a freed end as variable ones. Outside the window nothing moves."""
    for d, ops in enumerate(data.device_ops):
        intervals, demands = [], []
        for f in ops:
            for hold in holds(data.split):  # as the op-kind table gives them (cpsat.memory)
                if f.kind != hold.taken:
                    continue
                release = f.with_kind(hold.given)
                amount = data.memory_effect[release][1]
                if amount <= 0:
                    continue
                moving = f in chosen or release in chosen
                if not moving:
                    a, b = max(starts[f], low), min(end(release), high)
                    if a < b:
                        intervals.append(model.new_fixed_size_interval_var(a, b - a, ""))
                        demands.append(amount)
                    continue
                a = begin(f) if f in chosen else max(starts[f], low)
                b = end(release) if release in chosen else min(end(release), high)
                size = model.new_int_var(0, high - low, "")
                intervals.append(model.new_interval_var(a, size, b, ""))
                demands.append(amount)
        if intervals:
            model.add_cumulative(intervals, demands, data.limits[d])


def _tails(data: ProblemView, starts, chosen: set, high: int) -> dict[Op, list[int]]:
    """For each freed op, the longest path from its end to the schedule's end (makespan: one
    entry) or to the end of each device's last op (span: one entry per device) through the
    ops that stay (their dependencies and their order on each device); UNREACHABLE where
    there is none."""
    columns = 1 if data.objective == "makespan" else len(data.device_ops)
    following = {}
    first_after = {}
    for d, ops in enumerate(data.device_ops):
        order = sorted(ops, key=lambda op: starts[op])
        for a, b in zip(order, order[1:]):
            following[a] = b
        later = [op for op in order if op not in chosen and starts[op] >= high]
        first_after[d] = later[0] if later else None
    tail: dict = {}  # op that stays -> per device, the longest path from its start
    for op in sorted(data.ops, key=lambda op: -starts[op]):
        if op in chosen:
            continue
        best = _own(data, op, columns)
        for s, delay in data.successors[op]:
            if s in tail:
                best = [max(b, delay + t) for b, t in zip(best, tail[s])]
        if op in following and following[op] in tail:
            best = [max(b, t) for b, t in zip(best, tail[following[op]])]
        tail[op] = [b + data.duration[op] if b >= 0 else UNREACHABLE for b in best]
    q = {}
    for op in chosen:
        best = _own(data, op, columns)
        for s, delay in data.successors[op]:
            if s not in chosen and s in tail:
                best = [max(b, delay + t) for b, t in zip(best, tail[s])]
        f = first_after[data.graph.device(op)]
        if f is not None:
            best = [max(b, t) for b, t in zip(best, tail[f])]
        q[op] = best
    return q


def _own(data: ProblemView, op: Op, columns: int) -> list[int]:
    """An op ends the schedule, or its own device's work, at the latest (path 0 from its end)."""
    if columns == 1:
        return [0]
    paths = [UNREACHABLE] * columns
    paths[data.graph.device(op)] = 0
    return paths
