"""One rank of a real pipeline-parallel training step (spawned by test_torch_runtime)."""

import os

import torch
import torch.distributed as dist
from torch import nn

WIDTH = 8
BATCH_PER_MICROBATCH = 2


def build_layers(num_stages: int) -> list[nn.Module]:
    torch.manual_seed(0)
    return [nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()) for _ in range(num_stages)]


def batch(n_microbatches: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    size = n_microbatches * BATCH_PER_MICROBATCH
    return torch.randn(size, WIDTH, generator=generator), torch.randn(size, WIDTH, generator=generator)


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.mse_loss(output, target)


def reference(num_stages: int, n_microbatches: int) -> tuple[float, list[list[torch.Tensor]]]:
    """Single process: mean of the microbatch losses, and every stage's gradients."""
    layers = build_layers(num_stages)
    model = nn.Sequential(*layers)
    x, y = batch(n_microbatches)
    losses = [loss_fn(model(xi), yi) for xi, yi in zip(x.chunk(n_microbatches), y.chunk(n_microbatches))]
    total = torch.stack(losses).mean()
    total.backward()
    return total.item(), [[p.grad.clone() for p in layer.parameters()] for layer in layers]


def run_rank(rank: int, world: int, schedule_paths: list[str], port: int, out_dir: str) -> None:
    """One training step per schedule, in order, in one process group (torch's import is
    most of a launch); results in OUT_DIR/rank{rank}-{i}.pt for the i-th schedule."""
    from torch.distributed.pipelining import PipelineStage

    from zbsolve.formats.schedule_json import read_schedule
    from zbsolve.runtime.torch_pipeline import pipeline_runtime, stages_of_rank

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}")
    try:
        for i, schedule_path in enumerate(schedule_paths):
            schedule = read_schedule(schedule_path)
            M = schedule.problem.microbatches
            num_stages = len(schedule.problem.pipes[0].stages)
            layers = build_layers(num_stages)
            mine = stages_of_rank(schedule, rank)
            stages = [PipelineStage(layers[k], k, num_stages, torch.device("cpu")) for k in mine]
            runtime = pipeline_runtime(schedule, stages, M, loss_fn=loss_fn)
            x, y = batch(M)
            losses: list = []
            args = (x,) if 0 in mine else ()
            target = y if num_stages - 1 in mine else None
            runtime.step(*args, target=target, losses=losses)
            result = {
                "grads": {k: [p.grad.clone() for p in layers[k].parameters()] for k in mine},
                "losses": [loss.detach() for loss in losses],
                "host_copies": dict(runtime.host_copies.tensors) if runtime.host_copies else {},  # tensors, per stage
            }
            torch.save(result, os.path.join(out_dir, f"rank{rank}-{i}.pt"))
            dist.barrier()  # no message of the next schedule meets one of this one
    finally:
        dist.destroy_process_group()
