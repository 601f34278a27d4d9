"""Run a zbsolve schedule with torch.distributed.pipelining (torch is an optional extra).

`pipeline_runtime` takes a schedule (object or file) and this rank's `PipelineStage`s,
checks that they are the stages the schedule puts on this rank, and returns a
`_PipelineScheduleRuntime` loaded with the schedule's compute_only CSV; torch adds the
send/recv actions itself. torch has no action for recomputation: a microbatch the schedule
recomputes at a stage runs its forward under activation checkpointing (only the stage's
input kept), and torch re-runs it, with the same random state, when its backward needs it:
the R runs at its backward's start, not where the plan put it. A microbatch it offloads
has what its forward saves copied to host and back (`host_offload`; the runtime's
`host_copies` counts them). Its `step` refuses a batch
that the microbatch count does not divide: torch would split it into unequal microbatches
and, with a mean loss per microbatch, silently weight their samples unequally.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from zbsolve.errors import ScheduleFileError, UsageError
from zbsolve.formats.schedule_json import read_schedule
from zbsolve.formats.torch_csv import offloaded, recomputed, torch_csv
from zbsolve.schedule.schedule import Schedule
from zbsolve.schedule.validator import validate

from .host_offload import HostCopies, offload_forwards


def _import_runtime():
    try:
        import torch
        from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime
    except ImportError:
        raise UsageError(
            "the torch runtime needs PyTorch >= 2.10: pip install 'zbsolve[torch]' "
            "(or pip install torch first)"
        ) from None

    class CheckedRuntime(_PipelineScheduleRuntime):
        """The torch runtime, refusing batches that do not split into equal microbatches."""

        host_copies: HostCopies | None = None  # what this rank's offloaded forwards sent to host

        def step(self, *args, target=None, **kwargs):
            named = {k: v for k, v in kwargs.items() if k not in ("losses", "return_outputs", "loss_kwargs")}
            batches = [("target", target)]
            if self._args_chunk_spec is None:  # a custom chunk spec chooses its own split dimension
                batches += [(f"argument {i}", a) for i, a in enumerate(args)]
            if self._kwargs_chunk_spec is None:
                batches += [(f"argument {k!r}", v) for k, v in named.items()]
            for name, value in batches:
                if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] % self._n_microbatches:
                    raise UsageError(
                        f"the batch of {value.shape[0]} ({name}) does not split into {self._n_microbatches} "
                        f"equal microbatches: use a batch size that is a multiple of {self._n_microbatches}"
                    )
            return super().step(*args, target=target, **kwargs)

    return CheckedRuntime


def stages_of_rank(schedule: Schedule, rank: int) -> list[int]:
    """Stage indices (along the single pipe) that the schedule runs on `rank`."""
    pipe = schedule.problem.pipes[0]
    return [k for k, stage in enumerate(pipe.stages) if stage.device == rank]


def check_stages(schedule: Schedule, stages: Sequence[Any], n_microbatches: int) -> None:
    problem = schedule.problem
    if len(problem.pipes) != 1:
        raise UsageError("torch.distributed.pipelining runs one pipe; this schedule has two (bidirectional)")
    if not stages:
        raise UsageError("no PipelineStage given for this rank")
    if n_microbatches != problem.microbatches:
        raise UsageError(
            f"the schedule is for {problem.microbatches} microbatches, got n_microbatches={n_microbatches}"
        )
    first = stages[0]
    if first.group_size != problem.devices:
        raise UsageError(f"the schedule is for {problem.devices} ranks, the process group has {first.group_size}")
    expected = stages_of_rank(schedule, first.group_rank)
    given = sorted(s.stage_index for s in stages)
    if given != expected:
        raise UsageError(
            f"rank {first.group_rank} must hold stages {expected} of this {problem.placement} schedule, "
            f"got stages {given}"
        )
    total = len(problem.pipes[0].stages)
    wrong = [s.stage_index for s in stages if s.num_stages != total]
    if wrong:
        raise UsageError(f"stages {wrong} were built with num_stages != {total} (the schedule's stage count)")


def pipeline_runtime(
    schedule: Schedule | str | os.PathLike,
    stages: Sequence[Any],
    n_microbatches: int,
    loss_fn: Callable | None = None,
    **kwargs: Any,
):
    """A ready `_PipelineScheduleRuntime` for this rank; call `.step(...)` as usual.

    Extra keyword arguments go to the runtime (for example `scale_grads`).
    """
    runtime_class = _import_runtime()
    if not isinstance(schedule, Schedule):
        schedule = read_schedule(schedule)
    validate(schedule)
    check_stages(schedule, stages, n_microbatches)
    chosen, sent = set(recomputed(schedule)), set(offloaded(schedule))
    copies = HostCopies({}, {}) if sent else None
    for stage in stages:
        _no_warm_up_to_itself(stage)
        if any(k == stage.stage_index for k, _ in chosen):
            _recompute(stage, {i for k, i in chosen if k == stage.stage_index})
        if copies is not None and any(k == stage.stage_index for k, _ in sent):
            offload_forwards(stage, {i for k, i in sent if k == stage.stage_index}, copies)
    runtime = runtime_class(list(stages), n_microbatches, loss_fn=loss_fn, **kwargs)
    runtime.host_copies = copies
    handle, path = tempfile.mkstemp(prefix="zbsolve-", suffix=".csv")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(torch_csv(schedule, recompute_in_backward=True))
        runtime._load_csv(path, format="compute_only")
    except (ValueError, RuntimeError, AssertionError) as error:
        raise ScheduleFileError(f"torch refused the schedule: {error}") from None
    finally:
        os.unlink(path)
    return runtime



def _recompute(stage: Any, microbatches: set[int]) -> None:
    """The stage's forward of these microbatches under non-reentrant activation checkpointing:
    autograd keeps the stage's inputs only and re-runs the forward, with the random state it
    had, when the backward first needs what it dropped."""
    import torch.utils.checkpoint as checkpoint

    submod, forward, chunk = stage.submod, stage.submod.forward, stage.forward_one_chunk
    on = [False]

    def maybe_checkpointed(*args: Any, **kwargs: Any) -> Any:
        if on[0]:
            return checkpoint.checkpoint(forward, *args, use_reentrant=False, preserve_rng_state=True, **kwargs)
        return forward(*args, **kwargs)

    def forward_one_chunk(fwd_chunk_id: int, *args: Any, **kwargs: Any) -> Any:
        on[0] = fwd_chunk_id in microbatches
        try:
            return chunk(fwd_chunk_id, *args, **kwargs)
        finally:
            on[0] = False

    submod.forward = maybe_checkpointed
    stage.forward_one_chunk = forward_one_chunk


def _no_warm_up_to_itself(stage: Any) -> None:
    """Before its first step torch 2.11 sends one message to each neighbouring stage's rank
    to open the links, the rank's own included where two neighbouring stages share it (on a
    V the turn does); gloo has no link from a rank to itself and fails ('Pair is not
    connected'). Such neighbours hand their tensors over in memory, so those messages are
    left out. torch 2.13 opens the links another way and never asks for this list."""
    ops_of = getattr(stage, "_get_init_p2p_neighbors_ops", None)
    if ops_of is None:
        return

    def ops_to_others() -> list:
        return [op for op in ops_of() if getattr(op, "group_peer", None) != stage.group_rank]

    stage._get_init_p2p_neighbors_ops = ops_to_others
