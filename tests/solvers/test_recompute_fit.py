"""Hand-made orders recomputed just enough to fit (zbsolve/solvers/recompute_fit.py)."""

import pytest

from zbsolve.baselines import run_baseline
from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.schedule.validator import validate
from zbsolve.solvers.recompute_fit import fitted_with_recomputation


def test_1f1b_at_three_quarters_recomputes_the_microbatches_a_hand_walk_finds():
    # device 0 runs F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4..B7 within 3 activations (0.75x,
    # checkpoint 0): F3 would make 4, and 3's backward is the latest held: recompute 3. Then R3,
    # right before B3, would make 4 again (4, 5, 6 held): recompute 6, the latest. Then it fits.
    problem = build_problem(4, 8, StageCost(1, 1, 1, activation=1, residual=0.5, checkpoint=0.0),
                            memory="0.75x", levers=("recompute",))
    graph = OpGraph(problem)
    fitted = fitted_with_recomputation(graph, run_baseline("1f1b", problem, graph))
    assert fitted is not None
    validate(fitted)
    recomputed = sorted((t.op.stage, t.op.microbatch) for ops in fitted.devices for t in ops if t.op.kind == "R")
    assert recomputed == [(0, 3), (0, 6)]
    assert fitted.metrics.peak_memory[0] == 3.0
    assert fitted.value <= run_baseline("1f1b-r", problem, graph).value


@pytest.mark.parametrize("name, placement", [("zb-h1", "single"), ("zb-v", "vshape"),
                                             ("interleaved", "interleaved:2")])
def test_every_fitted_order_validates_and_keeps_the_limit(name, placement):
    problem = build_problem(4, 8, StageCost(2, 2, 1, activation=1, residual=0.5, checkpoint=0.1),
                            placement=placement, memory="0.75x", levers=("recompute",))
    graph = OpGraph(problem)
    plain = run_baseline(name, problem, graph)
    assert plain.over_memory_limit()
    fitted = fitted_with_recomputation(graph, plain)
    assert fitted is not None and not fitted.over_memory_limit()
    validate(fitted)
    assert 0 < fitted.recomputed() < sum(len(p.stages) for p in problem.pipes) * 8


def test_a_schedule_that_fits_or_cannot_is_left_alone():
    costs = StageCost(1, 1, 1, activation=1, residual=0.5, checkpoint=0.6)
    roomy = build_problem(2, 4, costs, memory="1x", levers=("recompute",))
    assert fitted_with_recomputation(OpGraph(roomy), run_baseline("1f1b", roomy)) is None
    # two checkpoints of 0.6 and one whole activation never fit in 1.5
    tight = build_problem(3, 6, costs, memory=[1.5] * 3, levers=("recompute",))
    assert fitted_with_recomputation(OpGraph(tight), run_baseline("gpipe", tight)) is None
