"""Registry of hand-made schedules: which placements each fits, and its timed schedule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zbsolve.errors import UsageError
from zbsolve.ops import OpGraph
from zbsolve.problem import Problem
from zbsolve.schedule import Schedule
from zbsolve.simulator import simulate

from . import chunked, dualpipe, single


def _needs_single(problem: Problem) -> str | None:
    if problem.placement != "single":
        return f"needs the single placement (this problem is {problem.placement})"
    return None


def _needs_split(problem: Problem) -> str | None:
    return None if problem.split_backward else "needs split_backward (B and W as separate ops)"


def _needs_single_split(problem: Problem) -> str | None:
    return _needs_single(problem) or _needs_split(problem)


def _needs_interleaved(problem: Problem) -> str | None:
    if not problem.placement.startswith("interleaved:"):
        return f"needs an interleaved:V placement (this problem is {problem.placement})"
    if problem.microbatches % problem.devices:
        return (f"needs the number of microbatches ({problem.microbatches}) to be a multiple of "
                f"the number of ranks ({problem.devices})")
    return None


def _needs_vshape_split(problem: Problem) -> str | None:
    if problem.placement != "vshape":
        return f"needs the vshape placement (this problem is {problem.placement})"
    return _needs_split(problem)


def _needs_two_p_microbatches(problem: Problem) -> str | None:
    if problem.microbatches < 2 * problem.devices:
        return f"needs at least 2P = {2 * problem.devices} microbatches, got {problem.microbatches}"
    return None


def _needs_dualpipe(problem: Problem) -> str | None:
    if problem.placement != "bidirectional":
        return f"needs the bidirectional placement (this problem is {problem.placement})"
    return _needs_split(problem) or _needs_two_p_microbatches(problem)


def _needs_dualpipe_v(problem: Problem) -> str | None:
    return _needs_vshape_split(problem) or _needs_two_p_microbatches(problem)


@dataclass(frozen=True)
class Baseline:
    name: str
    title: str
    build: Callable[[Problem], list]
    refuses: Callable[[Problem], str | None]
    placement: str  # the named placement it is made for ("interleaved" for any interleaved:V)


BASELINES: dict[str, Baseline] = {
    b.name: b
    for b in (
        Baseline("gpipe", "GPipe", single.gpipe, _needs_single, "single"),
        Baseline("1f1b", "1F1B", single.one_f_one_b, _needs_single, "single"),
        Baseline("zb-h1", "ZB-H1", single.zb_h1, _needs_single_split, "single"),
        Baseline("zb-h2", "ZB-H2", single.zb_h2, _needs_single_split, "single"),
        Baseline("interleaved", "interleaved 1F1B", chunked.interleaved_1f1b, _needs_interleaved, "interleaved"),
        Baseline("zb-v", "ZB-V", chunked.zb_v, _needs_vshape_split, "vshape"),
        Baseline("dualpipe", "DualPipe", dualpipe.dualpipe, _needs_dualpipe, "bidirectional"),
        Baseline("dualpipev", "DualPipeV", dualpipe.dualpipe_v, _needs_dualpipe_v, "vshape"),
    )
}


def baseline_names() -> list[str]:
    return list(BASELINES)


def applicable(problem: Problem) -> list[str]:
    """Names of the baselines that fit the problem's placement and options."""
    return [name for name, b in BASELINES.items() if b.refuses(problem) is None]


def left_out(problem: Problem) -> list[tuple[str, str]]:
    """The baselines made for the problem's placement that its other settings rule out
    (too few microbatches, a fused backward), each with why: a table without them says so."""
    placement = problem.placement.split(":")[0]
    return [(name, reason) for name, b in BASELINES.items()
            if b.placement == placement and (reason := b.refuses(problem)) is not None]


def run_baseline(name: str, problem: Problem, graph: OpGraph | None = None) -> Schedule:
    """The named hand-made schedule, timed by the simulator; UsageError if it does not fit."""
    key = name.strip().lower() if isinstance(name, str) else None
    if key not in BASELINES:
        raise UsageError(f"unknown baseline {name!r}; choose one of {', '.join(BASELINES)}")
    baseline = BASELINES[key]
    reason = baseline.refuses(problem)
    if reason:
        raise UsageError(f"baseline {key} does not fit this problem: it {reason}")
    return simulate(graph or OpGraph(problem), baseline.build(problem), key)
