"""What ran against the plan (zbsolve/runtime/measured.py), on hand-made timelines: no torch."""

import pytest

from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.runtime.measured import gaps


def test_waits_are_told_from_the_runtime_s_own_gaps():
    problem = build_problem(2, 2, StageCost(1, 0.5, 0.5), split_backward=False)
    ranks = [
        [("F", 0, 0, 0.0, 1.0), ("F", 0, 1, 1.1, 2.1), ("BW", 0, 0, 3.5, 4.5), ("BW", 0, 1, 5.6, 6.6)],
        [("F", 1, 0, 1.3, 2.3), ("BW", 1, 0, 2.4, 3.4), ("F", 1, 1, 3.5, 4.5), ("BW", 1, 1, 4.6, 5.4)],
    ]
    waits, overheads = gaps(problem, ranks)
    # rank 0's backwards wait for rank 1's (ended 3.4 and 5.4, after rank 0's previous ops);
    # rank 1's first F waits for rank 0's F0 (ended 1.0)
    assert waits == pytest.approx([0.1, 0.2, 0.3])
    # rank 0's F1 has no input; rank 1's F1 found F1 of rank 0 there (2.1) when its BW0 ended
    # (3.4); the last stage's backwards have no cross-rank input: the gaps are the runtime's
    assert overheads == pytest.approx([0.1, 0.1, 0.1, 0.1])


def test_a_run_s_records_become_the_measured_step_and_its_verdict():
    from zbsolve.baselines import run_baseline
    from zbsolve.runtime.measured import measured_run, verdict

    # 1F1B on 2 ranks, run as planned but every op 0.1 ms late (the runtime's gap), in s;
    # on CUDA each step's record carries the rank's allocator peak in bytes
    problem = build_problem(2, 2, StageCost(1, 0.5, 0.5, 1, 0.5), split_backward=False, memory_unit_name="MB",
                            op_overhead=0.1)
    plan = run_baseline("1f1b", problem)
    ranks = []
    for rank, ops in enumerate(plan.devices):
        records = [(t.op.kind, t.op.stage, t.op.microbatch, (t.start + 0.1) / 1e3, t.end / 1e3,
                    1e6 * (t.op.kind == "F")) for t in ops]
        ranks.append({"rank": rank, "records": records + [("step", 0, -1, 0.0, plan.metrics.makespan / 1e3,
                                                             [3e6, 2e6][rank])]})
    run = measured_run(plan, ranks)
    lines = verdict(run)
    assert run.schedule.metrics.makespan == pytest.approx(plan.metrics.makespan)
    assert lines[0].startswith(f"step: planned {plan.metrics.makespan:g} ms, measured median")
    assert "F: measured 1.000 x the plan's time" in lines[1] and "BW: measured 1.000 x" in lines[2]
    assert "allocator peak per rank: 3, 2 MB above the step's start" in "\n".join(lines)
    assert run.peaks_bytes == [2e6, 1e6]  # 1F1B: rank 0 holds two microbatches' F, rank 1 one
    assert lines[-1] == "plan and run agree within 10%"
