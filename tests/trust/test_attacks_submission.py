"""A submission is data, on nbgrader's own path: ``nbgrader collect`` from the world-writable exchange does not follow
a learner's links or open their special files (autograder.course.collect), and ``nbgrader autograde`` fails a
submission in submitted/ that holds one anyway (RefuseUnsafeFiles), grading the others as usual. Nothing a link
points at reaches submitted/, autograded/, the gradebook, the feedback or the logs."""
import os
import pwd
import shutil
import stat
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from autograder.contract import COURSE_ID
from autograder.grade import submission
from autograder.tools.bench_grading import gradebook_cells, synthetic_class
from conftest import REPO, SECRET

NB = "01_nudging"
CONFIG = """from pathlib import Path
from autograder.course import configure, configure_exchange
c = get_config()
configure(c, release_directory="release")
configure_exchange(c, Path(__file__).resolve().parent / "exchange")
"""
TIMESTAMP = "2026-12-01 09:00:00.000000 UTC"


def nbgrader(root, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, capture_output=True, text=True,
                          timeout=900)


def hand_in(root, student: str, nb, timestamp: str = TIMESTAMP, owner: int | None = None) -> "os.PathLike":
    """What a learner's Submit leaves in the exchange's inbound folder; made by the account ``owner`` (a uid) when
    given, else by whoever runs the test (the instructor)."""
    import nbformat

    folder = root / "exchange" / COURSE_ID / "inbound" / f"{student}+{NB}+{timestamp}+0123456789abcdef"
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{NB}.ipynb")
    (folder / "timestamp.txt").write_text(timestamp)
    if owner is not None:
        for path in (folder, *folder.iterdir()):
            os.chown(path, owner, owner)
    return folder


@pytest.mark.slow  # nbgrader runs afresh, and the autograde starts kernels
def test_collect_and_autograde_refuse_links_and_special_files_and_grade_the_others(tmp_path):
    root = tmp_path / "course"
    shutil.copytree(REPO / "source" / NB, root / "source" / NB)
    (root / "nbgrader_config.py").write_text(CONFIG)
    assert nbgrader(root, "generate_assignment", NB).returncode == 0
    assert nbgrader(root, "release_assignment", NB).returncode == 0  # with the sticky bit where anyone may write
    assert (root / "exchange").stat().st_mode & 0o7777 == 0o1777
    assert (root / "exchange" / COURSE_ID / "inbound").stat().st_mode & 0o7777 == 0o3733
    solved = synthetic_class(NB, root)["full-marks"]
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "secret.txt").write_bytes(SECRET)
    source = root / "source" / NB / f"{NB}.ipynb"  # the solutions: what a link to it would hand in
    hand_in(root, "ann", solved)
    linked = hand_in(root, "notebook-link", solved) / f"{NB}.ipynb"
    linked.unlink()
    linked.symlink_to(source)
    (hand_in(root, "folder-link", solved) / "data").symlink_to(tmp_path / "secret")
    (hand_in(root, "inside-link", solved) / "copy.ipynb").symlink_to(f"{NB}.ipynb")
    os.mkfifo(hand_in(root, "pipe", solved) / "notes.txt")  # nbgrader's own copy fails on it, for everyone after
    with open(hand_in(root, "big", solved) / "big.bin", "wb") as big:
        big.truncate(submission.MAX_FILE_BYTES + 1)
    many = hand_in(root, "many", solved)
    for k in range(submission.MAX_ENTRIES):
        (many / f"{k}.txt").write_bytes(b"")
    whole = root / "exchange" / COURSE_ID / "inbound" / f"whole+{NB}+{TIMESTAMP}+0123456789abcdef"
    whole.symlink_to(tmp_path / "secret")
    refused = ["big", "folder-link", "inside-link", "many", "notebook-link", "pipe", "whole"]

    collected = nbgrader(root, "collect", NB)
    said = collected.stdout + collected.stderr
    assert collected.returncode != 0 and f"not collected, each for the reason logged above: {', '.join(refused)}" in said
    assert sorted(p.name for p in (root / "submitted").iterdir()) == ["ann"], said
    for student, reason in [("notebook-link", f"{NB}.ipynb is a symbolic link"), ("pipe", "notes.txt is a named pipe"),
                            ("whole", "the submission folder is a symbolic link"), ("big", "big.bin holds more than")]:
        assert f"Not collecting {student}'s submission" in said and reason in said, said

    # A submission put in submitted/ some other way is failed by autograde, before its kernel runs.
    bypass = root / "submitted" / "bypass" / NB
    shutil.copytree(root / "submitted" / "ann" / NB, bypass)
    (bypass / "notes.txt").symlink_to(tmp_path / "secret" / "secret.txt")
    graded = nbgrader(root, "autograde", NB)
    said = graded.stdout + graded.stderr
    assert graded.returncode != 0 and "notes.txt is a symbolic link" in said, said
    scores = {}
    for (student, _, _, kind), value in gradebook_cells(root, NB).items():
        scores[student] = scores.get(student, 0) + ((value[0] or 0) if kind == "grade" else 0)
    assert scores == {"ann": 10, "bypass": 0}, scores
    assert not (root / "autograded" / "bypass" / NB).exists()  # nbgrader removed the failed copy
    assert nbgrader(root, "generate_feedback", NB).returncode == 0
    assert (root / "feedback" / "ann" / NB / f"{NB}.html").is_file()
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and "exchange" not in path.parts:
            assert SECRET not in path.read_bytes(), path
    assert SECRET not in (said + collected.stdout + collected.stderr).encode()


# Red team 17: a module of the submission's, first on the kernel's sys.path, ran before its private folder was locked:
# it swapped the connection file for a link, and lock() made the host file it named read-only (the interpreter's, in
# a class run: every later kernel failed to start).
SHADOWING_LAUNCHER = ("import os, sys\nat = sys.argv.index('-f') + 1\nconnection = sys.argv[at]\n"
                      "moved = connection + '.moved'\nos.rename(connection, moved)\n"
                      "os.symlink({victim!r}, connection)\nsys.argv[at] = moved\n"
                      "sys.path[:] = [p for p in sys.path if p not in ('', os.getcwd())]\n"
                      "import runpy\nrunpy.run_module('ipykernel_launcher', run_name='__main__', alter_sys=True)\n")


@pytest.mark.slow  # nbgrader runs afresh, and the autograde starts kernels
def test_a_module_in_the_submission_stands_in_for_nothing_the_kernel_imports_as_it_starts(tmp_path):
    import nbformat

    root = tmp_path / "course"
    shutil.copytree(REPO / "source" / NB, root / "source" / NB)
    (root / "nbgrader_config.py").write_text(CONFIG)
    assert nbgrader(root, "generate_assignment", NB).returncode == 0
    victim = tmp_path / "victim"
    victim.write_text("a host file\n")
    victim.chmod(0o755)
    folder = root / "submitted" / "ann" / NB
    folder.mkdir(parents=True)
    nbformat.write(synthetic_class(NB, root)["full-marks"], folder / f"{NB}.ipynb")
    (folder / "ipykernel_launcher.py").write_text(SHADOWING_LAUNCHER.format(victim=str(victim)))
    graded = nbgrader(root, "autograde", NB)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert stat.S_IMODE(victim.stat().st_mode) == 0o755
    grades = {key: value for key, value in gradebook_cells(root, NB).items() if key[-1] == "grade"}
    assert sum(value[0] or 0 for value in grades.values()) == 10, grades


def deep_file(folder, levels: int, name_bytes: int) -> None:
    """A file ``levels`` folders down, each folder's name ``name_bytes`` long: a path PATH_MAX (4096) cannot hold, so
    each folder is made relative to the one above it."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir("d" * name_bytes, dir_fd=fd)
        fd, above = os.open("d" * name_bytes, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(above)
    os.close(os.open("f" * name_bytes, os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.close(fd)


@pytest.mark.skipif(os.geteuid() != 0, reason="making folders another account owns needs root")
def test_collect_refuses_a_submission_not_the_students_own_or_not_of_its_time_and_collects_the_others(tmp_path):
    """Red teams 11 and 12: anyone with an account could make inbound/ann+...+2099-...: nbgrader only warned that it
    was not ann's, collected it as ann's, and nothing ann handed in later displaced it. A folder whose name holds no
    time, a timestamp.txt with none (at the next --update) and a path too long to copy each stopped the collect of
    every student; a learner's own folder dated days before it was made was collected as on time; a name or a file
    name with terminal escapes was printed raw."""
    import nbformat

    root = tmp_path / "course"
    shutil.copytree(REPO / "source" / NB, root / "source" / NB)
    # nbgrader's own cap on a submission's size, under read_tree's: its copy raised, uncaught, for everyone after
    (root / "nbgrader_config.py").write_text(CONFIG + "c.CourseDirectory.max_dir_size = 3  # kB\n")

    def notebook(who: str):
        return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"handed in by {who}")])

    nobody, daemon = pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("daemon").pw_uid
    now = datetime.now(timezone.utc)
    just_now = (now - timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    hand_in(root, "ann", notebook("ann"))  # a student with no account: the instructor handed it in for her
    hand_in(root, "ann", notebook("nobody as ann"), "2099-01-01 00:00:00.000000 UTC", owner=nobody)
    hand_in(root, "daemon", notebook("daemon"), just_now, owner=daemon)  # a student's own, with an account
    hand_in(root, "daemon", notebook("nobody as daemon"), now.strftime("%Y-%m-%d %H:%M:%S.%f UTC"), owner=nobody)
    hand_in(root, "nobody", notebook("nobody, dated days back"), (now - timedelta(days=3)).strftime(
        "%Y-%m-%d %H:%M:%S.%f UTC"), owner=nobody)
    hand_in(root, "carol", notebook("carol"))
    hand_in(root, "carol", notebook("carol, dated ahead"), "2097-01-01 00:00:00.000000 UTC")
    hand_in(root, "bob", notebook("bob"), "no time at all")
    hand_in(root, "frank", notebook("frank"), "2026-12-01 09:00:00 ..")  # dateutil's tz key warning, as an error
    (hand_in(root, "gina", notebook("gina")) / "timestamp.txt").write_text("not a time")
    (hand_in(root, "hal", notebook("hal")) / "timestamp.txt").write_text("2026-11-01 09:00:00.000000 UTC")
    deep_file(hand_in(root, "ivan", notebook("ivan")), 16, 240)
    os.mkfifo(hand_in(root, "jo", notebook("jo")) / "x\x1b]2;t\x07y")
    (hand_in(root, "kim", notebook("kim")) / "data.bin").write_bytes(b"0" * 4000)
    hand_in(root, "\udcff", notebook("bytes not UTF-8"), just_now, owner=nobody)  # b"\xff", as Python names it
    (hand_in(root, "lee", notebook("lee")) / "\udcff.txt").write_bytes(b"")
    hand_in(root, "\x1b]2;ann\x07eve", notebook("eve"))  # sets the terminal's title

    collected = nbgrader(root, "collect", NB)
    said = collected.stdout + collected.stderr
    for student in ("ann", "daemon", "carol"):
        handed = nbformat.read(root / "submitted" / student / NB / f"{NB}.ipynb", as_version=4)
        assert handed.cells[0].source == f"handed in by {student}", (student, said)
    assert sorted(p.name for p in (root / "submitted").iterdir()) == ["ann", "carol", "daemon"], said
    assert collected.returncode != 0, said
    for student, reason in [("ann", "its folder is owned by nobody, not by ann"),
                            ("daemon", "its folder is owned by nobody, not by daemon"),
                            ("nobody", "UTC: it was handed in or altered after the time it claims"),
                            ("carol", "it is dated 2097-01-01 00:00:00 UTC, later than this machine's clock"),
                            ("bob", "its folder's name holds no time nbgrader can read"),
                            ("frank", "its folder's name holds no time nbgrader can read"),
                            ("gina", "its timestamp.txt holds no time nbgrader can read"),
                            ("hal", "its timestamp.txt says 2026-11-01 09:00:00 UTC, its folder's name 2026-12-01"),
                            ("ivan", "is a path of more than 1024 bytes, too long to be copied"),
                            ("jo", "x\\x1b]2;t\\x07y is a named pipe"),
                            ("kim", "nbgrader could not copy it (Directory size is too big."),
                            ("'\\udcff'", "the student name '\\udcff' holds control characters (U+DCFF)"),
                            ("lee", "\\udcff.txt is named with bytes that are not UTF-8 text"),
                            ("'\\x1b]2;ann\\x07eve'", "'\\x1b]2;ann\\x07eve' holds control characters (U+0007 U+001B)")]:
        assert f"Not collecting {student}'s submission" in said and reason in said, (student, said)
    assert "\x1b" not in said and "\x07" not in said
    assert "Traceback" not in said, said

    # A course folder or inbound that a learner could have put in the course's place is not collected from at all.
    inbound = root / "exchange" / COURSE_ID / "inbound"
    inbound.chmod(0o2733)  # nbgrader's own release: anyone may rename what is in it
    said = nbgrader(root, "collect", NB).stderr
    assert f"not collecting from {inbound}: anyone can rename or remove what is in it: `chmod +t" in said, said
    course = inbound.parent
    course.rename(course.with_name("aside"))
    (course / "inbound").mkdir(parents=True)
    for folder in (course, course / "inbound"):
        os.chown(folder, nobody, nobody)
    said = nbgrader(root, "collect", NB).stderr
    assert f"not collecting from {course}: it is owned by nobody, not by you or root" in said, said
