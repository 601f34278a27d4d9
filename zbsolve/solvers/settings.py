"""How long and how a solve runs: the settings every backend reads and none changes."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from zbsolve.errors import UsageError

# progress(best value or None, bound or None, elapsed seconds), values in problem units.
Progress = Callable[[float | None, float | None, float], None]

MAX_SEED = 2**31 - 1  # CP-SAT's random_seed is a 32-bit integer


@dataclass(frozen=True)
class RunSettings:
    """`limit` counts seconds of wall clock, or, when `deterministic`, the work units of a
    backend that measures its work (CP-SAT's deterministic time; `Backend.work_limited`)."""

    limit: float = 60.0
    workers: int = 1
    seed: int = 0
    deterministic: bool = False  # limited by a work measure instead of the clock, so a run repeats
    progress: Progress | None = None

    def limit_text(self, work_limited: bool) -> str:
        """The limit with its unit, for a backend that does (or does not) measure its work."""
        return f"{self.limit:g} work units" if self.deterministic and work_limited else f"{self.limit:g} s"


def runs_deterministic(workers: int, deterministic: bool | None) -> bool:
    """Whether a solve is limited by work, not the clock: asked for, or one worker by default."""
    return workers == 1 if deterministic is None else deterministic


def check_run_options(time_limit: float, workers: int, deterministic: bool | None = None, seed: int = 0) -> None:
    """Refuse settings no backend can run with, before any work."""
    if not isinstance(time_limit, (int, float)) or not math.isfinite(time_limit) or time_limit <= 0:
        raise UsageError(f"time limit must be a positive number of seconds, got {time_limit!r}")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise UsageError(f"workers must be an integer >= 1, got {workers!r}")
    if deterministic and workers != 1:
        raise UsageError(f"a deterministic solve needs one worker (several race), got workers={workers}")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise UsageError(f"seed must be an integer from 0 to {MAX_SEED}, got {seed!r}")
