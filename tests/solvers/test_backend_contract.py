"""Every registered backend keeps the contract written in registry.Backend: a typed status, a
stop honoured, the start taken, the best schedule handed back, proofs only where proven."""

import pytest
from helpers import uniform

from zbsolve.problem.op_graph import OpGraph
from zbsolve.solvers import registry
from zbsolve.solvers.result import Status
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import build_view
from zbsolve.solvers.warm_start import best_fitting_baseline, hint_from

PROBLEM = uniform(3, 5, F=1, B=1.2, W=0.7, comm=0.1, memory="0.75x")  # tight: no start meets the bound


def inputs(with_start: bool):
    graph = OpGraph(PROBLEM)
    data = build_view(graph, PROBLEM.split_backward, PROBLEM.objective)
    state = SearchState(data)
    start = best_fitting_baseline(PROBLEM, graph)
    if with_start and start is not None:
        state.hint, state.hint_pairs = hint_from(start, data)
        state.take_incumbent(-(-graph.ticks(start.value) // data.unit))
    return data, state, start


@pytest.mark.parametrize("name", registry.names())
def test_a_backend_answers_with_a_typed_status_and_proofs_only_with_a_bound(name):
    data, state, _ = inputs(with_start=False)
    reports = []
    settings = RunSettings(limit=1.0, workers=1, deterministic=True,
                           progress=lambda best, bound, elapsed: reports.append((best, bound)))
    result = registry.get(name).run(data, settings, state)
    assert isinstance(result.status, Status)
    assert result.status in (Status.OPTIMAL, Status.FEASIBLE)  # a schedule exists and is small
    assert result.starts is not None and result.objective == data.objective_of(result.starts)
    if result.status == Status.OPTIMAL:
        assert result.bound is not None and result.bound >= result.objective - 1e-6
    if result.bound is not None:
        assert result.bound <= result.objective + 1e-6
    assert not result.interrupted


@pytest.mark.parametrize("name", registry.names())
def test_a_backend_stopped_before_it_starts_returns_and_says_so_unless_proven(name):
    data, state, _ = inputs(with_start=True)
    state.stop.set()
    result = registry.get(name).run(data, RunSettings(limit=30.0, workers=1, deterministic=True), state)
    assert isinstance(result.status, Status)
    assert result.interrupted or result.status in (Status.OPTIMAL, Status.INFEASIBLE)


@pytest.mark.parametrize("name", registry.names())
def test_a_backend_given_a_start_returns_nothing_worse(name):
    data, state, start = inputs(with_start=True)
    assert start is not None
    result = registry.get(name).run(data, RunSettings(limit=1.0, workers=1, deterministic=True), state)
    if result.starts is not None:  # a backend may return no schedule when it finds none better
        assert data.value(result.objective) <= start.value + 1e-9 or registry.get(name).makes_starts
    assert result.status != Status.INFEASIBLE  # the start fits: a proof of none would be false


def test_the_pipeline_and_the_cli_name_no_backend():
    import inspect

    from zbsolve.cli import solve as cli_solve
    from zbsolve.solvers import orchestration, warm_start

    for module in (orchestration, warm_start, cli_solve):
        code = "\n".join(line for line in inspect.getsource(module).splitlines()
                         if not line.strip().startswith("#") and "help=" not in line and '"' * 3 not in line)
        for name in registry.names():
            assert f'"{name}"' not in code, (module.__name__, name)
    assert registry.default_name() == registry.names()[0]
    assert registry.starter() is not None and registry.starter().makes_starts
