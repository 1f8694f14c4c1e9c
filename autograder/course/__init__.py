"""The course as nbgrader sees it: its configuration, the preprocessors it adds, and building releases.

Each assignment is one folder ``source/<NN_name>/`` holding one notebook ``<NN_name>.ipynb``
(autograder.contract.assignments). ``configure`` is what nbgrader_config.py calls; nbgrader and the checks are
imported only when a configuration is built, so that reading this module costs nothing.
"""
from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

from autograder.contract import COURSE_ID, TRUSTED_GRADING_ENV

# Per-cell limit when nbgrader runs a notebook: room for later notebooks' training cells (tens of seconds on
# 2 cores), short enough that a learner's endless loop outside a check costs minutes, not an hour.
CELL_TIMEOUT_S = int(os.environ.get("BACKPROP_CELL_TIMEOUT_S", "120"))  # tests of runaway cells set it lower
SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)
# Kernel flags for every notebook run. Plain tracebacks show one line per frame instead of five lines of context,
# so a failing visible assert never prints the hidden block after it (CheckFailure renders without frames at all).
# log_level=ERROR hides ipykernel's start-up warnings, which are noise here.
KERNEL_ARGS = ["--HistoryManager.hist_file=:memory:", "--InteractiveShell.xmode=Plain", "--IPKernelApp.log_level=ERROR"]


# nbgrader_config.py of a throwaway course (the demo, the grading benchmark, tests): releases go to release/.
SCRATCH_COURSE_CONFIG = ("from autograder.course import configure\n"
                         "configure(get_config(), release_directory='release')\n")
STAGES = ("whole", "execute", "record")


def configure(c, release_directory: str = "notebooks", stage: str = "whole") -> None:
    """Apply the course's nbgrader settings to a traitlets config ``c``.

    ``stage`` splits ``nbgrader autograde`` at its Execute step, for class grading (autograder.grade.class_run):
    "whole" runs everything (a serial ``nbgrader autograde``); "execute" only sanitizes and runs the notebook with
    its trusted verdicts, writing no grades (a grading worker); "record" takes that run's outputs instead of running
    anything (ReplayExecution, whose ``directory`` the caller sets) and writes the gradebook as nbgrader does.
    """
    # nbgrader, and the checks behind the preprocessors, load only when a configuration is built.
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.converters import Autograde, GenerateAssignment
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import ClearHiddenTests, GetGrades

    from autograder.course.preprocessors import MakeGradingSecret, RefuseUnsafeFiles, SeparateCopiedCells

    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.source_directory = "source"
    c.CourseDirectory.release_directory = release_directory
    # Hypothesis leaves a .hypothesis/ cache where a notebook runs; nbgrader would copy it into every submission.
    c.CourseDirectory.ignore = CourseDirectory.class_traits()["ignore"].default() + [".hypothesis"]
    c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    # The secret that keys the graded cases' seed, made when a course is first released.
    c.GenerateAssignment.preprocessors = [*GenerateAssignment.class_traits()["preprocessors"].default(),
                                          MakeGradingSecret]
    c.Execute.timeout = CELL_TIMEOUT_S
    # The flag tells the kernel's in-notebook checks that TrustedVerdicts (below) decides; see checks.check.
    flag = f"--IPKernelApp.exec_lines=import os; os.environ['{TRUSTED_GRADING_ENV}'] = '1'"
    c.Execute.extra_arguments = KERNEL_ARGS + [flag]
    c.Execute.kernel_manager_class = "autograder.course.preprocessors.SandboxedKernelManager"
    # A cell past its timeout is stopped by killing the kernel, not by an interrupt a learner can ignore.
    c.Execute.interrupt_on_timeout = False
    # A learner's copy of a graded cell must not stop the class run (SeparateCopiedCells says why).
    nbgraders_own = Autograde.class_traits()["sanitize_preprocessors"].default()
    # A submission is read as data (autograder.grade.submission.read_tree): by collect, from the world-writable
    # exchange, and by autograde, which fails a submission that holds a link or a special file before its kernel runs.
    c.ExchangeFactory.collect = "autograder.course.collect.CollectAsData"
    c.ExchangeFactory.release_assignment = "autograder.course.collect.ReleaseWithStickyInbound"
    c.Autograde.sanitize_preprocessors = [RefuseUnsafeFiles, SeparateCopiedCells, *nbgraders_own]
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
    own release would create it, so learners with their own accounts on the machine can submit, with the sticky bit
    (0o1777) on top, so that none can rename or remove the course's folder in it and put one of their own in its
    place. A JupyterHub deployment points ``root`` at a folder every user's server sees instead (README, "One machine
    or a hub").
    """
    c.CourseDirectory.course_id = COURSE_ID
    c.Exchange.root = str(root)
    if not root.is_dir():
        root.mkdir(parents=True)
        root.chmod(0o1777)


def set_stage(c, stage: str) -> None:
    """Set which part of ``nbgrader autograde`` a config ``c`` runs (see configure), leaving the rest as it is."""
    # As in configure: nbgrader and the checks load only when a configuration is built.
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import CheckCellMetadata, Execute

    from autograder.course.preprocessors import (ContainedExecute, InertLearnerContent, ReplayExecution, RequireSandbox,
                                                 StartTrustedVerdicts, TrustedVerdicts)

    if stage not in STAGES:
        raise ValueError(f"unknown grading stage {stage!r}; one of {', '.join(STAGES)}")
    # Trusted grading: verdicts are computed outside the learner's kernel while it runs the notebook, and replace
    # the test cells' outputs right after; nothing runs where learner code would be unsandboxed, unless allowed.
    execution = [RequireSandbox, StartTrustedVerdicts, ContainedExecute, TrustedVerdicts]
    pipeline = Autograde.class_traits()["autograde_preprocessors"].default()
    at = pipeline.index(Execute)
    if stage == "execute":  # what the recording stage copies back is the code cells' outputs, made inert there
        pipeline = execution
    else:
        # What is saved, and shown in Formgrader and the feedback, runs nothing in a browser (InertLearnerContent).
        pipeline[at:at + 1] = (execution if stage == "whole" else [ReplayExecution]) + [InertLearnerContent]
    if stage == "record":
        # The grading worker checked this submission's cell metadata while sanitizing it (and failed it with nbgrader's
        # reason); the one recording process, which sets a large class's pace, need not check it again. The check at
        # the end of the pipeline, on the graded notebook, stays.
        sanitize = (c.Autograde.get("sanitize_preprocessors")
                    or Autograde.class_traits()["sanitize_preprocessors"].default())
        c.Autograde.sanitize_preprocessors = [p for p in sanitize if p is not CheckCellMetadata]
    c.Autograde.autograde_preprocessors = pipeline


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
