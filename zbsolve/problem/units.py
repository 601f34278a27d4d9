"""Memory amounts as users write them: 40GB, 40G, 38GiB, 512MB, in whatever unit the costs
are in (a profile's memory_unit). Bare K, M, G, T are decimal, as GPU memory is sold."""

from __future__ import annotations

import re

from zbsolve.errors import ProblemError

BYTES = {"b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
         "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30, "tib": 2.0**40}
_AMOUNT = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*([a-z]+)\s*", re.IGNORECASE)


def bytes_per(unit: str | None) -> float | None:
    """Bytes in one `unit`, or None when it is no byte unit ("units", or none given)."""
    return None if unit is None else BYTES.get(unit.strip().lower())


def amount_in(text: str, unit: str | None) -> float | None:
    """`text` ("40GB") in `unit` (the costs' memory unit); None when `text` names no unit."""
    match = _AMOUNT.fullmatch(text)
    if match is None or match.group(2).lower() in ("x",):
        return None
    given = bytes_per(match.group(2))
    if given is None:
        raise ProblemError(f"memory {text.strip()!r}: unknown unit {match.group(2)!r} (use B, kB, MB, GB, TB, "
                           "KiB, MiB, GiB or TiB)")
    own = bytes_per(unit)
    if own is None:
        named = f"in {unit!r}, not a byte unit" if unit else "in no named unit"
        raise ProblemError(f"memory {text.strip()!r} names a unit, but the costs' memory is {named}: give the "
                           "amount without a unit, or costs with a memory unit (a profile's memory_unit, or "
                           "--memory-unit)")
    return float(match.group(1)) * given / own


SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_RATE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*([a-z]+)\s*/\s*s\s*", re.IGNORECASE)


def copy_time(amount: float, unit: str | None, time_unit: str, bandwidth: str) -> float:
    """How long `amount` of memory (in `unit`) takes to cross a link of `bandwidth` ("25GB/s"),
    in `time_unit` (s, ms, us or ns)."""
    match = _RATE.fullmatch(bandwidth)
    rate = None if match is None else bytes_per(match.group(2))
    if match is None or rate is None or float(match.group(1)) <= 0:
        raise ProblemError(f"bandwidth {bandwidth.strip()!r}: expected an amount per second above 0, such as 25GB/s")
    own = bytes_per(unit)
    if own is None:
        raise ProblemError(f"a copy's time from a bandwidth needs the activation in a byte unit (a profile's "
                           f"memory_unit, or --memory-unit), not {unit!r}")
    per_second = SECONDS.get(time_unit.strip().lower())
    if per_second is None:
        raise ProblemError(f"a copy's time from a bandwidth needs times in s, ms, us or ns, not {time_unit!r}")
    return amount * own / (float(match.group(1)) * rate) / per_second
