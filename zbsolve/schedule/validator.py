"""Independent check of a schedule against docs/design.md, "Semantics" and "Metrics".

Written apart from the simulator, the op graph and the solvers on purpose: it re-derives
every rule from the problem's pipes and cost records, so a bug in shared code cannot
make a wrong schedule pass. Works on the floats of the schedule with a small tolerance.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NoReturn

from zbsolve.errors import ValidationError
from zbsolve.schedule.schedule import Schedule, TimedOp

RELATIVE_TOLERANCE = 1e-9
# docs/design.md, "Time": values that no grid of zbsolve's holds exactly (more than six decimals, say)
# are put on 10^-6 of their unit: a cost, delay or pair length may then be off by half a
# step, an activation or residual held by up to a step less than it is. Nothing beyond that
# passes.
ROUNDING = 0.5e-6
MEMORY_ROUNDING = 1e-6


def _name(t: TimedOp, device: int) -> str:
    op = t.op
    return (
        f"{op.kind} pipe {op.pipe} stage {op.stage} microbatch {op.microbatch} "
        f"on device {device} [{t.start:g}, {t.end:g}]"
    )


# The rules in the validator's own words, apart from the op-kind table the solvers read
# (zbsolve/problem/op_kinds.py); tests/problem/test_op_kinds.py holds the two together.


FORWARDS = ("F", "FC", "FO")  # a microbatch's forward at a stage: plain, keeping its checkpoint, or offloaded
COPIES = {"O": "device-to-host", "L": "host-to-device"}  # the offload lever's copies and their channels


def needs(kind: str, stage: int, stages: int) -> list[tuple[tuple[str, ...], int]]:
    """What an op of `kind` at `stage` of a pipe of `stages` waits for: (kinds, stage) pairs,
    any one of the kinds of that stage and the same microbatch having ended. (A backward
    whose microbatch was recomputed or offloaded also waits for its R or its L: see
    `_Checker.dependencies`.)"""
    if kind in FORWARDS:
        return [] if stage == 0 else [(FORWARDS, stage - 1)]
    if kind == "R":  # recomputation: after its own forward
        return [(("FC",), stage)]
    if kind == "O":  # the copy to host: after the forward that made the activation
        return [(("FO",), stage)]
    if kind == "L":  # the copy back: after the copy to host
        return [(("O",), stage)]
    if kind == "W":
        return [(("B",), stage)]
    if stage == stages - 1:  # B or BW of the last stage: after its own forward
        return [(FORWARDS, stage)]
    return [(("B", "BW"), stage + 1)]


def memory_change(kind: str, activation: float, residual: float, checkpoint: float = 0.0) -> tuple[float, float]:
    """(allocated at the op's start, released at its end): F holds its activation, FC only its
    checkpoint and its R the rest; FO holds its activation until its copy O to host ends, and
    L holds it again from its start; B frees all but the residual, W the residual, BW all of it."""
    if kind in ("F", "FO", "L"):
        return activation, 0.0
    if kind == "O":
        return 0.0, activation
    if kind == "FC":
        return checkpoint, 0.0
    if kind == "R":
        return activation - checkpoint, 0.0
    return 0.0, {"B": activation - residual, "W": residual, "BW": activation}[kind]


class _Checker:
    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.problem = schedule.problem
        # Float noise grows with the schedule's own extent, not with where it lies in time: a
        # tolerance taken from absolute times let wrong ops pass in a schedule shifted far out.
        times = [x for ops in schedule.devices for t in ops for x in (t.start, t.end)]
        extent = max(times) - min(times) if times else 0.0
        self.tol = RELATIVE_TOLERANCE * max(1.0, extent)
        self.where: dict[tuple, tuple[TimedOp, int]] = {}

    def fail(self, t: TimedOp, device: int, why: str) -> NoReturn:
        raise ValidationError(f"{_name(t, device)}: {why}")

    def cost(self, t: TimedOp):
        return self.problem.stage_costs[self.problem.pipes[t.op.pipe].stages[t.op.stage].cost]

    def run(self) -> None:
        self.structure()
        self.durations_and_pairs()  # starts before 0 and lengths against the costs
        self.one_at_a_time()
        self.dependencies()
        self.memory()
        self.metrics()
        self.solver_claims()

    def structure(self) -> None:
        problem = self.problem
        if len(self.schedule.devices) != problem.devices:
            raise ValidationError(
                f"schedule lists {len(self.schedule.devices)} devices, problem has {problem.devices}"
            )
        allowed = {"F", "BW"} | ({"B", "W"} if problem.split_backward else set()) \
            | ({"FC", "R"} if "recompute" in problem.levers else set()) \
            | ({"FO", "O", "L"} if "offload" in problem.levers else set())
        for d, ops in enumerate(self.schedule.devices):
            for t in ops:
                op = t.op
                if op.kind not in allowed:
                    self.fail(t, d, f"kind {op.kind} is not allowed (allowed: {sorted(allowed)})")
                if not 0 <= op.pipe < len(problem.pipes) or not 0 <= op.stage < len(
                    problem.pipes[op.pipe].stages
                ) or op.microbatch not in problem.pipes[op.pipe].microbatch_set:
                    self.fail(t, d, "is not an op of this problem")
                home = problem.pipes[op.pipe].stages[op.stage].device
                if home != d:
                    self.fail(t, d, f"its stage lives on device {home}")
                key = (op.kind, op.pipe, op.stage, op.microbatch)
                if key in self.where:
                    self.fail(t, d, "appears twice")
                self.where[key] = (t, d)
        for q, pipe in enumerate(problem.pipes):
            for k in range(len(pipe.stages)):
                for i in pipe.microbatches:
                    present = {kind for kind in ("F", "B", "W", "BW", "FC", "R", "FO", "O", "L")
                               if (kind, q, k, i) in self.where}
                    name = f"pipe {q} stage {k} microbatch {i}"
                    forwards = sorted(present & set(FORWARDS))
                    if not forwards:
                        raise ValidationError(f"F {name} is missing")
                    if len(forwards) > 1:
                        raise ValidationError(f"{name} has {' and '.join(forwards)}: one forward (F, FC recomputed "
                                              "or FO offloaded)")
                    for kind in ("O", "L"):
                        if ("FO" in present) != (kind in present):
                            said = f"{kind} {name} is missing" if "FO" in present else f"{name} has an {kind}"
                            raise ValidationError(f"{said}: an offloaded forward (FO), its copy to host (O) and its "
                                                  "copy back (L) come together")
                    if ("FC" in present) != ("R" in present):
                        raise ValidationError(f"{'R' if 'FC' in present else 'FC'} {name} is missing: a recomputed "
                                              "forward (FC) and its recomputation (R) come together")
                    if "BW" in present and present & {"B", "W"}:
                        raise ValidationError(f"{name} has both a fused BW and a split B/W")
                    for kind in ("B", "W"):
                        if "BW" not in present and kind not in present:
                            raise ValidationError(f"{kind if present & {'B', 'W'} else 'BW'} {name} is missing")

    def durations_and_pairs(self) -> None:
        problem = self.problem
        pairs: dict[tuple[int, int], list[TimedOp]] = defaultdict(list)
        for d, ops in enumerate(self.schedule.devices):
            for t in ops:
                if t.start < -self.tol:
                    self.fail(t, d, "starts before time 0")
                if t.overlap is not None:
                    pairs[(d, t.overlap)].append(t)
                    continue
                c = self.cost(t)
                expected = c.time(t.op.kind, problem.split_backward)
                rounded = 2 if t.op.kind == "BW" else 1  # a fused backward may be B + W, each rounded
                if abs((t.end - t.start) - expected) > self.tol + rounded * ROUNDING:
                    self.fail(t, d, f"lasts {t.end - t.start:g}, its cost is {expected:g}")
        for (d, _), members in pairs.items():
            first = members[0]
            if problem.fb_overlap is None:
                self.fail(first, d, "is marked overlapped but the problem has no fb_overlap")
            if len(members) != 2:
                self.fail(first, d, f"overlap group has {len(members)} ops, not an F&B pair")
            a, b = members
            kinds = sorted([a.op.kind, b.op.kind])
            if kinds not in (["B", "F"], ["BW", "F"]):
                self.fail(first, d, f"an overlapped pair is one F and one B/BW, got {kinds}")
            if (a.op.pipe, a.op.stage) == (b.op.pipe, b.op.stage):
                self.fail(first, d, "an overlapped pair must be two different stages")
            if abs(a.start - b.start) > self.tol or abs(a.end - b.end) > self.tol:
                self.fail(first, d, "the halves of an overlapped pair must share start and end")
            if abs((a.end - a.start) - problem.fb_overlap) > self.tol + ROUNDING:
                self.fail(first, d, f"overlapped pair lasts {a.end - a.start:g}, fb_overlap is {problem.fb_overlap:g}")

    def one_at_a_time(self) -> None:
        """Compute ops one at a time in the listed order; each copy channel one copy at a time."""
        for d, ops in enumerate(self.schedule.devices):
            self.in_order(d, [t for t in ops if t.op.kind not in COPIES])
            for kind, channel in COPIES.items():
                copies = sorted((t for t in ops if t.op.kind == kind), key=lambda t: t.start)
                for before, t in zip(copies, copies[1:]):
                    if t.start < before.end - self.tol:
                        self.fail(t, d, f"runs at once with {_name(before, d)} on the {channel} channel, "
                                        "which carries one copy at a time")

    def in_order(self, d: int, ops: list[TimedOp]) -> None:
        previous: TimedOp | None = None
        for t in ops:
            if previous is not None:
                together = (
                    t.overlap is not None and t.overlap == previous.overlap
                )
                if not together and t.start < previous.end - self.tol:
                    if t.end <= previous.start + self.tol:
                        self.fail(t, d, f"is listed after {_name(previous, d)} but runs before it: "
                                        "a device's ops must be listed in the order they run")
                    self.fail(t, d, f"overlaps {_name(previous, d)} on the same device")
            previous = t

    def dependencies(self, comm: bool = True) -> None:
        problem = self.problem
        for d, ops in enumerate(self.schedule.devices):
            for t in ops:
                op = t.op
                stages = problem.pipes[op.pipe].stages
                q, k, i = op.pipe, op.stage, op.microbatch
                waits = needs(op.kind, k, len(stages))
                for back in ("R", "L"):
                    if op.kind in ("B", "BW") and (back, q, k, i) in self.where:
                        waits.append(((back,), k))  # its activation is back only once its R or L has run
                for kinds, stage in waits:
                    pred, pred_device = next(
                        self.where[(kind, q, stage, i)] for kind in kinds if (kind, q, stage, i) in self.where
                    )
                    delay = problem.comm if comm and stages[stage].device != stages[k].device else 0.0
                    slack = self.tol + (ROUNDING if delay else 0.0)
                    if t.start < pred.end + delay - slack:
                        self.fail(
                            t, d,
                            f"starts before {_name(pred, pred_device)} ends"
                            + (f" plus comm {delay:g}" if delay else ""),
                        )

    def device_peak(self, d: int, ops: tuple[TimedOp, ...]) -> tuple[float, float]:
        """Largest memory level (at equal times releases come before allocations), and how
        far it may be off by rounding: a step for each forward still holding memory."""
        events = []  # (time, allocation?, change in memory, change in forwards holding, op)
        for t in ops:
            c = self.cost(t)
            allocated, released = memory_change(t.op.kind, c.activation, c.residual, c.checkpoint)
            if t.op.kind in (*FORWARDS, "R", "L"):  # a forward starts holding (R and L add to it); W and BW end it
                events.append((t.start, 1, allocated, 1 if t.op.kind in FORWARDS else 0, t))
            else:
                events.append((t.end, 0, -released, -1 if t.op.kind in ("W", "BW") else 0, t))
        events.sort(key=lambda e: (e[0], e[1]))
        level = peak = 0.0
        holding = most_holding = 0
        limit = None if self.problem.memory_limit is None else self.problem.memory_limit[d]
        for _, _, change, held, t in events:
            level += change
            holding += held
            if limit is not None and level > limit * (1 + RELATIVE_TOLERANCE) + 1e-12 + holding * MEMORY_ROUNDING:
                self.fail(t, d, f"memory reaches {level:g}, above the limit {limit:g}")
            peak = max(peak, level)
            most_holding = max(most_holding, holding)
        return peak, most_holding * MEMORY_ROUNDING

    def memory(self) -> None:
        found = [self.device_peak(d, ops) for d, ops in enumerate(self.schedule.devices)]
        self.peaks = [peak for peak, _ in found]
        self.memory_slack = [slack for _, slack in found]  # per device: how far its reported peak may be off

    def times(self) -> None:
        """No op starts before the step (time 0) or ends before it starts."""
        for d, ops in enumerate(self.schedule.devices):
            for t in ops:
                if t.start < -self.tol:
                    self.fail(t, d, "starts before time 0, the step's start")
                if t.end < t.start - self.tol:
                    self.fail(t, d, "ends before it starts")

    def metrics(self, memory: bool = True) -> None:
        """The reported metrics are the ops' own; `memory` False for a run's, whose peaks were
        measured in bytes, not derived from the ops."""
        makespan = max(t.end for ops in self.schedule.devices for t in ops)
        # busy and span: the compute stream's (copies run beside it)
        devices = [[t for t in ops if t.op.kind not in COPIES] for ops in self.schedule.devices]
        busy = []
        for ops in devices:
            total, counted = 0.0, set()
            for t in ops:
                if t.overlap is None or t.overlap not in counted:
                    total += t.end - t.start
                if t.overlap is not None:
                    counted.add(t.overlap)
            busy.append(total)
        span = max(max(t.end for t in ops) - min(t.start for t in ops) for ops in devices)
        unit = self.problem.one_f_one_b_peak()
        expected = {
            "makespan": makespan,
            "bubble_rate": 1 - sum(busy) / (len(devices) * makespan) if makespan > 0 else 0.0,
            "span": span,
            "span_bubble_rate": 1 - max(busy) / span if span > 0 else 0.0,
        }
        if memory:
            expected["peak_memory_x"] = max(self.peaks) / unit if unit else 0.0  # U = 0: no activation anywhere
        reported = self.schedule.metrics
        slack = {"peak_memory_x": max(self.memory_slack) / unit if unit and memory else 0.0}
        for key, value in expected.items():
            if abs(getattr(reported, key) - value) > 1e-6 * max(1.0, abs(value)) + slack.get(key, 0.0):
                raise ValidationError(f"reported {key} {getattr(reported, key)!r} but the schedule gives {value!r}")
        checks = [("busy", busy, [0.0] * len(busy))]
        if memory:
            checks.append(("peak_memory", self.peaks, self.memory_slack))
        for key, values, slacks in checks:
            for d, value in enumerate(values):
                got = getattr(reported, key)[d]
                if abs(got - value) > 1e-6 * max(1.0, abs(value)) + slacks[d]:
                    raise ValidationError(f"reported {key}[{d}] {got!r} but the schedule gives {value!r}")


    def solver_claims(self) -> None:
        """What the file says of its own quality agrees with the schedule: its objective is the
        schedule's, no valid schedule lies below a lower bound, the gap is the one from that
        bound, and `optimal` comes with a bound that meets the value. (That the bound itself
        was proven cannot be checked here.)"""
        info, objective = self.schedule.solver, self.problem.objective
        metrics = self.schedule.metrics
        value = metrics.makespan if objective == "makespan" else metrics.span
        close = 1e-6 * max(1.0, abs(value))
        if info.objective is not None and abs(info.objective - value) > close:
            raise ValidationError(f"solver objective {info.objective:g} but the schedule's {objective} is {value:g}")
        if info.bound is not None and info.bound > value + close:
            raise ValidationError(f"solver bound {info.bound:g} is above the schedule's {objective} {value:g}, "
                                  "which a lower bound never is")
        if info.bound is not None and info.gap is not None and value and \
                abs(info.gap - (value - info.bound) / value) > 1e-6:
            raise ValidationError(f"solver gap {info.gap:g} but (value - bound) / value is "
                                  f"{(value - info.bound) / value:g}")
        if info.status == "optimal" and (info.bound is None or value - info.bound > close):
            raise ValidationError(f"solver status optimal, but its bound {info.bound!r} does not meet the "
                                  f"schedule's {objective} {value:g}")


def validate(schedule: Schedule) -> None:
    """Raise ValidationError naming the first violated op; return None when all holds.
    A measured schedule (what a run did) is held to what a run can keep: every op once on
    its device, within the step (from 0, no negative lengths), one at a time in the listed
    order, each after its inputs ended, and its time metrics those of its ops."""
    if any(not ops for ops in schedule.devices):
        raise ValidationError("a device lists no ops")
    checker = _Checker(schedule)
    if schedule.solver.status == "measured":
        checker.structure()
        checker.times()
        checker.one_at_a_time()
        checker.dependencies(comm=False)
        checker.metrics(memory=False)
        return
    checker.run()
