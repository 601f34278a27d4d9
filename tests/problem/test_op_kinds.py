"""The op-kind table (zbsolve/problem/op_kinds.py): what the solvers read of an op, held to
the validator's own statement of the same rules, kind by kind."""

import pytest
from helpers import uniform

from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.op_kinds import KINDS, TABLE, Kind, Op, amount, kinds_of, way_holds, ways
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.schedule.validator import memory_change, needs


def test_every_kind_has_a_row_and_a_text_form_that_round_trips():
    assert KINDS == ("F", "B", "W", "BW", "FC", "R", "FO", "O", "L") and set(TABLE) == set(Kind)
    for kind in KINDS:
        op = Op(kind, 1, 3, 5)
        assert Op.parse(str(op)) == op and str(op) == f"1.3{kind}5"


@pytest.mark.parametrize("split", [True, False])
def test_a_microbatch_frees_at_a_stage_all_it_allocates_there(split):
    # as the Zero Bubble authors' graph config asserts of its per-kind deltas, on every way
    assert kinds_of(split) == (("F", "B", "W") if split else ("F", "BW"))
    every = ways(split, ("recompute", "offload"))
    assert every[-1] == (("FO", "O", "L", "B", "W") if split else ("FO", "O", "L", "BW"))
    assert (("FC", "R", "B", "W") if split else ("FC", "R", "BW")) in every
    assert len(every) == 6 if split else len(every) == 3  # kept, recomputed, offloaded; fused too where split
    for kinds in every:
        for activation, residual, checkpoint in ((7, 3, 1), (5, 0, 0), (4, 4, 4), (6, 2, 5)):
            held = sum(amount(TABLE[Kind(k)].allocates, activation, residual, checkpoint)
                       - amount(TABLE[Kind(k)].frees, activation, residual, checkpoint) for k in kinds)
            assert held == 0


@pytest.mark.parametrize("way, amounts, expected", [
    (("F", "B", "W"), (7, 3, 1), [("F", "B", 4), ("F", "W", 3)]),
    # a checkpoint at least the residual: the residual comes out of the checkpoint's interval
    (("FC", "R", "B", "W"), (7, 3, 5), [("R", "B", 2), ("FC", "B", 2), ("FC", "W", 3)]),
    # a checkpoint below the residual: R's interval lasts until the W
    (("FC", "R", "B", "W"), (7, 3, 1), [("R", "B", 4), ("R", "W", 2), ("FC", "W", 1)]),
    (("FC", "R", "BW"), (7, 3, 0), [("R", "BW", 7)]),
    # offloaded: held from the forward until its copy to host ends, then again from the copy back
    (("FO", "O", "L", "B", "W"), (7, 3, 0), [("FO", "O", 7), ("L", "B", 4), ("L", "W", 3)]),
])
def test_a_way_s_memory_as_intervals_sums_to_what_it_holds(way, amounts, expected):
    assert way_holds(way, *amounts) == expected
    # at each op's start (before) and end (after), the intervals open then add up to the level
    level = 0
    for j, kind in enumerate(way):
        level += amount(TABLE[kind].allocates, *amounts)
        open_now = sum(n for taken, given, n in expected if way.index(taken) <= j <= way.index(given))
        assert open_now == level
        level -= amount(TABLE[kind].frees, *amounts)


@pytest.mark.parametrize("kind", KINDS)
def test_the_table_and_the_validator_say_the_same_of_memory(kind):
    problem = build_problem(3, 2, StageCost(1, 1, 1, activation=7, residual=3, checkpoint=2, offload=1),
                            levers=("recompute", "offload"))
    graph = OpGraph(problem)
    op = Op(kind, 0, 1, 0)
    per_unit = graph.memory_scale
    assert tuple(x / per_unit for x in graph.memory_effect(op)) == memory_change(kind, 7, 3, 2)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("placement", ["single", "vshape", "bidirectional"])
def test_the_table_and_the_validator_say_the_same_of_what_an_op_waits_for(kind, placement):
    problem = uniform(4, 4, placement=placement, split_backward=kind != "BW", levers=("recompute", "offload"),
                      offload=1.0)
    graph = OpGraph(problem)
    for q, pipe in enumerate(problem.pipes):
        for k in range(len(pipe.stages)):
            op = Op(kind, q, k, 1)
            from_table = [(event, stage) for (event, _, stage, _), _ in graph.requirements(op)]
            said = needs(kind, k, len(pipe.stages))
            if kind in ("B", "BW"):  # the validator adds the R or L where one ran
                said = said + [(("F", "R", "L"), k)]
            assert len(from_table) == len(said)
            for (event, stage), (kinds, their_stage) in zip(from_table, said):
                producers = {k2 for k2 in KINDS if event in TABLE[Kind(k2)].produces}
                assert stage == their_stage and set(kinds) <= producers, (op, from_table, said)
