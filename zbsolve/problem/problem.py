"""The problem as plain data (docs/design.md, "The problem"): ranks, pipes of stages, costs, limits.

Everything is checked when a Problem is built; a bad value raises ProblemError naming the
field and the allowed range. Nothing here knows about ops, solvers or files.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property

from zbsolve.errors import ProblemError, ProblemWarning
from zbsolve.problem.op_kinds import LEVERS, check_levers

OBJECTIVES = ("makespan", "span")


def finite(value: object) -> float | None:
    """value as a float if it is a finite real number (not a bool), else None. An integer
    too large for a float (JSON allows any length) is not finite here, not an OverflowError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def check_number(name: str, value: object, *, minimum: float = 0.0, strict: bool = False) -> float:
    """Return value as a float, or raise ProblemError naming `name` and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProblemError(f"{name} must be a number, got {value!r}")
    number = finite(value)
    if number is None:
        raise ProblemError(f"{name} must be a finite number, got {value!r}")
    if number < minimum or (strict and number == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ProblemError(f"{name} must be {bound}, got {value!r}")
    return number


def check_count(name: str, value: object, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProblemError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ProblemError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class StageCost:
    """Durations of one stage's ops and the memory its forward holds (docs/design.md, "The problem")."""

    F: float
    B: float
    W: float
    activation: float = 1.0
    residual: float = 0.5
    fused: float | None = None  # a fused backward's own time ("BW" in files), where it is not B + W
    # the recompute lever (docs/design.md, "Memory levers"): R's time (None: the F's) and what
    # a recomputed forward keeps until its R (the stage's input, or a profile's measure)
    recompute: float | None = None
    checkpoint: float = 0.0
    # the offload lever: one copy of the activation between device and host, each way (the
    # activation's bytes over the host bandwidth); None: not given (the lever needs it)
    offload: float | None = None

    @property
    def recompute_time(self) -> float:
        return self.F if self.recompute is None else self.recompute

    def checked(self, where: str) -> StageCost:
        values = {k: check_number(f"{where}.{k}", getattr(self, k)) for k in ("F", "B", "W")}
        if self.fused is not None:
            values["fused"] = check_number(f"{where}.BW", self.fused)
        if self.recompute is not None:  # > 0: like an F, an R takes memory at its start
            values["recompute"] = check_number(f"{where}.recompute", self.recompute, strict=True)
        if self.offload is not None:
            values["offload"] = check_number(f"{where}.offload", self.offload, strict=True)  # > 0: see F
        activation = check_number(f"{where}.activation", self.activation)
        residual = check_number(f"{where}.residual", self.residual)
        if residual > activation:
            raise ProblemError(
                f"{where}.residual must be <= activation ({activation:g}), got {residual:g}"
            )
        checkpoint = check_number(f"{where}.checkpoint", self.checkpoint)
        if checkpoint > activation:
            raise ProblemError(
                f"{where}.checkpoint must be <= activation ({activation:g}), got {checkpoint:g}"
            )
        if values["F"] == 0:
            # A forward of no length would take its memory at an instant other ops of no
            # length share: their order would decide the peak, which the models cannot see.
            raise ProblemError(f"{where}.F must be > 0, got 0")
        return StageCost(**values, activation=activation, residual=residual, checkpoint=checkpoint)

    def backward_time(self, split_backward: bool) -> float:
        """A fused backward's (BW's) time: its own where the problem fuses B and W and one is
        given (a runtime may fuse them more cheaply than it splits them), else B + W. A
        problem that splits them times BW as B + W, so its bounds hold for every schedule."""
        return self.fused if self.fused is not None and not split_backward else self.B + self.W

    def time(self, kind: str, split_backward: bool) -> float:
        """An op's time by kind (F, B, W, BW, FC, R, FO, O or L) in a problem that does or does not split B and W."""
        if kind == "BW":
            return self.backward_time(split_backward)
        if kind == "R":
            return self.recompute_time
        if kind in ("O", "L"):
            return self.offload or 0.0
        return self.F if kind in ("FC", "FO") else getattr(self, kind)

    def with_overhead(self, overhead: float) -> StageCost:
        """Each op's time plus a runtime's per-op overhead; a fused backward is one op, so it
        gets one overhead where B and W get one each."""
        fused = self.fused if self.fused is not None else self.B + self.W
        return replace(self, F=self.F + overhead, B=self.B + overhead, W=self.W + overhead, fused=fused + overhead,
                       recompute=None if self.recompute is None else self.recompute + overhead)  # copies run beside

    def scaled(self, factor: float) -> StageCost:
        """The costs of `factor` times the layers (a chunk of a rank-stage, or another rank count).
        The checkpoint, the stage's input, does not grow or shrink with its layers."""
        return StageCost(
            self.F * factor, self.B * factor, self.W * factor,
            self.activation * factor, self.residual * factor,
            None if self.fused is None else self.fused * factor,
            None if self.recompute is None else self.recompute * factor,
            min(self.checkpoint, self.activation * factor),
            None if self.offload is None else self.offload * factor,  # the bytes scale with the activation
        )


@dataclass(frozen=True)
class Stage:
    device: int
    cost: int  # index into Problem.stage_costs


@dataclass(frozen=True)
class Pipe:
    stages: tuple[Stage, ...]
    microbatches: tuple[int, ...]

    @cached_property
    def microbatch_set(self) -> frozenset[int]:
        """For membership tests in O(1): schedules of a million ops check every op."""
        return frozenset(self.microbatches)


TIME_UNIT_LENGTH = 32


@dataclass(frozen=True)
class Problem:
    """A fully explicit problem. Build named placements with `zbsolve.problem.placements`."""

    devices: int
    microbatches: int
    stage_costs: tuple[StageCost, ...]
    pipes: tuple[Pipe, ...]
    comm: float = 0.0
    memory_limit: tuple[float, ...] | None = None
    split_backward: bool = True
    fb_overlap: float | None = None
    objective: str = "makespan"
    time_unit: str = "ms"
    # the memory levers its schedules may use (op_kinds.LEVERS; docs/design.md, "Memory levers")
    levers: tuple[str, ...] = ()
    placement: str = field(default="custom", compare=False)
    memory_unit_name: str | None = field(default=None, compare=False)  # what activation amounts count: GB, MB
    # the share of every op's time in stage_costs that is a runtime's per-op overhead; read
    # where chunks are summed into one rank-stage, which runs as one op (the 1F1B reference)
    op_overhead: float = field(default=0.0, compare=False)
    # the profile the costs came from, as `Profile.fingerprint` names it: a plan is run with its own
    profile: str | None = field(default=None, compare=False)
    # where the costs are a profile's layers grouped into stages: layers per stage (in the order
    # the stage costs are indexed) and the modules each stage holds (docs/design.md, "Layer partitions")
    partition: tuple[int, ...] | None = field(default=None, compare=False)
    stage_modules: tuple[tuple[str, ...], ...] | None = field(default=None, compare=False)

    def _check_partition(self) -> None:
        stages = len(self.stage_costs)
        if self.partition is not None:
            split = tuple(self.partition)
            if len(split) != stages or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1
                                               for n in split):
                raise ProblemError(f"partition must give at least one layer for each of {stages} stages, "
                                   f"got {list(split)}")
            object.__setattr__(self, "partition", split)
        if self.stage_modules is not None:
            modules = tuple(tuple(names) for names in self.stage_modules)
            if len(modules) != stages or not all(names and all(isinstance(m, str) and m for m in names)
                                                 for names in modules):
                raise ProblemError(f"stage_modules must name the modules of each of {stages} stages")
            object.__setattr__(self, "stage_modules", modules)

    def __post_init__(self) -> None:
        check_count("devices", self.devices)
        check_count("microbatches", self.microbatches)
        if not self.stage_costs:
            raise ProblemError("stage_costs must hold at least one cost record")
        costs = tuple(c.checked(f"stage_costs[{i}]") for i, c in enumerate(self.stage_costs))
        object.__setattr__(self, "stage_costs", costs)
        object.__setattr__(self, "comm", check_number("comm", self.comm))
        object.__setattr__(self, "op_overhead", check_number("op_overhead", self.op_overhead))
        self._check_pipes()
        if self.memory_limit is not None:
            limits = tuple(self.memory_limit)
            if len(limits) != self.devices:
                raise ProblemError(
                    f"memory_limit must give one value per device ({self.devices}), "
                    f"got {len(limits)}"
                )
            limits = tuple(
                check_number(f"memory_limit[{d}]", v, strict=True) for d, v in enumerate(limits)
            )
            object.__setattr__(self, "memory_limit", limits)
        if self.fb_overlap is not None:
            object.__setattr__(
                self, "fb_overlap", check_number("fb_overlap", self.fb_overlap, strict=True)
            )
        if self.objective not in OBJECTIVES:
            raise ProblemError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        levers = tuple(self.levers) if isinstance(self.levers, (list, tuple)) else None
        if levers is None or not all(isinstance(lever, str) for lever in levers):
            raise ProblemError(f"levers must be a list of names, got {self.levers!r}")
        try:
            check_levers(levers)
        except ValueError as bad:
            raise ProblemError(str(bad)) from None
        object.__setattr__(self, "levers", tuple(sorted(set(levers), key=LEVERS.index)))
        missing = [i for i, c in enumerate(costs) if c.offload is None]
        if "offload" in self.levers and missing:
            raise ProblemError(f"the offload lever needs each stage's copy time (stage_costs[{missing[0]}].offload; "
                               "on the command line --offload or --host-bandwidth)")
        if not isinstance(self.split_backward, bool):
            raise ProblemError(f"split_backward must be true or false, got {self.split_backward!r}")
        self._check_partition()
        unit = self.time_unit
        # it is printed in every table header and line: a newline or blank breaks them
        if not isinstance(unit, str) or not unit.strip() or not unit.isprintable() or len(unit) > TIME_UNIT_LENGTH:
            shown = repr(unit) if not isinstance(unit, str) or len(unit) <= 40 else repr(unit[:40]) + "..."
            raise ProblemError(f"time_unit must be a short printable name such as ms or us (at most "
                               f"{TIME_UNIT_LENGTH} characters), got {shown}")
        name = self.memory_unit_name
        if name is not None and (not isinstance(name, str) or not name.strip() or not name.isprintable()
                                 or len(name) > TIME_UNIT_LENGTH):
            raise ProblemError(f"memory_unit_name must be a short printable name such as GB, got {name!r}")
        warning = self.overlap_warning()
        if warning:  # allowed (the model and validator handle any length), but say why it misleads
            warnings.warn(warning, ProblemWarning, stacklevel=3)

    def _check_pipes(self) -> None:
        if not self.pipes:
            raise ProblemError("pipes must hold at least one pipe")
        seen: list[int] = []
        for q, pipe in enumerate(self.pipes):
            if not pipe.stages:
                raise ProblemError(f"pipes[{q}].stages must not be empty")
            if not pipe.microbatches:  # it would do no work, and its devices none either
                raise ProblemError(f"pipes[{q}] has no microbatches; leave the pipe out")
            for k, stage in enumerate(pipe.stages):
                if not (isinstance(stage.device, int) and 0 <= stage.device < self.devices):
                    raise ProblemError(
                        f"pipes[{q}].stages[{k}].device must be in 0..{self.devices - 1}, "
                        f"got {stage.device!r}"
                    )
                if not (isinstance(stage.cost, int) and 0 <= stage.cost < len(self.stage_costs)):
                    raise ProblemError(
                        f"pipes[{q}].stages[{k}].cost must index stage_costs "
                        f"(0..{len(self.stage_costs) - 1}), got {stage.cost!r}"
                    )
            seen.extend(pipe.microbatches)
        # Counts first: a huge `microbatches` or `devices` (a hand-edited file) must not build a range.
        if len(seen) != self.microbatches or sorted(seen) != list(range(self.microbatches)):
            raise ProblemError(
                f"pipes' microbatches must assign each id 0..{self.microbatches - 1} "
                "to exactly one pipe"
            )
        used = {s.device for pipe in self.pipes for s in pipe.stages}
        if len(used) != self.devices:
            idle = next(d for d in range(self.devices) if d not in used)
            raise ProblemError(f"every device must hold a stage; device {idle} holds none")

    # Derived facts used by metrics, baselines and the CLI.

    def cost(self, pipe: int, stage: int) -> StageCost:
        return self.stage_costs[self.pipes[pipe].stages[stage].cost]

    def activation_per_device(self, q: int) -> list[float]:
        """The activation one microbatch of pipe q leaves on each device (its stages summed)."""
        per_device = [0.0] * self.devices
        for stage in self.pipes[q].stages:
            per_device[stage.device] += self.stage_costs[stage.cost].activation
        return per_device

    def activation_unit(self) -> float:
        """A: the largest activation one microbatch of one pipe leaves on one device."""
        return max(max(self.activation_per_device(q)) for q in range(len(self.pipes)))

    def one_f_one_b_peaks(self) -> list[float]:
        """Each device's own 1F1B peak on the single chain: min(P - d, M) microbatches of the
        activation one microbatch of the first pipe leaves on device d."""
        return [min(self.devices - d, self.microbatches) * a for d, a in enumerate(self.activation_per_device(0))]

    def one_f_one_b_peak(self) -> float:
        """U, the `x` of memory limits (docs/design.md, "Memory limits"): 1F1B's peak, the most
        any device holds under 1F1B on the single chain; P x A for a custom problem, which has none."""
        if self.placement == "custom":
            return self.devices * self.activation_unit()
        return max(self.one_f_one_b_peaks())

    def memory_text(self, amount: float) -> str:
        """An amount of memory as messages give it: absolute, then in U ("40.8 GB (1.5x U)")."""
        unit = f" {self.memory_unit_name}" if self.memory_unit_name else ""
        return f"{amount:g}{unit} ({amount / self.one_f_one_b_peak():.4g}x U)"

    def stages_on_device(self) -> list[list[tuple[int, int]]]:
        """(pipe, stage) pairs held by each device, in pipe then stage order."""
        held: list[list[tuple[int, int]]] = [[] for _ in range(self.devices)]
        for q, pipe in enumerate(self.pipes):
            for k, stage in enumerate(pipe.stages):
                held[stage.device].append((q, k))
        return held

    def overlap_range(self) -> tuple[float, float] | None:
        """Over the F&B pairs that may form (an F and a backward of another stage on the same
        device, docs/design.md, "F&B overlap"): the longest half of any, max(F, B + W), and the longest run of
        both halves in turn, F + B + W (a pair absorbs its backward's W). An `fb_overlap` below
        the first makes some pair faster than its own longer half; at or above the second no
        pair saves time. None when no device holds two stages."""
        halves, in_turn = [], []
        for held in self.stages_on_device():
            for forward_stage in held:
                for backward_stage in held:
                    if forward_stage != backward_stage:
                        forward, backward = self.cost(*forward_stage), self.cost(*backward_stage)
                        halves.append(max(forward.F, backward.B + backward.W))
                        in_turn.append(forward.F + backward.B + backward.W)
        return (max(halves), max(in_turn)) if halves else None

    def overlap_warning(self, given: str = "fb_overlap") -> str | None:
        """Why an `fb_overlap` outside the range of docs/design.md ("F&B overlap") gives
        numbers that mislead, if it does;
        `given` names the setting as the user wrote it."""
        if self.fb_overlap is None:
            return None
        given = f"{given} {self.fb_overlap:g}"
        span = self.overlap_range()
        if span is None:
            return (f"{given} has no effect: no device holds two stages, so no F&B pair can form "
                    "(pairs need placement bidirectional, vshape or interleaved:N)")
        longest_half, in_turn = span
        if self.fb_overlap < longest_half:
            return (f"{given} is shorter than the longer half of a pair that may form (max(F, B + W) = "
                    f"{longest_half:g}): such a pair runs faster than its parts alone could, so times "
                    "that use it are optimistic")
        if self.fb_overlap >= in_turn:
            return (f"{given} is no shorter than any pair's halves run in turn (F + B + W = {in_turn:g} "
                    "at most): overlapping cannot save time")
        return None
