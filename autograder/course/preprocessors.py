"""nbgrader glue: trusted verdicts and a sandboxed kernel inside ``nbgrader autograde``'s own pipeline.

``configure`` (autograder.course) replaces nbgrader's ``Execute`` with three steps: :class:`StartTrustedVerdicts`
starts computing every exercise's verdict outside the learner's kernel (autograder.trust.verdicts);
:class:`ContainedExecute` runs the notebook in a kernel started by :class:`SandboxedKernelManager`, surviving a
kernel that dies or hangs; :class:`TrustedVerdicts` then rewrites each test cell's outputs -- an error output for a
fail, one line for a pass -- before ``SaveAutoGrades`` reads them. So the gradebook, Formgrader, ``nbgrader export``
and ``nbgrader generate_feedback`` all see the trusted verdict, and whatever the kernel printed there is discarded.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import sys
import threading
from collections import Counter
from pathlib import Path

import nbformat
from nbformat.v4 import new_output
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Unicode

from autograder import checks  # imported before any learner kernel runs: nothing it writes changes them
from autograder.trust import sandbox, verdicts
# The verdicts are computed on a thread while the kernel's client runs on this one: everything the checks import
# lazily is imported here first, since two threads importing one package at once can break its import.
import IPython.core.inputtransformer2  # noqa: F401
import labtools.datasets  # noqa: F401
from autograder.contract import MEASURED_TAG, assignments, exercise_id, nbgrader_meta
from autograder.grade.submission import read_tree

ANSI = re.compile(r"\x1b\[[0-9;]*m")
CODE_LINE = re.compile(r"^\s*(?:-*>\s*\d+\s)?\s*")  # a traceback line's indentation and IPython's arrow
NOT_RUN = "KernelStopped"  # the ename of a cell the kernel never finished
NOT_MEASURED = ("(This cell measures time and memory on the machine that runs it, and grades nothing: it is skipped "
                "while grading. Run it in JupyterLab to see the figures.)\n")
DIFFERS = ("Your notebook's kernel reported that the hidden checks passed, but the same checks run outside it "
           "failed, and that run counts (the exercise failed verification): ")


class StartTrustedVerdicts(NbGraderPreprocessor):
    """Start computing the trusted verdicts, before nbgrader's kernel runs the notebook, so the two overlap.

    The verdicts need only the submission's sources, which the kernel's run does not change; on two cores the
    kernel and the checks then take about as long as the longer of the two instead of their sum.
    TrustedVerdicts waits for the result.
    """

    def preprocess(self, nb, resources):
        job = verdict_job(nbformat.from_dict(nb), resources, self.log)
        if job is not None:
            job.start()
            resources[JOB] = job
        return nb, resources


class TrustedVerdicts(NbGraderPreprocessor):
    """Replace each trusted exercise's test-cell outputs with the verdict computed outside the learner's kernel."""

    def preprocess(self, nb, resources):
        job = resources.pop(JOB, None) or verdict_job(nb, resources, self.log)
        if job is None:
            return nb, resources
        found = job.result()
        for cell in nb.cells:
            meta = nbgrader_meta(cell)
            verdict = found.get(exercise_id(meta.get("grade_id", "")))
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution") and verdict:
                failure = visible_failure(cell.outputs)
                claimed = not failure and any("all hidden checks passed" in o.get("text", "") for o in cell.outputs)
                if verdict.passed and failure:  # the kernel's visible asserts can cost points, never give them
                    verdict = verdicts.Verdict(verdict.exercise, False, failure)
                cell.outputs = outputs(verdict, kernel_claimed_pass=claimed)
        return nb, resources


JOB = "backprop_trusted_verdicts"  # where StartTrustedVerdicts leaves its job for TrustedVerdicts, in resources


class VerdictJob(threading.Thread):
    """verdicts.verdicts on a background thread; result() waits and re-raises what went wrong there."""

    def __init__(self, nb, course_nb):
        super().__init__(daemon=True, name="trusted-verdicts")
        self.nb, self.course_nb = nb, course_nb
        self.found, self.error = None, None

    def run(self):
        try:
            self.found = verdicts.verdicts(self.nb, self.course_nb)
        except BaseException as error:  # handed to the waiting thread, which raises it
            self.error = error

    def result(self) -> dict:
        if not self.is_alive() and self.found is None and self.error is None:
            self.run()  # never started: compute here
        self.join()
        if self.error is not None:
            raise self.error
        return self.found


def verdict_job(nb, resources, log) -> VerdictJob | None:
    """The job that computes a course notebook's trusted verdicts; None (with a warning) for a foreign notebook."""
    name = Path(resources.get("unique_key", "")).name or resources["nbgrader"]["notebook"]
    course = assignments().get(resources["nbgrader"]["assignment"])
    if course is None or course.stem != name:
        log.warning("TrustedVerdicts: %s is not a notebook of this course; left as the kernel graded it", name)
        return None
    warning = sandbox.warning()
    if warning:
        log.warning(warning)
        print(warning, file=sys.stderr)
    return VerdictJob(nb, nbformat.read(course, as_version=4))


def visible_failure(kernel_outputs) -> str | None:
    """Why the kernel's run of a test cell failed, if it did. A cell the kernel never reached says nothing."""
    errors = [o for o in kernel_outputs if o.output_type == "error" and o.get("ename") != NOT_RUN]
    return diagnosis(errors[-1]) if errors else None


class ContainedExecute(Execute):
    """nbgrader's Execute, where a kernel that dies or will not stop costs that notebook's remaining cells.

    Plain Execute lets the exception end the whole ``nbgrader autograde`` run ("There was an error processing
    assignment"), leaving the notebook ungraded. Here the cell that was running and every cell not reached get an
    error output naming the reason (nbgrader scores a test cell without outputs as passed, so "not run" must be an
    error), and grading goes on: TrustedVerdicts still checks every trusted exercise from its own worker.

    Cells tagged ``measured`` are not run: they time the course's demonstrations (notebook 5's checkpointing
    pictures take about 5 s of CPU), which is no part of the learner's work and earns nothing. Nothing after them
    uses what they compute (tests/test_course_metadata.py).
    """

    def preprocess_cell(self, cell, resources, index):
        if MEASURED_TAG in cell.metadata.get("tags", []):
            cell.outputs = [new_output("stream", name="stdout", text=NOT_MEASURED)]
            return cell, resources
        return super().preprocess_cell(cell, resources, index)

    def preprocess(self, nb, resources, km=None):
        try:
            return super().preprocess(nb, resources, km=km)
        except (DeadKernelError, CellTimeoutError, TimeoutError) as error:
            why = ("the kernel running your notebook died: does your code call exit(), os._exit() or kill a process?"
                   if isinstance(error, DeadKernelError) else
                   f"a cell did not finish within {self.timeout} s and did not stop when interrupted: "
                   "is there a loop that never ends, with the interrupt signal ignored?")
            self.log.warning("%s: %s", resources.get("unique_key"), why)
            mark_not_run(nb, why)
            return nb, resources


def mark_not_run(nb, why: str) -> None:
    """Give the cell that was running and every cell not reached an error output saying why."""
    code = [cell for cell in nb.cells if cell.cell_type == "code" and cell.source.strip()]
    reached = [cell for cell in code if cell.get("execution_count") is not None]
    stuck = reached[-1:] if reached and not any(o.output_type == "error" for o in reached[-1].outputs) else []
    for cell in stuck + [cell for cell in code if cell.get("execution_count") is None]:
        cell.outputs.append(new_output("error", ename=NOT_RUN, evalue=why, traceback=[f"{NOT_RUN}: {why}"]))


class RefuseUnsafeFiles(NbGraderPreprocessor):
    """Fail a submission whose folder holds a link, a special file or too much (read_tree's rules) before its
    notebook runs: the first of ``nbgrader autograde``'s sanitizing steps.

    The course's collect (autograder.course.collect) never puts such a folder in submitted/, and the class run
    refuses one before reading it; this catches a folder put there some other way. It cannot come first: nbgrader
    reads the notebook, and copies the folder's other files into autograded/ (through links), before its first
    step. What those read stays with the instructor: no learner code has run yet, and nbgrader removes a failed
    submission's autograded/ folder.
    Raises UnsafeSubmissionError (nbgrader then fails this submission only, with the reason in its log).
    """

    def preprocess(self, nb, resources):
        read_tree(Path(resources["metadata"]["path"]), CourseDirectory(config=self.config).ignore)
        return nb, resources


class SeparateCopiedCells(NbGraderPreprocessor):
    """Keep a grade id on its first cell only: a learner's copy of an answer or test cell becomes an ordinary cell.

    nbgrader's own DeduplicateIds keeps the last copy and empties the earlier cell's metadata, which then fails the
    whole ``nbgrader autograde`` run as "an old version of the nbgrader metadata format" (every later student goes
    ungraded). The first copy is the one trusted grading reads (autograder.trust.verdicts.program), so it keeps its
    id here.
    Runs first among the sanitizing steps; ``copied_cells`` says up front which ids a notebook repeats.
    """

    def preprocess(self, nb, resources):
        seen = set()
        for cell in nb.cells:
            grade_id = nbgrader_meta(cell).get("grade_id")
            if grade_id in seen:
                self.log.warning("%s: a copy of the cell %r is graded as an ordinary cell",
                                 resources.get("unique_key"), grade_id)
                del cell.metadata["nbgrader"]
            elif grade_id:
                seen.add(grade_id)
        return nb, resources


def copied_cells(nb) -> list[str]:
    """The grade ids that more than one cell of a notebook carries (in the order they first appear)."""
    ids = Counter(nbgrader_meta(cell).get("grade_id") for cell in nb.cells)
    return [grade_id for grade_id, n in ids.items() if grade_id and n > 1]


class ReplayExecution(NbGraderPreprocessor):
    """nbgrader's Execute step, taken from a run made elsewhere: the outputs of the same notebook, executed by a
    grading worker (autograder.grade.class_run), are copied onto its cells.

    Everything else ``nbgrader autograde`` does -- sanitizing, SaveAutoGrades, late penalties -- runs here as usual,
    so the gradebook gets exactly what a serial run writes. Raises ValueError when the executed notebook is missing
    or its cells are not this notebook's (a worker must have sanitized the same submission the same way).
    """

    directory = Unicode(help="Folder of executed notebooks, as <student>/<assignment>/<notebook>.ipynb"
                        ).tag(config=True)

    def preprocess(self, nb, resources):
        ids = resources["nbgrader"]
        path = Path(self.directory) / ids["student"] / ids["assignment"] / f"{ids['notebook']}.ipynb"
        if not path.is_file():
            raise ValueError(f"no executed notebook for {ids['student']}/{ids['notebook']} at {path}")
        executed = nbformat.read(path, as_version=4)
        if [(c.cell_type, c.source) for c in executed.cells] != [(c.cell_type, c.source) for c in nb.cells]:
            raise ValueError(f"the executed notebook {path} does not have this submission's cells")
        for cell, ran in zip(nb.cells, executed.cells):
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = ran.outputs, ran.execution_count
        return nb, resources


class SandboxedKernelManager(AsyncKernelManager):
    """The kernel nbgrader runs a submission in, started inside the sandbox (autograder.trust.sandbox.kernel_command).

    In its own PID namespace a submission that kills its parent, forks or leaves threads behind cannot touch the
    grading process, and everything it started dies with the kernel. It has no network either: its client reaches
    it over Unix sockets (ZeroMQ's ipc transport) in a private folder, mode 0700, that only this process and the
    kernel's sandbox share, so no port is open for anything else on the machine to reach, nor for the kernel to
    reach anything.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.private = Path(tempfile.mkdtemp(prefix="kernel-"))  # mkdtemp makes it 0700
        self.transport = "ipc"
        self.ip = str(self.private / "ipc")
        self.connection_file = str(self.private / "kernel.json")

    async def _async_pre_start_kernel(self, **kw):
        command, kw = await super()._async_pre_start_kernel(**kw)
        # Its own terminal output (connection banners, learner prints to fd 1/2 at exit) is not grading output.
        kw.update(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return sandbox.kernel_command(command, self.private, kw.get("cwd")), kw

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            shutil.rmtree(self.private, ignore_errors=True)


def outputs(verdict: verdicts.Verdict, kernel_claimed_pass: bool) -> list:
    """The outputs nbgrader scores: none of type error for a pass, one error output (a CheckFailure) for a fail."""
    if verdict.passed:
        return [new_output("stream", name="stdout", text=f"{verdict.exercise}: {verdict.message}\n")]
    message = (DIFFERS if kernel_claimed_pass else "") + verdict.message
    return [new_output("error", ename="CheckFailure", evalue=f"[{verdict.exercise}] {message}",
                       traceback=[f"CheckFailure: [{verdict.exercise}]", *message.splitlines()])]


__all__ = ["ContainedExecute", "RefuseUnsafeFiles", "ReplayExecution", "SandboxedKernelManager", "SeparateCopiedCells",
           "StartTrustedVerdicts", "TrustedVerdicts", "checks"]


def diagnosis(error: dict) -> str:
    """One readable message for a test cell's error output."""
    name, value = error.get("ename", ""), error.get("evalue", "")
    if name == "CheckFailure":
        return re.sub(r"^\[[^\]]+\] ", "", value)
    if name == "NotImplementedError":
        return "a function it calls is not written yet: replace `raise NotImplementedError()` with your code."
    if name == "CellTimeoutError":
        return "the test cell ran out of time: is there a loop that never ends?"
    if name == "AssertionError":
        lines = [ANSI.sub("", line) for line in "\n".join(error.get("traceback", [])).splitlines()]
        # IPython marks the failing line with an arrow and its number ("----> 2 assert ..."); plain Python does not.
        asserts = [CODE_LINE.sub("", line) for line in lines if CODE_LINE.sub("", line).startswith("assert")]
        failed = asserts[-1] if asserts else "an assert"
        return f"visible test failed: {failed}" + (f" -> {value}" if value else "")
    if name == "NameError":
        return f"NameError: {value} (did an earlier cell fail, or was the function renamed?)"
    return f"{name}: {value}"
