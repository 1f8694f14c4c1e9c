"""`make demo`: rebuild the course, then grade a demo class through the real nbgrader command line.

The class has four students per assignment: one hands in the solutions, one hands in the untouched notebook,
one makes a realistic mistake, and one attacks the grader (ATTACK). Everything happens in ``build/demo-course/``,
which is wiped at each run.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import nbformat

from autograder.course.build import release, solutions
from autograder.contract import REPO, assignments
from autograder.course import SCRATCH_COURSE_CONFIG, solution_version
from autograder.grade.notebook import results
from autograder.tools.report import run as report
from autograder.trust import sandbox

COURSE = REPO / "build" / "demo-course"

class Mistake(NamedTuple):
    """A realistic mistake: the answer cell's grade_id, the edits that turn its solution wrong, and the cause its
    check names (autograder.checks.causes), which the demo's report must show for it."""
    grade_id: str
    edits: list[tuple[str, str]]
    cause: str


# One realistic mistake per assignment.
MISTAKES = {
    "01_nudging": Mistake("central_difference", [("(f(x + h) - f(x - h)) / (2 * h)", "(f(x + h) - f(x)) / h")],
                          "central_difference/forward-difference"),
    "02_scalar_engine": Mistake("value_node", [("self.grad += other.data * out.grad", "self.grad = other.data * out.grad"),
                                               ("other.grad += self.data * out.grad", "other.grad = self.data * out.grad")],
                                "value_node/overwrites-shared"),
    "03_backward_functions": Mistake("unbroadcast", [("result.sum(axis=stretched, keepdims=True)",
                                                      "result.sum(axis=stretched)")], "unbroadcast/no-keepdims"),
    "04_tensor_engine": Mistake("backprop", [("grads[id(x)] = grads[id(x)] + contribution if id(x) in grads else "
                                              "contribution", "grads[id(x)] = contribution")],
                                "backprop/overwrites-instead-of-accumulating"),
    "05_modules_mnist": Mistake("training", [("        optimizer.zero_grad()\n", "")], "training/no-zero-grad"),
}


# An attacker hands in the untouched notebook with this as its first answer: it silences the hidden tests, tries to
# write the gradebook, starts a process meant to outlive the notebook, and kills its parent (nbgrader, were it
# reachable) from inside every function the tests call. Trusted grading gives it nothing and grades the rest.
ATTACK = """import os, subprocess, sys
try:
    import autograder
    autograder.check = lambda *args, **kwargs: None
except ImportError:
    pass
for gradebook in ("gradebook.db", "../../../gradebook.db"):
    try:
        with open(gradebook, "ab") as db:
            db.write(b"tampered")
    except OSError:
        pass
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def attack(*args, **kwargs):
    os.kill(os.getppid(), 9)


{name} = attack
"""


def attacked(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` with ATTACK as its first answer cell."""
    nb = nbformat.from_dict(nb)
    first = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    first.source = ATTACK.format(name=first.metadata["nbgrader"]["grade_id"])
    return nb


def submissions(name: str, course: Path = COURSE) -> dict[str, nbformat.NotebookNode]:
    """The demo class's notebooks for one assignment, by student id (after generate_assignment in ``course``)."""
    solved = solution_version(nbformat.read(assignments()[name], as_version=4))
    mistaken = nbformat.from_dict(solved)
    grade_id, edits, _ = MISTAKES[name]
    for cell in mistaken.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            for right, wrong in edits:
                if right not in cell.source:
                    raise ValueError(f"demo mistake for {name} no longer matches its solution: {right!r}")
                cell.source = cell.source.replace(right, wrong)
    untouched = nbformat.read(course / "release" / name / f"{name}.ipynb", as_version=4)
    return {"full-marks": solved, "untouched": untouched, "mistake": mistaken, "attacker": attacked(untouched)}


def without_sandbox() -> str | None:
    """What the demo leaves out on this machine, and why, as loud lines; None where bubblewrap sandboxes."""
    why = sandbox.unusable()
    if why is None:
        return None
    return (f"!!! NO SANDBOX: {why}.\n"
            "!!! SKIPPED: the attacker student, and with it the sandbox steps (the proof that an attack earns nothing\n"
            "!!! and harms no one): unsandboxed, its notebook kills nbgrader. The other students are graded WITHOUT a\n"
            f"!!! sandbox ({sandbox.WITHOUT_SANDBOX_ENV}=1). `make setup` says what to install.")


def demo_class(name: str) -> dict[str, nbformat.NotebookNode]:
    """The students graded on this machine: :func:`submissions`, without the attacker where there is no sandbox."""
    students = submissions(name)
    if sandbox.unusable():
        del students["attacker"]
    return students


def trained_accuracy(name: str = "05_modules_mnist", student: str = "full-marks") -> str:
    """The line in which the autograded solution of notebook 5 reports its test accuracy."""
    graded = nbformat.read(COURSE / "autograded" / student / name / f"{name}.ipynb", as_version=4)
    printed = "".join(out.get("text", "") for cell in graded.cells for out in cell.get("outputs", []))
    found = [line for line in printed.splitlines() if line.startswith("test accuracy after")]
    return found[-1] if found else "no accuracy was printed: the training cell did not finish"


def unlike_the_catalogue(report: dict) -> list[str]:
    """Where the class report (its report.json) does not show the "mistake" student's exercise under its Mistake's
    cause, one line each; [] when every mistake is where the catalogue says."""
    told = {s["assignment"]: s["exercises"] for s in report["submissions"] if s["student"] == "mistake"}
    wrong = []
    for name, (grade_id, _, cause) in MISTAKES.items():
        shown = told.get(name, {}).get(grade_id, {}).get("cause", "no row")
        if shown != cause:
            wrong.append(f"!!! {name}: the mistake in {grade_id} should be under {cause}; the report shows {shown}")
    return wrong


def run(*args: str) -> None:
    """Run one nbgrader command in the demo course; stop the demo with nbgrader's own log if it fails."""
    print(f"   nbgrader {' '.join(args)}", flush=True)
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=COURSE, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"nbgrader {' '.join(args)} failed:\n{done.stdout}{done.stderr}")


def step(text: str) -> float:
    print(f"\n== {text}", flush=True)
    return time.monotonic()


def main() -> int:
    skipped = without_sandbox()
    if skipped:
        print(skipped, flush=True)
        os.environ[sandbox.WITHOUT_SANDBOX_ENV] = "1"  # the demo's own class, which holds no attacker then
    started = step("Regenerating learner notebooks in notebooks/ (nbgrader generate_assignment)")
    written = release(keep_edited=True)
    for name in assignments():
        path = REPO / "notebooks" / name / f"{name}.ipynb"
        note = "" if path in written else "  (kept: it has your uncommitted answers; `make release` overwrites it)"
        print(f"   {path.relative_to(REPO)}{note}")
    step("Executing solution notebooks into solutions/")
    for path in solutions():
        print(f"   {path.relative_to(REPO)}")

    step(f"Grading a demo class in {COURSE.relative_to(REPO)}/ with the nbgrader command line")
    shutil.rmtree(COURSE, ignore_errors=True)
    shutil.copytree(REPO / "source", COURSE / "source")
    (COURSE / "nbgrader_config.py").write_text(SCRATCH_COURSE_CONFIG)
    for name in assignments():
        run("generate_assignment", name, "--force")
        for student, nb in demo_class(name).items():
            path = COURSE / "submitted" / student / name / f"{name}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
        run("autograde", name, "--force")
        run("generate_feedback", name, "--force")
    run("export", "--to", "grades.csv")

    step("Grades (nbgrader export -> build/demo-course/grades.csv)")
    with open(COURSE / "grades.csv") as table:
        rows = list(csv.DictReader(table))
    width = max(len("assignment"), *(len(row["assignment"]) for row in rows)) + 2
    print(f"   {'assignment':<{width}}{'student':<12}{'score':>10}")
    for row in rows:
        print(f"   {row['assignment']:<{width}}{row['student_id']:<12}{float(row['score']):>5g} / {float(row['max_score']):g}")

    step("What each student is told (per exercise)")
    for name in assignments():
        for student in demo_class(name):
            graded = nbformat.read(COURSE / "autograded" / student / name / f"{name}.ipynb", as_version=4)
            print(f"   {student} / {name}")
            for result in results(graded):
                first = (result.message or "passed").splitlines()[0]
                print(f"      {result.id:<24}{result.score:>3g}/{result.max_score:<3g} {first}")
            feedback = COURSE / "feedback" / student / name / f"{name}.html"
            print(f"      feedback: {feedback}")
    step("What the class got wrong (python -m autograder report --course build/demo-course)")
    report(COURSE, [], COURSE / "report")
    misnamed = unlike_the_catalogue(json.loads((COURSE / "report" / "report.json").read_text()))
    for line in misnamed or [f"every mistake is under its catalogued cause: "
                             f"{', '.join(m.cause for m in MISTAKES.values())}"]:
        print(f"   {line}")
    step("MNIST on the course's own engine (the full-marks student's notebook 5, as nbgrader ran it)")
    print(f"   {trained_accuracy()}")
    print(f"\nDemo finished in {time.monotonic() - started:.0f} s.")
    if skipped:
        print(f"\n{skipped}")
    return 1 if misnamed else 0
