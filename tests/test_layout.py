"""The layout's promises, read from the source: no import circle, grading never imports the tools, the code that runs
next to learner code imports nothing of the course, and every import of the project inside a function says why it is
there."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from conftest import REPO

PACKAGES = ("autograder", "labtools")
# Run inside the sandbox, beside learner code: the standard library and numpy only (autograder/trust/__init__.py).
IN_THE_SANDBOX = ("autograder.trust.worker", "autograder.trust.wire",
                  "autograder.checks.reference.engine",
                  "autograder.checks.reference.modules", "autograder.checks.reference.nodes")
GRADING = ("autograder.trust", "autograder.grade", "autograder.course", "autograder.checks", "autograder.contract")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def imports(name: str) -> list[tuple[str, ast.stmt, bool]]:
    """(imported module, statement, inside a function) for every import statement of module ``name``.
    ``from package import name`` counts as importing the submodule when there is one."""
    tree = ast.parse(MODULES[name].read_text())
    found = []

    def visit(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((alias.name, child, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = name.split(".") if MODULES[name].name == "__init__.py" else name.split(".")[:-1]
                    base = ".".join(package[:len(package) - child.level + 1] + ([base] if base else []))
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    found.append((full if full in MODULES else base, child, in_function))
            visit(child, inner)

    visit(tree, False)
    return found


def project_edges() -> dict[str, set[str]]:
    return {name: {target for target, _, _ in imports(name) if target in MODULES and target != name}
            for name in MODULES}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(edges)))

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in edges:
        if v not in index:
            connect(v)
    return groups


def test_cycles_finds_a_circle_and_nothing_in_a_chain():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_circle_among_the_projects_modules():
    """Function-level imports count: a circle held together by them is still a circle."""
    assert cycles(project_edges()) == []


@pytest.mark.parametrize("name", [n for n in MODULES if n.startswith(GRADING)])
def test_grading_never_imports_the_tools(name):
    assert not [t for t in project_edges()[name] if t.startswith("autograder.tools")]


@pytest.mark.parametrize("name", IN_THE_SANDBOX)
def test_code_beside_learner_code_imports_only_the_standard_library_and_numpy(name):
    outside = {target.split(".")[0] for target, _, _ in imports(name)} - set(sys.stdlib_module_names) - {"numpy"}
    assert not outside, f"{name} runs in the sandbox, where {sorted(outside)} cannot be imported"
def test_every_import_inside_a_function_says_why():
    """An import of the project's own modules inside a function is there to save start-up time, or to load something
    only where it is needed: a comment in its block of imports (or on the ``try:`` that holds it) says which."""
    silent = []
    for name, path in MODULES.items():
        lines = path.read_text().splitlines()
        for target, statement, in_function in imports(name):
            if not in_function or target.split(".")[0] not in PACKAGES:
                continue
            if not explained(lines, statement.lineno - 1):
                silent.append(f"{path.relative_to(REPO)}:{statement.lineno}: {target}")
    assert not sorted(set(silent))


def explained(lines: list[str], at: int) -> bool:
    """Whether the import on line ``at`` (0-based), or the run of imports, comments and ``try:`` lines just above it,
    carries a comment."""
    while at >= 0:
        line = lines[at].strip()
        if line and not line.startswith(("import ", "from ", "try:", "#")):
            return False
        if "#" in line:
            return True
        at -= 1
    return False


def test_explained_finds_a_comment_in_the_import_block_only():
    lines = ["def f():", "    x = 1  # not about imports", "    import a", "    # why", "    import b", "    import c"]
    assert explained(lines, 5) and explained(lines, 4) and not explained(lines, 2)


def test_the_import_paths_instructors_use_keep_working():
    """nbgrader_config.py files call autograder.course's configure; scripts written from an earlier README import
    grade_class from autograder.class_grading; every import the README shows must work as printed."""
    import re

    from autograder.class_grading import grade_class
    from autograder.course import configure, configure_exchange
    from autograder.grade.class_run import grade_class as where_it_lives

    assert grade_class is where_it_lives and callable(configure) and callable(configure_exchange)
    shown = re.findall(r"^(from autograder[\w.]* import [\w, ]+)", (REPO / "README.md").read_text(), re.MULTILINE)
    assert shown, "the README shows no import of the grader"
    for line in shown:
        exec(line, {})
