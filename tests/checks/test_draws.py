"""A check draws the same cases whatever else its process has imported.

Hypothesis now and then hands a strategy a literal from the source of a loaded "local" module (one outside
site-packages), and with an editable install the course's own modules are local: importing nbgrader's preprocessors
or the class run changed the cases one seed drew. autograder.checks.harness.diagnostics turns that off. Each draw
compared runs in a fresh interpreter, since what a process has collected stays for its life.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
HEAVY = "import autograder.course.preprocessors, autograder.grade.class_run"
# Integers in the ranges numerical_gradient draws from (an array's seed is one of 0..2**16): in a draw's pool, they
# change its cases for sure, whatever literals the course's own modules happen to hold.
LITERALS = list(range(101, 65536, 67))


def numerical_gradient_cases() -> dict:
    """The inputs numerical_gradient's check calls a correct answer with: derandomized (a learner's kernel), then
    under a trusted grade's case seed."""
    from autograder.checks import check
    from autograder.checks.harness.diagnostics import case_seed

    seen = []

    def numerical_gradient(f, x, h=1e-5):
        if not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"x has dtype {x.dtype}")
        seen.append([list(x.shape), x.ravel().tolist(), h])
        grad, work = np.zeros(x.shape), np.array(x, dtype=np.float64)
        for i in np.ndindex(x.shape):
            up, down = work.copy(), work.copy()
            up[i] += h
            down[i] -= h
            grad[i] = (f(up) - f(down)) / (2 * h)
        return grad

    check("numerical_gradient", {"numerical_gradient": numerical_gradient}, quiet=True)
    derandomized = list(seen)
    seen.clear()
    with case_seed(20261202):
        check("numerical_gradient", {"numerical_gradient": numerical_gradient}, quiet=True)
    return {"derandomized": derandomized, "seeded": seen}


def drawn_afresh(tmp_path, before: str = "") -> dict:
    """numerical_gradient_cases() in a new interpreter that first runs ``before``."""
    program = f"{before}\nimport json, sys\nsys.path.insert(0, {str(HERE)!r})\nimport test_draws\n" \
              "print(json.dumps(test_draws.numerical_gradient_cases()))"
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow  # three interpreters that import torch, one nbgrader too: about 10 CPU seconds
def test_a_checks_cases_do_not_depend_on_what_else_is_imported(tmp_path):
    local = tmp_path / "local"
    local.mkdir()
    (local / "planted_literals.py").write_text(f"LITERALS = {LITERALS!r}\n")
    alone = drawn_afresh(tmp_path)
    assert len(alone["derandomized"]) > 60 and alone["seeded"] != alone["derandomized"]
    assert drawn_afresh(tmp_path, HEAVY) == alone, "importing the preprocessors and the class run changed the cases"
    planted = drawn_afresh(tmp_path, f"import sys; sys.path.insert(0, {str(local)!r}); import planted_literals")
    assert planted == alone, "a local module's literals changed the cases"


def test_literals_in_hypothesis_pool_would_change_the_cases(monkeypatch):
    """The comparison above can fail: hypothesis's own collection, given those literals, draws other cases (of one
    kind or both). (If this fails, hypothesis no longer consults that pool, and the course's fix may be dead code.)"""
    from hypothesis.internal.conjecture import providers

    plain = numerical_gradient_cases()
    monkeypatch.setattr(providers, "_get_local_constants", lambda: providers.Constants(integers=set(LITERALS)))
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        planted = numerical_gradient_cases()
    finally:
        providers.CONSTANTS_CACHE.cache.clear()  # the next draw builds its pools from the course's empty set again
    # One kind differing is enough for the comparison above (of both kinds at once) to fail. Which kind differs
    # depends on the seed hypothesis derives from the check's own code, which changes as the check does.
    assert planted != plain
