"""Pinned optimal values, agreement of both backends with each other and with brute force."""

import dataclasses
import itertools
import threading
import time

import pytest
from brute_force import brute_force_makespan as search_schedules
from helpers import REPO_ROOT, static_bound, uniform

from benchmarks.instances import from_profile
from zbsolve.baselines import run_baseline
from zbsolve.errors import InfeasibleError, UsageError
from zbsolve.formats.schedule_json import dumps
from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.problem.profiles import load_profile
from zbsolve.schedule.simulator import simulate
from zbsolve.schedule.validator import validate
from zbsolve.solvers import minimum_memory, orchestration, registry, runner, solve
from zbsolve.solvers.result import BackendResult, Status
from zbsolve.solvers.view import build_view

BACKENDS = ["cpsat", "cbc"]


def replace_backend(monkeypatch, name, run):
    """Backend `name` runs `run(data, settings, state)` for the rest of the test."""
    monkeypatch.setitem(registry._BACKENDS, name, dataclasses.replace(registry.get(name), run=run))


@pytest.mark.parametrize("backend", BACKENDS)
def test_p4_m8_one_x_reaches_the_work_bound(backend):
    s = solve(uniform(4, 8, memory="1x"), backend, time_limit=30, workers=1)
    validate(s)
    assert (s.solver.status, s.metrics.makespan, s.solver.bound, s.solver.gap) == ("optimal", 27, 27, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_span_objective_two_x_has_zero_span_bubble(backend):
    s = solve(uniform(4, 8, memory="2x", objective="span"), backend, time_limit=30, workers=1)
    validate(s)
    assert (s.solver.status, s.metrics.span, s.metrics.span_bubble_rate) == ("optimal", 24, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_span_objective_below_the_starting_schedule(backend):
    """Here the starting schedule (31) is above the optimum, so the backend's own span
    model does the work; 30 is what tests/exact_model.py proves too."""
    problem = uniform(3, 5, F=2, B=1, W=1, memory="0.75x", objective="span")
    assert solve(problem, "list", time_limit=10).metrics.span == 31
    s = solve(problem, backend, time_limit=30, workers=1)
    validate(s)
    assert (s.solver.status, s.metrics.span, s.solver.bound) == ("optimal", 30, 30)


@pytest.mark.parametrize("placement, firsts", [
    ("single", [Op("F", 0, 0, 0)]), ("interleaved:2", [Op("F", 0, 0, 0)]), ("vshape", [Op("F", 0, 0, 0)]),
    ("bidirectional", [Op("F", 0, 0, 0), Op("F", 1, 0, 4)]),
])
def test_the_ops_a_span_schedule_may_start_with_are_one_first_forward_per_pipe(placement, firsts):
    problem = uniform(4, 8, placement=placement, objective="span", fb_overlap=2.4 if placement != "single" else None)
    data = build_view(OpGraph(problem), problem.split_backward, problem.objective)
    assert data.starters == firsts


def _vshape_span(P, M):
    return from_profile("zb-1.5b", P, M, placement="vshape", memory="0.75x", objective="span")


@pytest.mark.parametrize("backend", BACKENDS)
def test_vshape_span_optimum_that_both_backends_prove(backend):
    s = solve(_vshape_span(2, 4), backend, time_limit=60, workers=1)
    validate(s)
    assert (s.solver.status, s.metrics.span, s.solver.bound) == ("optimal", pytest.approx(225.374),
                                                                 pytest.approx(225.374))


def test_cpsat_proves_a_vshape_span_that_needs_a_schedule_anchored_at_zero():
    """A span is the same wherever the schedule lies in time; the model lets it start only at 0.
    Without that, 20 work units left this at 245.534 with CP-SAT's bound at the static 225.516
    (8.2%): the same optimum as the makespan's, proven in under 4 s (3.4 and 3.8 s on a 2-core Xeon)."""
    s = solve(_vshape_span(3, 4), "cpsat", time_limit=20, workers=1)
    validate(s)
    assert (s.solver.status, s.metrics.span, s.solver.bound) == ("optimal", pytest.approx(245.534),
                                                                 pytest.approx(245.534))


UNEVEN = [
    # (rank-stage costs, M, comm, memory) with optima both backends proved.
    ([StageCost(1, 2, 1, 1, 0.4), StageCost(2, 1, 1, 1, 0.5), StageCost(1.5, 1, 0.5, 1, 0.3)], 4, 0.3, "1.2x"),
    ([StageCost(2, 1, 1, 2, 1), StageCost(1, 3, 0.5, 1, 0.5)], 3, 0.0, "0.75x"),
    ([StageCost(1, 1, 2, 1, 0.5), StageCost(1, 1, 2, 1, 0.5), StageCost(3, 2, 1, 1, 0.5)], 3, 0.5, None),
]
UNEVEN_OPTIMA = [20.7, 22.0, 23.0]


@pytest.mark.parametrize("case, optimum", list(zip(UNEVEN, UNEVEN_OPTIMA)))
def test_uneven_costs_both_backends_agree_on_the_pinned_optimum(case, optimum):
    costs, M, comm, memory = case
    problem = build_problem(len(costs), M, costs, comm=comm, memory=memory)
    values = []
    for backend in BACKENDS:
        s = solve(problem, backend, time_limit=60, workers=1)
        validate(s)
        assert s.solver.status == "optimal"
        values.append(s.metrics.makespan)
    assert values == [pytest.approx(optimum)] * 2


def brute_force_makespan(problem):
    """Best ASAP makespan over every interleaving of two devices' ops (tiny problems only)."""
    from zbsolve.problem.op_graph import OpGraph

    graph = OpGraph(problem)
    per_device = [[op for op in graph.ops() if graph.device(op) == d] for d in range(problem.devices)]
    best = None
    # An order that puts an op before one it depends on, on the same device, deadlocks:
    # leaving those out (here 3,600 of 518,400 pairs of orders remain) changes nothing but the time.
    for orders in itertools.product(*(_dependency_orders(graph, ops) for ops in per_device)):
        try:
            s = simulate(graph, [list(o) for o in orders])
        except Exception:
            continue  # an order that deadlocks
        if s.over_memory_limit():
            continue
        best = s.metrics.makespan if best is None else min(best, s.metrics.makespan)
    return best


def _dependency_orders(graph, ops):
    """The orders of one device's ops in which each op comes after its predecessors there."""
    here = set(ops)
    before = {op: {p for p, _ in graph.predecessors(op) if p in here} for op in ops}
    return [order for order in itertools.permutations(ops)
            if all(before[op] <= set(order[:i]) for i, op in enumerate(order))]


def test_brute_force_agrees_on_a_tiny_uneven_case():
    problem = build_problem(2, 2, [StageCost(1, 2, 1, 1, 0.5), StageCost(2, 1, 0.5, 1, 0.5)],
                            comm=0.5, memory="0.75x")
    expected = brute_force_makespan(problem)
    assert expected == search_schedules(problem)  # two exhaustive searches, written apart
    for backend in BACKENDS:
        assert solve(problem, backend, time_limit=30, workers=1).metrics.makespan == pytest.approx(expected)


def test_fused_backward_problem_uses_bw_only():
    s = solve(uniform(3, 4, split_backward=False, memory="1x"), "cpsat", time_limit=20, workers=1)
    validate(s)
    assert {t.op.kind for ops in s.devices for t in ops} == {"F", "BW"}
    assert s.metrics.makespan == 18  # 1F1B is optimal here: (M+P-1)(F+BW)


def test_limit_below_one_microbatch_is_infeasible_at_once_with_the_minimum():
    problem = uniform(4, 8, memory="0.1x")
    assert minimum_memory(problem) == [1.0] * 4
    with pytest.raises(InfeasibleError, match=r"smallest limit that works is 1 \(0.25x U\)"):
        solve(problem)


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_seed_one_worker_is_byte_identical(backend):
    problem = build_problem(3, 5, [StageCost(1, 1.5, 1, 1, 0.5), StageCost(1.2, 1, 0.7, 1, 0.5),
                                   StageCost(1, 1, 1, 1, 0.5)], comm=0.1, memory="1.5x")
    a = solve(problem, backend, time_limit=10, workers=1, seed=3)
    b = solve(problem, backend, time_limit=10, workers=1, seed=3)
    assert a.solver.wall_time_s is None  # the clock is left out of repeatable runs
    assert dumps(a) == dumps(b)


def test_a_time_limited_single_worker_run_stops_at_the_same_point():
    # Too large to prove in 1 unit of deterministic time, so the limit decides the result.
    problem = uniform(8, 24, F=1.1, B=1.3, W=0.7, comm=0.1, memory="1.25x", objective="span")
    runs = [solve(problem, "cpsat", time_limit=1, workers=1, seed=5) for _ in range(2)]
    assert runs[0].solver.status == "feasible"
    assert dumps(runs[0]) == dumps(runs[1])


def test_a_deterministic_run_stopped_by_the_clock_says_it_may_not_repeat(monkeypatch):
    from zbsolve.solvers.cpsat import parameters as cpsat_parameters

    for backstop in ("CLOCK_BACKSTOP", "CLOCK_SLACK_S", "CLOCK_BACKSTOP_WITHOUT_PAIRS", "CLOCK_SLACK_WITHOUT_PAIRS_S"):
        monkeypatch.setattr(cpsat_parameters, backstop, 0.0)  # the clock stops it after 1 s, before 5 units
    problem = uniform(8, 24, F=1.1, B=1.3, W=0.7, comm=0.1, memory="1.25x", objective="span")
    solved = solve(problem, "cpsat", time_limit=5, workers=1)
    validate(solved)
    assert solved.solver.status == "feasible" and "it may not repeat exactly" in solved.solver.message


def test_one_worker_can_run_by_the_clock():
    """A clock-limited run reports its wall time, as multi-worker runs do (a run limited by
    work units reports none), and is held to the clock: at most the grace past its limit after
    which a backend is left behind. CP-SAT looks at its clock between steps, so how far it
    overruns depends on the machine: 1.8 to 3.0 s in ten runs on a 2-core Xeon where a
    work-limited run of 2 units took 5.9 and 7.5 s."""
    problem = uniform(8, 24, F=1.1, B=1.3, W=0.7, comm=0.1, memory="1.25x", objective="span")
    began = time.monotonic()
    solved = solve(problem, "cpsat", time_limit=2, workers=1, deterministic=False)
    elapsed = time.monotonic() - began
    validate(solved)
    assert solved.solver.status == "feasible" and 0 < solved.solver.wall_time_s <= elapsed


@pytest.mark.parametrize("kwargs, message", [
    (dict(solver="gurobi"), "unknown solver"),
    (dict(time_limit=0), "time limit"),
    (dict(time_limit=-3), "time limit"),
    (dict(workers=0), "workers"),
    (dict(workers=2, deterministic=True), "deterministic solve needs one worker"),
    (dict(seed=2**31), "seed must be an integer from 0 to 2147483647"),
    (dict(seed=-1), "seed must be an integer from 0 to 2147483647"),
    (dict(seed="3"), "seed must be an integer"),
    (dict(baselines=[run_baseline("1f1b", uniform(2, 4))]), "baselines must be hand-made schedules of the problem"),
])
def test_bad_solver_options(kwargs, message):
    with pytest.raises(UsageError, match=message):
        solve(uniform(2, 2), **kwargs)


def test_a_short_single_worker_solve_is_no_worse_than_the_list_scheduler_alone():
    # 192 ops, 1.5B V-shape at 0.5x: with a tenth of 2 s the list scheduler ran 42 of its
    # 192 passes, and CP-SAT ended at 537.466 ms; given 1 s it runs them all

    from zbsolve.problem.profiles import load_profile

    profile = load_profile(REPO_ROOT / "models" / "zb-1.5b.json")
    problem = build_problem(4, 8, profile.rank_costs(4), placement="vshape", memory="0.5x")
    alone = solve(problem, "list", time_limit=2, workers=1)
    assert alone.metrics.makespan == pytest.approx(522.523)
    solved = solve(problem, "cpsat", time_limit=2, workers=1)
    validate(solved)
    assert solved.metrics.makespan <= alone.metrics.makespan + 1e-9


def test_baselines_timed_by_the_caller_are_the_start():
    problem = uniform(4, 8, memory="1x")
    timed = [run_baseline(name, problem) for name in ("1f1b", "zb-h1")]
    solved = solve(problem, "cpsat", time_limit=2, workers=1, baselines=timed)
    assert solved.metrics.makespan == 27 and solved.solver.status == "optimal"  # ZB-H1 meets the bound
    assert "the starting schedule meets the lower bound" in solved.solver.message
    from_1f1b = solve(problem, "cpsat", time_limit=2, workers=1, baselines=timed[:1])
    validate(from_1f1b)
    assert from_1f1b.metrics.makespan == 27  # from 1F1B's 33 alone, the list scheduler or the search reach 27


def test_stop_event_before_start_keeps_the_warm_start():
    stop = threading.Event()
    stop.set()
    s = solve(uniform(4, 8, memory="1x"), "cpsat", time_limit=20, workers=1, stop=stop)
    validate(s)
    assert s.metrics.makespan <= 27


def test_cbc_refuses_overlap_and_names_cpsat():
    problem = uniform(2, 2, fb_overlap=1.5)
    with pytest.raises(UsageError, match="cpsat"):
        solve(problem, "cbc", time_limit=5)


def test_a_failed_cbc_process_leaves_the_starting_schedule(monkeypatch):
    # The bundled CBC segfaulted on a P=5 M=8 V-shape at 0.5x when its 1 s limit fell just
    # after it took the starting solution; PuLP then raises, and the solve used to crash.
    import pulp

    runs = []

    def crash(self, *args, **kwargs):
        runs.append(self)
        raise pulp.PulpSolverError("Pulp: Error while trying to execute")

    monkeypatch.setattr(pulp.LpProblem, "solve", crash)
    s = solve(uniform(4, 8, memory="0.5x", F=1, B=1.5, W=0.5), "cbc", time_limit=5, workers=1)
    validate(s)
    assert runs, "the starting schedule did not meet the bound: CBC was run"
    assert s.solver.status == "feasible"
    assert s.solver.message == ("CBC's process failed (it crashed or exited with an error) and left no solution; "
                                "the starting schedule (list) is returned")


def test_progress_reports_values_in_problem_units():
    seen = []
    solve(uniform(3, 6, F=0.5, B=0.5, W=0.5, memory="1x"), "cpsat", time_limit=10, workers=1,
          progress=lambda best, bound, t: seen.append((best, bound)))
    assert any(best == pytest.approx(0.5 * (3 * 6 + 2)) for best, _ in seen if best is not None)


def test_progress_starts_from_the_starting_schedule_and_counts_from_the_solves_start(monkeypatch):
    seen = []
    starter_schedule, run_in_thread = orchestration.starter_schedule, orchestration.run_in_thread

    def slow_list_schedule(graph, data, settings, state):
        time.sleep(0.5)  # as a long list phase would: the backend starts later
        found = starter_schedule(graph, data, settings, state)
        seen.append(("list", found.value))
        return found

    def run(backend, data, settings, state, clocked):
        seen.append(("backend", None))
        return run_in_thread(backend, data, settings, state, clocked)

    monkeypatch.setattr(orchestration, "starter_schedule", slow_list_schedule)
    monkeypatch.setattr(orchestration, "run_in_thread", run)
    problem = uniform(4, 8, memory="0.5x")  # no hand-made schedule fits: the list scheduler starts
    solved = solve(problem, "cpsat", time_limit=3, workers=2,
                   progress=lambda best, bound, t: seen.append((best, bound, t)))
    assert seen[0][0] == "list" and seen[2] == ("backend", None)
    best, bound, at = seen[1]  # before the backend: the starting schedule and the static bound
    own = build_view(OpGraph(problem), problem.split_backward, problem.objective)
    assert best == seen[0][1] > bound == own.value(static_bound(own))
    assert solved.metrics.makespan <= best
    reports = [entry for entry in seen if len(entry) == 3]
    assert at >= 0.5 and all(t >= 0.5 for _, _, t in reports)  # from the solve's start, list phase included
    assert [t for _, _, t in reports] == sorted(t for _, _, t in reports)
    assert solved.solver.wall_time_s >= reports[-1][2]  # the whole solve's time, as the reports count it


def test_op_text_round_trips():
    for op in (Op("F", 0, 3, 1), Op("BW", 1, 0, 12), Op("W", 0, 0, 0)):
        assert Op.parse(str(op)) == op


def test_a_backend_that_finds_nothing_in_time_returns_the_starting_schedule(monkeypatch):
    # What happens on very large instances (the 28.3B profile at 1.25x in the benchmark):
    # the model finds no schedule within the limit, but the starting schedule is an answer.
    replace_backend(monkeypatch, "cpsat", lambda *inputs: BackendResult(Status.UNKNOWN, None, None, None, 1.0))
    # Span at 1.5x: the Zero Bubble greedy's 25.1 (the list scheduler's too) beats ZB-H1's 27.7 but not the bound 24.9
    # (the optimum, which a plain exact model proves), so the (failing) backend is consulted.
    problem = uniform(4, 8, memory="1.5x", F=1, B=1.2, W=0.7, objective="span")
    solved = solve(problem, "cpsat", time_limit=5, workers=1)
    validate(solved)
    assert solved.solver.status == "feasible"
    # one worker: limited by CP-SAT's work measure, and said so; two race on the clock
    assert "cpsat found no schedule within 5 work units: the starting schedule (zb-auto) is returned" \
        in solved.solver.message
    clocked = solve(problem, "cpsat", time_limit=2, workers=2)
    assert "cpsat found no schedule within 2 s: the starting schedule (zb-auto) is returned" in clocked.solver.message
    assert solved.metrics.span == pytest.approx(25.1)
    assert solved.solver.bound == pytest.approx(24.9)


@pytest.mark.parametrize("behaviour", ["ignores the stop", "reports, ignores the stop", "stops when told"])
def test_a_search_that_overruns_its_limit_is_left_behind(monkeypatch, behaviour):
    # CP-SAT checks its clock between propagation rounds, which took over 20 s on large
    # memory-bound models. Here a backend ignores its limit (it sleeps through it): the
    # solve still returns soon after the limit, with what the search last reported. One
    # that stops when told to is not reported as interrupted (no user asked it to stop).
    from zbsolve.solvers.listsched import solve_list

    def stubborn(data, settings, state):
        listed = solve_list(data, settings, state)
        if behaviour == "reports, ignores the stop":
            state.best_found = (listed.starts, listed.objective, listed.pairs)
        if behaviour == "stops when told":
            state.stop.wait(30)
            return BackendResult(Status.FEASIBLE, listed.starts, listed.objective, None, 1.0, pairs=listed.pairs,
                                 interrupted=True)
        time.sleep(30)
        raise AssertionError("left behind, never read")

    replace_backend(monkeypatch, "cpsat", stubborn)
    monkeypatch.setattr(runner, "OVERRUN_GRACE_S", 0.5)  # the wait is what is tested, not its length
    problem = uniform(4, 8, memory="1.5x", F=1, B=1.2, W=0.7, objective="span")
    began = time.monotonic()
    solved = solve(problem, "cpsat", time_limit=1, workers=2)
    assert time.monotonic() - began < 25  # the backend, asleep for 30 s, was left behind
    validate(solved)
    assert solved.solver.status == "feasible"
    assert "the search did not stop within 0.5 s of its" in solved.solver.message
    if behaviour == "reports, ignores the stop":
        assert "its best schedule so far is returned" in solved.solver.message
    if behaviour == "ignores the stop":
        assert "the starting schedule (zb-auto) is returned" in solved.solver.message
    assert solved.metrics.span == pytest.approx(25.1)


def test_a_single_worker_cbc_solve_is_still_held_to_the_clock(monkeypatch):
    # One worker makes a solve deterministic, which frees CP-SAT from the clock; CBC's limit
    # is the clock's in any mode, and CBC ran 47 s against a 30 s limit (P=3 M=16
    # interleaved:3 at 0.625x), so it is left behind like any overrunning search.
    def stubborn(data, settings, state):
        time.sleep(30)
        raise AssertionError("left behind, never read")

    replace_backend(monkeypatch, "cbc", stubborn)
    monkeypatch.setattr(runner, "OVERRUN_GRACE_S", 0.5)
    began = time.monotonic()
    solved = solve(uniform(4, 8, memory="1.5x", F=1, B=1.2, W=0.7, objective="span"), "cbc", time_limit=2,
                   workers=1)
    assert time.monotonic() - began < 25  # the backend, asleep for 30 s, was left behind
    validate(solved)
    assert "the search did not stop within 0.5 s of its" in solved.solver.message


def test_a_hand_made_schedule_at_the_bound_skips_the_heuristics_and_the_model(monkeypatch):
    def refuse(*args):
        raise AssertionError("not needed: ZB-H1 already meets the bound")

    monkeypatch.setattr(orchestration, "starter_schedule", refuse)
    replace_backend(monkeypatch, "cpsat", refuse)
    solved = solve(uniform(4, 8, memory="1x"), "cpsat", time_limit=5, workers=1)
    assert solved.solver.status == "optimal"
    assert solved.metrics.makespan == 27
    assert solved.solver.message == "the starting schedule meets the lower bound"


def test_a_deterministic_run_writes_the_same_file_on_a_loaded_machine():
    """The clock only backstops a deterministic search; without F&B pairs the backstop is
    loose enough that two busy processes beside it change nothing in what it writes."""
    import subprocess
    import sys

    profile = load_profile(REPO_ROOT / "models" / "zb-1.5b.json")
    problem = build_problem(4, 8, profile.rank_costs(4), comm=profile.comm, memory="1.25x", objective="span")
    idle = solve(problem, "cpsat", time_limit=2, workers=1, seed=0)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        loaded = solve(problem, "cpsat", time_limit=2, workers=1, seed=0)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    assert dumps(idle) == dumps(loaded)
