"""The memory limit counted at each F's start, beside the cumulative form (docs/design.md, "Memory").

Memory rises only when an F starts, so the limit also reads: at each F's start, the
activations of the F's started by then, less what the B's and W's ended by then have
released, fit the device's limit. With one Boolean per (F, other op of the device) this is
linear, and it allows exactly the schedules the cumulative allows. CP-SAT deduces far more
from it: bounds the cumulative form leaves open for a whole solve are ruled out at once.

Where the model's own edges (dependencies, microbatch order, memory-implied edges) already
decide whether an op has started or ended by an F's start, the term is a constant: about a
quarter of the pairs are left to Booleans.

Only small models without F&B pairs whose devices hold several stages get it (`planned`):
there it proved optima the cumulative form alone did not; with one stage per device, on
larger models and with pairs (whose edges decide no term) it did not pay
(docs/solving.md, section 4).
"""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import allocates, frees
from zbsolve.solvers.view import ProblemView

from .hints import Derived, ended_by, started_before

MAX_BOOLEANS = 2_000
# Deciding terms by the edges takes a bitset of n bits per op and a term per (F, op) pair of
# a device; beyond this many ops the Booleans are counted by formula and none is decided.
EDGES_UP_TO_OPS = 3_000
# The edges leave a quarter to a third of the terms open on the standard suite (two thirds on
# DualPipe's placement); models with more than this many times the cap before deciding are not
# worth deciding.
UNDECIDED_SHARE = 8


@dataclass(frozen=True)
class Term:
    op: Op  # an F that may have started, or a B or W that may have ended, by the F's start
    amount: int  # memory it adds (F) or, negative, frees (B, W)
    known: bool | None  # decided by the model's edges; None: a Boolean decides


def planned(data: ProblemView, forced: bool | None = None) -> dict[Op, list[Term]] | None:
    """The counted form's terms for each F when the model should get it: when `forced`, or
    by default on devices of several stages, without pairs, within `MAX_BOOLEANS` Booleans."""
    if forced is False or data.memory_limit is None:
        return None
    if forced is None and (data.pair_duration is not None or _undecided_count(data) > UNDECIDED_SHARE * MAX_BOOLEANS
                           or all(len(data.forward_chains(d)) < 2 for d in range(len(data.device_ops)))):
        return None
    terms = counted_terms(data)
    return terms if forced or booleans(terms) <= MAX_BOOLEANS else None


def booleans(terms: dict[Op, list[Term]]) -> int:
    return sum(term.known is None for found in terms.values() for term in found)


def counted_terms(data: ProblemView) -> dict[Op, list[Term]]:
    """For each F, the terms of its counted limit: every F and every B or W that frees
    memory on its device, each known to have happened by its start, known not to, or not known."""
    order = _Order(data) if data.pair_duration is None and len(data.ops) <= EDGES_UP_TO_OPS else None
    terms: dict[Op, list[Term]] = {}
    for ops in data.device_ops:
        forwards = [op for op in ops if allocates(op.kind)]  # F: the kinds that take memory at their start
        releases = [op for op in ops if frees(op.kind) and data.memory_effect[op][1] > 0]
        for x in forwards:
            found = [Term(f, data.memory_effect[f][0], _started(data, order, f, x))
                     for f in forwards if f != x and data.memory_effect[f][0] > 0]
            found += [Term(r, -data.memory_effect[r][1], _ended(data, order, r, x)) for r in releases]
            terms[x] = found
    return terms


def add_counted_memory(model: cp_model.CpModel, data: ProblemView, start: dict, end: dict,
                       derived: Derived, terms: dict[Op, list[Term]]) -> None:
    for x, found in terms.items():
        limit = data.limits[data.graph.device(x)]
        level: int | cp_model.LinearExpr = data.memory_effect[x][0]
        for term in found:
            if term.known is not None:
                level += term.amount * term.known
                continue
            y = term.op
            happened = model.new_bool_var(f"by{x}{y}")
            if allocates(y.kind):  # started strictly before x
                model.add(start[y] + 1 <= start[x]).OnlyEnforceIf(happened)
                model.add(start[y] >= start[x]).OnlyEnforceIf(happened.Not())
                derived.append((happened, started_before(y, x)))
            else:  # ended by x's start
                model.add(end[y] <= start[x]).OnlyEnforceIf(happened)
                model.add(end[y] >= start[x] + 1).OnlyEnforceIf(happened.Not())
                derived.append((happened, ended_by(y, x)))
            level += term.amount * happened
        if not isinstance(level, int) or level > limit:  # a constant within the limit adds nothing
            model.add(level <= limit)


def _undecided_count(data: ProblemView) -> int:
    """The Booleans when no term is decided (each F's own B and W end after it)."""
    total = 0
    for ops in data.device_ops:
        forwards = sum(allocates(op.kind) for op in ops)
        releases = sum(frees(op.kind) and data.memory_effect[op][1] > 0 for op in ops)
        total += forwards * max(0, forwards - 1 + releases) - releases
    return total


class _Order:
    """Which ops follow which along `before` (every edge the model holds; without pairs, an
    edge a -> b means b starts no earlier than a ends), as a bitset per op over `data.rank`."""

    def __init__(self, data: ProblemView) -> None:
        self.rank = data.rank
        self.after = {op: 0 for op in data.ops}
        for op in reversed(data.topological):
            for pred, _ in data.before[op]:
                self.after[pred] |= self.after[op] | (1 << self.rank[op])

    def reaches(self, a: Op, b: Op) -> bool:
        return bool(self.after[a] >> self.rank[b] & 1)


def _own(release: Op, forward: Op) -> bool:
    return release.with_kind(forward.kind) == forward


def _started(data: ProblemView, order: _Order | None, f: Op, x: Op) -> bool | None:
    """Whether F f starts strictly before F x in every schedule of the model."""
    if order is None:
        return None
    if order.reaches(x, f):
        return False
    if order.reaches(f, x) and data.duration[f] > 0:
        return True
    return None


def _ended(data: ProblemView, order: _Order | None, r: Op, x: Op) -> bool | None:
    """Whether B or W r ends by F x's start in every schedule of the model (x's own end
    after it: they follow its end, and one of the two takes time)."""
    if order is None:
        return False if _own(r, x) else None
    if order.reaches(r, x):
        return True
    if order.reaches(x, r) and data.duration[x] + data.duration[r] > 0:
        return False
    return None
