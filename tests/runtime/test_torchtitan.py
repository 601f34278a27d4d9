"""The torchtitan handoff for real: a plan solved with `--partition auto`, exported with
`--format torchtitan`, built by torchtitan 0.3.0's own module split and schedule builder on two
CPU ranks (gloo), one training step whose losses are those of one process."""

import json
import subprocess
import sys
import time

import pytest

pytest.importorskip("torchtitan", reason="torchtitan is not installed (pip install 'zbsolve[titan]')")
torch = pytest.importorskip("torch")

from helpers import free_port  # noqa: E402
from titan_worker import LAYERS, reference, run_rank  # noqa: E402

DEADLINE_S = 120


def tiny_profile(path) -> None:
    layer = {"F": 2.0, "B": 2.0, "W": 1.0, "activation": 1.0, "residual": 0.5}
    layers = ([{"name": "tok_embeddings", "F": 0.1, "B": 0.0, "W": 0.1, "activation": 0.1, "residual": 0.0}]
              + [{"name": f"layers.{i}", **layer} for i in range(LAYERS)]
              + [{"name": "lm_head", "modules": ["norm", "lm_head"], "F": 3.0, "B": 3.0, "W": 1.5,
                  "activation": 2.0, "residual": 1.0}])
    path.write_text(json.dumps({"name": "tiny-layers", "source": "test", "layers": layers}))


def zbsolve(*words: str, cwd) -> str:
    done = subprocess.run([sys.executable, "-m", "zbsolve", *words], cwd=cwd, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_torchtitan_builds_and_runs_the_exported_plan(tmp_path):
    import torch.multiprocessing as mp

    tiny_profile(tmp_path / "tiny.json")
    out = zbsolve("solve", "--profile", "tiny.json", "--stages", "2", "--microbatches", "4", "--placement", "vshape",
                  "--partition", "auto", "--time-limit", "4", "--workers", "1", "-q", "-o", "plan.json", cwd=tmp_path)
    assert "answer: partition" in out
    zbsolve("export", "plan.json", "--format", "torchtitan", "-o", "titan", "--microbatch-size", "2", cwd=tmp_path)
    fragment = json.loads((tmp_path / "titan" / "torchtitan.json").read_text())
    parts = fragment["parallelism"]["module_fqns_per_model_part"]
    assert fragment["parallelism"]["pipeline_parallel_schedule"] == "ZBVZeroBubble"
    assert [m for part in parts for m in part] == ["tok_embeddings", *(f"layers.{i}" for i in range(LAYERS)),
                                                   "norm", "lm_head"]
    assert fragment["training"]["local_batch_size"] == 8
    context = mp.start_processes(run_rank, args=(2, str(tmp_path / "titan" / "torchtitan.json"), free_port(),
                                                 str(tmp_path)),
                                 nprocs=2, join=False, start_method="spawn")
    deadline = time.monotonic() + DEADLINE_S
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail("torchtitan's schedule did not finish in time")
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    assert [r["stages"] for r in ranks] == [[0, 3], [1, 2]]  # the V: rank 0 holds the first and the last stage
    assert all(r["grads"] > 0 for r in ranks)
    assert ranks[0]["losses"] == pytest.approx(reference(4, 8), rel=1e-5)
