"""Solver backends register themselves here; the pipeline and the CLI read only this, and
name no backend.

Each backend is a folder under `zbsolve/solvers/` whose `__init__.py` calls `register`;
`backends.py` imports them. Deleting the folder and its line there removes the backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zbsolve.errors import UsageError
from zbsolve.problem.problem import Problem
from zbsolve.problem.size import SizeError, describe_shape

from .result import BackendResult
from .settings import RunSettings
from .state import SearchState
from .view import ProblemView

Run = Callable[[ProblemView, RunSettings, SearchState], BackendResult]


@dataclass(frozen=True)
class Backend:
    """A solver backend: `run(view, settings, state)` returns a `BackendResult` in solver units.

    The contract every backend keeps (tests/solvers/test_backend_contract.py holds each to it):

    1. Stop: when `state.stop` is set it returns soon (CP-SAT and CBC within a second or so of
       their next check), with `interrupted` True unless it had already proven its answer.
    2. Limits: `settings.limit` is seconds of wall clock, or, where `work_limited` and
       `settings.deterministic`, units of its own work measure, so that a run repeats; a
       backend with no work measure keeps to the clock (the runner leaves it behind
       `OVERRUN_GRACE_S` past the limit).
    3. Progress: `settings.progress(best, bound, elapsed)` in problem units when it finds a
       better schedule or proves a higher bound (where given).
    4. Start: `state.hint` (a starting schedule's starts), `state.hint_pairs` and
       `state.incumbent` (only a schedule no worse than it is wanted) are taken where it can.
    5. Best found: a schedule it has is never dropped; when stopped or giving up it returns
       it (`FEASIBLE`), and records each new one in `state.best_found` so that a backend left
       behind still hands it over.
    6. Honesty: `status` is a `Status`; `OPTIMAL` and `INFEASIBLE` only with a proof, and
       `bound` only where proven.
    """

    name: str
    run: Run
    summary: str  # one line for --help
    work_limited: bool  # a deterministic solve limits it by work; else it keeps to the clock
    size: Callable[[Problem], int] | None = None  # what its size limit counts
    size_limit: int | None = None
    size_unit: str = "ops"  # what `size` counts, for messages
    # Above the limit: the backend that answers instead (None: refuse with SizeError).
    above_limit: str | None = None
    # Why it cannot model a problem at all (None: it can); checked before any work.
    refuses: Callable[[Problem], str | None] = lambda _problem: None
    # A fast heuristic whose schedule starts the other backends' searches (the list scheduler).
    makes_starts: bool = False
    # Its work measure runs far slower than the clock with F&B pairs (a deterministic solve
    # can then take several times its limit: the CLI says so).
    slow_work_with_pairs: bool = False


_BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> None:
    _BACKENDS[backend.name] = backend


def names() -> tuple[str, ...]:
    return tuple(_BACKENDS)


def default_name() -> str:
    """The backend a solve uses unless told: the first registered (backends.py's order)."""
    return next(iter(_BACKENDS))


def get(name: str) -> Backend:
    if name not in _BACKENDS:
        raise UsageError(f"unknown solver {name!r}; choose one of {', '.join(_BACKENDS)}")
    return _BACKENDS[name]


def registered(name: str) -> bool:
    return name in _BACKENDS


def starter() -> Backend | None:
    """The backend that makes starting schedules for the others, when one is installed."""
    return next((b for b in _BACKENDS.values() if b.makes_starts), None)


def backend_for(problem: Problem, name: str) -> tuple[Backend, str | None]:
    """The backend that runs `problem`, and why it is not the one asked for (above its size
    limit, where it names one to answer instead). Refuses before any work."""
    backend = get(name)
    reason = backend.refuses(problem)
    if reason is not None:
        raise UsageError(reason)
    if backend.size is None or backend.size_limit is None:
        return backend, None
    size = backend.size(problem)
    if size <= backend.size_limit:
        return backend, None
    if backend.above_limit is not None and registered(backend.above_limit):
        reason = get(backend.above_limit).refuses(problem)
        if reason is not None:
            raise SizeError(f"{describe_shape(problem)} are above the {name} model limit of {backend.size_limit:,} "
                            f"{backend.size_unit}, and {reason}")
        note = (f"{size:,} {backend.size_unit} are above the {name} model limit of {backend.size_limit:,}: "
                f"answered by the {backend.above_limit} backend")
        return get(backend.above_limit), note
    others = [b for b in _BACKENDS.values() if b.name != name and b.size_limit is not None
              and b.size is not None and b.size(problem) <= b.size_limit]
    hint = f"use --solver {others[0].name}, which scales further, or" if others else "use"
    raise SizeError(
        f"{describe_shape(problem)} need a {name} model of {size:,} {backend.size_unit}, above its limit of "
        f"{backend.size_limit:,}: {hint} fewer microbatches (bubble rates settle once M is a few times P), or "
        f"the hand-made schedules (zbsolve compare --no-solve)"
    )
