"""A lower bound from one device, or a window of neighbouring devices, at a time, for the
makespan under a memory limit.

The relaxation of a device (of each device of a window) keeps its ops, their no-overlap and the device's memory limit
(held as intervals and counted at each F's start, see `counted`); every other op becomes
the least delay it imposes between two kept ops: the longest path through dependencies,
microbatch order and memory-implied edges (the graph of the static bounds), and each kept
op keeps its head and tail. An optimal schedule of the problem is a schedule of the
relaxation, no longer, so a proof that the relaxation has no schedule within T proves the
problem's optimum longer than T. With F&B pairs the kept devices pair their ops and each
delay counts from a pair's end (`relaxation`); the phase does not ask those (`eligible`).

Where memory is tight such proofs come fast when the whole model's do not. On large models
no device's first question may be answered in time: the phase gives up when a few short
rounds answer nothing, and above `UP_TO_OPS` ops asks only a device whose memory-time bound
is the static bound, and only given `LARGE_BUDGET` (`eligible`; docs/solving.md, section 5).
"""

from __future__ import annotations

from collections.abc import Callable

from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import Op
from zbsolve.solvers.bounds import UNREACHED, Paths, area_bound, device_bound
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView

from .counted import add_counted_memory, counted_terms
from .memory import add_memory
from .pairs import Pairs, occupancy

SHARE = 0.15  # of the time limit, at most, where the phase runs
FIRST_SHARE = 0.05  # of that, for the first round of questions (all devices), doubled each round
ROUNDS = 3  # with no device answered by then, the phase gives up
# Each question asks a quarter of the way from what is proven to the best schedule: near the
# optimum proofs get slow.
STEP = 4
# Windows' questions spend at most this share of the phase's budget: their proofs come in
# the first few work units; what they take beyond is the search's (docs/benchmarks.md).
WINDOWS_SHARE = 1 / 3
# A window's question gets at most 1/OPEN_SHARE of what is left: an open one then asks
# again nearer what is proven, where "no schedule" comes far faster than a schedule. A
# single device's gets all of it (its proofs near the optimum take most of a budget).
OPEN_SHARE = 3
# Larger problems skip the rounds: there no device answered a question within them, so the
# phase only took time from the search.
UP_TO_OPS = 1_000
# Above that, up to LARGE_UP_TO_OPS and given LARGE_BUDGET of the limit's measure, the phase
# asks one device: the one whose memory-time bound (`bounds.area`) is the static bound, where
# memory binds and the device's relaxation sees how its order lengthens the stays. Larger
# models proved too little within such budgets.
LARGE_UP_TO_OPS = 1_500
LARGE_BUDGET = 30.0
# Devices in a window relaxed together (`windows`): with three, questions near the optimum
# already went unanswered for a minute on the 7B chain (docs/benchmarks.md, "Below 1x").
WIDTHS = (2, 3)

# ask(model, limit) -> (CP-SAT status code, the limit's measure spent: seconds, or work units)
Ask = Callable[[cp_model.CpModel, float], tuple[cp_model.CpSolverStatus, float]]


def eligible(data: ProblemView, settings: RunSettings, state: SearchState) -> bool:
    """The makespan under a memory limit, without F&B pairs, within `UP_TO_OPS` ops; up to
    `LARGE_UP_TO_OPS`, where a device's memory-time bound is the static bound and the phase's
    share of the limit is at least `LARGE_BUDGET`.

    With pairs a device's relaxation alone proves little, and a device with its neighbour
    proves too slowly for the phase's rounds."""
    if data.objective != "makespan" or data.pair_duration is not None or data.memory_limit is None:
        return False
    if len(data.ops) <= UP_TO_OPS:
        return True
    return (len(data.ops) <= LARGE_UP_TO_OPS and SHARE * settings.limit >= LARGE_BUDGET
            and memory_bound_device(data, state) is not None)


def memory_bound_device(data: ProblemView, state: SearchState) -> int | None:
    """The first device whose memory-time (area) bound is the static bound, if one is."""
    static = state.lower_bound()
    return next((d for d, ops in enumerate(data.device_ops) if ops and area_bound(data, ops) >= static), None)


def relaxation(data: ProblemView, state: SearchState, paths: Paths, devices: list[int], counted: bool = True,
               terms: dict | None = None, crossed: list[Op] | None = None) -> tuple[cp_model.CpModel, cp_model.IntVar]:
    """The relaxation keeping `devices`: the model and its makespan variable. `terms` (the
    counted form's, see `counted.counted_terms`) are computed when not given. `crossed`: ops
    of other devices kept as well, one at a time on their devices but under no memory limit
    (`trip_ops`); dropping the rest of a device's ops only frees it, so this stays a relaxation.

    With F&B pairs the kept devices may pair their ops as in the whole model, and each delay
    counts from when an op hands on its result: a pair's end for its F or backward (its
    delay to another kept op is the longest path less the op's own shortest length; without
    pairs that is the same as counting from its start). No ops are `crossed` then: alone at
    full length they would take longer than a pair of theirs may."""
    if crossed and data.pair_duration is not None:
        raise ValueError("a relaxation with F&B pairs keeps no ops of other devices")
    ops = [op for device in devices for op in data.device_ops[device]]
    ops += [op for op in crossed or [] if data.graph.device(op) not in devices]
    model = cp_model.CpModel()
    start = {op: model.new_int_var(data.head[op], state.horizon - data.tail[op], str(op)) for op in ops}
    occupied = None
    if data.pair_duration is None:
        end = {op: start[op] + data.duration[op] for op in ops}
    else:
        end, occupied = occupancy(model, data, start, Pairs(model, data, start, [], state, devices), [], state.horizon,
                                   devices)
    for a in ops:
        reach = paths.longest_from([a])
        for b in ops:
            delay = reach[paths.index[b]]
            if b != a and delay != UNREACHED:
                model.add(start[b] >= end[a] + (delay - data.shortest(a)))
    for device in sorted({data.graph.device(op) for op in ops}):
        model.add_no_overlap(occupied[device] if occupied else
                           [model.new_fixed_size_interval_var(start[op], data.duration[op], f"i{op}")
                            for op in data.device_ops[device] if op in start])
    if data.memory_limit is not None:
        add_memory(model, data, start, end, [], state.horizon, devices)
        if counted:  # the terms the edges decide stay decided: those edges are among the delays
            terms = counted_terms(data) if terms is None else terms
            kept = {f: found for f, found in terms.items() if data.graph.device(f) in devices}
            add_counted_memory(model, data, start, end, [], kept)
    makespan = model.new_int_var(0, state.horizon, "makespan")
    for op in ops:
        model.add(makespan >= end[op] + (data.tail[op] - data.shortest(op)))
    model.minimize(makespan)
    return model, makespan


def trip_ops(data: ProblemView, devices: list[int]) -> list[Op]:
    """The F and backward ops (no W) on other devices of the stages a microbatch crosses after
    its first stage on one of `devices`, in each pipe: the trip its activation there waits for,
    where its ops contend with other microbatches' (on a V at P=8 and 0.5x, the middle device's
    relaxation reaches the static bound alone and proves more with these)."""
    first: dict[int, int] = {}
    for device in devices:
        for pipe, stage in data.forward_chains(device):
            first[pipe] = min(first.get(pipe, stage), stage)
    return [op for op in data.ops if op.kind != "W" and op.pipe in first and op.stage > first[op.pipe]
            and data.graph.device(op) not in devices]


def raise_bound(data: ProblemView, state: SearchState, budget: float, ask: Ask,
                progress: Callable[[int], None] | None = None
                ) -> tuple[int | None, tuple[int, ...] | None, float]:
    """Within `budget`, prove the optimum above the static bound with the relaxations of
    single devices and of `windows` of neighbouring ones: (the bound proven, in solver units,
    or None; the devices whose relaxation proved it; the budget spent).

    First each device, then each window, is asked, in rounds with the limit doubled each
    round, for a relaxation schedule as short as the static bound: one that has one cannot
    help; one that has none becomes a candidate. With none answered after `ROUNDS`
    rounds the phase gives up. Candidates are then asked for schedules a quarter of the way
    from what is proven to the shortest schedule each may still have (at first the best
    known, `state.incumbent`), the roomiest candidate first (single devices among equals); a
    question left open drops a single device, and is asked again nearer what is proven for
    a window (see OPEN_SHARE). Windows spend at most WINDOWS_SHARE of the budget."""
    lower, best = state.lower_bound(), state.incumbent
    if best is None or best <= lower:
        return None, None, 0.0
    used = [d for d, ops in enumerate(data.device_ops) if ops]
    unasked: list[tuple[int, ...]] = [(d,) for d in used] + windows(data)
    limit = FIRST_SHARE * budget / max(1, len(unasked))
    if len(data.ops) > UP_TO_OPS:  # one device, whose first question may take the whole budget
        device = memory_bound_device(data, state)
        if device is None:
            return None, None, 0.0
        unasked, limit = [(device,)], budget
    paths, terms, spent = Paths(data), counted_terms(data), 0.0
    models: dict[tuple[int, ...], tuple[cp_model.CpModel, cp_model.IntVar]] = {}  # built when first asked
    ceiling: dict[tuple[int, ...], int] = {}  # candidates: each has a relaxation schedule no longer than this
    proven: int | None = None
    by: tuple[int, ...] | None = None
    rounds, answered, on_windows = 0, False, 0.0

    def room(kept: tuple[int, ...]) -> float:
        """What a question may spend: windows share WINDOWS_SHARE of the budget."""
        left = budget - spent
        return left if len(kept) == 1 else min(left, WINDOWS_SHARE * budget - on_windows)

    def prove(value: int, kept: tuple[int, ...]) -> None:
        nonlocal proven, by
        proven, by = value, kept
        if progress:
            progress(value)

    while spent < budget and not state.stop.is_set():
        floor = lower if proven is None else proven
        roomy = [k for k in ceiling if ceiling[k] > floor and room(k) > 0]
        if roomy:
            kept = max(roomy, key=lambda k: (ceiling[k], -len(k)))
            window = len(kept) > 1
            target = floor + (ceiling[kept] - 1 - floor) // STEP
            code, used_now = _within(models[kept], target, room(kept) / (OPEN_SHARE if window else 1), ask)
            spent += used_now
            on_windows += used_now if window else 0.0
            if code == cp_model.INFEASIBLE:
                prove(target + 1, kept)
            elif code in (cp_model.OPTIMAL, cp_model.FEASIBLE) or (window and target > floor):
                ceiling[kept] = target  # for a window left open: ask nearer what is proven
            else:
                del ceiling[kept]
            continue
        if not unasked or (rounds == ROUNDS and not answered):
            break
        for kept in list(unasked):  # one round of first questions
            if room(kept) <= 0:
                unasked.remove(kept)
                continue
            if kept not in models:
                models[kept] = relaxation(data, state, paths, list(kept), terms=terms)
            floor = lower if proven is None else proven
            code, used_now = _within(models[kept], floor, min(limit, room(kept)), ask)
            spent += used_now
            on_windows += used_now if len(kept) > 1 else 0.0
            if code != cp_model.UNKNOWN:
                answered = True
                unasked.remove(kept)
                if code == cp_model.INFEASIBLE:
                    ceiling[kept] = best
                    prove(floor + 1, kept)
            if spent >= budget or state.stop.is_set():
                break
        limit, rounds = 2 * limit, rounds + 1
    return proven, by, spent


def windows(data: ProblemView) -> list[tuple[int, ...]]:
    """Neighbouring devices to relax together, `WIDTHS` of them: from the device with the
    highest own static bound, each time adding the device that exchanges results with the
    window and has the highest own bound. Contention on a neighbour delays the round trips
    a device's memory waits for, which a single device's relaxation counts only as path
    lengths (docs/solving.md, section 5)."""
    used = [d for d, ops in enumerate(data.device_ops) if ops]
    if len(used) < 2:
        return []
    own = {d: device_bound(data, data.device_ops[d]) for d in used}
    window = [max(used, key=lambda d: (own[d], -d))]
    found: list[tuple[int, ...]] = []
    while len(window) < max(WIDTHS):
        near = {data.graph.device(other) for d in window for op in data.device_ops[d]
                for other, _ in data.predecessors[op] + data.successors[op]} - set(window)
        if not near:
            break
        window.append(max(near, key=lambda d: (own[d], -d)))
        if len(window) in WIDTHS:
            found.append(tuple(sorted(window)))
    return found


def _within(relaxed: tuple[cp_model.CpModel, cp_model.IntVar], target: int, limit: float,
            ask: Ask) -> tuple[cp_model.CpSolverStatus, float]:
    """Whether the relaxation (its model and makespan) has a schedule no longer than `target`:
    CP-SAT's answer."""
    model, makespan = relaxed
    question = model.clone()
    question.add(question.get_int_var_from_proto_index(makespan.index) <= target)
    question.clear_objective()
    return ask(question, max(limit, 0.1))
