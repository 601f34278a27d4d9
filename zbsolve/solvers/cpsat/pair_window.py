"""Window search with F&B pairs: re-order one window of time of the mirrored model.

Where the mirror-image search is the answer (`mirror.ALONE_FROM_OPS`) and stalls, it hands
the rest of the limit to this search, which works like `window` on that model: each step
clones it, fixes every op outside a window of time of the best schedule (and the pairing
of every two fixed halves), and minimises the latest end of the window's ops plus the
longest path from there to the end through the fixed ops; then every op is re-timed as
early as its dependencies, the model's memory-implied edges and its device's order allow,
a pair's halves together (each device keeps its order of ops, so its memory profile keeps
its levels), and the result is kept when no longer. Mirror images start together, so a
window of time holds both halves of the symmetry and the step stays a mirror image.
The mirrored LNS tends to stop on plateaus; these steps get it off them
(docs/solving.md, section 5)."""

from __future__ import annotations

import random
from collections.abc import Iterable

from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import Op
from zbsolve.schedule.timing import DeadlockError, earliest_times
from zbsolve.solvers.result import partners
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView

from .window import prefer_early, run_steps, step_solver

WINDOW_OPS = 200  # ops whose starts span the first window (see `window.run_steps`)


def model_waits(data: ProblemView) -> dict[Op, list[tuple[Op, int]]]:
    """What each op waits for in the model: its dependencies and the implied edges between
    kinds (`build_model`), with their delays."""
    waits = {op: list(data.predecessors[op]) for op in data.ops}
    for a, b, delay in data.implied:
        if a.kind != b.kind:
            waits[b].append((a, delay))
    return waits


def compressed(data: ProblemView, starts: dict[Op, int], pairs: set[tuple[Op, Op]],
               waits: dict[Op, list[tuple[Op, int]]] | None = None) -> tuple[dict[Op, int], dict[Op, int]] | None:
    """Every op as early as its dependencies, the model's implied edges and its device's
    order allow, a pair's halves starting together and a W the pair absorbed ending with it:
    (starts, ends), or None where the order of `starts` does not let the ops be taken in turn.
    `waits`: `model_waits(data)`, when the caller has it."""
    partner = partners(pairs)
    absorbed = {b.with_kind("W"): b for _, b in pairs} if data.split else {}
    waits = model_waits(data) if waits is None else waits
    orders = []
    for ops in data.device_ops:
        slots = []
        for op in sorted(ops, key=lambda op: (starts[op], data.rank[op])):
            if op in absorbed or (op in partner and op.kind != "F"):
                continue  # an absorbed W occupies nothing; a pair's backward goes with its F
            slots.append((op, partner[op]) if op in partner else (op,))
        orders.append(slots)

    def length(slot: tuple[Op, ...]) -> int:
        return data.pair_length if len(slot) == 2 else data.duration[slot[0]]

    # An absorbed W's result is its pair's end: waiting on the W waits on the pair.
    try:
        timed = earliest_times(orders, lambda op: [(absorbed.get(p, p), d) for p, d in waits[op]], lambda op: (op,),
                               length)
    except DeadlockError:
        return None
    new: dict[Op, int] = {}
    end: dict[Op, int] = {}
    for device in timed:
        for slot, at, finish in device:
            for x in slot:
                new[x], end[x] = at, finish
    for w, b in absorbed.items():  # it ends when its pair does
        ready = max((end[p] + delay for p, delay in waits[w]), default=0)
        new[w], end[w] = max(ready, end[b]), end[b]
    return new, end


def search(data: ProblemView, settings: RunSettings, state: SearchState, model: cp_model.CpModel, start: dict, pairs,
           starts: dict[Op, int],
           chosen_pairs: Iterable[tuple[Op, Op]], seconds: float, on_better):
    """Improve a schedule of the mirrored `model` (its start variables and `Pairs`) for
    `seconds` of wall time: (starts, pairs, makespan, steps, improvements), the makespan in
    solver units. `on_better(starts, makespan, pairs)` hears of each gain."""
    chosen = set(chosen_pairs)
    waits = model_waits(data)
    packed = compressed(data, starts, chosen, waits)
    if packed is None:
        return starts, chosen, None, 0, 0
    (best, ends), value, better = packed, max(packed[1].values()), 0

    def step(size: int, seconds: float, rng: random.Random) -> bool:
        nonlocal best, ends, chosen, value, better
        order = sorted(data.ops, key=best.__getitem__)
        first = rng.randrange(max(1, len(order) - size + 1))
        low, high = best[order[first]], best[order[min(len(order), first + size) - 1]]
        free = {op for op in data.ops if low <= best[op] <= high}
        found = _reorder(data, settings, model, start, pairs, best, ends, chosen, free, seconds, rng.randrange(1 << 30))
        packed = None if found is None else compressed(data, found[0], found[1], waits)
        new = None if packed is None else max(packed[1].values())
        shorter = new is not None and new < value
        if packed is not None and found is not None and new is not None and new <= value:
            if shorter:
                better += 1
                on_better(packed[0], new, found[1])
            (best, ends), chosen, value = packed, found[1], new
        return (found is not None and found[2]) or shorter

    steps = run_steps(settings, state, seconds, WINDOW_OPS, len(data.ops), step)
    return best, chosen, value, steps, better


def _slots(data: ProblemView, starts: dict[Op, int], partner: dict[Op, Op], absorbed) -> list[list[Op]]:
    """Per device, what occupies it in turn: single ops and pairs (by their F)."""
    return [sorted((op for op in ops if op not in absorbed and not (op in partner and op.kind != "F")),
                   key=lambda op: (starts[op], data.rank[op])) for ops in data.device_ops]


def _paths_out(data: ProblemView, best, ends, chosen, free: set[Op], high: int) -> dict[Op, int]:
    """For each freed op, the longest path from its end to the schedule's end through the
    fixed ops (their dependencies, pairs and order on each device)."""
    partner = partners(chosen)
    absorbed = {b.with_kind("W") for _, b in chosen} if data.split else set()
    following: dict[Op, Op] = {}
    first_after: dict[int, Op] = {}
    for d, slots in enumerate(_slots(data, best, partner, absorbed)):
        for a, b in zip(slots, slots[1:]):
            following[a] = b
            if a in partner:
                following[partner[a]] = b
        later = [op for op in slots if op not in free and best[op] > high]
        if later:
            first_after[d] = later[0]
    tail: dict[Op, int] = {}  # fixed op -> longest path from its start to the end
    for op in sorted(data.ops, key=lambda op: (-best[op], -data.rank[op])):
        if op in free or op in tail:
            continue
        group = (op, partner[op]) if op in partner else (op,)
        path = 0
        for x in group:
            path = max([path] + [delay + tail[s] for s, delay in data.successors[x] if s in tail])
            if following.get(x) in tail:
                path = max(path, tail[following[x]])
        for x in group:
            tail[x] = path if x in absorbed else ends[x] - best[x] + path
    out = {}
    for op in free:
        path = max([0] + [delay + tail[s] for s, delay in data.successors[op] if s not in free and s in tail])
        after = first_after.get(data.graph.device(op))
        out[op] = max(path, tail.get(after, 0) if after is not None else 0)
    return out


def _reorder(data: ProblemView, settings: RunSettings, model: cp_model.CpModel, start: dict, pairs, best, ends, chosen,
             free: set[Op], seconds: float, seed: int):
    """The window's ops re-ordered and re-paired, the rest fixed: (starts, pairs, proven),
    or None when nothing was found in time."""
    step = model.clone()
    var = {op: step.get_int_var_from_proto_index(v.index) for op, v in start.items()}
    literal = {pair: step.get_bool_var_from_proto_index(x.index) for pair, x in pairs.literal.items()}
    step.clear_hints()
    step.clear_objective()
    for op in data.ops:
        if op not in free:
            step.add(var[op] == best[op])
    member: dict[Op, list] = {}
    paired_backwards = {b for _, b in chosen}
    for (f, b), x in literal.items():
        if f not in free and b not in free:
            step.add(x == int((f, b) in chosen))
            continue
        step.add_hint(x, (f, b) in chosen)
        member.setdefault(f, []).append(x)
        member.setdefault(b, []).append(x)
    after = _paths_out(data, best, ends, chosen, free, max(best[op] for op in free))
    low, makespan = min(best[op] for op in free), max(ends.values())
    latest = 2 * makespan + max(after.values()) + 1
    worst = step.new_int_var(0, latest, "worst")
    for op in free:
        step.add_hint(var[op], best[op])
        if op.kind != "W" or not data.split:
            stretch = (data.pair_length - data.duration[op]) * sum(member.get(op, []))
            step.add(worst >= var[op] + data.duration[op] + stretch + after[op])
            continue
        # A W counts only where it runs by itself; absorbed, it ends with its pair.
        backward = op.with_kind("B")
        if backward in free:
            alone = [x.Not() for x in member.get(backward, [])]
            step.add(worst >= var[op] + data.duration[op] + after[op]).OnlyEnforceIf(alone)
        elif backward not in paired_backwards:
            step.add(worst >= var[op] + data.duration[op] + after[op])
    prefer_early(step, worst, [var[op] for op in free], low, makespan - low + 1, latest)
    solver = step_solver(settings, seconds, seed)
    code = solver.Solve(step)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return ({op: solver.Value(v) for op, v in var.items()},
            {pair for pair, x in literal.items() if solver.BooleanValue(x)}, code == cp_model.OPTIMAL)
