"""What a class run decides before and after a submission is graded, without Dask or nbgrader runs: which files a
submission carries to its worker (``tree``/``read_tree`` with nbgrader's ignore patterns), whether it can be graded
at all (``preflight``), the reason given when nbgrader fails (``nbgrader_reason``) and the log line (``Row.line``).
"""
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from autograder.course import configure
from autograder.grade import class_run
from autograder.grade.class_run import preflight, read_tree, tree
from autograder.grade.submission import Row, nbgrader_reason

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


def test_tree_lists_files_only_in_sorted_order(tmp_path):
    files(tmp_path, {"b.txt": b"", "a/z.txt": b"", "a/b.txt": b""})
    (tmp_path / "empty").mkdir()
    assert [p.relative_to(tmp_path).as_posix() for p in tree(tmp_path, [])] == ["a/b.txt", "a/z.txt", "b.txt"]


def test_ignore_patterns_apply_below_the_submission_folder_only(tmp_path):
    """A folder that itself matches a pattern (a student called "feedback", say) still carries its files."""
    folder = files(tmp_path / "feedback", {f"{NB}.ipynb": b"nb", "feedback": b"a file named feedback"})
    assert read_tree(folder, IGNORED) == {f"{NB}.ipynb": b"nb"}


# ------------------------------------------------------------------------------------------------ preflight

def test_a_readable_submission_is_carried_whole_with_no_note(tmp_path):
    content = notebook_bytes(graded("test_f"))
    found, note = preflight(files(tmp_path, {f"{NB}.ipynb": content, "data.csv": b"1"}), IGNORED)
    assert (found, note) == ({f"{NB}.ipynb": content, "data.csv": b"1"}, "")


def test_copied_graded_cells_are_graded_and_named_in_the_note(tmp_path):
    folder = files(tmp_path, {f"{NB}.ipynb": notebook_bytes(graded("test_f"), graded("test_f"), graded("test_g"),
                                                            graded("test_g")),
                              "other.ipynb": notebook_bytes(graded("test_h"), graded("test_h"))})
    found, note = preflight(folder, IGNORED)
    assert found is not None
    assert note == (f"{NB}.ipynb: copied cell(s) test_f, test_g graded once, the first copy; "
                    "other.ipynb: copied cell(s) test_h graded once, the first copy")


@pytest.mark.parametrize("content, kind", [(b"{ not json", "NotJSONError"), (b"\xff\xfe", "UnicodeDecodeError")])
def test_an_unreadable_notebook_fails_the_submission_with_the_reason(tmp_path, content, kind):
    found, note = preflight(files(tmp_path, {f"{NB}.ipynb": content}), IGNORED)
    assert found is None and note.startswith(f"{NB}.ipynb is not a readable notebook ({kind}: ")
    assert "\n" not in note


def test_only_top_level_notebooks_and_no_ignored_file_can_fail_a_submission(tmp_path):
    """A broken checkpoint or a notebook in a data folder is not what nbgrader grades."""
    folder = files(tmp_path, {f"{NB}.ipynb": notebook_bytes(graded("test_f")), "extra/broken.ipynb": b"{",
                              ".ipynb_checkpoints/01_nudging-checkpoint.ipynb": b"{"})
    found, note = preflight(folder, IGNORED)
    assert sorted(found) == [f"{NB}.ipynb", "extra/broken.ipynb"] and note == ""


def test_ignored_files_do_not_count_towards_the_size_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(class_run, "MAX_SUBMISSION_BYTES", 2 << 20)
    folder = files(tmp_path, {f"{NB}.ipynb": notebook_bytes(), ".ipynb_checkpoints/big": b"x" * (3 << 20)})
    assert preflight(folder, IGNORED)[0] is not None
    files(folder, {"big.bin": b"x" * (3 << 20)})
    assert preflight(folder, IGNORED) == (None, "the submission folder holds 3 MiB; the limit is 2 MiB")


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
