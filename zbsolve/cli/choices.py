"""Solve and compare over several choices in one command: placements (`--placement auto`, or
a list) and, where the costs give a fused backward faster than B + W, the fused backward beside
the split one. Each choice is its own problem, solved in its share of the time; one table
holds every choice's rows, and the fastest schedule that fits is the answer
(docs/design.md, "Several placements in one command")."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from zbsolve.baselines import left_out
from zbsolve.baselines.reference import one_f_one_b_reference
from zbsolve.errors import ExportError, InfeasibleError, UsageError, ZbsolveError
from zbsolve.formats.torch_csv import check_torch_form
from zbsolve.problem.placements import PLACEMENT_HELP, parse_placement
from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Schedule
from zbsolve.solvers import check_solvable

from .options import AUTO_PLACEMENTS, problem_from_args
from .outputs import baseline_rows, bounded_rows, describe_problem, given_rows, per_device_memory
from .table import comparison_table


@dataclass(frozen=True)
class Choice:
    """One problem the command solves: a placement, with the backward split or fused."""

    problem: Problem

    @property
    def label(self) -> str:
        return self.problem.placement + ("" if self.problem.split_backward else " fused")


def asked_placements(text: str) -> tuple[list[str], bool]:
    """The placements `--placement` names, and whether they came from `auto` (which skips, with
    a note, those that do not fit; a placement named by the user that does not fit is an error)."""
    if text.strip().lower() == "auto":
        return list(AUTO_PLACEMENTS), True
    items = [item.strip() for item in text.split(",")]
    if any(not item for item in items):
        raise UsageError(f"--placement must be {PLACEMENT_HELP}, a comma-separated list of them, or auto; "
                         f"got {text!r}")
    for item in items:
        parse_placement(item)
    return list(dict.fromkeys(items)), False


def fused_is_faster(problem: Problem) -> bool:
    """Whether some stage's own fused backward (BW) is faster than its B + W."""
    return problem.split_backward and any(c.fused is not None and c.fused < c.B + c.W for c in problem.stage_costs)


def choices_from_args(args: argparse.Namespace, command: str, solving: bool) -> list[Choice]:
    """Every problem the options ask for; with auto, those that do not fit are said and left out."""
    placements, auto = asked_placements(args.placement)
    choices: list[Choice] = []
    for placement in placements:
        try:
            problem = problem_from_args(args, placement=placement, notes=not choices)
            variants = [problem]
            if not args.split_backward and fused_is_faster(problem):
                variants.append(problem_from_args(args, placement=placement, split_backward=False, notes=False))
            for variant in variants:
                if solving:
                    check_solvable(variant, args.solver)
                if getattr(args, "torch_csv", None):
                    check_torch_form(variant)
                choices.append(Choice(variant))
        except (UsageError, InfeasibleError, ExportError) as error:  # ExportError: no torch form (--torch-csv)
            if not auto:
                raise
            print(f"zbsolve {command}: note: auto leaves {placement} out: {error}", file=sys.stderr)
    if not choices:
        raise InfeasibleError(f"no placement of {', '.join(placements)} fits this problem (the notes above say why)")
    return choices


def choice_rows(choices: list[Choice], solved: list[Schedule | None],
                timed: list[list[Schedule]]) -> tuple[list[Schedule], Schedule, list[float]]:
    """Every choice's rows named `label: schedule`, 1F1B on the single chain first where no
    choice holds it; the reference (the faster 1F1B of the split and fused backward); and
    each choice's bound."""
    references = {c.problem.split_backward: one_f_one_b_reference(c.problem) for c in choices}
    reference = min((r for r in references.values() if r is not None), key=lambda r: r.metrics.makespan)
    rows, bounds = [], []
    for choice, own_solved, own_timed in zip(choices, solved, timed):
        own, bound = bounded_rows(choice.problem, [] if own_solved is None else [own_solved], own_timed)
        rows += [s.with_solver(s.solver, name=f"{choice.label}: {s.name}") for s in own]
        bounds.append(bound)
    singles = {c.problem.split_backward for c in choices if c.problem.placement == "single"}
    for split, one_f in references.items():
        if split not in singles and one_f is not None:
            name = "1f1b (single chain" + ("" if split else ", fused") + ")"
            rows.insert(sum(s is not None for s in solved), one_f.with_solver(one_f.solver, name=name))
    return rows, reference, bounds


def print_choices(command: str, choices: list[Choice], solved: list[Schedule | None],
                  timed: list[list[Schedule]]) -> tuple[list[Schedule], Schedule, Schedule | None]:
    """The one table of every choice, then the answer: the fastest solved schedule (or, with no
    solve, hand-made one) that fits, with the bound over every choice. Returns the rows, the
    reference and the answer."""
    rows, reference, bounds = choice_rows(choices, solved, timed)
    labels = ", ".join(c.label for c in choices)
    print(describe_problem(choices[0].problem, placement_text=f"placements {labels}"))
    print(comparison_table(rows, reference))
    for s in solved:
        line = per_device_memory(s) if s is not None else None
        if line:
            print(line)
    split_placements = {c.problem.placement for c in choices if c.problem.split_backward}
    for choice in choices:
        if not choice.problem.split_backward and choice.problem.placement in split_placements:
            continue  # what the fused twin leaves out needs B and W apart: its split twin has those rows
        for name, reason in left_out(choice.problem):
            print(f"zbsolve {command}: note: {choice.label}: {name} is not in the table: it {reason}", file=sys.stderr)
    named = {id(s): f"{c.label}: {s.name}" for c, s in zip(choices, solved) if s is not None}
    pool = [s for s in solved if s is not None] or [s for s in rows if not s.over_memory_limit()]
    if not pool:
        return rows, reference, None
    best = min(pool, key=lambda s: s.value)  # the first of equals: the order the choices were given in
    floor = min(bounds)
    unit, gap = reference.problem.time_unit, (best.value - floor) / best.value if best.value else 0.0
    print(f"answer: {named.get(id(best), best.name)}, {best.value:.6g} {unit} ({best.solver.status}); no schedule "
          f"of these {len(choices)} choices can take less than {floor:.6g} {unit} (the least of their bounds): "
          f"within {100 * gap:.2f}%")
    return rows, reference, best


def timed_rows(choices: list[Choice], args: argparse.Namespace, command: str, files: list[str] | None) -> list[
        list[Schedule]]:
    """Each choice's hand-made schedules; schedule files given by the user go with the choice
    whose problem they were made for (the first that reads them), and are refused if none does."""
    timed = [baseline_rows(c.problem) for c in choices]
    for path in files or []:
        for k, choice in enumerate(choices):
            try:
                timed[k] += given_rows([path], args, choice.problem, command)
                break
            except ZbsolveError:
                if k == len(choices) - 1:
                    raise
    return timed
