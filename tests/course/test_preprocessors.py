"""The pure parts of the nbgrader glue (autograder.course.preprocessors), on in-memory notebooks: no kernel, no
sandbox, no nbgrader run.

They decide what nbgrader scores: which copy of a graded cell keeps its grade id, which outputs a test cell ends
with (nbgrader gives no points for an error output, all of them otherwise), what a learner reads about a failure, and
which cells a dead kernel leaves "not run".
"""
import copy
import logging

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from nbgrader.utils import determine_grade

from autograder.course.preprocessors import (DIFFERS, NOT_RUN, RefuseUnsafeFiles, ReplayExecution, SeparateCopiedCells,
                                             diagnosis, mark_not_run, outputs, visible_failure)
from autograder.grade.submission import UnsafeSubmissionError
from autograder.trust.verdicts import VERIFIED, Verdict


def answer(grade_id: str, source: str = "def f():\n    pass\n"):
    return new_code_cell(source, metadata={"nbgrader": {
        "grade": False, "grade_id": grade_id, "locked": False, "schema_version": 3, "solution": True, "task": False}})


def graded(grade_id: str, source: str = "run_check('f', globals())\n", points: int = 2):
    return new_code_cell(source, metadata={"nbgrader": {
        "grade": True, "grade_id": grade_id, "locked": True, "points": points, "schema_version": 3,
        "solution": False, "task": False}})


def error(ename: str, evalue: str = "", traceback=()):
    return new_output("error", ename=ename, evalue=evalue, traceback=list(traceback))


def stdout(text: str):
    return new_output("stream", name="stdout", text=text)


# ------------------------------------------------------------------------------------------------ unsafe files

def test_a_submission_folder_holding_a_link_fails_sanitizing_and_an_ignored_folder_is_not_looked_into(tmp_path):
    """RefuseUnsafeFiles reads the folder nbgrader is sanitizing (resources' metadata path) by the course's config,
    whose ignore patterns it applies: a link in .ipynb_checkpoints is what nbgrader itself never copies."""
    from traitlets.config import Config

    from autograder.course import configure

    config = Config()
    configure(config)
    (tmp_path / "01_nudging.ipynb").write_text("{}")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "old.ipynb").symlink_to("/etc/hostname")
    nb, resources = new_notebook(), {"metadata": {"path": str(tmp_path)}}
    assert RefuseUnsafeFiles(config=config).preprocess(nb, resources) == (nb, resources)
    (tmp_path / "notes.txt").symlink_to("/etc/hostname")
    with pytest.raises(UnsafeSubmissionError, match="^notes.txt is a symbolic link"):
        RefuseUnsafeFiles(config=config).preprocess(nb, resources)


def test_the_course_refuses_unsafe_files_first_and_collects_as_data():
    from traitlets.config import Config

    from autograder.course import configure

    config = Config()
    configure(config)
    assert config.Autograde.sanitize_preprocessors[0] is RefuseUnsafeFiles
    assert config.ExchangeFactory.collect == "autograder.course.collect.CollectAsData"


# ------------------------------------------------------------------------------------------------ copied cells

def test_the_first_copy_of_a_graded_cell_keeps_its_grade_id_and_later_copies_become_ordinary_cells():
    """nbgrader's DeduplicateIds would keep the last and break the run; trusted grading reads the first."""
    first_answer, first_test = answer("f"), graded("test_f")
    later_test = graded("test_f", "my experiment\n")
    later_test.metadata["tags"] = ["mine"]
    later_answer = answer("f", "def f():\n    return 1\n")
    nb = new_notebook(cells=[first_answer, first_test, later_test, new_markdown_cell("notes"), later_answer])
    kept = copy.deepcopy([first_answer.metadata, first_test.metadata])
    nb, _ = SeparateCopiedCells(log=logging.getLogger("test")).preprocess(nb, {"unique_key": "ann/01"})
    assert [nb.cells[0].metadata, nb.cells[1].metadata] == kept
    assert "nbgrader" not in nb.cells[2].metadata and nb.cells[2].metadata["tags"] == ["mine"]  # only the id goes
    assert "nbgrader" not in nb.cells[4].metadata
    assert nb.cells[2].source == "my experiment\n" and nb.cells[4].source == "def f():\n    return 1\n"


def test_each_later_copy_is_logged_with_the_notebook_and_its_grade_id(caplog):
    nb = new_notebook(cells=[graded("test_f"), graded("test_f"), graded("test_f"), answer("g")])
    with caplog.at_level(logging.WARNING, logger="test"):
        SeparateCopiedCells(log=logging.getLogger("test")).preprocess(nb, {"unique_key": "ann/01"})
    assert [r.getMessage() for r in caplog.records] == [
        "ann/01: a copy of the cell 'test_f' is graded as an ordinary cell"] * 2


def test_a_notebook_without_copies_is_left_as_it_was(caplog):
    """Including cells whose nbgrader metadata is empty or null, which nbformat accepts."""
    nb = new_notebook(cells=[answer("f"), graded("test_f"), new_code_cell("x = 1"),
                             new_code_cell("y = 2", metadata={"nbgrader": None}),
                             new_code_cell("z = 3", metadata={"nbgrader": {}})])
    before = copy.deepcopy(nb)
    with caplog.at_level(logging.WARNING, logger="test"):
        nb, _ = SeparateCopiedCells(log=logging.getLogger("test")).preprocess(nb, {})
    assert nb == before and not caplog.records


# ------------------------------------------------------------------------------------------------ diagnosis

PLAIN_TRACEBACK = ["Traceback (most recent call last):",
                   '  File "<cell>", line 2, in <module>\n    assert slope == 12.01, f"expected 12.01, got {slope}"',
                   "AssertionError: expected 12.01, got 12.0"]


@pytest.mark.parametrize("output, message", [
    (error("CheckFailure", "[central_difference] expected 12.01, got 12.0\nsee [1]\ncause: central_difference/x"),
     "expected 12.01, got 12.0\nsee [1]\ncause: central_difference/x"),  # only the leading [id] goes
    (error("CheckFailure", "[central_difference] expected 12.01"),
     "expected 12.01\ncause: mismatch"),                                 # an older record: no cause line of its own
    (error("NotImplementedError"),
     "a function it calls is not written yet: replace `raise NotImplementedError()` with your code.\ncause: stub"),
    (error("CellTimeoutError", "Cell execution timed out"),
     "the test cell ran out of time: is there a loop that never ends?\ncause: timeout"),
    (error("AssertionError", "expected 12.01, got 12.0", PLAIN_TRACEBACK),
     'visible test failed: assert slope == 12.01, f"expected 12.01, got {slope}" -> expected 12.01, got 12.0'
     "\ncause: visible-test"),
    (error("AssertionError", "", ["\x1b[0;31massert\x1b[0m x == 1", "\x1b[0;31massert\x1b[0m y == 2"]),
     "visible test failed: assert y == 2\ncause: visible-test"),          # the last assert, colours removed
    (error("AssertionError", "", ["AssertionError"]), "visible test failed: an assert\ncause: visible-test"),
    (error("AssertionError", "expected 2, got 1", ["Cell In[3], line 2", "      1 x = 1",
                                                   "\x1b[0;32m----> 2\x1b[0m assert x == 2, 'expected 2, got 1'"]),
     "visible test failed: assert x == 2, 'expected 2, got 1' -> expected 2, got 1\ncause: visible-test"),
    (error("NameError", "name 'central_difference' is not defined"),
     "NameError: name 'central_difference' is not defined (did an earlier cell fail, or was the function renamed?)"
     "\ncause: not-defined"),
    (error("ZeroDivisionError", "division by zero"), "ZeroDivisionError: division by zero\ncause: crash"),
], ids=["check", "check-without-cause", "not-written", "timeout", "assert", "assert-ansi", "assert-unnamed",
         "assert-ipython", "name", "other"])
def test_diagnosis_gives_one_message_per_kind_of_error(output, message):
    assert diagnosis(output) == message


def test_visible_failure_ignores_a_cell_the_kernel_never_reached():
    """A dead kernel's "not run" mark is no visible failure: the trusted verdict decides such a cell."""
    assert visible_failure([]) is None
    assert visible_failure([stdout("visible tests passed\n")]) is None
    assert visible_failure([error(NOT_RUN, "the kernel died")]) is None


def test_visible_failure_is_the_diagnosis_of_the_last_real_error():
    kernel_outputs = [stdout("x\n"), error("ValueError", "first"), error("NameError", "name 'f' is not defined"),
                      error(NOT_RUN, "the kernel died")]
    assert visible_failure(kernel_outputs) == diagnosis(kernel_outputs[2])


# ------------------------------------------------------------------------------------------------ mark_not_run

def ran(cell, count: int, *cell_outputs):
    cell.execution_count, cell.outputs = count, list(cell_outputs)
    return cell


def not_run_reasons(cell) -> list[str]:
    return [o.evalue for o in cell.outputs if o.output_type == "error" and o.ename == NOT_RUN]


def test_mark_not_run_marks_the_running_cell_and_every_cell_not_reached():
    done = ran(new_code_cell("x = 1"), 1, stdout("1\n"))
    running = ran(new_code_cell("while True: pass"), 2)  # started, never finished
    later, test = new_code_cell("y = 2"), graded("test_f")
    empty, text = new_code_cell("  \n"), new_markdown_cell("text")
    nb = new_notebook(cells=[done, running, text, later, empty, test])
    mark_not_run(nb, "the kernel died")
    assert [not_run_reasons(c) for c in (done, running, later, test)] == [[], ["the kernel died"]] + [
        ["the kernel died"]] * 2
    assert empty.outputs == [] and "outputs" not in text
    assert running.outputs[-1].traceback == [f"{NOT_RUN}: the kernel died"]
    assert determine_grade(test) == (0, 2)  # nbgrader scores a test cell without outputs as passed


def test_mark_not_run_leaves_a_cell_that_raised_as_it_failed():
    raised = ran(new_code_cell("1 / 0"), 1, error("ZeroDivisionError", "division by zero"))
    later = new_code_cell("y = 2")
    nb = new_notebook(cells=[raised, later])
    mark_not_run(nb, "timeout")
    assert [o.ename for o in raised.outputs] == ["ZeroDivisionError"] and not_run_reasons(later) == ["timeout"]


def test_mark_not_run_with_nothing_reached_marks_every_code_cell():
    nb = new_notebook(cells=[new_code_cell("a"), new_markdown_cell("b"), new_code_cell("c")])
    mark_not_run(nb, "the kernel did not start")
    assert [not_run_reasons(c) for c in nb.cells if c.cell_type == "code"] == [["the kernel did not start"]] * 2


# ------------------------------------------------------------------------------------------------ outputs

def scored(cell_outputs) -> tuple:
    cell = graded("test_f")
    cell.outputs = cell_outputs
    return determine_grade(cell)


@pytest.mark.parametrize("claimed", [False, True])
def test_a_passing_verdict_is_one_line_on_stdout_and_full_points(claimed):
    found = outputs(Verdict("f", True, VERIFIED), kernel_claimed_pass=claimed)
    assert [(o.output_type, o.name, o.text) for o in found] == [("stream", "stdout", f"f: {VERIFIED}\n")]
    assert scored(found) == (2, 2)


def test_a_failing_verdict_is_one_check_failure_and_no_points():
    (found,) = outputs(Verdict("f", False, "expected 1\ngot 2"), kernel_claimed_pass=False)
    assert (found.output_type, found.ename, found.evalue) == ("error", "CheckFailure", "[f] expected 1\ngot 2")
    assert found.traceback == ["CheckFailure: [f]", "expected 1", "got 2"]
    assert scored([found]) == (0, 2)


def test_a_failure_the_kernel_claimed_as_a_pass_says_so():
    (found,) = outputs(Verdict("f", False, "expected 1"), kernel_claimed_pass=True)
    assert found.evalue == f"[f] {DIFFERS}expected 1"


def test_the_learner_reads_the_checks_own_message_back_from_a_failing_verdict():
    """diagnosis (the CLI's table, autograder.grade.notebook) undoes the [id] that outputs puts in front."""
    told = "forward difference used\ncause: central_difference/forward-difference"
    (found,) = outputs(Verdict("central_difference", False, told), kernel_claimed_pass=False)
    assert diagnosis(found) == told and found.traceback[-1] == "cause: central_difference/forward-difference"


# ------------------------------------------------------------------------------------------------ ReplayExecution

IDS = {"student": "ann", "assignment": "01_nudging", "notebook": "01_nudging"}


def submitted():
    return new_notebook(cells=[new_markdown_cell("# title"), new_code_cell("x = 1\nx"), graded("test_f")],
                        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})


def executed_copy(folder):
    """The worker's run of the same notebook: same cells, with outputs, counts and metadata of its own."""
    nb = submitted()
    nb.metadata = {"executed": True}
    nb.cells[0].metadata["seen"] = True
    ran(nb.cells[1], 1, new_output("execute_result", data={"text/plain": "1"}, execution_count=1))
    ran(nb.cells[2], 2, error("CheckFailure", "[f] no"))
    path = folder / "ann" / "01_nudging" / "01_nudging.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    return nb


def test_replay_copies_the_outputs_and_counts_of_the_executed_notebook(tmp_path):
    executed = executed_copy(tmp_path)
    nb = submitted()
    before = copy.deepcopy(nb)
    nb, _ = ReplayExecution(directory=str(tmp_path)).preprocess(nb, {"nbgrader": IDS})
    assert [c.outputs for c in nb.cells[1:]] == [c.outputs for c in executed.cells[1:]]
    assert [c.execution_count for c in nb.cells[1:]] == [1, 2]
    # Everything else is the submission's, as nbgrader's own pipeline left it.
    assert nb.metadata == before.metadata and nb.cells[0] == before.cells[0]
    assert [(c.id, c.metadata) for c in nb.cells] == [(c.id, c.metadata) for c in before.cells]


def test_replay_without_an_executed_notebook_raises(tmp_path):
    with pytest.raises(ValueError, match="no executed notebook for ann/01_nudging"):
        ReplayExecution(directory=str(tmp_path)).preprocess(submitted(), {"nbgrader": IDS})


@pytest.mark.parametrize("change", [
    lambda nb: setattr(nb.cells[1], "source", "x = 2\nx"),
    lambda nb: nb.cells.append(new_code_cell("extra")),
    lambda nb: nb.cells.__setitem__(0, new_code_cell("# title")),   # same source, another cell type
], ids=["source", "count", "type"])
def test_replay_refuses_an_executed_notebook_with_other_cells(tmp_path, change):
    executed_copy(tmp_path)
    nb = submitted()
    change(nb)
    with pytest.raises(ValueError, match="does not have this submission's cells"):
        ReplayExecution(directory=str(tmp_path)).preprocess(nb, {"nbgrader": IDS})


class KnownVerdicts:
    """What StartTrustedVerdicts leaves for TrustedVerdicts: verdicts already reached."""

    refused = None

    def __init__(self, *found: Verdict):
        self.found = {verdict.exercise: verdict for verdict in found}

    def result(self):
        return self.found


def test_a_kernel_failure_of_a_trusted_pass_costs_the_points_under_the_graders_own_cause():
    """The kernel's words are the submission's (it can raise whatever it likes there): they may cost points, but the
    cause line is the grader's. A red team filed its exercise under `course-error`, and one `cause: $\\foo$` stopped
    the class report's charts."""
    from autograder.course.preprocessors import JOB, TrustedVerdicts

    cell = graded("f")
    cell.outputs = [error("CheckFailure", "[f] course error: a bug in the course\ncause: course-error")]
    nb = new_notebook(cells=[cell])
    TrustedVerdicts().preprocess(nb, {JOB: KnownVerdicts(Verdict("f", True, VERIFIED))})
    (found,) = nb.cells[0].outputs
    told = diagnosis(found)
    assert told.endswith("\ncause: visible-test") and told.count("cause:") == 1, told
    assert scored([found]) == (0, 2)
