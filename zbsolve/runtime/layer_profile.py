"""`zbsolve profile --per-layer`: a model measured layer by layer (docs/runtime.md), the
embedding and the LM head with its loss as layers of their own, for `--partition`.

The transformer layers are alike, so one is measured (as `profiling.measure` times a stack)
and given to each. The embedding is a lookup: F gathers rows, B is 0 (its input, token ids,
takes no gradient) and W is the table's gradient, a scatter-add of the output gradient. The
head is the final LayerNorm, the output projection and the cross-entropy loss: F runs all
three, B the loss's gradient back to the head's input with the weights frozen, W the
projection's weight-gradient product (the norm's gains are left out: a few hundred values).
"""

from __future__ import annotations

import platform
import statistics
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from zbsolve.errors import UsageError

from .profiling import LayerShape, _one_step, _saved_bytes, _Timer, _torch, measure, memory_unit


def per_layer_costs(shape: LayerShape, vocab: int, device: str = "cpu", repeats: int = 5, warmup: int = 2,
                    dtype: str = "float32") -> list[dict]:
    """One record per layer (name, modules, F, B, W in ms, activation and residual in GB)."""
    if isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 2:
        raise UsageError(f"--vocab must be an integer >= 2, got {vocab!r}")
    block = measure(replace(shape, layers=1), device, repeats, warmup, dtype=dtype)
    torch = _torch()
    element = getattr(torch, dtype)
    where = torch.device(device)
    try:
        embedding = _measure_embedding(torch, shape, vocab, where, element, repeats, warmup)
        head = _measure_head(torch, shape, vocab, where, element, repeats, warmup)
    except (torch.OutOfMemoryError, MemoryError):
        raise UsageError(_too_big(vocab, device)) from None
    except RuntimeError as error:  # the CPU allocator reports failure as a plain RuntimeError
        if "allocate memory" not in str(error):
            raise
        raise UsageError(_too_big(vocab, device)) from None
    layer = {k: block[k] for k in ("F", "B", "W", "activation", "residual")}
    return ([{"name": "tok_embeddings", **embedding}]
            + [{"name": f"layers.{i}", **layer} for i in range(shape.layers)]
            + [{"name": "lm_head", "modules": ["norm", "lm_head"], **head}])


def _too_big(vocab: int, device: str) -> str:
    return (f"the embedding or the head with {vocab} words does not fit in {device} memory (its logits take "
            "microbatch x sequence x vocab values): use a smaller --vocab, sequence or microbatch")


def _median_runs(runs: Sequence[Sequence[float]], warmup: int) -> list[float]:
    kept = runs[warmup:]
    return [statistics.median(r[i] for r in kept) for i in range(len(kept[0]))]


def _measure_embedding(torch, shape: LayerShape, vocab: int, device, element, repeats: int, warmup: int) -> dict:
    torch.manual_seed(0)
    table = torch.nn.Embedding(vocab, shape.hidden).to(device=device, dtype=element)
    tokens = torch.randint(0, vocab, (shape.microbatch_size, shape.sequence), device=device)
    grad_out = torch.randn(shape.microbatch_size, shape.sequence, shape.hidden, device=device, dtype=element)
    timed = _Timer(torch, device)
    runs = []
    for _ in range(warmup + repeats):
        f_ms = timed(lambda: table(tokens))
        out = timed.last
        w_ms = timed(partial(torch.autograd.grad, out, table.weight, grad_out))
        runs.append((f_ms, w_ms))
    f_ms, w_ms = _median_runs(runs, warmup)
    kept = tokens.numel() * tokens.element_size() / 1e9  # W needs the ids, nothing else of F
    return {"F": f_ms, "B": 0.0, "W": w_ms, "activation": kept, "residual": kept}


def _head(torch, hidden: int, vocab: int, labels) -> Any:
    """The final norm, the projection and the loss, as one module whose output is the loss."""
    nn = torch.nn
    Module: Any = nn.Module

    class Head(Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(hidden)
            self.lm_head = nn.Linear(hidden, vocab, bias=False)

        def forward(self, x):
            logits = self.lm_head(self.norm(x))
            return nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())

    return Head()


def _measure_head(torch, shape: LayerShape, vocab: int, device, element, repeats: int, warmup: int) -> dict:
    torch.manual_seed(0)
    labels = torch.randint(0, vocab, (shape.microbatch_size, shape.sequence), device=device)
    head = _head(torch, shape.hidden, vocab, labels).to(device=device, dtype=element)
    x = torch.randn(shape.microbatch_size, shape.sequence, shape.hidden, device=device, dtype=element,
                    requires_grad=True)
    weights = {p.untyped_storage().data_ptr() for p in head.parameters()}
    activation = _saved_bytes(torch, lambda: head(x), weights)
    for p in head.parameters():
        p.requires_grad_(False)  # B is the input gradient only; W is timed on its own
    timed = _Timer(torch, device)
    one = torch.ones((), device=device)
    runs = [_one_step(torch, head, [head.lm_head], x, one, timed) for _ in range(warmup + repeats)]
    f_ms, b_ms, w_ms, residual = _median_runs(runs, warmup)
    return {"F": f_ms, "B": b_ms, "W": w_ms, "activation": max(activation, residual) / 1e9,
            "residual": residual / 1e9}


def per_layer_document(shape: LayerShape, vocab: int, device: str, name: str, repeats: int = 5,
                       dtype: str = "float32") -> dict:
    """A profile that lists layers (`layers` in the models/ format)."""
    torch = _torch()
    layers = per_layer_costs(shape, vocab, device, repeats, dtype=dtype)
    unit, per_gb = memory_unit(max(layer["activation"] for layer in layers))
    for layer in layers:
        for key in ("F", "B", "W"):
            layer[key] = float(f"{layer[key]:.6g}")
        for key in ("activation", "residual"):
            layer[key] = float(f"{layer[key] * per_gb:.6g}")
    hardware = torch.cuda.get_device_name() if device == "cuda" else (platform.processor() or platform.machine())
    return {
        "name": name,
        "source": (f"measured by zbsolve profile --per-layer on {device} ({hardware}), torch {torch.__version__}, "
                   f"{dtype}, B and W split by hand: median of {repeats} runs after 2 warm-ups; one GPT layer "
                   f"measured and given to each of the {shape.layers}, the embedding and the LM head with its "
                   "loss measured apart"),
        "time_unit": "ms",
        "memory_unit": unit,
        "layers": layers,
        "model": {"layers": shape.layers, "hidden": shape.hidden, "heads": shape.heads, "sequence": shape.sequence,
                  "microbatch_size": shape.microbatch_size, "vocabulary": vocab, "hardware": hardware},
        "measured": {"device": device, "dtype": dtype, "torch": torch.__version__, "repeats": repeats,
                     "threads": torch.get_num_threads(), "per_layer": True},
    }
