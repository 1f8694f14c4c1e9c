"""nbgrader metadata and the one-id-everywhere rule, read straight from the notebooks (fast: no kernel starts)."""
import ast
import re

import nbformat
import pytest

from autograder.checks import exercise_ids
from autograder.contract import INTERACTIVE_TAG, MEASURED_TAG, TEST_PREFIX, WIDGET_FUNCTIONS, assignments, nbgrader_cells
from autograder.course import solution_version
from autograder.trust.verdicts import python
from conftest import REPO, learner_notebook, solution_notebook

HIDDEN_CALL = re.compile(r'### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS', re.S)


def source_nb(name):
    return nbformat.read(assignments()[name], as_version=4)


def test_grade_ids_are_unique_and_graded_cells_have_points(assignment):
    cells = nbgrader_cells(source_nb(assignment))
    ids = [meta["grade_id"] for meta in cells]
    assert len(ids) == len(set(ids)), ids
    for meta in cells:
        if meta.get("grade"):
            assert meta.get("points", 0) > 0, meta
            assert meta.get("locked"), f"test cell {meta['grade_id']} must be locked"


def test_each_answer_cell_has_a_test_cell_that_calls_its_check(assignment):
    nb = source_nb(assignment)
    answers = {c.metadata.nbgrader["grade_id"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}
    tests = {c.metadata.nbgrader["grade_id"]: c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
    assert answers, "an assignment without exercises"
    assert {TEST_PREFIX + a for a in answers} == set(tests)
    for test_id, source in tests.items():
        exercise = test_id[len(TEST_PREFIX):]
        hidden = HIDDEN_CALL.findall(source)
        assert len(hidden) == 1, f"{test_id}: one hidden block expected"
        assert f'check("{exercise}", globals())' in hidden[0], f"{test_id} must pass globals() to its own check"
        assert exercise in exercise_ids(), f"no check registered for {exercise}"


def test_every_name_a_check_reads_is_defined_by_its_notebook(assignment):
    """The answer contract is wired right: each check's parameters are names the solution notebook defines, and the
    exercises it builds on come before it in the course, so a learner never sees a course bug as their own."""
    from autograder.checks import answer_names, prerequisites
    from autograder.tools.solutions import solution_namespace

    namespace = solution_namespace(assignment)
    order = [meta["grade_id"] for a in assignments() for meta in nbgrader_cells(source_nb(a)) if meta.get("solution")]
    for meta in nbgrader_cells(source_nb(assignment)):
        if meta.get("solution"):
            exercise = meta["grade_id"]
            missing = [name for name in answer_names(exercise) if name not in namespace]
            assert not missing, f"check {exercise!r} reads {missing}, which {assignment} does not define"
            later = [e for e in prerequisites(exercise) if order.index(e) > order.index(exercise)]
            assert not later, f"{exercise} builds on {later}, which come after it"


def test_each_test_cell_shows_the_learner_the_same_check_that_grades(assignment):
    """The visible part of a test cell starts with run_check and the very arguments of the hidden call, so the
    diagnosis in the learner's notebook and the grade cannot disagree."""
    for cell in source_nb(assignment).cells:
        if not cell.metadata.get("nbgrader", {}).get("grade"):
            continue
        hidden = re.search(r"### BEGIN HIDDEN TESTS\nfrom autograder import check\ncheck\((.*)\)\n### END HIDDEN TESTS\n",
                           cell.source)
        assert hidden, f"{cell.metadata.nbgrader['grade_id']}: the hidden block is not the one-line check call"
        visible = cell.source[hidden.end():].split("\n", 1)[0]
        assert visible == f"run_check({hidden.group(1)})", visible
    imports = next(c.source for c in source_nb(assignment).cells if c.cell_type == "code")
    assert "from labtools import run_check" in imports


def test_widget_cells_are_skipped_by_unattended_runs(assignment):
    """A cell that shows a live widget carries nbclient's skip tag, so grading never waits on it."""
    calls = re.compile(r"^\s*(\w+\s*=\s*)?(" + "|".join(WIDGET_FUNCTIONS) + r")\(", re.M)
    widget_cells = [c for c in source_nb(assignment).cells if c.cell_type == "code" and calls.search(c.source)]
    for cell in widget_cells:
        assert INTERACTIVE_TAG in cell.metadata.get("tags", []), cell.source
    for cell in source_nb(assignment).cells:
        if INTERACTIVE_TAG in cell.metadata.get("tags", []):
            assert cell in widget_cells, f"only widget cells may be skipped: {cell.source[:80]}"
    if assignment in ("01_nudging", "02_scalar_engine"):
        assert widget_cells, "the notebook's widget cell was not found: did its call change?"


def test_nothing_after_a_measured_cell_uses_what_it_computes(assignment):
    """Grading skips cells tagged measured (timings of the machine: autograder.course.preprocessors.ContainedExecute), so a
    later cell that read one of their names would fail in every graded notebook."""
    code = [c for c in source_nb(assignment).cells if c.cell_type == "code"]
    for index, cell in enumerate(code):
        if MEASURED_TAG in cell.metadata.get("tags", []):
            made = names(cell.source)[0]
            for later in code[index + 1:]:
                if MEASURED_TAG not in later.metadata.get("tags", []):
                    bound, read = names(later.source)
                    assert not made & (read - bound), f"{sorted(made & read)} come from a measured cell"


def names(source) -> tuple[set, set]:
    """The names a cell binds (assignments, defs, classes, imports) and the names it reads."""
    tree = ast.parse(python(source))
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    bound |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
              for a in n.names}
    return bound, {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def test_source_notebooks_are_clean(assignment):
    nb = source_nb(assignment)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code")


def test_learner_notebooks_hold_no_hidden_tests_or_solutions(assignment):
    text = learner_notebook(assignment).read_text()
    for marker in ("BEGIN HIDDEN TESTS", "BEGIN SOLUTION", "END SOLUTION", "from autograder import check"):
        assert marker not in text


def test_solution_notebooks_hold_no_hidden_tests(assignment):
    text = solution_notebook(assignment).read_text()
    assert "BEGIN HIDDEN TESTS" not in text and "from autograder import check" not in text


def test_every_check_belongs_to_a_notebook():
    in_notebooks = {meta["grade_id"] for name in assignments() for meta in nbgrader_cells(source_nb(name))}
    assert set(exercise_ids()) <= in_notebooks


@pytest.mark.parametrize("folder", ["notebooks", "solutions"])
def test_generated_folders_cover_every_assignment(folder):
    assert {p.parent.name for p in (REPO / folder).glob("*/*.ipynb")} == set(assignments())


def test_demo_has_a_realistic_mistake_that_still_applies_and_is_named_by_its_catalogued_cause(assignment):
    """The demo's report must show each mistake under the cause it lists (demo.Mistake.cause): its check names it."""
    from autograder import CheckFailure, check
    from autograder.checks import causes
    from autograder.tools.demo import MISTAKES
    from autograder.tools.solutions import solution_namespace

    grade_id, edits, cause = MISTAKES[assignment]
    cells = [c for c in source_nb(assignment).cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    assert len(cells) == 1 and all(right in cells[0].source for right, _ in edits)
    assert causes.known(cause) and not cause.startswith(("builds-on:", "mismatch")), cause
    with pytest.raises(CheckFailure) as told:
        check(grade_id, solution_namespace(assignment, {grade_id: edits}), quiet=True)
    assert told.value.cause_id == cause, told.value.message


def test_notebook_5_carries_notebook_4s_solution_engine_verbatim():
    """Notebook 5 trains on notebook 4's engine, copied into a given cell: a change to one must reach the other."""
    engine4 = solution_version(source_nb("04_tensor_engine"))
    given5 = "\n".join(c.source for c in source_nb("05_modules_mnist").cells
                       if c.cell_type == "code" and "def backprop(" in c.source)
    for cell in engine4.cells:
        meta = cell.metadata.get("nbgrader", {})
        carried = meta.get("grade_id") in ("apply_op", "operators", "topological_sort", "backprop")
        if carried or (cell.cell_type == "code" and ("def unbroadcast" in cell.source or "class Tensor:" in cell.source)):
            assert cell.source in given5, f"notebook 5's engine differs from notebook 4's solution near:\n{cell.source[:200]}"


# --------------------------------------------------------------------- the exercise pages a learner reads

EXERCISE_HEADING = re.compile(r"^### Exercise (\d+) — (.+) \((\d+) points?\)$", re.M)
EXERCISE_FACTS = re.compile(r"^> \*\*Difficulty\*\* ([1-5])/5 · \*\*Importance\*\* ([1-5])/5 · \*\*Time\*\* about (\d+) min · "
                            r"\*\*(Core|Stretch)\*\*$", re.M)
HINTS = ("Hint 1: a nudge", "Hint 2: the algorithm in words", "Hint 3: a skeleton")
QUESTION = re.compile(r"\*\*Question\b")


def exercise_pages(nb) -> dict[str, str]:
    """Exercise id -> the markdown between its heading and its answer cell (the page the learner reads)."""
    pages, text = {}, []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown":
            if EXERCISE_HEADING.search(cell.source):
                text = [cell.source[EXERCISE_HEADING.search(cell.source).start():]]
            else:
                text.append(cell.source)
        elif meta.get("solution") and not meta.get("grade"):
            pages[meta["grade_id"]] = "\n".join(text)
            text = []
    return pages


def test_every_exercise_has_a_numbered_heading_with_its_points_difficulty_time_and_kind(assignment):
    nb = source_nb(assignment)
    points = {meta["grade_id"][len(TEST_PREFIX):]: meta["points"] for meta in nbgrader_cells(nb) if meta.get("grade")}
    pages = exercise_pages(nb)
    assert set(pages) == set(points), f"exercises without a heading: {set(points) - set(pages)}"
    numbers = []
    for exercise, page in pages.items():
        heading = EXERCISE_HEADING.search(page)
        assert heading, f"{exercise}: no heading"
        assert int(heading.group(3)) == points[exercise], f"{exercise}: heading says {heading.group(3)} points"
        numbers.append(int(heading.group(1)))
        assert EXERCISE_FACTS.search(page), f"{exercise}: no '> **Difficulty** n/5 · **Importance** n/5 · ...' line"
    assert numbers == list(range(1, len(numbers) + 1)), f"exercises are numbered {numbers}"


def test_every_exercise_worth_two_points_or_more_has_three_progressive_hints(assignment):
    nb = source_nb(assignment)
    points = {meta["grade_id"][len(TEST_PREFIX):]: meta["points"] for meta in nbgrader_cells(nb) if meta.get("grade")}
    for exercise, page in exercise_pages(nb).items():
        if points[exercise] >= 2:
            found = [page.find(f"<summary>{hint}</summary>") for hint in HINTS]
            assert all(at >= 0 for at in found) and found == sorted(found), f"{exercise}: hints 1-3 in order"


def test_every_notebook_opens_with_outcomes_time_and_what_to_skip_and_guides_a_solo_learner(assignment):
    intro = source_nb(assignment).cells[0].source
    for phrase in ("What you will be able to do", "Total time", "Short of time", "Working alone"):
        assert phrase in intro, f"the opening cell has no '{phrase}'"


def test_every_question_has_an_answer_to_open(assignment):
    for cell in source_nb(assignment).cells:
        if cell.cell_type == "markdown":
            asked = len(QUESTION.findall(cell.source))
            answered = cell.source.count("<summary>Answer</summary>")
            assert answered >= asked, f"{asked} questions, {answered} answers in:\n{cell.source[:300]}"


def test_pairs_swap_at_least_every_second_exercise_and_each_box_once(assignment):
    since_swap = 0
    for cell in source_nb(assignment).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and not meta.get("grade"):
            since_swap += 1
            assert since_swap <= 2, f"three exercises in a row without a Swap roles box, up to {meta['grade_id']}"
        if cell.cell_type == "markdown" and "Swap roles" in cell.source:
            assert not re.search(r"Swap roles\.?\**\s*\**Swap roles", cell.source), cell.source[:200]
            since_swap = 0
