"""Run a schedule with torch.distributed.pipelining on the GPT layer stack `zbsolve profile`
measures, one process per rank (gloo on the CPU, NCCL with one GPU per rank on CUDA), and
record when every action ran.

Each stage's forward, input-gradient and weight-gradient calls are wrapped to note their
start and end (the host clock on the CPU, CLOCK_MONOTONIC, one clock for every process of the
machine; CUDA events on the GPU, placed on the host clock from the step's start) and, for a
forward, the bytes autograd saved for backward (as `zbsolve profile` counts them); on CUDA
each step's allocator peak too. The runtime's own order is left as it is. Steps start
together at a barrier.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from dataclasses import asdict
from typing import Any

from zbsolve.errors import UsageError
from zbsolve.formats.schedule_json import read_schedule, write_schedule
from zbsolve.formats.torch_csv import offloaded
from zbsolve.schedule.schedule import Schedule

from .profiling import DTYPES, LayerShape, _block, _torch, saved_storages
from .torch_pipeline import pipeline_runtime, stages_of_rank


class _HostClock:
    """Marks are host times in seconds."""

    def start_step(self) -> None:
        pass

    def mark(self) -> float:
        return time.perf_counter()

    def seconds(self, mark: float) -> float:
        return mark


class _CudaClock:
    """Marks are CUDA events on the rank's current stream, when the GPU reached them; after
    the step they are placed on the host clock from an event recorded at the step's start."""

    def __init__(self, torch) -> None:
        self.torch = torch

    def start_step(self) -> None:
        self.torch.cuda.synchronize()
        self.host, self.base = time.perf_counter(), self.mark()

    def mark(self):
        event = self.torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, mark) -> float:
        return self.host + self.base.elapsed_time(mark) / 1e3  # elapsed_time is in ms


def _instrument(torch, stage: Any, records: list, weights: set[int], clock, offloaded: set[int]) -> None:
    """Wrap the stage's compute calls; each appends (kind, stage, microbatch, start, end, bytes),
    start and end as `clock` marks them. The forwards of `offloaded` microbatches save their
    tensors to host (`host_offload`, whose hooks hide them from the count): they hold none."""
    forward, backward, weight = stage.forward_one_chunk, stage.backward_one_chunk, stage.backward_weight_one_chunk
    index = stage.stage_index

    counted: list[int] = []  # the bytes one forward of this stage saves: every microbatch has one shape

    def timed_forward(mb, *args, **kwargs):
        if mb in offloaded:
            start = clock.mark()
            out = forward(mb, *args, **kwargs)
            records.append(("F", index, mb, start, clock.mark(), 0))
            return out
        if counted:
            start = clock.mark()
            out = forward(mb, *args, **kwargs)
        else:  # counting runs Python on every saved tensor, so it is done on the first forward only
            hooks, seen = saved_storages(torch, weights)
            start = clock.mark()
            with hooks:
                out = forward(mb, *args, **kwargs)
            counted.append(sum(seen.values()))
        records.append(("F", index, mb, start, clock.mark(), counted[0]))
        return out

    def timed_backward(mb, *args, full_backward=True, **kwargs):
        start = clock.mark()
        out = backward(mb, *args, full_backward=full_backward, **kwargs)
        records.append(("BW" if full_backward else "B", index, mb, start, clock.mark(), 0))
        return out

    def timed_weight(mb, *args, **kwargs):
        start = clock.mark()
        out = weight(mb, *args, **kwargs)
        records.append(("W", index, mb, start, clock.mark(), 0))
        return out

    stage.forward_one_chunk, stage.backward_one_chunk = timed_forward, timed_backward
    stage.backward_weight_one_chunk = timed_weight


def _rank(rank: int, world: int, plan_path: str, shape: dict, steps: int, warmup: int, port: int,
          out_path: str, device: str, dtype: str) -> None:
    torch = _torch()
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage

    torch.set_num_threads(1)
    cuda = device == "cuda"
    where = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(where)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world,
                            init_method=f"tcp://127.0.0.1:{port}")
    plan = read_schedule(plan_path)
    M, total = plan.problem.microbatches, len(plan.problem.pipes[0].stages)
    layers = shape["layers"] * world // total  # a rank-stage's layers, shared by its chunks
    element = getattr(torch, dtype)
    stages, weights, mine = [], set(), stages_of_rank(plan, rank)
    for k in mine:
        torch.manual_seed(k)
        stack = torch.nn.Sequential(*[_block(torch, shape["hidden"], shape["heads"]) for _ in range(layers)])
        stack = stack.to(device=where, dtype=element)
        weights |= {p.untyped_storage().data_ptr() for p in stack.parameters()}
        stages.append(PipelineStage(stack, k, total, where))
    runtime = pipeline_runtime(plan, stages, M, loss_fn=torch.nn.functional.mse_loss)
    records: list = []
    clock = _CudaClock(torch) if cuda else _HostClock()
    sent = offloaded(plan)
    for stage in stages:
        _instrument(torch, stage, records, weights, clock, {i for k, i in sent if k == stage.stage_index})
    data = torch.Generator().manual_seed(1)
    size = (shape["microbatch_size"] * M, shape["sequence"], shape["hidden"])
    x, y = (torch.randn(size, generator=data).to(device=where, dtype=element) for _ in range(2))
    timed: list = []
    for step in range(warmup + steps):
        dist.barrier()
        clock.start_step()
        if cuda:  # the allocator's peak above what the step starts with (weights, gradients)
            torch.cuda.reset_peak_memory_stats(where)
            held = torch.cuda.memory_allocated(where)
        began = time.perf_counter()
        runtime.step(*((x,) if 0 in mine else ()), target=y if total - 1 in mine else None)
        if cuda:
            torch.cuda.synchronize(where)
        ended = time.perf_counter()
        dist.barrier()
        if step >= warmup:  # warm-up steps are not measured
            peak = torch.cuda.max_memory_allocated(where) - held if cuda else 0
            timed += [(k, st, mb, clock.seconds(a), clock.seconds(b), n) for k, st, mb, a, b, n in records]
            timed.append(("step", step - warmup, -1, began, ended, peak))
        records.clear()
    gathered = [None] * world if rank == 0 else None
    dist.gather_object({"rank": rank, "records": timed}, gathered, dst=0)
    if rank == 0:
        with open(out_path, "w", encoding="utf-8") as out:
            json.dump(gathered, out)
    dist.destroy_process_group()


def _stop(processes: list) -> None:
    """End the rank processes: asked first, then killed if they do not go."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()


def run_plan(plan: Schedule, shape: LayerShape, steps: int = 10, warmup: int = 3, device: str = "cpu",
             dtype: str = "float32") -> list[dict]:
    """Run `plan` for `warmup` + `steps` steps, one process per rank (on the CPU, or one GPU
    per rank on CUDA); each rank's records."""
    shape.check()
    problem = plan.problem
    if len(problem.pipes) != 1:
        raise UsageError("torch.distributed.pipelining runs one pipe; this plan has two (bidirectional)")
    chunks = len(problem.pipes[0].stages) // problem.devices
    if shape.layers % chunks:
        raise UsageError(f"the plan puts {chunks} chunks on a rank: the stack's {shape.layers} layers do not "
                         "split into them evenly")
    if steps < 1 or warmup < 0:
        raise UsageError(f"--steps must be >= 1 and --warmup >= 0, got {steps} and {warmup}")
    if dtype not in DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    torch = _torch()
    if device == "cuda":
        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if found < problem.devices:
            raise UsageError(f"--device cuda runs one rank per GPU (NCCL): the plan has {problem.devices} ranks, "
                             f"this machine has {found} GPU{'' if found == 1 else 's'}")
    elif device != "cpu":
        raise UsageError(f"--device must be cpu or cuda, got {device!r}")
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as folder, socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        plan_path, out_path = os.path.join(folder, "plan.json"), os.path.join(folder, "records.json")
        write_schedule(plan, plan_path)
        previous = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = "1"  # one thread per rank, as the plan's profile measured
        try:
            ranks = mp.start_processes(_rank, args=(problem.devices, plan_path, asdict(shape), steps, warmup, port,
                                                    out_path, device, dtype),
                                       nprocs=problem.devices, start_method="spawn", join=False)
            try:
                while not ranks.join(timeout=0.5):
                    pass
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM to this process alone: the ranks stop too
                _stop(ranks.processes)
                raise
        finally:
            if previous is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = previous
        with open(out_path, encoding="utf-8") as handle:
            gathered = json.load(handle)
    return sorted(gathered, key=lambda entry: entry["rank"])
