"""benchmarks/run.py: the quick suite end to end, instance selection, the speed reference."""

import json
import subprocess
import sys

from helpers import REPO_ROOT

ROOT = REPO_ROOT


def test_quick_suite_writes_results(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--suite", "quick", "--time-limit", "3",
         "--workers", "1", "--no-scaling", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    rows = results["instances"]
    assert len(rows) == 5 and not [r for r in rows if "error" in r]
    for r in rows:
        assert r["not_worse_than_hand_made"]
        assert r["bound"] <= r["solved"] + 1e-9 and r["peak_rss_mb"] > 0
    uniform = next(r for r in rows if r["instance"] == "uniform P=4 M=8 1x")
    assert (uniform["solved"], uniform["status"], uniform["ops"]) == (27, "optimal", 96)
    table = (tmp_path / "results.md").read_text()
    assert "| uniform P=4 M=8 1x | 96 |" in table
    # Every generator beside the solve, and none that fits faster than it.
    assert uniform["peers"]["zb-h1"] == {"value": 27, "fits": True} and not uniform["peers"]["gpipe"]["fits"]
    assert "| uniform P=4 M=8 1x | 27 | 27 | none | zb-h1 27, zb-h2 27 (over), zb-auto 27," in table
    assert "- A peer that fits is faster: none." in table
    # The machine's speed then, from fixed work, beside its description.
    reference = results["settings"]["speed_reference"]
    assert set(reference) == {"python_s", "cpsat_s"} and min(reference.values()) > 0
    assert f"; speed reference: {reference['python_s']:g} s of fixed Python work" in table
    # A rerun of some rows says when and at what speed it ran, beside the first run's, and
    # warns when that speed is far from the first run's (whose figures are made 100 times smaller here).
    results["settings"]["speed_reference"] = reference = {key: value / 100 for key, value in reference.items()}
    (tmp_path / "results.json").write_text(json.dumps(results))
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--suite", "quick", "--time-limit", "3",
         "--workers", "1", "--only", "uniform P=4 M=8 1x", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "--only: warning: this machine ran the fixed work" in done.stderr and "times slower" in done.stderr
    rerun = json.loads((tmp_path / "results.json").read_text())["settings"]
    assert rerun["speed_reference"] == reference and len(rerun["rerun"]) == 1
    assert rerun["rerun"][0].endswith(" best of 3 (a slower machine gives more)): uniform P=4 M=8 1x")
    assert f"; rerun {rerun['rerun'][0]}." in (tmp_path / "results.md").read_text()


def test_only_picks_the_instance_named_exactly_else_every_name_that_contains_the_text(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.instances import matching, standard

    instances = standard()
    names = lambda text: [instances[i].name for i in matching(instances, text)]  # noqa: E731
    # The 1.125x row's name contains the unlimited one's; the exact name picks that one alone.
    assert names("zb-1.5b fb_overlap 36.756") == ["zb-1.5b fb_overlap 36.756"]
    assert names("fb_overlap 36.756") == ["zb-1.5b fb_overlap 36.756", "zb-1.5b fb_overlap 36.756 1.125x"]
    assert names("zb-1.5b 1x span") == ["zb-1.5b 1x span"]
    assert len(names("span")) == 32 and "zb-1.5b 1x makespan" in names("span")  # every makespan too
    assert names("no such") == []


def test_runs_are_called_apart_only_when_both_speed_measures_differ_the_same_way(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.speed import speed_apart

    earlier = {"python_s": 0.4, "cpsat_s": 0.6}
    assert speed_apart(earlier, {"python_s": 0.9, "cpsat_s": 1.3}) == (
        "this machine ran the fixed work 2.2 times slower than the earlier run's")
    assert speed_apart(earlier, {"python_s": 0.2, "cpsat_s": 0.3}) == (
        "this machine ran the fixed work 2 times faster than the earlier run's")
    assert speed_apart(earlier, {"python_s": 0.9, "cpsat_s": 0.7}) is None  # one measure alone: noise
    assert speed_apart(earlier, {"python_s": 0.9, "cpsat_s": 0.2}) is None  # opposite ways
    assert speed_apart(None, earlier) is None and speed_apart(earlier, None) is None  # older result files
