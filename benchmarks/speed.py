"""The speed reference of benchmark runs: fixed work, the same whatever zbsolve's code,
timed where the results are measured, and whether two runs' references say they ran at
different speeds."""

from __future__ import annotations

import time

# Why: machines of one description differ (the scaling table's 100k-op input build took
# 2.42 s in the 2026-11-25 23:14 run and 4.49 s in a 2026-11-27 run, where that run's code
# solved its instances less well than it had: see README, Benchmarks).
REFERENCE_REPEATS = 3
REFERENCE_JOBS = 12  # a seeded job shop, 12 jobs on 12 machines: proven after 0.82 units, not within 0.1
REFERENCE_UNITS = 0.1  # CP-SAT's deterministic work units on it, one worker


def speed_reference() -> dict:
    """How fast the machine ran fixed work: seconds for a fixed pure-Python task (sorting and
    hashing 300,000 seeded numbers) and for CP-SAT to spend REFERENCE_UNITS of its work
    measure on a fixed job shop, each the best of REFERENCE_REPEATS. Runs of one suite are
    comparable where these agree."""
    import random

    from ortools.sat.python import cp_model

    def python_task() -> None:
        rng = random.Random(0)
        numbers = [rng.random() for _ in range(300_000)]
        sorted(numbers)
        len({round(x, 4): x for x in numbers})

    def cpsat_task() -> None:
        rng = random.Random(0)
        model = cp_model.CpModel()
        horizon = 100 * REFERENCE_JOBS * REFERENCE_JOBS
        end_times, on_machine = [], [[] for _ in range(REFERENCE_JOBS)]
        for _ in range(REFERENCE_JOBS):
            previous = None
            for machine_id in rng.sample(range(REFERENCE_JOBS), REFERENCE_JOBS):
                length = rng.randint(1, 99)
                start = model.new_int_var(0, horizon, "")
                on_machine[machine_id].append(model.new_fixed_size_interval_var(start, length, ""))
                if previous is not None:
                    model.add(start >= previous)
                previous = start + length
            end_times.append(previous)
        for intervals in on_machine:
            model.add_no_overlap(intervals)
        makespan = model.new_int_var(0, horizon, "")
        model.add_max_equality(makespan, end_times)
        model.minimize(makespan)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_deterministic_time = REFERENCE_UNITS
        solver.solve(model)

    def best_of(task) -> float:
        times = []
        for _ in range(REFERENCE_REPEATS):
            t0 = time.monotonic()
            task()
            times.append(time.monotonic() - t0)
        return round(min(times), 3)

    return {"python_s": best_of(python_task), "cpsat_s": best_of(cpsat_task)}


def reference_text(reference: dict) -> str:
    return (f"speed reference: {reference['python_s']:g} s of fixed Python work and {reference['cpsat_s']:g} s for "
            f"{REFERENCE_UNITS:g} CP-SAT work units on a fixed {REFERENCE_JOBS}x{REFERENCE_JOBS} job shop (one "
            f"worker), best of {REFERENCE_REPEATS} (a slower machine gives more)")


# Both measures must differ by more than this, the same way, before runs are called apart:
# three calls in a row here gave 0.312 to 0.463 s (Python) and 0.602 to 0.850 s (CP-SAT).
SPEED_APART = 1.5


def speed_apart(earlier: dict | None, now: dict | None) -> str | None:
    """What says a rerun ran at another speed than the run it joins, if it did."""
    if not earlier or not now:
        return None
    ratios = [now[key] / earlier[key] for key in ("python_s", "cpsat_s") if earlier.get(key) and now.get(key)]
    if len(ratios) < 2:
        return None
    slower, faster = min(ratios), 1 / max(ratios)
    if slower > SPEED_APART:
        return f"this machine ran the fixed work {slower:.2g} times slower than the earlier run's"
    if faster > SPEED_APART:
        return f"this machine ran the fixed work {faster:.2g} times faster than the earlier run's"
    return None
