"""Periodic schedules: hand-checked blocks, validity on random problems, a pinned gain."""

import pytest
from helpers import feasible, placed_problems, uniform
from hypothesis import given, settings

from zbsolve.ops import OpGraph
from zbsolve.placements import build_problem
from zbsolve.profiles import load_profile
from zbsolve.solvers import retimed, solve
from zbsolve.solvers.base import build_input
from zbsolve.solvers.listsched import solve_list
from zbsolve.solvers.periodic import solve_periodic
from zbsolve.validate import validate


def run(backend, problem, time_limit=2.0):
    """A deterministic (single-worker) run of a heuristic backend, re-timed and validated."""
    graph = OpGraph(problem)
    data = build_input(graph, problem.split_backward, problem.objective)
    data.time_limit, data.workers, data.deterministic = time_limit, 1, True
    result = backend(data)
    if result.starts is None:
        return result, None
    schedule = retimed(graph, data, result, "heuristic")
    validate(schedule)  # memory limit included
    assert schedule.value <= data.value(result.objective) + 1e-9  # re-timing never delays an op
    return result, schedule


def test_two_devices_at_1x_repeat_every_3_with_a_block_of_6():
    # F=B=W=1, P=2: a period of 3 is each device's work per microbatch. Device 0 runs F at
    # phase 0, so B0 cannot follow B1 at once (offset 3 is phase 0 too): B0 at 4, W0 at 5,
    # and the block lasts 6. Memory: device 0 holds 2 copies of 0.5 + 0.5 <= 2 (1x).
    result, _ = run(solve_periodic, uniform(2, 4, memory="1x"))
    assert result.objective == 3 * 3 + 6
    assert "every 3" in result.message


def test_two_devices_at_the_minimum_memory_run_one_microbatch_at_a_time():
    # 0.5x holds one activation: device 0 keeps it from F0 (0) to W0's end (5), so the
    # period must be at least 5, and a block F0 F1 B1 B0 W0 of length 5 fits it.
    result, _ = run(solve_periodic, uniform(2, 4, memory="0.5x"))
    assert result.objective == 5 * 4
    assert "every 5" in result.message


def test_on_a_tight_v_the_periodic_schedule_beats_the_list_scheduler():
    profile = load_profile("models/zb-1.5b.json")
    problem = build_problem(4, 8, profile.rank_costs(4), comm=profile.comm, memory="0.5x",
                            placement="vshape", time_unit="ms")
    _, listed = run(solve_list, problem)
    _, periodic = run(solve_periodic, problem)
    assert listed.value == pytest.approx(617.8495)
    assert periodic.value == pytest.approx(564.1025)
    solved = solve(problem, "cpsat", time_limit=5, workers=1)
    assert solved.value <= periodic.value + 1e-9


def test_solve_starts_from_a_periodic_schedule_only_on_one_pipe(monkeypatch):
    """Where no hand-made schedule fits: tried for V-shape, not for DualPipe's placement."""
    import zbsolve.solvers as solvers

    tried, heuristic = [], solvers._heuristic_schedule

    def recording(name, graph, data):
        tried.append((len(graph.problem.pipes), name))
        return heuristic(name, graph, data)

    monkeypatch.setattr(solvers, "_heuristic_schedule", recording)
    for placement in ("vshape", "bidirectional"):
        solve(uniform(4, 8, placement=placement, memory="0.5x"), "cpsat", time_limit=2, workers=1)
    assert tried == [(1, "list"), (1, "periodic"), (2, "list")]


@settings(max_examples=40, deadline=None)
@given(placed_problems(max_microbatches=4))
def test_periodic_schedules_validate_on_every_placement(problem):
    if problem.memory_limit is None or not feasible(problem):
        return
    result, schedule = run(solve_periodic, problem)
    if len(problem.pipes) == 1:
        # One microbatch at a time fits any feasible limit, and the search reaches that period.
        assert schedule is not None, result.message
