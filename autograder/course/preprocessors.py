"""nbgrader glue: trusted verdicts and a sandboxed kernel inside ``nbgrader autograde``'s own pipeline.

``configure`` (autograder.course) replaces nbgrader's ``Execute`` with three steps: :class:`StartTrustedVerdicts`
starts computing every exercise's verdict outside the learner's kernel (autograder.trust.verdicts);
:class:`ContainedExecute` runs the notebook in a kernel started by :class:`SandboxedKernelManager`, surviving a
kernel that dies or hangs; :class:`TrustedVerdicts` then rewrites each test cell's outputs -- an error output for a
fail, one line for a pass -- before ``SaveAutoGrades`` reads them. So the gradebook, Formgrader, ``nbgrader export``
and ``nbgrader generate_feedback`` all see the trusted verdict, and whatever the kernel printed there is discarded.
"""
from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import sys
import threading
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_output
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Unicode

from autograder import checks  # imported before any learner kernel runs: nothing it writes changes them
from autograder.course.limits import (FLOOD_BYTES, MAX_CELL_OUTPUT_BYTES, MAX_OUTPUT_BYTES,
                                     NOTEBOOK_CPU_S, NOTEBOOK_IDLE_S, NOTEBOOK_WALL_S, OUTPUT_CHARGE_BYTES,
                                     OVERLOAD_FACTOR, oversized)
from autograder.trust import cputime, relay, sandbox, secret, verdicts
from autograder.trust.pids import ProcessCap
# The verdicts are computed on a thread while the kernel's client runs on this one: everything the checks import
# lazily is imported here first, since two threads importing one package at once can break its import.
import IPython.core.inputtransformer2  # noqa: F401
import labtools.datasets  # noqa: F401
from autograder.checks import causes
from autograder.contract import (CAUSE_PREFIX, COURSE_ERROR_ENAME, INPUT_PREFIX, MEASURED_TAG, assignments, cause_of,
                                 exercise_id, nbgrader_meta, with_cause)
from autograder.grade.submission import read_tree

ANSI = re.compile(r"\x1b\[[0-9;]*m")
CODE_LINE = re.compile(r"^\s*(?:-*>\s*\d+\s)?\s*")  # a traceback line's indentation and IPython's arrow
NOT_RUN = "KernelStopped"  # the ename of a cell the kernel never finished
NOT_MEASURED = ("(This cell measures time and memory on the machine that runs it, and grades nothing: it is skipped "
                "while grading. Run it in JupyterLab to see the figures.)\n")
DIFFERS = ("Your notebook's kernel reported that the hidden checks passed, but the same checks run outside it "
           "failed, and that run counts (the exercise failed verification): ")


UNCHECKED = ("this test cell is not one of the course's, so the grader has no check for it (was it added, or its "
             "metadata changed?)")


class NoSandboxError(Exception):
    """Grading was asked for on a machine where bubblewrap cannot sandbox learner code, without the flag that
    allows it; the message is sandbox.refusal()'s."""


class RequireSandbox(NbGraderPreprocessor):
    """Refuse to run a notebook where learner code would run unsandboxed, unless the instructor said to go on
    (sandbox.WITHOUT_SANDBOX_ENV): the first of the execution steps, before any learner code runs.
    Raises NoSandboxError (nbgrader then fails this submission, with the reason in its log)."""

    def preprocess(self, nb, resources):
        refused = sandbox.refusal()
        if refused:
            raise NoSandboxError(refused)
        return nb, resources


class MakeGradingSecret(NbGraderPreprocessor):
    """At release (``nbgrader generate_assignment``), make the course's grading secret if it has none
    (autograder.trust.secret): it then exists before any submission does, and a copy of the course folder made for
    grading carries it. Grading makes it too, in a course released before this step existed.
    Raises secret.GradingSecretError (nbgrader then stops, with the reason) when it cannot be read or made."""

    def preprocess(self, nb, resources):
        secret.course_secret(course_folder(self))
        return nb, resources


class StartTrustedVerdicts(NbGraderPreprocessor):
    """Start computing the trusted verdicts, before nbgrader's kernel runs the notebook, so the two overlap.

    The verdicts need only the submission's sources, which the kernel's run does not change; on two cores the
    kernel and the checks then take about as long as the longer of the two instead of their sum.
    TrustedVerdicts waits for the result.
    """

    def preprocess(self, nb, resources):
        job = verdict_job(nbformat.from_dict(nb), resources, self.log, course_folder(self))
        job.start()
        resources[JOB] = job
        return nb, resources


class TrustedVerdicts(NbGraderPreprocessor):
    """Replace every test cell's outputs with the verdict computed outside the learner's kernel.

    Fails closed: a test cell without a trusted verdict (a notebook that is not the course's, a cell the course does
    not have, a grader that failed) gets an error output with the reason, so it earns nothing, whatever the kernel
    printed there.
    """

    def preprocess(self, nb, resources):
        job = resources.pop(JOB, None) or verdict_job(nb, resources, self.log, course_folder(self))
        try:
            found, missing = job.result(), with_cause(job.refused or UNCHECKED, causes.REFUSED)
        except Exception as error:  # the grader's own failure: no verdict, so no points, and the reason
            self.log.error("%s: the trusted verdicts failed: %r", resources.get("unique_key"), error)
            found, missing = {}, (f"the grader could not check this notebook ({type(error).__name__}: "
                                  f"{str(error)[:200]}). Ask your instructor to grade it again.")
            missing = with_cause(missing, causes.COURSE_ERROR)
        for cell in nb.cells:
            meta = nbgrader_meta(cell)
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
                exercise = exercise_id(meta.get("grade_id", ""))
                verdict = found.get(exercise) or verdicts.Verdict(exercise, False, missing)
                failure = visible_failure(cell.outputs)
                claimed = not failure and any("all hidden checks passed" in o.get("text", "") for o in cell.outputs)
                if verdict.passed and failure:  # the kernel's visible asserts can cost points, never give them
                    # the kernel's words are the submission's: its cause line is the grader's own
                    verdict = verdicts.Verdict(verdict.exercise, False, with_cause(without_cause_lines(failure),
                                                                                    causes.VISIBLE_TEST))
                if verdict.course_error:
                    self.log.error("%s: course error in the check of %s: %s", resources.get("unique_key"),
                                   exercise, verdict.message)
                cell.outputs = outputs(verdict, kernel_claimed_pass=claimed)
        return nb, resources


JOB = "backprop_trusted_verdicts"  # where StartTrustedVerdicts leaves its job for TrustedVerdicts, in resources


def course_folder(step) -> Path:
    """The folder of the course a preprocessor grades in: its converter's (the exporter's parent's) CourseDirectory
    root, or else the working folder, which nbgrader changes to that root while it converts."""
    converter = getattr(step.parent, "parent", None)
    coursedir = getattr(converter, "coursedir", None)
    return Path(coursedir.root) if coursedir is not None else Path.cwd()


class VerdictJob(threading.Thread):
    """verdicts.verdicts on a background thread, with the course's grading ``secret``; result() waits and re-raises
    what went wrong there.

    A job ``refused`` (a reason) computes nothing: every test cell fails with that reason.
    """

    def __init__(self, nb, course_nb, secret: bytes, refused: str | None = None):
        super().__init__(daemon=True, name="trusted-verdicts")
        self.nb, self.course_nb, self.refused, self.secret = nb, course_nb, refused, secret
        self.found, self.error = None, None

    def run(self):
        if self.refused:
            self.found = {}
            return
        try:
            self.found = verdicts.verdicts(self.nb, self.course_nb, secret=self.secret)
        except BaseException as error:  # handed to the waiting thread, which raises it
            self.error = error

    def result(self) -> dict:
        if self.ident is None:
            self.run()  # never started: compute here
        else:
            self.join()
        if self.error is not None:
            raise self.error
        return self.found


def verdict_job(nb, resources, log, course: Path) -> VerdictJob:
    """The job that computes a course notebook's trusted verdicts, with the grading secret of the course folder
    ``course`` (made there if it has none); a refused one (with a warning) for a notebook the course has no notebook
    for, or one too large to grade.

    Raises:
        secret.GradingSecretError: the course's secret cannot be read or made (nbgrader then fails the submission,
            with the reason in its log, before its kernel runs).
    """
    name = Path(resources.get("unique_key", "")).name or resources["nbgrader"]["notebook"]
    assignment = resources["nbgrader"]["assignment"]
    notebook = assignments().get(assignment)
    refused = refusal(nb)
    if notebook is None or notebook.stem != name:
        refused = (f"the course has no notebook {name!r} in assignment {assignment!r}, so nothing in it can be "
                   "checked: submit the course's notebook, under its own name")
    if refused:
        log.warning("TrustedVerdicts: %s: %s", name, refused)
        return VerdictJob(nb, None, b"", refused=refused)
    key = secret.course_secret(course)
    warning = sandbox.warning()
    if warning:
        log.warning(warning)
        print(warning, file=sys.stderr)
    return VerdictJob(nb, nbformat.read(notebook, as_version=4), key)


def without_cause_lines(text: str) -> str:
    """``text`` without any ``cause: ...`` or ``input: ...`` line (the grader writes those, never a submission)."""
    return "\n".join(line for line in text.splitlines()
                     if not line.strip().startswith((CAUSE_PREFIX.strip(), INPUT_PREFIX.strip())))


def visible_failure(kernel_outputs) -> str | None:
    """Why the kernel's run of a test cell failed, if it did. A cell the kernel never reached says nothing."""
    errors = [o for o in kernel_outputs if o.output_type == "error" and o.get("ename") != NOT_RUN]
    return diagnosis(errors[-1]) if errors else None


class ContainedExecute(Execute):
    """nbgrader's Execute, where a kernel that dies, will not stop or runs out of its budget costs that notebook's
    remaining cells, and whose outputs are bounded.

    Plain Execute lets the exception end the whole ``nbgrader autograde`` run ("There was an error processing
    assignment"), leaving the notebook ungraded. Here the cell that was running and every cell not reached get an
    error output naming the reason (nbgrader scores a test cell without outputs as passed, so "not run" must be an
    error), and grading goes on: TrustedVerdicts still checks every trusted exercise from its own worker.

    Limits (autograder.course), none on the wall clock but for a machine too loaded to grade: each cell may use its
    timeout (``self.timeout``) in CPU seconds of the kernel's sandbox and as many seconds not runnable (sleeping or
    waiting), and the whole run, which no cell resets, NOTEBOOK_CPU_S and NOTEBOOK_IDLE_S (KernelWatch); only past
    OVERLOAD_FACTOR times those on the wall clock (nbclient's timeout, NOTEBOOK_WALL_S) is a kernel stopped as the
    machine's fault, saying so; a
    notebook past MAX_NOTEBOOK_BYTES or MAX_CELLS is not run at all; outputs past MAX_CELL_OUTPUT_BYTES in a cell or
    MAX_OUTPUT_BYTES in the notebook are dropped with a note, and an error output is cut to ERROR_LINES lines.

    Cells tagged ``measured`` are not run: they time the course's demonstrations (notebook 5's checkpointing
    pictures take about 5 s of CPU), which is no part of the learner's work and earns nothing. Nothing after them
    uses what they compute (tests/test_course_metadata.py).
    """

    _watch: KernelWatch | None = None

    def preprocess_cell(self, cell, resources, index):
        if MEASURED_TAG in cell.metadata.get("tags", []):
            cell.outputs = [new_output("stream", name="stdout", text=NOT_MEASURED)]
            return cell, resources
        if self._watch is None:  # nbconvert starts the kernel before the first cell; this is a safeguard
            return super().preprocess_cell(cell, resources, index)
        self._watch.cell_started()
        try:
            return super().preprocess_cell(cell, resources, index)
        finally:
            self._watch.cell_ended()

    def preprocess(self, nb, resources, km=None):
        refused = refusal(nb)
        if refused:
            self.log.warning("%s: not run: %s", resources.get("unique_key"), refused)
            for cell in nb.cells:
                if cell.cell_type == "code":
                    cell.outputs = [new_output("error", ename=NOT_RUN, evalue=refused,
                                               traceback=[f"{NOT_RUN}: {refused}"])]
            return nb, resources
        self._wall_end, self._output = time.monotonic() + NOTEBOOK_WALL_S, OutputCap()
        try:
            return super().preprocess(nb, resources, km=km)
        except (DeadKernelError, CellTimeoutError, TimeoutError) as error:
            why = self._why_stopped(error)
            self.log.warning("%s: %s", resources.get("unique_key"), why)
            mark_not_run(nb, why)
            return nb, resources
        except (ValueError, TypeError, KeyError, RecursionError) as error:  # RecursionError: JSON nested 3000 deep
            if not from_the_session(error):
                raise
            # Learner code wrote to its kernel's own sockets (red team 9: one unsigned message failed the whole
            # grade): the run ends there, as when a kernel dies, and the trusted verdicts are still given.
            self.log.warning("%s: %s (%s)", resources.get("unique_key"), FORGED_MESSAGE, error)
            mark_not_run(nb, FORGED_MESSAGE)
            return nb, resources
        finally:
            if self._watch is not None:
                self._watch.stop()
                self._watch = None

    def _why_stopped(self, error: Exception) -> str:
        if self._watch is not None and self._watch.reason:
            return self._watch.reason
        if isinstance(error, KernelTampered):
            return f"{error}, so your notebook was not run: does a file of your submission stand in for a module?"
        if isinstance(error, DeadKernelError):
            return "the kernel running your notebook died: does your code call exit(), os._exit() or kill a process?"
        if str(error).splitlines()[1:2] == [f"The message was: {IOPUB_TIMEOUT}."]:  # nbclient's wait after a reply
            return (f"a cell's outputs were still arriving {self.iopub_timeout:g} s after it ended (a great deal of "
                    "output, or data written to the kernel's own sockets), so the kernel was stopped and the cells "
                    "after it were not run")
        return ("grading failed, through no fault of your code: the machine was too loaded to finish running your "
                f"notebook (a cell within {OVERLOAD_FACTOR * (self.timeout or NOTEBOOK_CPU_S):g} s, the whole run "
                f"within {NOTEBOOK_WALL_S:g} s on the wall clock). Ask your instructor to grade it again.")

    def start_new_kernel_client(self, **kwargs):  # the sync wrapper, as nbconvert calls it
        client = super().start_new_kernel_client(**kwargs)
        if isinstance(self.km, SandboxedKernelManager):
            self.km.lock()  # the kernel has answered, so its sockets exist: before any learner code runs
        return client

    def start_new_kernel(self, **kwargs) -> None:  # what nbconvert's preprocess calls (the sync wrapper)
        super().start_new_kernel(**kwargs)
        cell_s = self.timeout or NOTEBOOK_CPU_S
        self._watch = KernelWatch(self.km.provisioner.process, NOTEBOOK_CPU_S, cell_s=cell_s, idle_s=NOTEBOOK_IDLE_S,
                                  relay=getattr(self.km, "relay", None))
        self._watch.start()

    def _get_timeout(self, cell) -> float:
        """A cell's wall-clock limit, for a machine too loaded to grade only: OVERLOAD_FACTOR times its timeout, no
        later than the notebook's own (at least 1 s)."""
        cell_s = super()._get_timeout(cell)
        cell_wall = OVERLOAD_FACTOR * cell_s if cell_s else NOTEBOOK_WALL_S
        return max(1.0, min(cell_wall, self._wall_end - time.monotonic()))

    def process_message(self, msg, cell, cell_index):
        # Learner code can send any message on its kernel's session: each is data to check, never to trust.
        content = msg.get("content")
        if not isinstance(content, dict):
            return self._dropped(cell, "content that is not a mapping")
        if msg["msg_type"] in OUTPUT_MESSAGES:
            joined(content)
        if msg["msg_type"] == "stream" and not isinstance(content.get("text"), str):
            return self._dropped(cell, "a stream whose text is not text")
        # Every message costs this process its reading, whatever its type: all count towards the flood (red team 9:
        # 12 MiB messages of a type of the learner's own, and extra frames on a display, were never counted).
        size = charge(msg["msg_type"], content, msg.get("buffers")) * (1 + self._sharing(content))
        if msg["msg_type"] not in OUTPUT_MESSAGES and self._output.sent(size) and self._watch is not None:
            self._watch.end(FLOODED)
        if str(msg["msg_type"]).startswith("comm"):  # widgets: no page shows them here, and nbclient keeps their
            return None                              # state for good (a red team grew the grader by 4 MiB a message)
        if "execution_count" in content and not valid_count(content["execution_count"]):
            content["execution_count"] = None  # nbclient copies it onto the cell, which could then not be saved
        if msg["msg_type"] == "error":
            bound_error(content)
        elif msg["msg_type"] in OUTPUT_MESSAGES and not self._output.admits(cell_index, size):
            if self._output.first_cut():
                cell.outputs.append(new_output("stream", name="stdout", text=CUT))
            if self._output.flooded() and self._watch is not None:
                self._watch.end(FLOODED)
            return None
        try:
            return super().process_message(msg, cell, cell_index)
        except (AttributeError, KeyError, TypeError, ValueError, RecursionError,  # a field amiss, or nested too deep
                nbformat.ValidationError) as error:
            return self._dropped(cell, f"{type(error).__name__}: {str(error)[:200]}")

    def _sharing(self, content: dict) -> int:
        """How many kept outputs an output with ``content`` also rewrites: nbclient gives every output of a display
        id the data of its latest display or update (red team 10: one 1 MB update of 300 displays sharing an id
        took the grader to 2.4 GB), so each counts."""
        transient = content.get("transient")
        display_id = transient.get("display_id") if isinstance(transient, dict) else None
        shown = getattr(self, "_display_id_map", {}).get(display_id, {}) if isinstance(display_id, str) else {}
        return sum(len(indices) for indices in shown.values())

    @staticmethod
    def _dropped(cell, why: str) -> None:
        cell.outputs.append(new_output("stream", name="stdout", text=INVALID_MESSAGE.format(why=why)))

    def on_cell_executed(self, **kwargs):
        if kwargs["execute_reply"]["content"].get("status") == "error":
            bound_error(kwargs["execute_reply"]["content"])
        return super().on_cell_executed(**kwargs)


OUTPUT_MESSAGES = ("stream", "display_data", "execute_result", "update_display_data")
IOPUB_TIMEOUT = "Timeout waiting for IOPub output"  # what nbclient's CellTimeoutError says then, on its second line


def joined(content: dict) -> None:
    """Make each list-of-strings value of an output's data one string, in place: nbformat's multiline form, which
    is the same output, costs the grader per element (red team 10: 4.2 million empty strings within the 16 MiB of
    kept output took 21 CPU s and 0.8 GB to validate, copy and write). Anything else is left as it is."""
    if isinstance(content.get("text"), list) and all(isinstance(line, str) for line in content["text"]):
        content["text"] = "".join(content["text"])  # a stream's (red team 10: nbgrader's LimitOutput took it for text)
    data = content.get("data")
    if isinstance(data, dict):
        for kind, value in data.items():
            if isinstance(value, list) and all(isinstance(line, str) for line in value):
                data[kind] = "".join(value)
INVALID_MESSAGE = "\n[A message from the kernel was not a valid output ({why}); it was dropped while grading.]\n"


def valid_count(value) -> bool:
    """Whether ``value`` is an execution count nbformat's schema admits: a whole number from 0, or None."""
    return value is None or type(value) is int and value >= 0
CUT = (f"\n[Output cut here: a cell may leave {MAX_CELL_OUTPUT_BYTES >> 20} MiB of output and a notebook "
       f"{MAX_OUTPUT_BYTES >> 20} MiB; the rest was dropped while grading.]\n")
ERROR_LINES, ERROR_CHARS = 40, 2000  # of an error output: its last lines, each cut to this many characters


FLOODED = (f"the notebook's cells sent more than {FLOOD_BYTES >> 20} MiB of output, so the kernel was stopped: does "
           "a cell print without end?")


def charge(msg_type: str, content: dict, buffers=None) -> int:
    """What one kernel message counts against the output caps: its size with its extra frames (``buffers``), and
    OUTPUT_CHARGE_BYTES at least for one that is not printed text (which joins its stream's)."""
    size = len(json.dumps(content)) + sum(len(b) for b in buffers or ())
    return size if msg_type in ("stream", *EVERY_CELLS) else max(size, OUTPUT_CHARGE_BYTES)


EVERY_CELLS = ("status", "execute_input")  # the messages every cell's run sends: counted by their size alone


class OutputCap:
    """The output bytes a notebook's run may keep: MAX_CELL_OUTPUT_BYTES per cell, MAX_OUTPUT_BYTES in all."""

    def __init__(self):
        self.cell = self.notebook = self.received = 0
        self._index, self._cut = None, False

    def admits(self, cell_index: int, size: int) -> bool:
        """Count an output of ``size`` bytes of cell ``cell_index``; whether it fits (one that does not is dropped,
        and still counts)."""
        if cell_index != self._index:
            self.cell, self._index, self._cut = 0, cell_index, False
        self.cell, self.notebook = self.cell + size, self.notebook + size
        self.received += size
        return self.cell <= MAX_CELL_OUTPUT_BYTES and self.notebook <= MAX_OUTPUT_BYTES

    def sent(self, size: int) -> bool:
        """Count a message of ``size`` bytes that is not an output (kept by no cell); whether the run is flooded."""
        self.received += size
        return self.flooded()

    def flooded(self) -> bool:
        """Whether the run has sent more than FLOOD_BYTES, outputs or not, kept or not (then it is stopped)."""
        return self.received > FLOOD_BYTES

    def first_cut(self) -> bool:
        """True the first time in a cell that an output is dropped (the cell then gets one note saying so)."""
        first, self._cut = not self._cut, True
        return first


def bound_error(content: dict) -> None:
    """Cut an error's value and traceback (a learner's exception message can be any size) in place."""
    content["evalue"] = str(content.get("evalue", ""))[:ERROR_CHARS]
    content["traceback"] = [str(line)[:ERROR_CHARS] for line in list(content.get("traceback") or [])[-ERROR_LINES:]]


def refusal(nb) -> str | None:
    """Why a notebook is too large to be graded at all (autograder.course.oversized), or None."""
    return oversized(len(json.dumps(nb)), len(nb.cells))


class KernelWatch(threading.Thread):
    """Kills a kernel whose sandbox has used more than ``cpu_s`` CPU seconds in all (``cell_s`` in one cell), or
    whose cells have spent more than ``idle_s`` seconds in all (``cell_s`` in one) not runnable, neither computing
    nor waiting for a CPU (autograder.trust.cputime.Runnable); polling every POLL_S.

    The kernel's RLIMIT_CPU (sandbox.KERNEL_LIMITS) bounds its one process; this bounds the whole sandbox, learner
    subprocesses included, and names the reason (``reason``), which nbclient's DeadKernelError does not. A starved
    kernel is runnable, so however loaded the machine, it is stopped only by what its own code does. Between cells
    (``cell_started``, ``cell_ended``) the kernel waits for nbgrader: that counts against nothing. It also kills
    the kernel when ``relay``, the process its messages pass through, has ended on its own (it refused a message
    too large, or too much in all: autograder.trust.relay.WHY).
    """

    POLL_S = 0.5
    RELAY_GRACE_S = 2.0

    def __init__(self, process: subprocess.Popen, cpu_s: float, cell_s: float | None = None,
                 idle_s: float | None = None, relay: subprocess.Popen | None = None):
        super().__init__(daemon=True, name="kernel-cpu")
        self.process, self.cpu_s, self.relay = process, cpu_s, relay
        self.cell_s, self.idle_s = cell_s or cpu_s, idle_s or cpu_s
        self.reason: str | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()  # the clock is sampled from this thread and from the cells' one
        self._clock = cputime.Runnable(process.pid)
        self._cell: tuple[float, float, float] | None = None  # (wall, CPU, runnable) when the running cell began
        self._idled = 0.0  # seconds not runnable in the cells that have ended

    def cell_started(self) -> None:
        with self._lock:
            self._cell = (time.monotonic(), *self._clock.sample())

    def cell_ended(self) -> None:
        with self._lock:
            if self._cell is not None:
                self._idled += self._idle(*self._clock.sample())
            self._cell = None

    def _idle(self, cpu: float, runnable: float) -> float:
        wall, _, runnable_then = self._cell
        return max(0.0, time.monotonic() - wall - (runnable - runnable_then))

    def run(self) -> None:
        while not self._done.wait(self.POLL_S):
            with self._lock:
                cpu, runnable = self._clock.sample()
                self.reason = self._why(cpu, runnable)
            self.reason = self.reason or self._relay_ended()
            if self.reason:
                self.process.kill()
                return

    def _why(self, cpu: float, runnable: float) -> str | None:
        if cpu > self.cpu_s:
            return (f"the kernel running your notebook used more than {self.cpu_s:g} s of CPU time in all, so it "
                    "was stopped: is a cell very slow, or a loop endless?")
        if self._cell is None:
            return None
        idle = self._idle(cpu, runnable)
        if cpu - self._cell[1] > self.cell_s:
            return (f"a cell used more than {self.cell_s:g} s of CPU time, so the kernel was stopped: is there a "
                    "loop that never ends?")
        if idle > self.cell_s:
            return (f"a cell spent more than {self.cell_s:g} s neither computing nor waiting for a CPU, so the "
                    "kernel was stopped: does it sleep, or wait for input?")
        if self._idled + idle > self.idle_s:
            return (f"the notebook's cells spent more than {self.idle_s:g} s in all neither computing nor waiting "
                    "for a CPU, so the kernel was stopped: does a cell sleep, or wait for input?")
        return None

    def _relay_ended(self) -> str | None:
        """Why the relay (autograder.trust.relay) ended while the kernel lives on, or None. It also ends when the
        kernel does, from the same dropped connection: a kernel that is gone within RELAY_GRACE_S is nbclient's to
        tell (a dead kernel)."""
        if self.relay is None or self.relay.poll() is None:
            return None
        try:
            self.process.wait(timeout=self.RELAY_GRACE_S)
            return None
        except subprocess.TimeoutExpired:
            return relay.WHY.get(self.relay.returncode, relay.WHY[relay.DROPPED])

    def end(self, reason: str) -> None:
        """Kill the kernel now, for ``reason`` (unless it was stopped for another already)."""
        self.reason = self.reason or reason
        self.stop()
        self.process.kill()

    def stop(self) -> None:
        self._done.set()


FORGED_MESSAGE = ("the kernel sent a message its session did not sign or could not read, so the rest of the notebook "
                  "was not run: does your code write to the kernel's own sockets?")


def from_the_session(error: BaseException) -> bool:
    """Whether ``error`` was raised reading a kernel message (in jupyter_client's Session, or what it calls: a bad
    signature, a replayed one, a signed header that is not JSON or has no id), not by the grader."""
    frame = error.__traceback__
    while frame is not None:
        if Path(frame.tb_frame.f_code.co_filename).match("jupyter_client/session.py"):
            return True
        frame = frame.tb_next
    return False


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
    Runs first among the sanitizing steps; autograder.grade.notebook.copy_notes says up front which copy counts.
    """

    def preprocess(self, nb, resources):
        seen = set()
        for cell in nb.cells:
            cell.metadata.pop(verdicts.COPY_OF, None)  # only this step says which cell is a copy (red team 10)
            grade_id = nbgrader_meta(cell).get("grade_id")
            if grade_id in seen:
                self.log.warning("%s: a copy of the cell %r is graded as an ordinary cell",
                                 resources.get("unique_key"), grade_id)
                del cell.metadata["nbgrader"]
                cell.metadata[verdicts.COPY_OF] = grade_id  # an answer cell's copy still runs in full there
            elif grade_id:
                seen.add(grade_id)
        return nb, resources


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


# What a graded notebook may show of what learner code or a learner wrote: these output types render as text or as
# an image in every viewer (nbconvert escapes text; an image is a data URI in an <img>, which runs no script).
INERT_OUTPUTS = ("text/plain", "image/png", "image/jpeg")
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
PLAIN_ID = re.compile(r"[A-Za-z0-9_-]+")
DROPPED = "[{kinds} output left out of the graded notebook: it could run code in the instructor's browser]"


class InertLearnerContent(NbGraderPreprocessor):
    """Make everything a learner controls in a graded notebook inert in a browser, right after its run.

    Formgrader shows an autograded notebook on the instructor's own Jupyter server, and nbconvert keeps an output's
    HTML or JavaScript, a markdown cell's raw HTML and links, and a raw cell as they are: a submission's
    ``display(HTML("<script>..."))`` would run as the instructor, with the power to change every grade (a red team
    did: the attacker's 8 became 10, each classmate's score 0). So, in the notebook that is saved and shown:

    - outputs keep only INERT_OUTPUTS (an image only if it is base64) and no metadata; a display with nothing left
      says which kinds were dropped;
    - a markdown cell the course does not have word for word (the learner's own, or one they edited) is shown as
      its literal text (``literal_markdown``), so no HTML, link or image of theirs is rendered; a raw cell's text
      is escaped; their attachments go;
    - a grade id that is not plain letters, digits, ``_`` and ``-`` loses its nbgrader metadata (Formgrader writes
      grade ids into the page unescaped), and the notebook's metadata is the course notebook's (no widget state,
      no title of the learner's).

    Scores are untouched: test cells hold only TrustedVerdicts' stream and error outputs, which stay.
    """

    def preprocess(self, nb, resources):
        course = assignments().get(resources["nbgrader"]["assignment"])
        course_nb = nbformat.read(course, as_version=4) if course is not None else nbformat.v4.new_notebook()
        ours = {c.source for c in course_nb.cells if c.cell_type in ("markdown", "raw")}
        nb.metadata = course_nb.metadata
        for cell in nb.cells:
            inert_cell(cell, ours)
        return nb, resources


def inert_cell(cell, course_sources: set[str]) -> None:
    """One cell of InertLearnerContent, in place."""
    grade_id = nbgrader_meta(cell).get("grade_id")
    if grade_id is not None and not (isinstance(grade_id, str) and PLAIN_ID.fullmatch(grade_id)):
        del cell.metadata["nbgrader"]
    if cell.cell_type == "code":
        cell.outputs = [inert_output(o) for o in cell.outputs]
        if not valid_count(cell.get("execution_count")):  # templates write it into the page unescaped
            cell.execution_count = None
    elif cell.source not in course_sources:
        cell.pop("attachments", None)
        if cell.cell_type == "markdown":
            cell.source = literal_markdown(cell.source)
        else:
            cell.source = html.escape(cell.source)


def literal_markdown(text: str) -> str:
    """Markdown that renders ``text`` as literal text: escaped, inside one ``<pre>`` HTML block.

    Markdown parsers read nothing inside such a block until a line holding ``</pre>``, and escaping leaves no ``<``
    of the learner's, so the only end tag is ours, whatever the text's line ends. An indented code block, tried
    first, was not enough: CommonMark ends a line at a lone carriage return too, so text after one rendered as
    markdown again (a red team ran a script in Formgrader so). Line ends are made ``\n`` for the reader's sake.
    """
    return "<pre>" + html.escape("\n".join(text.splitlines())) + "</pre>"


def inert_output(output):
    """An output with only what renders inert (see InertLearnerContent)."""
    if output.get("output_type") not in ("display_data", "execute_result"):
        if output.get("output_type") == "stream" and output.get("name") not in ("stdout", "stderr"):
            output["name"] = "stdout"
        return output
    data = output.get("data") or {}
    kept = {kind: value for kind, value in data.items() if kind in INERT_OUTPUTS
            and (kind == "text/plain" or isinstance(value, str) and BASE64.fullmatch(value))}
    dropped = sorted(set(data) - set(kept))
    if dropped and "text/plain" not in kept:
        kept["text/plain"] = DROPPED.format(kinds=", ".join(dropped))
    output["data"], output["metadata"] = kept, {}
    return output


class KernelTampered(DeadKernelError):
    """The kernel's private folder was changed before it was locked: the run ends there, as when a kernel dies."""


class SandboxedKernelManager(AsyncKernelManager):
    """The kernel nbgrader runs a submission in, started inside the sandbox (autograder.trust.sandbox.kernel_command).

    In its own PID namespace a submission that kills its parent, forks or leaves threads behind cannot touch the
    grading process, and everything it started dies with the kernel. It has no network either: its client reaches
    it over Unix sockets (ZeroMQ's ipc transport) in a private folder, mode 0700, that only this process and the
    kernel's sandbox share, so no port is open for anything else on the machine to reach, nor for the kernel to
    reach anything. Every message passes through a relay (autograder.trust.relay) with its own memory limit, whose
    end is a second private folder the sandbox does not see: no message of the kernel's grows this process past
    the relay's caps.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.private = Path(tempfile.mkdtemp(prefix="kernel-"))  # mkdtemp makes it 0700
        self.relayed = Path(tempfile.mkdtemp(prefix="relay-"))  # the relay's end: not in the kernel's sandbox
        self.transport = "ipc"
        self.ip = str(self.private / "ipc")
        self.connection_file = str(self.private / "kernel.json")
        self._cap = ProcessCap.rlimit_only()  # made anew for each start of the kernel
        self.relay: subprocess.Popen | None = None

    def lock(self) -> None:
        """Make the private folder read-only to the kernel, once it has made its sockets there: without any
        capability in its sandbox, learner code then cannot add files to it (a host folder, with no size limit),
        swap a socket for a link, or change the connection file. The kernel runs as the folder's owner, so this
        holds because the process filter keeps it from changing the mode back (chmod does nothing; ACLs, io_uring
        and namespaces of its own are refused: sandbox.REFUSED). This process unlocks it to tidy up.

        Red team 17: nothing in the folder is followed or trusted. The connection file is changed through a
        descriptor opened without following links, and must be the regular file this process wrote; anything but it
        and the kernel's sockets is removed.

        Raises:
            KernelTampered: the connection file is not that file any more, or a socket was swapped for a link.
        """
        sockets = {f"ipc-{port}" for port in self.get_connection_info().values() if isinstance(port, int)}
        for entry in os.scandir(self.private):
            mode = entry.stat(follow_symlinks=False).st_mode
            if entry.name in sockets and not stat.S_ISSOCK(mode) or entry.name == "kernel.json" and not stat.S_ISREG(mode):
                raise KernelTampered(f"the kernel's {entry.name} was replaced as it started")
            if entry.name not in sockets and entry.name != "kernel.json":
                shutil.rmtree(entry.path) if stat.S_ISDIR(mode) else os.unlink(entry.path)
        descriptor = os.open(self.connection_file, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            if os.fstat(descriptor).st_uid != os.getuid():
                raise KernelTampered("the kernel's connection file was replaced as it started")
            os.fchmod(descriptor, 0o400)
        finally:
            os.close(descriptor)
        self.private.chmod(0o500)

    async def _async_pre_start_kernel(self, **kw):
        self.private.chmod(0o700)  # a restarted kernel makes its sockets anew
        self._end_relay()
        self.ip = str(self.private / "ipc")  # the connection file the kernel reads names its own sockets
        command, kw = await super()._async_pre_start_kernel(**kw)
        # Its own terminal output (connection banners, learner prints to fd 1/2 at exit) is not grading output.
        kw.update(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._cap.close()  # a restarted kernel's old sandbox has ended
        self._cap = ProcessCap()
        return sandbox.kernel_command(command, self.private, kw.get("cwd"), self._cap), kw

    async def _async_post_start_kernel(self, **kw):
        """Put the relay (autograder.trust.relay) between this process and the kernel: from here on every socket
        of this manager and its clients, the control socket it opens now included, reaches the relay's end."""
        self.relay = relay.start(self.ip, str(self.relayed / "ipc"), self.get_connection_info())
        self.ip = str(self.relayed / "ipc")
        await super()._async_post_start_kernel(**kw)

    def _end_relay(self) -> None:
        if self.relay is not None:
            self.relay.kill()
            self.relay.wait()
            self.relay = None

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        """Tidy up after the kernel: jupyter_client's own cleanup, the sandbox's pids cgroup, and (unless it is
        restarted) the private folder. Safe to run twice: nbclient runs it after a shutdown that ran it too."""
        with contextlib.suppress(FileNotFoundError):  # cleaned up already
            self.private.chmod(0o700)
        await super()._async_cleanup_resources(restart=restart)
        self._cap.close()
        self._end_relay()
        if not restart:
            shutil.rmtree(self.private, ignore_errors=True)
            shutil.rmtree(self.relayed, ignore_errors=True)

    # nbclient calls this name, which AsyncKernelManager binds to the base class's coroutine function itself, so
    # overriding the coroutine alone missed a dead kernel (no shutdown to run it): its private folder stayed.
    cleanup_resources = _async_cleanup_resources


def outputs(verdict: verdicts.Verdict, kernel_claimed_pass: bool) -> list:
    """The outputs nbgrader scores: none of type error for a pass, one error output (a CheckFailure) for a fail."""
    if verdict.passed:
        return [new_output("stream", name="stdout", text=f"{verdict.exercise}: {verdict.message}\n")]
    message = (DIFFERS if kernel_claimed_pass else "") + verdict.message
    ename = COURSE_ERROR_ENAME if verdict.course_error else "CheckFailure"  # the class run's row looks for it
    return [new_output("error", ename=ename, evalue=f"[{verdict.exercise}] {message}",
                       traceback=[f"{ename}: [{verdict.exercise}]", *message.splitlines()])]


__all__ = ["ContainedExecute", "RefuseUnsafeFiles", "ReplayExecution", "SandboxedKernelManager", "SeparateCopiedCells",
           "StartTrustedVerdicts", "TrustedVerdicts", "checks"]


def diagnosis(error: dict) -> str:
    """One readable message for a test cell's error output, ending with its cause line (a CheckFailure's own, else
    the cause its kind of error names)."""
    told = _told(error)
    return told if cause_of(told) else with_cause(told, _ERROR_CAUSES.get(error.get("ename", ""), causes.CRASH))


_ERROR_CAUSES = {"CheckFailure": causes.MISMATCH, "NotImplementedError": causes.STUB,
                 "CellTimeoutError": causes.TIMEOUT, "AssertionError": causes.VISIBLE_TEST,
                 "NameError": causes.NOT_DEFINED}


def _told(error: dict) -> str:
    name, value = error.get("ename", ""), error.get("evalue", "")
    if name in ("CheckFailure", COURSE_ERROR_ENAME):
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
