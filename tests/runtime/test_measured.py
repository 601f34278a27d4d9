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


def _measured_file(tmp_path, edit):
    """A measured schedule written to a file (a run of 1F1B as planned), edited as a hand would."""
    import json

    from zbsolve.baselines import run_baseline
    from zbsolve.formats.schedule_json import write_schedule
    from zbsolve.runtime.measured import measured_run

    problem = build_problem(2, 2, StageCost(1, 0.5, 0.5, 1, 0.5), split_backward=False, memory_unit_name="MB")
    plan = run_baseline("1f1b", problem)
    ranks = [{"rank": rank, "records": [(t.op.kind, t.op.stage, t.op.microbatch, t.start / 1e3, t.end / 1e3, 0.0)
                                        for t in ops] + [("step", 0, -1, 0.0, plan.metrics.makespan / 1e3, 0.0)]}
             for rank, ops in enumerate(plan.devices)]
    path = tmp_path / "measured.json"
    write_schedule(measured_run(plan, ranks).schedule, path)
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document))
    return path


def _every_op(document, change):
    for device in document["devices"]:
        for op in device["ops"]:
            change(op)


@pytest.mark.parametrize("edit, says", [
    (lambda d: d["devices"][0]["ops"][0].update(end=-0.5), "F pipe 0 stage 0 microbatch 0 on device 0 [0, -0.5]: "
                                                           "ends before it starts"),
    (lambda d: _every_op(d, lambda o: o.update(start=o["start"] - 100, end=o["end"] - 100)),
     "starts before time 0, the step's start"),
    (lambda d: d["metrics"].update(makespan=99.0), "reported makespan 99.0 but the schedule gives 6.0"),
])
def test_a_measured_file_is_held_to_the_schedule_file_s_rules(capsys, tmp_path, edit, says):
    from zbsolve.cli import main

    path = _measured_file(tmp_path, edit)
    assert main(["validate", str(path)]) == 1
    assert says in capsys.readouterr().err
    assert main(["profile", "--from-run", str(path), "-o", str(tmp_path / "c.json")]) == 1
    assert says in capsys.readouterr().err and not (tmp_path / "c.json").exists()


def test_a_run_that_timed_every_op_at_0_calibrates_nothing(capsys, tmp_path):
    from zbsolve.cli import main

    def zero(document):
        _every_op(document, lambda o: o.update(start=0.0, end=0.0))
        document["metrics"].update(makespan=0.0, bubble_rate=0.0, span=0.0, span_bubble_rate=0.0, busy=[0.0, 0.0])

    path = _measured_file(tmp_path, zero)
    assert main(["validate", str(path)]) == 0  # a run may record nothing; it cannot calibrate
    capsys.readouterr()
    assert main(["profile", "--from-run", str(path), "-o", str(tmp_path / "c.json")]) == 2
    assert "the run timed every op at 0: there is nothing to calibrate from" in capsys.readouterr().err
