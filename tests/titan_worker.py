"""One rank of a training step that torchtitan 0.3.0 builds from zbsolve's export (spawned by
tests/runtime/test_torchtitan.py): torchtitan's own module split and schedule builder."""

import json
import os

import torch
import torch.distributed as dist
from torch import nn

VOCAB, WIDTH, SEQUENCE, LAYERS = 16, 8, 4, 4


class TinyLM(nn.Module):
    """torchtitan's model shape in miniature: embedding, layers, norm, head; a stage holds some of
    them and the rest are None (torchtitan's split), which forward steps over."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.tok_embeddings = nn.Embedding(VOCAB, WIDTH)
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()) for _ in range(LAYERS))
        self.norm = nn.LayerNorm(WIDTH)
        self.lm_head = nn.Linear(WIDTH, VOCAB)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(h) if self.tok_embeddings is not None else h
        for layer in self.layers:
            h = layer(h)
        h = self.norm(h) if self.norm is not None else h
        return self.lm_head(h) if self.lm_head is not None else h


def loss_fn(output: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
    """torchtitan's loss functions answer (loss, tokens counted)."""
    return nn.functional.cross_entropy(output.flatten(0, 1), labels.flatten()), labels.numel()


def batch(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (size, SEQUENCE), generator=generator)
    return tokens, torch.randint(0, VOCAB, (size, SEQUENCE), generator=generator)


def reference(microbatches: int, size: int) -> list[float]:
    model = TinyLM()
    tokens, labels = batch(size)
    return [loss_fn(model(x), y)[0].item() for x, y in zip(tokens.chunk(microbatches), labels.chunk(microbatches))]


def run_rank(rank: int, world: int, fragment_path: str, port: int, out_dir: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torchtitan.config import ParallelismConfig
    from torchtitan.distributed.pipeline_parallel import _build_pipeline_schedule, _pipeline_module_split

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        fragment = json.loads(open(fragment_path).read())
        parallelism = ParallelismConfig(**fragment["parallelism"])
        local_batch = fragment["training"]["local_batch_size"]
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("pp",))
        stages, _ = _pipeline_module_split(TinyLM(), mesh, parallelism.pipeline_parallel_schedule,
                                           torch.device("cpu"), parallelism.module_fqns_per_model_part)
        schedule = _build_pipeline_schedule(parallelism=parallelism, local_batch_size=local_batch,
                                            stages=stages, loss_fn=loss_fn)
        tokens, labels = batch(local_batch)
        first = any(stage.is_first for stage in stages)
        last = any(stage.is_last for stage in stages)
        losses: list[torch.Tensor] = []
        schedule.step(*((tokens,) if first else ()), target=labels if last else None,
                      losses=losses if last else None)
        torch.save({"losses": [loss.item() for loss in losses], "stages": [s.stage_index for s in stages],
                    "grads": sum(p.grad is not None for s in stages for p in s.submod.parameters())},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()
