"""The CP-SAT model of a problem (docs/solving.md, section 4): one interval per op,
no-overlap and memory per device, precedences, symmetry and implied edges, the objective."""

from __future__ import annotations

from collections.abc import Collection

from ortools.sat.python import cp_model

from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView

from .counted import add_counted_memory, planned
from .hints import Derived, first_start, last_end
from .memory import add_memory
from .pairs import Pairs, occupancy


def build_model(data: ProblemView, state: SearchState, counted_memory: bool | None = None,
                one_at_a_time: Collection[int] | None = None,
                pairs_within: int | None = None):
    """The model, its start variables, objective and pairs, and how every other variable
    follows from a hinted schedule. `counted_memory` forces the limit's counted form on or
    off (see `counted`); by default models within its size get it. `one_at_a_time`: the
    devices that run one op (or pair) at a time, all by default; leaving some out relaxes
    the model. `pairs_within` restricts the pairs to
    halves the hint starts that close (see `Pairs`): then the model is a restriction."""
    model = cp_model.CpModel()
    H = state.horizon
    start = {op: model.new_int_var(data.head[op], H - data.tail[op], f"s{op}") for op in data.ops}
    derived: Derived = []
    pairs = Pairs(model, data, start, derived, state, within=pairs_within) if data.pair_duration is not None else None
    end, device_intervals = occupancy(model, data, start, pairs, derived, state.horizon)
    for op in data.ops:
        for pred, delay in data.predecessors[op]:
            model.add(start[op] >= end[pred] + delay)
    for chain in data.chains:  # identical microbatches: take them in order
        if data.ordered(chain):
            for a, b in zip(chain, chain[1:]):
                model.add(start[b] >= start[a] + data.shortest(a))
    for a, b, delay in data.implied:  # memory-implied order: redundant, but CP-SAT does not derive it
        if a.kind != b.kind:
            model.add(start[b] >= end[a] + delay)
    for d, intervals in enumerate(device_intervals):
        if one_at_a_time is None or d in one_at_a_time:
            model.add_no_overlap(intervals)
    if data.memory_limit is not None:
        add_memory(model, data, start, end, derived, state.horizon)
        terms = planned(data, counted_memory)
        if terms is not None:
            add_counted_memory(model, data, start, end, derived, terms)
    objective = _add_objective(model, data, state, start, end, derived)
    return model, start, objective, pairs, derived


def _add_objective(model, data: ProblemView, state: SearchState, start, end, derived: Derived):
    H = state.horizon
    worst = H if state.incumbent is None else min(H, state.incumbent)
    if data.objective == "makespan":
        makespan = model.new_int_var(state.lower_bound(), worst, "makespan")
        sinks = data.sinks()
        for op in sinks:
            model.add(makespan >= end[op])
        derived.append((makespan, lambda h: max(h.end[op] for op in sinks)))
        model.minimize(makespan)
        return makespan
    span = model.new_int_var(state.lower_bound(), worst, "span")
    # The span does not change when a schedule moves in time, so only schedules whose earliest
    # op starts at 0 are searched (one stage-0 F per pipe may be it): without this anchor
    # CP-SAT's bound stays at the static one.
    model.add_min_equality(0, [start[op] for op in data.starters])
    spans = []
    for d in range(len(data.device_ops)):
        first = model.new_int_var(0, H, f"first{d}")
        last = model.new_int_var(0, H, f"last{d}")
        firsts, lasts = data.first_forwards(d), data.last_backwards(d)
        for op in firsts:
            model.add(first <= start[op])
        for op in lasts:
            model.add(last >= end[op])
        model.add(span >= last - first)
        derived.append((first, first_start(firsts)))
        derived.append((last, last_end(lasts)))
        spans.append((firsts, lasts))
    derived.append((span, lambda h: max(max(h.end[op] for op in lasts) - min(h.start[op] for op in firsts)
                                        for firsts, lasts in spans)))
    model.minimize(span)
    return span
