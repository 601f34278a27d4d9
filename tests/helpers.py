"""Small builders and strategies shared by the tests."""

from hypothesis import strategies as st

from zbsolve.errors import InfeasibleError
from zbsolve.placements import build_problem
from zbsolve.problem import StageCost
from zbsolve.solvers import check_memory_feasible, minimum_memory


def uniform(P, M, F=1.0, B=1.0, W=1.0, activation=1.0, residual=0.5, **kw):
    return build_problem(P, M, StageCost(F, B, W, activation, residual), **kw)


def feasible(problem) -> bool:
    """Whether the memory limit admits any schedule (one microbatch's activation fits)."""
    try:
        check_memory_feasible(problem)
    except InfeasibleError:
        return False
    return True


# Decimal costs on a 0.1 grid keep the examples exact and varied.
cost_value = st.integers(1, 30).map(lambda n: n / 10)


@st.composite
def stage_costs(draw, n):
    records = []
    for _ in range(n):
        activation = draw(st.integers(1, 4))
        residual = draw(st.sampled_from([0.0, 0.25, 0.4, 0.5, 1.0])) * activation
        records.append(StageCost(draw(cost_value), draw(cost_value), draw(cost_value), activation, residual))
    return records


@st.composite
def small_problems(draw, max_devices=4, max_microbatches=6, memory=True):
    P = draw(st.integers(1, max_devices))
    M = draw(st.integers(1, max_microbatches))
    limit = draw(st.sampled_from([None, "1x", "1.5x", "2x", "3x"])) if memory else None
    return build_problem(
        P, M, draw(stage_costs(P)),
        comm=draw(st.sampled_from([0.0, 0.1, 0.5])), memory=limit,
        objective=draw(st.sampled_from(["makespan", "span"])),
    )


@st.composite
def placed_problems(draw, max_microbatches=4, memory=True):
    """Small problems on every placement (three chunks put costs off the decimal grid),
    sometimes with F&B overlap (any positive length, even one shorter than its halves,
    which the solver and validator must still handle)."""
    placement = draw(st.sampled_from(["single", "interleaved:2", "interleaved:3", "vshape", "bidirectional"]))
    if placement == "bidirectional":
        P, M = draw(st.sampled_from([2, 4])), 2 * draw(st.integers(1, max_microbatches // 2))
    else:
        P, M = draw(st.integers(1, 3)), draw(st.integers(1, max_microbatches))
    limit = draw(st.sampled_from([None, "1x", "1.5x", "2x"])) if memory else None
    overlap = draw(st.one_of(st.none(), st.integers(1, 60).map(lambda n: n / 10)))
    return build_problem(
        P, M, draw(stage_costs(P)), placement=placement,
        comm=draw(st.sampled_from([0.0, 0.1, 0.5])), memory=limit, fb_overlap=overlap,
        split_backward=draw(st.booleans()), objective=draw(st.sampled_from(["makespan", "span"])),
    )


@st.composite
def tiny_problems(draw):
    """Problems small enough for tests/exact_model.py to solve exactly: every placement, memory
    limits down to 0.5x, split or fused backward, both objectives; no F&B pairs."""
    placement = draw(st.sampled_from(["single", "single", "interleaved:2", "vshape", "bidirectional"]))
    P = 2 if placement == "bidirectional" else draw(st.integers(1, 3))  # two pipes: even sizes
    M = 2 if placement == "bidirectional" else draw(st.integers(1, 5 if placement == "single" else 3))
    problem = build_problem(
        P, M, draw(stage_costs(P)), placement=placement, comm=draw(st.sampled_from([0.0, 0.1, 0.5])),
        memory=draw(st.sampled_from([None, "0.5x", "0.75x", "1x", "1.25x", "1.5x", "2x"])),
        split_backward=draw(st.booleans()), objective=draw(st.sampled_from(["makespan", "span"])),
    )
    limit = problem.memory_limit
    if limit is not None and any(a > b for a, b in zip(minimum_memory(problem), limit)):
        return draw(st.nothing())  # no schedule at all; covered by the infeasibility tests
    return problem


@st.composite
def tiny_pair_problems(draw):
    # Sizes the exhaustive search covers in well under a second each (split backward with two
    # microbatches on a V takes it ~15 s).
    placement = draw(st.sampled_from(["bidirectional", "vshape", "interleaved:2"]))
    split = draw(st.booleans())
    M = 2 if placement == "bidirectional" or not split else 1
    problem = build_problem(
        2, M, draw(stage_costs(2)), placement=placement, comm=draw(st.sampled_from([0.0, 0.1, 0.5])),
        memory=draw(st.sampled_from([None, "1x", "1.5x"])), fb_overlap=draw(st.integers(1, 60).map(lambda n: n / 10)),
        split_backward=split,
    )
    limit = problem.memory_limit
    if limit is not None and any(a > b for a, b in zip(minimum_memory(problem), limit)):
        return draw(st.nothing())
    return problem
