"""What ran against the plan (zbsolve/runtime/measured.py), on hand-made timelines: no torch."""

import pytest

from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.runtime.measured import gaps


def test_waits_are_told_from_the_runtime_s_own_gaps():
    problem = build_problem(2, 2, StageCost(1, 0.5, 0.5), split_backward=False)
    ranks = [
        [("F", 0, 0, 0.0, 1.0), ("F", 0, 1, 1.1, 2.1), ("BW", 0, 0, 3.5, 4.5), ("BW", 0, 1, 5.6, 6.6)],
        [("F", 1, 0, 1.3, 2.3), ("BW", 1, 0, 2.4, 3.4), ("F", 1, 1, 3.5, 4.5), ("BW", 1, 1, 4.6, 5.4)],
    ]
    waits, overheads = gaps(problem, ranks)
    # rank 0's backwards wait for rank 1's (ended 3.4 and 5.4, after rank 0's previous ops);
    # rank 1's first F waits for rank 0's F0 (ended 1.0)
    assert waits == pytest.approx([0.1, 0.2, 0.3])
    # rank 0's F1 has no input; rank 1's F1 found F1 of rank 0 there (2.1) when its BW0 ended
    # (3.4); the last stage's backwards have no cross-rank input: the gaps are the runtime's
    assert overheads == pytest.approx([0.1, 0.1, 0.1, 0.1])
