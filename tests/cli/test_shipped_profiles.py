"""Shipped profiles: installed with the package, found by name from any folder, listed."""

import pytest

from zbsolve.cli import main
from zbsolve.errors import ProfileError
from zbsolve.problem.profiles import SHIPPED, load_profile, resolve_profile, shipped_profiles


def test_the_checkout_s_models_folder_is_the_shipped_one():
    from helpers import REPO_ROOT

    assert (REPO_ROOT / "models").resolve() == SHIPPED.resolve()
    assert {"zb-1.5b", "zb-6.2b", "h100-6.2b", "zb-p8-heterogeneous"} <= set(shipped_profiles())


@pytest.mark.parametrize("given", ["zb-6.2b", "zb-6.2b.json", "models/zb-6.2b.json"])
def test_a_shipped_profile_is_found_by_name_from_another_folder(capsys, tmp_path, monkeypatch, given):
    monkeypatch.chdir(tmp_path)
    assert resolve_profile(given) == SHIPPED / "zb-6.2b.json"
    assert main(["compare", "--profile", given, "--no-solve"]) == 0
    assert "P=8 M=24 placement single, F=29.718 B=29.444 W=19.927" in capsys.readouterr().out


def test_a_file_of_the_same_name_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "zb-6.2b").write_text('{"name": "mine", "source": "here", "costs": {"F": 2, "B": 3, "W": 4}}')
    assert load_profile("zb-6.2b").name == "mine"


@pytest.mark.parametrize("given", ["zb-6.3b", "other/zb-6.2b.json", "/nowhere/zb-6.2b.json"])
def test_an_unknown_name_is_refused_listing_the_shipped_ones(tmp_path, monkeypatch, given):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProfileError, match=r"no such file, nor a shipped profile \(zbsolve profiles lists them: "
                                           r"h100-1.5b, .*zb-6.2b"):
        load_profile(given)


def test_the_profiles_command_lists_each_with_its_costs(capsys):
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[:-1]] == list(shipped_profiles())
    assert "zb-6.2b              F 29.718 B 29.444 W 19.927 ms, activation 3.4918 GB, P=8" in out
    assert main(["profiles", "-v"]) == 0
    assert "Zero Bubble Pipeline Parallelism (ICLR 2024)" in capsys.readouterr().out
