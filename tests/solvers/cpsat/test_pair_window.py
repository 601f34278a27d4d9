"""Window search with F&B pairs: its re-timing keeps every schedule valid and no later, its
schedules validate and are no worse, and solve_cpsat runs it where it should."""

from dataclasses import replace

import pytest
from helpers import feasible, stage_costs, uniform
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import zbsolve.solvers.cpsat.strategy as cpsat_strategy
from zbsolve import solve
from zbsolve.baselines import run_baseline
from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.schedule.validator import validate
from zbsolve.solvers.cpsat import mirror, pair_window
from zbsolve.solvers.result import BackendResult, Status
from zbsolve.solvers.retiming import retimed
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import build_view
from zbsolve.solvers.warm_start import hint_from


def pair_input(problem):
    graph = OpGraph(problem)
    return graph, build_view(graph, problem.split_backward, problem.objective)


def checked(graph, data, starts, pairs):
    """The schedule re-timed with exact costs and validated (dependencies, one op or pair at
    a time, memory); its value."""
    schedule = retimed(graph, data, BackendResult(Status.FEASIBLE, starts, None, None, 0.0, pairs=sorted(pairs)), "w")
    validate(schedule)
    return schedule.value


def test_re_timing_a_spread_out_dualpipe_schedule_keeps_its_pairs_order_and_validity():
    problem = uniform(4, 8, F=1.0, B=1.2, W=0.7, comm=0.1, placement="bidirectional", fb_overlap=2.4,
                      memory="1.5x")
    graph, data = pair_input(problem)
    hint, pairs = hint_from(run_baseline("dualpipe", problem, graph), data)
    assert pairs  # DualPipe overlaps F and B in its middle phase
    spread = {op: 3 * t for op, t in hint.items()}  # same order, every gap wider: valid, slower
    packed, ends = pair_window.compressed(data, spread, pairs)
    assert all(packed[op] <= spread[op] for op in data.ops)
    assert all(packed[f] == packed[b] and ends[f] == ends[b] == packed[f] + data.pair_duration for f, b in pairs)
    for ops in data.device_ops:
        assert sorted(ops, key=lambda op: (spread[op], data.rank[op])) == sorted(
            ops, key=lambda op: (packed[op], data.rank[op]))
    value = checked(graph, data, packed, pairs)
    assert value <= checked(graph, data, hint, pairs) + 1e-9  # as short as DualPipe's own timing


def windows_after_mirrored(data, seconds=1.0):
    """A short mirror-image search, then pair window search from its schedule: the starting
    (starts, ends, pairs) in solver units and what the search returned."""
    settings, state = RunSettings(limit=2.0, workers=2), SearchState(data)
    # work-limited, so that a loaded machine cannot cut it before its first schedule
    first = cpsat_strategy._search_mirrored(data, RunSettings(limit=2.0, deterministic=True), state, 0.5)
    if first.status != "feasible":
        return None  # a problem with schedules may have no mirror image among them (a memory limit)
    begun = pair_window.compressed(data, first.starts, set(first.pairs))
    model, start, pairs = cpsat_strategy.mirrored_model(data, state, mirror.twins(data))
    found = pair_window.search(data, settings, state, model, start, pairs, first.starts, first.pairs, seconds,
                               lambda *a: None)
    return (*begun, set(first.pairs)), found


@st.composite
def mirrored_pair_problems(draw):
    """DualPipe's placement with F&B pairs (any positive length, even one shorter than its
    halves), the costs off the decimal grid: pipe swaps are symmetries of these."""
    P = draw(st.sampled_from([2, 4]))
    return build_problem(
        P, 2 * draw(st.integers(1, 3)), draw(stage_costs(P)), placement="bidirectional",
        comm=draw(st.sampled_from([0.0, 0.1, 0.5])), memory=draw(st.sampled_from([None, "1x", "1.5x", "2x"])),
        fb_overlap=draw(st.integers(1, 60).map(lambda n: n / 10)), split_backward=draw(st.booleans()),
    )


@settings(max_examples=6, deadline=None)
@given(mirrored_pair_problems())
def test_pair_window_schedules_validate_and_are_no_worse(problem):
    assume(feasible(problem))
    graph, data = pair_input(problem)
    twin = mirror.twins(data)
    assert twin is not None
    found = windows_after_mirrored(data)
    assume(found is not None)
    (_, begun, _), (starts, chosen, value, steps, better) = found
    assert steps >= 1 and value <= max(begun.values())
    assert checked(graph, data, starts, chosen) <= data.value(value) + 1e-9
    assert all(starts[op] == starts[twin[op]] for op in data.ops)  # still a mirror image


def test_a_feasible_problem_may_have_no_mirror_image_schedule():
    # each device holds one pipe's first stage (1) and the other's second (2), limit 2: a
    # mirror image starts both pipes at once, and then no second stage fits (Hypothesis found it)
    costs = [StageCost(0.1, 0.1, 0.1, 1.0, 0.0), StageCost(0.1, 0.1, 0.1, 2.0, 0.0)]
    problem = build_problem(2, 2, costs, placement="bidirectional", memory=[2.0, 2.0], split_backward=False,
                            fb_overlap=0.1)
    graph, data = pair_input(problem)
    assert windows_after_mirrored(data) is None
    solved = solve(problem, "cpsat", time_limit=5, workers=1)
    validate(solved)
    assert solved.solver.status == "optimal"


def test_large_pair_solves_hand_a_stalled_search_to_windows_on_the_clock_only(monkeypatch):
    problem = uniform(4, 8, placement="bidirectional", fb_overlap=1.5, memory="1x")
    # A small problem stands in for a large one: the mirrored phase is the answer, it proves
    # nothing (LNS only) and counts as stalled after 0.2 s without a better schedule.
    monkeypatch.setattr(mirror, "ALONE_FROM_OPS", 0)
    monkeypatch.setattr(mirror, "SEARCH_ONLY_ABOVE_OPS", 0)
    monkeypatch.setattr(cpsat_strategy, "PROBE_UP_TO_OPS", 0)
    monkeypatch.setattr(cpsat_strategy, "PAIR_WINDOW_STALL", 0.0)
    monkeypatch.setattr(cpsat_strategy, "PAIR_WINDOW_NOT_BEFORE", 0.25)
    solved = solve(problem, "cpsat", time_limit=4, workers=2)
    validate(solved)
    stopped = solved.solver.message.split("mirror-image search stopped after ")[1]
    assert float(stopped.split(" s,")[0]) >= 0.25 * 4 - 0.5  # not before a quarter of the limit, less the bound phase
    assert "pair window search:" in solved.solver.message
    assert solved.value >= solved.solver.bound
    # Wall-clock steps would not repeat. A one-worker search of this model ends within 1 s, so
    # it would never count as stalled a quarter of the way in: here it would at once.
    monkeypatch.setattr(cpsat_strategy, "PAIR_WINDOW_NOT_BEFORE", 0.0)
    deterministic = solve(problem, "cpsat", time_limit=4, workers=1)
    assert "pair window search" not in (deterministic.solver.message or "")
    span = solve(replace(problem, objective="span"), "cpsat", time_limit=1, workers=2)  # what runs, not how well
    assert "pair window search" not in (span.solver.message or "")


@pytest.mark.parametrize("size", [20, 200])
def test_a_window_frees_whole_moments_so_twins_and_pair_halves_move_together(monkeypatch, size):
    problem = uniform(4, 8, placement="bidirectional", fb_overlap=1.5)
    freed = []
    reorder = pair_window._reorder

    def seen(data, settings, model, start, pairs, best, ends, chosen, free, seconds, seed):
        freed.append((free, best, chosen))
        return reorder(data, settings, model, start, pairs, best, ends, chosen, free, seconds, seed)

    monkeypatch.setattr(pair_window, "WINDOW_OPS", size)
    monkeypatch.setattr(pair_window, "_reorder", seen)
    graph, data = pair_input(problem)
    assert windows_after_mirrored(data) is not None  # no memory limit: the mirrored search finds one
    twin = mirror.twins(data)
    assert freed
    for free, best, chosen in freed:
        assert all(twin[op] in free for op in free)
        assert all((f in free) == (b in free) for f, b in chosen)
        low, high = min(best[op] for op in free), max(best[op] for op in free)
        assert {op for op in data.ops if low <= best[op] <= high} == free


def test_from_dualpipes_schedule_the_search_finds_a_shorter_mirror_image():
    """P=4 M=8 with pairs of 2.4: DualPipe's timing takes 23.6 (118 solver units), the optimum 23."""
    problem = uniform(4, 8, placement="bidirectional", fb_overlap=2.4)
    graph, data = pair_input(problem)
    settings, state = RunSettings(workers=2), SearchState(data)
    state.hint, state.hint_pairs = hint_from(run_baseline("dualpipe", problem, graph), data)
    twin = mirror.twins(data)
    model, start, pairs = cpsat_strategy.mirrored_model(data, state, mirror.twins(data))
    gains = []
    starts, chosen, value, steps, better = pair_window.search(
        data, settings, state, model, start, pairs, state.hint, sorted(state.hint_pairs), 3.0,
        lambda s, v, p: gains.append(v))
    assert max(pair_window.compressed(data, state.hint, state.hint_pairs)[1].values()) == 118
    assert value < 118 and better == len(gains) >= 1 and gains == sorted(gains, reverse=True) and gains[-1] == value
    assert all(starts[op] == starts[twin[op]] for op in data.ops)
    assert checked(graph, data, starts, chosen) == pytest.approx(data.value(value))
