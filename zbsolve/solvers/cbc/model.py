"""MILP model (docs/solving.md) solved by CBC through PuLP.

Start times are continuous; each pair of ops on one device gets an ordering binary unless
their order is already implied by dependencies and the microbatch-order symmetry chains
(computed as a transitive closure), which removes most pairs. The memory level at each
forward's start is a linear sum over those orders.
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pulp

from zbsolve.errors import UsageError
from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import allocates
from zbsolve.solvers.result import BackendResult, Status
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView

CBC_GRACE_S = 3.0  # how long CBC may take to honour an interrupt before it is killed
_RUNNING: set[str] = set()  # work folders of CBC runs not yet ended (their CBC is killed at exit)


def _ancestors(data: ProblemView) -> dict[Op, int]:
    """Bitset of every op that must finish before each op starts."""
    index = {op: j for j, op in enumerate(data.ops)}
    before: dict[Op, list[Op]] = {op: [p for p, _ in data.predecessors[op]] for op in data.ops}
    for chain in data.chains:
        for a, b in zip(chain, chain[1:]):
            before[b].append(a)
    ancestors: dict[Op, int] = {}
    pending = list(data.ops)
    while pending:  # few passes: ops are listed roughly in dependency order
        waiting = []
        for op in pending:
            if all(p in ancestors for p in before[op]):
                bits = 0
                for p in before[op]:
                    bits |= ancestors[p] | (1 << index[p])
                ancestors[op] = bits
            else:
                waiting.append(op)
        pending = waiting
    return ancestors


class _Model:
    def __init__(self, data: ProblemView, horizon: int, bound: int) -> None:
        self.data, self.horizon, self.bound = data, horizon, bound
        self.index = {op: j for j, op in enumerate(data.ops)}
        self.ancestors = _ancestors(data)
        self.prob = pulp.LpProblem("zbsolve", pulp.LpMinimize)
        H = horizon
        self.start = {
            op: pulp.LpVariable(f"s{j}", data.head[op], H - data.tail[op])
            for j, op in enumerate(data.ops)
        }
        self.order: dict[tuple[Op, Op], pulp.LpVariable] = {}
        self._precedences()
        self._disjunctions()
        if data.memory_limit is not None:
            self._memory()
        self.objective = self._objective()

    def bound_by_dependencies(self) -> None:
        """Start windows from the dependencies alone: a lever problem's view also follows
        memory edges, which are not proven with levers."""
        head, tail = self.data.dependency_heads_and_tails()
        for op, var in self.start.items():
            var.lowBound, var.upBound = head[op], self.horizon - tail[op]

    def precedes(self, a: Op, b: Op):
        """1 if a runs before b on their device: a constant or an ordering binary."""
        if self.precedes_fixed(a, b):
            return int(self.ancestors[b] >> self.index[a] & 1)
        if (a, b) in self.order:
            return self.order[(a, b)]
        return 1 - self.order[(b, a)]

    def _precedences(self) -> None:
        d, s = self.data, self.start
        for op in d.ops:
            for pred, delay in d.predecessors[op]:
                self.prob += s[op] >= s[pred] + d.duration[pred] + delay
        for chain in d.chains:
            for a, b in zip(chain, chain[1:]):
                self.prob += s[b] >= s[a] + d.duration[a]

    def _disjunctions(self) -> None:
        d, s, H = self.data, self.start, self.horizon
        for ops in d.device_ops:
            for i, a in enumerate(ops):
                for b in ops[i + 1:]:
                    if self.precedes_fixed(a, b):
                        continue
                    y = pulp.LpVariable(f"y{self.index[a]}_{self.index[b]}", cat="Binary")
                    self.order[(a, b)] = y
                    self.prob += s[b] >= s[a] + d.duration[a] - H * (1 - y)
                    self.prob += s[a] >= s[b] + d.duration[b] - H * y

    def precedes_fixed(self, a: Op, b: Op) -> bool:
        return bool(self.ancestors[b] >> self.index[a] & 1 or self.ancestors[a] >> self.index[b] & 1)

    def _memory(self) -> None:
        d = self.data
        for device, ops in enumerate(d.device_ops):
            for f in ops:
                if not allocates(f.kind):  # memory only grows at such starts: the limit holds there
                    continue
                level = d.memory_effect[f][0]
                for g in ops:
                    if g == f:
                        continue
                    allocated, released = d.memory_effect[g]
                    change = allocated - released
                    if change:
                        level = level + change * self.precedes(g, f)
                self.prob += level <= d.limits[device]

    def _objective(self):
        d, s, H = self.data, self.start, self.horizon
        if d.objective == "makespan":
            makespan = pulp.LpVariable("makespan", self.bound, H)
            for op in d.sinks():
                self.prob += makespan >= s[op] + d.duration[op]
            self.prob += makespan
            return makespan
        span = pulp.LpVariable("span", self.bound, H)
        # The span does not change when a schedule moves in time: as in the CP-SAT model, one
        # of the ops that may start first starts at 0, chosen by a binary.
        self.at_zero = {op: pulp.LpVariable(f"zero{self.index[op]}", cat="Binary") for op in d.starters}
        for op, chosen in self.at_zero.items():
            self.prob += s[op] <= H * (1 - chosen)
        self.prob += pulp.lpSum(self.at_zero.values()) >= 1
        for device in range(len(d.device_ops)):
            first = pulp.LpVariable(f"first{device}", 0, H)
            last = pulp.LpVariable(f"last{device}", 0, H)
            for op in d.first_forwards(device):
                self.prob += first <= s[op]
            for op in d.last_backwards(device):
                self.prob += last >= s[op] + d.duration[op]
            self.prob += span >= last - first
        self.prob += span
        return span

    def starts(self) -> dict[Op, int]:
        """The solution's start of every op."""
        return {op: round(var.value()) for op, var in self.start.items()}

    def set_hint(self, hint: dict[Op, int]) -> None:
        for op, var in self.start.items():
            var.setInitialValue(hint[op])
        for (a, b), y in self.order.items():
            y.setInitialValue(1 if hint[a] < hint[b] else 0)
        ends = {op: hint[op] + self.data.duration[op] for op in self.data.ops}
        if self.data.objective == "makespan":
            self.objective.setInitialValue(max(ends[op] for op in self.data.sinks()))
        else:  # the starting schedule is timed as soon as possible: its earliest op starts at 0
            for op, chosen in self.at_zero.items():
                chosen.setInitialValue(1 if hint[op] == 0 else 0)


def _read_log(path: str) -> dict[str, float]:
    """Best solution and bound from CBC's log (PuLP does not report the bound)."""
    found: dict[str, float] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return found
    for match in re.finditer(r"best solution ([-\d.e+]+)|best sol ([-\d.e+]+), best possible ([-\d.e+]+)", text):
        if match.group(1):
            found["value"] = float(match.group(1))
        else:
            found["value"], found["bound"] = float(match.group(2)), float(match.group(3))
    for key, pattern in (("bound", r"Lower bound:\s+([-\d.e+]+)"), ("value", r"Objective value:\s+([-\d.e+]+)"),
                         ("bound", r"best possible ([-\d.e+]+)")):
        matches = re.findall(pattern, text)
        if matches:
            found[key] = float(matches[-1])
    found["stopped"] = float("Stopped on time" in text or "Stopped on" in text)
    found["proven"] = float("Optimal solution found" in text)
    return found


def solve_cbc(data: ProblemView, settings: RunSettings, state: SearchState,
              build: Callable[[ProblemView, int, int], _Model] = _Model) -> BackendResult:
    """The MILP `build` makes (a lever problem's: `levers.LeverModel`), solved by CBC."""
    t0 = time.monotonic()
    if data.graph.fb_overlap is not None:
        raise UsageError(
            "the cbc backend does not model F&B overlap (fb_overlap); use --solver cpsat"
        )
    with warnings.catch_warnings():  # PuLP 3.x announces its 4.0 API on every variable
        warnings.simplefilter("ignore", DeprecationWarning)
        model = build(data, state.horizon, state.lower_bound())
    warm = state.hint is not None
    if state.hint is not None:
        model.set_hint(state.hint)
    # PuLP leaves its model files behind when CBC exits without a solution (killed after an
    # interrupt): they go in a folder of our own, removed whatever happens.
    workdir = tempfile.TemporaryDirectory(prefix="zbsolve-cbc-", ignore_cleanup_errors=True)
    log_path = os.path.join(workdir.name, "cbc.log")
    done = threading.Event()
    watcher = threading.Thread(target=_watch_log, args=(log_path, workdir.name, data, settings, state, t0, done),
                               daemon=True)
    watcher.start()
    try:
        # CBC takes seeds 1 to 2^31 - 1 (0 would draw one from the clock; it ignores what is above)
        cbc_seed = int(settings.seed) % (2**31 - 1) + 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            command = pulp.PULP_CBC_CMD(
                msg=False, timeLimit=max(1, round(settings.limit)), threads=int(settings.workers),
                warmStart=warm, logPath=log_path, options=[f"randomCbcSeed {cbc_seed}"],
            )
            command.tmpDir = workdir.name
        _RUNNING.add(workdir.name)
        try:
            model.prob.solve(command)
        except pulp.PulpSolverError:
            if state.stop.is_set():  # CBC ignored the interrupt and was killed (see _watch_log)
                return BackendResult(Status.UNKNOWN, None, None, None, time.monotonic() - t0, interrupted=True,
                                     message="CBC did not stop within its grace period and was killed")
            # CBC's own process failed. The bundled CBC 2.10 segfaults in some runs (seen when
            # its time limit fell just after it took the starting solution, before any node):
            # it leaves no solution, and the starting schedule, if any, is the answer.
            return BackendResult(Status.UNKNOWN, None, None, None, time.monotonic() - t0,
                                 message="CBC's process failed (it crashed or exited with an error) "
                                         "and left no solution")
        log = _read_log(log_path)
    finally:
        _RUNNING.discard(workdir.name)
        done.set()
        watcher.join(timeout=2)
        workdir.cleanup()
    wall = time.monotonic() - t0
    status, solution = model.prob.status, model.prob.sol_status
    if solution in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible) and status == pulp.LpStatusOptimal:
        proven = solution == pulp.LpSolutionOptimal and not log.get("stopped")
        starts = model.starts()
        value = round(pulp.value(model.objective))
        bound = value if proven else log.get("bound")
        return BackendResult(Status.OPTIMAL if proven else Status.FEASIBLE, starts, value, bound, wall,
                             interrupted=state.stop.is_set() and not proven)
    if status == pulp.LpStatusInfeasible:
        return BackendResult(Status.INFEASIBLE, None, None, None, wall)
    return BackendResult(Status.UNKNOWN, None, None, log.get("bound"), wall, interrupted=state.stop.is_set(),
                         message="CBC found no schedule within the time limit")


def _watch_log(path: str, workdir: str, data: ProblemView, settings: RunSettings, state: SearchState, t0: float,
               done: threading.Event) -> None:
    """Report CBC's progress from its log file while it runs; pass a stop request on."""
    last, forwarded, killed = None, None, False
    while not done.wait(0.5):
        if state.stop.is_set() and forwarded is None and _interrupt_cbc(signal.SIGINT, workdir):
            forwarded = time.monotonic()
        # CBC notices SIGINT only between search nodes; a long root LP can hold it for many
        # seconds, so after a grace period it is killed (the starting schedule remains).
        if forwarded is not None and not killed and time.monotonic() - forwarded > CBC_GRACE_S:
            killed = _interrupt_cbc(signal.SIGKILL, workdir)
        if settings.progress is None:
            continue
        found = _read_log(path)
        now = (found.get("value"), found.get("bound"))
        if now != last and any(v is not None for v in now):
            last = now
            settings.progress(data.value(now[0]), data.value(now[1]), time.monotonic() - t0)


def _interrupt_cbc(signum: int, workdir: str) -> bool:
    """Send `signum` to this process's CBC child that reads its model from `workdir`: on
    SIGINT CBC stops and writes its best solution.

    PuLP keeps the child's handle to itself, so the child is found in /proc (Linux); where
    there is no /proc, CBC runs on to its time limit.
    """
    me, sent = str(os.getpid()), False
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if fields[1] == me and "cbc" in name.lower() and workdir.encode() in command:
            try:
                os.kill(int(entry.name), signum)
                sent = True
            except OSError:
                pass
    return sent


@atexit.register
def _end_leftover_runs() -> None:
    """A search that overran its limit is left behind (`zbsolve.solvers`), and its watcher,
    a daemon thread, ends with the program before it kills CBC: CBC would run on alone."""
    for workdir in list(_RUNNING):
        _interrupt_cbc(signal.SIGKILL, workdir)
