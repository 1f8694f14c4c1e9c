"""What a class run refuses before it grades, and how it keeps going when it drops a worker (issue 29, the class-run
attack's F1-F10): fast checks with stand-ins, no kernel and no cluster."""
import contextlib
from contextlib import closing
import io
import math
import os
import signal
import sqlite3
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from autograder.grade import class_run
from autograder.grade.class_run import ClassGradingError, grade_class, preflight
from autograder.grade.submission import Executed, Row, Task
from conftest import REPO

NB = "01_nudging"
SOURCE = REPO / "source" / NB / f"{NB}.ipynb"


def submission(root: Path, student: str, files: dict[str, bytes]) -> Path:
    folder = root / "submitted" / student / NB
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return folder


@pytest.fixture(scope="module")
def sources() -> dict:
    return {NB: nbformat.read(SOURCE, as_version=4)}


# ------------------------------------------------------------------------------------------ F2, F6, F7: preflight

@pytest.mark.parametrize("student", ["*", "[fu]*", "student[1]", "who?"])
def test_a_student_folder_named_as_a_glob_pattern_is_refused_before_anything_reads_it(tmp_path, sources, student):
    files, note = preflight(submission(tmp_path, student, {f"{NB}.ipynb": SOURCE.read_bytes()}), [], sources)
    assert files is None and "reads as a pattern matching other students" in note, note


@pytest.mark.parametrize("student", ["student1", "anne-marie o'neil", "zoë.b", "a]b", "x{1,2}"])
def test_names_without_glob_characters_are_graded(tmp_path, sources, student):
    files, note = preflight(submission(tmp_path, student, {f"{NB}.ipynb": SOURCE.read_bytes()}), [], sources)
    assert files is not None and f"{NB}.ipynb" in files, note


@pytest.mark.parametrize("student, why", [(" ann", "begins or ends with whitespace"),
                                          ("ann\t", "begins or ends with whitespace"),
                                          ("x" * 201, "too long for the files named after it"),
                                          ("ann\x1b]2;x\x07", "holds control characters (U+0007 U+001B)"),
                                          ("ann\rbob  graded 10 of 10", "holds control characters (U+000D)"),
                                          ("a\nb", "holds control characters (U+000A)"),
                                          ("ann\u202egnp.exe", "holds control characters (U+202E)"),
                                          ("ann\udcff", "holds control characters (U+DCFF)")])
def test_a_student_folder_name_nbgrader_would_change_or_no_file_can_carry_is_refused(tmp_path, sources, student, why):
    """nbgrader strips a student id (the submission was then sent, retried and failed with a worker's path); a name
    past MAX_STUDENT_BYTES crashed the run when its log file was written (a class-run attack's G8, G10); a control
    character moved the terminal's cursor or forged whole rows where the name was printed (red team 11)."""
    files, note = preflight(submission(tmp_path, student, {f"{NB}.ipynb": SOURCE.read_bytes()}), [], sources)
    assert files is None and why in note, note
    line = Row(student, "failed", note=note, assignment=NB).line()
    assert line.isprintable() and line.startswith(f"{NB:<22} {student if student.isprintable() else repr(student)} ")
    assert preflight(submission(tmp_path, "y" * 200, {f"{NB}.ipynb": SOURCE.read_bytes()}), [], sources)[0]


def test_a_row_for_a_folder_name_that_is_not_utf8_is_printed_and_logged_escaped(tmp_path):
    """The run's table took the name as it is, and a name that is not UTF-8 failed the whole run (red team 12)."""
    out = io.StringIO()
    class_run.RunLog(tmp_path, NB, out, "run-1").add(Row("ann\udcff", "failed", note="refused"))
    assert "'ann\\udcff'" in out.getvalue()
    assert "ann\\udcff\tfailed" in (tmp_path / class_run.LOGS / f"{NB}.tsv").read_text()


def test_a_student_folder_that_is_a_link_is_refused_and_its_target_is_graded(tmp_path, sources):
    real = submission(tmp_path, "full-marks", {f"{NB}.ipynb": SOURCE.read_bytes()})
    (tmp_path / "submitted" / "student-link").symlink_to(real.parent)
    files, note = preflight(tmp_path / "submitted" / "student-link" / NB, [], sources)
    assert files is None and note == "the student folder student-link is a symbolic link; copy the submission into " \
                                      "a real folder"
    assert preflight(real, [], sources)[0] is not None


@pytest.mark.parametrize("files", [{}, {"my copy.ipynb": SOURCE.read_bytes()}, {"notes.txt": b"hello"}])
def test_a_submission_without_the_assignments_notebook_is_refused_unsent(tmp_path, sources, files):
    found, note = preflight(submission(tmp_path, "someone", files), [], sources)
    assert found is None and note == f"the submission holds no {NB}.ipynb"


def test_a_submission_holding_one_of_two_notebooks_is_graded(tmp_path, sources):
    """nbgrader scores the one missing (0); only a submission with none of them is refused."""
    two = {**sources, "extra": sources[NB]}
    found, note = preflight(submission(tmp_path, "someone", {f"{NB}.ipynb": SOURCE.read_bytes()}), [], two)
    assert found is not None, note
    assert preflight(tmp_path / "submitted" / "someone" / NB, [], {"extra": sources[NB]}) == \
        (None, "the submission holds no extra.ipynb")


class StandInCourse:
    """What _grade asks of a Course, with two students graded before: records every call that names a student."""

    def __init__(self, root: Path, sources: dict):
        self.root, self.sources, self.calls = root, sources, []

    ignored: list = []

    def check_assignment(self, assignment):
        pass

    def submitted(self, assignment):
        return {p.name: p / assignment for p in sorted((self.root / "submitted").iterdir())}

    def source_notebooks(self, assignment):
        return self.sources

    def already_graded(self, assignment, student):
        self.calls.append(("already_graded", student))
        return True

    def autograded(self, assignment, student):
        return self.root / "autograded" / student / assignment

    def forget(self, assignment, student):
        self.calls.append(("forget", student))

    def record_failure(self, assignment, student, reason):
        self.calls.append(("record_failure", student))

    def wait_writable(self):
        pass


def test_glob_named_folders_get_a_failed_row_and_a_gradebook_entry_and_never_reach_nbgrader(tmp_path, sources,
                                                                                         monkeypatch):
    """F2: nbgrader (record, already_graded) never sees a pattern; the refused folders get their gradebook entry
    through the gradebook's own calls, which take the id literally."""
    for student in ("full-marks", "untouched", "*", "[fu]*"):
        submission(tmp_path, student, {f"{NB}.ipynb": SOURCE.read_bytes()})
    course = StandInCourse(tmp_path, sources)
    sent = []
    monkeypatch.setattr(class_run, "_run_tasks", lambda course, tasks, *rest: sent.extend(tasks) or [])
    run = class_run.Run([], True, None, None, 60.0, None, open(os.devnull, "w"))
    rows = {row.student: row for row in class_run._grade(course, [NB], run, class_run.StopRequest())}
    assert [task.student for task in sent] == ["full-marks", "untouched"]
    assert {s: rows[s].status for s in ("*", "[fu]*")} == {"*": "failed", "[fu]*": "failed"}
    assert all(call[0] in ("forget", "record_failure") for call in course.calls), course.calls
    assert sorted(call[1] for call in course.calls) == ["*", "*", "[fu]*", "[fu]*"]
    table = (tmp_path / class_run.LOGS / f"{NB}.tsv").read_text()
    assert "\t*\tfailed\t" in table and "\t[fu]*\tfailed\t" in table


def test_a_student_asked_for_twice_is_graded_once(tmp_path, sources, monkeypatch):
    """`--student a --student a` graded a twice, with two rows (a class-run attack's G6)."""
    submission(tmp_path, "full-marks", {f"{NB}.ipynb": SOURCE.read_bytes()})
    sent = []
    monkeypatch.setattr(class_run, "_run_tasks", lambda course, tasks, *rest: sent.extend(tasks) or [])
    run = class_run.Run(["full-marks", "full-marks"], True, None, None, 60.0, None, open(os.devnull, "w"))
    class_run._grade(StandInCourse(tmp_path, sources), [NB], run, class_run.StopRequest())
    assert [task.student for task in sent] == ["full-marks"]


# ------------------------------------------------------------------------------------------ F1: a dropped worker

class StandInClient:
    """What Dispatch asks of a Dask client: which worker runs which key, the STARTED events logged so far, the
    scheduler's table of workers (address -> name)."""

    status = "running"

    def __init__(self):
        self.processing_now: dict[str, list[str]] = {}
        self.events: list[tuple[float, str]] = []
        self.removed: list[str] = []
        self.names = {"tls://stuck": "0", "tls://healthy": "1"}

    def processing(self):
        return self.processing_now

    def get_events(self, topic):
        assert topic == class_run.STARTED
        return tuple(self.events)

    def scheduler_info(self):
        return {"workers": {address: {"name": name} for address, name in self.names.items()}}

    def run_on_scheduler(self, function, address):
        self.removed.append(address)

    def scatter(self, data, broadcast, timeout):
        raise TimeoutError("No valid workers found")


class StandInCluster:
    """A LocalCluster's worker specs by name, and the sizes it was scaled to."""

    def __init__(self):
        self.worker_spec, self.scaled = {"0": {}, "1": {}}, []

    def scale(self, n):
        self.scaled.append(n)


class StandInFuture:
    def __init__(self, key: str):
        self.key = key

    def done(self):
        return False


def dispatch_on(client, clock, monkeypatch, cluster=None) -> class_run.Dispatch:
    monkeypatch.setattr(class_run.time, "monotonic", lambda: clock[0])
    dispatch = class_run.Dispatch.__new__(class_run.Dispatch)
    dispatch.client, dispatch.snapshots, dispatch.deadline_s, dispatch.cluster = client, {"nb": object()}, 25.0, cluster
    dispatch.scattered, dispatch.watched, dispatch.workerless_since = {"nb": None}, 0.0, None
    dispatch.seen, dispatch.started, dispatch.ended = {}, {}, {}
    return dispatch


def test_a_tasks_deadline_starts_when_its_grading_process_does_and_a_silent_one_gets_the_start_allowance(monkeypatch):
    """A task whose worker spends long starting its fork server (or queues it) is not given up on at its deadline
    from being listed; once its grading process has started, the deadline counts from then. A worker that never
    says it started (frozen before) is still given up on, START_S later."""
    client, clock = StandInClient(), [100.0]
    dispatch = dispatch_on(client, clock, monkeypatch)
    slow, silent = StandInFuture("slow"), StandInFuture("silent")
    client.processing_now = {"tls://healthy": ["slow"], "tls://stuck": ["silent"]}
    assert dispatch.watch([slow, silent]) == (None, [])
    clock[0] += 60  # the fork server imported PRELOAD for a minute; then the grading process started
    client.events = [(0.0, "slow")]
    assert dispatch.watch([slow, silent]) == (None, [])
    clock[0] += 20
    assert dispatch.watch([slow, silent]) == (None, [])
    clock[0] += 10  # 30 s after the start it was told of
    assert dispatch.watch([slow, silent]) == (None, [(slow, "tls://healthy")])
    clock[0] = 100.0 + 25 + class_run.START_S + 1
    assert (silent, "tls://stuck") in dispatch.watch([silent])[1]
    said = class_run._stalled(Task("silent", {}), "tls://stuck", 25.0, started=False).error
    assert said.startswith(f"no grading process started and no result within {25 + class_run.START_S} s from its "
                           "Dask worker tls://stuck"), said


def test_a_worker_dropped_from_the_runs_own_cluster_is_replaced_and_one_elsewhere_is_not(monkeypatch):
    client, cluster = StandInClient(), StandInCluster()
    dispatch_on(client, [0.0], monkeypatch, cluster)._drop("tls://stuck")
    assert client.removed == ["tls://stuck"] and cluster.scaled == [2]
    assert sorted(cluster.worker_spec) == ["1", "replacing-0"]  # under its old name, Dask would start nothing
    elsewhere = StandInClient()
    dispatch_on(elsewhere, [0.0], monkeypatch, None)._drop("tls://stuck")
    assert elsewhere.removed == ["tls://stuck"]


def test_a_stalled_tasks_worker_is_removed_before_the_task_is_cancelled(monkeypatch):
    """Cancelling first freed the frozen worker's slot, so the scheduler gave it the next submission, which the
    removal then killed (a class-run attack's G1: a full-marks student recorded failed, never having run)."""
    client, order = StandInClient(), []
    client.run_on_scheduler = lambda function, address: order.append(("removed", address))

    class Stalled(StandInFuture):
        def cancel(self):
            order.append(("cancelled", self.key))

    dispatch_on(client, [0.0], monkeypatch)._give_up(Stalled("frozen"), "tls://stuck")
    assert order == [("removed", "tls://stuck"), ("cancelled", "frozen")]


class Resubmitting(StandInClient):
    """A client whose tasks end as scripted per student, in turn: Dask's KilledWorker, or an Executed. A task whose
    student is in ``began`` has its STARTED event logged when it is sent."""

    def __init__(self, script: dict[str, list], began: set[str]):
        super().__init__()
        self.script, self.began, self.sent = script, began, []

    def submit(self, function, execute, snapshot, task, key, **where):
        self.sent.append((task.student, task.attempt, where.get("workers")))
        if task.student in self.began:
            self.events.append((0.0, key))
        return StandInFuture(key), self.script[task.student].pop(0)


class Arrivals:
    """as_completed's stand-in: each future's scripted result arrives as soon as it is sent."""

    def __init__(self):
        self.waiting = []

    def add(self, sent):
        self.waiting.append(sent)

    def next_batch(self, block):
        batch, self.waiting = self.waiting, []
        return batch


def test_a_task_whose_worker_died_before_it_began_is_sent_again_as_the_same_attempt(monkeypatch):
    """One worker, frozen with a running and b queued, then its replacement frozen too: the scheduler removed each
    after its worker-ttl and, allowed no failures, failed b both times, so b was recorded failed without ever
    having been graded (issue 29, G1). Only a task whose grading process started spends an attempt so."""
    from distributed import KilledWorker

    def killed():
        return KilledWorker("key", SimpleNamespace(address="tls://stuck"), allowed_failures=0)

    def graded(student):
        return Executed(student, {NB: "{}"}, "", 1.0, "tls://healthy")

    client = Resubmitting({"a": [killed(), graded("a")], "b": [killed(), killed(), graded("b")]}, began={"a"})
    dispatch = dispatch_on(client, [0.0], monkeypatch)
    monkeypatch.setattr(class_run.Dispatch, "submit", lambda self, task: submitted(self, task))

    def submitted(self, task):  # Dispatch.submit's bookkeeping, on the stand-ins
        self.first_sent.setdefault((task.assignment, task.student), class_run.time.monotonic())
        self.count += 1
        future, result = client.submit(None, None, None, task, key=f"k{self.count}",
                                       **({"workers": [task.avoid]} if task.avoid else {}))
        self.arrived.add((future, result))
        return future

    dispatch.arrived, dispatch.name, dispatch.count = Arrivals(), "grade", 0
    dispatch.first_sent, dispatch.ended_by_dask = {}, set()
    stop = class_run.StopRequest.__new__(class_run.StopRequest)
    stop.requested = False
    said = [(task.student, task.attempt, what) for task, _, what in
            dispatch.outcomes([Task("a", {}, assignment=NB), Task("b", {}, assignment=NB)], stop)]
    assert said == [("a", 1, "retrying"), ("a", 2, "done"), ("b", 1, "done")], said
    assert [(student, attempt) for student, attempt, _ in client.sent] == [("a", 1), ("b", 1), ("a", 2), ("b", 1),
                                                                          ("b", 1)], client.sent


def test_a_task_sent_again_so_spends_its_attempt_once_its_deadline_and_start_allowance_have_passed(monkeypatch):
    """Workers that keep dying before a task begins do not keep it waiting for ever."""
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError

    clock = [0.0]
    dispatch = dispatch_on(StandInClient(), clock, monkeypatch)
    dispatch.first_sent, dispatch.ended_by_dask = {(NB, "b"): 0.0}, {"k1"}
    task = Task("b", {}, assignment=NB)
    assert dispatch._never_began(StandInFuture("k1"), task)
    assert not dispatch._never_began(StandInFuture("k2"), task)  # it failed some other way: an attempt
    clock[0] = dispatch.deadline_s + class_run.START_S + 1
    assert not dispatch._never_began(StandInFuture("k1"), task)
    assert class_run._ended_by_dask(KilledWorker("k1", "tls://stuck", 0))
    assert class_run._ended_by_dask(FutureCancelledError("k1", reason="already forgotten"))
    assert not class_run._ended_by_dask(ValueError()) and not class_run._ended_by_dask(Executed("b", {}, "", 1.0, ""))


# ------------------------------------------------------------------------------------------ F10, F4, F3, F9: refusals

def test_a_gradebook_another_program_is_writing_is_refused_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(class_run, "WRITE_WAIT_S", 0.2)
    gradebook = tmp_path / "gradebook.db"
    with sqlite3.connect(gradebook) as made:
        made.execute("CREATE TABLE student (id TEXT)")
    reader = sqlite3.connect(gradebook, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT * FROM student").fetchall()  # a read transaction does not stop the run
    class_run.check_writable(gradebook)
    reader.close()
    writer = sqlite3.connect(gradebook, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    try:
        with pytest.raises(ClassGradingError, match="database is locked.*another program is writing it"):
            class_run.check_writable(gradebook)
    finally:
        writer.close()
    assert time.monotonic() - started < 5
    class_run.check_writable(gradebook)  # and once it has finished, the run may go


@pytest.mark.parametrize("timeout_s", [math.nan, math.inf, -math.inf, 0.0, -1.0, 1e10])  # 1e10 overflowed a wait
def test_a_timeout_that_is_not_a_positive_finite_number_is_refused_before_anything_is_made(tmp_path, timeout_s):
    with pytest.raises(ClassGradingError, match="--timeout must be a positive number of seconds"):
        grade_class(tmp_path, NB, timeout_s=timeout_s)
    assert not any(tmp_path.iterdir())


def test_a_tmpdir_too_long_for_the_kernels_sockets_is_refused_with_the_fix(tmp_path, monkeypatch):
    assignment = "03_backward_functions"
    room = class_run.SOCKET_PATH_MAX - class_run.SOCKET_PATH_OVERHEAD - len(assignment)
    monkeypatch.setattr(tempfile, "tempdir", "/" + "t" * (room - 1))  # exactly as long as fits
    class_run._check_socket_room([NB, assignment])
    monkeypatch.setattr(tempfile, "tempdir", "/" + "t" * room)
    with pytest.raises(ClassGradingError, match=f"set TMPDIR to a folder of at most {room} bytes"):
        grade_class(tmp_path, [NB, assignment], timeout_s=60)
    assert not any(tmp_path.iterdir())
    # A scheduler elsewhere: its workers' temporary folders are theirs, so this TMPDIR is not the one that counts.
    with pytest.raises(ClassGradingError, match="is not a course folder"):
        grade_class(tmp_path, [NB, assignment], scheduler="tcp://127.0.0.1:8786", timeout_s=60)


def test_a_folder_that_is_not_a_course_is_refused_and_nothing_is_made_in_it(tmp_path):
    with pytest.raises(ClassGradingError, match="is not a course folder"):
        grade_class(tmp_path / "nowhere", NB)
    assert not (tmp_path / "nowhere").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ClassGradingError, match="is not a course folder"):
        grade_class(tmp_path / "empty", NB)
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    with pytest.raises(ClassGradingError, match="gradebook.db is missing"):
        grade_class(course, NB)
    assert sorted(p.name for p in course.iterdir()) == ["nbgrader_config.py"]
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == []


# ------------------------------------------------------------------------------------------ F8

def test_ctrl_c_while_the_command_starts_exits_130_without_a_traceback(monkeypatch, capsys):
    from autograder.__main__ import main
    from autograder.trust import sandbox

    def interrupted():
        raise KeyboardInterrupt  # as a Ctrl-C during the imports that refusal() makes

    monkeypatch.setenv("PATH", os.environ["PATH"])  # main puts the interpreter's folder first
    monkeypatch.setattr(sandbox, "refusal", interrupted)
    assert main(["autograde", NB]) == 130
    said = capsys.readouterr().err
    assert "stopped at once" in said and "Traceback" not in said



# ------------------------------------------------------------------------------------------ G5: a replacement's folder

def test_every_worker_of_the_local_cluster_a_replacement_too_keeps_its_folder_in_the_runs_temporary_folder(
        tmp_path, monkeypatch):
    """The temporary-directory setting covered only the cluster's start: a worker started later by scale() (one
    replacing a dropped worker) made its dask-scratch-space in $TMPDIR, left there (a class-run attack's G5)."""
    import distributed

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    made, real = [], distributed.LocalCluster

    def scheduler_only(**options):  # the cluster as the run asks for it, without starting its workers
        made.append(real(**{**options, "n_workers": 0}))
        return made[-1]

    monkeypatch.setattr(distributed, "LocalCluster", scheduler_only)
    course = type("Course", (), {"scratch": tmp_path / "scratch"})()
    course.scratch.mkdir()
    run = class_run.Run([], False, 1, None, 60.0, None, open(os.devnull, "w"))
    with class_run._client(course, run, class_run.StopRequest()):
        temporary = Path((course.scratch / class_run.TEMPORARY).read_text())
        later = made[0].new_worker_spec()  # what scale() starts
        (spec,) = later.values()
        assert Path(spec["options"]["local_directory"]).is_relative_to(temporary), spec
    assert not temporary.exists()


# ------------------------------------------------------------------------------------------ G9: every stop signal

class UngradedCourse(StandInCourse):
    def already_graded(self, assignment, student):
        return False


def stand_in_run(tmp_path, sources, monkeypatch, record, signal_before: dict[str, int]):
    """Three students through _grade with the cluster and nbgrader replaced: ``record`` stands in for _record, and
    the signal ``signal_before[student]`` arrives just before that student's result does. Returns the rows, the
    StopRequest and what the run printed."""
    for student in ("ann", "bob", "cat"):
        submission(tmp_path, student, {f"{NB}.ipynb": SOURCE.read_bytes()})

    def outcomes(course, client, tasks, run, stop):  # as Dispatch.outcomes: nothing more is sent once asked to stop
        for task in tasks:
            if task.student in signal_before:
                os.kill(os.getpid(), signal_before[task.student])
            yield task, None, "stopped" if stop.requested else "done"

    monkeypatch.setattr(class_run, "_client", lambda *args: contextlib.nullcontext())
    monkeypatch.setattr(class_run, "_outcomes", outcomes)
    monkeypatch.setattr(class_run, "_record", record)
    printed = io.StringIO()
    run = class_run.Run([], False, None, None, 60.0, None, printed)

    def unhandled(signum, frame):
        raise AssertionError(f"the run left {signal.Signals(signum).name} to its default action: death, no summary")

    previous = {number: signal.signal(number, unhandled) for number in class_run.STOP_SIGNALS}
    try:
        with class_run.StopRequest() as stop:
            rows = class_run._grade(UngradedCourse(tmp_path, sources), [NB], run, stop)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return {row.student: row for row in rows}, stop, printed.getvalue()


def graded(course, log, task, executed, journal):
    return log.add(Row(task.student, "graded", 10.0, 10.0, attempts=1))


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_sigterm_and_sighup_stop_a_run_as_ctrl_c_does_with_a_line_for_every_submission_and_the_summary(
        tmp_path, sources, monkeypatch, number):
    """Only SIGINT was taken: SIGTERM or SIGHUP ended the run with no line, no summary, no log row (a class-run
    attack's G9)."""
    rows, stop, printed = stand_in_run(tmp_path, sources, monkeypatch, graded, {"bob": number})
    assert {s: r.status for s, r in rows.items()} == {"ann": "graded", "bob": "stopped", "cat": "stopped"}
    assert (stop.signum, stop.exit_code) == (number, 128 + number)
    assert "1 graded, 2 stopped" in printed and "Run the same command again" in printed
    table = (tmp_path / class_run.LOGS / f"{NB}.tsv").read_text().splitlines()
    assert [line.split("\t")[2:4] for line in table[1:]] == [["ann", "graded"], ["bob", "stopped"], ["cat", "stopped"]]


def test_a_second_stop_signal_outside_nbgrader_still_ends_with_every_line_and_the_summary(tmp_path, sources,
                                                                                        monkeypatch):
    """A second signal while a record is written outside nbgrader (its journal marker then stays, for the next run
    to repair) ended the run with a KeyboardInterrupt: no line for that student or any after, no summary."""
    def cut_short(course, log, task, executed, journal):
        if task.student == "bob":
            signal.raise_signal(signal.SIGHUP)  # the terminal closes: stop after this record
            signal.raise_signal(signal.SIGHUP)  # and again: at once, here
        return graded(course, log, task, executed, journal)

    rows, stop, printed = stand_in_run(tmp_path, sources, monkeypatch, cut_short, {})
    assert [(s, r.status) for s, r in rows.items()] == [("ann", "graded"), ("bob", "stopped"), ("cat", "stopped")]
    assert rows["bob"].note == class_run.CUT_SHORT and rows["cat"].note == class_run.STOPPED
    assert stop.exit_code == 128 + signal.SIGHUP and "1 graded, 2 stopped" in printed


def test_the_command_exits_with_128_plus_the_signal_that_stopped_its_run(monkeypatch, capsys):
    from autograder.__main__ import main
    from autograder.trust import sandbox

    def stopped(*args, stop, **kwargs):
        stop.requested, stop.signum = True, signal.SIGTERM
        return [Row("ann", "graded", 10, 10), Row("bob", "stopped", note=class_run.STOPPED)]

    monkeypatch.setenv("PATH", os.environ["PATH"])  # main puts the interpreter's folder first
    monkeypatch.setenv(sandbox.WITHOUT_SANDBOX_ENV, "1")  # the command sets it; this restores it after the test
    monkeypatch.setattr(class_run, "grade_class", stopped)
    assert main(["autograde", NB, "--without-sandbox"]) == 143
    monkeypatch.setattr(class_run, "grade_class", lambda *args, stop, **kwargs: [Row("ann", "graded", 10, 10)])
    assert main(["autograde", NB, "--without-sandbox"]) == 0


# ------------------------------------------------------------------------------------------ G3: a gradebook locked later

class WritingCourse(UngradedCourse):
    """A stand-in whose records write a row into a real SQLite gradebook, as nbgrader's would (5 s busy timeout
    there, 0.1 s here), and whose lock check is the real one."""

    def __init__(self, root, sources):
        super().__init__(root, sources)
        self.db_url = f"sqlite:///{root / 'gradebook.db'}"
        with closing(sqlite3.connect(root / "gradebook.db")) as made:
            made.execute("CREATE TABLE grade (student TEXT)")
        self.before_writing = lambda student: None

    wait_writable = class_run.Course.wait_writable

    def record(self, assignment, executed):
        self.before_writing(executed.student)
        try:
            with closing(sqlite3.connect(self.db_url[len("sqlite:///"):], timeout=0.1)) as gradebook, gradebook:
                gradebook.execute("INSERT INTO grade VALUES (?)", (executed.student,))
        except sqlite3.OperationalError as error:  # as nbgrader's autograde reports it
            return Row(executed.student, "failed", note=f"nbgrader could not record it: OperationalError: {error}")
        return Row(executed.student, "graded", 10.0, 10.0)

    def record_failure(self, assignment, student, reason):
        super().record_failure(assignment, student, reason)
        with closing(sqlite3.connect(self.db_url[len("sqlite:///"):], timeout=0.1)) as gradebook, gradebook:
            gradebook.execute("INSERT INTO grade VALUES (?)", (f"failed {student}",))


@pytest.mark.parametrize("when", ["before its record", "once its record began"])
def test_a_gradebook_locked_after_the_start_stops_the_run_and_leaves_the_rest_not_graded(tmp_path, sources,
                                                                                         monkeypatch, when):
    """Another program took the gradebook's write lock after the start's check: every submission was graded, then
    each record failed "database is locked", N failures and no row in nbgrader export (a class-run attack's G3).
    Now the run waits RECORD_WAIT_S for the lock, then stops: every submission not recorded is left not graded, for
    the next run, and the command exits 2 with the reason. A record the lock cut short keeps its journal marker."""
    monkeypatch.setattr(class_run, "RECORD_WAIT_S", 0.2)
    for student in ("ann", "bob", "cat"):
        submission(tmp_path, student, {f"{NB}.ipynb": SOURCE.read_bytes()})
    course = WritingCourse(tmp_path, sources)
    other_program = sqlite3.connect(tmp_path / "gradebook.db", isolation_level=None)

    def lock():
        other_program.execute("BEGIN IMMEDIATE")

    def outcomes(course, client, tasks, run, stop):
        for task in tasks:
            if task.student == "bob" and when == "before its record":
                lock()
            yield task, Executed(task.student, {NB: "{}"}, "", 0.1, "w"), "stopped" if stop.requested else "done"

    if when == "once its record began":
        course.before_writing = lambda student: lock() if student == "bob" else None
    monkeypatch.setattr(class_run, "_client", lambda *args: contextlib.nullcontext())
    monkeypatch.setattr(class_run, "_outcomes", outcomes)
    printed = io.StringIO()
    run = class_run.Run([], False, None, None, 60.0, None, printed)
    try:
        with pytest.raises(class_run.GradebookLockedError, match="database is locked.*another program is writing"):
            with class_run.StopRequest() as stop:
                class_run._grade(course, [NB], run, stop)
    finally:
        other_program.close()
    table = (tmp_path / class_run.LOGS / f"{NB}.tsv").read_text().splitlines()
    assert [line.split("\t")[2:4] for line in table[1:]] == [["ann", "graded"], ["bob", "stopped"], ["cat", "stopped"]]
    assert "1 graded, 2 stopped" in printed.getvalue()
    assert course.calls == []  # no failure recorded for anyone
    with closing(sqlite3.connect(tmp_path / "gradebook.db")) as gradebook:
        assert gradebook.execute("SELECT student FROM grade").fetchall() == [("ann",)]
    markers = class_run.Journal(tmp_path / class_run.LOGS / class_run.JOURNAL).unfinished()
    assert markers == ([] if when == "before its record" else [(NB, "bob")])


# ------------------------------------------------------------------------------------------ --timeout: CPU, not wall

def spin_with_a_child() -> None:
    """A grading process that never ends: it and a child it forks use CPU for ever (a process group of its own, as
    the real one leads: the worker kills the group)."""
    os.setsid()
    os.fork()
    while True:
        pass


def sleep_for_ever() -> None:
    os.setsid()
    while True:
        time.sleep(1)


def stand_in_grading(monkeypatch, target, started: list):
    import multiprocessing

    from autograder.grade import on_dask_worker

    class Process(multiprocessing.get_context("fork").Process):  # in place of the fork server's _grade_here
        def __init__(self, target_=None, args=(), daemon=None, **_):
            super().__init__(target=target, daemon=daemon)

        def start(self):
            super().start()
            started.append(self.pid)

    monkeypatch.setattr(on_dask_worker, "_fork_server", lambda: type("Context", (), {"Process": Process}))
    monkeypatch.setattr(on_dask_worker, "CPU_POLL_S", 0.2)
    return on_dask_worker


@pytest.mark.parametrize("target, says", [
    (spin_with_a_child, "grading used more than its 1.5 CPU seconds (nbgrader, the notebook's kernel and its checks"),
    (sleep_for_ever, "the machine was too loaded to grade it: no result within 3 s, after 0 of its 1.5 CPU seconds; "
                     "grade it again (not the submission's fault)")])
def test_a_submissions_limit_is_its_grading_trees_cpu_time_and_the_wall_clock_only_blames_the_machine(
        tmp_path, monkeypatch, target, says):
    """--timeout was a wall-clock limit that failed the submission, against the rule that load decides no verdict.
    A tree that spends its CPU budget (a child's CPU counted) fails with that reason; one that uses none runs into
    the wall-clock backstop only, which names the machine, not the submission. Either way its group is killed."""
    from autograder.grade.submission import Snapshot

    started = []
    on_dask_worker = stand_in_grading(monkeypatch, target, started)
    snapshot = Snapshot(NB, b"", {}, b"", bytes(32), timeout_s=1.5, backstop_s=3.0 if target is sleep_for_ever else 600)
    reason, _ = on_dask_worker._run_grading_process(tmp_path, snapshot, "ann")
    assert reason.startswith(says), reason
    for _ in range(100):  # the killed child is reaped by init, a moment later
        try:
            os.killpg(started[0], 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the grading process's group outlived it")


# ------------------------------------------------------------------------------------------ G4: nothing outlives a run

def start_a_session_of_its_own() -> int:
    """What a grading process is to its worker: a process in a session of its own, that the worker's end does not
    end. Runs on a Dask worker; its PID."""
    import subprocess

    return subprocess.Popen(["sleep", "600"], start_new_session=True).pid


@pytest.mark.slow  # a local cluster of one worker process
def test_nothing_a_local_clusters_workers_started_outlives_the_run(tmp_path, monkeypatch):
    """After Ctrl-C a fork server outlived the command, and a grading process wrote its report into the folder the
    run had removed, a traceback after the summary (a class-run attack's G4)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    course = type("Course", (), {"scratch": tmp_path / "scratch"})()
    course.scratch.mkdir()
    run = class_run.Run([], False, 1, None, 60.0, None, open(os.devnull, "w"))
    with class_run._client(course, run, class_run.StopRequest()) as client:
        pid = client.submit(start_a_session_of_its_own, pure=False).result()
        born = class_run._start_time(pid)
        assert born is not None
    assert class_run._start_time(pid) != born, "a process a worker started outlived the run"
    assert not list((tmp_path / "tmp").iterdir())


HANGUP = """import os, pty, sys, time
pid, terminal = pty.fork()
if pid == 0:  # the run, its output on the terminal
    from autograder.grade.class_run import StopRequest
    try:
        with StopRequest() as stop:
            print("recording", flush=True)
            while not stop.requested:  # "recording a submission" until the terminal closes
                time.sleep(0.05)
            print("a line the run prints after", flush=True)
            print("summary", file=sys.stderr, flush=True)
        os.write(int(sys.argv[1]), f"stopped by {stop.signum}".encode())
    except BaseException as error:
        os.write(int(sys.argv[1]), f"ended by {error!r}".encode())
    os._exit(0)
os.read(terminal, 100)
os.close(terminal)  # the terminal closes: its session gets SIGHUP
os.waitpid(pid, 0)
"""


def test_a_run_whose_terminal_closes_stops_cleanly_instead_of_failing_at_its_next_line():
    """Red team 6, F1: after the hangup, every print to the terminal raised OSError (EIO) wherever the run was."""
    import signal
    import subprocess
    import sys

    read, write = os.pipe()
    subprocess.run([sys.executable, "-c", HANGUP, str(write)], pass_fds=[write], timeout=60, check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    os.close(write)
    with os.fdopen(read) as said:
        assert said.read() == f"stopped by {int(signal.SIGHUP)}"
