"""`python -m autograder grade`: exit codes, JSON shape, diagnoses, and feedback without hidden code."""
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import REPO, learner_notebook, solution_notebook

NB = "01_nudging"


def grade(path, *flags, cell_timeout_s: int | None = None):
    env = {**os.environ, **({"BACKPROP_CELL_TIMEOUT_S": str(cell_timeout_s)} if cell_timeout_s else {})}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), *flags],
                          cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    return done.returncode, done.stdout, done.stderr


def with_answers(answers: dict[str, str]):
    """The learner notebook with some answer cells replaced by the given code."""
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    return nb


@pytest.mark.slow
def test_full_marks_exit_0_and_json_shape():
    code, out, _ = grade(solution_notebook(NB), "--json")
    report = json.loads(out)
    assert code == 0
    assert set(report) == {"notebook", "score", "max_score", "exercises"}
    assert report["score"] == report["max_score"] == 10
    for exercise in report["exercises"]:
        assert set(exercise) == {"id", "score", "max_score", "passed", "message", "cause", "input"}
        assert exercise["passed"] and exercise["message"] == "" and exercise["cause"] is None
    assert [e["id"] for e in report["exercises"]] == \
        ["central_difference", "numerical_gradient", "log_square_trace", "tanh_network_gradients"]


@pytest.mark.slow
def test_untouched_notebook_scores_zero_and_exits_1():
    code, out, _ = grade(learner_notebook(NB))
    assert code == 1
    assert "0 / 10 points" in out
    for exercise in ("central_difference", "numerical_gradient", "log_square_trace", "tanh_network_gradients"):
        assert f"`{exercise}` is not written yet" in out  # named although it ran in the sandboxed worker


MISBEHAVING = {
    # Loops only for large nudges, as the hidden probe uses: other cells that call it still finish.
    "central_difference": ("def central_difference(f, x, h):\n    while h > 0.01:\n        pass\n"
                           "    return (f(x + h) - f(x - h)) / (2 * h)\n"),
    "numerical_gradient": ("def numerical_gradient(f, x, h=1e-5):\n"
                           "    x = np.asarray(x, dtype=np.float64)\n"
                           "    if x.dtype.kind != 'f':\n        raise TypeError(str(x.dtype))\n"
                           "    return np.array([(f(x + h * e.reshape(x.shape)) - f(x - h * e.reshape(x.shape))) / (2 * h)\n"
                           "                     for e in np.eye(x.size)])\n"),
    "log_square_trace": ("def log_square_trace(x):\n    e = x * x\n    y = math.log(e)\n    grad_e = 1 / e\n"
                         "    grad_x = grad_e * x\n    grad_x = grad_e * x\n"
                         "    return {'e': e, 'y': y, 'grad_e': grad_e, 'grad_x': grad_x}\n"),
    "tanh_network_gradients": "def tanh_network_gradients(x, w1, b1, w2, t):\n    return 1 / 0\n",
}


@pytest.mark.slow
def test_misbehaving_functions_are_each_diagnosed_and_feedback_hides_hidden_tests(tmp_path):
    path = tmp_path / "submission.ipynb"
    nbformat.write(with_answers(MISBEHAVING), path)
    feedback = tmp_path / "feedback.html"
    # The visible test calls central_difference with h = 0.1 too, so the kernel's cell runs into its time limit:
    # 20 s instead of the course's 120 s keeps this test short and changes nothing it looks at.
    code, out, _ = grade(path, "--json", "--feedback", str(feedback), cell_timeout_s=20)
    assert code == 1
    exercises = json.loads(out)["exercises"]
    messages = {e["id"]: e["message"] for e in exercises}
    assert "did not finish within" in messages["central_difference"]
    assert "flattened" in messages["numerical_gradient"]
    assert "shared node" in messages["log_square_trace"]
    assert "ZeroDivisionError" in messages["tanh_network_gradients"]
    assert {e["id"]: e["cause"] for e in exercises} == {
        "central_difference": "timeout", "numerical_gradient": "wrong-shape",
        "log_square_trace": "log_square_trace/one-edge", "tanh_network_gradients": "crash"}
    assert all(m.endswith(f"\ncause: {e['cause']}") for m, e in zip(messages.values(), exercises))
    # the input each failed on, as data: the call that ran out of time, the probe, the call that raised
    assert {e["id"]: e["input"] for e in exercises} == {
        "central_difference": "f(x) = x**3, x = 2.0, h = 0.1", "numerical_gradient": None,
        "log_square_trace": "x = 3.0: grad_x", "tanh_network_gradients": "(x, w1, b1, w2, t) = 1.5, 0.8, -0.2, 1.3, 3"}
    html = feedback.read_text()
    assert "shared node" in html and "cause: log_square_trace/one-edge" in html  # the diagnosis reaches the page...
    for hidden in ("HIDDEN TESTS", "from autograder import check", 'check("'):
        assert hidden not in html  # ...but the hidden code does not


def test_missing_file_exits_2(tmp_path):
    code, _, err = grade(tmp_path / "nothing.ipynb")
    assert code == 2 and "no such file" in err


def test_file_that_is_not_json_exits_2(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [')
    code, _, err = grade(path)
    assert code == 2 and "not a readable Jupyter notebook" in err
    assert "Traceback" not in err


def test_an_unusable_notebook_still_gives_one_json_object_with_the_reason(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [')
    code, out, _ = grade(path, "--json")
    report = json.loads(out)
    assert code == 2 and "not a readable Jupyter notebook" in report["error"]
    assert report["notebook"] == str(path) and report["score"] is None and report["exercises"] == []


@pytest.mark.parametrize("kind", ["link", "pipe"])
def test_a_link_or_a_named_pipe_exits_2_without_reading_it(tmp_path, kind):
    """A link to the course's source notebook would be graded as the solution; a named pipe would never end."""
    path = tmp_path / f"{kind}.ipynb"
    path.symlink_to(REPO / "source" / NB / f"{NB}.ipynb") if kind == "link" else os.mkfifo(path)
    code, out, err = grade(path, "--json")
    said = {"link": "is a symbolic link", "pipe": "is a named pipe (FIFO), not a file"}[kind]
    assert code == 2 and said in err and "Traceback" not in err
    assert said in json.loads(out)["error"] and "BEGIN SOLUTION" not in out + err


def test_notebook_of_no_assignment_exits_2(tmp_path):
    path = tmp_path / "other.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    code, _, err = grade(path)
    assert code == 2 and "not a notebook of this course" in err


def test_notebook_with_deleted_test_cell_exits_2(tmp_path):
    nb = nbformat.read(learner_notebook(NB), as_version=4)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_numerical_gradient"]
    path = tmp_path / "deleted.ipynb"
    nbformat.write(nb, path)
    code, _, err = grade(path)
    assert code == 2 and "deleted" in err and "test_numerical_gradient" in err


@pytest.mark.slow
def test_nbgrader_validate_is_honest_on_an_untouched_and_a_solved_notebook():
    """JupyterLab's Validate button runs `nbgrader validate`: it must fail an untouched notebook on every exercise,
    naming the stub, and pass a solved one."""
    def validate(path):
        return subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "validate", str(path)], cwd=REPO,
                              capture_output=True, text=True, timeout=600).stdout

    untouched = validate(learner_notebook(NB))
    assert "VALIDATION FAILED ON 4 CELL(S)" in untouched
    assert untouched.count("is not written yet") == 4
    assert "Success! Your notebook passes all the tests." in validate(solution_notebook(NB))


def test_rebuilding_an_unknown_notebook_is_refused_with_the_names_there_are():
    done = subprocess.run([sys.executable, "-m", "autograder", "solutions", "notebooks/09_nothing/09_nothing.ipynb"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no assignment 09_nothing" in done.stderr and "01_nudging" in done.stderr


def test_a_notebook_nbformat_does_not_accept_exits_2_with_one_line(tmp_path):
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    nb.cells[1].source = 5  # nbformat reads it; nbgrader would fail on it with a traceback
    path = tmp_path / "invalid.ipynb"
    path.write_text(json.dumps(nb))
    code, _, err = grade(path)
    assert code == 2 and "Traceback" not in err
    assert err.startswith("cannot grade: ") and "ValidationError" in err and len(err.strip().splitlines()) == 1
