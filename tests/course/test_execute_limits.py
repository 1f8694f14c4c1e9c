"""The execute stage's limits and its failing closed (autograder.course.limits, ContainedExecute, TrustedVerdicts),
without a kernel: for each limit, a case it must stop and one it must not."""
import json
import logging
import os
import subprocess
import sys
import time
import types

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell

from autograder.course import limits, preprocessors
from autograder.course.preprocessors import (JOB, NOT_RUN, UNCHECKED, ContainedExecute, KernelWatch, OutputCap,
                                             TrustedVerdicts, bound_error, verdict_job)
from autograder.grade.notebook import UnusableNotebook, read_submission
from autograder.trust.verdicts import VERIFIED, Verdict
from conftest import REPO, crowds_cpu_0, hogs_on_cpu_0, solution_notebook

NB = "01_nudging"
LOG = logging.getLogger("test")


def test_a_notebook_is_refused_past_its_size_or_its_number_of_cells_and_not_at_them():
    assert limits.oversized(limits.MAX_NOTEBOOK_BYTES, limits.MAX_CELLS) is None
    assert f"more than the {limits.MAX_NOTEBOOK_BYTES >> 20} MiB" in limits.oversized(limits.MAX_NOTEBOOK_BYTES + 1, 0)
    assert "1001 cells, more than the 1000" in limits.oversized(0, limits.MAX_CELLS + 1)


def cells_added(tmp_path, count: int):
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    nb.cells += [new_markdown_cell("note") for _ in range(count - len(nb.cells))]
    path = tmp_path / "many.ipynb"
    nbformat.write(nb, path)
    return path


def test_the_command_line_refuses_too_many_cells_but_not_the_most_allowed(tmp_path):
    assert read_submission(cells_added(tmp_path, limits.MAX_CELLS))[1] == NB
    with pytest.raises(UnusableNotebook, match="has 1001 cells, more than the 1000"):
        read_submission(cells_added(tmp_path, limits.MAX_CELLS + 1))


def test_a_notebook_nbformat_reads_but_does_not_accept_is_unusable(tmp_path):
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    nb.cells[0].outputs = [{"output_type": "no such type"}]
    path = tmp_path / "invalid.ipynb"
    path.write_text(json.dumps(nb))
    with pytest.raises(UnusableNotebook, match="not a readable Jupyter notebook .*ValidationError"):
        read_submission(path)


def resources(notebook=NB, job=None):
    found = {"unique_key": notebook, "nbgrader": {"assignment": NB, "notebook": notebook}}
    return {**found, JOB: job} if job else found


def test_the_execute_stage_runs_no_kernel_for_a_notebook_with_too_many_cells():
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    nb.cells += [new_markdown_cell("note") for _ in range(limits.MAX_CELLS)]
    nb, _ = ContainedExecute().preprocess(nb, resources())  # no kernel exists here: running one would fail
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs[0].ename == NOT_RUN and "more than the 1000" in c.outputs[0].evalue for c in code)
    job = verdict_job(nb, resources(), LOG, REPO)
    assert job.refused and "more than the 1000" in job.refused


def test_outputs_are_kept_to_their_cap_per_cell_and_per_notebook(monkeypatch):
    monkeypatch.setattr(preprocessors, "MAX_CELL_OUTPUT_BYTES", 10)
    monkeypatch.setattr(preprocessors, "MAX_OUTPUT_BYTES", 25)
    cap = OutputCap()
    assert cap.admits(0, 10)  # up to the cell's cap: kept
    assert not cap.admits(0, 1) and cap.first_cut() and not cap.first_cut()  # past it: dropped, with one note
    assert cap.admits(1, 10)  # a fresh cell, a fresh cap: 21 bytes in all so far
    assert not cap.admits(2, 5)  # within the cell's cap, past the notebook's (dropped outputs count: they arrived)
    assert cap.first_cut()  # a note in that cell too


def test_a_run_that_floods_the_output_past_twice_the_notebooks_cap_is_flooded(monkeypatch):
    monkeypatch.setattr(preprocessors, "MAX_OUTPUT_BYTES", 25)
    monkeypatch.setattr(preprocessors, "FLOOD_BYTES", 50)
    cap = OutputCap()
    assert not cap.admits(0, 30) and not cap.flooded()  # dropped, but not yet costly
    assert not cap.admits(1, 30) and cap.flooded()


def test_the_kernel_watch_ends_a_kernel_for_a_reason_given():
    sleepy = subprocess.Popen([sys.executable, "-c", "import time\ntime.sleep(60)"])
    watch = KernelWatch(sleepy, 100)
    watch.start()
    watch.end("flooded")
    assert sleepy.wait(timeout=10) < 0 and watch.reason == "flooded"
    watch.join(timeout=5)
    assert not watch.is_alive()


def test_an_error_output_is_cut_to_its_last_lines():
    content = {"ename": "ValueError", "evalue": "v" * 10**6, "traceback": [f"line {i}" for i in range(10**5)]}
    bound_error(content)
    assert len(content["evalue"]) == 2000 and content["traceback"][-1] == "line 99999"
    assert len(content["traceback"]) == 40


class Finished:
    """A verdict job that is done."""

    def __init__(self, found=None, error=None, refused=None):
        self.found, self.error, self.refused = found or {}, error, refused

    def result(self):
        if self.error:
            raise self.error
        return self.found


def graded_cells(nb):
    return [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
            and not c.metadata["nbgrader"].get("solution")]


def graded(job, notebook=NB):
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    nb, _ = TrustedVerdicts().preprocess(nb, resources(notebook, job))
    return {c.metadata["nbgrader"]["grade_id"]: c.outputs for c in graded_cells(nb)}


def test_a_test_cell_without_a_trusted_verdict_fails_and_one_with_a_pass_passes():
    passed = Verdict("central_difference", True, VERIFIED)
    found = graded(Finished({"central_difference": passed}))
    assert [o.output_type for o in found["test_central_difference"]] == ["stream"]
    assert all(outs[0].output_type == "error" and UNCHECKED in outs[0].evalue
               for grade_id, outs in found.items() if grade_id != "test_central_difference")


def test_a_notebook_the_course_does_not_have_fails_every_test_cell_with_the_reason():
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    job = verdict_job(nb, resources("renamed"), LOG, REPO)
    assert "the course has no notebook 'renamed' in assignment '01_nudging'" in job.refused
    found = graded(job, "renamed")
    assert len(found) == 4 and all(outs[0].output_type == "error" and job.refused in outs[0].evalue
                                   for outs in found.values())


def test_a_verdict_job_that_failed_fails_every_test_cell_with_the_reason():
    found = graded(Finished(error=RuntimeError("zygote lost")))
    assert all("could not check this notebook (RuntimeError: zygote lost)" in outs[0].evalue
               for outs in found.values())


def test_the_kernel_watch_kills_a_sandbox_past_its_cpu_and_not_one_that_sleeps():
    busy = subprocess.Popen([sys.executable, "-c", "while True:\n    pass"])
    sleepy = subprocess.Popen([sys.executable, "-c", "import time\ntime.sleep(30)"])
    watches = [KernelWatch(busy, 0.6), KernelWatch(sleepy, 0.6)]
    try:
        for watch in watches:
            watch.start()
        _, status, usage = os.wait4(busy.pid, 0)  # killed promptly in CPU time (its wall time depends on the load)
        busy.returncode = -os.WTERMSIG(status)
        assert busy.returncode < 0 and usage.ru_utime + usage.ru_stime < 0.6 + 2 * KernelWatch.POLL_S + 0.5
        assert "used more than 0.6 s of CPU time in all" in watches[0].reason
        time.sleep(1)
        assert sleepy.poll() is None and watches[1].reason is None
    finally:
        for watch in watches:
            watch.stop()
        sleepy.kill()
        sleepy.wait()


# ------------------------------------------------------------------------------------------------ with a kernel

LOUD = "for _ in range(3000):\n    print('x' * 1000)\n"  # 3 MB of output: past a cell's 2 MiB
BUSY_3S = "import time\nstarted = time.process_time()\nwhile time.process_time() - started < 3:\n    pass\n"


def grade_with_feedback(tmp_path, env: dict) -> tuple[int, dict, str]:
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    nb.cells[1:1] = [nbformat.v4.new_code_cell(source) for source in (LOUD, BUSY_3S, BUSY_3S, BUSY_3S)]
    path, page = tmp_path / "costly.ipynb", tmp_path / "feedback.html"
    nbformat.write(nb, path)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--json", "--feedback", str(page)],
                          cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, **env})
    return done.returncode, json.loads(done.stdout), page.read_text()


@pytest.mark.slow  # two kernels, through nbgrader
@pytest.mark.parametrize("budget_s, stopped", [("6", True), ("300", False)])
def test_the_kernels_whole_run_has_a_cpu_budget_no_cell_resets_and_outputs_are_cut(tmp_path, budget_s, stopped):
    """Three cells of 3 CPU s each, every one far within the cell timeout: a 6 s budget for the whole run stops the
    kernel in the second; 300 s does not. The trusted verdicts do not depend on the kernel: full marks both ways."""
    code, report, page = grade_with_feedback(tmp_path, {"BACKPROP_NOTEBOOK_CPU_S": budget_s})
    assert code == 0 and report["score"] == report["max_score"] == 10
    assert ("the kernel running your notebook used more than 6 s of CPU time in all" in page) is stopped
    assert "[Output cut here: a cell may leave 2 MiB" in page and page.count("x" * 1000) < 2200


def test_the_kernel_watch_stops_a_cell_that_sleeps_but_not_the_kernel_waiting_between_cells():
    sleepy = subprocess.Popen([sys.executable, "-c", "import time\ntime.sleep(60)"])
    watch = KernelWatch(sleepy, 100, cell_s=1.0)
    try:
        watch.start()
        time.sleep(1.5)  # between cells: waiting for nbgrader is no one's fault
        assert sleepy.poll() is None and watch.reason is None
        watch.cell_started()
        assert sleepy.wait(timeout=10) < 0
        assert "a cell spent more than 1 s neither computing nor waiting for a CPU" in watch.reason
    finally:
        watch.stop()
        sleepy.kill()
        sleepy.wait()


@pytest.mark.slow  # about 10 s of a crowded core
@crowds_cpu_0
def test_the_kernel_watch_tells_a_starved_endless_loop_as_a_loop():
    """Eight hogs on the loop's core give it about a ninth of it: nine seconds of wall time to use its one second of
    CPU, all of them runnable, so not a sleep."""
    with hogs_on_cpu_0():
        loop = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True:\n    pass"],
                                start_new_session=True)
        watch = KernelWatch(loop, 100, cell_s=1.0)
        try:
            watch.start()
            started = time.monotonic()
            watch.cell_started()
            assert loop.wait(timeout=120) < 0
            assert "a cell used more than 1 s of CPU time" in watch.reason
            assert time.monotonic() - started > 3, "the core was not crowded: this proves nothing"
        finally:
            watch.stop()
            loop.kill()
            loop.wait()


def test_each_output_of_its_own_counts_at_least_its_charge_and_printed_text_its_bytes():
    """Recording costs by the output: 27,000 one-number displays in a cell (5.9 MB) took a class run's recording
    process 19 CPU s (red team 7). Such a cell now keeps MAX_CELL_OUTPUT_BYTES / OUTPUT_CHARGE_BYTES of them."""
    from autograder.course.preprocessors import charge

    display = {"data": {"text/plain": "7"}, "metadata": {}}
    assert charge("display_data", display) == charge("execute_result", display) == limits.OUTPUT_CHARGE_BYTES
    assert charge("stream", {"name": "stdout", "text": "7\n"}) < 100
    big = {"data": {"image/png": "x" * 50_000}, "metadata": {}}
    assert charge("display_data", big) > 50_000
    cap, kept = OutputCap(), 0
    while cap.admits(0, charge("display_data", display)):
        kept += 1
    assert kept == limits.MAX_CELL_OUTPUT_BYTES // limits.OUTPUT_CHARGE_BYTES == 512


def test_every_kernel_message_counts_towards_the_flood_whatever_its_type_with_its_extra_frames(monkeypatch):
    """Red team 9: 12 MiB messages of a type of the learner's own cost the grading process 1.1 GB and 10 CPU s
    uncounted, and extra frames on a display were never counted: every message now counts, frames included."""
    from autograder.course.preprocessors import charge

    display = {"data": {"text/plain": "hi"}, "metadata": {}}
    assert charge("display_data", display, [b"x" * 200_000] * 3) > 600_000
    monkeypatch.setattr(preprocessors, "FLOOD_BYTES", 100_000)
    execute, ended = ContainedExecute(), []
    execute._output, execute._watch = OutputCap(), types.SimpleNamespace(end=ended.append)
    own = {"msg_type": "zzz", "header": {"msg_type": "zzz"}, "parent_header": {}, "metadata": {},
           "content": {"x": "y" * 60_000}}
    cell = new_code_cell("")
    assert execute.process_message(own, cell, 0) is None and not ended
    assert execute.process_message(own, cell, 0) is None and ended == [preprocessors.FLOODED]
    assert cell.outputs == []  # counted, never kept


def test_a_multiline_output_is_kept_as_one_string():
    """Red team 10: nbformat's list-of-lines form of an output costs the grader per line (4.2 million empty lines
    within the kept 16 MiB took 21 CPU s and 0.8 GB): the lines are joined when the output arrives."""
    execute = ContainedExecute()
    execute._output, execute._watch = OutputCap(), None
    execute.clear_before_next_output = False  # what nbclient sets as a cell starts
    cell = new_code_cell("")
    lines = {"msg_type": "display_data", "header": {"msg_type": "display_data"}, "parent_header": {}, "metadata": {},
             "content": {"data": {"text/plain": ["a\n", "b"] * 1000, "image/png": "iVBOR"}, "metadata": {}}}
    execute.process_message(lines, cell, 0)
    assert len(cell.outputs) == 1, cell.outputs
    assert cell.outputs[0]["data"] == {"text/plain": "a\nb" * 1000, "image/png": "iVBOR"}


def test_outputs_still_arriving_after_a_cell_are_not_called_an_overloaded_machine():
    """Red team 10: nbclient's wait for a cell's outputs after its reply ran out, and the reason said the machine
    was too loaded and to grade again."""
    from nbclient.exceptions import CellTimeoutError

    execute = ContainedExecute()
    execute._watch = None
    why = execute._why_stopped(CellTimeoutError.error_from_timeout_and_cell(preprocessors.IOPUB_TIMEOUT, 4,
                                                                             new_code_cell("x")))
    assert "still arriving" in why and "loaded" not in why
    assert "loaded" in execute._why_stopped(CellTimeoutError("A cell timed out while it was being executed"))


def deep(levels: int) -> dict:
    nested = {}
    for _ in range(levels):
        nested = {"x": nested}
    return nested


@pytest.mark.parametrize("content, kept", [
    ({"name": "stdout", "text": ["a", "b"]}, "ab"),  # nbformat's list form of a stream's text: one string
    ({"name": "stdout", "text": 7}, None),  # not text: nbgrader's LimitOutput failed the whole grade on it
])
def test_a_stream_keeps_its_text_as_one_string_and_one_without_text_is_dropped(content, kept):
    execute = ContainedExecute()
    execute._output, execute._watch = OutputCap(), None
    execute.clear_before_next_output = False
    cell = new_code_cell("")
    message = {"msg_type": "stream", "header": {"msg_type": "stream"}, "parent_header": {}, "metadata": {},
               "content": content}
    execute.process_message(message, cell, 0)
    assert cell.outputs[-1]["text"] == kept if kept else "not a valid output" in cell.outputs[-1]["text"]


def test_an_output_nested_too_deep_for_nbformat_is_dropped_not_a_failed_grade():
    """Red team 10: a display of a dict nested 800 deep (the session reads up to about 1000) raised RecursionError
    in nbformat: `grade` exited 2."""
    execute = ContainedExecute()
    execute._output, execute._watch = OutputCap(), None
    execute.clear_before_next_output = False
    cell = new_code_cell("")
    message = {"msg_type": "display_data", "header": {"msg_type": "display_data"}, "parent_header": {},
               "metadata": {}, "content": {"data": {"application/json": deep(800), "text/plain": "deep"},
                                           "metadata": {}}}
    execute.process_message(message, cell, 0)
    assert "not a valid output (RecursionError" in cell.outputs[-1]["text"]


def test_an_update_counts_once_for_every_output_of_its_display_id():
    """Red team 10: 300 displays sharing one id, then one 1 MB update: nbclient wrote its data into all 300, and the
    grader reached 2.4 GB. The update counts 301 times, past a cell's cap, and is dropped."""
    execute = ContainedExecute()
    execute._output, execute._watch = OutputCap(), None
    execute.clear_before_next_output = False
    cell = new_code_cell("")
    update = {"msg_type": "update_display_data", "header": {"msg_type": "update_display_data"}, "parent_header": {},
              "metadata": {}, "content": {"data": {"text/plain": "b" * 10_000}, "metadata": {},
                                          "transient": {"display_id": "same"}}}
    execute._display_id_map = {"same": {0: list(range(300))}}
    assert execute._sharing(update["content"]) == 300
    execute.process_message(update, cell, 0)
    assert cell.outputs and "Output cut here" in cell.outputs[0]["text"]
    execute._display_id_map = {"other": {0: list(range(300))}}
    assert execute._sharing(update["content"]) == 0
