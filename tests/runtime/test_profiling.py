"""zbsolve profile: memory that F keeps for B and W, files solve can use."""

import json

import pytest

pytest.importorskip("torch")

from zbsolve.cli import main  # noqa: E402
from zbsolve.formats.schedule_json import read_schedule  # noqa: E402
from zbsolve.problem.placements import build_problem  # noqa: E402
from zbsolve.problem.profiles import load_profile  # noqa: E402
from zbsolve.runtime.profiling import LayerShape, measure, saved_storages  # noqa: E402


def _saved_range(L, h, a, s, b, element):
    """What F saves per stack: at least W's inputs and output gradients (the residual, 16
    elements per sbh: the Zero Bubble paper's 32sbh bytes at 16 bits), at most the paper's
    34sbh + 5as^2b bytes at 16 bits (attention that keeps its s x s scores, dropout masks)."""
    return L * 16 * s * b * h * element, 1.01 * L * (17 * s * b * h + 2.5 * a * s * s * b) * element


@pytest.mark.parametrize("dtype, element", [("float32", 4), ("bfloat16", 2)])
def test_memory_is_what_f_keeps_for_b_and_w(dtype, element):
    L, h, a, s, b = 2, 128, 4, 64, 2
    costs = measure(LayerShape(L, h, a, s, b), "cpu", repeats=1, warmup=0, dtype=dtype)
    least, most = _saved_range(L, h, a, s, b, element)
    # W's inputs (each linear layer's input, 7sbh) and output gradients (9sbh)
    assert costs["residual"] * 1e9 == pytest.approx(least, rel=1e-9)
    assert least <= costs["activation"] * 1e9 <= most
    assert min(costs["F"], costs["B"], costs["W"]) > 0


def test_weights_are_not_activation():
    # 12h^2 weights per layer (50 MB in fp32) against 16sbh (0.5 MB): a training F saves
    # references to the weights too, but they are held whatever the schedule
    L, h, a, s, b = 1, 1024, 8, 8, 1
    costs = measure(LayerShape(L, h, a, s, b), "cpu", repeats=1, warmup=0)
    least, most = _saved_range(L, h, a, s, b, 4)
    assert least <= costs["activation"] * 1e9 <= most < 12 * h * h * 4


def test_profile_writes_a_file_that_solve_uses(capsys, tmp_path):
    target = tmp_path / "tiny.json"
    assert main(["profile", "--device", "cpu", "--layers", "1", "--hidden", "64", "--heads", "2", "--seq", "32",
                 "--microbatch-size", "2", "--repeats", "2", "-o", str(target)]) == 0
    document = json.loads(target.read_text())
    assert document["measured"]["device"] == "cpu" and "torch" in document["source"]
    # about 0.26 MB per microbatch (16sbh fp32 elements): written in kB
    assert document["memory_unit"] == "kB" and 262.144 <= document["costs"]["activation"] < 270
    assert main(["solve", "--profile", str(target), "--stages", "2", "--microbatches", "4", "-q"]) == 0
    assert "optimal" in capsys.readouterr().out


def test_a_torch_split_profile_times_torch_s_b_and_w_and_its_first_stage_apart(capsys, tmp_path):
    target = tmp_path / "split.json"
    assert main(["profile", "--layers", "1", "--hidden", "32", "--heads", "2", "--seq", "8",
                 "--microbatch-size", "1", "--repeats", "1", "--backward", "torch", "--probe-runtime",
                 "-o", str(target)]) == 0
    out = capsys.readouterr().out
    assert "the pipe's first stage (its input needs no gradient)" in out
    profile = load_profile(target)
    # the runtime probe ran a 2-rank ZB-H1 of the stack: the times are as it ran them
    probe = profile.extra["measured"]["runtime_probe"]
    assert (probe["ranks"], probe["microbatches"]) == (2, 8) and probe["gaps"] + probe["waits"] > 0
    assert profile.op_overhead > 0 and profile.comm >= 0 and "between ops (op_overhead)" in out
    for kind, value in (("F", profile.costs.F), ("B", profile.costs.B), ("W", profile.costs.W),
                        ("BW", profile.costs.fused)):
        assert value == pytest.approx(probe["alone"][kind] * probe["factors"][kind], rel=2e-3)  # 4 digits kept
    assert profile.first_stage["W"] == profile.first_stage["fused"] and profile.first_stage["B"] == 0
    assert profile.extra["measured"]["backward"] == "torch" and "split backward" in profile.source
    rank = profile.rank_costs(2)[0]
    single = build_problem(2, 2, profile.rank_costs(2), first_stage=profile.first_stage).stage_costs
    first, other = single
    # torch skips B on the first stage (its input needs no gradient) and runs it all in W
    assert first.B == 0 and first.W > 0 and first.activation == other.activation
    assert first.fused == first.W and other.fused > 0  # the first stage's W is its full backward
    assert other == rank and min(other.F, other.B, other.W) > 0
    # on a V, rank 0 holds the first stage and the last: only the first skips B
    vshape = build_problem(2, 2, profile.rank_costs(2), placement="vshape", first_stage=profile.first_stage)
    assert vshape.stage_costs[0] == first.scaled(0.5) and vshape.stage_costs[3] == rank.scaled(0.5)
    assert main(["solve", "--profile", str(target), "--stages", "2", "--microbatches", "4", "-q",
                 "-o", str(tmp_path / "plan.json")]) == 0
    assert "2 per-stage cost records" in capsys.readouterr().out
    assert read_schedule(tmp_path / "plan.json").problem.op_overhead == profile.op_overhead
    stack = ["--layers", "1", "--hidden", "32", "--heads", "2", "--seq", "8", "--microbatch-size", "1"]
    for extra in (["--dtype", "bfloat16", "--backward", "torch"], ["--backward", "products"],
                  ["--from-run", str(tmp_path / "plan.json")]):
        assert main(["profile", *stack, "--probe-runtime", *extra, "-o", str(tmp_path / "x.json")]) == 2
        assert "--probe-runtime" in capsys.readouterr().err


def test_a_saved_view_counts_the_bytes_it_reaches_not_its_whole_storage():
    import torch

    batch = torch.zeros(8, 1000)  # a caller's batch; a microbatch is a view of two rows
    weight = torch.ones(1000, requires_grad=True)
    hooks, seen = saved_storages(torch, {weight.untyped_storage().data_ptr()})
    with hooks:
        (batch[2:4] * weight).sum()  # saves the view (for weight's gradient), not the batch
    assert sum(seen.values()) == 2 * 1000 * 4
    qkv = torch.zeros(3, 500, requires_grad=True) * 1.0
    hooks, seen = saved_storages(torch, set())
    with hooks:
        q, k, v = qkv.unbind(0)
        (q * k + v * v).sum()  # three views that together cover their storage: counted once, whole
    assert sum(seen.values()) == 3 * 500 * 4


def test_a_small_stack_keeps_its_memory_in_the_file(tmp_path):
    # hidden 2, sequence 1: a few hundred bytes per microbatch, below the memory grid's 1e-6
    # GB; written in GB with six decimals it was 0, and --memory 1x had nothing to scale
    target = tmp_path / "small.json"
    assert main(["profile", "--layers", "1", "--hidden", "2", "--heads", "1", "--seq", "1",
                 "--microbatch-size", "1", "--repeats", "1", "-o", str(target)]) == 0
    document = json.loads(target.read_text())
    costs = document["costs"]
    assert document["memory_unit"] == "B" and 1 <= costs["residual"] <= costs["activation"] < 1000
    assert main(["solve", "--profile", str(target), "--stages", "2", "--microbatches", "4", "--memory", "1x",
                 "-q"]) == 0


@pytest.mark.parametrize("args, message", [
    (["--hidden", "65", "--heads", "2"], "multiple of --heads"),
    (["--hidden", "64", "--heads", "2", "--repeats", "0"], "--repeats"),
    (["--hidden", "64", "--heads", "2", "--device", "cuda"], "cuda"),
    (["--hidden", "64", "--heads", "2", "--dtype", "float64"], "--dtype"),
    # each names the option as typed (the last of a repeated option counts)
    (["--hidden", "64", "--heads", "2", "--seq", "0"], "--seq must be an integer >= 1, got 0"),
    (["--hidden", "64", "--heads", "2", "--microbatch-size", "0"], "--microbatch-size must be an integer >= 1"),
    (["--hidden", "64", "--heads", "2", "--layers", "0"], "--layers must be an integer >= 1"),
    (["--hidden", "64", "--heads", "0"], "--heads must be an integer >= 1"),
])
def test_bad_profile_settings_are_refused_and_write_nothing(capsys, tmp_path, args, message):
    import torch

    if "cuda" in args and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    target = tmp_path / "p.json"
    try:
        code = main(["profile", "--layers", "1", "--seq", "8", "--microbatch-size", "1", *args, "-o", str(target)])
    except SystemExit as exit:  # argparse's own usage errors
        code = exit.code
    assert code == 2 and message in capsys.readouterr().err
    assert not target.exists()


def test_sizes_that_cannot_fit_are_refused_before_allocating(capsys, tmp_path):
    target = tmp_path / "huge.json"
    code = main(["profile", "--layers", "4", "--hidden", "65536", "--heads", "64", "--seq", "65536",
                 "--microbatch-size", "8", "-o", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and "does not fit in cpu memory" in err and "GB is free" in err
    assert "Traceback" not in err and not target.exists()


def test_an_allocation_failure_while_measuring_is_a_clear_error(monkeypatch):
    import zbsolve.runtime.profiling as profiling
    from zbsolve.errors import UsageError

    def fail(*args):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes")

    monkeypatch.setattr(profiling, "_measure", fail)
    with pytest.raises(UsageError, match="does not fit in cpu memory .*ran out of memory"):
        measure(LayerShape(1, 64, 2, 8, 1), "cpu")

    def bug(*args):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(profiling, "_measure", bug)
    with pytest.raises(RuntimeError, match="shape mismatch"):  # real bugs are not disguised as memory errors
        measure(LayerShape(1, 64, 2, 8, 1), "cpu")


def test_the_memory_estimate_covers_what_a_run_saves():
    from zbsolve.runtime.profiling import estimated_bytes

    shape = LayerShape(2, 128, 4, 64, 2)
    costs = measure(shape, "cpu", repeats=1, warmup=0)
    assert estimated_bytes(shape) > (costs["activation"] + costs["residual"]) * 1e9


needs_cuda = pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")


@needs_cuda
def test_a_cuda_profile_in_bfloat16_measures_the_gpu(tmp_path):
    from zbsolve.problem.profiles import load_profile

    L, h, a, s, b = 2, 1024, 16, 512, 2
    target = tmp_path / "gpu.json"
    assert main(["profile", "--device", "cuda", "--dtype", "bfloat16", "--layers", str(L), "--hidden", str(h),
                 "--heads", str(a), "--seq", str(s), "--microbatch-size", str(b), "--repeats", "3",
                 "-o", str(target)]) == 0
    document = json.loads(target.read_text())
    torch = __import__("torch")
    assert document["model"]["hardware"] == torch.cuda.get_device_name()
    assert document["measured"]["dtype"] == "bfloat16" and "tf32" not in document["measured"]
    costs, per_gb = document["costs"], {"GB": 1, "MB": 1e3}[document["memory_unit"]]
    # W's inputs are the same on every attention kernel; a fused kernel keeps no s x s
    # scores, so what F saves lies between the residual and the formula with them
    assert costs["residual"] / per_gb * 1e9 == pytest.approx(L * 32 * s * b * h, rel=0.001)
    least, most = _saved_range(L, h, a, s, b, 2)
    assert least <= costs["activation"] / per_gb * 1e9 <= most
    assert min(costs["F"], costs["B"], costs["W"]) > 0
    assert load_profile(str(target)).rank_costs(4)[0].F == costs["F"]


@needs_cuda
def test_a_cuda_profile_in_float32_says_whether_tf32_was_on(tmp_path):
    target = tmp_path / "gpu32.json"
    assert main(["profile", "--device", "cuda", "--layers", "1", "--hidden", "256", "--heads", "4", "--seq", "128",
                 "--microbatch-size", "1", "--repeats", "1", "-o", str(target)]) == 0
    measured = json.loads(target.read_text())["measured"]
    assert measured["dtype"] == "float32"
    assert measured["tf32"] == __import__("torch").backends.cuda.matmul.allow_tf32
