"""The plainest CP-SAT model of DESIGN §4 for tiny problems without F&B pairs: no symmetry
breaking, no implied edges, no bounds. Tests check zbsolve's lower bounds against it."""

from ortools.sat.python import cp_model

from zbsolve.ops import Op, OpGraph


def plain_optimum(problem, time_limit: float = 60) -> float | None:
    """The proven optimal makespan (or span), or None when not proven within the time limit."""
    value, proven = plain_solve(problem, time_limit)
    return value if proven else None


def plain_solve(problem, time_limit: float) -> tuple[float | None, bool]:
    """The best makespan (or span) found within the time limit, and whether it was proven optimal."""
    graph = OpGraph(problem)
    assert graph.fb_overlap is None
    ops = graph.ops()
    horizon = sum(graph.duration(op) for op in ops) + 2 * len(ops) * graph.comm
    model = cp_model.CpModel()
    start = {op: model.NewIntVar(0, horizon, str(op)) for op in ops}
    end = {op: start[op] + graph.duration(op) for op in ops}
    source = {"F": "F", "I": "B" if problem.split_backward else "BW"}
    for op in ops:
        for (event, q, k, i), delay in graph.requirements(op):
            model.Add(start[op] >= end[Op(source[event], q, k, i)] + delay)
    for d in range(problem.devices):
        mine = [op for op in ops if graph.device(op) == d]
        model.AddNoOverlap([model.NewFixedSizeIntervalVar(start[op], graph.duration(op), f"i{op}") for op in mine])
        if graph.memory_limit is None:
            continue
        intervals, demands = [], []
        for f in (op for op in mine if op.kind == "F"):
            activation = graph.memory_effect(f)[0]
            if problem.split_backward:
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
        for d in range(problem.devices):
            mine = [op for op in ops if graph.device(op) == d]
            first, last = model.NewIntVar(0, horizon, ""), model.NewIntVar(0, horizon, "")
            model.AddMinEquality(first, [start[op] for op in mine])
            model.AddMaxEquality(last, [end[op] for op in mine])
            model.Add(value >= last - first)
    model.Minimize(value)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 2
    solver.parameters.max_time_in_seconds = time_limit
    status = solver.Solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, False
    return graph.time(int(solver.ObjectiveValue())), status == cp_model.OPTIMAL
