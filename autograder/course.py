"""The course as nbgrader sees it: configuration, assignments, and the notebook transformations we apply.

Each assignment is one folder ``source/<NN_name>/`` holding one notebook ``<NN_name>.ipynb``.
"""
from __future__ import annotations

import os
import re
import sys
import types
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "source"
COURSE_ID = "backprop-from-scratch"
# Per-cell limit when nbgrader runs a notebook: room for later notebooks' training cells (tens of seconds on
# 2 cores), short enough that a learner's endless loop outside a check costs minutes, not an hour.
CELL_TIMEOUT_S = int(os.environ.get("BACKPROP_CELL_TIMEOUT_S", "120"))  # tests of runaway cells set it lower
SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)
TEST_PREFIX = "test_"
TRUSTED_GRADING_ENV = "BACKPROP_TRUSTED_GRADING"  # set for nbgrader's kernels when verdicts come from outside
# nbclient's own tag for cells it skips: a widget cell waits for a person, and an unattended run (grading, validate,
# solutions/) must not wait with it -- nbclient sometimes stalls a full cell timeout on one (issue 11).
INTERACTIVE_TAG = "skip-execution"
WIDGET_FUNCTIONS = ("h_explorer", "backward_stepper")  # labtools functions that return a live widget
MEASURED_TAG = "measured"  # a cell whose outputs are timings: solutions/ keeps it without outputs
# Kernel flags for every notebook run. Plain tracebacks show one line per frame instead of five lines of context,
# so a failing visible assert never prints the hidden block after it (CheckFailure renders without frames at all).
# log_level=ERROR hides ipykernel's start-up warning about unencrypted loopback TCP, which is noise here.
KERNEL_ARGS = ["--HistoryManager.hist_file=:memory:", "--InteractiveShell.xmode=Plain", "--IPKernelApp.log_level=ERROR"]


# nbgrader_config.py of a throwaway course (the demo, the grading benchmark, tests): releases go to release/.
SCRATCH_COURSE_CONFIG = "from autograder.course import configure\nconfigure(get_config(), release_directory='release')\n"
STAGES = ("whole", "execute", "record")


def configure(c, release_directory: str = "notebooks", stage: str = "whole") -> None:
    """Apply the course's nbgrader settings to a traitlets config ``c``.

    ``stage`` splits ``nbgrader autograde`` at its Execute step, for class grading (autograder.class_grading):
    "whole" runs everything (a serial ``nbgrader autograde``); "execute" only sanitizes and runs the notebook with
    its trusted verdicts, writing no grades (a grading worker); "record" takes that run's outputs instead of running
    anything (ReplayExecution, whose ``directory`` the caller sets) and writes the gradebook as nbgrader does.
    """
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import ClearHiddenTests, GetGrades

    from autograder.preprocessors import SeparateCopiedCells

    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.source_directory = "source"
    c.CourseDirectory.release_directory = release_directory
    # Hypothesis leaves a .hypothesis/ cache where a notebook runs; nbgrader would copy it into every submission.
    c.CourseDirectory.ignore = CourseDirectory.class_traits()["ignore"].default() + [".hypothesis"]
    c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    c.Execute.timeout = CELL_TIMEOUT_S
    # The flag tells the kernel's in-notebook checks that TrustedVerdicts (below) decides; see checks.check.
    flag = f"--IPKernelApp.exec_lines=import os; os.environ['{TRUSTED_GRADING_ENV}'] = '1'"
    c.Execute.extra_arguments = KERNEL_ARGS + [flag]
    c.Execute.kernel_manager_class = "autograder.preprocessors.SandboxedKernelManager"
    # A cell past its timeout is stopped by killing the kernel, not by an interrupt a learner can ignore.
    c.Execute.interrupt_on_timeout = False
    # A learner's copy of a graded cell must not stop the class run (SeparateCopiedCells says why).
    c.Autograde.sanitize_preprocessors = [SeparateCopiedCells, *Autograde.class_traits()["sanitize_preprocessors"].default()]
    set_stage(c, stage)
    # nbgrader's feedback shows test cells in full by default; strip the hidden block first.
    c.GenerateFeedback.preprocessors = [ClearHiddenTests, GetGrades, CSSHTMLHeaderPreprocessor]


def quiet_nbgrader() -> None:
    """Silence the SQLAlchemy autoflush warnings nbgrader 0.9.6 trips on every autograde; they say nothing about the
    grades. Call it before starting threads: a thread leaving ``warnings.catch_warnings()`` puts back the filters it
    saw on entering, so a filter added meanwhile on another thread can be lost."""
    from sqlalchemy.exc import SAWarning

    warnings.filterwarnings("ignore", category=SAWarning)


def configure_exchange(c, root: Path) -> None:
    """Point nbgrader's release, fetch, submit and collect at the exchange folder ``root`` of this course.

    nbgrader's default, /srv/nbgrader/exchange, does not exist on a fresh machine, so Formgrader and the Assignment
    List would warn and release/collect would fail. The folder is created world-writable (0o777), as nbgrader's
    own release would create it, so learners with their own accounts on the machine can submit. A JupyterHub
    deployment points ``root`` at a folder every user's server sees instead (README, "One machine or a hub").
    """
    c.CourseDirectory.course_id = COURSE_ID
    c.Exchange.root = str(root)
    if not root.is_dir():
        root.mkdir(parents=True)
        root.chmod(0o777)


def set_stage(c, stage: str) -> None:
    """Set which part of ``nbgrader autograde`` a config ``c`` runs (see configure), leaving the rest as it is."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import CheckCellMetadata, Execute

    from autograder.preprocessors import ContainedExecute, ReplayExecution, StartTrustedVerdicts, TrustedVerdicts

    if stage not in STAGES:
        raise ValueError(f"unknown grading stage {stage!r}; one of {', '.join(STAGES)}")
    # Trusted grading: verdicts are computed outside the learner's kernel while it runs the notebook, and replace
    # the test cells' outputs right after.
    execution = [StartTrustedVerdicts, ContainedExecute, TrustedVerdicts]
    pipeline = Autograde.class_traits()["autograde_preprocessors"].default()
    at = pipeline.index(Execute)
    if stage == "execute":
        pipeline = execution
    else:
        pipeline[at:at + 1] = execution if stage == "whole" else [ReplayExecution]
    if stage == "record":
        # The grading worker checked this submission's cell metadata while sanitizing it (and failed it with nbgrader's
        # reason); the one recording process, which sets a large class's pace, need not check it again. The check at
        # the end of the pipeline, on the graded notebook, stays.
        sanitize = c.Autograde.get("sanitize_preprocessors") or Autograde.class_traits()["sanitize_preprocessors"].default()
        c.Autograde.sanitize_preprocessors = [p for p in sanitize if p is not CheckCellMetadata]
    c.Autograde.autograde_preprocessors = pipeline


def assignments() -> dict[str, Path]:
    """Assignment name -> source notebook path, in course order."""
    return {p.parent.name: p for p in sorted(SOURCE.glob("*/*.ipynb")) if p.stem == p.parent.name}


def nbgrader_cells(nb) -> list[dict]:
    """The nbgrader metadata of every answer or test cell, in notebook order."""
    found = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") or meta.get("solution"):
            found.append(meta)
    return found


def exercise_id(grade_id: str) -> str:
    """The exercise id of a test cell (``test_<id>``) or of an answer cell (``<id>``)."""
    return grade_id[len(TEST_PREFIX):] if grade_id.startswith(TEST_PREFIX) else grade_id


def solution_version(nb):
    """Source notebook -> solution notebook: hidden tests removed, solution markers dropped, outputs cleared."""
    import nbformat
    from nbgrader.preprocessors import ClearHiddenTests

    nb = nbformat.from_dict(nb)
    nb, _ = ClearHiddenTests(enforce_metadata=False).preprocess(nb, {})
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = SOLUTION_MARKERS.sub("", cell.source)
            cell.outputs, cell.execution_count = [], None
    return nb


def solution_namespace(name: str, edits: dict | None = None, extra: str = "") -> dict:
    """Run a solution notebook's code as a learner's kernel would hold it, for tests and benchmarks.

    Runs the given cells before the first exercise whole, every answer cell, and the definitions of the given cells
    after it (autograder.trusted.definitions: a class such as notebook 2's ``Module``), skipping test cells;
    ``edits`` ({grade_id: [(right, wrong), ...]}) are applied to answer cells first, then ``extra`` code runs (for
    example a correct alternative that redefines a function).

    Raises:
        ValueError: an edit no longer matches the solution, or names no answer cell.
    """
    import nbformat

    from autograder.trusted import definitions

    nb = solution_version(nbformat.read(assignments()[name], as_version=4))
    edits = dict(edits or {})
    module = types.ModuleType("__learner__")  # registered, as a notebook's __main__ is: dataclasses look it up
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    seen_answer = False
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        seen_answer = seen_answer or meta.get("solution", False)
        if cell.cell_type != "code" or meta.get("grade"):
            continue
        source = definitions(cell.source) if seen_answer and not meta.get("solution") else cell.source
        for right, wrong in edits.pop(meta.get("grade_id"), []):
            if right not in source:
                raise ValueError(f"edit no longer matches the solution of {meta.get('grade_id')}: {right!r}")
            source = source.replace(right, wrong)
        exec(compile(source, f"<{name}:{cell.id}>", "exec", dont_inherit=True), namespace)
    if edits:
        raise ValueError(f"edits for unknown answer cells: {sorted(edits)}")
    exec(compile(extra, "<alternative>", "exec", dont_inherit=True), namespace)
    return namespace
