"""Measure F, B, W and memory of a GPT-style layer stack (one rank-stage) with PyTorch.

B is the input gradient alone: the stack's weights are frozen while it runs, as a split
backward does. W is what B left for later: the weight-gradient products of every linear
layer (dW = g^T a, db = sum g) from the layer inputs `a` and output gradients `g` that B
produced. Activation memory is the bytes autograd saves during a training F (weights that
need gradients, so each linear layer's input is kept; distinct storages, the weights
themselves left out: they are held whatever the schedule); residual memory is the `a` and
`g` tensors W still needs after B.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zbsolve.errors import UsageError

# Element types a stack can be measured in. Training on GPUs computes in bfloat16 (or
# float16); float32 is the default because CPUs run it fastest.
DTYPES = ("float32", "bfloat16", "float16")
# How B and W are split: `products` times the bare weight products a hand-written split
# runs; `torch` times torch.distributed.pipelining's own split (zbsolve/runtime/torch_split.py).
BACKWARDS = ("products", "torch")


@dataclass(frozen=True)
class LayerShape:
    layers: int
    hidden: int
    heads: int
    sequence: int
    microbatch_size: int

    def check(self) -> None:
        # each field with the `zbsolve profile` option that sets it
        for name, option in (("layers", "--layers"), ("hidden", "--hidden"), ("heads", "--heads"),
                             ("sequence", "--seq"), ("microbatch_size", "--microbatch-size")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{option} must be an integer >= 1, got {value!r}")
        if self.hidden % self.heads:
            raise UsageError(f"--hidden ({self.hidden}) must be a multiple of --heads ({self.heads})")


def _torch():
    try:
        import torch
    except ImportError:
        raise UsageError("zbsolve profile needs PyTorch: pip install 'zbsolve[torch]'") from None
    return torch


def _block(torch, hidden: int, heads: int):
    nn = torch.nn
    Module: Any = nn.Module

    class Block(Module):
        """Pre-LayerNorm GPT block: causal self-attention and a 4h MLP."""

        def __init__(self) -> None:
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
            self.up, self.down = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            b, s, h = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, heads, h // heads).permute(2, 0, 3, 1, 4)
            attention = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(attention.transpose(1, 2).reshape(b, s, h))
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))

    return Block()


def saved_storages(torch, weights: set[int]):
    """A context in which autograd's saved tensors are noted, and the dict it fills: bytes
    per distinct storage, those at `weights` (the parameters) left out.

    A storage counts the bytes its saved views reach, not its whole size: a microbatch
    saved as a view into the caller's batch holds only its own slice for backward."""
    seen: dict[int, int] = {}
    reached: dict[int, list[tuple[int, int]]] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in weights:
            size = tensor.element_size()
            extent = 1 + sum((n - 1) * abs(s) for n, s in zip(tensor.shape, tensor.stride())) if tensor.numel() else 0
            begin = tensor.storage_offset() * size
            reached.setdefault(key, []).append((begin, min(begin + extent * size, storage.nbytes())))
            seen[key] = _covered(reached[key])
        return tensor

    return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), seen


def _covered(ranges: list[tuple[int, int]]) -> int:
    """Bytes in the union of [begin, end) ranges."""
    total, reach = 0, 0
    for begin, end in sorted(ranges):
        begin = max(begin, reach)
        if end > begin:
            total += end - begin
            reach = end
    return total


def _saved_bytes(torch, run, weights: set[int]) -> int:
    """Bytes of the distinct storages autograd saves while `run` runs, but those at `weights`."""
    hooks, seen = saved_storages(torch, weights)
    with hooks:
        run()
    return sum(seen.values())


def measure(shape: LayerShape, device: str = "cpu", repeats: int = 5, warmup: int = 2,
            dtype: str = "float32", backward: str = "products") -> dict:
    """Median F, B, W in ms and activation/residual in GB for one stack of `shape.layers`,
    weights, inputs and all arithmetic in `dtype`."""
    shape.check()
    if backward not in BACKWARDS:
        raise UsageError(f"--backward must be one of {', '.join(BACKWARDS)}, got {backward!r}")
    if dtype not in DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    torch = _torch()
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available here")
    if device not in ("cpu", "cuda"):
        raise UsageError(f"--device must be cpu or cuda, got {device!r}")
    element = getattr(torch, dtype)
    needed, available = estimated_bytes(shape, element.itemsize), _available_bytes(torch, device)
    if available is not None and needed > available:
        raise UsageError(_too_big(shape, device, f"it needs about {needed / 1e9:,.1f} GB, "
                                                f"{available / 1e9:,.1f} GB is free"))
    try:
        return _measure(torch, shape, torch.device(device), repeats, warmup, element, backward)
    except (torch.OutOfMemoryError, MemoryError):
        raise UsageError(_too_big(shape, device, "it ran out of memory")) from None
    except RuntimeError as error:  # the CPU allocator reports failure as a plain RuntimeError
        if "allocate memory" not in str(error):
            raise
        raise UsageError(_too_big(shape, device, "it ran out of memory")) from None


def estimated_bytes(shape: LayerShape, element_bytes: int = 4) -> int:
    """Bytes a profile run holds at its peak, at `element_bytes` per element: weights, what F
    saves, W's inputs, one layer's attention scores and the weight gradients W produces."""
    L, h, a, s, b = shape.layers, shape.hidden, shape.heads, shape.sequence, shape.microbatch_size
    weights = L * (12 * h * h + 13 * h)
    saved = L * (34 * s * b * h + 5 * a * s * s * b)  # Zero Bubble's 16-bit bytes = elements * 2
    residual = L * 32 * s * b * h
    return element_bytes * (2 * weights + 2 * s * b * h + a * s * s * b + (saved + residual) // 2)


def _available_bytes(torch, device: str) -> int | None:
    if device == "cuda":
        return torch.cuda.mem_get_info()[0]
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None  # not Linux: rely on the allocator's own failure


def _too_big(shape: LayerShape, device: str, why: str) -> str:
    return (f"a stack of {shape.layers} layers, hidden {shape.hidden}, sequence {shape.sequence}, "
            f"microbatch {shape.microbatch_size} does not fit in {device} memory ({why}): use fewer layers "
            f"or a smaller sequence or microbatch")


class _Timer:
    """Times a piece of work in ms and keeps its result in `last`."""

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch, self.device, self.last = torch, device, None

    def __call__(self, work: Callable[[], Any]) -> float:
        if self.device.type != "cuda":
            start = time.perf_counter()
            self.last = work()
            return (time.perf_counter() - start) * 1e3
        # GPU time between two events on the stream: a pipeline runtime queues the next op
        # while one runs, so the host's wait for the result is not part of an op's time
        cuda = self.torch.cuda
        begin, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        cuda.synchronize()
        begin.record()
        self.last = work()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end)


def _measure(torch, shape: LayerShape, device, repeats: int, warmup: int, dtype, backward: str) -> dict:
    torch.manual_seed(0)
    blocks = [_block(torch, shape.hidden, shape.heads) for _ in range(shape.layers)]
    stack = torch.nn.Sequential(*blocks).to(device=device, dtype=dtype)
    linears = [m for m in stack.modules() if isinstance(m, torch.nn.Linear)]
    x = torch.randn(shape.microbatch_size, shape.sequence, shape.hidden, device=device, dtype=dtype,
                    requires_grad=True)
    grad_out = torch.randn_like(x)

    timed = _Timer(torch, device)
    # A training F: with weights that need gradients autograd keeps each linear layer's input
    # for W, which a frozen stack would not.
    weights = {p.untyped_storage().data_ptr() for p in stack.parameters()}
    activation = _saved_bytes(torch, lambda: stack(x), weights)
    # what a recomputed forward keeps: autograd's saves under activation checkpointing
    from torch.utils.checkpoint import checkpoint as checkpointed

    kept_input = _saved_bytes(torch, lambda: checkpointed(stack, x, use_reentrant=False), weights)
    for p in stack.parameters():
        p.requires_grad_(False)  # B is the input gradient only; W is measured on its own
    F, B, W = [], [], []
    residual = 0
    # torch's split is timed below instead; one round still gives the residual W keeps
    first_kept = 0 if backward == "torch" else warmup
    for round_ in range(first_kept + (1 if backward == "torch" else repeats)):
        f_ms, b_ms, w_ms, kept = _one_step(torch, stack, linears, x, grad_out, timed)
        residual = kept
        if round_ >= first_kept:
            F.append(f_ms)
            B.append(b_ms)
            W.append(w_ms)
    # W's inputs are part of what F saved, but the output gradients B adds to them can, with
    # a fused attention that saves no scores, hold more than F did. The memory model
    # (residual <= activation) then counts the larger for both: never less than the truth.
    result = {"F": statistics.median(F), "B": statistics.median(B), "W": statistics.median(W),
              "activation": max(activation, residual) / 1e9, "residual": residual / 1e9,
              "checkpoint": min(kept_input, max(activation, residual)) / 1e9}
    if backward == "torch":
        from .torch_split import split_times

        result |= split_times(torch, stack, x, grad_out, timed, repeats, warmup)
    if device.type == "cuda":  # the offload lever's copy: the activation to pinned host memory or back
        result["offload"] = _host_copy_ms(torch, max(activation, residual), device, timed, repeats, warmup)
    return result


def _host_copy_ms(torch, nbytes: int, device, timed, repeats: int, warmup: int) -> float:
    """One copy of `nbytes` between the device and pinned host memory, the slower way, ms
    (median): a copy's time each way in the offload lever (docs/design.md, "Memory levers")."""
    on_device = torch.empty(max(1, nbytes), dtype=torch.uint8, device=device)
    host = torch.empty(max(1, nbytes), dtype=torch.uint8, pin_memory=True)
    times = [max(timed(lambda: host.copy_(on_device, non_blocking=True)),
                 timed(lambda: on_device.copy_(host, non_blocking=True))) for _ in range(warmup + repeats)]
    return statistics.median(times[warmup:])


def _one_step(torch, stack, linears, x, grad_out, timed) -> tuple[float, float, float, int]:
    """Time F, B (hooks keep each linear layer's input and output gradient) and W."""
    inputs: dict[Any, Any] = {}
    grads: dict[Any, Any] = {}
    hooks = [m.register_forward_hook(lambda m, a, out: inputs.__setitem__(m, a[0])) for m in linears]
    hooks += [m.register_full_backward_hook(lambda m, gi, go: grads.__setitem__(m, go[0])) for m in linears]
    try:
        f_ms = timed(lambda: stack(x))
        out = timed.last
        b_ms = timed(lambda: torch.autograd.grad(out, x, grad_out))
    finally:
        for h in hooks:
            h.remove()

    def weight_grads():
        return [(grads[m].flatten(0, -2).t() @ inputs[m].flatten(0, -2), grads[m].flatten(0, -2).sum(0))
                for m in linears]

    w_ms = timed(weight_grads)
    kept = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
            for t in list(inputs.values()) + list(grads.values())}
    return f_ms, b_ms, w_ms, sum(kept.values())


MEMORY_UNITS = (("GB", 1.0), ("MB", 1e3), ("kB", 1e6), ("B", 1e9))


def memory_unit(activation_gb: float) -> tuple[str, float]:
    """The largest unit in which the activation is at least 1, and how many of it make a GB.

    The solvers' memory grid resolves 1e-6 of the unit, so a small stack's few kB must not
    be written as GB."""
    for unit, per_gb in MEMORY_UNITS:
        if activation_gb * per_gb >= 1:
            return unit, per_gb
    return MEMORY_UNITS[-1]


def profile_document(shape: LayerShape, device: str, name: str, repeats: int = 5, dtype: str = "float32",
                     backward: str = "products", probe: Callable | None = None) -> dict:
    """A profile in the models/ format, with hardware, torch version and settings recorded.
    With `backward="torch"` the pipe's first stage, whose input needs no gradient, has its own
    record; with `probe` (runtime_probe.probe_runtime) the times are as torch's runtime runs them."""
    torch = _torch()
    if probe is not None and (device, dtype, backward) != ("cpu", "float32", "torch"):
        raise UsageError("--probe-runtime runs torch's pipeline runtime on CPU ranks in float32 and needs its "
                         f"split backward timed (--backward torch); this profile is {device}, {dtype}, "
                         f"--backward {backward}")
    costs = measure(shape, device, repeats, dtype=dtype, backward=backward)
    first = costs.pop("first", None)
    runtime = None
    if probe is not None:
        runtime = probe(shape, costs, first)
        runtime["alone"] = {kind: costs[kind] for kind in ("F", "B", "W", "BW")}
        factors = runtime["factors"]
        for kind in ("F", "B", "W", "BW"):
            costs[kind] *= factors[kind]
            first[kind] *= factors["W" if kind == "BW" else kind]  # the first stage's BW is its W, all of it
    unit, per_gb = memory_unit(costs["activation"])
    costs["activation"] *= per_gb
    costs["residual"] *= per_gb
    costs["checkpoint"] *= per_gb
    hardware = torch.cuda.get_device_name() if device == "cuda" else (platform.processor() or platform.machine())
    split = "torch.distributed.pipelining's split backward" if backward == "torch" else "B and W split by hand"
    document: dict[str, Any] = {
        "name": name,
        "source": (f"measured by zbsolve profile on {device} ({hardware}), torch {torch.__version__}, {dtype}, "
                   f"{split}: median of {repeats} runs after 2 warm-ups, per rank-stage of {shape.layers} "
                   "GPT layers"),
        "time_unit": "ms",
        "memory_unit": unit,
        "costs": {k: float(f"{v:.6g}") for k, v in costs.items()},
        "model": {"layers": shape.layers, "hidden": shape.hidden, "heads": shape.heads,
                  "sequence": shape.sequence, "microbatch_size": shape.microbatch_size,
                  "hardware": hardware},
        "measured": {"device": device, "dtype": dtype, "torch": torch.__version__,
                     "python": platform.python_version(), "repeats": repeats, "threads": torch.get_num_threads(),
                     "backward": backward, **_matmul_settings(torch, device, dtype)},
    }
    if first is not None:
        document["first_stage"] = {k: float(f"{v:.6g}") for k, v in first.items()}
    if runtime is not None:  # from runtime_probe: what torch's runtime adds to the ops alone
        document["op_overhead"] = float(f"{runtime['op_overhead']:.6g}")
        document["comm"] = float(f"{runtime['comm']:.6g}")
        document["measured"]["runtime_probe"] = {
            k: ({kind: float(f"{x:.4g}") for kind, x in v.items()} if isinstance(v, dict) else v)
            for k, v in runtime.items() if k not in ("op_overhead", "comm")}
        document["source"] += f", as torch's runtime ran them on {runtime['ranks']} CPU ranks (--probe-runtime)"
    return document


def _matmul_settings(torch, device: str, dtype: str) -> dict:
    """What decides float32 matrix products' speed on a GPU: TF32 (off by default) runs them
    several times faster at lower precision, so a profile says which it measured."""
    if device != "cuda" or dtype != "float32":
        return {}
    return {"tf32": bool(torch.backends.cuda.matmul.allow_tf32)}
