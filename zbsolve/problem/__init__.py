"""The problem: its data, named placements, cost profiles, the op graph and size limits."""

from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import Pipe, Problem, Stage, StageCost
from zbsolve.problem.profiles import load_profile

__all__ = ["Op", "OpGraph", "Pipe", "Problem", "Stage", "StageCost", "build_problem", "load_profile"]
