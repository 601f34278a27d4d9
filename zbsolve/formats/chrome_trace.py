"""Chrome trace (Perfetto / chrome://tracing): one process per device, one event per op."""

from __future__ import annotations

import json
import os

from zbsolve.formats.atomic_files import write_atomic
from zbsolve.schedule.schedule import Schedule

MICROSECONDS = {"s": 1e6, "ms": 1e3, "us": 1.0, "µs": 1.0, "ns": 1e-3}
COPY_THREADS = {"O": (2, "device-to-host copies"), "L": (3, "host-to-device copies")}


def chrome_trace(schedule: Schedule) -> dict:
    """Times become microseconds when the unit is known; otherwise one unit = 1 µs."""
    scale = MICROSECONDS.get(schedule.problem.time_unit, 1.0)
    events = []
    pipes = len(schedule.problem.pipes)
    for d, ops in enumerate(schedule.devices):
        events.append({"name": "process_name", "ph": "M", "pid": d, "args": {"name": f"device {d}"}})
        events.append({"name": "thread_name", "ph": "M", "pid": d, "tid": 0, "args": {"name": "ops"}})
        if any(t.overlap is not None for t in ops):  # the backward half of each F&B pair
            events.append({"name": "thread_name", "ph": "M", "pid": d, "tid": 1,
                           "args": {"name": "paired backward"}})
        for kind, (tid, channel) in COPY_THREADS.items():  # the offload lever's copy channels
            if any(t.op.kind == kind for t in ops):
                events.append({"name": "thread_name", "ph": "M", "pid": d, "tid": tid, "args": {"name": channel}})
        for t in ops:
            op = t.op
            where = f"stage {op.stage}" if pipes == 1 else f"pipe {op.pipe} stage {op.stage}"
            events.append({
                "name": f"{op.kind} {where} mb {op.microbatch}", "cat": op.kind, "ph": "X", "pid": d,
                "tid": COPY_THREADS[op.kind][0] if op.kind in COPY_THREADS
                else 0 if t.overlap is None or op.kind == "F" else 1,
                "ts": _micro(t.start, scale), "dur": _micro(t.end - t.start, scale),
                "args": {"kind": op.kind, "pipe": op.pipe, "stage": op.stage,
                         "microbatch": op.microbatch, "overlap": t.overlap},
            })
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"schedule": schedule.name, "time_unit": schedule.problem.time_unit}}


def _micro(value: float, scale: float) -> float:
    # Float noise only: 36.756 ms came out as 36755.99999999997 µs.
    return round(value * scale, 6)


def write_chrome_trace(schedule: Schedule, path: str | os.PathLike) -> None:
    write_atomic(path, json.dumps(chrome_trace(schedule)) + "\n")
