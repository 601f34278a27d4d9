"""The recompute lever's benchmark table (docs/benchmarks.md, "Memory levers") from the solves
`run.sh` wrote: for each case, the solve with levers against the solve without them and the
best hand-made schedule with every microbatch recomputed that keeps the limit."""

from __future__ import annotations

import sys
from pathlib import Path

RECOMPUTED = ("1f1b-r", "zb-h1-r", "interleaved-r", "interleaved-zb-r", "zb-v-r")


def rows(path: Path) -> dict[str, list[str]]:
    """Each schedule's row of a solve's table, by name; a failed solve has none."""
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    found = {}
    for line in lines[3:]:
        words = line.split()
        if words and not line.startswith(("wrote", "zbsolve")):
            found[words[0]] = words
    return found


def solved_cells(table: dict[str, list[str]], baselines: tuple[str, ...]) -> tuple[str, str, str]:
    """A lever solve's table as cells: its value, bound and gap; its note; the fastest of
    `baselines` that keeps the limit."""
    solved = table.get("solved")
    fitting = [float(table[n][1]) for n in baselines if n in table and "over" not in " ".join(table[n])]
    note = " ".join(solved[13:]) if solved and len(solved) > 13 else ""
    value = f"{solved[1]} | {solved[2]} | {solved[3]}" if solved else "no schedule | - | -"
    return value, note, str(min(fitting)) if fitting else "none fits"


def main(folder: Path) -> str:
    out = ["| case | without levers (ms) | gap | with recompute (ms) | bound | gap | recomputed | best recomputed "
           "baseline (ms) |", "|---|---|---|---|---|---|---|---|"]
    for plain_path in sorted(folder.glob("*-plain.txt")):
        case = plain_path.name[:-len("-plain.txt")]
        plain, levers = rows(plain_path), rows(folder / f"{case}-levers.txt")
        without = plain.get("solved")
        lever_text, note, best = solved_cells(levers, RECOMPUTED)
        used = note.split(";")[0].replace("recomputes ", "") if note.startswith("recomputes") else "0"
        plain_text = f"{without[1]} | {without[3]}" if without else "no schedule | -"
        out.append(f"| {case} | {plain_text} | {lever_text} | {used} | {best} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent))
