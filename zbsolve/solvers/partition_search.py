"""Layer partition chosen with the schedule (`--partition auto`; docs/solving.md, "The
bound over every split"): the splits users run are solved, then others in the order of their
bound, each pruned once its bound reaches the best schedule found; the answer comes with a
lower bound over every contiguous split."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from zbsolve.errors import InfeasibleError, SolverError
from zbsolve.problem import partition
from zbsolve.problem.partition import Layer, Shape, Split
from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Schedule

from .orchestration import solve

# Splits a search counts one by one (each bound is cheap); above this it walks from the
# best split found to splits one layer away.
EVERY_SPLIT_UP_TO = 5_000
MAX_SOLVES = 8  # the time limit is shared out over this many solves


@dataclass(frozen=True)
class Solved:
    name: str  # even, torchtitan, balanced, or searched
    split: Split
    schedule: Schedule | None  # None: no schedule of this split fits (proven) or none was found in time
    bound: float  # a lower bound on this split's best makespan (its solve's, else its split bound)


@dataclass(frozen=True)
class PartitionAnswer:
    best: Solved
    named: list[Solved]  # the splits users run, each solved
    solved: list[Solved]  # every split solved, named ones first
    bound: float  # no contiguous split has a schedule shorter than this
    splits: int  # how many contiguous splits there are
    note: str  # how the bound over every split was found

    def bounded(self) -> Schedule | None:
        """The chosen schedule with the bound over every split as its bound: `optimal` only
        where its value meets that bound."""
        best = self.best.schedule
        if best is None:
            return None
        value, bound = best.value, min(self.bound, best.value)
        status = "optimal" if math.isclose(value, bound, rel_tol=1e-12) else "feasible"
        split = "/".join(map(str, self.best.split))
        return best.with_solver(replace(best.solver, status=status, bound=bound,
                                        gap=(value - bound) / value if value else 0.0,
                                        message=f"partition {split} ({self.best.name}); bound over every split: "
                                                f"{self.note}"))


def shape_of(problem: Problem) -> Shape:
    """What `partition.split_bound` reads of a problem."""
    pipes = tuple((tuple(s.device for s in pipe.stages), len(pipe.microbatches)) for pipe in problem.pipes)
    return Shape(problem.devices, pipes, problem.op_overhead, problem.split_backward)


def named_splits(layers: Sequence[Layer], stages: int, split_backward: bool) -> dict[str, Split]:
    return {name: partition.named_split(name, layers, stages, split_backward) for name in partition.NAMED_SPLITS}


def search(layers: Sequence[Layer], stages: int, problem_for: Callable[[Split], Problem], *,
           solver: str | None = None,
           time_limit: float = 60.0, workers: int | None = None, seed: int = 0, deterministic: bool | None = None,
           stop: threading.Event | None = None, max_solves: int = MAX_SOLVES,
           heard: Callable[[str], None] | None = None) -> PartitionAnswer:
    """The best split and schedule found within `time_limit` (shared out over at most
    `max_solves` solves), the splits users run each solved, and the bound over every split.
    `problem_for(split)` builds the problem of a split of the layers over the placement's
    `stages` (same placement, memory and options)."""
    began = time.monotonic()
    first = problem_for(partition.even_split(layers, stages))
    shape = shape_of(first)
    total = partition.split_count(len(layers), stages)
    named = named_splits(layers, stages, first.split_backward)
    counted = total <= EVERY_SPLIT_UP_TO
    pool = list(partition.every_split(len(layers), stages)) if counted else []
    bounds: dict[Split, float] = {}

    def bound_of(split: Split) -> float:
        if split not in bounds:
            bounds[split] = partition.split_bound(shape, partition.stage_costs(layers, split))
        return bounds[split]

    per_solve = time_limit / max_solves
    done: dict[Split, Solved] = {}
    order: list[Solved] = []

    def run(name: str, split: Split) -> Solved:
        problem = problem_for(split)
        try:
            schedule = solve(problem, solver, time_limit=per_solve, workers=workers, seed=seed,
                             deterministic=deterministic, stop=stop)
            lower = schedule.solver.bound if schedule.solver.bound is not None else bound_of(split)
            found = Solved(name, split, schedule, max(lower, bound_of(split)))
        except InfeasibleError:  # proven: no schedule of this split fits the memory limit
            found = Solved(name, split, None, math.inf)
        except SolverError:  # nothing found in its share of the time: only its split bound is known
            found = Solved(name, split, None, bound_of(split))
        if heard:
            heard(_said(found, problem.time_unit))
        done[split] = found
        order.append(found)
        return found

    for name, split in named.items():
        if split not in done and not _stopped(stop):
            run(name, split)
    while len(order) < max_solves and not _stopped(stop) and (deterministic or time.monotonic() - began < time_limit):
        best = _best(order)
        if not counted:  # walk: the unsolved splits one layer from the best so far
            pool = [s for s in partition.neighbours(best.split if best else named["balanced"]) if s not in done]
        waiting = sorted((s for s in pool if s not in done), key=lambda s: (bound_of(s), s))
        beaten = best.schedule.value if best is not None and best.schedule is not None else math.inf
        if not waiting or bound_of(waiting[0]) >= beaten:
            break  # every split left is pruned by its bound
        run("searched", waiting[0])
    best = _best(order) or (order[0] if order else Solved("even", named["even"], None, bound_of(named["even"])))
    bound, note = _bound_over_every_split(layers, shape, done, bound_of, counted, total)
    return PartitionAnswer(best, [done[s] for s in dict.fromkeys(named.values()) if s in done], order,
                           bound, total, note)


def _stopped(stop: threading.Event | None) -> bool:
    return stop is not None and stop.is_set()


def _best(order: Sequence[Solved]) -> Solved | None:
    fitting = [s for s in order if s.schedule is not None]
    return min(fitting, key=lambda s: s.schedule.value if s.schedule else math.inf) if fitting else None


def _said(found: Solved, unit: str) -> str:
    split = ",".join(map(str, found.split))
    if found.schedule is None:
        why = "no schedule fits" if math.isinf(found.bound) else "no schedule found in its time"
        return f"partition {split} ({found.name}): {why}"
    return f"partition {split} ({found.name}): {found.schedule.value:.6g} {unit} ({found.schedule.solver.status})"


def _bound_over_every_split(layers: Sequence[Layer], shape: Shape, done: dict[Split, Solved],
                            bound_of: Callable[[Split], float], counted: bool, total: int) -> tuple[float, str]:
    """The least of: each solved split's bound, and the split bound of every split not solved
    (each split's best makespan is at least one of these)."""
    solved = min((s.bound for s in done.values()), default=math.inf)
    if len(done) == total:
        return solved, f"every one of the {total} splits solved"
    if counted:
        rest = min(bound_of(s) for s in partition.every_split(len(layers), shape.stages) if s not in done)
        return min(solved, rest), (f"{len(done)} of {total} splits solved, the rest bounded one by one "
                                   "(device load and the first forward's arrival)")
    rest = partition.least_bound(shape, layers)
    return min(solved, rest), (f"{len(done)} of {total} splits solved, the rest bounded by the least "
                               "split bound over every split")
