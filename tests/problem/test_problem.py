import math
import warnings

import pytest
from helpers import uniform

from zbsolve.errors import ProblemError, ProblemWarning
from zbsolve.problem.placements import build_problem, parse_memory, parse_placement
from zbsolve.problem.problem import Pipe, Problem, Stage, StageCost


def test_single_placement_is_one_chain_one_stage_per_device():
    p = uniform(4, 8)
    assert len(p.pipes) == 1
    assert [s.device for s in p.pipes[0].stages] == [0, 1, 2, 3]
    assert p.pipes[0].microbatches == tuple(range(8))
    assert p.one_f_one_b_peak() == 4.0


def test_interleaved_splits_each_rank_stage_into_chunks():
    p = uniform(3, 6, F=3.0, B=6.0, W=3.0, activation=3.0, residual=1.5, placement="interleaved:3")
    assert [s.device for s in p.pipes[0].stages] == [0, 1, 2] * 3
    assert p.stage_costs[0] == StageCost(1.0, 2.0, 1.0, 1.0, 0.5)
    # A: one microbatch leaves three chunk activations on each rank -> 3 x 1.0.
    assert p.activation_unit() == 3.0


def test_vshape_folds_the_chain_back():
    p = uniform(4, 8, placement="vshape")
    assert [s.device for s in p.pipes[0].stages] == [0, 1, 2, 3, 3, 2, 1, 0]
    assert p.activation_unit() == 1.0  # two half-size chunks per rank


def test_bidirectional_has_two_opposite_pipes_with_half_the_microbatches():
    p = uniform(4, 6, placement="bidirectional")
    assert [s.device for s in p.pipes[0].stages] == [0, 1, 2, 3]
    assert [s.device for s in p.pipes[1].stages] == [3, 2, 1, 0]
    assert p.pipes[0].microbatches == (0, 1, 2) and p.pipes[1].microbatches == (3, 4, 5)


def test_overlap_range_spans_the_pairs_that_may_form():
    # (longest max(F, B + W), longest F + B + W) over an F and another stage's backward on one device.
    assert uniform(4, 8, placement="bidirectional").overlap_range() == (2.0, 3.0)
    assert uniform(4, 8, placement="vshape").overlap_range() == (1.0, 1.5)  # half-size chunks
    assert uniform(4, 8).overlap_range() is None  # one stage per device: no pair
    # V on 2 ranks: device 0 holds chunk 0 (F=1, B+W=2) and chunk 3 (F=2, B+W=4); F0 with BW3
    # gives the longest half (4) and the longest run in turn (5), F3 with BW0 only (2, 4).
    costs = [StageCost(2.0, 2.0, 2.0, 2.0, 1.0), StageCost(4.0, 4.0, 4.0, 4.0, 2.0)]
    assert build_problem(2, 4, costs, placement="vshape").overlap_range() == (4.0, 5.0)


@pytest.mark.parametrize("placement, overlap, said", [
    ("single", 1.5, "fb_overlap 1.5 has no effect: no device holds two stages"),
    ("bidirectional", 1.5, "fb_overlap 1.5 is shorter than the longer half of a pair that may form "
                           "(max(F, B + W) = 2)"),
    ("bidirectional", 3.0, "fb_overlap 3 is no shorter than any pair's halves run in turn (F + B + W = 3 at most)"),
    ("bidirectional", 2.0, None),  # the range's ends: max(F, B + W) is allowed, F + B + W is not
    ("bidirectional", 2.9, None),
    ("bidirectional", None, None),
])
def test_an_fb_overlap_outside_the_design_range_warns_python_callers_once(placement, overlap, said):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        problem = uniform(4, 8, placement=placement, fb_overlap=overlap, memory="1x")
    assert problem.fb_overlap == overlap  # still used as given
    assert [(w.category, str(w.message)[:len(said)]) for w in caught] == ([(ProblemWarning, said)] if said else [])
    as_option = problem.overlap_warning("--fb-overlap")
    assert as_option is None if said is None else as_option.startswith(said.replace("fb_overlap", "--fb-overlap"))


def test_heterogeneous_costs_map_to_chunks_in_layer_order():
    costs = [StageCost(2.0, 2.0, 2.0, 2.0, 1.0), StageCost(4.0, 4.0, 4.0, 4.0, 2.0)]
    p = build_problem(2, 4, costs, placement="vshape")
    # virtual stage j is half of rank-stage j // 2
    assert [c.F for c in p.stage_costs] == [1.0, 1.0, 2.0, 2.0]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(devices=0), "devices"),
        (dict(microbatches=0), "microbatches"),
        (dict(rank_costs=StageCost(-1, 1, 1)), "F"),
        (dict(rank_costs=StageCost(1, math.nan, 1)), "B"),
        (dict(rank_costs=StageCost(1, 1, math.inf)), "W"),
        (dict(rank_costs=StageCost(1, 1, 1, 1.0, 2.0)), "residual"),
        (dict(rank_costs=StageCost(0, 1, 1)), r"F must be > 0"),
        (dict(placement="diagonal"), "placement"),
        (dict(placement="interleaved:0"), "interleaved"),
        (dict(placement="bidirectional", microbatches=7), "even"),
        (dict(placement="bidirectional", devices=3), "even"),
        (dict(memory="banana"), "memory"),
        (dict(memory="-1"), "memory"),
        (dict(comm=-0.5), "comm"),
        (dict(fb_overlap=0), "fb_overlap"),
        (dict(objective="latency"), "objective"),
    ],
)
def test_bad_fields_name_themselves(kwargs, field):
    args = dict(devices=4, microbatches=8, rank_costs=StageCost(1, 1, 1))
    args.update(kwargs)
    with pytest.raises(ProblemError, match=field):
        build_problem(args.pop("devices"), args.pop("microbatches"), args.pop("rank_costs"), **args)


def test_memory_shorthands():
    p = uniform(4, 8)
    assert parse_memory("1.5x", p) == (6.0,) * 4
    assert parse_memory("none", p) is None
    assert parse_memory("5", p) == (5.0,) * 4
    assert parse_memory("1,2,3,4", p) == (1.0, 2.0, 3.0, 4.0)
    assert parse_placement("interleaved:2").chunks == 2


def test_a_pipe_without_microbatches_is_refused():
    # Its devices would list no ops, which no schedule file or metric can describe.
    stages = (Stage(0, 0),)
    with pytest.raises(ProblemError, match=r"pipes\[1\] has no microbatches"):
        Problem(devices=1, microbatches=1, stage_costs=(StageCost(1, 1, 1),),
                pipes=(Pipe(stages, (0,)), Pipe(stages, ())))
