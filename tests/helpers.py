"""Small builders and strategies shared by the tests."""

import copy
import json
import socket
from pathlib import Path

from hypothesis import strategies as st

from zbsolve.errors import InfeasibleError
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import Pipe, Problem, Stage, StageCost
from zbsolve.solvers import check_memory_feasible, minimum_memory
from zbsolve.solvers.view import ProblemView

REPO_ROOT = Path(__file__).resolve().parent.parent  # the checkout: models/, benchmarks/, examples/


def uniform(P, M, F=1.0, B=1.0, W=1.0, activation=1.0, residual=0.5, offload=None, **kw):
    return build_problem(P, M, StageCost(F, B, W, activation, residual, offload=offload), **kw)


def feasible(problem) -> bool:
    """Whether the memory limit admits any schedule (one microbatch's activation fits)."""
    try:
        check_memory_feasible(problem)
    except InfeasibleError:
        return False
    return True


# Decimal costs on a 0.1 grid keep the examples exact and varied.
cost_value = st.integers(1, 30).map(lambda n: n / 10)


@st.composite
def stage_costs(draw, n):
    records = []
    for _ in range(n):
        activation = draw(st.integers(1, 4))
        residual = draw(st.sampled_from([0.0, 0.25, 0.4, 0.5, 1.0])) * activation
        records.append(StageCost(draw(cost_value), draw(cost_value), draw(cost_value), activation, residual))
    return records


@st.composite
def small_problems(draw, max_devices=4, max_microbatches=6, memory=True):
    P = draw(st.integers(1, max_devices))
    M = draw(st.integers(1, max_microbatches))
    limit = draw(st.sampled_from([None, "1x", "1.5x", "2x", "3x"])) if memory else None
    return build_problem(
        P, M, draw(stage_costs(P)),
        comm=draw(st.sampled_from([0.0, 0.1, 0.5])), memory=limit,
        objective=draw(st.sampled_from(["makespan", "span"])),
    )


@st.composite
def placed_problems(draw, max_microbatches=4, memory=True):
    """Small problems on every placement (three chunks put costs off the decimal grid),
    sometimes with F&B overlap (any positive length, even one shorter than its halves,
    which the solver and validator must still handle)."""
    placement = draw(st.sampled_from(["single", "interleaved:2", "interleaved:3", "vshape", "bidirectional"]))
    if placement == "bidirectional":
        P, M = draw(st.sampled_from([2, 4])), 2 * draw(st.integers(1, max_microbatches // 2))
    else:
        P, M = draw(st.integers(1, 3)), draw(st.integers(1, max_microbatches))
    limit = draw(st.sampled_from([None, "1x", "1.5x", "2x"])) if memory else None
    overlap = draw(st.one_of(st.none(), st.integers(1, 60).map(lambda n: n / 10)))
    return build_problem(
        P, M, draw(stage_costs(P)), placement=placement,
        comm=draw(st.sampled_from([0.0, 0.1, 0.5])), memory=limit, fb_overlap=overlap,
        split_backward=draw(st.booleans()), objective=draw(st.sampled_from(["makespan", "span"])),
    )


@st.composite
def hand_built_problems(draw):
    """Problems a library user builds by hand: one to three pipes of any length, stages on any
    device (neighbours on one device too), cost records shared between stages, B, W and
    activations that may be 0, per-device limits from one to three microbatches' worth."""
    P = draw(st.integers(1, 3))
    maybe_zero = st.one_of(st.just(0.0), cost_value)
    records = []
    for _ in range(draw(st.integers(1, 3))):
        activation = draw(st.sampled_from([0.0, 1.0, 2.0]))
        residual = draw(st.sampled_from([0.0, 0.5, 1.0])) * activation
        records.append(StageCost(draw(cost_value), draw(maybe_zero), draw(maybe_zero), activation, residual))
    pipes_stages = [
        [Stage(draw(st.integers(0, P - 1)), draw(st.integers(0, len(records) - 1)))
         for _ in range(draw(st.integers(1, 4)))]
        for _ in range(draw(st.integers(1, 3)))
    ]
    used = {s.device for stages in pipes_stages for s in stages}
    pipes_stages[0] += [Stage(d, 0) for d in range(P) if d not in used]
    M = draw(st.integers(len(pipes_stages), len(pipes_stages) + 3))
    owner = list(range(len(pipes_stages))) + [draw(st.integers(0, len(pipes_stages) - 1))
                                               for _ in range(M - len(pipes_stages))]
    pipes = tuple(Pipe(tuple(stages), tuple(i for i in range(M) if owner[i] == q))
                  for q, stages in enumerate(pipes_stages))
    held = [max(sum(records[s.cost].activation for s in pipe.stages if s.device == d) for pipe in pipes)
            for d in range(P)]
    factor = draw(st.sampled_from([None, 1.0, 1.5, 2.0, 3.0]))
    limit = None if factor is None else tuple(max(factor * h, 0.5) for h in held)
    return Problem(
        devices=P, microbatches=M, stage_costs=tuple(records), pipes=pipes,
        comm=draw(st.sampled_from([0.0, 0.1, 0.5])), memory_limit=limit,
        split_backward=draw(st.booleans()), objective=draw(st.sampled_from(["makespan", "span"])),
    )


@st.composite
def tiny_problems(draw):
    """Problems small enough for tests/exact_model.py to solve exactly: every placement, memory
    limits down to 0.5x, split or fused backward, both objectives; no F&B pairs."""
    placement = draw(st.sampled_from(["single", "single", "interleaved:2", "vshape", "bidirectional"]))
    P = 2 if placement == "bidirectional" else draw(st.integers(1, 3))  # two pipes: even sizes
    M = 2 if placement == "bidirectional" else draw(st.integers(1, 5 if placement == "single" else 3))
    problem = build_problem(
        P, M, draw(stage_costs(P)), placement=placement, comm=draw(st.sampled_from([0.0, 0.1, 0.5])),
        memory=draw(st.sampled_from([None, "0.5x", "0.75x", "1x", "1.25x", "1.5x", "2x"])),
        split_backward=draw(st.booleans()), objective=draw(st.sampled_from(["makespan", "span"])),
    )
    limit = problem.memory_limit
    if limit is not None and any(a > b for a, b in zip(minimum_memory(problem), limit)):
        return draw(st.nothing())  # no schedule at all; covered by the infeasibility tests
    return problem


@st.composite
def tiny_pair_problems(draw):
    # Sizes the exhaustive search covers in well under a second each (split backward with two
    # microbatches on a V takes it ~15 s).
    placement = draw(st.sampled_from(["bidirectional", "vshape", "interleaved:2"]))
    split = draw(st.booleans())
    M = 2 if placement == "bidirectional" or not split else 1
    problem = build_problem(
        2, M, draw(stage_costs(2)), placement=placement, comm=draw(st.sampled_from([0.0, 0.1, 0.5])),
        memory=draw(st.sampled_from([None, "0.5x", "0.75x", "1x", "1.5x"])),
        fb_overlap=draw(st.integers(1, 60).map(lambda n: n / 10)),
        split_backward=split,
    )
    limit = problem.memory_limit
    if limit is not None and any(a > b for a, b in zip(minimum_memory(problem), limit)):
        return draw(st.nothing())
    return problem


def mutated(document, path, replacement, delete):
    """A copy of a JSON document with the entry at path (keys and indexes) replaced or deleted."""
    result = copy.deepcopy(document)
    parent = result
    for step in path[:-1]:
        parent = parent[step]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return result


def static_bound(view: ProblemView) -> int:
    """The static lower bound in solver units."""
    from zbsolve.solvers.bounds import lower_bound

    return lower_bound(view)


def children(pid: int) -> list[tuple[int, str]]:
    """Processes whose parent is `pid`, with their command lines."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid:
            found.append((int(entry.name), line))
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def free_port() -> int:
    """A TCP port free on this machine now, for a process group's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LAYER = {"F": 2.0, "B": 2.0, "W": 1.0, "activation": 1.0, "residual": 0.5}


def layered_profile(path: Path, body: int, head: float) -> str:
    """A profile that lists layers: an embedding, `body` transformer layers (LAYER) and a head
    with the norm, `head` times a layer's F, B and W; for two devices."""
    layers = ([{"name": "tok_embeddings", "F": 0.1, "B": 0.0, "W": 0.1, "activation": 0.1, "residual": 0.0}]
              + [{"name": f"layers.{i}", **LAYER} for i in range(body)]
              + [{"name": "lm_head", "modules": ["norm", "lm_head"], "F": 2.0 * head, "B": 2.0 * head,
                  "W": head, "activation": 2.0, "residual": 1.0}])
    path.write_text(json.dumps({"name": path.stem, "source": "test", "devices": 2, "microbatches": 4 if body > 3 else 3,
                                "layers": layers}))
    return str(path)
