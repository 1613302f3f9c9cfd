"""The engine's modules import each other without cycles (and nothing from Django)."""

from __future__ import annotations

import ast
from pathlib import Path

import scheduler.engine

ENGINE = Path(scheduler.engine.__file__).parent


def _imports(path: Path) -> set[str]:
    """Engine modules ``path`` imports, at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "scheduler.engine."
        ):
            found.add(node.module.split(".")[2])
    return found


def test_no_import_cycles_between_engine_modules():
    graph = {p.stem: _imports(p) - {p.stem} for p in ENGINE.glob("*.py") if p.stem != "__init__"}
    done, path = set(), []

    def visit(module):
        assert module not in path, " -> ".join([*path[path.index(module):], module])
        if module in done:
            return
        path.append(module)
        for other in graph.get(module, ()):
            visit(other)
        path.pop()
        done.add(module)

    for module in graph:
        visit(module)


def test_the_engine_imports_nothing_from_django():
    for p in ENGINE.glob("*.py"):
        text = p.read_text(encoding="utf-8")
        assert "from django" not in text and "import django" not in text, p.name
