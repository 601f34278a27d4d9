"""Imports follow the layers of docs/design.md ("Shape of the code"), and no two modules of
zbsolve import each other, directly or round a longer circle.

Every import that runs counts, also one inside a function; one under `if TYPE_CHECKING:`
(for annotations only) never runs and does not. An import of `zbsolve.a.b` is an edge to
that module; Python's loading of the package `zbsolve.a` on the way is not counted."""

import ast
from pathlib import Path

from helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "zbsolve"

# Lower numbers first; a module may import its own package and those of lower layers.
LAYERS = {
    "zbsolve.errors": 0,
    "zbsolve.version": 0,
    "zbsolve.problem": 1,
    "zbsolve.schedule": 2,
    "zbsolve.baselines": 3,
    "zbsolve.solvers": 4,
    "zbsolve.formats": 5,
    "zbsolve.plots": 6,
    "zbsolve.runtime": 6,
    "zbsolve.sweep": 7,
    "zbsolve.cli": 8,
    "zbsolve": 9,  # the public face (zbsolve/__init__.py) and __main__
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The zbsolve modules that module `name` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                   for statement in block.body for n in ast.walk(statement)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t == "zbsolve" or t.startswith("zbsolve."))
    return found


def layer_of(name: str) -> tuple[str, int]:
    group = max((g for g in LAYERS if name == g or name.startswith(g + ".")), key=len)
    return group, LAYERS[group]


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def test_every_module_belongs_to_a_layer():
    assert all(layer_of(name) for name in modules())
    assert {layer_of(name)[0] for name in modules()} == set(LAYERS)


def test_imports_only_reach_down_the_layers():
    wrong = []
    for name, targets in graph().items():
        group, layer = layer_of(name)
        for target in targets:
            other, other_layer = layer_of(target)
            if other != group and other_layer >= layer:
                wrong.append(f"{name} imports {target}")
    assert not wrong


def test_no_import_circle():
    edges = graph()
    circles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(edges.get(name, ())):
            if target not in edges or target == name:
                continue
            if state.get(target) == 1:
                circles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert not circles


def test_the_checker_sees_a_circle_and_a_wrong_layer(tmp_path, monkeypatch):
    # The checks above must be able to fail: a tree where the problem imports the solvers.
    root = tmp_path / "zbsolve"
    for folder in ("problem", "solvers"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "problem" / "a.py").write_text("from zbsolve.solvers import b\n")
    (root / "solvers" / "b.py").write_text("def f():\n    from zbsolve.problem import a\n")
    monkeypatch.setattr(__import__(__name__), "REPO_ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", root)
    edges = graph()
    assert edges["zbsolve.problem.a"] == {"zbsolve.solvers.b"} and edges["zbsolve.solvers.b"] == {"zbsolve.problem.a"}
    try:
        test_imports_only_reach_down_the_layers()
    except AssertionError:
        pass
    else:
        raise AssertionError("a problem module importing the solvers passed")
    try:
        test_no_import_circle()
    except AssertionError:
        pass
    else:
        raise AssertionError("a circle passed")
