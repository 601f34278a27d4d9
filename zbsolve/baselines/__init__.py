"""Registry of hand-made schedules: which placements each fits, and its timed schedule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zbsolve.errors import UsageError
from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Schedule
from zbsolve.schedule.simulator import simulate

from . import chunked, dualpipe, single, v_blocks
from .offload import needs_offload, offloading
from .recompute import needs_recompute, recomputing
from .zb_auto import zb_auto, zb_auto_fits
from .zb_v_auto import zb_v_auto, zb_v_auto_fits


def _needs_split(problem: Problem) -> str | None:
    return None if problem.split_backward else "needs split_backward (B and W as separate ops)"


def _needs_whole_rounds(problem: Problem) -> str | None:
    if problem.microbatches % problem.devices:
        return (f"needs the number of microbatches ({problem.microbatches}) to be a multiple of "
                f"the number of ranks ({problem.devices})")
    return None


def _needs_whole_rounds_of_zb(problem: Problem) -> str | None:
    rounds = max(1, problem.microbatches // problem.devices)
    if problem.microbatches % rounds:
        return (f"needs the number of microbatches ({problem.microbatches}) to be a multiple of its number of "
                f"rounds ({rounds}, M // P)")
    return None


def _needs_two_p_microbatches(problem: Problem) -> str | None:
    if problem.microbatches < 2 * problem.devices:
        return f"needs at least 2P = {2 * problem.devices} microbatches, got {problem.microbatches}"
    return None


@dataclass(frozen=True)
class Baseline:
    name: str
    title: str
    build: Callable[[Problem], list] | Callable[[Problem], Schedule]  # orders, or a schedule timed by its own rule
    placement: str  # the named placement it is made for ("interleaved" for any interleaved:V)
    needs: tuple[Callable[[Problem], str | None], ...] = ()  # what else it needs, each saying why not

    def refuses(self, problem: Problem) -> str | None:
        """Why it does not fit the problem (its placement first), or None."""
        if problem.placement.split(":")[0] != self.placement:
            wanted = "an interleaved:V" if self.placement == "interleaved" else f"the {self.placement}"
            return f"needs {wanted} placement (this problem is {problem.placement})"
        return next((reason for need in self.needs if (reason := need(problem)) is not None), None)


BASELINES: dict[str, Baseline] = {
    b.name: b
    for b in (
        Baseline("gpipe", "GPipe", single.gpipe, "single"),
        Baseline("1f1b", "1F1B", single.one_f_one_b, "single"),
        Baseline("zb-h1", "ZB-H1", single.zb_h1, "single", (_needs_split,)),
        Baseline("zb-h2", "ZB-H2", single.zb_h2, "single", (_needs_split,)),
        Baseline("zb-auto", "ZB greedy", zb_auto, "single", (_needs_split, zb_auto_fits)),
        Baseline("interleaved", "interleaved 1F1B", chunked.interleaved_1f1b, "interleaved", (_needs_whole_rounds,)),
        Baseline("interleaved-zb", "interleaved zero bubble", chunked.interleaved_zb, "interleaved",
                 (_needs_split, _needs_whole_rounds_of_zb)),
        Baseline("looped-bfs", "looped BFS", chunked.looped_bfs, "interleaved"),
        Baseline("zb-v", "ZB-V", chunked.zb_v, "vshape", (_needs_split,)),
        Baseline("zb-v-auto", "ZB-V greedy", zb_v_auto, "vshape", (_needs_split, zb_v_auto_fits)),
        Baseline("v-min", "V-Min", v_blocks.v_min, "vshape", (_needs_split,)),
        Baseline("v-half", "V-Half", v_blocks.v_half, "vshape", (_needs_split,)),
        Baseline("dualpipe", "DualPipe", dualpipe.dualpipe, "bidirectional", (_needs_split, _needs_two_p_microbatches)),
        Baseline("dualpipev", "DualPipeV", dualpipe.dualpipe_v, "vshape", (_needs_split, _needs_two_p_microbatches)),
        # with every microbatch recomputed, where the problem allows it
        Baseline("1f1b-r", "1F1B + recompute", recomputing(single.one_f_one_b), "single", (needs_recompute,)),
        Baseline("zb-h1-r", "ZB-H1 + recompute", recomputing(single.zb_h1), "single",
                 (needs_recompute, _needs_split)),
        Baseline("interleaved-r", "interleaved 1F1B + recompute", recomputing(chunked.interleaved_1f1b),
                 "interleaved", (needs_recompute, _needs_whole_rounds)),
        Baseline("interleaved-zb-r", "interleaved zero bubble + recompute", recomputing(chunked.interleaved_zb),
                 "interleaved", (needs_recompute, _needs_split, _needs_whole_rounds_of_zb)),
        Baseline("zb-v-r", "ZB-V + recompute", recomputing(chunked.zb_v), "vshape", (needs_recompute, _needs_split)),
        # with activations offloaded by the PipeOffload rule, where the problem allows it
        Baseline("1f1b-o", "1F1B + offload", offloading(single.one_f_one_b, "1f1b-o"), "single", (needs_offload,)),
        Baseline("zb-h1-o", "ZB-H1 + offload", offloading(single.zb_h1, "zb-h1-o"), "single",
                 (needs_offload, _needs_split)),
        Baseline("interleaved-o", "interleaved 1F1B + offload", offloading(chunked.interleaved_1f1b, "interleaved-o"),
                 "interleaved", (needs_offload, _needs_whole_rounds)),
        Baseline("interleaved-zb-o", "interleaved zero bubble + offload",
                 offloading(chunked.interleaved_zb, "interleaved-zb-o"), "interleaved",
                 (needs_offload, _needs_split, _needs_whole_rounds_of_zb)),
        Baseline("zb-v-o", "ZB-V + offload", offloading(chunked.zb_v, "zb-v-o"), "vshape",
                 (needs_offload, _needs_split)),
    )
}


def baseline_names() -> list[str]:
    return list(BASELINES)


def applicable(problem: Problem) -> list[str]:
    """Names of the baselines that fit the problem's placement and options."""
    return [name for name, b in BASELINES.items() if b.refuses(problem) is None]


def left_out(problem: Problem) -> list[tuple[str, str]]:
    """The baselines made for the problem's placement that its other settings rule out
    (too few microbatches, a fused backward), each with why: a table without them says so.
    Those that use a lever are not missed where the problem does not allow it."""
    placement = problem.placement.split(":")[0]
    levers = {needs_recompute: "recompute", needs_offload: "offload"}
    return [(name, reason) for name, b in BASELINES.items()
            if b.placement == placement and all(levers[n] in problem.levers for n in b.needs if n in levers)
            and (reason := b.refuses(problem)) is not None]


def run_baseline(name: str, problem: Problem, graph: OpGraph | None = None) -> Schedule:
    """The named hand-made schedule, timed by the simulator; UsageError if it does not fit."""
    key = name.strip().lower() if isinstance(name, str) else None
    if key not in BASELINES:
        raise UsageError(f"unknown baseline {name!r}; choose one of {', '.join(BASELINES)}")
    baseline = BASELINES[key]
    reason = baseline.refuses(problem)
    if reason:
        raise UsageError(f"baseline {key} does not fit this problem: it {reason}")
    built = baseline.build(problem)
    if isinstance(built, Schedule):  # timed by its own rule (the offloading ones)
        return built
    return simulate(graph or OpGraph(problem), built, key)
