"""F, B and W timed the way torch.distributed.pipelining runs a split backward.

torch's runtime computes B with `stage_backward_input` (the input gradient, the graph kept,
the gradients at the weights' consumers noted) and W with `stage_backward_weight` (autograd
again from those gradients to the weights), which costs more than the bare weight products
the default profile times, and more than its fused backward (`stage_backward`, which
1F1B runs), so that is timed too. On the first stage the input needs no gradient: torch
skips B there and W runs the whole backward, so that stage is timed on its own.
"""

from __future__ import annotations

import statistics

from zbsolve.errors import UsageError


def split_times(torch, stack, x, grad_out, timed, repeats: int, warmup: int) -> dict:
    """Median F, B, W and fused BW in ms of a stage whose input needs a gradient, and under
    "first" of the first stage, whose input does not."""
    try:
        from torch.distributed.pipelining._backward import (
            stage_backward,
            stage_backward_input,
            stage_backward_weight,
        )
    except ImportError:
        raise UsageError(f"--backward torch needs torch.distributed.pipelining's split backward, which torch "
                         f"{torch.__version__} does not have; torch 2.13.0 does") from None

    params = list(stack.parameters())
    for p in params:
        p.requires_grad_(True)

    def one_round(first: bool) -> tuple[float, float, float, float]:
        value = x.detach().requires_grad_(not first)
        f_ms = timed(lambda: stack(value))
        out = timed.last
        if first:  # torch skips B here; W runs the full backward, which is also its fused BW
            w_ms = timed(lambda: stage_backward([out], [grad_out], [value]))
            return f_ms, 0.0, w_ms, w_ms
        b_ms = timed(lambda: stage_backward_input([out], [grad_out], [value], iter(params)))
        groups = timed.last[1]
        w_ms = timed(lambda: stage_backward_weight(iter(params), groups))
        again = stack(value)  # a fused backward (1F1B's) of another forward
        bw_ms = timed(lambda: stage_backward([again], [grad_out], [value]))
        return f_ms, b_ms, w_ms, bw_ms  # gradients accumulate, as over a step's microbatches

    result: dict = {}
    for first in (False, True):
        rounds = [one_round(first) for _ in range(warmup + repeats)][warmup:]
        medians = {kind: statistics.median(r[i] for r in rounds) for i, kind in enumerate(("F", "B", "W", "BW"))}
        if first:
            result["first"] = medians
        else:
            result |= medians
    return result
