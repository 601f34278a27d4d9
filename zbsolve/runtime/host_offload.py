"""The offload lever in the torch runtime (docs/runtime.md, "Offload").

torch's runtime has no action for a copy to host or back. A microbatch the plan offloads
at a stage runs its forward under autograd's saved-tensor hooks: each tensor the forward
saves for its backward (the stage's weights excepted: they stay on the device) is copied
to host as it is saved, and copied back when the backward first needs it. On CUDA the copy
to host goes to pinned memory on a copy stream of its own, after the compute stream has
produced the tensor; the device memory is not reused before that copy ends
(`record_stream`), and the copy back waits for it (an event). The copy back runs on the
compute stream when the backward asks for it: at its backward's start, not where the plan
put the L. On CPU, host memory is the device's: the copies run and free nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class HostCopies:
    """What one rank copied to host: tensors and bytes, per stage index."""

    tensors: dict[int, int]
    nbytes: dict[int, int]


def offload_forwards(stage: Any, microbatches: set[int], copies: HostCopies) -> None:
    """Run the stage's forward of these microbatches (torch's chunk ids) with what it saves
    for the backward on host (see the module's text)."""
    import torch

    chunk = stage.forward_one_chunk
    weights = {p.untyped_storage().data_ptr() for p in stage.submod.parameters()}
    copies.tensors.setdefault(stage.stage_index, 0)
    copies.nbytes.setdefault(stage.stage_index, 0)
    pack, unpack = _hooks(torch, weights, copies, stage.stage_index)

    def forward_one_chunk(fwd_chunk_id: int, *args: Any, **kwargs: Any) -> Any:
        if fwd_chunk_id not in microbatches:
            return chunk(fwd_chunk_id, *args, **kwargs)
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            return chunk(fwd_chunk_id, *args, **kwargs)

    stage.forward_one_chunk = forward_one_chunk


def _hooks(torch: Any, weights: set[int], copies: HostCopies, index: int) -> tuple[Callable, Callable]:
    streams: dict[Any, Any] = {}  # one copy stream per CUDA device

    def pack(tensor: Any) -> tuple:
        if tensor.layout != torch.strided or tensor.untyped_storage().data_ptr() in weights:
            return (None, tensor, None)
        copies.tensors[index] += 1
        copies.nbytes[index] += tensor.numel() * tensor.element_size()
        if tensor.device.type != "cuda":
            return (tensor.device, tensor.detach().clone(), None)
        stream = streams.setdefault(tensor.device, torch.cuda.Stream(tensor.device))
        host = torch.empty(tensor.size(), dtype=tensor.dtype, pin_memory=True)
        stream.wait_stream(torch.cuda.current_stream(tensor.device))  # the tensor is computed
        with torch.cuda.stream(stream):
            host.copy_(tensor, non_blocking=True)
            done = torch.cuda.Event()
            done.record(stream)
        tensor.record_stream(stream)  # its memory is not handed out again before the copy ends
        return (tensor.device, host, done)

    def unpack(packed: tuple) -> Any:
        device, held, done = packed
        if device is None or done is None:  # kept on the device, or CPU
            return held
        torch.cuda.current_stream(device).wait_event(done)
        return held.to(device, non_blocking=True)

    return pack, unpack
