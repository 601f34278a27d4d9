"""Reading a compute_only CSV (torch's, or zbsolve's own export) onto a problem: the same
schedule back, and every mismatch refused naming the row and action."""

import re

import pytest
from helpers import uniform

from zbsolve.baselines import applicable, run_baseline
from zbsolve.errors import ScheduleFileError
from zbsolve.formats.torch_csv import read_torch_csv, write_torch_csv
from zbsolve.schedule.validator import validate


@pytest.mark.parametrize("placement, memory", [("single", "1x"), ("interleaved:2", "1x"), ("vshape", "1x")])
def test_every_exported_baseline_reads_back_as_the_same_schedule(tmp_path, placement, memory):
    problem = uniform(4, 8, F=1, B=1.2, W=0.7, comm=0.1, placement=placement, memory=memory)
    for name in applicable(problem):
        schedule = run_baseline(name, problem)
        path = tmp_path / f"{name}.csv"
        write_torch_csv(schedule, path)
        read = read_torch_csv(path, problem)
        if not read.over_memory_limit():  # GPipe and others are timed, and flagged, above it
            validate(read)
        assert read.order() == schedule.order() and read.metrics == schedule.metrics


def _csv(tmp_path, rows):
    path = tmp_path / "plan.csv"
    path.write_text("".join(",".join(row) + "\n" for row in rows))
    return path


def test_a_csv_that_does_not_match_the_problem_is_refused_naming_the_row_and_action(tmp_path):
    problem = uniform(2, 2)
    good = [["0F0", "0F1", "0I0", "0W0", "0I1", "0W1"], ["1F0", "1I0", "1F1", "1I1", "1W0", "1W1"]]
    validate(read_torch_csv(_csv(tmp_path, good), problem))
    cases = [
        ([good[0]], "1 rows, one per rank expected (2)"),
        ([good[0], ["2F0", *good[1][1:]]], "row 2, action '2F0': stage 2, but the problem has stages 0-1"),
        ([good[1], good[0]], "row 1, action '1F0': stage 1 runs on rank 1"),
        ([good[0] + ["0F1"], good[1]], "row 1, action '0F1': F pipe 0 stage 0 microbatch 1 is already in row 1"),
        ([good[0][1:], good[1]], "row 1 lacks 0F0"),
        ([[t for t in good[0] if t != "0W1"], good[1]], "row 1 lacks 0W1"),
        ([good[0], ["1F0", "1SEND_B0", *good[1][1:]]], "row 2, action '1SEND_B0': not a compute action"),
        ([good[0], ["1F0", "1F2", *good[1][1:]]],
         "row 2, action '1F2': microbatch 2, but the problem has microbatches 0-1"),
        ([good[0], ["1I0", "1F0", *good[1][2:]]], "cannot run"),
    ]
    for rows, said in cases:
        with pytest.raises(ScheduleFileError, match=re.escape(said)):
            read_torch_csv(_csv(tmp_path, rows), problem)
    with pytest.raises(ScheduleFileError, match="row 1, action '0I0': a split backward"):
        read_torch_csv(_csv(tmp_path, good), uniform(2, 2, split_backward=False))


def test_torchs_own_interleaved_zero_bubble_csv_is_read_and_timed(tmp_path):
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    generator = object.__new__(schedules.ScheduleInterleavedZeroBubble)
    generator.pp_group_size, generator.n_local_stages, generator._n_microbatches = 4, 2, 8
    generator._stages, generator.number_of_rounds, generator.microbatches_per_round = [None, None], 2, 4
    rows = [[str(a) for a in generator._calculate_single_rank_operations(r) if a is not None] for r in range(4)]
    problem = uniform(4, 8, F=1, B=1.2, W=0.7, comm=0.1, placement="interleaved:2", memory="1x")
    read = read_torch_csv(_csv(tmp_path, rows), problem)
    validate(read)
    assert read.metrics == run_baseline("interleaved-zb", problem).metrics


GOOD = [["0F0", "0F1", "0I0", "0W0", "0I1", "0W1"], ["1F0", "1I0", "1F1", "1I1", "1W0", "1W1"]]


def test_a_byte_order_mark_is_skipped(tmp_path):
    path = tmp_path / "plan.csv"
    path.write_bytes(b"\xef\xbb\xbf" + "".join(",".join(row) + "\n" for row in GOOD).encode())
    schedule = read_torch_csv(path, uniform(2, 2))
    validate(schedule)
    assert schedule.metrics.makespan == read_torch_csv(_csv(tmp_path, GOOD), uniform(2, 2)).metrics.makespan


@pytest.mark.parametrize("action, says", [
    ("1" * 5000 + "F0", "a stage or microbatch number of over 9 digits"),
    ("0F" + "9" * 10, "a stage or microbatch number of over 9 digits"),
    ("\u0660F0", "not a compute action"),  # ARABIC-INDIC DIGIT ZERO
    ("0F\u0661", "not a compute action"),
    ("(0F\u0660;0I0)OVERLAP_F_B", "not a compute action"),
])
def test_numbers_are_ascii_digits_of_sane_length(tmp_path, action, says):
    rows = [[action, *GOOD[0][1:]], GOOD[1]]
    with pytest.raises(ScheduleFileError, match=re.escape(says)):
        read_torch_csv(_csv(tmp_path, rows), uniform(2, 2))
