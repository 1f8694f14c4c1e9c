"""Notebook 1 checks: each wrong implementation is rejected with its own diagnosis; correct alternatives pass.

Wrong implementations are small text edits of the solution notebook's own code, the way a learner's slip looks;
genuinely different correct (or wrong) implementations are extra code. Test names carry the exercise id:
test_<exercise id>_<what>.
"""
import numpy as np
import pytest

from autograder import check
from autograder.tools.solutions import solution_namespace
from conftest import rejects

NB = "01_nudging"


def nudging(edits=None, extra=""):
    return solution_namespace(NB, edits, extra)


def edited(exercise_id, *pairs):
    """The solution with (right, wrong) text edits in the answer cell of ``exercise_id``."""
    return nudging({exercise_id: list(pairs)})


@pytest.mark.parametrize("exercise", ["central_difference", "numerical_gradient", "log_square_trace",
                                      "tanh_network_gradients"])
def test_solution_passes(exercise):
    check(exercise, nudging())


def test_every_notebook_1_exercise_has_a_check():
    from autograder.checks import exercise_ids
    assert {"central_difference", "numerical_gradient", "log_square_trace", "tanh_network_gradients"} <= set(exercise_ids())


# ------------------------------------------------------------------------------------------- central_difference

CENTRAL = "return (f(x + h) - f(x - h)) / (2 * h)"


@pytest.mark.parametrize("extra", [
    "def central_difference(f, x, h):\n    return 0.5 * ((f(x + h) - f(x)) / h + (f(x) - f(x - h)) / h)\n",
    "def central_difference(f, x, h):\n    return np.float64((f(x + h) - f(x - h)) / (h + h))\n",  # np.float64 is a float
    # red team 9: a float of the learner's own class failed the grade alone, as "wrong-type"
    "class Slope(float):\n    pass\n\n\ndef central_difference(f, x, h):\n    return Slope((f(x + h) - f(x - h)) / (2 * h))\n",
    # red team 9: warnings made errors during one call failed the next call in the kernel alone
    "import warnings\n\n\ndef central_difference(f, x, h):\n    if h > 1e-3:\n        warnings.warn('a coarse nudge')\n"
    "    warnings.simplefilter('error')\n    return (f(x + h) - f(x - h)) / (2 * h)\n",
])
def test_central_difference_accepts_correct_alternatives(extra, capsys):
    check("central_difference", nudging(extra=extra))
    assert "all hidden checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, phrases", [
    ("return (f(x + h) - f(x)) / h", ["forward difference", "expected 12.01",
         "cause: central_difference/forward-difference"]),
    ("return (f(x) - f(x - h)) / h", ["backward difference", "cause: central_difference/backward-difference"]),
    ("return (f(x + h) - f(x - h)) / h", ["2h apart", "cause: central_difference/divides-by-h"]),
    ("return (f(x + h) - f(x - h)) / 2 * h", ["multiplied by h²", "/ (2 * h)", "received 0.1201",
         "cause: central_difference/operator-precedence"]),
    ("return (f(x + 1e-6) - f(x - 1e-6)) / 2e-6", ["ignores the h argument", "cause: central_difference/ignores-h"]),
    ("return np.array([(f(x + h) - f(x - h)) / (2 * h)])", ["single number", "cause: wrong-shape"]),
    ("return np.asarray((f(x + h) - f(x - h)) / (2 * h))", ["0-d numpy array", "returns a float"]),  # audit 14
    ("return np.float32((f(x + h) - f(x - h)) / (2 * h))", ["float32", "float64", "cause: wrong-dtype"]),
    ("return (f(x + h) - f(x - h)) / 0", ["ZeroDivisionError", "x = 2.0", "cause: crash"]),
    ("return 0.0 if abs(x - 2.0) > 1e-12 else (f(x + h) - f(x - h)) / (2 * h)", ["expected"]),  # fitted to the probe
    ("return 0.0 if abs(x) > 2 else (f(x + h) - f(x - h)) / (2 * h)", ["expected"]),
    ("h = min(h, 0.1)\n    return (f(x + h) - f(x - h)) / (2 * h)", ["expected"]),
    ("raise NotImplementedError()", ["`central_difference` is not written yet", "cause: stub"]),
])
def test_central_difference_rejects(wrong, phrases):
    rejects("central_difference", edited("central_difference", (CENTRAL, wrong)), *phrases)


def test_central_difference_answer_that_changes_between_calls_is_diagnosed():
    extra = '''
_calls = iter(range(10 ** 6))
_right = central_difference

def central_difference(f, x, h):
    return _right(f, x, h) * (1.5 if next(_calls) == 30 else 1.0)
'''
    rejects("central_difference", nudging(extra=extra), "different answers", "cause: nondeterministic")


# ------------------------------------------------------------------------------------------- numerical_gradient

COPY = "work = x.astype(np.float64)"
CHECK_DTYPE = "if not np.issubdtype(x.dtype, np.floating):"
TYPE_ERROR = '''raise TypeError(f"numerical_gradient needs a floating-point array, got dtype {x.dtype}: "
                        f"an integer array would truncate x + {h} back to x")'''
NUDGES = '''        work[index] = original + h
        up = f(work)
        work[index] = original - h
        down = f(work)
'''
RESTORE = "        work[index] = original\n"

BY_BASIS_VECTORS = '''
def numerical_gradient(f, x, h=1e-5):
    if x.dtype.kind != "f":
        raise TypeError(f"dtype {x.dtype} cannot hold a nudge of {h}")
    base = x.astype(np.float64)
    grad = np.empty(base.size)
    for i in range(base.size):
        step = np.zeros(base.size)
        step[i] = h
        step = step.reshape(base.shape)
        grad[i] = (f(base + step) - f(base - step)) / (2 * h)
    return grad.reshape(base.shape)
'''

FLAT_VIEW_TRICK = '''
def numerical_gradient(f, x, h=1e-5):
    if x.dtype.kind != "f":
        raise TypeError(f"dtype {x.dtype}")
    work = np.array(x, dtype=np.float64)
    flat = work.reshape(-1)  # a copy, not a view, when work is not C-contiguous
    grad = np.zeros(flat.size)
    for i in range(flat.size):
        flat[i] += h
        up = f(work)
        flat[i] -= 2 * h
        grad[i] = (up - f(work)) / (2 * h)
        flat[i] += h
    return grad.reshape(work.shape)
'''


@pytest.mark.parametrize("edits, extra", [
    ([], BY_BASIS_VECTORS),
    ([("return grad", "return grad * 1.0")], ""),  # a np.float64 scalar for 0-d x: the page allows it (audit 14)
    ([(COPY, "work = np.array(x, dtype=np.float64)")], ""),
    ([("    grad = np.zeros_like(work)\n",
       "    grad = np.zeros_like(work)\n    f(x)  # looks at the caller's x, untouched\n")], ""),
], ids=["basis vectors", "numpy scalar for 0-d x", "np.array copy", "reads the caller's x"])
def test_numerical_gradient_accepts_correct_alternatives(edits, extra):
    check("numerical_gradient", nudging({"numerical_gradient": edits}, extra))


@pytest.mark.parametrize("pairs, phrases", [
    ([(NUDGES, "        up = f(work + h)\n        down = f(work - h)\n")], ["whole array at once",
         "cause: numerical_gradient/nudges-all-at-once"]),
    ([("return grad", "return grad.ravel()")], ["returned shape (6,)", "flattened"]),
    ([(COPY, "work = x"), (RESTORE, "")], ["changed its input x", "cause: changed-input"]),
    ([(RESTORE, "")], ["later entries drift", "put back", "cause: numerical_gradient/element-not-restored"]),
    ([(CHECK_DTYPE, "if False:")], ["int64 array was accepted"]),
    ([(TYPE_ERROR, 'raise TypeError("bad input")')], ["names the dtype"]),
    ([(TYPE_ERROR, 'raise TypeError("needs floating point input")')], ["names the dtype"]),  # 'point' holds 'int'
    ([("raise TypeError(", "raise ValueError(")], ["raise a TypeError, as the exercise asks"]),
    ([(CHECK_DTYPE, "if x.dtype == np.int64:")], ["int32 array was accepted"]),
    ([(COPY, "work = x.copy()"), ("grad = np.zeros_like(work)", "grad = np.zeros(work.shape)")],
     ["float32", "float64 copy", "cause: numerical_gradient/nudges-in-float32"]),
    ([("return grad", "return grad.tolist()")], ["return a numpy array"]),
    ([("return grad", "return grad.astype(x.dtype)")], ["float64"]),
    ([("    x = np.asarray(x)\n", "    x = np.asarray(x)\n    h = 1e-5\n")], ["ignores the h argument",
         "cause: numerical_gradient/ignores-h"]),
    ([("grad[index] = (up - down) / (2 * h)", "grad[index] = (up - f(work)) / h")], ["forward difference",
         "cause: numerical_gradient/forward-difference"]),
    ([("def numerical_gradient(f, x, h=1e-5):", "def numerical_gradient(f, x, h):")], ["TypeError"]),
    ([("return grad", "return grad if x.size <= 27 else np.zeros(x.shape)")], ["received"]),
    # audit 14: what the page states and the check now verifies
    ([("def numerical_gradient(f, x, h=1e-5):", "def numerical_gradient(f, x, h=1e-4):")],
     ["nudged x by 0.0001", "h=1e-5"]),
    ([("def numerical_gradient(f, x, h=1e-5):", "def numerical_gradient(f, x, h=1e-6):")], ["nudged x by 1e-06"]),
    ([(COPY, "work = x if x.dtype == np.float64 else x.astype(np.float64)")],
     ["tried to write into x", "float64 copy"]),
    ([(COPY, "work = x if x.dtype == np.float64 else x.astype(np.float64)"), ("up = f(work)", "up = f(work.copy())"),
      ("down = f(work)", "down = f(work.copy())")], ["read-only x", "tried to write into x"]),
    ([(CHECK_DTYPE, 'if x.dtype.kind in "iub":')], ["complex128 array was accepted", "TypeError"]),
])
def test_numerical_gradient_rejects(pairs, phrases):
    rejects("numerical_gradient", edited("numerical_gradient", *pairs), *phrases)


def test_numerical_gradient_rejects_a_flattened_copy_of_a_transposed_view():
    rejects("numerical_gradient", nudging(extra=FLAT_VIEW_TRICK), "transposed view")


# ------------------------------------------------------------------------------------------- log_square_trace

@pytest.mark.parametrize("pairs", [
    [("grad_x = grad_e * x        # first edge", "grad_x = 2 * grad_e * x  # both edges"),
     ("    grad_x += grad_e * x       # second edge into the same x: accumulate\n", "")],
    [("y = math.log(e)", "y = np.log(e)")],
    [('return {"e": e, "y": y, "grad_e": grad_e, "grad_x": grad_x}',
      'from collections import OrderedDict\n    return OrderedDict(e=e, y=y, grad_e=grad_e, grad_x=grad_x)')],
], ids=["both edges in one line", "np.log", "an OrderedDict"])
def test_log_square_trace_accepts_correct_alternatives(pairs):
    check("log_square_trace", edited("log_square_trace", *pairs))


@pytest.mark.parametrize("pairs, phrases", [
    ([("grad_x += grad_e * x", "grad_x = grad_e * x")], ["shared node", "+=", "cause: log_square_trace/one-edge"]),
    ([("grad_e = grad_y * (1 / e)", "grad_e = grad_y * (1 / x)")], ["its input is e = x*x",
         "cause: log_square_trace/log-derivative-at-x"]),
    ([("grad_x = grad_e * x        #", "grad_x = grad_e            #"), ("grad_x += grad_e * x", "grad_x += grad_e")],
     ["the other input is x", "cause: log_square_trace/wrong-other-input"]),
    ([('return {"e": e, "y": y, "grad_e": grad_e, "grad_x": grad_x}', "return e, y")], ["return a dict"]),
    ([("y = math.log(e)", "y = math.log(abs(x))")], ["forward pass", "cause: log_square_trace/y-of-x"]),
    ([("    e = x * x\n", "    x = abs(x)\n    e = x * x\n")], ["sign", "cause: log_square_trace/sign"]),
])
def test_log_square_trace_rejects(pairs, phrases):
    rejects("log_square_trace", edited("log_square_trace", *pairs), *phrases)


# ------------------------------------------------------------------------------------------- tanh_network_gradients

RETURN = "return grad_z * x, grad_z, grad_w2"
LOCAL_TANH = "grad_z = grad_h * (1 - h * h)"


@pytest.mark.parametrize("pair", [
    (LOCAL_TANH, "grad_z = grad_h / math.cosh(z) ** 2"),
    (RETURN, f"from collections import namedtuple\n    return namedtuple('Grads', 'dw1 db1 dw2')({RETURN[7:]})"),
], ids=["sech squared", "a namedtuple"])
def test_tanh_network_gradients_accepts_correct_alternatives(pair):
    check("tanh_network_gradients", edited("tanh_network_gradients", pair))


def test_a_check_gives_its_torch_references_torchs_defaults_whatever_the_notebook_set():
    """Red team 9: ``torch.set_grad_enabled(False)`` in an answer cell made the check's own torch reference raise in
    the kernel ("the check could not use your answer"); the grader's torch is untouched. The notebook's settings
    are its own again after the check."""
    import torch

    torch.set_grad_enabled(False)
    torch.set_default_dtype(torch.float64)
    try:
        check("tanh_network_gradients", nudging())
        assert not torch.is_grad_enabled() and torch.get_default_dtype() == torch.float64
    finally:
        torch.set_grad_enabled(True)
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("right, wrong, phrases", [
    ("2 * (y_hat - t)", "(y_hat - t)", ["the 2 is missing", "cause: tanh_network_gradients/loss-derivative-halved"]),
    ("2 * (y_hat - t)", "2 * (t - y_hat)", ["wrong sign", "cause: tanh_network_gradients/sign"]),
    (LOCAL_TANH, "grad_z = grad_h * (1 - z * z)", ["1 - z²", "cause: tanh_network_gradients/input-for-output"]),
    (LOCAL_TANH, "grad_z = grad_h * (1 - h)", ["not 1 - h", "cause: tanh_network_gradients/not-squared"]),
    (RETURN, "return grad_z, grad_z, grad_w2", ["dL/dw1 = dL/dz · x", "cause: tanh_network_gradients/w1-without-x"]),
    ("grad_w2 = grad_y_hat * h", "grad_w2 = grad_y_hat", ["dL/dw2 = dL/dŷ · h",
         "cause: tanh_network_gradients/w2-without-h"]),
    ("grad_h = grad_y_hat * w2", "grad_h = grad_y_hat", ["skip the w2 edge", "cause: tanh_network_gradients/skips-w2"]),
    (RETURN, "return grad_w2, grad_z * x, grad_z", ["wrong order", "cause: tanh_network_gradients/wrong-order"]),
    (RETURN, "return -3.2921, -2.1947, -3.0615", ["expected"]),  # hard-coded from the worked example
    (RETURN, "return grad_z * x, grad_z", ["three numbers"]),
    (RETURN, "pass", ["three numbers", "got None"]),
    (RETURN, "return [grad_z * x, grad_z, grad_w2]", ["return the tuple", "got a list"]),  # audit 14
])
def test_tanh_network_gradients_rejects(right, wrong, phrases):
    rejects("tanh_network_gradients", edited("tanh_network_gradients", (right, wrong)), *phrases)


def test_tanh_slip_is_named_only_when_it_explains_both_probes():
    # 1 - z equals 1 - z² at the worked example (z = 1), but not at the second point
    message = rejects("tanh_network_gradients", edited("tanh_network_gradients", (LOCAL_TANH, "grad_z = grad_h * (1 - z)")),
                      "expected")
    assert "1 - z²" not in message


@pytest.mark.parametrize("requires_grad", [False, True])
def test_tanh_network_gradients_rejects_torch(requires_grad):
    # the exercise says not to use torch, and grading hides it: the learner's kernel must not accept it either
    extra = f'''
def tanh_network_gradients(x, w1, b1, w2, t):
    params = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (w1, b1, w2)]
    loss = (params[2] * torch.tanh(params[0] * x + params[1]) - t) ** 2
    loss.backward()
    return tuple(p.grad.clone().requires_grad_({requires_grad}) for p in params)
'''
    rejects("tanh_network_gradients", nudging(extra=extra), "is a torch Tensor", "cause: wrong-type")


# ------------------------------------------------------------------------------------------- the h slider

def test_the_h_slider_answers_state_what_the_slider_shows():
    """Notebook 1's answers to the h-slider questions quote measured errors: they must stay true of
    labtools.nudging on the slider's own stops (10^-12 ... 1, every quarter decade)."""
    import nbformat

    from autograder.contract import assignments
    from labtools.nudging import slope_errors

    answers = next(c.source for c in nbformat.read(assignments()["01_nudging"], as_version=4).cells
                   if "**Question 2.**" in c.source)
    stops = 10.0 ** np.arange(-12, 0.01, 0.25)
    f64, f32 = slope_errors(stops, np.float64), slope_errors(stops, np.float32)
    best = int(np.argmin(f64["central"]))
    assert "best value is `h = 1e-5`, with an error of about `4.4e-12`" in answers
    assert np.isclose(stops[best], 1e-5) and f"{f64['central'][best]:.1e}" == "4.4e-12"
    at = int(np.argmin(abs(stops - 1e-10)))
    assert "about `5.5e-8`, for both" in answers
    assert f64["central"][at] == f64["forward"][at] and f"{f64['central'][at]:.1e}" == "5.5e-08"
    best32 = int(np.argmin(f32["central"]))
    assert "best stop is `h = 1e-2` with an error of about `6e-7`" in answers
    assert np.isclose(stops[best32], 1e-2) and f"{f32['central'][best32]:.0e}" == "6e-07"
    assert "3 + h` rounds back to exactly `3` in `float32`" in answers
    assert np.float32(3) + np.float32(1.1e-7) == np.float32(3)
