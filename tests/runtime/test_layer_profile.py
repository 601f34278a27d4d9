"""`zbsolve profile --per-layer`: a model layer by layer, with the embedding and the head
measured apart, ready for --partition."""

import json

import pytest

torch = pytest.importorskip("torch")

from zbsolve.cli import main  # noqa: E402
from zbsolve.problem.profiles import load_profile  # noqa: E402
from zbsolve.runtime.layer_profile import per_layer_costs  # noqa: E402
from zbsolve.runtime.profiling import LayerShape  # noqa: E402

SHAPE = LayerShape(layers=3, hidden=64, heads=4, sequence=32, microbatch_size=2)


def test_each_layer_is_measured_and_the_ends_hold_what_they_must():
    layers = per_layer_costs(SHAPE, vocab=500, repeats=1, warmup=1)
    assert [layer["name"] for layer in layers] == ["tok_embeddings", "layers.0", "layers.1", "layers.2", "lm_head"]
    assert layers[-1]["modules"] == ["norm", "lm_head"]
    embedding, head = layers[0], layers[-1]
    assert embedding["B"] == 0.0  # token ids take no gradient
    ids = SHAPE.microbatch_size * SHAPE.sequence * 8  # int64
    assert embedding["activation"] == embedding["residual"] == pytest.approx(ids / 1e9)
    logits = SHAPE.microbatch_size * SHAPE.sequence * 500 * 4  # float32, kept for the loss's gradient
    assert head["activation"] >= logits / 1e9
    assert all(layer["F"] > 0 and layer["W"] > 0 for layer in layers)
    assert layers[1] == {**layers[2], "name": "layers.0"}  # one layer measured, given to each


def test_the_command_writes_a_profile_that_partitions(tmp_path, capsys):
    out = tmp_path / "layers.json"
    assert main(["profile", "--per-layer", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32",
                 "--microbatch-size", "2", "--vocab", "300", "--repeats", "1", "-o", str(out)]) == 0
    profile = load_profile(out)
    assert profile.layers is not None and len(profile.layers) == 4
    assert json.loads(out.read_text())["model"]["vocabulary"] == 300
    assert main(["solve", "--profile", str(out), "--stages", "2", "--microbatches", "4", "--partition", "auto",
                 "--time-limit", "2", "--workers", "1", "-q"]) == 0
    assert "answer: partition" in capsys.readouterr().out
    assert main(["profile", "--per-layer", "--backward", "torch", "--layers", "2", "--hidden", "64", "--heads", "4",
                 "--seq", "32", "--microbatch-size", "2", "-o", str(tmp_path / "x.json")]) == 2
    assert "--per-layer times B and W split by hand" in capsys.readouterr().err
