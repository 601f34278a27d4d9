"""Train a small MLP with a schedule zbsolve just solved: P processes on CPU, gloo backend.

    pip install torch==2.13.0 && pip install '.[torch]'
    python examples/torch_pipeline.py [--ranks 2] [--placement vshape] [--steps 5]

Each rank builds the stages the schedule assigns it, the helper loads the schedule into
torch.distributed.pipelining's runtime, and every step runs the solved order of F, B
(input gradient) and W (weight gradient) ops.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.pipelining import PipelineStage

from zbsolve import StageCost, build_problem, solve, write_schedule
from zbsolve.formats.schedule_json import read_schedule
from zbsolve.runtime.torch_pipeline import pipeline_runtime, stages_of_rank

WIDTH, BATCH = 64, 32


def layers_for(num_stages: int) -> list[nn.Module]:
    torch.manual_seed(0)  # every rank builds the same initial weights
    return [nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH)) for _ in range(num_stages)]


def train(rank: int, world: int, schedule_path: str, port: int, steps: int) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}")
    schedule = read_schedule(schedule_path)
    M, num_stages = schedule.problem.microbatches, len(schedule.problem.pipes[0].stages)
    layers = layers_for(num_stages)
    mine = stages_of_rank(schedule, rank)
    stages = [PipelineStage(layers[k], k, num_stages, torch.device("cpu")) for k in mine]
    runtime = pipeline_runtime(schedule, stages, M, loss_fn=nn.functional.mse_loss)
    optimizer = torch.optim.SGD([p for k in mine for p in layers[k].parameters()], lr=0.05)
    data = torch.Generator().manual_seed(1)
    x, y = torch.randn(BATCH, WIDTH, generator=data), torch.randn(BATCH, WIDTH, generator=data)
    for step in range(steps):
        optimizer.zero_grad()
        losses: list = []
        runtime.step(*((x,) if 0 in mine else ()), target=y if num_stages - 1 in mine else None, losses=losses)
        optimizer.step()
        if losses:
            print(f"step {step}: loss {torch.stack(losses).mean().item():.5f} (rank {rank})", flush=True)
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--placement", default="vshape", choices=("single", "vshape", "interleaved:2"))
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    if BATCH % args.microbatches:
        print(f"error: --microbatches must divide the batch of {BATCH}", file=sys.stderr)
        return 2
    problem = build_problem(args.ranks, args.microbatches, StageCost(1.0, 1.0, 0.6, 1.0, 0.4),
                            placement=args.placement, memory="1x")
    schedule = solve(problem, "cpsat", time_limit=10)
    print(f"solved {args.placement} P={args.ranks} M={args.microbatches}: makespan {schedule.metrics.makespan:g}, "
          f"bubble {100 * schedule.metrics.bubble_rate:.2f}% ({schedule.solver.status})")
    with tempfile.TemporaryDirectory() as folder, socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        path = os.path.join(folder, "schedule.json")
        write_schedule(schedule, path)
        mp.start_processes(train, args=(args.ranks, path, port, args.steps), nprocs=args.ranks, start_method="spawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
