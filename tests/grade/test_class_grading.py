"""Class grading on Dask (autograder.grade.class_run): every submission gets a row, failures are retried once and
recorded, a run resumes, and the gradebook agrees cell by cell with a serial ``nbgrader autograde``."""
import copy
import json
import os
import pickle
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

from autograder.grade import class_run, on_dask_worker, submission
from autograder.tools.bench_grading import differences, gradebook_cells, synthetic_class
from autograder.grade.class_run import ClassGradingError, grade_class
from autograder.grade.on_dask_worker import execute_submission
from autograder.grade.submission import Executed, Task
from autograder.contract import COURSE_ID
from autograder.course import SCRATCH_COURSE_CONFIG
from autograder.trust.secret import FILE as SECRET_FILE
from test_cpu import cpu_measurable
from conftest import REPO, SECRET, requires_sandbox, within

NB = "01_nudging"  # the quickest notebook to grade


def nbgrader(root, *args):
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr


def submit(root, students: dict) -> None:
    for student, nb in students.items():
        path = root / "submitted" / student / NB / f"{NB}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(nb) if isinstance(nb, bytes) else nbformat.write(nb, path)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A course with one real submission, and that submission's real execution (reused by the fake workers)."""
    root = tmp_path_factory.mktemp("template")
    shutil.copytree(REPO / "source" / NB, root / "source" / NB)
    (root / "nbgrader_config.py").write_text(SCRATCH_COURSE_CONFIG)
    nbgrader(root, "generate_assignment", NB)
    solved = synthetic_class(NB, root)["full-marks"]
    submit(root, {"full-marks": solved})
    course = class_run.Course.open(root, tmp_path_factory.mktemp("scratch"))
    files, _ = class_run.preflight(course.submitted(NB)["full-marks"], course.ignored, course.source_notebooks(NB))
    executed = execute_submission(course.snapshot(NB, 600), Task("full-marks", files))
    assert not list(root.glob("tmp*")), "the grading process left temporary files behind"
    assert executed.error is None, executed.log
    return root, solved, executed


class FakeWorkers:
    """Stands in for execute_submission: hands back the template's execution, failing as told.

    Dask pickles a task's function, so attempts are counted in files, not in the object.
    """

    def __init__(self, executed, folder, fail: dict[str, int], interrupt_after: int | None = None,
                 recorded: Path | None = None):
        self.executed, self.folder, self.fail, self.interrupt_after = executed, folder, fail, interrupt_after
        self.recorded = recorded  # with interrupt_after: Ctrl-C only once a notebook is recorded under this folder
        folder.mkdir()

    @property
    def attempts(self) -> dict[str, int]:
        found = {}
        for mark in self.folder.iterdir():
            found[mark.stem] = found.get(mark.stem, 0) + 1
        return found

    def __call__(self, snapshot, task):
        (self.folder / f"{task.student}.{task.attempt}").touch()
        so_far = sum(self.attempts.values())
        if self.interrupt_after is not None and so_far >= self.interrupt_after:
            if so_far == self.interrupt_after:
                # The result before this one may take seconds to reach the run on a loaded machine: wait until it
                # is recorded (one worker thread: tasks run one at a time).
                while self.recorded and not any(self.recorded.rglob("*.ipynb")):
                    time.sleep(0.1)
                signal.raise_signal(signal.SIGINT)  # what Ctrl-C in the terminal does
            time.sleep(2)  # still grading when the run stops
        if task.attempt <= self.fail.get(task.student, 0):
            raise MemoryError("the worker ran out of memory")
        return Executed(task.student, self.executed.notebooks, "log", 0.1, "fake")


@pytest.fixture
def threads():
    """A local Dask cluster of one thread worker: the fake above runs in this process, one task at a time."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def class_of(template, tmp_path, students):
    root, solved, executed = template
    shutil.copytree(root, tmp_path / "course")
    shutil.rmtree(tmp_path / "course" / "submitted")
    submit(tmp_path / "course", {s: solved for s in students})
    return tmp_path / "course", executed


@pytest.mark.slow  # the template fixture runs a real submission in a kernel
def test_failures_are_retried_once_then_recorded_and_every_submission_gets_a_row(template, tmp_path, threads, capsys):
    course, executed = class_of(template, tmp_path, ["ann", "bob", "cat"])
    submit(course, {"dan": b"{ not json"})
    fake = FakeWorkers(executed, tmp_path / "attempts", fail={"bob": 1, "cat": 5})
    rows = {r.student: r for r in grade_class(course, NB, scheduler=threads, execute=fake)}
    assert set(rows) == {"ann", "bob", "cat", "dan"}
    assert rows["ann"].status == rows["bob"].status == "graded" and rows["ann"].score == rows["ann"].max_score == 10
    assert fake.attempts == {"ann": 1, "bob": 2, "cat": 2}  # retried once, never a third time; dan never sent
    assert rows["cat"].status == "failed" and "MemoryError" in rows["cat"].note and rows["cat"].attempts == 2
    assert rows["dan"].status == "failed" and "not a readable notebook" in rows["dan"].note
    table = (course / class_run.LOGS / f"{NB}.tsv").read_text()
    assert all(f"\t{s}\t" in table for s in rows)
    assert "retrying once" in capsys.readouterr().err
    assert (course / "autograded" / "bob" / NB / f"{NB}.ipynb").is_file()
    assert not (course / "autograded" / "cat").exists()


@pytest.mark.slow  # the template fixture runs a real submission in a kernel
def test_a_run_resumes_skips_what_is_graded_and_regrades_on_request(template, tmp_path, threads):
    course, executed = class_of(template, tmp_path, ["ann", "bob", "cat"])
    fake = FakeWorkers(executed, tmp_path / "first", fail={}, interrupt_after=2, recorded=course / "autograded")
    first = {r.student: r.status for r in grade_class(course, NB, scheduler=threads, execute=fake)}
    assert sorted(first.values()) == ["graded", "stopped", "stopped"]  # Ctrl-C while the second was grading
    again = FakeWorkers(executed, tmp_path / "second", fail={})
    second = {r.student: r.status for r in grade_class(course, NB, scheduler=threads, execute=again)}
    assert sorted(second.values()) == ["graded", "graded", "skipped"] and len(again.attempts) == 2
    chosen = FakeWorkers(executed, tmp_path / "third", fail={})
    third = grade_class(course, NB, scheduler=threads, execute=chosen, students=["bob"], force=True)
    assert [(r.student, r.status) for r in third] == [("bob", "graded")] and chosen.attempts == {"bob": 1}


@pytest.mark.slow  # the template fixture runs a real submission in a kernel
def test_a_second_ctrl_c_while_recording_leaves_a_whole_record_or_none_and_the_next_run_grades_it(template, tmp_path,
                                                                                                 threads, monkeypatch):
    """Ctrl-C twice while nbgrader writes the first record: nbgrader removes what it wrote, and the submission scores 0
    with the reason. Twice while a record is synced (outside nbgrader): the run ends at once, and the journal's
    marker makes the next run remove the half record (the run still ends with a line for each, and its summary).
    Either way the next run grades everyone in full. (The other submission's result may arrive with the first, and
    is then recorded whole; else it is stopped.)"""
    from nbgrader.api import Gradebook

    from autograder.course.preprocessors import ReplayExecution
    from autograder.grade import journal

    course, executed = class_of(template, tmp_path, ["ann", "bob"])

    def twice(original):
        calls = []

        def interrupted(*args, **kwargs):
            calls.append(1)
            if len(calls) == 1:
                signal.raise_signal(signal.SIGINT)  # asks the run to stop after this record
                signal.raise_signal(signal.SIGINT)  # stops it at once: KeyboardInterrupt, right here
            return original(*args, **kwargs)
        return interrupted

    with monkeypatch.context() as patch:
        patch.setattr(ReplayExecution, "preprocess", twice(ReplayExecution.preprocess))
        fake = FakeWorkers(executed, tmp_path / "inside", fail={})
        first, other = grade_class(course, NB, scheduler=threads, execute=fake)
    assert (first.status, first.note) == ("failed", class_run.INTERRUPTED) and other.status in ("graded", "stopped")
    assert not (course / "autograded" / first.student / NB).exists()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gradebook:
        recorded = gradebook.find_submission(NB, first.student)
        assert recorded.score == 0 and recorded.notebooks[0].comments[0].auto_comment.endswith(class_run.INTERRUPTED)
    with monkeypatch.context() as patch:
        patch.setattr(journal, "sync_tree", twice(journal.sync_tree))
        cut = {r.student: r for r in grade_class(course, NB, scheduler=threads,
                                                   execute=FakeWorkers(executed, tmp_path / "outside", fail={}))}
    (cut_short,) = class_run.Journal(course / class_run.LOGS / class_run.JOURNAL).unfinished()
    assert (cut[cut_short[1]].status, cut[cut_short[1]].note) == ("stopped", class_run.CUT_SHORT), cut
    assert not (course / class_run.LOGS / class_run.SCRATCH).exists()
    again = FakeWorkers(executed, tmp_path / "again", fail={})
    rows = {r.student: r for r in grade_class(course, NB, scheduler=threads, execute=again, force=True)}
    assert [(r.status, r.score) for r in rows.values()] == [("graded", 10)] * 2, rows
    assert class_run.REPAIRED in rows[cut_short[1]].note


@pytest.mark.slow  # the template fixture runs a real submission in a kernel
def test_corrupt_cell_metadata_fails_the_submission_with_nbgraders_reason(template, tmp_path, threads):
    """The recording process leaves the metadata check to the grading worker (course.set_stage): it must still fail.
    (What the class run's own check refuses before sending, a graded cell the course lacks among them, is in
    test_the_class_run_refuses_and_notes_what_grade_refuses_and_notes.)"""
    course, _ = class_of(template, tmp_path, ["ann"])
    broken = nbformat.read(course / "submitted" / "ann" / NB / f"{NB}.ipynb", as_version=4)
    cell = nbformat.v4.new_code_cell("1 + 1")
    cell.metadata["nbgrader"] = {"grade": False, "grade_id": "", "solution": False, "locked": True,
                                 "schema_version": 3}  # a locked cell without a grade id
    broken.cells.append(cell)
    submit(course, {"ann": broken})
    (row,) = grade_class(course, NB, scheduler=threads)
    assert row.status == "failed" and "metadata may be corrupted" in row.note, row
    assert not (course / "autograded" / "ann").exists()


def exercise_cell(nb, grade_id: str):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


@pytest.mark.slow  # the template fixture runs a real submission in a kernel
def test_the_class_run_refuses_and_notes_what_grade_refuses_and_notes(template, tmp_path):
    """One check for both paths (autograder.grade.notebook): deleted exercise cells, an answer cell without its
    nbgrader metadata and changed metadata fail with the reason `grade` gives; a copied answer cell and another kernel
    are noted as `grade` notes them."""
    from autograder.grade.notebook import UnusableNotebook, notes, read_submission

    course, _ = class_of(template, tmp_path, [])
    solved = template[1]
    deleted, stripped, changed, noted = (nbformat.from_dict(copy.deepcopy(solved)) for _ in range(4))
    deleted.cells.remove(exercise_cell(deleted, "test_numerical_gradient"))
    exercise_cell(stripped, "log_square_trace").metadata = {}
    exercise_cell(changed, "central_difference").metadata["nbgrader"]["points"] = 10
    cell = exercise_cell(noted, "central_difference")
    noted.cells.insert(noted.cells.index(cell) + 1, nbformat.from_dict({**cell, "id": "pasted"}))
    noted.metadata["kernelspec"] = {"name": "julia-1.9", "display_name": "Julia", "language": "julia"}
    refused = {"deleted": deleted, "stripped": stripped, "changed": changed}
    submit(course, {**refused, "noted": noted})
    sources = class_run.Course.open(course, tmp_path / "scratch").source_notebooks(NB)
    for student in refused:  # refused before anything is sent: no cluster starts for them
        (row,) = grade_class(course, NB, students=[student])
        with pytest.raises(UnusableNotebook) as said:
            read_submission(course / "submitted" / student / NB / f"{NB}.ipynb")
        reason = str(said.value).split(": ", 1)[1].split(". ")[0]  # without the file's name and grade's remedy
        assert row.status == "failed" and row.note.startswith(f"{NB}.ipynb: {reason}. "), (student, row.note, reason)
        assert not (course / "autograded" / student).exists()
    files, note = class_run.preflight(course / "submitted" / "noted" / NB, [], sources)
    expected = notes(noted, sources[NB])
    assert files and len(expected) == 2 and note == "; ".join(f"{NB}.ipynb {n}" for n in expected), note
    assert "what the last of them above the test defines" in note and "'julia-1.9'" in note


@pytest.mark.slow  # the template fixture runs a real submission in a kernel
def test_a_timestamp_nbgrader_cannot_read_never_keeps_an_old_grade(template, tmp_path, threads):
    """Garbage in timestamp.txt fails the submission with the reason (nbgrader itself stops on it with an
    AttributeError); an empty one says nothing of when it was handed in, so it is graded again, not skipped."""
    course, executed = class_of(template, tmp_path, ["garbage", "empty", "dated"])
    for student in ("garbage", "empty", "dated"):
        (course / "submitted" / student / NB / "timestamp.txt").write_text("2026-11-30 09:15:00.000000 UTC")
    fake = FakeWorkers(executed, tmp_path / "first", fail={})
    assert [r.status for r in grade_class(course, NB, scheduler=threads, execute=fake)] == ["graded"] * 3
    (course / "submitted" / "garbage" / NB / "timestamp.txt").write_text("handed in on time, honest")
    (course / "submitted" / "empty" / NB / "timestamp.txt").write_text("")
    again = FakeWorkers(executed, tmp_path / "second", fail={})
    rows = {r.student: r for r in grade_class(course, NB, scheduler=threads, execute=again)}
    assert rows["garbage"].status == "failed" and "timestamp.txt holds no time nbgrader can read ('handed in on " \
        "time, honest')" in rows["garbage"].note, rows["garbage"]
    assert not (course / "autograded" / "garbage" / NB).exists()  # the old grade is gone with its record
    assert (rows["empty"].status, rows["dated"].status) == ("graded", "skipped") and again.attempts == {"empty": 1}


@pytest.mark.parametrize("content, refused", [
    (None, False), (b"", False), (b"  \n", False), (b"2026-11-30 09:15:00.000000 UTC", False),
    (b"2026-11-30 10:15:00 +0100", False), (b"garbage", True), (b"\xff\xfe", True), (b"9" * 40, True)])
def test_a_timestamp_is_refused_only_when_it_holds_something_that_is_not_a_time(content, refused):
    said = class_run.timestamp_refusal(content)
    assert (said is not None) == refused and (said is None or "timestamp.txt holds no time" in said), said


@pytest.mark.slow  # the template fixture runs a real submission in a kernel
def test_a_run_that_cannot_start_says_why(template, tmp_path, threads):
    course, executed = class_of(template, tmp_path, ["ann"])
    with pytest.raises(ClassGradingError, match="no submission of 01_nudging for zed"):
        grade_class(course, NB, scheduler=threads, students=["zed"])
    with pytest.raises(ClassGradingError, match="nbgrader generate_assignment 02_scalar_engine"):
        grade_class(course, "02_scalar_engine", scheduler=threads)
    assert not (course / class_run.LOGS / class_run.SCRATCH).exists()  # nothing left behind
    done = subprocess.run([sys.executable, "-m", "autograder", "autograde", "02_scalar_engine", "--course", str(course)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "cannot grade:" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow  # the template fixture runs a real submission in a kernel
def test_a_grading_process_past_its_time_or_left_by_its_fork_server_says_so_as_does_a_daemon_worker(template, tmp_path,
                                                                                                     monkeypatch):
    import multiprocessing

    from autograder.grade.class_run import course_config
    from autograder.grade.submission import Snapshot

    def hanging(root: Path) -> Snapshot:
        """A scratch course whose grading never ends: reading its notebook, a named pipe, never returns."""
        shutil.copy(template[0] / "gradebook.db", root / "gradebook.db")
        shutil.copytree(template[0] / "source", root / "source")
        (root / "submitted" / "ann" / NB).mkdir(parents=True)
        os.mkfifo(root / "submitted" / "ann" / NB / f"{NB}.ipynb")
        return Snapshot(NB, b"", {}, pickle.dumps(course_config(root, "execute")), bytes(32), timeout_s=3,
                        backstop_s=3)

    snapshot = hanging(tmp_path)
    started = time.monotonic()
    reason, seconds = on_dask_worker._run_grading_process(tmp_path, snapshot, "ann")
    assert reason.startswith("the machine was too loaded to grade it: no result within 3 s") and 3 <= seconds < 60
    assert time.monotonic() - started < 60
    from multiprocessing import forkserver

    # The worker's fork server killed while a grading process waits on the pipe: named, not "nbgrader did not say".
    (tmp_path / "second").mkdir()
    waiting = replace(hanging(tmp_path / "second"), timeout_s=60, backstop_s=60)
    threading.Timer(1.0, os.kill, (forkserver._forkserver._forkserver_pid, signal.SIGKILL)).start()
    reason, _ = on_dask_worker._run_grading_process(tmp_path / "second", waiting, "ann")
    assert reason == on_dask_worker.FORK_SERVER_ENDED
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True, raising=False)
    reason, _ = on_dask_worker._run_grading_process(tmp_path, snapshot, "ann")
    assert "DASK_DISTRIBUTED__WORKER__DAEMON=False" in reason


def test_a_submissions_seconds_leave_out_the_start_of_its_workers_fork_server(monkeypatch, tmp_path):
    """On a worker's first task, starting the grading process waits while the fork server imports PRELOAD (several
    seconds): the worker's start-up, not the submission's grading time."""
    class SlowToStart:  # the grading process, as the fork server would start it: 1.5 s to start, 0.2 s to grade
        exitcode = None

        def __init__(self, target, args, daemon):
            self.graded = Path(args[0]) / "autograded" / args[2] / args[1]
            self.report = Path(args[0]) / "report.json"

        def start(self):
            time.sleep(1.5)

        def join(self, timeout=None):
            time.sleep(0.2)
            self.graded.mkdir(parents=True)
            (self.graded / f"{NB}.ipynb").write_text("{}")
            self.report.write_text(json.dumps({"success": True, "log": "", "cpu_seconds": 0.1}))
            self.exitcode = 0

    monkeypatch.setattr(on_dask_worker, "_fork_server", lambda: type("Context", (), {"Process": SlowToStart}))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    executed = execute_submission(submission.Snapshot(NB, b"", {}, b"", bytes(32), timeout_s=60), Task("ann", {}))
    assert executed.error is None and 0.2 <= executed.seconds < 1.0, executed


@pytest.mark.slow  # a fresh interpreter imports nbgrader and torch
def test_a_grading_process_forked_after_preload_computes_torch_references_without_heavy_imports():
    """What the fork server preloads covers the checks' own first uses of torch: a vector-Jacobian product imports
    sympy, an optimizer's step torch._dynamo, each about 0.5 s per submission when paid in each grading process."""
    program = (f"import importlib, sys\nfor name in {on_dask_worker.PRELOAD!r}: importlib.import_module(name)\n"
               "loaded = set(sys.modules)\nimport torch\n"
               "x = torch.ones(3, dtype=torch.float64, requires_grad=True)\n"
               "torch.autograd.grad(x * 2, x, torch.ones(3, dtype=torch.float64))\n"
               "x.grad = torch.ones(3, dtype=torch.float64)\ntorch.optim.SGD([x], lr=0.1).step()\n"
               "print(' '.join(sorted(set(sys.modules) - loaded)))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    heavy = [name for name in done.stdout.split() if name.split(".")[0] == "sympy" or name.startswith("torch._dynamo")]
    assert not heavy, heavy


@pytest.mark.slow
@requires_sandbox  # its class has an attacker, which kills nbgrader where nothing contains it
def test_a_small_class_graded_in_parallel_matches_serial_nbgrader_cell_by_cell(tmp_path):
    """The parallel path for real, on a local Dask cluster of processes, against `nbgrader autograde` itself."""
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    shutil.copytree(REPO / "source" / NB, serial / "source" / NB, ignore=shutil.ignore_patterns(".hypothesis"))
    (serial / "nbgrader_config.py").write_text(SCRATCH_COURSE_CONFIG)
    nbgrader(serial, "generate_assignment", NB)
    everyone = synthetic_class(NB, serial)
    submit(serial, {s: everyone[s] for s in ("full-marks", "attacker", "crasher", "copied-cell")})
    (serial / "submitted" / "full-marks" / NB / "timestamp.txt").write_text("2026-11-30 09:15:00.000000 UTC")
    (serial / "submitted" / "crasher" / NB / "notes.txt").write_text("an extra file nbgrader keeps")
    made = serial / SECRET_FILE  # by the release, so the copy graded in parallel draws the same cases
    assert made.is_file() and stat.S_IMODE(made.stat().st_mode) == 0o600
    shutil.copytree(serial, parallel)
    nbgrader(serial, "autograde", NB)  # a copied cell no longer stops nbgrader itself (SeparateCopiedCells)
    done = subprocess.run([sys.executable, "-m", "autograder", "autograde", NB, "--workers", "2"], cwd=parallel,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 graded" in done.stderr and f"{NB}.ipynb has the test cell test_" in done.stderr
    if cpu_measurable():  # each line gives the CPU of that submission's processes, its sandboxed kernel included
        used = re.search(r"full-marks\s+graded\s+10/10\s+[\d.]+ s\s+([\d.]+) CPU s", done.stderr)
        assert used and float(used.group(1)) > 1.0, done.stderr
    wrong = differences(gradebook_cells(serial, NB), gradebook_cells(parallel, NB))
    assert not wrong, wrong
    scores = {}
    for (student, _, _, kind), value in gradebook_cells(parallel, NB).items():
        scores[student] = scores.get(student, 0) + (value[0] or 0 if kind == "grade" else 0)
    assert scores == {"full-marks": 10, "attacker": 0, "crasher": 0, "copied-cell": 10}
    assert (parallel / "autograded" / "crasher" / NB / "notes.txt").is_file()
    nbgrader(parallel, "generate_feedback", NB)  # nbgrader's own tools work on what the parallel run stored
    assert (parallel / "feedback" / "full-marks" / NB / f"{NB}.html").is_file()
    assert "tampered" not in (parallel / "gradebook.db").read_bytes().decode("latin-1")
    again = subprocess.run([sys.executable, "-m", "autograder", "autograde", NB, "--workers", "1"], cwd=parallel,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "4 skipped" in again.stderr
    assert (parallel / class_run.LOGS / NB / "attacker.log").is_file()


KILL_POINTS = 12  # each costs a killed run and its repairing rerun, about 10 s


@pytest.mark.slow  # the template fixture runs a real submission in a kernel
def test_a_run_killed_anywhere_while_recording_is_repaired_by_the_next_to_a_clean_runs_gradebook(template, tmp_path):
    """SIGKILL at each of up to KILL_POINTS points spread evenly over the recording window (of its every file written
    or removed and every gradebook write, tests/grade/kill_recording.py; the first and the last included); a rerun
    must end where a run never killed ends, cell by cell."""
    course, executed = class_of(template, tmp_path, ["ann", "bob"])
    submit(course, {"broken": b"{ not json"})  # its record, a failure scoring 0, is written first
    for student in ("ann", "bob", "broken"):  # nbgrader stores the submission's time: the same in every copy
        (course / "submitted" / student / NB / "timestamp.txt").write_text("2026-11-30 09:15:00.000000 UTC")
    (tmp_path / "executed.pkl").write_bytes(pickle.dumps(executed))
    (tmp_path / "runs").mkdir()
    (tmp_path / "tmp").mkdir()
    done = subprocess.run(["unshare", "--net", sys.executable, str(Path(__file__).with_name("kill_recording.py")),
                           str(course), str(tmp_path / "executed.pkl"), str(tmp_path / "runs"), str(KILL_POINTS)],
                          capture_output=True, text=True, timeout=900, env={**os.environ, "TMPDIR": tmp_path / "tmp"})
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "runs" / "report.json").read_text())
    clean = report.pop("None")
    assert clean["first"] > 20 and len(clean["notebooks"]) == 2, clean  # a window with many points, two records
    assert '["broken", "", "", "submission"]' in clean["cells"]  # the failed one has its row too
    assert {value[0] for key, value in clean["cells"].items() if "grade" in key} >= {"2.0"}, clean["cells"]
    assert len(report) == min(KILL_POINTS, clean["first"])
    assert all(run["first"] == -signal.SIGKILL for run in report.values())
    for point, run in report.items():
        assert run["cells"] == clean["cells"], (point, differences(clean["cells"], run["cells"]))
        assert run["notebooks"] == clean["notebooks"], point
        assert not run["left"], (point, run["left"])  # no marker, no scratch folder
    said = [run["rerun said"] for run in report.values()]
    assert sum("repaired: " in text for text in said) >= len(said) // 2, said  # most points fall inside a record
    assert all("Traceback" not in text for text in said)
    assert not list((tmp_path / "tmp").iterdir()), "temporary files left behind by killed runs"


def isolated(*command, timeout: float = 600, **options) -> subprocess.CompletedProcess:
    """Run a command in a network namespace of its own with its loopback up: the ports it opens or tries are its own."""
    return subprocess.run(["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "isolated",
                           *map(str, command)], capture_output=True, text=True, timeout=timeout, **options)


def faulty_run(mode: str, course: Path, executed, tmp_path: Path, timeout_s: float) -> dict:
    """tests/grade/faulty_workers.py in ``mode``, with a temporary folder of its own (tmp_path/tmp); its report."""
    (tmp_path / "executed.pkl").write_bytes(pickle.dumps(executed))
    (tmp_path / "out").mkdir()
    (tmp_path / "tmp").mkdir()
    done = isolated(sys.executable, Path(__file__).with_name("faulty_workers.py"), mode, course,
                    tmp_path / "executed.pkl", tmp_path / "out", timeout_s, env={**os.environ, "TMPDIR": tmp_path / "tmp"})
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((tmp_path / "out" / "report.json").read_text())


def gradebook_export(course: Path) -> dict[str, str]:
    """Student -> score, as ``nbgrader export`` writes them."""
    import csv

    nbgrader(course, "export")
    with open(course / "grades.csv") as table:
        return {line["student_id"]: line["score"] for line in csv.DictReader(table)}


@pytest.mark.slow  # the template fixture runs a real submission in a kernel; a local cluster of processes
def test_a_frozen_worker_an_unpicklable_error_a_hidden_folder_and_a_broken_notebook_each_end_with_a_row(template,
                                                                                                     tmp_path):
    """One run on the run's own local cluster of one worker: a worker stopped by SIGSTOP is given up on at the
    deadline and its submission graded on the replacement, and what waited behind it (cancelled by Dask with the
    snapshot that only worker held) is graded there as its first attempt; an exception Dask cannot send back fails
    its submission instead of hanging the run; a student folder whose name starts with a dot is graded; an
    unreadable notebook scores 0 in the gradebook."""
    course, executed = class_of(template, tmp_path, ["ann", "frozen", "does-not-pickle", ".hidden", "gus", "hal"])
    submit(course, {"broken": b"{ not json"})
    try:
        # A CPU budget whose wall-clock backstop, the deadline a frozen worker runs into, is 25 s (the helper leaves
        # out the time sandboxes let learner code sleep).
        report = faulty_run("local", course, executed, tmp_path, timeout_s=25 / submission.BACKSTOP_FACTOR)
    finally:
        frozen = tmp_path / "out" / "frozen.pid"
        if frozen.exists():  # the helper's cluster should have ended it already
            subprocess.run(["kill", "-KILL", frozen.read_text()], capture_output=True)
    rows, said = report["rows"], report["said"]
    assert rows["ann"][:2] == rows[".hidden"][:2] == ["graded", 10.0], rows
    assert rows["frozen"][0] == "graded" and rows["frozen"][3] == 2, rows["frozen"]
    assert rows["gus"] == rows["hal"] == ["graded", 10.0, "", 1], rows
    assert re.search(r"frozen: no result within 25 s from its Dask worker tls://\S+ \(frozen, cut off, or the machine "
                     r"too loaded\); stopped: grade it again \(not the submission's fault\)", said), said
    assert rows["does-not-pickle"][0] == "failed" and rows["does-not-pickle"][3] == 2, rows["does-not-pickle"]
    # its second attempt may meet the frozen worker before the deadline gives up on it: the first reason is printed
    assert "grading raised DoesNotPickle: raised while removing the scratch folder" in said, said
    assert rows["broken"][0] == "failed" and "not a readable notebook" in rows["broken"][2], rows["broken"]
    assert report["seconds"] < 150, report["seconds"]  # about 10 s to start, the 25 s deadline, the rest quick
    assert gradebook_export(course) == {"ann": "10.0", ".hidden": "10.0", "frozen": "10.0", "does-not-pickle": "0.0",
                                        "broken": "0.0", "gus": "10.0", "hal": "10.0"}
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gradebook:
        comments = [c.auto_comment for n in gradebook.find_submission(NB, "broken").notebooks for c in n.comments]
    assert comments[0].startswith("Not graded: 01_nudging.ipynb is not a readable notebook"), comments
    table = (course / class_run.LOGS / f"{NB}.tsv").read_text().splitlines()
    assert table[0].split("\t")[0] == "run" and len({line.split("\t")[0] for line in table[1:]}) == 1
    assert sorted(line.split("\t")[2] for line in table[1:]) == sorted(rows)
    assert not list((tmp_path / "tmp").iterdir()), "temporary files left behind"
    assert not (course / class_run.LOGS / class_run.SCRATCH).exists()


@pytest.mark.slow  # the template fixture runs a real submission in a kernel; a scheduler and a worker of processes
def test_a_run_whose_cluster_goes_away_ends_with_a_line_for_every_submission_and_its_log(template, tmp_path):
    course, executed = class_of(template, tmp_path, ["ann", "bob-ends-cluster", "cat", "dan"])
    report = faulty_run("lost", course, executed, tmp_path, timeout_s=120)
    assert "has had no worker for 3 s" in report["refused"] and report["refused after"] < 20, report
    rows = report["rows"]
    assert rows["ann"][:2] == ["graded", 10.0], rows
    for student in ("bob-ends-cluster", "cat", "dan"):
        assert rows[student][0] == "failed" and "the Dask cluster was lost" in rows[student][2], rows[student]
    assert "1 graded, 3 failed" in report["said"] and report["seconds"] < 120, report
    table = (course / class_run.LOGS / f"{NB}.tsv").read_text()
    assert all(f"\t{student}\t" in table for student in rows)


@pytest.mark.slow  # each case starts the command, which imports nbgrader
def test_every_run_that_cannot_start_exits_2_within_seconds_with_one_reason(template, tmp_path):
    import sqlite3

    from autograder.grade.journal import CourseLock

    course, _ = class_of(template, tmp_path, ["ann"])
    gradebook = course / "gradebook.db"

    def refused(*args) -> str:
        started = time.monotonic()
        done = isolated(sys.executable, "-m", "autograder", "autograde", NB, "--course", course, *args, timeout=120)
        reasons = [line for line in done.stderr.splitlines() if line.startswith("cannot grade: ")]
        assert done.returncode == 2 and len(reasons) == 1 and "Traceback" not in done.stderr, done.stderr
        assert time.monotonic() - started < 40, done.stderr  # the import of nbgrader, and at most 10 s of waiting
        return reasons[0]

    assert "no Dask scheduler answers at tcp://127.0.0.1:8786" in refused("--scheduler", "tcp://127.0.0.1:8786")
    assert "--workers must be 1 or more, not -1" in refused("--workers", "-1")
    with CourseLock(course / class_run.LOGS / class_run.LOCK):
        assert f"another class run is grading this course (pid {os.getpid()}" in refused()
    writer = sqlite3.connect(gradebook, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        assert "database is locked" in refused()
    finally:
        writer.close()
    shutil.copy(gradebook, tmp_path / "good.db")
    gradebook.write_bytes(b"not an SQLite file " * 100)
    assert "file is not a database" in refused()


def test_a_killed_runs_scratch_goes_with_the_temporary_folder_it_names_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    ours, stranger = tmp_path / "tmp" / f"{class_run.TEMPORARY_PREFIX}abc", tmp_path / "tmp" / "someone-elses"
    for folder in (ours, stranger):
        (folder / "inside").mkdir(parents=True)
    scratch = tmp_path / class_run.SCRATCH
    for run, named in (("run1", ours), ("run2", stranger)):
        (scratch / run).mkdir(parents=True)
        (scratch / run / class_run.TEMPORARY).write_text(str(named))
    class_run.remove_scratch(scratch)
    assert not scratch.exists() and not ours.exists() and (stranger / "inside").is_dir()


def test_widgets_wait_for_nobody_while_nbgrader_runs_the_notebook(monkeypatch, capsys):
    """A learner's own call of a widget (the course's cells are skipped by tag) shows a line instead of waiting."""
    from labtools import h_explorer
    from labtools.graph import backward_stepper

    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert type(h_explorer()).__name__ == "VBox"
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert h_explorer() is None and backward_stepper(object()) is None
    said = capsys.readouterr().out
    assert "The h slider is interactive" in said and "The backward stepper is interactive" in said


def test_the_bench_report_states_the_targets_and_the_bound_serial_grading_sets(capsys):
    from autograder.tools.bench_grading import report

    figures = {"students": 2, "submissions": 4, "cpu_scope": "test", "cores": 2, "not_graded": [],
               "serial": {"a": [30.0, 40.0, [14.0, 16.0]], "b": [20.0, 25.0, [9.0, 11.0]]},
               "parallel": [36.0, 70.0], "parallel_seconds": {"a": [12.0], "b": [8.0]},
               "differences": {"a": [], "b": ["ann cell x: 1 against 0"]}, "submission_cpu": 60.0}
    report(figures)
    said = capsys.readouterr().out
    assert "parallel/serial wall time: 0.72 (target <= 0.6: MISSED)" in said
    assert "parallel CPU per student: 35.0 s (target <= 40: met)" in said and "the rest, 5.0 s" in said
    assert "agree cell by cell" in said and "1 cells differ" in said
    assert "serial grading kept 1.30 cores busy" in said and "cannot beat a ratio of 0.65" in said


@pytest.mark.slow  # the template fixture runs a real submission in a kernel
def test_the_local_cluster_talks_tls_and_refuses_a_client_without_its_credentials(template, tmp_path, monkeypatch):
    """A submission that reaches the run's scheduler (it listens on this machine) must not be able to submit tasks
    or read results: the local cluster takes only clients holding this run's ephemeral certificates."""
    from distributed import Client

    course, executed = class_of(template, tmp_path, ["ann"])
    seen = {}
    original = class_run.Dispatch.__init__

    def watched(self, client, snapshots, execute, deadline_s, *rest):
        seen["address"] = client.scheduler.address
        try:
            with Client(seen["address"], timeout=5):
                seen["stranger"] = "connected"
        except Exception as refused:  # a TLS handshake refused, or a timeout
            seen["stranger"] = type(refused).__name__
        original(self, client, snapshots, execute, deadline_s, *rest)

    monkeypatch.setattr(class_run.Dispatch, "__init__", watched)
    fake = FakeWorkers(executed, tmp_path / "attempts", fail={})
    rows = grade_class(course, NB, workers=1, execute=fake)
    assert [r.status for r in rows] == ["graded"]
    assert seen["address"].startswith("tls://") and seen["stranger"] != "connected", seen


def test_a_run_ended_at_once_by_a_second_ctrl_c_exits_130_without_a_traceback(monkeypatch, capsys):
    """Outside nbgrader, a second Ctrl-C reaches the command as KeyboardInterrupt (the record it cut short is repaired
    by the next run: test_a_second_ctrl_c_while_recording_...)."""
    from autograder.__main__ import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setenv("PATH", os.environ["PATH"])  # main puts the interpreter's folder first
    monkeypatch.setattr(class_run, "grade_class", interrupted)
    assert main(["autograde", NB]) == 130
    assert "stopped at once; a record cut short is removed by the next run" in capsys.readouterr().err


def sigint_blocked(pid: int) -> bool:
    """Whether the process ``pid`` (its main thread) blocks SIGINT."""
    mask = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigBlk:"))
    return bool(int(mask.split()[1], 16) & (1 << (signal.SIGINT - 1)))


@pytest.mark.slow  # the template fixture runs a real submission in a kernel; a local cluster of one worker process
def test_ctrl_c_while_the_local_cluster_starts_stops_the_run_once_started_and_leaves_nothing(template, tmp_path,
                                                                                            monkeypatch, capsys):
    """The cluster starts in a thread that blocks SIGINT (its workers start with it blocked, so they do not take it),
    while this thread takes Ctrl-C: nothing is sent, every submission is stopped, the cluster closed at once."""
    import distributed

    course, executed = class_of(template, tmp_path, ["ann", "bob"])
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    seen = {}

    class Interrupted(distributed.LocalCluster):
        def __init__(self, *args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the terminal, just as the cluster starts
            super().__init__(*args, **kwargs)
            seen["blocked"] = [sigint_blocked(nanny.pid) for nanny in self.workers.values()]
            seen["started"] = time.monotonic()

    monkeypatch.setattr(distributed, "LocalCluster", Interrupted)
    fake = FakeWorkers(executed, tmp_path / "attempts", fail={})
    rows = grade_class(course, NB, workers=1, execute=fake)
    assert seen["blocked"] == [True], seen  # the terminal's Ctrl-C reaches the workers too: they must not take it
    assert [(r.student, r.status) for r in rows] == [("ann", "stopped"), ("bob", "stopped")] and fake.attempts == {}
    assert time.monotonic() - seen["started"] < 15  # closing the cluster, and no grading
    assert "Stopping after the submissions being recorded" in capsys.readouterr().err
    assert not list((tmp_path / "tmp").iterdir()) and not (course / class_run.LOGS / class_run.SCRATCH).exists()


@pytest.mark.slow  # the template fixture runs a real submission in a kernel
def test_links_and_special_files_earn_nothing_leak_nothing_and_leave_the_others_graded(template, tmp_path, threads):
    """Each kind of refused submission fails with its reason on its own row, before anything reads it (the fake
    workers would give any submission sent to them full marks); the honest one is graded as usual."""
    refused = {"notebook-link": "01_nudging.ipynb is a symbolic link", "folder-link": "data is a symbolic link",
               "inside-link": "copy.ipynb is a symbolic link", "pipe": "timestamp.txt is a named pipe (FIFO)",
               "big": "big.bin holds more than 10 MiB", "many": "more than 1000 files and folders",
               "whole": "the submission folder is a symbolic link"}
    course, executed = class_of(template, tmp_path, ["ann", *refused])
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "secret.txt").write_bytes(SECRET)
    folder = {student: course / "submitted" / student / NB for student in ["ann", *refused]}
    (folder["notebook-link"] / f"{NB}.ipynb").unlink()  # a link to the source notebook: its solutions
    (folder["notebook-link"] / f"{NB}.ipynb").symlink_to(course / "source" / NB / f"{NB}.ipynb")
    (folder["folder-link"] / "data").symlink_to(tmp_path / "secret")
    (folder["inside-link"] / "copy.ipynb").symlink_to(f"{NB}.ipynb")
    os.mkfifo(folder["pipe"] / "timestamp.txt")  # nbgrader's already-graded check reads it: it must not wait
    with open(folder["big"] / "big.bin", "wb") as big:
        big.truncate(submission.MAX_FILE_BYTES + 1)
    for k in range(submission.MAX_ENTRIES):
        (folder["many"] / f"{k}.txt").write_bytes(b"")
    shutil.rmtree(folder["whole"])
    folder["whole"].symlink_to(tmp_path / "secret")
    fake = FakeWorkers(executed, tmp_path / "attempts", fail={})
    with within(120):
        rows = {r.student: r for r in grade_class(course, NB, scheduler=threads, execute=fake)}
    assert (rows["ann"].status, rows["ann"].score, rows["ann"].max_score) == ("graded", 10, 10)
    assert fake.attempts == {"ann": 1}  # nothing refused reached a worker
    for student, reason in refused.items():
        assert rows[student].status == "failed" and rows[student].score is None, rows[student]
        assert reason in rows[student].note and "\n" not in rows[student].note, rows[student]
        assert not (course / "autograded" / student).exists()
    table = (course / class_run.LOGS / f"{NB}.tsv").read_text()
    assert all(f"\t{student}\tfailed\t" in table for student in refused)
    for path in [course / "gradebook.db", *(course / class_run.LOGS).rglob("*"), *(course / "autograded").rglob("*")]:
        assert path.is_dir() or SECRET not in path.read_bytes(), path


class StandInClient:
    """What Dispatch asks of a Dask client, as a table: which worker runs which task key, which keys' grading processes
    have started (STARTED events), and a scatter that fails (no worker left to take the snapshots)."""

    status = "running"

    def __init__(self):
        self.processing_now: dict[str, list[str]] = {}
        self.started: list[str] = []
        self.removed: list[str] = []

    def processing(self):
        return self.processing_now

    def get_events(self, topic):
        return tuple((0.0, key) for key in self.started)

    def scheduler_info(self):
        return {"workers": {}}

    def run_on_scheduler(self, function, address):
        self.removed.append(address)

    def scatter(self, data, broadcast, timeout):
        raise TimeoutError("No valid workers found")


class StandInFuture:
    def __init__(self, key: str):
        self.key, self._done = key, False

    def done(self):
        return self._done


def test_a_stalled_task_blames_only_the_worker_running_it_now_and_a_workerless_cluster_ends_no_run(monkeypatch):
    """A task whose result has not arrived although it ended blames no worker (Dask fetches results in batches, so
    one frozen worker holds back the results of healthy ones: CI once lost both workers so); a task that moved
    blames the worker it is on now; dropping the last worker leaves the run going instead of raising."""
    client, clock = StandInClient(), [100.0]
    monkeypatch.setattr(class_run.time, "monotonic", lambda: clock[0])
    dispatch = class_run.Dispatch.__new__(class_run.Dispatch)
    dispatch.client, dispatch.snapshots, dispatch.deadline_s = client, {"nb": object()}, 25.0
    dispatch.scattered, dispatch.watched, dispatch.workerless_since = {"nb": None}, 0.0, None
    dispatch.seen, dispatch.started, dispatch.ended, dispatch.cluster = {}, {}, {}, None
    ended, moved, frozen = StandInFuture("ended"), StandInFuture("moved"), StandInFuture("frozen")
    client.processing_now = {"healthy": ["ended", "moved"], "stuck": ["frozen"]}
    client.started = ["ended", "moved", "frozen"]
    assert dispatch.watch([ended, moved, frozen]) == (None, [])
    clock[0] += 20
    ended._done = True  # on the healthy worker, its result waiting behind one held by the frozen worker
    client.processing_now = {"healthy": [], "stuck": ["frozen", "moved"]}
    assert dispatch.watch([ended, moved, frozen]) == (None, [])
    clock[0] += 10
    assert dispatch.watch([ended, moved, frozen]) == (None, [(moved, "stuck"), (frozen, "stuck")])
    clock[0] += 20
    assert dispatch.watch([ended]) == (None, [(ended, "")])
    dispatch._drop("stuck")
    assert client.removed == ["stuck"] and dispatch.scattered == {"nb": None}


class WorkerlessClient:
    """A client whose scheduler never gets a worker, and a Ctrl-C that arrives during its ``calls``-th wait."""

    def __init__(self, stop, calls: int | None):
        self.stop, self.calls, self.waits = stop, calls, 0

    def wait_for_workers(self, n_workers, timeout):
        self.waits += 1
        if self.waits == self.calls:
            self.stop.requested = True
        raise TimeoutError


def test_ctrl_c_ends_the_wait_for_an_external_schedulers_first_worker(monkeypatch):
    """The wait is cut into slices: Ctrl-C during one ends it after that slice (the run then sends nothing), while a
    wait nobody cuts short ends with the reason once NO_WORKERS_S has passed."""
    clock = [0.0]
    monkeypatch.setattr(class_run.time, "monotonic", lambda: clock[0])
    stop = class_run.StopRequest()
    client = WorkerlessClient(stop, calls=2)
    class_run._wait_for_a_worker(client, "tcp://10.0.0.1:8786", stop)
    assert client.waits == 2
    stop.requested = False

    def slow_wait(n_workers, timeout):
        clock[0] += timeout
        raise TimeoutError

    client.wait_for_workers = slow_wait
    with pytest.raises(ClassGradingError, match=r"has had no worker for 30 s; start some"):
        class_run._wait_for_a_worker(client, "tcp://10.0.0.1:8786", stop)
    assert clock[0] >= class_run.NO_WORKERS_S
