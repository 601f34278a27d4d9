"""Benchmark instance families (issue 5): each instance is a name and a problem builder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import Problem, StageCost
from zbsolve.problem.profiles import load_profile

MODELS = Path(__file__).resolve().parent.parent / "models"
PAPER_MODELS = ("zb-1.5b", "zb-6.2b", "zb-14.6b", "zb-28.3b")


@dataclass(frozen=True)
class Instance:
    family: str
    name: str
    build: Callable[[], Problem]
    time_limit: float | None = None  # overrides the suite's limit


def from_profile(model: str, devices: int | None = None, microbatches: int | None = None, **options) -> Problem:
    profile = load_profile(MODELS / f"{model}.json")
    P = devices or profile.devices
    M = microbatches or profile.microbatches
    memory = options.pop("memory", profile.memory)
    return build_problem(P, M, profile.rank_costs(P), comm=profile.comm or 0.0, memory=memory,
                         time_unit=profile.time_unit, first_stage=profile.first_stage,
                         op_overhead=profile.op_overhead, **options)


def uniform(P: int, M: int, **options) -> Problem:
    return build_problem(P, M, StageCost(1.0, 1.0, 1.0, 1.0, 0.5), **options)


def standard() -> list[Instance]:
    found = []
    for P in (4, 8, 16, 32):
        for M in (P, 2 * P, 4 * P):
            found.append(Instance("uniform", f"uniform P={P} M={M} 1x",
                                  lambda P=P, M=M: uniform(P, M, memory="1x")))
    for model in PAPER_MODELS:
        for memory in ("1x", "1.25x", "1.5x", "2x"):
            for objective in ("makespan", "span"):
                found.append(Instance("zero bubble", f"{model} {memory} {objective}",
                                      lambda m=model, x=memory, o=objective: from_profile(m, memory=x, objective=o)))
    found += [
        Instance("uneven", "p8 heterogeneous", lambda: from_profile("zb-p8-heterogeneous")),
        Instance("uneven", "1.5b heavy last stage 1x", lambda: from_profile("zb-1.5b-heavy-ends", memory="1x")),
        Instance("uneven", "1.5b heavy last stage 1.5x", lambda: from_profile("zb-1.5b-heavy-ends", memory="1.5x")),
    ]
    for model in ("zb-1.5b", "zb-6.2b"):
        for memory in ("0.5x", "1x"):
            found.append(Instance("vshape", f"{model} vshape {memory}",
                                  lambda m=model, x=memory: from_profile(m, placement="vshape", memory=x)))
    found += [
        Instance("bidirectional", "uniform P=4 M=8 fb_overlap 2.4",
                 lambda: uniform(4, 8, placement="bidirectional", fb_overlap=2.4)),
        Instance("bidirectional", "zb-1.5b fb_overlap 36.756",
                 lambda: from_profile("zb-1.5b", placement="bidirectional", fb_overlap=36.756)),
        Instance("bidirectional", "zb-1.5b fb_overlap 36.756 1.125x",
                 lambda: from_profile("zb-1.5b", placement="bidirectional", fb_overlap=36.756, memory="1.125x")),
        # Pairs at 2,304 ops: 0.8 of F + B + W, as for 1.5B (36.756 = 0.8 x 45.945).
        Instance("bidirectional", "zb-14.6b fb_overlap 24.582",
                 lambda: from_profile("zb-14.6b", placement="bidirectional", fb_overlap=24.582)),
        # DualPipe's placement without overlap, where memory binds.
        Instance("bidirectional", "zb-1.5b bidirectional 1x",
                 lambda: from_profile("zb-1.5b", placement="bidirectional", memory="1x")),
        Instance("bidirectional", "zb-6.2b bidirectional 1x",
                 lambda: from_profile("zb-6.2b", placement="bidirectional", memory="1x")),
    ]
    found.append(Instance("target", "zb-28.3b P=32 M=256 1.5x",
                          lambda: from_profile("zb-28.3b", microbatches=256, memory="1.5x"), time_limit=120))
    return found


def quick() -> list[Instance]:
    """One small instance per family, for checking the script itself."""
    return [
        Instance("uniform", "uniform P=4 M=8 1x", lambda: uniform(4, 8, memory="1x")),
        Instance("zero bubble", "zb-1.5b 1.5x makespan", lambda: from_profile("zb-1.5b", memory="1.5x")),
        Instance("uneven", "p8 heterogeneous", lambda: from_profile("zb-p8-heterogeneous")),
        Instance("vshape", "uniform P=4 M=8 vshape 1x", lambda: uniform(4, 8, placement="vshape", memory="1x")),
        Instance("bidirectional", "uniform P=4 M=8 fb_overlap 2.4",
                 lambda: uniform(4, 8, placement="bidirectional", fb_overlap=2.4)),
    ]


SUITES = {"standard": standard, "quick": quick}


def matching(instances: list[Instance], text: str) -> list[int]:
    """Indices of the instances `--only TEXT` picks: the one named exactly TEXT where there
    is one, else every one whose name contains it (a name may contain another: "zb-1.5b
    fb_overlap 36.756" is part of the same instance at 1.125x, "span" of every "makespan")."""
    exact = [i for i, instance in enumerate(instances) if instance.name == text]
    return exact or [i for i, instance in enumerate(instances) if text in instance.name]


# Build time and memory against ops count: uniform single, M chosen for about n ops.
SCALING_OPS = (1_000, 5_000, 25_000, 100_000)
