"""The offload lever's benchmark table (docs/benchmarks.md, "Memory levers: offload") from the
solves `run.sh` wrote: for each case and host bandwidth, the solve with offload against the
solve without levers (benchmarks/levers, same settings) and the best hand-made schedule with
the PipeOffload rule's copies that keeps the limit."""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.levers.summarize import (  # run from the repository root: python -m benchmarks.offload.summarize
    rows,
    solved_cells,
)

OFFLOADED = ("1f1b-o", "zb-h1-o", "interleaved-o", "interleaved-zb-o", "zb-v-o")


def main(folder: Path) -> str:
    out = ["| case | host bandwidth | without levers (ms) | with offload (ms) | bound | gap | offloaded | "
           "best PipeOffload-rule baseline that fits (ms) |", "|---|---|---|---|---|---|---|---|"]
    for path in sorted(folder.glob("*.txt")):
        case, _, bandwidth = path.stem.rpartition("-")
        if bandwidth == "both":
            case, _, bandwidth = case.rpartition("-")
            bandwidth += ", with recompute"
        lever_text, note, best = solved_cells(rows(path), OFFLOADED)
        plain = rows(folder.parent / "levers" / f"{case}-plain.txt").get("solved")
        used = next((part.split()[1] for part in note.split(";") if part.strip().startswith("offloads")), "0")
        out.append(f"| {case} | {bandwidth.replace('GBps', ' GB/s')} | {plain[1] if plain else 'no schedule'} | "
                   f"{lever_text} | {used} | {best} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent))
