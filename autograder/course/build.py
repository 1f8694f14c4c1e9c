"""Generate the committed learner notebooks (``notebooks/``) and solution notebooks (``solutions/``) from ``source/``."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import nbformat

from autograder.contract import MEASURED_TAG, REPO, assignments
from autograder.course import CELL_TIMEOUT_S, KERNEL_ARGS, configure, solution_version


def release(dest: Path = REPO / "notebooks", keep_edited: bool = False, names: list[str] | None = None) -> list[Path]:
    """Run nbgrader generate_assignment for every assignment (or those in ``names``), writing
    ``dest/<name>/<name>.ipynb``.

    Args:
        dest: the release folder.
        keep_edited: leave alone a notebook that has uncommitted changes (a learner's answers); ``make demo`` sets
            it, ``make release`` does not.
        names: the assignments to release; all of them when None.

    Returns:
        The notebooks written (a kept notebook is not among them).

    Raises:
        RuntimeError: nbgrader refused a source notebook (its log is in the message).
    """
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    written = []
    with tempfile.TemporaryDirectory(prefix="release-") as scratch:
        config = Config()
        configure(config, release_directory=f"{scratch}/release")
        config.CourseDirectory.root = str(REPO)
        config.CourseDirectory.db_url = f"sqlite:///{scratch}/gradebook.db"  # keep the repository free of a gradebook
        api = NbGraderAPI(config=config)
        for name in names or assignments():
            outcome = api.generate_assignment(name)
            if not outcome["success"]:
                raise RuntimeError(f"nbgrader generate_assignment {name} failed:\n{outcome.get('error') or outcome.get('log')}")
            fresh = Path(scratch) / "release" / name / f"{name}.ipynb"
            target = Path(dest) / name / f"{name}.ipynb"
            if target.exists() and target.read_bytes() != fresh.read_bytes() and keep_edited and has_local_edits(target):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(fresh, target)
            written.append(target)
    return written


def has_local_edits(path: Path) -> bool:
    """True when git reports uncommitted changes to ``path``, or when git cannot tell (then assume the worst)."""
    status = subprocess.run(["git", "status", "--porcelain", "--", str(path)], cwd=REPO, capture_output=True, text=True)
    return status.returncode != 0 or bool(status.stdout.strip())


def solutions(dest: Path = REPO / "solutions", execute: bool = True, names: list[str] | None = None) -> list[Path]:
    """Write each source notebook (or those in ``names``) with hidden tests removed, executed top to bottom with its
    outputs, as ``dest/<name>/<name>.ipynb``.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell of a solution notebook failed.
        KeyError: a name in ``names`` is no assignment of the course.
    """
    # jupyter's kernel machinery, loaded only where notebooks run
    from nbclient import NotebookClient

    from autograder.course.kernels import LocalKernelManager

    written = []
    for name in names or assignments():
        nb = solution_version(nbformat.read(assignments()[name], as_version=4))
        out = Path(dest) / name / f"{name}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        if execute:
            NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", record_timing=False, extra_arguments=KERNEL_ARGS,
                           kernel_manager_class=LocalKernelManager,
                           resources={"metadata": {"path": str(out.parent)}}).execute()
        nbformat.write(reproducible(nb), out)
        written.append(out)
    return written


def reproducible(nb):
    """Make an executed notebook byte-identical across runs of unchanged code.

    Stream output arrives in chunks whose boundaries depend on timing: merge consecutive ones (nbconvert's
    CoalesceStreamsPreprocessor). nbclient saves widgets under random model ids, in the order the kernel created
    them: renumber them in that order. Cells tagged ``measured`` show timings of this machine at this moment: keep
    them executed but without outputs, since a learner's own run is what counts.
    """
    from nbconvert.preprocessors.coalescestreams import CoalesceStreamsPreprocessor

    nb, _ = CoalesceStreamsPreprocessor().preprocess(nb, {})
    for cell in nb.cells:
        if MEASURED_TAG in cell.metadata.get("tags", []):
            cell.outputs = []
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    text = nbformat.writes(nb)
    for number, model_id in enumerate(list(state)):
        text = text.replace(model_id, f"{number:032x}")
    return nbformat.reads(text, as_version=4)


