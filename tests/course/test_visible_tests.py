"""A test cell's visible asserts need only its own exercise's answer, those of the exercises it builds on, and the
functions their solutions call (notebook 3's rules call `unbroadcast`): a learner who has not finished an earlier,
unrelated exercise can still see this one pass. Notebook 2's asserts used
the learner's operators from exercise 1, so a wrong `__mul__` failed `backward`'s cell as `visible-test` (issue 24).

Each test cell runs in this process after the notebook's cells up to it, with every other answer left as the
learner's stub (the release version) and its failures ignored, as a learner's kernel would hold them."""
import ast
import re
import sys
import types

import nbformat
import pytest

from autograder.checks import exercise_ids, prerequisites
from autograder.contract import assignments, exercise_id
from autograder.course import solution_version
from conftest import learner_notebook

HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n", re.S)


def needed(exercise: str, solved) -> set[str]:
    """The answer cells (grade ids) ``exercise``'s visible test may use: its own, those of what it builds on, however
    indirectly, and those defining a function that the solution of one of these calls."""
    functions = {node.name: grade_id for grade_id, graded, cell in solved if grade_id and not graded
                 for node in ast.parse(cell.source).body if isinstance(node, ast.FunctionDef)}
    calls = {grade_id: {node.id for node in ast.walk(ast.parse(cell.source)) if isinstance(node, ast.Name)}
             for grade_id, graded, cell in solved if grade_id and not graded}
    found, queue = set(), [exercise]
    while queue:
        current = queue.pop()
        if current in found:
            continue
        found.add(current)
        queue.extend(prerequisites(current) if current in exercise_ids() else ())
        queue.extend(functions[name] for name in calls.get(current, ()) if name in functions)
    return found


def cells_of(nb) -> list[tuple[str | None, bool, object]]:
    return [(c.metadata.get("nbgrader", {}).get("grade_id"), c.metadata.get("nbgrader", {}).get("grade", False), c)
            for c in nb.cells if c.cell_type == "code"]


def visible_cases():
    for name in assignments():
        solved = solution_version(nbformat.read(assignments()[name], as_version=4))
        for grade_id, graded, _ in cells_of(solved):
            # training's cell trains on MNIST for minutes; what it builds on is checked before it
            if graded and grade_id and grade_id.startswith("test_") and exercise_id(grade_id) != "training":
                yield pytest.param(name, grade_id, id=grade_id)


@pytest.mark.parametrize("name, test_id", list(visible_cases()))
def test_a_visible_test_needs_only_its_exercise_and_what_it_builds_on(name, test_id, monkeypatch, tmp_path):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    solved = cells_of(solution_version(nbformat.read(assignments()[name], as_version=4)))
    keep = needed(exercise_id(test_id), solved)
    stubs = {grade_id: cell.source for grade_id, _, cell in cells_of(nbformat.read(learner_notebook(name), as_version=4))
             if grade_id}
    module = types.ModuleType("__visible__")  # registered, as a notebook's __main__ is: dataclasses look it up
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    for grade_id, graded, cell in solved:
        if graded and grade_id != test_id:
            continue  # another exercise's test cell: a learner may not have run it
        if grade_id == test_id:
            source = "\n".join(line for line in HIDDEN.sub("", cell.source).splitlines()
                               if not line.startswith("run_check("))
            exec(compile(source, f"<{test_id}>", "exec"), namespace)  # must not raise
            return
        mine = grade_id is None or grade_id in keep or exercise_id(grade_id) in keep or grade_id not in stubs
        try:
            exec(compile(cell.source if mine else stubs[grade_id], f"<{grade_id}>", "exec"), namespace)
        except Exception:  # a given cell that runs an unfinished answer: the learner sees it fail, and goes on
            pass
    pytest.fail(f"no test cell {test_id}")
