"""nbgrader glue: the preprocessor that puts trusted verdicts into ``nbgrader autograde``'s own pipeline.

``configure`` (autograder.course) inserts :class:`TrustedVerdicts` right after nbgrader's ``Execute``. By then the
learner's kernel has run the notebook; this preprocessor recomputes every trusted exercise's verdict outside that
kernel (autograder.trusted) and rewrites its test cell's outputs -- an error output for a fail, one line for a pass
-- before ``SaveAutoGrades`` reads them. So the gradebook, Formgrader, ``nbgrader export`` and
``nbgrader generate_feedback`` all see the trusted verdict, and whatever the kernel printed there is discarded.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_output
from jupyter_client.manager import AsyncKernelManager
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder import checks, sandbox, trusted  # imported before any learner kernel runs: nothing it writes changes them
from autograder.course import assignments, exercise_id

DIFFERS = ("Your notebook's own run of this test passed, but the check run outside your notebook's kernel "
           "failed, and that one counts (the exercise failed verification): ")


class TrustedVerdicts(NbGraderPreprocessor):
    """Replace each trusted exercise's test-cell outputs with the verdict computed outside the learner's kernel."""

    def preprocess(self, nb, resources):
        name = Path(resources.get("unique_key", "")).name or resources["nbgrader"]["notebook"]
        course = assignments().get(resources["nbgrader"]["assignment"])
        if course is None or course.stem != name:
            self.log.warning("TrustedVerdicts: %s is not a notebook of this course; left as the kernel graded it", name)
            return nb, resources
        warning = trusted.sandbox_warning()
        if warning:
            self.log.warning(warning)
            print(warning, file=sys.stderr)
        # The course folder (nbgrader runs from it) and the folder above <student>/<assignment>: hidden from workers.
        here = Path(resources.get("metadata", {}).get("path") or ".").resolve()
        hide = (Path.cwd(), here.parents[2] if len(here.parents) > 2 else here)
        found = trusted.verdicts(nb, nbformat.read(course, as_version=4), hide=hide)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            verdict = found.get(exercise_id(meta.get("grade_id", "")))
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution") and verdict:
                cell.outputs = outputs(verdict, kernel_passed=not any(o.output_type == "error" for o in cell.outputs))
        return nb, resources


class SandboxedKernelManager(AsyncKernelManager):
    """The kernel nbgrader runs a submission in, started inside the sandbox (autograder.sandbox.kernel_command).

    In its own PID namespace a submission that kills its parent, forks or leaves threads behind cannot touch the
    grading process, and everything it started dies with the kernel.
    """

    async def _async_pre_start_kernel(self, **kw):
        command, kw = await super()._async_pre_start_kernel(**kw)
        return sandbox.kernel_command(command, self.connection_file, kw.get("cwd")), kw


def outputs(verdict: trusted.Verdict, kernel_passed: bool) -> list:
    """The outputs nbgrader scores: none of type error for a pass, one error output (a CheckFailure) for a fail."""
    if verdict.passed:
        return [new_output("stream", name="stdout", text=f"{verdict.exercise}: {verdict.message}\n")]
    message = (DIFFERS if kernel_passed else "") + verdict.message
    return [new_output("error", ename="CheckFailure", evalue=f"[{verdict.exercise}] {message}",
                       traceback=[f"CheckFailure: [{verdict.exercise}]", *message.splitlines()])]


__all__ = ["SandboxedKernelManager", "TrustedVerdicts", "checks"]
