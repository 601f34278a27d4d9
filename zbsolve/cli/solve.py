"""`zbsolve solve`: solve, print the comparison with 1F1B and every baseline, write files."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from dataclasses import replace

from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Schedule
from zbsolve.solvers import check_solver_options, runs_deterministic, solve, solver_names
from zbsolve.solvers.least_memory import STEPS, least_memory
from zbsolve.solvers.orchestration import START_MEETS_BOUND
from zbsolve.solvers.registry import default_name
from zbsolve.solvers.registry import get as get_backend

from .choices import Choice, choices_from_args, print_choices, timed_rows
from .options import add_problem_options
from .outputs import baseline_rows, check_outputs, given_rows, print_comparison, write_outputs

HEARTBEAT_S = 5.0  # the longest a log goes without a progress line while a solve runs


class ProgressLine:
    """Live best value, bound and elapsed time on stderr, at most a few lines a second.

    On a terminal one line is rewritten in place, and between reports a clock thread
    (`start`) keeps its elapsed time moving: a phase can go silent for many seconds (CP-SAT's
    presolve of a large model, a window search finding nothing better), and a frozen line
    reads as a hung solve. Otherwise (a log file, a pipe) a line is written when the best
    value or the bound it shows has changed (phases report solutions they have already
    reported, or worse ones, and repeating them only lengthens the log), and at least every
    `HEARTBEAT_S` of the solve, so that a log shows the solve is alive."""

    def __init__(self, solver: str, unit: str, enabled: bool) -> None:
        self.solver, self.unit, self.enabled = solver, unit, enabled
        self.best: float | None = None
        self.bound: float | None = None
        self.shown = 0.0
        self.last = ""  # best, bound and gap as last written
        self.tty = sys.stderr.isatty()
        self.lock = threading.Lock()
        self.reported: tuple[float, float] | None = None  # (elapsed, clock) of the latest report
        self.stopped = threading.Event()
        self.clock: threading.Thread | None = None
        self.heartbeat = HEARTBEAT_S

    def start(self, every: float = 0.5, heartbeat: float = HEARTBEAT_S) -> None:
        """Keep the line moving between reports: on a terminal redraw it every `every`
        seconds, elsewhere write it again once `heartbeat` seconds pass without a line; its
        elapsed time is counted on from the latest report's (reports keep the solve's clock)."""
        if not self.enabled or self.clock is not None:
            return
        self.heartbeat = heartbeat

        def tick() -> None:
            while not self.stopped.wait(every):
                with self.lock:
                    if self.reported is None or not self.last:  # nothing drawn yet
                        continue
                    elapsed, at = self.reported
                    now = elapsed + time.monotonic() - at
                    if self.tty:
                        self.last = self._state()
                        self._draw(now, self.last)
                    elif now - self.shown >= self.heartbeat:
                        self.shown = now
                        self._draw(now, self.last)

        self.clock = threading.Thread(target=tick, name="zbsolve-progress-clock", daemon=True)
        self.clock.start()

    def __call__(self, best: float | None, bound: float | None, elapsed: float) -> None:
        if not self.enabled:
            return
        with self.lock:
            self.reported = (elapsed, time.monotonic())
            if best is not None:
                self.best = best if self.best is None else min(self.best, best)
            if bound is not None:
                self.bound = bound if self.bound is None else max(self.bound, bound)
            if elapsed - self.shown < (0.25 if self.tty else 2.0) and best is None:
                return
            state = self._state()
            if not self.tty and state == self.last and elapsed - self.shown < self.heartbeat:
                return
            self.shown, self.last = elapsed, state
            self._draw(elapsed, state)

    def _state(self) -> str:
        gap = ""
        if self.best and self.bound is not None:
            gap = f"  gap {100 * (self.best - self.bound) / self.best:.2f}%"
        return f"best {_fmt(self.best)} {self.unit}  bound {_fmt(self.bound)}{gap}"

    def _draw(self, elapsed: float, state: str) -> None:
        text = f"{self.solver} {elapsed:7.1f}s  {state}"
        sys.stderr.write(("\r" + text + "\033[K") if self.tty else text + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        self.stopped.set()
        if self.clock is not None:
            self.clock.join()
        if self.enabled and self.tty and self.last:
            sys.stderr.write("\n")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


# A second Ctrl-C this soon after the first is the same interruption delivered again (a
# terminal or `timeout` signals the process and then its whole group), not a second request.
REPEAT_WINDOW_S = 1.0


def install_stop_handlers() -> threading.Event:
    """Ctrl-C / SIGTERM ask the solver to stop and keep the best schedule found so far. A
    second Ctrl-C, a second later or more, quits at once; SIGTERM never does (it asks for
    the graceful stop, however often it comes)."""
    stop = threading.Event()
    first: list[float] = []

    def handler(signum, frame) -> None:
        now = time.monotonic()
        if stop.is_set():
            if signum == signal.SIGINT and first and now - first[0] >= REPEAT_WINDOW_S:
                raise KeyboardInterrupt
            return
        first.append(now)
        stop.set()
        sys.stderr.write("\nzbsolve: stopping the solver, keeping the best schedule so far...\n")

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return stop


def solve_with_progress(problem: Problem, args: argparse.Namespace, baselines: list[Schedule] | None = None,
                        stop: threading.Event | None = None, label: str = "") -> Schedule:
    """Solve with live progress on stderr; Ctrl-C keeps the best schedule found so far. One
    `stop` (from `install_stop_handlers`) serves several solves; `label` names this one."""
    pairs_may_form = problem.fb_overlap is not None and problem.overlap_range() is not None
    if get_backend(args.solver).slow_work_with_pairs and pairs_may_form and runs_deterministic(
            args.workers, args.deterministic):
        # With pairs a work unit can take many seconds of wall time.
        print(f"zbsolve {args.command}: note: with one worker the search is limited by {args.solver}'s work measure, "
              "which runs far slower than the clock with F&B pairs: this solve may take several times "
              "--time-limit and still not repeat exactly (--no-deterministic keeps to the clock)", file=sys.stderr)
    stop = install_stop_handlers() if stop is None else stop
    progress = ProgressLine(f"{args.solver} {label}".strip(), problem.time_unit, not args.quiet)
    started = time.monotonic()
    progress.start()
    try:
        solved = solve(problem, args.solver, time_limit=args.time_limit, workers=args.workers,
                       seed=args.seed, progress=progress, stop=stop, deterministic=args.deterministic,
                       baselines=baselines)
    finally:
        progress.close()
    if stop.is_set():
        # Only the wrapping up is left, a few milliseconds: the same request delivered again
        # (to the process and then its group) must not kill it while it writes the file, nor
        # at interpreter exit, where Python hands the signals back to their default action.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if not args.quiet:
        took = time.monotonic() - started
        if (solved.solver.message or "").startswith(START_MEETS_BOUND):
            print(f"answered{' ' + label if label else ''} in {took:.1f} s without a search: {START_MEETS_BOUND}",
                  file=sys.stderr)
        else:
            deterministic = runs_deterministic(args.workers, args.deterministic)
            print(f"solved{' ' + label if label else ''} in {took:.1f} s with {args.solver}, {args.workers} "
                  f"worker(s), seed {args.seed}{', deterministic' if deterministic else ''}", file=sys.stderr)
    if getattr(args, "least_memory", False) and not stop.is_set():
        solved = _least_memory_phase(problem, args, solved, stop)
    return solved


def _least_memory_phase(problem: Problem, args: argparse.Namespace, solved: Schedule, stop) -> Schedule:
    """The second phase: the least peak memory at the found value, each step a quarter of the limit."""
    step_limit = max(1.0, args.time_limit / 4)

    def run(tighter: Problem) -> Schedule:
        return solve(tighter, args.solver, time_limit=step_limit, workers=args.workers, seed=args.seed,
                     stop=stop, deterministic=args.deterministic)

    if not args.quiet:
        print(f"zbsolve {args.command}: looking for less memory at {solved.value:g} {problem.time_unit} "
              f"(up to {STEPS} solves of {step_limit:g} s)", file=sys.stderr)
    began = time.monotonic()
    phase = least_memory(problem, solved, run, stopped=stop.is_set)
    note = phase.describe() + ("; the phase was interrupted" if stop.is_set() else "")
    if not args.quiet:
        print(f"zbsolve {args.command}: {note} ({time.monotonic() - began:.1f} s)", file=sys.stderr)
    message = f"{phase.schedule.solver.message}; {note}" if phase.schedule.solver.message else note
    return phase.schedule.with_solver(replace(phase.schedule.solver, message=message))


def add_least_memory_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--least-memory", action="store_true",
                        help="after the solve, look for the schedule with the least peak memory among those as "
                             "fast (up to six more solves, each a quarter of --time-limit); the table's note says "
                             "what was found and whether less was proven impossible")


def run_solve(args: argparse.Namespace) -> int:
    check_solver_options(args.solver, args.time_limit, args.workers, args.deterministic, args.seed)
    choices = choices_from_args(args, "solve", solving=True)
    if len(choices) > 1:
        return _solve_choices(choices, args)
    problem = choices[0].problem  # solvable: choices_from_args checked it before any work
    check_outputs(args, problem)
    timed = baseline_rows(problem) + given_rows(args.start, args, problem, "solve")  # the start and the table
    solved = solve_with_progress(problem, args, timed)
    print_comparison("solve", problem, [solved], timed)
    write_outputs(solved, args)
    return 130 if solved.solver.status == "interrupted" else 0


def solve_choices(choices: list[Choice], args: argparse.Namespace, timed: list[list[Schedule]],
                  stop) -> list[Schedule | None]:
    """Each choice solved in turn, starting from its hand-made schedules; each gets the time left
    over the choices still to solve (work units shared evenly when deterministic). After a stop,
    the choices not reached are left unsolved (None)."""
    deterministic = runs_deterministic(args.workers, args.deterministic)
    began = time.monotonic()
    solved: list[Schedule | None] = []
    for k, choice in enumerate(choices):
        if stop.is_set():
            solved.append(None)
            continue
        if deterministic:  # work units do not run out with the clock: an even split
            share = args.time_limit / len(choices)
        else:
            share = (args.time_limit - (time.monotonic() - began)) / (len(choices) - k)
        share = max(share, 0.5)
        sub = argparse.Namespace(**{**vars(args), "time_limit": share, "least_memory": False})
        solved.append(solve_with_progress(choice.problem, sub, timed[k], stop=stop, label=choice.label))
    return solved


def _solve_choices(choices: list[Choice], args: argparse.Namespace) -> int:
    """Several placements, or the split and fused backward: each solved, one table, the answer written."""
    check_outputs(args, choices[0].problem)
    timed = timed_rows(choices, args, "solve", args.start)
    if not args.quiet:
        share = "work units" if runs_deterministic(args.workers, args.deterministic) else "s"
        print(f"zbsolve solve: {len(choices)} choices ({', '.join(c.label for c in choices)}) share --time-limit "
              f"{args.time_limit:g} {share}: each gets what is left over those still to solve", file=sys.stderr)
    stop = install_stop_handlers()
    solved = solve_choices(choices, args, timed, stop)
    _, _, best = print_choices("solve", choices, solved, timed)
    if best is not None:
        write_outputs(best, args)
    return 130 if interrupted(stop, solved) else 0


def interrupted(stop: threading.Event, solved: list[Schedule | None]) -> bool:
    """Whether a run of several solves was stopped: by the user, or inside a solve."""
    return stop.is_set() or any(s is not None and s.solver.status == "interrupted" for s in solved)


def add_solver_options(parser: argparse.ArgumentParser, default_time: float) -> None:
    group = parser.add_argument_group("solver")
    group.add_argument("--solver", default=default_name(), metavar="|".join(solver_names()),
                       help="; ".join(f"{name}: {get_backend(name).summary}" for name in solver_names())
                       + f" (default {default_name()}; every solve starts from the best hand-made or list "
                         "schedule)")
    group.add_argument("--time-limit", type=float, default=default_time, metavar="S",
                       help=f"seconds before the best schedule found is returned (default {default_time:g}); "
                            "with --deterministic, CP-SAT work units instead (a unit is about a second, far more with "
                            "--fb-overlap), and the clock stops the solve at 4 times the limit plus 10 s with pairs, "
                            "20 times plus 60 s without")
    group.add_argument("--workers", type=int, default=2, metavar="N", help="solver threads (default 2)")
    group.add_argument("--deterministic", action=argparse.BooleanOptionalAction, default=None,
                       help="limit the search by work measures, not the clock, so that a run repeats exactly "
                            "(the default with --workers 1, which it needs); the run can take several times "
                            "--time-limit")
    group.add_argument("--seed", type=int, default=0,
                       help="random seed, 0 to 2147483647; with --deterministic the output file is byte-identical "
                            "run to run")
    group.add_argument("-q", "--quiet", action="store_true", help="no live progress on stderr")


def register_solve(command, run=run_solve) -> None:
    """`run`: what the command does (commands.py passes the one that also takes --partition auto)."""
    p = command("solve", "find the best schedule for your problem with an integer program", run)
    add_problem_options(p, several=True)
    add_solver_options(p, 60.0)
    add_least_memory_option(p)
    p.add_argument("-o", "--output", metavar="FILE", help="write the schedule file (JSON)")
    p.add_argument("--torch-csv", metavar="FILE", help="write the PyTorch pipelining compute_only CSV")
    p.add_argument("--plot", metavar="FILE", help="draw it beside 1F1B (.png, .svg or .pdf)")
    p.add_argument("--start", metavar="FILE", action="append",
                   help="a schedule of this problem to start from (JSON, or a torch compute_only CSV such as the "
                        "order you run today); shown in the table; may be given more than once")
