"""The least-memory phase: as fast as the first solve, no more memory, statuses that say only
what was proven; pinned against an exhaustive check on a small problem."""

from dataclasses import replace

import pytest
from helpers import uniform

from zbsolve.cli import main
from zbsolve.errors import SolverError
from zbsolve.schedule.validator import validate
from zbsolve.solvers import solve
from zbsolve.solvers.least_memory import least_memory


def run(problem):
    return solve(problem, "cpsat", time_limit=5, workers=1)


def test_it_keeps_the_value_and_lowers_the_peak():
    problem = uniform(4, 8, memory="3x")
    first = solve(problem, "list", time_limit=1, workers=1)  # fast and memory-hungry
    phase = least_memory(problem, first, run)
    validate(phase.schedule)
    assert phase.schedule.value <= first.value
    assert phase.after <= phase.before == max(first.metrics.peak_memory)
    assert phase.schedule.problem == problem and phase.schedule.solver.status == first.solver.status


def test_a_proven_floor_is_where_the_exact_optimum_is_slower():
    # P=2, M=2, F=B=W=1: 7 is optimal and needs 1x U (2 activations on device 0); below it,
    # device 0 runs one microbatch at a time and the optimum is slower, which the phase proves.
    problem = uniform(2, 2, activation=1.0, residual=0.5, memory="2x")
    first = run(problem)
    assert (first.value, first.solver.status) == (7, "optimal")
    phase = least_memory(problem, first, run)
    assert phase.after == 2.0 and phase.proven and 1.98 < phase.below < 2.0
    proof = run(replace(problem, memory_limit=(phase.below,) * 2))
    assert proof.solver.status == "optimal" and proof.value > 7


def test_a_step_that_finds_nothing_is_not_counted_as_proof():
    problem = uniform(4, 8, memory="2x")
    first = run(problem)

    def nothing(_):
        raise SolverError("nothing found in time")

    phase = least_memory(problem, first, nothing)
    assert phase.schedule is first and not phase.proven and "not proven" in phase.describe()


def test_the_command_reports_the_phase_in_the_table(capsys):
    assert main(["solve", "-p", "4", "-m", "8", "--memory", "3x", "--solver", "list", "--time-limit", "1",
                 "--workers", "1", "--least-memory", "-q"]) == 0
    out = capsys.readouterr().out
    solved = next(line for line in out.splitlines() if line.startswith("solved"))
    assert "least memory at equal speed: peak" in solved


@pytest.mark.parametrize("stop_after", [0, 1])
def test_a_stop_ends_the_phase_between_steps(stop_after):
    problem = uniform(4, 8, memory="3x")
    first = solve(problem, "list", time_limit=1, workers=1)
    calls = []

    def counted(p):
        calls.append(p)
        return run(p)

    least_memory(problem, first, counted, stopped=lambda: len(calls) >= stop_after)
    assert len(calls) == stop_after
