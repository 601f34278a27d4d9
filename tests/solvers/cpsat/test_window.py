"""Window search: its schedules validate and are no worse; solve_cpsat runs it where it should."""


import pytest
from helpers import feasible, placed_problems, uniform
from hypothesis import assume, given, settings

from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.placements import build_problem
from zbsolve.problem.profiles import load_profile
from zbsolve.schedule.validator import validate
from zbsolve.solvers.cpsat import window
from zbsolve.solvers.listsched import solve_list
from zbsolve.solvers.result import BackendResult
from zbsolve.solvers.retiming import retimed
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import build_view


def list_start(problem):
    """The solver's view of the problem and the list scheduler's schedule of it."""
    graph = OpGraph(problem)
    data = build_view(graph, problem.split_backward, problem.objective)
    return graph, data, solve_list(data, RunSettings(limit=2.0, deterministic=True), SearchState(data))


def start_and_search(problem, seconds=1.0):
    graph, data, first = list_start(problem)
    improved = []
    starts, steps, better = window.search(data, RunSettings(), SearchState(data), first.starts, seconds,
                                          lambda s, v: improved.append(v))
    schedule = retimed(graph, data, BackendResult("feasible", starts, None, None, 0.0), "window")
    validate(schedule)  # dependencies, one op at a time, memory limit
    return data, first, starts, steps, better, improved, schedule


@settings(max_examples=25, deadline=None)
@given(placed_problems(max_microbatches=4))
def test_window_search_schedules_validate_and_are_no_worse(problem):
    assume(problem.fb_overlap is None and feasible(problem))
    data, first, starts, steps, better, improved, schedule = start_and_search(problem, seconds=0.6)
    value = data.objective_of(starts)
    packed = window.compressed(data, first.starts, window.releases(data, first.starts))
    assert value <= data.objective_of(packed) <= data.objective_of(first.starts)
    assert schedule.value <= data.value(value) + 1e-9
    assert better == len(improved) and improved == sorted(improved, reverse=True)


@pytest.mark.parametrize("M, memory", [(16, "1x"), (24, "0.75x")])
def test_windows_in_longer_memory_limited_schedules_validate(M, memory):
    """Windows of a few microbatches in a longer schedule, with ops that stay put holding
    activations across them (the unit-size problems above free nearly every op): the result
    validates and is no worse than the start."""
    problem = uniform(4, M, F=1, B=1.2, W=0.7, comm=0.1, memory=memory)
    data, first, starts, steps, better, improved, schedule = start_and_search(problem, seconds=2.0)
    assert steps >= 1 and len(data.ops) == 12 * M  # 4 devices x (F, B, W)
    assert schedule.value <= data.value(data.objective_of(first.starts)) + 1e-9


def test_a_window_counts_the_memory_that_ops_staying_put_hold_in_it():
    """P=2 M=6 at 1x (two activations per device) from the list scheduler's schedule, whose
    device 0 runs F0 F1 B0 W0 B1 F2 ...; freeing microbatches 1 and 2 leaves F0 holding its
    activation until its B at tick 3. Without counting it, the window puts F2 at tick 2,
    three activations on device 0."""
    graph, data, first = list_start(uniform(2, 6, memory="1x"))
    device_0 = sorted(data.device_ops[0], key=lambda op: first.starts[op])
    assert [f"{op.kind}{op.microbatch}" for op in device_0[:6]] == ["F0", "F1", "B0", "W0", "B1", "F2"]
    free = [op for op in data.ops if op.microbatch in (1, 2)]
    found, _ = window._reorder(data, RunSettings(), first.starts, free, 2.0, 0)
    schedule = retimed(graph, data, BackendResult("feasible", found, None, None, 0.0), "window")
    validate(schedule)
    assert max(schedule.metrics.peak_memory) <= 2


def test_compressing_keeps_order_and_moves_nothing_later():
    problem = uniform(4, 8, F=1, B=1.2, W=0.7, comm=0.1)
    graph = OpGraph(problem)
    data = build_view(graph, problem.split_backward, problem.objective)
    step = max(data.duration.values()) + max(d for ds in data.predecessors.values() for _, d in ds)
    spread = {op: step * j for j, op in enumerate(data.topological)}  # one op at a time: valid, slow
    packed = window.compressed(data, spread)
    assert all(packed[op] <= spread[op] for op in data.ops)
    for ops in data.device_ops:
        assert sorted(ops, key=spread.get) == sorted(ops, key=packed.get)
    validate(retimed(graph, data, BackendResult("feasible", packed, None, None, 0.0), "packed"))


def test_span_compression_keeps_each_devices_first_start():
    problem = uniform(4, 8, F=1, B=1.2, W=0.7, comm=0.1, objective="span")
    graph = OpGraph(problem)
    data = build_view(graph, problem.split_backward, problem.objective)
    step = max(data.duration.values()) + max(d for ds in data.predecessors.values() for _, d in ds)
    spread = {op: step * j for j, op in enumerate(data.topological)}
    packed = window.compressed(data, spread, window.releases(data, spread))
    for ops in data.device_ops:
        assert min(packed[op] for op in ops) == min(spread[op] for op in ops)
    # Everything else as early as it goes: each device's span can only shrink.
    for ops in data.device_ops:
        span = max(packed[op] + data.duration[op] for op in ops) - min(packed[op] for op in ops)
        assert span <= max(spread[op] + data.duration[op] for op in ops) - min(spread[op] for op in ops)
    assert data.objective_of(packed) < data.objective_of(spread)


@pytest.mark.parametrize("objective", ["makespan", "span"])
def test_large_solves_run_the_window_search_after_the_whole_model(monkeypatch, objective):
    import zbsolve.solvers.cpsat.strategy as cpsat_strategy
    from zbsolve import solve

    profile = load_profile("models/zb-1.5b.json")  # tight memory: far from the bound, not proven in seconds
    problem = build_problem(4, 8, profile.rank_costs(4), comm=profile.comm, memory="0.5x",
                            placement="vshape", time_unit="ms", objective=objective)
    monkeypatch.setattr(cpsat_strategy, "WINDOW_FROM_OPS", 0)  # a small problem stands in for a large one
    solved = solve(problem, "cpsat", time_limit=4, workers=2)
    validate(solved)
    assert "window search:" in (solved.solver.message or "")
    assert solved.value >= solved.solver.bound
    if objective == "span":
        return
    # Deterministic: wall-clock steps would not repeat, so no window search, and the whole
    # model keeps the limit (less what the bound phase spent) rather than its share of it.
    limits, solver_for = [], cpsat_strategy.parameters.solver_for
    monkeypatch.setattr(cpsat_strategy.parameters, "solver_for",
                        lambda data, settings, limit, *rest: limits.append(limit) or solver_for(data, settings, limit,
                                                                                                *rest))
    deterministic = solve(problem, "cpsat", time_limit=2, workers=1)
    assert "window search" not in (deterministic.solver.message or "")
    assert limits[-1] > 2 * (1 - cpsat_strategy.WINDOW_SHARE)


def test_a_step_that_gains_widens_the_window_even_unproven(monkeypatch):
    """Large windows often run out of time and still shorten the schedule (1.5B V-shape
    0.5x: 5.5 ms in one unproven 200-op step); those must not shrink the next window."""
    from zbsolve.baselines import run_baseline
    from zbsolve.solvers.warm_start import hint_from as _hint_from

    problem = uniform(4, 8)
    graph = OpGraph(problem)
    data = build_view(graph, problem.split_backward, problem.objective)
    slow, _ = _hint_from(run_baseline("gpipe", problem, graph), data)
    fast, _ = _hint_from(run_baseline("zb-h1", problem, graph), data)
    assert data.objective_of(fast) < data.objective_of(slow)
    # (found, proved) of each step: a gain unproven, nothing in time, no gain unproven, proven.
    answers = iter([(fast, False), (None, False), (fast, False), (fast, True)])
    sizes = []

    state = SearchState(data)

    def step(data, settings, starts, free, seconds, seed):
        sizes.append(len(free))
        answer = next(answers)
        if len(sizes) == 4:
            state.stop.set()
        return answer

    monkeypatch.setattr(window, "WINDOW_OPS", 50)
    monkeypatch.setattr(window, "_reorder", step)
    starts, steps, better = window.search(data, RunSettings(), state, slow, 30.0, lambda s, v: None)
    assert sizes == [50, 60, 48, 38] and steps == 4 and better == 1
    assert data.objective_of(starts) == data.objective_of(fast)
