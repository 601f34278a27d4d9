"""The op-kind table (zbsolve/problem/op_kinds.py): what the solvers read of an op, held to
the validator's own statement of the same rules, kind by kind."""

import pytest
from helpers import uniform

from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.op_kinds import KINDS, TABLE, Kind, Op, amount, kinds_of
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.schedule.validator import memory_change, needs


def test_every_kind_has_a_row_and_a_text_form_that_round_trips():
    assert KINDS == ("F", "B", "W", "BW") and set(TABLE) == set(Kind)
    for kind in KINDS:
        op = Op(kind, 1, 3, 5)
        assert Op.parse(str(op)) == op and str(op) == f"1.3{kind}5"


@pytest.mark.parametrize("split", [True, False])
def test_a_microbatch_frees_at_a_stage_all_it_allocates_there(split):
    # as the Zero Bubble authors' graph config asserts of its per-kind deltas
    kinds = kinds_of(split)
    assert kinds == (("F", "B", "W") if split else ("F", "BW"))
    for activation, residual in ((7, 3), (5, 0), (4, 4)):
        held = sum(amount(TABLE[Kind(k)].allocates, activation, residual)
                   - amount(TABLE[Kind(k)].frees, activation, residual) for k in kinds)
        assert held == 0


@pytest.mark.parametrize("kind", KINDS)
def test_the_table_and_the_validator_say_the_same_of_memory(kind):
    problem = build_problem(3, 2, StageCost(1, 1, 1, activation=7, residual=3))
    graph = OpGraph(problem)
    op = Op(kind, 0, 1, 0)
    per_unit = graph.memory_scale
    assert tuple(x / per_unit for x in graph.memory_effect(op)) == memory_change(kind, 7, 3)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("placement", ["single", "vshape", "bidirectional"])
def test_the_table_and_the_validator_say_the_same_of_what_an_op_waits_for(kind, placement):
    problem = uniform(4, 4, placement=placement, split_backward=kind != "BW")
    graph = OpGraph(problem)
    for q, pipe in enumerate(problem.pipes):
        for k in range(len(pipe.stages)):
            op = Op(kind, q, k, 1)
            from_table = [(event, stage) for (event, _, stage, _), _ in graph.requirements(op)]
            said = needs(kind, k, len(pipe.stages))
            assert len(from_table) == len(said)
            for (event, stage), (kinds, their_stage) in zip(from_table, said):
                producers = {k2 for k2 in KINDS if TABLE[Kind(k2)].produces == event}
                assert stage == their_stage and set(kinds) <= producers, (op, from_table, said)
