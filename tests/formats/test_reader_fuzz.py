"""Fuzzing the readers: whatever a file holds, they answer with a zbsolve error or a value."""

import json
import re

import pytest
from helpers import REPO_ROOT, mutated, uniform
from hypothesis import given, settings
from hypothesis import strategies as st

from zbsolve.baselines import run_baseline
from zbsolve.errors import ZbsolveError
from zbsolve.formats.schedule_json import dumps, read_schedule, schedule_from_dict
from zbsolve.problem.profiles import load_profile, profile_from_dict
from zbsolve.schedule.validator import validate

ROOT = REPO_ROOT
PROFILE = json.loads((ROOT / "models" / "zb-p8-heterogeneous.json").read_text())
SCHEDULE_TEXT = dumps(run_baseline("dualpipe", uniform(2, 4, placement="bidirectional", fb_overlap=1.5)))
SCHEDULE = json.loads(SCHEDULE_TEXT)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


def paths(value, prefix=()):
    """Every place inside a JSON value that could be replaced or removed."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, prefix + (index,))


SCHEDULE_PATHS = list(paths(SCHEDULE))[1:]
PROFILE_PATHS = list(paths(PROFILE))[1:]


def only_zbsolve_errors(read, data):
    try:
        return read(data)
    except ZbsolveError:
        return None


def read_then_use_schedule(data):
    schedule = schedule_from_dict(data)
    validate(schedule)  # it read: the validator must still answer in its own terms


def read_then_use_profile(data):
    profile = profile_from_dict(data)
    profile.rank_costs(profile.devices or 8)


READERS = [
    pytest.param(read_then_use_schedule, SCHEDULE, SCHEDULE_PATHS, read_schedule, id="schedule"),
    pytest.param(read_then_use_profile, PROFILE, PROFILE_PATHS, load_profile, id="profile"),
]


@pytest.mark.parametrize("read, document, places, load", READERS)
@given(data=json_values)
def test_reader_on_random_json(read, document, places, load, data):
    only_zbsolve_errors(read, data)


@pytest.mark.parametrize("read, document, places, load", READERS)
@settings(max_examples=500)
@given(choice=st.data(), replacement=json_values, delete=st.booleans())
def test_reader_on_a_valid_file_with_one_value_changed(read, document, places, load, choice, replacement, delete):
    path = choice.draw(st.sampled_from(places))
    only_zbsolve_errors(read, mutated(document, path, replacement, delete))


@pytest.mark.parametrize("read, document, places, load", READERS)
@given(content=st.binary(max_size=64))
def test_reader_on_random_bytes(tmp_path_factory, read, document, places, load, content):
    path = tmp_path_factory.mktemp("bytes") / "f.json"
    path.write_bytes(content)
    with pytest.raises(ZbsolveError):
        load(path)


@given(st.integers(0, len(SCHEDULE_TEXT.rstrip()) - 1))  # every cut that loses the closing brace
def test_truncated_schedule_files_are_refused(tmp_path_factory, cut):
    path = tmp_path_factory.mktemp("cut") / "s.json"
    path.write_text(SCHEDULE_TEXT[:cut])
    with pytest.raises(ZbsolveError):
        read_schedule(path)


def _place(document, path):
    for key in path:
        document = document[key]
    return document


OBJECT_PATHS = [p for p in paths(SCHEDULE) if isinstance(_place(SCHEDULE, p), dict)]


@settings(max_examples=200)
@given(where=st.sampled_from(OBJECT_PATHS), key=st.text(min_size=1, max_size=8), value=json_values)
def test_a_key_the_format_does_not_have_is_refused_by_name(where, key, value):
    document = json.loads(SCHEDULE_TEXT)
    place = _place(document, where)
    if key in place:
        return  # replacing a known key is the other test's
    place[key] = value
    with pytest.raises(ZbsolveError, match=f"unknown key .*{re.escape(key)}"):
        schedule_from_dict(document)


@pytest.mark.parametrize("opening", ["[", '{"a":'])
@pytest.mark.parametrize("reader", [read_schedule, load_profile])
def test_deeply_nested_input_is_refused_in_one_line(tmp_path, opening, reader):
    path = tmp_path / "deep.json"
    closing = "]" if opening == "[" else "}"
    path.write_text(opening * 100_000 + "1" + closing * 100_000)
    with pytest.raises(ZbsolveError, match="nested too deeply"):
        reader(path)


def test_a_huge_flat_input_is_refused_without_a_crash(tmp_path):
    path = tmp_path / "huge.json"
    path.write_text("[" + ",".join(["1"] * 1_000_000) + "]")
    for reader in (read_schedule, load_profile):
        with pytest.raises(ZbsolveError):
            reader(path)


def test_an_unknown_placement_name_and_a_misnamed_layout_are_refused():
    document = json.loads(SCHEDULE_TEXT)
    document["problem"]["placement"] = "zigzag"
    with pytest.raises(ZbsolveError, match="problem.placement: placement must be"):
        schedule_from_dict(document)
    document["problem"]["placement"] = "single"  # the pipes are DualPipe's
    with pytest.raises(ZbsolveError, match="not laid out that way"):
        schedule_from_dict(document)
    document["problem"]["placement"] = "custom"
    schedule_from_dict(document)
