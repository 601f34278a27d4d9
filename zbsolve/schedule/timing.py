"""The one as-soon-as-possible timing: every slot of per-device orders starts as early as
its device and the results it waits for allow. The simulator times every schedule with it
on the problem's tick grid; the solvers' window searches re-time their orders with it in
solver units."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

from zbsolve.problem.op_graph import Op

Slot = tuple[Op, ...]  # one op, or the ops of an overlapped pair that start and end together
TimedSlot = tuple[Slot, int, int]  # (ops, start, end)


class DeadlockError(Exception):
    """The orders cannot run: some device waits for a result that never comes before it.
    `position[d]` is each device's next slot, `done` the results produced by then."""

    def __init__(self, position: list[int], done: Mapping[Hashable, int]) -> None:
        super().__init__("the orders cannot run")
        self.position, self.done = position, done


def earliest_times(
    orders: Sequence[Sequence[Slot]],
    requires: Callable[[Op], Iterable[tuple[Hashable, int]]],
    produces: Callable[[Op], Iterable[Hashable]],
    length: Callable[[Slot], int],
    release: Mapping[Op, int] | None = None,
) -> list[list[TimedSlot]]:
    """Each device's slots with their start and end. `requires(op)`: the results an op waits
    for, each with the delay after it; `produces(op)`: the results its end makes available;
    `release`: earliest starts. Raises DeadlockError when the orders deadlock.

    Event-driven: a device whose next slot waits for a result is woken when that result is
    produced, so the work grows with the ops, not with devices times rounds."""
    devices = len(orders)
    done: dict[Hashable, int] = {}
    position = [0] * devices
    free = [0] * devices
    timed: list[list[TimedSlot]] = [[] for _ in range(devices)]
    waiting: dict[Hashable, list[int]] = {}
    awake = list(range(devices - 1, -1, -1))
    while awake:
        d = awake.pop()
        order = orders[d]
        while position[d] < len(order):
            slot = order[position[d]]
            start, missing = free[d], None
            for op in slot:
                for key, delay in requires(op):
                    finished = done.get(key)
                    if finished is None:
                        missing = key
                        break
                    start = max(start, finished + delay)
                if missing is not None:
                    break
            if missing is not None:
                waiting.setdefault(missing, []).append(d)
                break
            if release:
                start = max(start, max(release.get(op, 0) for op in slot))
            end = start + length(slot)
            for op in slot:
                for key in produces(op):
                    done[key] = end
                    awake.extend(waiting.pop(key, ()))
            timed[d].append((slot, start, end))
            free[d] = end
            position[d] += 1
    if any(position[d] < len(orders[d]) for d in range(devices)):
        raise DeadlockError(position, done)
    return timed
