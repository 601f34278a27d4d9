"""What a search knows as it runs: its start, the best schedule so far, proven bounds, and
the stop signal. Shared by the solve pipeline, a backend and the thread that runs it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from zbsolve.problem.op_graph import Op

from .bounds import lower_bound
from .view import ProblemView


@dataclass
class SearchState:
    view: ProblemView
    hint: dict[Op, int] | None = None  # a starting schedule's start times, solver units
    hint_pairs: set[tuple[Op, Op]] = field(default_factory=set)  # (F, B or BW) overlapped in the hint
    incumbent: int | None = None  # the starting schedule's objective: no worse is wanted
    horizon: int = -1  # every op ends by then; the view's until an incumbent narrows it
    best_found: tuple | None = None  # (starts, objective, pairs): a backend's latest solution
    stop: threading.Event = field(default_factory=threading.Event)
    _bound: int | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.horizon < 0:
            self.horizon = self.view.horizon

    def lower_bound(self) -> int:
        """A proven bound on the objective in solver units: the static one (see `bounds`),
        computed on first use, or higher where a backend proved more."""
        if self._bound is None:
            self._bound = lower_bound(self.view)
        return self._bound

    def raise_bound(self, units: int) -> None:
        """What a backend proved beyond `lower_bound()`, for the models it builds afterwards."""
        self._bound = max(self.lower_bound(), units)

    def take_incumbent(self, units: int) -> None:
        """A schedule of objective `units` is known: only one no worse is wanted, and for the
        makespan every op ends by then (narrow domains propagate far faster in large models)."""
        self.incumbent = units
        if self.view.objective == "makespan":
            self.horizon = min(self.horizon, units)
