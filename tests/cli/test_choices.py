"""Several placements, and the split or fused backward, in one solve or compare: one table,
each choice's rows, the fastest that fits as the answer."""

import json

import pytest

from zbsolve.cli import main
from zbsolve.formats.schedule_json import read_schedule
from zbsolve.schedule.validator import validate

SMALL = ["--stages", "4", "--microbatches", "4", "--comm", "0.1", "--memory", "1x"]
DETERMINISTIC = ["--workers", "1", "-q"]  # work-limited: the same search every run


def rows_of(out: str) -> dict[str, list[str]]:
    """Each row's cells after its name (value, bound, gap, ...), by name."""
    lines = out.splitlines()
    width = len(lines[2].split()[0])  # the rule under the header
    return {line[:width].strip(): line[width:].split() for line in lines[3:] if not line.startswith("answer")}


def test_auto_solves_every_placement_and_writes_the_fastest(capsys, tmp_path):
    target = tmp_path / "best.json"
    assert main(["solve", *SMALL, "--placement", "auto", "--time-limit", "0.5", *DETERMINISTIC,
                 "-o", str(target)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("P=4 M=4 placements single, interleaved:2, vshape, bidirectional, F=1")
    rows = rows_of(out)
    solved = {name[:-len(": solved")]: float(cells[0]) for name, cells in rows.items() if name.endswith(": solved")}
    # each proven optimal (value = bound): ZB-H1 meets the single chain's bound, the rest by search
    assert solved == {"single": 15.6, "interleaved:2": 14.5, "vshape": 14.4, "bidirectional": 13.5}
    assert all(rows[f"{p}: solved"][:2] == [f"{v:g}", f"{v:g}"] for p, v in solved.items())
    assert all(rows[f"{p}: solved"][10] == "optimal" for p in solved)
    for peer in ("single: 1f1b", "single: zb-h1", "interleaved:2: interleaved-zb", "vshape: zb-v"):
        assert peer in rows
    assert "note: bidirectional: dualpipe is not in the table" in err  # it needs M >= 2P
    best = min(solved.values())
    assert best < solved["single"]
    answer = out.splitlines()[-2]
    assert answer.startswith("answer: ") and f", {best:g} ms (" in answer
    written = read_schedule(target)
    validate(written)
    assert written.metrics.makespan == pytest.approx(best)
    assert answer.startswith(f"answer: {written.problem.placement}: solved")
    floor = min(float(rows[f"{p}: solved"][1]) for p in solved)
    assert f"can take less than {floor:g} ms (the least of their bounds)" in answer
    assert "share --time-limit" not in err  # -q


def test_a_list_solves_those_placements_only(capsys):
    assert main(["solve", *SMALL, "--placement", "single,vshape", "--time-limit", "0.5", "--workers", "1"]) == 0
    out, err = capsys.readouterr()
    names = list(rows_of(out))
    assert names[0] == "single: solved" and "vshape: solved" in names
    assert not any(n.startswith(("interleaved", "bidirectional")) for n in names)
    assert "2 choices (single, vshape) share --time-limit 0.5 work units" in err
    assert "answered single in" in err and "without a search" in err  # ZB-H1 meets the bound at 1x
    assert "solved vshape in" in err


@pytest.mark.parametrize("placement, says", [
    ("single,bidirectional", "placement bidirectional needs an even number of devices and microbatches"),
    ("single,,vshape", "a comma-separated list of them, or auto"),
    ("single,vee", "placement must be"),
])
def test_a_listed_placement_that_does_not_fit_is_refused_before_any_work(capsys, placement, says):
    assert main(["solve", "-p", "3", "-m", "5", "--placement", placement, "-q"]) == 2
    assert says in capsys.readouterr().err


def test_auto_leaves_out_what_does_not_fit_and_says_so(capsys, tmp_path):
    table = tmp_path / "t.json"
    assert main(["compare", "-p", "3", "-m", "5", "--placement", "auto", "--no-solve", "--table", str(table)]) == 0
    out, err = capsys.readouterr()
    assert "note: auto leaves bidirectional out: placement bidirectional needs an even number" in err
    assert "note: interleaved:2: interleaved is not in the table" in err
    names = [r["schedule"] for r in json.loads(table.read_text())]
    assert "single: 1f1b" in names and "vshape: zb-v" in names and "interleaved:2: interleaved-zb" in names
    assert not any("solved" in n or n.startswith("bidirectional") for n in names)
    assert out.splitlines()[-2].startswith("answer: ")


FUSED = ["--stages", "2", "--microbatches", "8", "--F", "6.07", "--B", "8.21", "--W", "6.67", "--memory", "1x"]


def fused_profile(tmp_path):
    path = tmp_path / "torch-like.json"
    path.write_text(json.dumps({"name": "torch-like", "source": "test", "memory_unit": "MB",
                                "costs": {"F": 6.07, "B": 8.21, "W": 6.67, "BW": 11.79, "activation": 8.4}}))
    return str(path)


def test_a_fused_backward_faster_than_b_plus_w_is_solved_beside_the_split_one(capsys, tmp_path):
    target = tmp_path / "plan.json"
    profile = fused_profile(tmp_path)
    assert main(["solve", "--profile", profile, *FUSED[:4], "--memory", "1x", "--time-limit", "2", "-q",
                 "-o", str(target)]) == 0
    out, err = capsys.readouterr()
    rows = rows_of(out)
    # 1F1B with the fused BW, (M + P - 1)(F + BW) = 9 x 17.86, is optimal; the split solve is 175.81.
    assert rows["single fused: solved"][:2] == ["160.74", "160.74"]
    assert rows["single: solved"][0] == "175.81"
    assert rows["single fused: 1f1b"][0] == "160.74"
    assert "answer: single fused: solved, 160.74 ms (optimal)" in out
    assert "needs split_backward" not in err  # the split twin's rows are there
    written = read_schedule(target)
    assert not written.problem.split_backward and written.metrics.makespan == pytest.approx(160.74)
    assert rows["single fused: solved"][8] == "1.0000x"  # against 1F1B as it runs: with the fused BW


def test_split_backward_keeps_to_the_split_solve(capsys, tmp_path):
    assert main(["solve", "--profile", fused_profile(tmp_path), *FUSED[:4], "--memory", "1x", "--split-backward",
                 "--time-limit", "2", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("P=2 M=8 placement single")
    assert "1F1B with the costs' own fused backward" in out  # the single-choice table says it beneath


def test_the_plot_draws_1f1b_as_it_runs_with_the_fused_backward(tmp_path):
    from zbsolve.baselines.reference import one_f_one_b_as_run
    from zbsolve.problem.placements import build_problem
    from zbsolve.problem.problem import StageCost

    problem = build_problem(2, 8, StageCost(6.07, 8.21, 6.67, 8.4, 2, fused=11.79))
    reference = one_f_one_b_as_run(problem)
    assert reference.name == "1f1b (fused BW)" and reference.metrics.makespan == pytest.approx(160.74)
    slower = build_problem(2, 8, StageCost(6.07, 8.21, 6.67, 8.4, 2, fused=15.0))
    assert one_f_one_b_as_run(slower).name == "1f1b"


def test_auto_with_a_torch_csv_leaves_out_the_placement_torch_cannot_run(capsys, tmp_path):
    csv = tmp_path / "plan.csv"
    assert main(["solve", *SMALL, "--placement", "auto", "--time-limit", "0.5", *DETERMINISTIC,
                 "--torch-csv", str(csv)]) == 0
    out, err = capsys.readouterr()
    assert "auto leaves bidirectional out: torch pipelining runs one pipe of stages" in err
    assert "placements single, interleaved:2, vshape, F=1" in out.splitlines()[0]
    assert "answer: vshape: solved, 14.4 ms (optimal)" in out  # the fastest of the three torch can run
    assert len(csv.read_text().splitlines()) == 4
