"""Mirror-image search on two-pipe problems: when the pipe swap is a symmetry, what the
restricted search finds, and that its proofs are never reported as the problem's."""

from dataclasses import replace

import pytest
from helpers import static_bound, uniform

import zbsolve.solvers.cpsat.strategy as cpsat_strategy
from zbsolve.problem.op_graph import OpGraph
from zbsolve.schedule.validator import validate
from zbsolve.solvers import solve
from zbsolve.solvers.cpsat.mirror import twins
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.view import build_view


@pytest.fixture(autouse=True)
def no_short_search(monkeypatch):
    """These tests count the models and solvers of the mirrored phase and the whole model:
    the short search that small memory-limited models get first (tests/solvers/cpsat/test_relaxed.py) is
    left out."""
    monkeypatch.setattr(cpsat_strategy, "PROBE_UP_TO_OPS", 0)


def solve_input(problem):
    return build_view(OpGraph(problem), problem.split_backward, problem.objective)


def test_dualpipe_placement_maps_each_op_to_the_other_pipe_on_the_reflected_device():
    data = solve_input(uniform(4, 8, placement="bidirectional", fb_overlap=2.4))
    twin = twins(data)
    assert twin is not None and len(twin) == len(data.ops) == 96
    for op, image in twin.items():
        assert twin[image] == op
        assert (image.kind, image.stage, image.pipe) == (op.kind, op.stage, 1 - op.pipe)
        assert data.graph.device(image) == 3 - data.graph.device(op)


def dualpipe_with(**changes):
    return replace(uniform(4, 8, placement="bidirectional", fb_overlap=2.4), **changes)


def test_no_mirror_where_the_pipe_swap_is_not_a_symmetry():
    problem = dualpipe_with()
    pipe = problem.pipes[1]
    costlier = replace(pipe.stages[0], cost=len(problem.stage_costs))  # a new cost record, F = 1.5
    heavier = replace(problem, stage_costs=problem.stage_costs + (replace(problem.stage_costs[0], F=1.5),),
                      pipes=(problem.pipes[0], replace(pipe, stages=(costlier, *pipe.stages[1:]))))
    fewer = replace(problem, pipes=(problem.pipes[0], replace(pipe, microbatches=pipe.microbatches[:-1])),
                    microbatches=7)
    for asymmetric in (uniform(4, 8, placement="vshape"),  # one pipe
                       heavier,  # one stage of one pipe costs more
                       fewer,  # 4 and 3 microbatches
                       dualpipe_with(memory_limit=(4.0, 4.0, 4.0, 5.0))):  # limits that do not reflect
        assert twins(solve_input(asymmetric)) is None
    assert twins(solve_input(dualpipe_with(memory_limit=(5.0, 4.0, 4.0, 5.0)))) is not None


def test_a_mirrored_schedule_is_never_reported_optimal_on_its_own_proof(monkeypatch):
    """P=4 M=8: the mirrored model proves 23 at once, the whole model's optimum is also 23.
    With the whole model made to fail, the answer is the mirrored schedule, `feasible`."""
    built = []

    def whole_model_fails(data, state, **options):
        model, *rest = build_model(data, state, **options)
        built.append(model)
        if len(built) == 2:  # the first build is the mirrored search's
            model.AddBoolOr([])
        return (model, *rest)

    build_model = cpsat_strategy.build_model
    monkeypatch.setattr(cpsat_strategy, "build_model", whole_model_fails)
    solved = solve(uniform(4, 8, placement="bidirectional", fb_overlap=2.4), "cpsat", time_limit=30, workers=1)
    validate(solved)
    assert len(built) == 2
    assert (solved.solver.status, solved.metrics.makespan) == ("feasible", 23)
    assert "mirror" in solved.solver.message
    starts = {t.op: t.start for ops in solved.devices for t in ops}
    twin = twins(solve_input(solved.problem))
    assert all(starts[op] == starts[image] for op, image in twin.items() if op in starts and image in starts)


def test_whole_model_still_proves_after_the_mirrored_search():
    solved = solve(uniform(4, 8, placement="bidirectional", fb_overlap=2.4), "cpsat", time_limit=30, workers=2)
    validate(solved)
    assert (solved.solver.status, solved.metrics.makespan, solved.solver.bound) == ("optimal", 23, 23)


def recorded(monkeypatch, name: str, module=cpsat_strategy) -> list:
    """What each call of the CP-SAT backend's function `name` (of `module`) returned during a
    solve, in order: `build_model` and `parameters.solver_for` run once per phase (the
    mirrored one first)."""
    results, function = [], getattr(module, name)

    def recording(*args, **kwargs):
        results.append(function(*args, **kwargs))
        return results[-1]

    monkeypatch.setattr(module, name, recording)
    return results


def solve_dualpipe_counting_builds(monkeypatch, memory: str, time_limit: float = 30):
    """P=4 M=8 on DualPipe's placement without pairs: the validated schedule and how many
    models the solve built."""
    built = recorded(monkeypatch, "build_model")
    solved = solve(uniform(4, 8, placement="bidirectional", memory=memory), "cpsat",
                   time_limit=time_limit, workers=2)
    validate(solved)
    return solved, len(built)


def test_without_pairs_mirror_images_are_searched_first_and_the_whole_model_proves(monkeypatch):
    """P=4 M=8 at 0.5x: our bound is 27, the optimum 32; the whole model proves it."""
    solved, builds = solve_dualpipe_counting_builds(monkeypatch, "0.5x")
    assert builds == 2
    assert (solved.solver.status, solved.metrics.makespan, solved.solver.bound) == ("optimal", 32, 32)


def test_a_mirror_image_schedule_that_meets_the_lower_bound_ends_the_solve(monkeypatch):
    """P=4 M=8 at 0.75x: the bound is 26 and a mirror-image schedule reaches it."""
    solved, builds = solve_dualpipe_counting_builds(monkeypatch, "0.75x")
    assert builds == 1
    assert (solved.solver.status, solved.metrics.makespan, solved.solver.bound) == ("optimal", 26, 26)
    assert solved.solver.message == "the mirror-image schedule meets the lower bound"


def test_no_mirrored_phase_where_window_search_runs(monkeypatch):
    monkeypatch.setattr(cpsat_strategy, "WINDOW_FROM_OPS", 0)  # window search for this small model
    solved, builds = solve_dualpipe_counting_builds(monkeypatch, "0.5x", time_limit=10)
    assert builds == 1
    assert solved.metrics.makespan >= 32


def test_progress_during_the_mirrored_phase_shows_the_problems_own_bound(monkeypatch):
    # Without the device relaxations' phase, which would raise the problem's bound first.
    monkeypatch.setattr(cpsat_strategy.relaxed, "eligible", lambda data, settings, state: False)
    built = recorded(monkeypatch, "build_model")
    seen = []

    def progress(value, bound, elapsed):
        seen.append((len(built), value, bound))

    problem = uniform(4, 8, placement="bidirectional", memory="0.5x")
    solved = solve(problem, "cpsat", time_limit=30, workers=1, progress=progress)  # work-limited
    own = solve_input(problem)
    mirrored_phase = [(value, bound) for phase, value, bound in seen if phase == 1 and value is not None]
    assert mirrored_phase
    assert all(bound == own.value(static_bound(own)) <= value for value, bound in mirrored_phase)
    assert all(bound is None or bound <= solved.metrics.makespan == 32 for _, _, bound in seen)


def test_large_mirrored_models_search_only_and_the_whole_model_keeps_its_proofs(monkeypatch):
    """Above `SEARCH_ONLY_ABOVE_OPS` the mirrored phase runs neighbourhood search only."""
    solvers = recorded(monkeypatch, "solver_for", cpsat_strategy.parameters)
    problem = uniform(4, 8, placement="bidirectional", memory="0.5x")  # 96 ops
    for threshold, mirrored_searches_only in ((96, False), (95, True)):
        monkeypatch.setattr(cpsat_strategy.mirror, "SEARCH_ONLY_ABOVE_OPS", threshold)
        solvers.clear()
        solved = solve(problem, "cpsat", time_limit=4, workers=1)  # deterministic: the same on any machine
        validate(solved)
        assert [s.parameters.use_lns_only for s in solvers] == [mirrored_searches_only, False]
        assert (solved.solver.status, solved.metrics.makespan) == ("optimal", 32)


def test_the_mirrored_search_varies_its_neighbourhoods_only_with_pairs(monkeypatch):
    """Where the mirrored phase searches only (above `SEARCH_ONLY_ABOVE_OPS`), a pair model's
    LNS varies its parameters; without pairs, and in the whole model, CP-SAT's default."""
    solvers = recorded(monkeypatch, "solver_for", cpsat_strategy.parameters)
    monkeypatch.setattr(cpsat_strategy.mirror, "SEARCH_ONLY_ABOVE_OPS", 95)
    monkeypatch.setattr(cpsat_strategy.mirror, "ALONE_FROM_OPS", 97)  # the whole model follows in both
    for extra, diversified in (({"fb_overlap": 2.4}, True), ({}, False)):
        solvers.clear()
        problem = uniform(4, 8, placement="bidirectional", memory="0.5x", **extra)  # 96 ops
        validate(solve(problem, "cpsat", time_limit=1, workers=1))
        assert [(s.parameters.use_lns_only, s.parameters.diversify_lns_params) for s in solvers] == [
            (True, diversified), (False, False)]


def test_large_pair_models_answer_with_the_mirrored_phase_alone(monkeypatch):
    """`ALONE_FROM_OPS` (pair models): no whole model after the mirrored phase. Here the best
    mirror image (33) is not optimal (32), which is why only large models skip the whole model."""
    solvers = recorded(monkeypatch, "solver_for", cpsat_strategy.parameters)
    problem = uniform(4, 8, placement="bidirectional", fb_overlap=2.4, memory="0.5x")
    for threshold, built, status, makespan in ((96, 1, "feasible", 33), (97, 2, "optimal", 32)):
        monkeypatch.setattr(cpsat_strategy.mirror, "ALONE_FROM_OPS", threshold)
        solvers.clear()
        solved = solve(problem, "cpsat", time_limit=4, workers=1)  # deterministic: the same on any machine
        validate(solved)
        assert (len(solvers), solved.solver.status, solved.metrics.makespan) == (built, status, makespan)
    unpaired = uniform(4, 8, placement="bidirectional", memory="0.5x")  # 96 ops, no pairs: never alone
    solvers.clear()
    monkeypatch.setattr(cpsat_strategy.mirror, "ALONE_FROM_OPS", 0)
    solve(unpaired, "cpsat", time_limit=1, workers=1)  # what runs, not how well: a short limit
    assert len(solvers) == 2


def test_large_pair_models_offer_the_mirrored_phase_only_pairs_the_start_runs_close(monkeypatch):
    """From `ALONE_FROM_OPS` the mirrored model offers only the pairs whose halves the
    starting schedule starts at most `PAIRS_WITHIN` pair lengths apart, and those it pairs;
    below it every phase offers every pair."""
    build_model, seen = cpsat_strategy.build_model, []

    def recording(data, state, **options):
        built = build_model(data, state, **options)
        every = build_model(data, state)[3].literal
        seen.append((options.get("pairs_within"), dict(state.hint), set(state.hint_pairs), set(built[3].literal),
                     set(every), data.pair_duration))
        return built

    monkeypatch.setattr(cpsat_strategy, "build_model", recording)
    problem = uniform(4, 8, placement="bidirectional", fb_overlap=2.4, memory="0.5x")  # 96 ops
    monkeypatch.setattr(cpsat_strategy.mirror, "ALONE_FROM_OPS", 96)
    validate(solve(problem, "cpsat", time_limit=4, workers=1))
    (within, hint, hinted, offered, every, pair), = seen  # the mirrored phase alone
    assert within == int(cpsat_strategy.mirror.PAIRS_WITHIN * pair) > 0
    assert hint and hinted <= offered < every
    assert {(f, b) for f, b in every if abs(hint[f] - hint[b]) <= within} | hinted == offered
    seen.clear()
    monkeypatch.setattr(cpsat_strategy.mirror, "ALONE_FROM_OPS", 97)
    validate(solve(problem, "cpsat", time_limit=4, workers=1))
    assert len(seen) == 2 and all(within is None and offered == every for within, _, _, offered, every, _ in seen)


def test_pair_models_cap_presolve_probing_and_others_keep_the_default():
    """Probing's work measure undercounts on pair models (`PAIR_PROBING_WORK`)."""
    with_pairs = solve_input(dualpipe_with())
    without = solve_input(uniform(4, 8, placement="bidirectional", memory="0.5x"))
    solver_for = cpsat_strategy.parameters.solver_for
    assert solver_for(with_pairs, RunSettings(), 5.0).parameters.probing_deterministic_time_limit == 0.1
    assert solver_for(without, RunSettings(), 5.0).parameters.probing_deterministic_time_limit == 1.0
