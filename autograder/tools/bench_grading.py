"""`make bench-grading`: a synthetic class graded serially by ``nbgrader autograde`` and in parallel on Dask.

Both runs grade the same submissions (12 per notebook: full marks, untouched, a realistic mistake, an attacker, a
notebook that kills its kernel, a copied test cell, and six that skip one exercise each) in two copies of one course
under ``build/bench-grading/``: serially, one ``nbgrader autograde`` per notebook; in parallel, one
``python -m autograder autograde`` for all five (one local cluster, one worker per core). Printed: per notebook, the
median seconds per submission and the serial wall time; per student, the whole series' wall and CPU seconds;
submissions per minute; the parallel/serial ratio; whether the two gradebooks agree cell by cell; and the best ratio
this machine allows (machine_bound: one grading alone against two at once).

CPU is read from a cgroup this process moves into (cpuacct), which counts every process it starts -- Dask workers,
nbgrader, kernels, sandboxes -- even inside their own namespaces; without one, from /proc/stat, machine-wide.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import nbformat

from autograder.contract import COURSE_ID, REPO, assignments
from autograder.course import SCRATCH_COURSE_CONFIG
from autograder.grade.class_run import grade_class
from autograder.grade.cpu import CpuMeter
from autograder.tools.demo import submissions

BENCH = REPO / "build" / "bench-grading"
PER_NOTEBOOK = 12
TARGET_RATIO = 0.6          # parallel wall / serial wall
TARGET_CPU_PER_STUDENT = 40  # seconds of CPU for the five notebooks of one student
# nbgrader's log with a time on each line: the serial run's per-submission times come from its "student" lines.
LOG_FORMAT = "--Application.log_format=%(asctime)s.%(msecs)03d %(levelname)s %(message)s"
STARTS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) INFO Creating/updating student with ID '([^']+)'", re.M)


def synthetic_class(name: str, course: Path) -> dict[str, nbformat.NotebookNode]:
    """PER_NOTEBOOK submissions of one assignment, by student id (the demo's four, then the kinds above)."""
    found = submissions(name, course)
    solved, untouched = found["full-marks"], found["untouched"]
    found["crasher"] = _with_first_answer(untouched, "import os\nos._exit(1)\n")
    copied = nbformat.from_dict(solved)
    test = next(i for i, c in enumerate(copied.cells) if c.metadata.get("nbgrader", {}).get("grade")
                and not c.metadata["nbgrader"].get("solution"))
    copied.cells.insert(test + 1, nbformat.from_dict(copied.cells[test]))
    copied.cells[test + 1].id = "copied-test-cell"
    found["copied-cell"] = copied
    stubs = {c.metadata["nbgrader"]["grade_id"]: c.source for c in untouched.cells
             if c.metadata.get("nbgrader", {}).get("solution")}
    for k in range(PER_NOTEBOOK - len(found)):
        grade_id = list(stubs)[k % len(stubs)]
        skipped = nbformat.from_dict(solved)
        for cell in skipped.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
                cell.source = stubs[grade_id]
        found[f"skipped-{k + 1}"] = skipped
    return found


def _with_first_answer(nb, source: str):
    nb = nbformat.from_dict(nb)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")).source = source
    return nb


def build(root: Path) -> dict[str, list[str]]:
    """A course at ``root`` with every assignment generated and the synthetic class submitted; students by assignment."""
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(REPO / "source", root / "source", ignore=shutil.ignore_patterns(".hypothesis", ".ipynb_checkpoints"))
    (root / "nbgrader_config.py").write_text(SCRATCH_COURSE_CONFIG)
    students = {}
    for name in assignments():
        nbgrader(root, "generate_assignment", name, "--force")
        students[name] = []
        for student, nb in synthetic_class(name, root).items():
            path = root / "submitted" / student / name / f"{name}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
            students[name].append(student)
    return students


def nbgrader(root: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args, LOG_FORMAT], cwd=root, capture_output=True, text=True)
    if done.returncode != 0 and args[0] != "autograde":  # autograde exits 1 when a submission failed; that is data
        sys.exit(f"nbgrader {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout + done.stderr


def serial_seconds(log: str, ended: float) -> list[float]:
    """Per-submission seconds of one serial ``nbgrader autograde`` run, from the times of its log lines."""
    starts = [datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp() for stamp, _ in STARTS.findall(log)]
    return [b - a for a, b in zip(starts, starts[1:] + [ended])]


def machine_bound(runs: int = 3) -> dict:
    """How much two gradings at once slow each other here: notebook 3's solution graded by ``python -m autograder
    grade`` alone (``runs`` times), then two at once (``runs`` times). One grading already keeps more than one core
    busy (its kernel runs while the checks run), so two at once cannot finish in the time of one, and no scheduler
    can beat (two at once) / (2 × alone) as a parallel/serial wall-time ratio on this machine.

    Returns median wall seconds: {"alone": ..., "two_at_once": ...}.
    """
    notebook = REPO / "solutions" / "03_backward_functions" / "03_backward_functions.ipynb"
    command = [sys.executable, "-m", "autograder", "grade", str(notebook), "--json"]

    def timed(copies: int) -> float:
        started = time.monotonic()
        for process in [subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        for _ in range(copies)]:
            process.wait()
        return time.monotonic() - started

    return {"alone": median([timed(1) for _ in range(runs)]), "two_at_once": median([timed(2) for _ in range(runs)])}


def gradebook_cells(root: Path, assignment: str) -> dict[tuple, tuple]:
    """Every grade and comment of an assignment in a course's gradebook, by (student, notebook, cell, kind)."""
    from nbgrader.api import Gradebook

    found = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", COURSE_ID) as gradebook:
        for submission in gradebook.assignment_submissions(assignment):
            found[(submission.student_id, "", "", "submission")] = (submission.timestamp,)
            for notebook in submission.notebooks:
                key = (submission.student_id, notebook.name)
                found[key + ("", "late penalty")] = (notebook.late_submission_penalty,)
                for grade in notebook.grades:
                    found[key + (grade.name, "grade")] = (grade.auto_score, grade.max_score, grade.needs_manual_grade,
                                                          grade.manual_score)
                for comment in notebook.comments:
                    found[key + (comment.name, "comment")] = (comment.auto_comment, comment.manual_comment)
    return found


def differences(a: dict, b: dict) -> list[str]:
    return [f"{key}: serial {a.get(key)} parallel {b.get(key)}" for key in sorted(set(a) | set(b), key=str)
            if a.get(key) != b.get(key)]


def main() -> int:
    meter = CpuMeter("bench-grading", machine_fallback=True)
    atexit.register(meter.close)
    print(f"Building a synthetic class of {PER_NOTEBOOK} submissions per notebook in {BENCH.relative_to(REPO)}/",
          flush=True)
    print("== this machine: one grading alone, then two at once", flush=True)
    bound = machine_bound()
    students = build(BENCH / "serial")
    shutil.rmtree(BENCH / "parallel", ignore_errors=True)
    shutil.copytree(BENCH / "serial", BENCH / "parallel")
    serial = {}
    for name in assignments():
        print(f"== {name}: serial nbgrader autograde", flush=True)
        cpu, started = meter.read(), time.monotonic()
        log = nbgrader(BENCH / "serial", "autograde", name, "--force")
        serial[name] = (time.monotonic() - started, meter.read() - cpu, serial_seconds(log, time.time()))
    print("== every notebook: parallel python -m autograder autograde (one local cluster)", flush=True)
    cpu, started = meter.read(), time.monotonic()
    rows = grade_class(BENCH / "parallel", list(assignments()), force=True)
    parallel = (time.monotonic() - started, meter.read() - cpu)
    figures = {"serial": serial, "parallel": parallel, "students": len(students[next(iter(students))]),
               "submissions": sum(map(len, students.values())),
               "parallel_seconds": {name: [r.seconds for r in rows if r.assignment == name and r.status == "graded"]
                                    for name in assignments()},
               "not_graded": [(r.assignment, r.student, r.note) for r in rows if r.status != "graded"],
               "submission_cpu": sum(r.cpu_seconds or 0.0 for r in rows),
               "differences": {name: differences(gradebook_cells(BENCH / "serial", name),
                                                 gradebook_cells(BENCH / "parallel", name)) for name in assignments()},
               "cpu_scope": meter.scope, "machine": bound, "cores": os.cpu_count()}
    (BENCH / "figures.json").write_text(json.dumps(figures, indent=1))  # kept: the report can be re-printed
    report(figures)
    return 0


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(f: dict) -> None:
    """Print the figures of one run (as stored in figures.json)."""
    n = f["students"]
    print(f"\nGrading one class of {n} students, five notebooks each (CPU: {f['cpu_scope']})\n")
    print(f"{'notebook':<24}{'serial s/sub':>13}{'parallel s/sub':>15}{'serial wall':>12}  gradebooks")
    for name, (wall, _, each) in f["serial"].items():
        wrong = f["differences"][name]
        print(f"{name:<24}{median(each):>13.1f}{median(f['parallel_seconds'][name]):>15.1f}{wall:>11.0f}s  "
              f"{'agree cell by cell' if not wrong else f'{len(wrong)} cells differ'}")
        for line in wrong[:5]:
            print(f"    {line}")
    for assignment, student, note in f["not_graded"]:
        print(f"    not graded in parallel: {assignment}/{student}: {note}")
    s_wall, s_cpu = sum(x[0] for x in f["serial"].values()), sum(x[1] for x in f["serial"].values())
    p_wall, p_cpu = f["parallel"]
    print(f"\n{'whole series':<24}{'serial':>12}{'parallel':>12}")
    print(f"{'wall s per student':<24}{s_wall / n:>12.1f}{p_wall / n:>12.1f}")
    print(f"{'CPU s per student':<24}{s_cpu / n:>12.1f}{p_cpu / n:>12.1f}")
    print(f"{'submissions per minute':<24}{60 * f['submissions'] / s_wall:>12.1f}{60 * f['submissions'] / p_wall:>12.1f}")
    ratio = p_wall / s_wall
    print(f"\nparallel/serial wall time: {ratio:.2f} (target <= {TARGET_RATIO}: {'met' if ratio <= TARGET_RATIO else 'MISSED'}); "
          f"speed-up {1 / ratio:.2f}x")
    print(f"parallel CPU per student: {p_cpu / n:.1f} s (target <= {TARGET_CPU_PER_STUDENT}: "
          f"{'met' if p_cpu / n <= TARGET_CPU_PER_STUDENT else 'MISSED'})")
    if f.get("submission_cpu"):
        own = f["submission_cpu"] / n
        print(f"  of which each submission's grading processes (nbgrader, kernel, check workers): {own:.1f} s; the "
              f"rest, {p_cpu / n - own:.1f} s, is Dask, recording into the gradebook and starting up")
    if "machine" in f:
        alone, two = f["machine"]["alone"], f["machine"]["two_at_once"]
        print(f"this machine's bound: notebook 3 graded alone takes {alone:.1f} s, two at once {two:.1f} s, so no "
              f"parallel run here can beat a ratio of {two / (2 * alone):.2f}")
    if "cores" in f:  # parallel wall >= parallel CPU / cores, and parallel CPU is about serial's or more
        print(f"serial grading kept {s_cpu / s_wall:.2f} cores busy: on {f['cores']} cores, a parallel run that "
              f"spends no less CPU than serial cannot beat a ratio of {s_cpu / (f['cores'] * s_wall):.2f}")
