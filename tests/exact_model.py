"""The plainest CP-SAT model of the semantics (docs/design.md) for small problems: no
symmetry breaking, no implied edges, no bounds. Tests check zbsolve's lower bounds and its
`optimal` claims against it. At span one op starts at 0 (any op: zbsolve's models
anchor one of the ops that nothing leads to, a claim this model does not make).

F&B pairs are offered in every form the validator accepts: an F with a B or a whole
backward of another stage on its device; with split backward, a pair with the
B's own W absorbed (B and W end with the pair) or without it (W runs by itself later)."""

from collections import defaultdict

from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import Op, OpGraph


def plain_optimum(problem, time_limit: float = 60) -> float | None:
    """The proven optimal makespan (or span), or None when not proven within the time limit."""
    value, proven = plain_solve(problem, time_limit)
    return value if proven else None


def plain_solve(problem, time_limit: float, workers: int = 2,
                fixed: dict | None = None) -> tuple[float | None, bool]:
    """The best makespan (or span) found within the time limit, and whether it was proven optimal
    (None and True: proven to have no schedule). `fixed`: start times (in the problem's time
    unit) that these ops must keep, to ask whether this model accepts a given schedule."""
    graph = OpGraph(problem)
    ops = graph.ops()
    split, pair_length = problem.split_backward, graph.fb_overlap
    horizon = sum(graph.duration(op) for op in ops) + 2 * len(ops) * graph.comm + len(ops) * (pair_length or 0)
    model = cp_model.CpModel()
    start = {op: model.NewIntVar(0, horizon, str(op)) for op in ops}
    for op, at in (fixed or {}).items():
        model.Add(start[op] == graph.ticks(at))
    on_device = defaultdict(list)
    alone = {}
    if pair_length is None:  # every op runs by itself: the plainest form
        end = {op: start[op] + graph.duration(op) for op in ops}
        for op in ops:
            on_device[graph.device(op)].append(model.NewFixedSizeIntervalVar(start[op], graph.duration(op), f"i{op}"))
    else:
        end = {op: model.NewIntVar(0, horizon, f"end{op}") for op in ops}
        member = defaultdict(list)  # op -> the pair literals it belongs to (a W: those that absorb it)
        _offer_pairs(model, graph, ops, split, pair_length, start, end, on_device, member)
        for op in ops:
            alone[op] = model.NewBoolVar(f"alone{op}")
            model.Add(sum(member[op]) == 0).OnlyEnforceIf(alone[op])
            model.Add(sum(member[op]) == 1).OnlyEnforceIf(alone[op].Not())
            model.Add(end[op] == start[op] + graph.duration(op)).OnlyEnforceIf(alone[op])
            on_device[graph.device(op)].append(
                model.NewOptionalIntervalVar(start[op], graph.duration(op), end[op], alone[op], f"i{op}"))
    source = {"F": "F", "I": "B" if split else "BW"}
    for op in ops:
        for (event, q, k, i), delay in graph.requirements(op):
            needed = model.Add(start[op] >= end[Op(source[event], q, k, i)] + delay)
            if op.kind == "W" and pair_length is not None:  # an absorbed W runs inside its own B's pair
                needed.OnlyEnforceIf(alone[op])
    for d in range(problem.devices):
        model.AddNoOverlap(on_device[d])
        mine = [op for op in ops if graph.device(op) == d]
        if graph.memory_limit is None:
            continue
        intervals, demands = [], []
        for f in (op for op in mine if op.kind == "F"):
            activation = graph.memory_effect(f)[0]
            if split:
                w = Op("W", f.pipe, f.stage, f.microbatch)
                residual = graph.memory_effect(w)[1]
                held = [(Op("B", f.pipe, f.stage, f.microbatch), activation - residual), (w, residual)]
            else:
                held = [(Op("BW", f.pipe, f.stage, f.microbatch), activation)]
            for release, amount in held:
                if amount > 0:
                    size = model.NewIntVar(0, horizon, "")
                    intervals.append(model.NewIntervalVar(start[f], size, end[release], ""))
                    demands.append(amount)
        model.AddCumulative(intervals, demands, graph.memory_limit[d])
    value = model.NewIntVar(0, horizon, "objective")
    if problem.objective == "makespan":
        for op in ops:
            model.Add(value >= end[op])
    else:  # span: the widest device, each measured from its own first op
        if not fixed:  # a span is the same wherever the schedule lies in time: let one op start at 0
            model.AddMinEquality(0, [start[op] for op in ops])
        for d in range(problem.devices):
            mine = [op for op in ops if graph.device(op) == d]
            first, last = model.NewIntVar(0, horizon, ""), model.NewIntVar(0, horizon, "")
            model.AddMinEquality(first, [start[op] for op in mine])
            model.AddMaxEquality(last, [end[op] for op in mine])
            model.Add(value >= last - first)
    model.Minimize(value)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.max_time_in_seconds = time_limit
    status = solver.Solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, status == cp_model.INFEASIBLE  # (None, True): proven to have no schedule
    return graph.time(int(solver.ObjectiveValue())), status == cp_model.OPTIMAL


def _offer_pairs(model, graph: OpGraph, ops, split: bool, length: int, start, end, on_device, member) -> None:
    """A literal for each pair a device may run; a chosen pair starts both halves together and
    ends them (and an absorbed W) `length` later, as one interval on the device."""
    for f in (op for op in ops if op.kind == "F"):
        for b in ops:
            other_stage = (b.pipe, b.stage) != (f.pipe, f.stage)
            if b.kind not in ("B", "BW") or graph.device(b) != graph.device(f) or not other_stage:
                continue
            w = Op("W", b.pipe, b.stage, b.microbatch)
            for absorbs in ((True, False) if split else (False,)):
                x = model.NewBoolVar(f"pair{f}{b}{absorbs}")
                halves = [f, b, w] if absorbs else [f, b]
                for op in halves:
                    model.Add(start[op] == start[f]).OnlyEnforceIf(x)
                    model.Add(end[op] == start[f] + length).OnlyEnforceIf(x)
                on_device[graph.device(f)].append(model.NewOptionalFixedSizeIntervalVar(start[f], length, x, ""))
                for op in halves:
                    member[op].append(x)


def plain_starts(schedule) -> dict:
    """The schedule's start times for the plain model, which runs B and W apart when the
    backward is split: a fused BW there (a hand-made schedule's) is its B with its W straight
    after, or inside an F&B pair, both with the pair (the W absorbed)."""
    graph, starts = OpGraph(schedule.problem), {}
    for ops in schedule.devices:
        for timed in ops:
            op = timed.op
            if op.kind != "BW" or not schedule.problem.split_backward:
                starts[op] = timed.start
                continue
            b, w = (Op(kind, op.pipe, op.stage, op.microbatch) for kind in ("B", "W"))
            starts[b] = timed.start
            starts[w] = timed.start if timed.overlap is not None else timed.start + graph.time(graph.duration(b))
    return starts
