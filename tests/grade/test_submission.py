"""What a class run decides before and after a submission is graded, without Dask or nbgrader runs: which files a
submission carries to its worker (``read_tree`` with nbgrader's ignore patterns, and what it refuses: links, special
files, too much), whether it can be graded at all (``preflight``), the reason given when nbgrader fails
(``nbgrader_reason``) and the log line (``Row.line``).
"""
import os
import shutil
import socket

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from autograder.course import configure
from autograder.grade import submission
from autograder.grade.class_run import preflight
from autograder.grade.submission import Row, UnsafeSubmissionError, nbgrader_reason, read_file, read_tree
from conftest import SECRET, within

NB = "01_nudging"


def course_ignored() -> list[str]:
    """The ignore patterns a class run uses (Course.ignored): nbgrader's defaults and the course's own."""
    config = Config()
    configure(config)
    return list(config.CourseDirectory.ignore)


IGNORED = course_ignored()


def graded(grade_id: str):
    return new_code_cell("run_check('f', globals())\n", metadata={"nbgrader": {
        "grade": True, "grade_id": grade_id, "locked": True, "points": 2, "schema_version": 3, "solution": False,
        "task": False}})


def files(folder, names: dict[str, bytes]):
    for name, content in names.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    return folder


def notebook_bytes(*cells) -> bytes:
    return nbformat.writes(new_notebook(cells=list(cells))).encode()


# ------------------------------------------------------------------------------------------------ tree / read_tree

def test_the_course_ignores_checkpoints_caches_and_feedback():
    assert {".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".hypothesis"} <= set(IGNORED)


def test_a_submission_carries_its_files_but_not_what_nbgrader_ignores(tmp_path):
    files(tmp_path, {f"{NB}.ipynb": b"nb", "data/points.csv": b"1,2", "notes.txt": b"hi",
                     ".ipynb_checkpoints/01_nudging-checkpoint.ipynb": b"old",
                     "__pycache__/helper.cpython-311.pyc": b"\0", "helper.pyc": b"\0", "sub/deep/x.pyc": b"\0",
                     ".hypothesis/examples/1": b"", "feedback/01_nudging.html": b"<html>"})
    assert read_tree(tmp_path, IGNORED) == {f"{NB}.ipynb": b"nb", "data/points.csv": b"1,2", "notes.txt": b"hi"}


def test_read_tree_reads_files_only_in_sorted_order(tmp_path):
    files(tmp_path, {"b.txt": b"", "a/z.txt": b"", "a/b.txt": b""})
    (tmp_path / "empty").mkdir()
    assert list(read_tree(tmp_path, [])) == ["a/b.txt", "a/z.txt", "b.txt"]


def test_ignore_patterns_apply_below_the_submission_folder_only(tmp_path):
    """A folder that itself matches a pattern (a student called "feedback", say) still carries its files."""
    folder = files(tmp_path / "feedback", {f"{NB}.ipynb": b"nb", "feedback": b"a file named feedback"})
    assert read_tree(folder, IGNORED) == {f"{NB}.ipynb": b"nb"}


# ------------------------------------------------------------------------------------------------ preflight

# The assignment's source notebooks, as preflight gets them (Course.source_notebooks)
COURSE = {NB: new_notebook(cells=[graded("test_f"), graded("test_g")]), "other": new_notebook(cells=[graded("test_h")])}


def test_a_readable_submission_is_carried_whole_with_no_note(tmp_path):
    content = notebook_bytes(graded("test_f"), graded("test_g"))
    found, note = preflight(files(tmp_path, {f"{NB}.ipynb": content, "data.csv": b"1"}), IGNORED, COURSE)
    assert (found, note) == ({f"{NB}.ipynb": content, "data.csv": b"1"}, "")


def test_copied_graded_cells_are_graded_and_named_in_the_note(tmp_path):
    folder = files(tmp_path, {f"{NB}.ipynb": notebook_bytes(graded("test_f"), graded("test_f"), graded("test_g"),
                                                            graded("test_g")),
                              "other.ipynb": notebook_bytes(graded("test_h"), graded("test_h"))})
    found, note = preflight(folder, IGNORED, COURSE)
    assert found is not None
    ordinary = "the others run as ordinary cells"
    assert note == (f"{NB}.ipynb has the test cell test_f in cells 1 and 2: the first (cell 1) is graded, {ordinary}; "
                    f"{NB}.ipynb has the test cell test_g in cells 3 and 4: the first (cell 3) is graded, {ordinary}; "
                    f"other.ipynb has the test cell test_h in cells 1 and 2: the first (cell 1) is graded, {ordinary}")


@pytest.mark.parametrize("content, kind", [(b"{ not json", "NotJSONError"), (b"\xff\xfe", "UnicodeDecodeError")])
def test_an_unreadable_notebook_fails_the_submission_with_the_reason(tmp_path, content, kind):
    found, note = preflight(files(tmp_path, {f"{NB}.ipynb": content}), IGNORED, COURSE)
    assert found is None and note.startswith(f"{NB}.ipynb is not a readable notebook ({kind}: ")
    assert "\n" not in note


def test_only_top_level_notebooks_and_no_ignored_file_can_fail_a_submission(tmp_path):
    """A broken checkpoint or a notebook in a data folder is not what nbgrader grades."""
    folder = files(tmp_path, {f"{NB}.ipynb": notebook_bytes(graded("test_f"), graded("test_g")),
                              "extra/broken.ipynb": b"{", ".ipynb_checkpoints/01_nudging-checkpoint.ipynb": b"{"})
    found, note = preflight(folder, IGNORED, COURSE)
    assert sorted(found) == [f"{NB}.ipynb", "extra/broken.ipynb"] and note == ""


def test_ignored_files_do_not_count_towards_the_size_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "MAX_SUBMISSION_BYTES", 2 << 20)
    folder = files(tmp_path, {f"{NB}.ipynb": notebook_bytes(graded("test_f"), graded("test_g")),
                              ".ipynb_checkpoints/big": b"x" * (3 << 20)})
    assert preflight(folder, IGNORED, COURSE)[0] is not None
    files(folder, {"big.bin": b"x" * (3 << 20)})
    assert preflight(folder, IGNORED, COURSE) == (None, "the submission folder holds more than 2 MiB, the limit: hand "
                                                        "in the notebook and the files it needs")


def test_a_refused_submission_fails_preflight_with_the_one_line_reason(tmp_path):
    folder = files(tmp_path / "ann", {f"{NB}.ipynb": notebook_bytes(graded("test_f"))})
    (folder / "notes.txt").symlink_to(files(tmp_path, {"secret.txt": b"SECRET"}) / "secret.txt")
    assert preflight(folder, IGNORED, COURSE) == (None, "notes.txt is a symbolic link: put a copy of what it points "
                                                        "to in its place")


# ------------------------------------------------------------------------------------------------ what read_tree refuses

@pytest.fixture
def course(tmp_path):
    """A secret file and folder outside the submission, and an honest submission folder to spoil."""
    secret = files(tmp_path / "source", {"secret.txt": SECRET, "folder/inside.txt": SECRET})
    folder = files(tmp_path / "submitted" / "eve", {f"{NB}.ipynb": b"{}", "data/points.csv": b"1,2"})
    return folder, secret


def refusal(folder) -> str:
    with within(10), pytest.raises(UnsafeSubmissionError) as info:
        read_tree(folder, IGNORED)
    said = str(info.value)
    assert "\n" not in said and SECRET.decode() not in said
    return said


LINK = "is a symbolic link: put a copy of what it points to in its place"


@pytest.mark.parametrize("name, target, shown", [
    ("notes.txt", lambda folder, secret: secret / "secret.txt", "notes.txt"),  # a file outside
    (f"{NB}.ipynb", lambda folder, secret: secret / "secret.txt", f"{NB}.ipynb"),  # the notebook itself
    ("data/more", lambda folder, secret: secret / "folder", "data/more"),  # a folder outside
    ("copy.ipynb", lambda folder, secret: folder / f"{NB}.ipynb", "copy.ipynb"),  # a file inside the submission
    ("relative", lambda folder, secret: "data/points.csv", "relative"),  # a relative link inside
    ("dangling", lambda folder, secret: folder / "nothing", "dangling"),
], ids=["file-outside", "notebook", "folder-outside", "file-inside", "relative-inside", "dangling"])
def test_a_symbolic_link_anywhere_is_refused_whatever_it_points_to(course, name, target, shown):
    folder, secret = course
    if (folder / name).exists():
        (folder / name).unlink()
    (folder / name).symlink_to(target(folder, secret))
    assert refusal(folder) == f"{shown} {LINK}"


def test_a_submission_folder_that_is_itself_a_link_is_refused(course, tmp_path):
    folder, secret = course
    (tmp_path / "link").symlink_to(secret)
    assert refusal(tmp_path / "link") == f"the submission folder {LINK}"


def test_the_owner_is_that_of_the_folder_opened_and_read(course):
    """collect's owner rule is checked again on the folder read_tree has open, so that no folder swapped in after the
    rule's check (a classmate's, with the learner's own) is read as the student's."""
    folder, _ = course
    assert read_tree(folder, IGNORED, {None, os.geteuid()})
    with pytest.raises(UnsafeSubmissionError, match=f"the submission folder is owned by uid {os.geteuid()}, not by"):
        read_tree(folder, IGNORED, {os.geteuid() + 1, None})


def test_a_path_too_long_to_copy_and_a_name_a_terminal_acts_on_are_refused_quoted(course):
    folder, _ = course
    deep = folder / ("d" * 250) / ("e" * 250) / ("f" * 250) / ("g" * 250) / ("h" * 250)
    deep.mkdir(parents=True)
    (deep / "h.txt").write_text("")
    assert refusal(folder).endswith(f"... is a path of more than {submission.MAX_PATH_BYTES} bytes, too long to be "
                                    "copied: shorten its folders' and files' names")
    shutil.rmtree(folder / ("d" * 250))
    os.mkfifo(folder / "x\x1b[2Ky")
    assert refusal(folder) == "'x\\x1b[2Ky is a named pipe (FIFO), not a file'"


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(course):
    folder, _ = course
    os.mkfifo(folder / "data" / "pipe")
    assert refusal(folder) == "data/pipe is a named pipe (FIFO), not a file"


def test_a_socket_is_refused(course):
    folder, _ = course
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(folder / "sock"))
        assert refusal(folder) == "sock is a socket, not a file"


def test_a_device_is_refused(course):
    if not os.path.exists("/dev/null"):
        pytest.skip("no /dev/null here")
    folder, _ = course
    try:
        os.mknod(folder / "null", 0o600 | __import__("stat").S_IFCHR, os.stat("/dev/null").st_rdev)
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD")
    assert refusal(folder) == "null is a device, not a file"


def test_a_file_over_the_cap_is_refused(course):
    folder, _ = course
    with open(folder / "big.bin", "wb") as big:  # sparse: a thousand times the cap costs no disk
        big.truncate(1000 * submission.MAX_FILE_BYTES)
    assert refusal(folder) == ("big.bin holds more than 10 MiB, the limit for one file: clear the notebook's outputs, "
                               "or leave the file out")


def test_a_file_that_grows_past_the_cap_while_read_is_refused(course, monkeypatch):
    """At most the cap and one byte is read, whatever the size said when the file was opened."""
    folder, _ = course
    monkeypatch.setattr(submission, "MAX_FILE_BYTES", 4)
    files(folder, {f"{NB}.ipynb": b"12345"})
    real_fstat = os.fstat
    monkeypatch.setattr(submission.os, "fstat", lambda fd: os.stat_result(
        (*real_fstat(fd)[:6], 4, *real_fstat(fd)[7:])))  # st_size said 4 when it was opened
    assert refusal(folder).startswith(f"{NB}.ipynb holds more than ")


def test_a_file_at_the_cap_is_read(course, monkeypatch):
    folder, _ = course
    monkeypatch.setattr(submission, "MAX_FILE_BYTES", 4)
    files(folder, {"four": b"1234", f"{NB}.ipynb": b"{}"})
    (folder / "data" / "points.csv").write_bytes(b"1")
    assert read_tree(folder, IGNORED) == {f"{NB}.ipynb": b"{}", "data/points.csv": b"1", "four": b"1234"}
    files(folder, {"five": b"12345"})
    assert refusal(folder).startswith("five holds more than ")


def test_too_many_files_are_refused_ignored_ones_included(course, monkeypatch):
    folder, _ = course
    monkeypatch.setattr(submission, "MAX_ENTRIES", 5)
    files(folder, {"a": b"", "b": b""})  # with the notebook, data/ and data/points.csv: 5
    assert len(read_tree(folder, IGNORED)) == 4
    files(folder, {".ipynb_checkpoints/x": b""})
    assert refusal(folder) == ("the submission folder holds more than 5 files and folders: hand in the notebook and "
                               "the files it needs")


def test_folders_nested_too_deep_are_refused(course, monkeypatch):
    folder, _ = course
    monkeypatch.setattr(submission, "MAX_DEPTH", 3)
    files(folder, {"a/b/c/ok.txt": b""})
    assert "a/b/c/ok.txt" in read_tree(folder, IGNORED)
    files(folder, {"a/b/c/d/deep.txt": b""})
    assert refusal(folder) == "a/b/c/d is nested more than 3 folders deep"


def test_a_file_swapped_for_a_link_after_its_check_is_refused_not_followed(course, monkeypatch):
    """O_NOFOLLOW when opening: a learner racing the check with a link gets a refusal, never the target."""
    folder, secret = course
    (folder / "notes.txt").symlink_to(secret / "secret.txt")
    real_stat = os.stat

    def as_if_regular(path, *args, **kwargs):  # the check saw a regular file; the link is what gets opened
        info = real_stat(path, *args, **kwargs)
        return real_stat(folder / "data" / "points.csv") if path == "notes.txt" else info

    monkeypatch.setattr(submission.os, "stat", as_if_regular)
    assert refusal(folder) == f"notes.txt {LINK}"


def test_read_file_reads_a_notebook_and_refuses_a_link_a_pipe_or_a_missing_file(course):
    folder, secret = course
    assert read_file(folder / f"{NB}.ipynb") == b"{}"
    (folder / "link.ipynb").symlink_to(secret / "secret.txt")
    os.mkfifo(folder / "pipe.ipynb")
    for name, said in (("link.ipynb", LINK), ("pipe.ipynb", "is a named pipe (FIFO), not a file"),
                       ("none.ipynb", "cannot be read (No such file or directory)")):
        with within(10), pytest.raises(UnsafeSubmissionError) as info:
            read_file(folder / name)
        assert str(info.value) == f"{folder / name} {said}"


# ------------------------------------------------------------------------------------------------ nbgrader_reason

def test_nbgrader_reason_is_the_last_exception_line():
    log = ("[AutogradeApp | INFO] Autograding ann\n"
           "Traceback (most recent call last):\n"
           '  File "x.py", line 1, in <module>\n'
           "    raise ValueError(message)\n"
           "nbformat.validator.ValidationError: first\n"
           "ValueError: cell metadata is corrupted\n"
           "[AutogradeApp | ERROR] There was an error processing assignment\n")
    assert nbgrader_reason(log) == "ValueError: cell metadata is corrupted"


def test_nbgrader_reason_without_an_exception_is_the_last_error_line():
    log = ("  [AutogradeApp | ERROR] first problem  \n"
           "[AutogradeApp | WARNING] a warning\n"
           "[ERROR] second problem\n"
           "KeyboardInterrupt\n")  # neither an ...Error nor an ...Exception line
    assert nbgrader_reason(log) == "[ERROR] second problem"


def test_nbgrader_reason_of_a_log_with_no_error_is_empty():
    assert nbgrader_reason("") == "" and nbgrader_reason("[AutogradeApp | INFO] done\n\n") == ""


def test_nbgrader_reason_is_cut_to_500_characters():
    assert nbgrader_reason("RuntimeError: " + "x" * 1000) == ("RuntimeError: " + "x" * 1000)[:500]


# ------------------------------------------------------------------------------------------------ Row.line

def test_a_graded_row_gives_points_time_cpu_and_note_in_columns():
    row = Row("ann", "graded", 8.0, 10.0, seconds=12.345, note="copied cell(s) test_f", attempts=1,
              assignment=NB, cpu_seconds=27.61)
    assert row.line() == (f"{NB:<22} {'ann':<20} graded   {'8/10':>9}   12.3 s   27.6 CPU s  copied cell(s) test_f")


def test_a_row_never_attempted_shows_no_points_and_no_time():
    row = Row("bob", "skipped", note="already graded (--force grades it again)", assignment=NB)
    assert row.line() == f"{NB:<22} {'bob':<20} skipped  {'-':>9} {'':8}  already graded (--force grades it again)"


def test_a_row_without_a_note_or_cpu_figure_ends_at_its_time():
    row = Row("cy", "failed", seconds=3.0, attempts=2, assignment=NB)
    assert row.line() == f"{NB:<22} {'cy':<20} failed   {'-':>9}    3.0 s"


def test_the_backstop_comes_after_all_the_time_the_sandboxes_let_a_submission_sleep():
    """With a small --timeout, a submission that sleeps in every cell and check ran past the backstop, and the
    machine was blamed (red team 6, F4): its sandboxes must stop it first, as its own fault."""
    from autograder.course.limits import NOTEBOOK_IDLE_S  # imports limits, which a submission's worker never needs
    from autograder.trust.remote import IDLE_FACTOR, SUBMISSION_BUDGET_S

    assert submission.SANDBOXES_IDLE_S == NOTEBOOK_IDLE_S + IDLE_FACTOR * SUBMISSION_BUDGET_S
    for timeout_s in (1.0, 60.0, submission.TIMEOUT_S):
        assert submission.backstop_s(timeout_s) >= submission.BACKSTOP_FACTOR * timeout_s + submission.SANDBOXES_IDLE_S
