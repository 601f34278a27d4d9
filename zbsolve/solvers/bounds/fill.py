"""Knapsacks for the memory bounds: the most work that what memory holds can offer, and the
most of the limit that whole activations can fill."""

from __future__ import annotations

import math
from collections import Counter
from itertools import product

# Combinations counted exactly (the cool-down's fill, the fullest set of activations);
# beyond, a relaxation: the fractional knapsack, or the limit itself.
EXACT_CASES = 20_000


def most_fill(free: int, kinds: list[tuple[int, int, int, int, int]]) -> float:
    """The most backward and W work that microbatches held within `free` memory can offer.

    Each kind (one stage) has `count` microbatches, each waiting for its backward (holding
    `activation`, offering the backward and its W) or for its W (holding `residual`), or done.
    """
    choices = [range(count + 1) if activation <= 0 else range(min(count, free // activation) + 1)
               for count, activation, *_ in kinds]
    if math.prod(len(c) for c in choices) > EXACT_CASES:
        items = [(a, b + w, n) for n, a, b, w, _ in kinds] + [(r, w, n) for n, _, _, w, r in kinds]
        return fractional(free, items)
    best = 0.0
    for waiting in product(*choices):
        room = free - sum(n * kind[1] for n, kind in zip(waiting, kinds))
        if room < 0:
            continue
        deferred = [(r, w, count - n) for n, (count, _, _, w, r) in zip(waiting, kinds) if w > 0 and count > n]
        work = sum(n * (b + w) for n, (_, _, b, w, _) in zip(waiting, kinds))
        best = max(best, work + most_length(room, deferred))
    return best


def most_length(room: int, items: list[tuple[int, int, int]]) -> float:
    """The most length of items (size, length, count) that fits `room`: exact when the sizes
    are equal (the longest first), otherwise the fractional knapsack, which is an upper bound."""
    free = sum(length * count for size, length, count in items if size <= 0)
    items = [item for item in items if item[0] > 0]
    if len({size for size, _, _ in items}) <= 1:
        fits = room // items[0][0] if items else 0
        for _, length, count in sorted(items, key=lambda item: -item[1]):
            taken = min(count, fits)
            free, fits = free + taken * length, fits - taken
        return free
    return free + fractional(room, items)


def fractional(room: float, items: list[tuple[int, int, int]]) -> float:
    """Fractional knapsack over (size, length, count): the most length within `room`."""
    total = 0.0
    for size, length, count in sorted(items, key=lambda item: -item[1] / item[0] if item[0] > 0 else -math.inf):
        if size <= 0:
            total += length * count
            continue
        taken = min(count, room / size)
        total, room = total + taken * length, room - taken * size
        if room <= 0:
            break
    return total


def most_held(limit: int, sizes: list[int]) -> int:
    """The most that activations of these sizes can hold together within `limit`: at most
    the limit, less where no set of them fills it (the limit holds 6.4 of one size, 6 fit)."""
    *others, (last, most) = sorted(Counter(sizes).items())
    if math.prod(min(n, limit // size) + 1 for size, n in others) > EXACT_CASES:
        return limit
    best = 0
    for taken in product(*(range(min(n, limit // size) + 1) for size, n in others)):
        room = limit - sum(k * size for k, (size, _) in zip(taken, others))
        if room >= 0:
            best = max(best, limit - room + min(most, room // last) * last)
    return best
