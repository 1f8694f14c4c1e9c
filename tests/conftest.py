"""Shared set-up: Jupyter and IPython state in a temp folder, the venv's tools on PATH, and paths to notebooks."""
import os
import sys
import tempfile
from pathlib import Path

import pytest

# Before anything imports Jupyter: nothing may land in $HOME, and kernels/alembic come from this environment.
_STATE = Path(tempfile.mkdtemp(prefix="bfs-tests-"))
for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                 ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")):
    os.environ[var] = str(_STATE / sub)
    (_STATE / sub).mkdir()
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENTS = sorted(p.parent.name for p in REPO.glob("source/*/*.ipynb") if p.stem == p.parent.name)


def learner_notebook(name: str) -> Path:
    return REPO / "notebooks" / name / f"{name}.ipynb"


def solution_notebook(name: str) -> Path:
    return REPO / "solutions" / name / f"{name}.ipynb"


@pytest.fixture(params=ASSIGNMENTS)
def assignment(request) -> str:
    return request.param


def rejects(exercise_id, answer, *phrases):
    """Run a check that must fail; every phrase must appear in its diagnosis. Returns the diagnosis."""
    from autograder import CheckFailure, check

    with pytest.raises(CheckFailure) as info:
        check(exercise_id, answer)
    for phrase in phrases:
        assert phrase in info.value.message, info.value.message
    return info.value.message


def solution_namespace(name: str, edits: dict | None = None, extra: str = "") -> dict:
    """Run a solution notebook's code as a learner's kernel would hold it: the given cells before the first exercise
    and every answer cell, with ``edits`` ({grade_id: [(right, wrong), ...]}) applied first, then ``extra`` code
    (for example a correct alternative that redefines a function). Demonstration cells are skipped.
    """
    import nbformat

    from autograder.course import assignments, solution_version

    nb = solution_version(nbformat.read(assignments()[name], as_version=4))
    edits = dict(edits or {})
    namespace: dict = {"__name__": "__learner__"}
    seen_answer = False
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        seen_answer = seen_answer or meta.get("solution", False)
        if cell.cell_type != "code" or meta.get("grade") or (seen_answer and not meta.get("solution")):
            continue
        source = cell.source
        for right, wrong in edits.pop(meta.get("grade_id"), []):
            assert right in source, f"edit no longer matches the solution: {right!r}"
            source = source.replace(right, wrong)
        exec(compile(source, f"<{name}:{cell.id}>", "exec"), namespace)
    assert not edits, f"edits for unknown cells: {sorted(edits)}"
    exec(compile(extra, "<alternative>", "exec"), namespace)
    return namespace
