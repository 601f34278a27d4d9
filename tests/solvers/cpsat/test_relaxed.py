"""The device relaxations' bound phase of the CP-SAT backend (zbsolve/solvers/cpsat/relaxed.py)."""

import pytest
from exact_model import plain_solve
from helpers import stage_costs, tiny_pair_problems, tiny_problems
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.placements import build_problem
from zbsolve.problem.profiles import StageCost, load_profile
from zbsolve.schedule.validator import validate
from zbsolve.solvers import bounds, minimum_memory, solve
from zbsolve.solvers.bounds import Paths
from zbsolve.solvers.cpsat import relaxed
from zbsolve.solvers.cpsat import strategy as cpsat_strategy
from zbsolve.solvers.result import Status
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import build_view


def _input(problem):
    return build_view(OpGraph(problem), problem.split_backward, problem.objective)


def eligible(data, settings=None):
    """Whether the bound phase runs (the default settings: 60 s on the clock)."""
    return relaxed.eligible(data, settings or RunSettings(), SearchState(data))


def zb_1_5b(P, M, placement, memory, fb_overlap=None):
    profile = load_profile("models/zb-1.5b.json")
    return build_problem(P, M, profile.rank_costs(P), comm=profile.comm, placement=placement, memory=memory,
                         fb_overlap=fb_overlap, time_unit=profile.time_unit)


def dualpipe_1_5b(P, M, memory=None):
    """1.5B costs on DualPipe's placement with F&B pairs of 36.756 ms (F + B + W = 45.945)."""
    return zb_1_5b(P, M, "bidirectional", memory, fb_overlap=36.756)


def deterministic_ask(model, limit):
    """One worker and CP-SAT's work measure: the same answers on any machine."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = limit
    solver.parameters.max_time_in_seconds = 120
    code = solver.Solve(model)
    return code, solver.ResponseProto().deterministic_time


def test_trips_are_the_stages_a_microbatch_crosses_after_a_devices_first():
    # On a V, P=4: device 3 holds stages 3 and 4, so its microbatches' trips are stages 5 to
    # 7 on devices 2 to 0; device 0 holds stages 0 and 7, and its trips cross stages 1 to 6.
    # No W: a W holds nothing up on the way. With one stage per device, the stages after it.
    data = _input(zb_1_5b(4, 2, "vshape", "0.5x"))
    crossed = relaxed.trip_ops(data, [3])
    assert sorted({(op.stage, op.kind) for op in crossed}) == [(s, k) for s in (5, 6, 7) for k in ("B", "F")]
    assert {data.graph.device(op) for op in crossed} == {0, 1, 2} and len(crossed) == 3 * 2 * 2
    assert sorted({op.stage for op in relaxed.trip_ops(data, [0])}) == [1, 2, 3, 4, 5, 6]
    single = _input(zb_1_5b(4, 2, "single", "0.5x"))
    assert sorted({op.stage for op in relaxed.trip_ops(single, [1])}) == [2, 3]
    assert relaxed.trip_ops(single, [3]) == []


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(tiny_problems())
def test_no_device_relaxation_is_longer_than_the_optimum(problem):
    # The relaxation of each device, solved to its optimum, against the plain exact model: a
    # relaxation that cut off the problem's optimal schedules would exceed it.
    assume(problem.objective == "makespan" and problem.memory_limit is not None)
    best, proven = plain_solve(problem, time_limit=10)
    assume(proven)
    data = _input(problem)
    used = [device for device, ops in enumerate(data.device_ops) if ops]
    # Each device alone, each with the trips from it , and all
    # of them kept together (what that study asks of several devices at once).
    asked = [([device], []) for device in used] + [([device], relaxed.trip_ops(data, [device])) for device in used]
    asked += [(list(window), []) for window in relaxed.windows(data)]  # what the phase asks of neighbours
    _assert_no_longer(data, asked + ([(used, [])] if len(used) > 1 else []), best)


def _assert_no_longer(data, asked, best) -> None:
    """Each relaxation (devices, crossed ops) solved to its optimum is no longer than `best`."""
    paths = Paths(data)
    for devices, crossed in asked:
        model, _ = relaxed.relaxation(data, SearchState(data), paths, devices, crossed=crossed)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_time_in_seconds = 10
        assert solver.Solve(model) == cp_model.OPTIMAL
        above = solver.ObjectiveValue() > bounds.lower_bound(data)
        event("relaxation above the static bound" if above else "at most it")
        assert data.value(solver.ObjectiveValue()) <= best + 1e-9


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(tiny_pair_problems())
def test_no_relaxation_with_pairs_is_longer_than_the_optimum(problem):
    # With F&B pairs the kept devices pair as the whole model does and every delay counts from
    # a pair's end, which is where a relaxation could cut off a schedule it should keep: the
    # plain exact model offers every pairing the validator accepts. Each device alone, and both.
    best, proven = plain_solve(problem, time_limit=10)
    assume(proven and best is not None)
    data = _input(problem)
    used = [device for device, ops in enumerate(data.device_ops) if ops]
    _assert_no_longer(data, [([device], []) for device in used] + ([(used, [])] if len(used) > 1 else []), best)


def test_a_relaxation_with_pairs_sees_an_outer_device_with_its_neighbour():
    # 1.5B on DualPipe's placement, pairs of 36.756 ms, P=4 M=8: static bound 351.294 ms,
    # optimum 361.698 . Devices 0 and 1 together have no relaxation
    # schedule within 359.7 ms and one of 359.717: a pair hands its F's output on only when it
    # ends, which the delays from a pair's end carry from one device to the other. Counted from
    # the starts, as without pairs, the same two devices reach only 353.995.
    data = _input(dualpipe_1_5b(4, 8))
    assert data.value(bounds.lower_bound(data)) == pytest.approx(351.294)
    model, makespan = relaxed.relaxation(data, SearchState(data), Paths(data), [0, 1])
    per_ms = bounds.lower_bound(data) / data.value(bounds.lower_bound(data))
    asked = [relaxed._within((model, makespan), round(t * per_ms), 10, deterministic_ask)[0] for t in (359.7, 359.72)]
    assert asked == [cp_model.INFEASIBLE, cp_model.OPTIMAL]
    with pytest.raises(ValueError, match="no ops of other devices"):
        relaxed.relaxation(data, SearchState(data), Paths(data), [0], crossed=relaxed.trip_ops(data, [0]))


@st.composite
def shared_device_problems(draw):
    """Tiny makespan problems whose devices hold several stages, under tight memory limits:
    the ones the phase runs on, small enough for the plain exact model."""
    placement = draw(st.sampled_from(["vshape", "interleaved:2", "bidirectional"]))
    P = 2 if placement == "bidirectional" else draw(st.integers(1, 3))
    M = 2 if placement == "bidirectional" else draw(st.integers(2, 3))
    problem = build_problem(P, M, draw(stage_costs(P)), placement=placement, comm=draw(st.sampled_from([0.0, 0.5])),
                            memory=draw(st.sampled_from(["0.5x", "0.75x", "1x"])), split_backward=draw(st.booleans()))
    if any(a > b for a, b in zip(minimum_memory(problem), problem.memory_limit)):
        return draw(st.nothing())
    return problem


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(shared_device_problems())
def test_the_phase_never_proves_more_than_the_optimum(problem):
    # The phase may climb up to the best known schedule; here that is the whole horizon, so
    # only the relaxations' own proofs hold it below the optimum.
    data = _input(problem)
    assume(eligible(data))
    best, proven = plain_solve(problem, time_limit=10)
    assume(proven)
    state = SearchState(data, incumbent=data.horizon)
    raised, kept, spent = relaxed.raise_bound(data, state, 6, deterministic_ask)
    event("raised" if raised is not None else "not raised")
    if raised is not None:
        assert data.value(raised) <= best + 1e-9
        assert kept and all(0 <= device < problem.devices for device in kept)
    assert spent <= 6 + 0.1  # a question gets at least 0.1 units (`_within`)


def test_the_phase_raises_a_bound_towards_its_optimum():
    # 1.5B interleaved:2 at half memory, P=4 M=8: static bound 518.8485 ms (493.7025 before
    # the middle windows of the cool-down bound), optimum 571.726 (the solve below). Device 0's
    # relaxation rules out everything up to 564.7935 within a budget of 5 work units (the
    # windows of its neighbours, 1 and 3 which feeds its second chunk, answer nothing in
    # their share of it). (On the
    # V-shape of the same size the static bound now equals the last device's relaxation
    # optimum, 517.6465, which this phase used to reach from 492.5005.)
    data = _input(zb_1_5b(4, 8, "interleaved:2", "0.5x"))
    assert data.value(bounds.lower_bound(data)) == pytest.approx(518.8485)
    per_ms = bounds.lower_bound(data) / data.value(bounds.lower_bound(data))
    state = SearchState(data, incumbent=round(571.726 * per_ms))
    assert relaxed.windows(data) == [(0, 1), (0, 1, 3)]
    raised, kept, spent = relaxed.raise_bound(data, state, 5, deterministic_ask)
    assert kept == (0,)
    assert data.value(raised) == pytest.approx(564.7935)
    assert spent <= 5 + 0.1  # a question gets at least 0.1 units (`_within`), and CP-SAT may end a hair past it


def test_neighbouring_devices_together_prove_what_no_device_alone_can():
    # P=3, M=8, F=10 B=10 W=7 ms, comm 0.3, 3 GB per activation (1.5 held from B to W),
    # 6 GB per device. Static bound 299.8 ms, which device 0's relaxation only meets (the
    # others' optima are 282.8 and 292.8); the optimum is 312.6 (the solve below proves it).
    # Device 1's contention delays the round trips device 0's two activations wait for: the
    # window of devices 0 and 1 proves the optimum itself.
    problem = build_problem(3, 8, StageCost(10, 10, 7, activation=3, residual=1.5), comm=0.3, memory=6.0,
                            memory_unit_name="GB")
    data = _input(problem)
    assert relaxed.windows(data) == [(0, 1), (0, 1, 2)]
    static = bounds.lower_bound(data)
    assert data.value(static) == pytest.approx(299.8)
    paths = Paths(data)
    for device in range(3):
        model, makespan = relaxed.relaxation(data, SearchState(data), paths, [device])
        assert relaxed._within((model, makespan), static, 10, deterministic_ask)[0] == cp_model.OPTIMAL
    per_ms = static / data.value(static)
    state = SearchState(data, incumbent=round(340 * per_ms))
    raised, kept, spent = relaxed.raise_bound(data, state, 5, deterministic_ask)
    assert data.value(raised) == pytest.approx(312.6) and kept == (0, 1)
    solved = solve(problem, "cpsat", time_limit=10, workers=1)
    assert (solved.value, solved.solver.status) == (pytest.approx(312.6), "optimal")


def test_the_phase_gives_up_when_no_device_answers(monkeypatch):
    # P=8 M=24 (the standard suite's V-shape at half memory, too large for the phase's rounds
    # in a solve; here they run on it): no relaxation question is answered within the first
    # rounds, so the phase ends after them, well within its budget.
    monkeypatch.setattr(relaxed, "UP_TO_OPS", 2_000)
    data = _input(zb_1_5b(8, 24, "vshape", "0.5x"))
    state = SearchState(data, incumbent=bounds.lower_bound(data) * 2)
    raised, kept, spent = relaxed.raise_bound(data, state, 10, deterministic_ask)
    assert raised is None and kept is None
    rounds = sum(relaxed.FIRST_SHARE * 10 * 2 ** k for k in range(relaxed.ROUNDS))
    questions = relaxed.ROUNDS * (8 + len(relaxed.WIDTHS))
    assert spent <= rounds + 0.05 * questions  # CP-SAT stops each a little past its limit


def test_only_the_makespan_under_a_memory_limit_without_pairs_is_relaxed():
    assert eligible(_input(zb_1_5b(4, 8, "vshape", "0.5x")))
    assert eligible(_input(zb_1_5b(4, 8, "single", "0.75x")))
    assert not eligible(_input(zb_1_5b(4, 8, "vshape", None)))  # no memory limit
    spanned = build_problem(4, 8, load_profile("models/zb-1.5b.json").rank_costs(4), memory="1x", objective="span")
    assert not eligible(_input(spanned))
    # With pairs each question takes too long for the phase's rounds (see `eligible`).
    assert not eligible(_input(dualpipe_1_5b(4, 8, "1x")))
    assert not eligible(_input(zb_1_5b(8, 24, "vshape", "0.5x")))  # 1,152 ops


def test_above_its_size_the_phase_asks_the_device_where_memory_time_binds():
    # 1.5B interleaved:2 at half memory, P=8 M=24 (1,152 ops): device 0's memory-time (area)
    # bound is the static bound, 1465.9525 ms. Given a long limit the phase runs, asking that
    # device alone; at 60 s (a budget of 9 s) it does not. On the V-shape of the same size no
    # device's area bound is the static bound (1369.8025 from the others), so it never runs there.
    data = _input(zb_1_5b(8, 24, "interleaved:2", "0.5x"))
    assert len(data.ops) == 1152 and data.value(bounds.lower_bound(data)) == pytest.approx(1465.9525)
    assert relaxed.memory_bound_device(data, SearchState(data)) == 0
    settings = RunSettings(limit=60)
    assert not eligible(data, settings)
    settings = RunSettings(limit=relaxed.LARGE_BUDGET / relaxed.SHARE)
    assert eligible(data, settings)
    vshape = _input(zb_1_5b(8, 24, "vshape", "0.5x"))
    long = RunSettings(limit=600)
    assert relaxed.memory_bound_device(vshape, SearchState(vshape)) is None and not eligible(vshape, long)
    wider = _input(zb_1_5b(8, 24, "interleaved:3", "0.5x"))  # 1,728 ops: too slow to answer (see LARGE_UP_TO_OPS)
    assert relaxed.memory_bound_device(wider, SearchState(wider)) == 0 and not eligible(wider, long)
    # Seven work units rule out the static bound itself (the next question, a quarter of the
    # way to 1705 ms, is left open): device 0 alone was asked.
    per_ms = bounds.lower_bound(data) / data.value(bounds.lower_bound(data))
    state = SearchState(data, incumbent=round(1705 * per_ms))
    raised, kept, spent = relaxed.raise_bound(data, state, 7, deterministic_ask)
    assert kept == (0,) and raised == bounds.lower_bound(data) + 1
    assert spent <= 7 + 0.1


def test_a_solve_reports_the_bound_of_the_relaxation(monkeypatch):
    # 1.5B interleaved:2 at half memory, P=4 M=8, one worker (deterministic): without the
    # short search of the whole model first (which proves it by itself, below), the solve
    # proves 571.726 ms optimal with its bound through device 0's relaxation first.
    monkeypatch.setattr(cpsat_strategy, "PROBE_UP_TO_OPS", 0)
    solved = solve(zb_1_5b(4, 8, "interleaved:2", "0.5x"), "cpsat", time_limit=20, workers=1)
    assert solved.solver.status == "optimal"
    assert solved.value == pytest.approx(571.726)
    assert "relaxation" in solved.solver.message


def test_small_models_are_searched_whole_before_the_bound_phase(monkeypatch):
    # The same problem (192 ops) is proven by the short search alone: the bound phase, which
    # would take its share of the limit first, never runs.
    def no_phase(*args, **kwargs):
        raise AssertionError("the bound phase ran")

    monkeypatch.setattr(relaxed, "raise_bound", no_phase)
    solved = solve(zb_1_5b(4, 8, "interleaved:2", "0.5x"), "cpsat", time_limit=20, workers=1)
    assert (solved.solver.status, solved.solver.message) == ("optimal", "proven by a short search of the whole model")
    assert solved.value == pytest.approx(571.726)
    validate(solved)


def test_a_short_search_that_proves_nothing_hands_on_its_schedule(monkeypatch):
    # 1.5B on DualPipe's placement at 1x, P=4 M=6 (144 ops, one worker, 2 units): the short
    # search finds a better schedule than the starting one (332.768 against 333.204 ms)
    # without a proof; it becomes the hint and the objective to beat of what follows, which
    # proves 296.774 optimal.
    found = []

    def recorded(data, settings, state, *args):
        starting = state.incumbent
        result, spent = probe(data, settings, state, *args)
        assert result.status == Status.FEASIBLE and result.objective < starting
        assert (state.incumbent, state.hint) == (result.objective, result.starts)
        found.append(data.value(result.objective))
        return result, spent

    probe = cpsat_strategy._probe
    monkeypatch.setattr(cpsat_strategy, "_probe", recorded)
    solved = solve(zb_1_5b(4, 6, "bidirectional", "1x"), "cpsat", time_limit=2, workers=1)
    assert found == [pytest.approx(332.768)]
    assert (solved.solver.status, solved.value) == ("optimal", pytest.approx(296.774))
    validate(solved)


def test_a_short_search_keeps_the_pairs_it_chose(monkeypatch):
    # The short search does not run with F&B pairs today (`relaxed.eligible`); made to, on 1.5B
    # pairs at P=4 M=8 (96 ops, one worker, given the whole limit) it proves the optimum,
    # 361.698 ms , and hands on the pairs of that schedule with its start
    # times: without them the starts would not make a valid schedule and the solve would fall
    # back to the starting one (DualPipe's, 382.006).
    monkeypatch.setattr(relaxed, "eligible", lambda data, settings, state: True)
    monkeypatch.setattr(relaxed, "raise_bound", lambda *args, **kwargs: (None, None, 0.0))
    monkeypatch.setattr(cpsat_strategy, "PROBE_SHARE", 1.0)
    solved = solve(dualpipe_1_5b(4, 8), "cpsat", time_limit=20, workers=1)
    assert (solved.solver.status, solved.solver.message) == ("optimal", "proven by a short search of the whole model")
    assert solved.value == pytest.approx(361.698)
    validate(solved)
