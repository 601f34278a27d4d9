"""Orders offloaded just enough to fit (zbsolve/solvers/offload_fit.py)."""

import pytest

from zbsolve.baselines import run_baseline
from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.schedule.validator import validate
from zbsolve.solvers.offload_fit import fitted_with_offload

COSTS = StageCost(1, 1, 1, activation=1, residual=0.5, offload=0.3)


def test_1f1b_at_half_memory_fits_with_copies_beside_compute():
    # 4 ranks, 8 microbatches, 1F1B needs 4 activations on device 0 and the limit is 2: with
    # copies of 0.3 beside compute every device fits and no compute op moves (33, 1F1B's own).
    problem = build_problem(4, 8, COSTS, memory="0.5x", levers=("offload",))
    graph = OpGraph(problem)
    plain = run_baseline("1f1b", problem, graph)
    assert plain.metrics.peak_memory == (4.0, 3.0, 2.0, 1.0)
    fitted = fitted_with_offload(graph, plain)
    assert fitted is not None
    validate(fitted)
    assert fitted.value == plain.value == 33
    assert max(fitted.metrics.peak_memory) <= 2 and fitted.offloaded() > 0
    computed = {(t.op.kind.replace("FO", "F"), t.op.stage, t.op.microbatch): t.start
                for ops in fitted.devices for t in ops if t.op.kind not in ("O", "L")}
    assert computed == {(t.op.kind, t.op.stage, t.op.microbatch): t.start for ops in plain.devices for t in ops}


def test_what_no_copy_can_relieve_gives_none():
    # ZB-H1's last device holds residuals from B to W, and its F runs right before its B: no
    # activation there has room for two copies, so offload cannot make it fit.
    problem = build_problem(4, 8, COSTS, memory="0.5x", levers=("offload",))
    graph = OpGraph(problem)
    plain = run_baseline("zb-h1", problem, graph)
    assert 3 in plain.over_memory_limit()
    assert fitted_with_offload(graph, plain) is None


@pytest.mark.parametrize("name, placement", [("1f1b", "single"), ("interleaved", "interleaved:2"),
                                             ("zb-v", "vshape")])
def test_a_fitted_order_keeps_the_limit_and_every_compute_time(name, placement):
    problem = build_problem(4, 8, StageCost(2, 2, 1, activation=1, residual=0.25, offload=0.5),
                            placement=placement, memory="0.75x", levers=("offload",))
    graph = OpGraph(problem)
    plain = run_baseline(name, problem, graph)
    assert plain.over_memory_limit()
    fitted = fitted_with_offload(graph, plain)
    assert fitted is not None
    validate(fitted)
    assert not fitted.over_memory_limit() and fitted.value == plain.value
