"""Generate the committed learner notebooks (``notebooks/``) and solution notebooks (``solutions/``) from ``source/``."""
from __future__ import annotations

import tempfile
from pathlib import Path

import nbformat

from autograder.course import CELL_TIMEOUT_S, KERNEL_ARGS, REPO, assignments, configure, solution_version


def release(dest: Path = REPO / "notebooks") -> list[Path]:
    """Run nbgrader generate_assignment for every assignment, writing ``dest/<name>/<name>.ipynb``.

    The gradebook nbgrader needs on the way is kept in a temporary folder, so the repository stays clean.

    Raises:
        RuntimeError: nbgrader refused a source notebook (its log is in the message).
    """
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    written = []
    with tempfile.TemporaryDirectory(prefix="release-") as scratch:
        config = Config()
        configure(config, release_directory=str(Path(dest).resolve()))
        config.CourseDirectory.root = str(REPO)
        config.CourseDirectory.db_url = f"sqlite:///{scratch}/gradebook.db"
        api = NbGraderAPI(config=config)
        for name in assignments():
            outcome = api.generate_assignment(name)
            if not outcome["success"]:
                raise RuntimeError(f"nbgrader generate_assignment {name} failed:\n{outcome.get('error') or outcome.get('log')}")
            written.append(Path(dest) / name / f"{name}.ipynb")
    return written


def solutions(dest: Path = REPO / "solutions", execute: bool = True) -> list[Path]:
    """Write each source notebook with hidden tests removed, executed top to bottom with its outputs.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell of a solution notebook failed.
    """
    from nbclient import NotebookClient

    written = []
    for name, source in assignments().items():
        nb = solution_version(nbformat.read(source, as_version=4))
        out = Path(dest) / name / f"{name}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        if execute:
            NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", record_timing=False, extra_arguments=KERNEL_ARGS,
                           resources={"metadata": {"path": str(out.parent)}}).execute()
        nbformat.write(nb, out)
        written.append(out)
    return written


