"""The memory limit as one cumulative per device, shared by the whole model and the device
relaxations (`relaxed`); the counted form (`counted`) restates the same limit."""

from __future__ import annotations

from ortools.sat.python import cp_model

from zbsolve.problem.op_kinds import holds
from zbsolve.solvers.view import ProblemView

from .hints import Derived, lasting


def add_memory(model: cp_model.CpModel, data: ProblemView, start: dict, end: dict, derived: Derived,
               horizon: int, devices: list[int] | None = None) -> None:
    """Memory held as the op-kind table's holds say (activation from F's start to B's end,
    residual until W's end; docs/design.md, "Memory"), on `devices` (default: all; a
    relaxation may keep only some)."""
    H = horizon
    kinds = holds(data.split)
    for d in range(len(data.device_ops)) if devices is None else devices:
        intervals, demands = [], []
        for op in data.device_ops[d]:
            for hold in kinds:
                if op.kind != hold.taken:
                    continue
                release = op.with_kind(hold.given)
                amount = data.memory_effect[release][1]  # what it gives back: the hold's amount
                if amount <= 0:
                    continue
                size = model.new_int_var(0, H, f"m{op}{release.kind}")
                derived.append((size, lasting(op, release)))
                intervals.append(model.new_interval_var(start[op], size, end[release], f"mem{op}{release.kind}"))
                demands.append(amount)
        if intervals:
            model.add_cumulative(intervals, demands, data.limits[d])
