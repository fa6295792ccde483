"""The house's rules, executed: docs/architecture.md's dependency tables are what the code does.

- Each Python module of the package appears in the table of docs/architecture.md, and imports
  only what its row's "uses" column names, or a leaf (a module that needs nothing of the package
  but other leaves); the modules import one another without a cycle.
- Each Rust crate depends on exactly the crates of our workspace its row names, and the modules
  inside a crate use one another without a cycle (a crate's root, lib.rs or main.rs, gathers
  them all and is left out; so are test modules).

A change of the house is a change of that page and of the code together: the test fails on either
alone, with the edge that is not on the page.
"""
from __future__ import annotations

import ast
import re
import tomllib
from collections import defaultdict
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "python" / "pantheon"
ARCHITECTURE = REPO / "docs" / "architecture.md"
EVERYTHING = "everything"
"""A "uses" cell of "everything below": the command's entry point, above every other module."""


def _rows(header: str) -> list[list[str]]:
    """The cells of each row of the table whose header row starts with `header`."""
    lines = ARCHITECTURE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip("|"))])
    return rows


def _names(cell: str) -> list[str]:
    """The names in backticks of a table cell: `harness/`, `schemes.cli` -> harness, schemes.cli."""
    return [name.strip("/").replace("/", ".") for name in re.findall(r"`([^`]+)`", cell)]


def _uses(cell: str) -> set[str]:
    """The modules a "uses" cell names: its comma-separated items' first words ("harness (as a
    command)" is harness); "—" is none."""
    if cell == "—":
        return set()
    return {item.split()[0].replace("/", ".") for item in cell.split(",") if item.strip()}


def python_table() -> tuple[dict[str, set[str]], set[str]]:
    """(module -> the modules it may use, the leaves)."""
    uses, leaves = {}, set()
    for module_cell, _, uses_cell in _rows("| module |"):
        for name in _names(module_cell):
            if uses_cell == "leaf":
                leaves.add(name)
            uses[name] = set() if uses_cell == "leaf" else _uses(uses_cell)
    return uses, leaves


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module of the package that `path` imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "pantheon":
                found |= {alias.name for alias in node.names if alias.name != "__version__"}
            elif node.module.startswith("pantheon."):
                found.add(node.module.removeprefix("pantheon."))
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("pantheon.") for a in node.names if a.name.startswith("pantheon.")}
    return found


def _owner(module: str, rows: dict[str, set[str]]) -> str | None:
    """The table's row a module belongs to: the longest row name that is it or a package above it."""
    owners = [row for row in rows if module == row or module.startswith(row + ".")]
    return max(owners, key=len) if owners else None


def python_edges() -> dict[str, set[str]]:
    """Row -> the rows its modules import (within a row, modules may use each other)."""
    rows, _ = python_table()
    edges: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if module == "" or "migrations" in module.split("."):
            continue  # the package's root holds __version__ only; Alembic's migrations are data
        owner = _owner(module, rows)
        assert owner is not None, f"{module} is in no row of docs/architecture.md's table: add it"
        for imported in _imports(path):
            target = _owner(imported, rows)
            assert target is not None, f"{module} imports {imported}, which is in no row of docs/architecture.md's table"
            if target != owner:
                edges[owner].add(target)
    return edges


def test_every_python_module_uses_only_what_docs_architecture_says() -> None:
    rows, leaves = python_table()
    wrong = []
    for module, targets in python_edges().items():
        allowed = rows[module] | leaves
        if module in leaves:
            wrong += [f"{module} (a leaf) uses {t}, which is not a leaf" for t in sorted(targets - leaves)]
        elif EVERYTHING not in rows[module]:
            wrong += [f"{module} uses {t}" for t in sorted(targets - allowed)]
    assert not wrong, "imports that docs/architecture.md does not list: " + "; ".join(wrong)


def test_every_listed_python_dependency_is_real() -> None:
    """A row that names a module it no longer uses misleads its reader as much as a missing one."""
    rows, _ = python_table()
    edges = python_edges()
    stale = [f"{module} lists {t}" for module, targets in rows.items() for t in sorted(targets)
             if t != EVERYTHING and t not in edges.get(module, set())]
    assert not stale, "docs/architecture.md lists uses that the code does not have: " + "; ".join(stale)


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_python_modules_import_one_another_without_a_cycle() -> None:
    found = _cycle(python_edges())
    assert found is None, " -> ".join(found or [])


def test_nothing_reaches_up_into_the_harness() -> None:
    """The issue that built the house's third floor: the experiment's vocabulary (plan, trials,
    experiment), the simulator, calibration, the analysis and the scheme registry stand below the
    harness and never import it."""
    edges = python_edges()
    below = ["plan", "trials", "experiment", "sim", "calibrate", "analysis", "schemes", "presets", "gym", "indigo", "remy"]
    assert not [m for m in below if "harness" in edges.get(m, set())]


def test_the_analysis_depends_on_nothing_else_in_the_package() -> None:
    """It reads data dirs, whoever wrote them: only leaves, and the scheme registry's colours."""
    rows, leaves = python_table()
    assert python_edges().get("analysis", set()) - leaves <= {"schemes"}


def rust_crates() -> dict[str, set[str]]:
    """Crate directory name -> the workspace crates docs/architecture.md says it depends on."""
    table = {}
    for crate_cell, _, depends_cell, _ in _rows("| crate |"):
        name = _names(crate_cell)[0].removeprefix("crates.")
        table[name] = {word for word in re.findall(r"\b[a-z]+\b", depends_cell.split("(")[0])
                       if (REPO / "crates" / word).is_dir()}
    return table


def test_every_crate_depends_on_what_docs_architecture_says() -> None:
    table = rust_crates()
    assert sorted(table) == sorted(p.name for p in (REPO / "crates").iterdir() if (p / "Cargo.toml").exists())
    for name, documented in table.items():
        manifest = tomllib.loads((REPO / "crates" / name / "Cargo.toml").read_text())
        ours = {dep.removeprefix("pantheon-") for dep in manifest.get("dependencies", {}) if dep.startswith("pantheon-")}
        assert ours == documented, f"crates/{name} depends on {sorted(ours)}, docs/architecture.md says {sorted(documented)}"


def _rust_module_edges(src: Path) -> dict[str, set[str]]:
    """Top-level module -> the top-level modules of the same crate its code names (`crate::x`),
    comments and test modules (everything from a file's `#[cfg(test)]` on) left out."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in src.rglob("*.rs"):
        top = path.relative_to(src).parts[0].removesuffix(".rs")
        if top in ("lib", "main"):
            continue
        code = path.read_text().split("#[cfg(test)]")[0]
        text = re.sub(r"//.*", "", code)  # a doc comment's link to a module is no use of it
        for used in re.findall(r"\bcrate::([a-z_][a-z0-9_]*)\b", text):
            if used != top and ((src / f"{used}.rs").exists() or (src / used).is_dir()):
                edges[top].add(used)
        for group in re.findall(r"\buse crate::\{([^}]*)\}", text):
            for used in re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)\b", group):
                if used != top and ((src / f"{used}.rs").exists() or (src / used).is_dir()):
                    edges[top].add(used)
    return edges


def test_the_modules_of_every_crate_use_one_another_without_a_cycle() -> None:
    for src in sorted((REPO / "crates").glob("*/src")):
        found = _cycle(_rust_module_edges(src))
        assert found is None, f"{src.parent.name}: " + " -> ".join(found or [])
