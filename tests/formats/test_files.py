"""Schedule files, the shipped JSON Schema, torch CSV and profiles."""

import json

import jsonschema
import pytest
from helpers import REPO_ROOT, mutated, uniform

from zbsolve.baselines import run_baseline
from zbsolve.errors import ExportError, ProblemError, ProfileError, ScheduleFileError
from zbsolve.formats.chrome_trace import chrome_trace
from zbsolve.formats.schedule_json import dumps, json_schema, read_schedule, write_schedule
from zbsolve.formats.torch_csv import torch_csv
from zbsolve.problem.profiles import load_profile, profile_from_dict

MODELS = sorted(REPO_ROOT.joinpath("models").glob("*.json"))


def test_written_files_match_the_shipped_schema(tmp_path):
    for name in ("1f1b", "zb-h2"):
        path = tmp_path / f"{name}.json"
        write_schedule(run_baseline(name, uniform(3, 5, comm=0.25, memory="2x")), path)
        jsonschema.validate(json.loads(path.read_text()), json_schema())
        assert read_schedule(path).name == name


def test_reader_refuses_future_versions_and_other_files(tmp_path):
    data = json.loads(dumps(run_baseline("1f1b", uniform(2, 2))))
    data["version"] = 2
    (tmp_path / "future.json").write_text(json.dumps(data))
    with pytest.raises(ScheduleFileError, match="version 2 is not supported"):
        read_schedule(tmp_path / "future.json")
    (tmp_path / "other.json").write_text('{"format": "something"}')
    with pytest.raises(ScheduleFileError, match="not a zbsolve schedule"):
        read_schedule(tmp_path / "other.json")
    text = dumps(run_baseline("1f1b", uniform(2, 2)))
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    with pytest.raises(ScheduleFileError, match="truncated"):
        read_schedule(tmp_path / "cut.json")
    with pytest.raises(ScheduleFileError, match="no such file"):
        read_schedule(tmp_path / "absent.json")


def test_reader_names_a_missing_key(tmp_path):
    data = json.loads(dumps(run_baseline("1f1b", uniform(2, 2))))
    del data["devices"][1]["ops"][0]["start"]
    (tmp_path / "f.json").write_text(json.dumps(data))
    with pytest.raises(ScheduleFileError, match=r"missing key devices\[1\].ops\[0\].start"):
        read_schedule(tmp_path / "f.json")


SECOND_STAGE = ("pipes", 0, "stages", 1)


@pytest.mark.parametrize("path, value, message", [
    (("stage_costs",), [], "stage_costs must hold at least one cost record"),
    (("pipes",), [], "pipes must hold at least one pipe"),
    (("pipes", 0, "stages"), [], r"pipes\[0\].stages must not be empty"),
    ((*SECOND_STAGE, "device"), 2, r"pipes\[0\].stages\[1\].device must be in 0..1, got 2"),
    ((*SECOND_STAGE, "cost"), 5, r"pipes\[0\].stages\[1\].cost must index stage_costs \(0..1\), got 5"),
    (("pipes", 0, "microbatches"), [0, 0], "pipes' microbatches must assign each id 0..1 to exactly one"),
    ((*SECOND_STAGE, "device"), 0, "every device must hold a stage; device 1 holds none"),
    (("memory_limit",), [4], r"memory_limit must give one value per device \(2\), got 1"),
    (("memory_limit",), [4, 0], r"memory_limit\[1\] must be > 0"),
    (("objective",), "latency", "objective must be one of"),
    (("time_unit",), "m\ns", "time_unit must be a short printable name"),
])
def test_a_hand_edited_problem_is_refused_by_name(tmp_path, path, value, message):
    data = json.loads(dumps(run_baseline("1f1b", uniform(2, 2))))
    data["problem"] = mutated(data["problem"], path, value, delete=False)
    (tmp_path / "f.json").write_text(json.dumps(data))
    with pytest.raises(ScheduleFileError, match=f"f.json: problem: {message}"):
        read_schedule(tmp_path / "f.json")


def test_numbers_too_large_for_a_float_are_refused_by_name(tmp_path):
    # JSON integers have no size limit; float() of one with 400 digits raises OverflowError.
    huge = "1" + "0" * 400
    text = dumps(run_baseline("1f1b", uniform(2, 2)))
    (tmp_path / "f.json").write_text(text.replace('"start": 0.0', f'"start": {huge}', 1))
    with pytest.raises(ScheduleFileError, match=r"devices\[0\].ops\[0\].start must be finite"):
        read_schedule(tmp_path / "f.json")
    base = {"name": "t", "source": "a test profile", "costs": {"F": 1, "B": 1, "W": 1}}
    with pytest.raises(ProfileError, match="costs.F must be a finite number"):
        profile_from_dict({**base, "costs": {"F": 10 ** 400, "B": 1, "W": 1}})
    with pytest.raises(ProblemError, match="memory must be a finite amount"):
        uniform(2, 2, memory=10 ** 400)  # a profile's "memory" as a bare number


def test_profile_overrides_must_be_a_list():
    base = {"name": "t", "source": "a test profile", "costs": {"F": 1, "B": 1, "W": 1}}
    for value in (3, None, {"stage": 0}):  # iterating them raised TypeError
        with pytest.raises(ProfileError, match="'overrides' must be a list"):
            profile_from_dict({**base, "overrides": value})


def test_a_file_claiming_absurd_counts_is_refused_without_building_them(tmp_path):
    data = json.loads(dumps(run_baseline("1f1b", uniform(2, 2))))
    for key, said in (("microbatches", "assign each id"), ("devices", "device 2 holds none")):
        changed = json.loads(json.dumps(data))
        changed["problem"][key] = 10 ** 30  # building range() of it exhausted memory
        (tmp_path / "f.json").write_text(json.dumps(changed))
        with pytest.raises(ScheduleFileError, match=said):
            read_schedule(tmp_path / "f.json")


def test_torch_csv_rows_follow_the_order():
    text = torch_csv(run_baseline("zb-h1", uniform(2, 2)))
    assert text == "0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,1F1,1I1,1W0,1W1\n"
    assert torch_csv(run_baseline("1f1b", uniform(2, 2))).splitlines()[1] == "1F0,1B0,1F1,1B1"


def test_torch_csv_refuses_two_pipes():
    from zbsolve.schedule.simulator import simulate

    problem = uniform(2, 2, placement="bidirectional")
    from zbsolve.problem.op_graph import Op

    orders = [[Op("F", 0, 0, 0), Op("F", 1, 1, 1), Op("BW", 1, 1, 1), Op("BW", 0, 0, 0)],
              [Op("F", 1, 0, 1), Op("F", 0, 1, 0), Op("BW", 0, 1, 0), Op("BW", 1, 0, 1)]]
    with pytest.raises(ExportError, match="2 pipes"):
        torch_csv(simulate(problem, orders))


def test_chrome_trace_has_one_event_per_op():
    s = run_baseline("zb-h1", uniform(2, 3))
    events = [e for e in chrome_trace(s)["traceEvents"] if e["ph"] == "X"]
    assert len(events) == 2 * 3 * 3
    assert events[0]["args"] == {"kind": "F", "pipe": 0, "stage": 0, "microbatch": 0, "overlap": None}
    assert events[0]["ts"] == 0 and events[0]["dur"] == 1000.0  # ms -> µs


def test_chrome_trace_times_carry_no_float_noise():
    # 1.5B's per-stage times; the pair lasts 36.756 ms, which became 36755.99999999997 µs.
    s = run_baseline("dualpipe", uniform(4, 8, 18.522, 18.086, 9.337, 3.3997, 1.2457, comm=0.601,
                                         placement="bidirectional", fb_overlap=36.756))
    events = [e for e in chrome_trace(s)["traceEvents"] if e["ph"] == "X"]
    assert {e["dur"] for e in events} == {18522.0, 18086.0, 9337.0, 27423.0, 36756.0}  # F, B, W, BW, pair
    assert all(e["ts"] * 1000 == int(e["ts"] * 1000) for e in events)  # whole nanoseconds


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_shipped_profiles_load_and_carry_a_source(path):
    profile = load_profile(path)
    assert len(profile.source) > 40
    costs = profile.rank_costs(profile.devices or 8)
    assert all(c.residual <= c.activation for c in costs)


def test_zero_bubble_profile_values():
    p = load_profile(REPO_ROOT / "models" / "zb-1.5b.json")
    c = p.rank_costs(8)[0]
    assert (c.F, c.B, c.W, p.comm) == (18.522, 18.086, 9.337, 0.601)
    assert 0.36 < c.residual / c.activation < 0.44


def test_overrides_and_unknown_keys():
    base = {"name": "t", "source": "a test profile", "costs": {"F": 1, "B": 1, "W": 1}}
    p = profile_from_dict({**base, "overrides": [{"stage": -1, "F": 3}]})
    assert [c.F for c in p.rank_costs(3)] == [1, 1, 3]
    with pytest.raises(ProfileError, match="unknown key 'comms'"):
        profile_from_dict({**base, "comms": 1})
    with pytest.raises(ProfileError, match=r"costs has unknown key 'f'"):
        profile_from_dict({**base, "costs": {"F": 1, "B": 1, "W": 1, "f": 2}})
    with pytest.raises(ProfileError, match="missing key 'W'"):
        profile_from_dict({**base, "costs": {"F": 1, "B": 1}})
    with pytest.raises(ProfileError, match="outside"):
        profile_from_dict({**base, "overrides": [{"stage": 5, "F": 3}]}).rank_costs(3)


def test_written_files_get_the_usual_permissions(tmp_path):
    import os

    from zbsolve.formats.atomic_files import write_atomic

    mask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "a.json", "{}")
        write_atomic(tmp_path / "b.png", b"\x89PNG")
    finally:
        os.umask(mask)
    assert [(tmp_path / n).stat().st_mode & 0o777 for n in ("a.json", "b.png")] == [0o644, 0o644]
    assert (tmp_path / "b.png").read_bytes() == b"\x89PNG"


def test_chrome_trace_names_the_stage_and_both_threads_of_a_pair():
    s = run_baseline("dualpipe", uniform(4, 8, placement="bidirectional", fb_overlap=2.4))
    events = chrome_trace(s)["traceEvents"]
    ops = [e for e in events if e["ph"] == "X"]
    assert ops[0]["name"] == "F pipe 0 stage 0 mb 0"
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert all((e["pid"], e["tid"]) in threads for e in ops)  # every op sits on a named thread
    assert threads[(0, 1)] == "paired backward"
    single = chrome_trace(run_baseline("zb-h1", uniform(2, 3)))["traceEvents"]
    assert [e["name"] for e in single if e["ph"] == "X"][:2] == ["F stage 0 mb 0", "F stage 0 mb 1"]


def test_a_recomputed_schedule_round_trips_with_its_lever_and_costs(tmp_path):
    from dataclasses import replace

    problem = uniform(3, 6, comm=0.25, memory="1x", levers=("recompute",))
    problem = replace(problem, stage_costs=tuple(replace(c, checkpoint=0.125, recompute=0.75)
                                                 for c in problem.stage_costs))
    schedule = run_baseline("1f1b-r", problem)
    path = tmp_path / "r.json"
    write_schedule(schedule, path)
    data = json.loads(path.read_text())
    jsonschema.validate(data, json_schema())
    assert data["problem"]["levers"] == ["recompute"]
    assert data["problem"]["stage_costs"][0] | {} == {"F": 1.0, "B": 1.0, "W": 1.0, "activation": 1.0,
                                                      "residual": 0.5, "recompute": 0.75, "checkpoint": 0.125}
    again = read_schedule(path)
    assert again.problem == problem and again.devices == schedule.devices
    data["problem"]["levers"] = ["swap"]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(ScheduleFileError, match="unknown lever .swap."):
        read_schedule(tmp_path / "bad.json")


def test_an_offloaded_schedule_round_trips_with_its_copies_and_their_channels_in_the_trace(tmp_path):
    from zbsolve.formats.chrome_trace import chrome_trace

    problem = uniform(2, 3, memory="1x", offload=0.75, levers=("offload",))
    schedule = run_baseline("1f1b-o", problem)
    path = tmp_path / "o.json"
    write_schedule(schedule, path)
    data = json.loads(path.read_text())
    jsonschema.validate(data, json_schema())
    assert data["problem"]["levers"] == ["offload"] and data["problem"]["stage_costs"][0]["offload"] == 0.75
    assert {o["kind"] for o in data["devices"][0]["ops"]} == {"FO", "O", "L", "BW"}
    again = read_schedule(path)
    assert again.problem == problem and again.devices == schedule.devices
    events = chrome_trace(schedule)["traceEvents"]
    threads = {e["args"]["name"] for e in events if e["name"] == "thread_name" and e["pid"] == 0}
    assert threads == {"ops", "device-to-host copies", "host-to-device copies"}
    assert {e["tid"] for e in events if e["ph"] == "X" and e["cat"] in ("O", "L")} == {2, 3}
