"""The offload lever in the solve (zbsolve/solvers/cpsat/levers.py, zbsolve/solvers/cbc/offload.py, the relaxation in
zbsolve/solvers/view.py): optima against an exhaustive search over whole-tick start times
(`tests/brute_force.py::brute_force_timed_makespan`, which also checks the recompute lever
and both together), the relaxation's bound, and the backends that refuse it."""

from functools import cache

import pytest
from brute_force import brute_force_timed_makespan
from hypothesis import given, settings
from hypothesis import strategies as st

from zbsolve.errors import UsageError
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.schedule.validator import validate
from zbsolve.solvers.orchestration import lower_bound, solve

exhaustive = cache(brute_force_timed_makespan)


def tiny(M, memory, levers=("offload",), **cost):
    costs = dict(F=2, B=2, W=1, activation=4, residual=4, offload=2) | cost
    return build_problem(2, M, StageCost(**costs), memory=memory, levers=levers)


@pytest.mark.parametrize("problem, value", [
    (tiny(2, "0.625x"), 18),  # found by the search below and pinned
    (tiny(2, "0.75x", F=1, W=2, residual=0, offload=2, checkpoint=0, levers=("recompute", "offload")), 13),
    (tiny(3, "0.75x", F=2, B=2, W=2, checkpoint=2, levers=("recompute", "offload")), 24),
    (tiny(3, "0.75x", F=1, B=1, W=1, residual=2, offload=2), 13),
], ids=["P2M2-offload", "P2M2-both", "P2M3-both", "P2M3-offload"])
def test_the_optimum_with_offload_is_the_exhaustive_search_s(problem, value):
    assert exhaustive(problem) == value
    # without a starting schedule: the model alone proves it
    schedule = solve(problem, "cpsat", time_limit=30, workers=1, warm_start=False)
    validate(schedule)
    assert schedule.solver.status == "optimal" and schedule.value == value
    assert lower_bound(problem) <= value


@settings(max_examples=6, deadline=None, derandomize=True)
@given(M=st.just(2), F=st.integers(1, 2), B=st.integers(1, 2), W=st.integers(1, 2),
       residual=st.sampled_from([0, 2, 4]), checkpoint=st.sampled_from([0, 1, 2]), offload=st.integers(1, 3),
       memory=st.sampled_from(["0.5x", "0.625x", "0.75x"]),
       levers=st.sampled_from([("offload",), ("recompute", "offload"), ("recompute",)]))
def test_on_random_tiny_problems_no_bound_passes_the_optimum_and_proofs_meet_it(M, F, B, W, residual, checkpoint,
                                                                               offload, memory, levers):
    problem = tiny(M, memory, levers, F=F, B=B, W=W, residual=residual, checkpoint=checkpoint, offload=offload)
    optimum = exhaustive(problem)
    assert lower_bound(problem) <= optimum + 1e-9
    schedule = solve(problem, "cpsat", time_limit=20, workers=1)
    validate(schedule)
    assert schedule.value >= optimum - 1e-9 and schedule.solver.bound <= optimum + 1e-9
    if schedule.solver.status == "optimal":
        assert schedule.value == optimum


def test_with_copies_short_enough_offload_comes_within_a_step_of_no_limit():
    # 4 ranks, 8 microbatches at half of 1F1B's memory: without levers 41 (proven); with copies
    # of half a forward 28 (proven), one time unit above the 27 of no limit at all
    costs = StageCost(1, 1, 1, activation=1, residual=0.5, offload=0.5)
    without = solve(build_problem(4, 8, costs, memory="0.5x"), time_limit=5, workers=1)
    unlimited = solve(build_problem(4, 8, costs), time_limit=5, workers=1)
    found = solve(build_problem(4, 8, costs, memory="0.5x", levers=("offload",)), time_limit=5, workers=1)
    validate(found)
    assert without.value == 41 and unlimited.value == 27
    assert found.value == 28 and found.solver.status == "optimal" and found.offloaded() > 0


@pytest.mark.parametrize("problem, value", [(tiny(2, "0.625x"), 18), (tiny(3, "0.75x", F=1, B=1, W=1, residual=2), 13)],
                         ids=["P2M2", "P2M3"])
def test_cbc_proves_the_exhaustive_optimum_with_offload(problem, value):
    # the MILP of zbsolve/solvers/cbc/offload.py, without a starting schedule
    schedule = solve(problem, "cbc", time_limit=30, workers=1, warm_start=False)
    validate(schedule)
    assert schedule.solver.status == "optimal" and schedule.value == value


@settings(max_examples=10, deadline=None, derandomize=True)
@given(F=st.integers(1, 2), B=st.integers(1, 2), W=st.integers(1, 2), residual=st.sampled_from([0, 2, 4]),
       offload=st.integers(1, 3), memory=st.sampled_from(["0.5x", "0.625x", "0.75x"]))
def test_cbc_with_offload_meets_the_exhaustive_search_on_random_tiny_problems(F, B, W, residual, offload, memory):
    problem = tiny(2, memory, F=F, B=B, W=W, residual=residual, offload=offload)
    schedule = solve(problem, "cbc", time_limit=20, workers=1, warm_start=False)
    validate(schedule)
    assert schedule.solver.status == "optimal" and schedule.value == exhaustive(problem)


def test_cbc_models_one_lever_at_a_time():
    with pytest.raises(UsageError, match="cbc backend models one memory lever at a time"):
        solve(tiny(2, "0.75x", levers=("recompute", "offload")), "cbc", time_limit=1)


def test_the_list_scheduler_offloads_its_orders_to_fit():
    # 4 ranks, 8 microbatches at three quarters of 1F1B's memory, copies of half a forward:
    # the list's passes alone find 31; an order of a problem counting offloadable activations
    # at a share of their size, offloaded to fit, takes 27, the length without any limit (the
    # bound with offload): proven.
    costs = StageCost(1, 1, 1, activation=1, residual=0.5, offload=0.5)
    problem = build_problem(4, 8, costs, memory="0.75x", levers=("offload",))
    found = solve(problem, "list", time_limit=2, workers=1, deterministic=True, warm_start=False)
    validate(found)
    assert found.value == 27 and found.offloaded() > 0 and not found.over_memory_limit()
    assert found.solver.status == "optimal"
    plain = solve(build_problem(4, 8, costs, memory="0.75x"), "list", time_limit=2, workers=1, deterministic=True,
                  warm_start=False)
    assert plain.value == 31


def test_a_solve_keeps_only_the_lever_uses_its_limit_needs():
    from zbsolve.baselines import run_baseline
    from zbsolve.problem.op_graph import OpGraph
    from zbsolve.solvers.fewest_levers import fits, with_fewest_levers, without_use

    # without a limit the PipeOffload rule still offloads all it can; none of it is needed
    free = build_problem(2, 3, StageCost(1, 1, 1, activation=1, residual=0.5, offload=1), levers=("offload",))
    rule = run_baseline("1f1b-o", free)
    cleaned = with_fewest_levers(OpGraph(free), rule)
    validate(cleaned)
    assert rule.offloaded() == 3 and cleaned.offloaded() == 0 and cleaned.value == rule.value
    # under a limit, taking back any one use the solve kept breaks it
    costs = StageCost(1, 1, 1, activation=1, residual=0.5, checkpoint=0.1, offload=0.5)
    problem = build_problem(4, 8, costs, memory="0.5x", levers=("recompute", "offload"))
    found = solve(problem, time_limit=5, workers=1)
    graph = OpGraph(problem)
    used = [t.op for ops in found.devices for t in ops if t.op.kind in ("FC", "FO")]
    assert used and found.value == 28
    for op in used:
        d = graph.device(op)
        device = [(t.op, graph.ticks(t.start), graph.ticks(t.end)) for t in found.devices[d]]
        assert not fits(graph, without_use(device, (op.pipe, op.stage, op.microbatch)), graph.memory_limit[d])
