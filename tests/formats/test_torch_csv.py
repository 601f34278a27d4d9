"""Torch CSV of any one-pipe schedule, through torch's own checks: the ones its runtime runs
when it loads the file (`_validate_schedule`, then `_add_send_recv`) and its dry run of the
send/recv order (`_simulate_comms_compute`), which flags a deadlock."""

import csv
import io

import pytest
from helpers import hand_built_problems, placed_problems
from hypothesis import given, settings
from hypothesis import strategies as st

from zbsolve.baselines import applicable, run_baseline
from zbsolve.formats.torch_csv import torch_csv
from zbsolve.solvers import solve

schedules = pytest.importorskip("torch.distributed.pipelining.schedules")

# by member, not value: the values are letters in torch 2.13 and numbers in 2.10
TORCH_KIND = {schedules.F: "F", schedules.I: "B", schedules.W: "W", schedules.B: "BW"}


def check_with_torch(schedule) -> None:
    rows = list(csv.reader(io.StringIO(torch_csv(schedule))))
    actions = {rank: [schedules._Action.from_str(a) for a in row] for rank, row in enumerate(rows)}
    stages = schedule.problem.pipes[0].stages
    rank_of = schedules._validate_schedule(actions, schedule.problem.devices, len(stages),
                                           schedule.problem.microbatches)
    assert rank_of == {k: stage.device for k, stage in enumerate(stages)}
    for rank, ops in enumerate(schedule.devices):  # each rank's ops, pairs taken apart, in order
        parts = [part for action in actions[rank] for part in action.sub_actions or (action,)]
        named = [(p.stage_index, TORCH_KIND[p.computation_type], p.microbatch_index) for p in parts]
        assert sorted(named) == sorted((t.op.stage, t.op.kind, t.op.microbatch) for t in ops)
    with_comms = schedules._add_send_recv(actions, lambda k: rank_of[k], len(stages))
    # the dry run knows no F&B pair; the runtime runs a pair's two actions one after the other
    flat = {rank: [p for a in acts for p in a.sub_actions or (a,)] for rank, acts in with_comms.items()}
    schedules._simulate_comms_compute(flat, lambda k: rank_of[k], len(stages))


@settings(max_examples=30, deadline=None)
@given(st.one_of(placed_problems(), hand_built_problems()).filter(lambda p: len(p.pipes) == 1))
def test_every_one_pipe_schedule_passes_torchs_checks(problem):
    for name in applicable(problem):
        schedule = run_baseline(name, problem)
        if not schedule.over_memory_limit():
            check_with_torch(schedule)
    check_with_torch(solve(problem, "list", time_limit=5, workers=1))



def test_an_offloading_plan_is_written_with_its_forwards_as_f_and_its_copies_beside(tmp_path):
    import json

    from helpers import uniform

    from zbsolve.formats.torch_csv import write_torch_csv

    schedule = run_baseline("1f1b-o", uniform(2, 3, offload=1.0, levers=("offload",)))
    plain = run_baseline("1f1b", uniform(2, 3))
    path = tmp_path / "plan.csv"
    note = write_torch_csv(schedule, path)
    assert path.read_text() == torch_csv(plain)  # the same actions: FO as F, no copies
    beside = json.loads((tmp_path / "plan.csv.offload.json").read_text())
    assert note and "plan.csv.offload.json" in note and "host copies" in note
    assert beside["offload"][0] == {"stage": 0, "microbatch": 0, "planned_to_host": 1.0, "planned_back": 3.0}
    assert len(beside["offload"]) == 3 and not (tmp_path / "plan.csv.recompute.json").exists()
