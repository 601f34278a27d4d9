"""What a runtime adds to a stack's costs: the pipe's first stage, whose input needs no
gradient (torch skips B there), and a per-op overhead that does not shrink with a chunk."""

import json

import jsonschema
import pytest

from zbsolve.baselines import run_baseline
from zbsolve.baselines.reference import one_f_one_b_reference
from zbsolve.cli import main
from zbsolve.errors import ProblemError, ProfileError
from zbsolve.formats.schedule_json import json_schema, read_schedule, write_schedule
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.problem.profiles import profile_from_dict
from zbsolve.schedule.validator import validate

RANK = StageCost(4, 4, 2, 2, 1, fused=5)
FIRST = {"B": 0.0, "W": 5.0, "fused": 5.0}


def test_the_first_stage_record_lands_on_each_pipe_s_first_stage_wherever_it_lies():
    single = build_problem(3, 3, RANK, first_stage=FIRST).stage_costs
    assert single[0] == StageCost(4, 0, 5, 2, 1, fused=5) and single[1] == single[2] == RANK
    # V: stage 0 and stage 5 share rank 0; only stage 0 is the first, at half the layers
    vshape = build_problem(3, 4, RANK, placement="vshape", first_stage=FIRST)
    assert [s.device for s in vshape.pipes[0].stages] == [0, 1, 2, 2, 1, 0]
    assert vshape.stage_costs[0] == StageCost(2, 0, 2.5, 1, 0.5, fused=2.5)
    assert all(c == RANK.scaled(0.5) for c in vshape.stage_costs[1:])
    # bidirectional: each pipe's first stage indexes record 0 (device 0 down, device 3 up)
    both = build_problem(4, 4, RANK, placement="bidirectional", first_stage=FIRST)
    assert [pipe.stages[0].cost for pipe in both.pipes] == [0, 0] and both.stage_costs[0].B == 0
    with pytest.raises(ProblemError, match="the first stage.F must be > 0"):
        build_problem(2, 2, RANK, first_stage={"F": 0.0})


def test_the_overhead_is_added_per_op_after_a_chunk_takes_its_share():
    problem = build_problem(2, 2, RANK, placement="interleaved:2", op_overhead=0.5)
    chunk = problem.stage_costs[0]
    assert (chunk.F, chunk.B, chunk.W, chunk.fused) == (2.5, 2.5, 1.5, 3.0)  # one overhead for a fused BW
    assert (chunk.activation, chunk.residual) == (1, 0.5) and problem.op_overhead == 0.5
    plain = build_problem(2, 2, StageCost(1, 1, 1), op_overhead=0.25).stage_costs[0]
    assert plain.fused == 2.25 and plain.backward_time(True) == 2.5  # split: two ops, two overheads
    for bad in (-1.0, float("nan")):
        with pytest.raises(ProblemError, match="per-op overhead"):
            build_problem(2, 2, RANK, op_overhead=bad)


def test_the_1f1b_reference_of_a_chunked_plan_counts_one_overhead_per_rank_stage_op():
    # the V's rank-stages as one chain: F 4 + 0.5 each, as build_problem makes the single chain
    vshape = build_problem(2, 4, RANK, placement="vshape", op_overhead=0.5)
    single = build_problem(2, 4, RANK, op_overhead=0.5)
    reference = one_f_one_b_reference(vshape)
    direct = run_baseline("1f1b", single)
    assert reference.problem.stage_costs == single.stage_costs
    assert reference.metrics.makespan == pytest.approx(direct.metrics.makespan)


def test_profiles_and_schedule_files_carry_them(tmp_path):
    profile = profile_from_dict({"name": "p", "source": "test", "costs": {"F": 4, "B": 4, "W": 2, "BW": 5},
                                 "first_stage": {"B": 0, "W": 5, "BW": 5}, "op_overhead": 0.25})
    assert profile.first_stage == FIRST and profile.op_overhead == 0.25
    problem = build_problem(2, 2, profile.rank_costs(2), first_stage=profile.first_stage,
                            op_overhead=profile.op_overhead)
    schedule = run_baseline("1f1b", problem)
    validate(schedule)
    write_schedule(schedule, tmp_path / "s.json")
    written = json.loads((tmp_path / "s.json").read_text())
    assert written["problem"]["op_overhead"] == 0.25
    jsonschema.validate(written, json_schema())
    assert read_schedule(tmp_path / "s.json").problem.op_overhead == 0.25
    for bad, message in (({"first_stage": {"stage": 0, "B": 0}}, "takes no 'stage'"),
                         ({"first_stage": {"X": 1}}, "unknown key 'X'"),
                         ({"first_stage": {"B": -1}}, r"first_stage.B must be >= 0"),
                         ({"op_overhead": -0.1}, "op_overhead must be >= 0"),
                         ({"op_overhead": "1"}, "op_overhead must be a finite number")):
        with pytest.raises(ProfileError, match=message):
            profile_from_dict({"name": "p", "source": "test", "costs": {"F": 1, "B": 1, "W": 1}} | bad)


def test_solve_reads_them_from_a_profile_and_a_flag_for_b_drops_the_first_stage(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"name": "p", "source": "test", "time_unit": "ms",
                                "costs": {"F": 4, "B": 4, "W": 2, "BW": 5},
                                "first_stage": {"B": 0, "W": 5, "BW": 5}, "op_overhead": 0.5}))
    out = tmp_path / "s.json"
    assert main(["baseline", "1f1b", "--profile", str(path), "--stages", "2", "--microbatches", "2",
                 "-o", str(out)]) == 0
    costs = read_schedule(out).problem.stage_costs
    assert (costs[0].B, costs[0].W, costs[1].B) == (0.5, 5.5, 4.5)
    assert main(["baseline", "1f1b", "--profile", str(path), "--stages", "2", "--microbatches", "2",
                 "--B", "3", "-o", str(out)]) == 0
    costs = read_schedule(out).problem.stage_costs
    assert (costs[0].B, costs[1].B) == (3.5, 3.5)
    capsys.readouterr()
