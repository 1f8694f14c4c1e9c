"""Notebook 1 checks: each wrong implementation is rejected with its own diagnosis; correct alternatives pass.

Test names carry the exercise id: test_<exercise id>_<what>.
"""
import math

import numpy as np
import pytest
import torch

from autograder import check
from conftest import learner, rejects


# ------------------------------------------------------------------------------------------- central_difference

def central(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


def central_as_mean_of_one_sided(f, x, h):
    return 0.5 * ((f(x + h) - f(x)) / h + (f(x) - f(x - h)) / h)


@pytest.mark.parametrize("answer", [central, central_as_mean_of_one_sided,
                                    lambda f, x, h: np.float64((f(x + h) - f(x - h)) / (h + h))])
def test_central_difference_accepts_correct_alternatives(answer, capsys):
    check("central_difference", learner("central_difference", answer))
    assert "all hidden checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("answer, phrases", [
    (lambda f, x, h: (f(x + h) - f(x)) / h, ["forward difference", "expected 12.01"]),
    (lambda f, x, h: (f(x) - f(x - h)) / h, ["backward difference"]),
    (lambda f, x, h: (f(x + h) - f(x - h)) / h, ["2h apart"]),
    (lambda f, x, h: (f(x + 1e-6) - f(x - 1e-6)) / 2e-6, ["ignores the h argument"]),
    (lambda f, x, h: np.array([central(f, x, h)]), ["single number"]),
    (lambda f, x, h: central(f, x, h) if abs(x - 2.0) < 1e-12 else 0.0, ["expected"]),  # fitted to the probe only
])
def test_central_difference_rejects_wrong_implementations(answer, phrases):
    rejects("central_difference", learner("central_difference", answer), *phrases)


def test_central_difference_reports_crash_with_the_input():
    def crashes(f, x, h):
        return f(x + h) / 0
    rejects("central_difference", learner("central_difference", crashes), "ZeroDivisionError", "x = 2.0")


# ------------------------------------------------------------------------------------------- numerical_gradient

def nudge_each(f, work, h):
    """Central differences element by element, nudging `work` in place and putting each element back."""
    grad = np.zeros(work.shape)
    for index in np.ndindex(work.shape):
        kept = work[index]
        work[index] = kept + h
        up = f(work)
        work[index] = kept - h
        down = f(work)
        work[index] = kept
        grad[index] = (up - down) / (2 * h)
    return grad


def gradient_by_index(f, x, h=1e-5):
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"need a float array, got {x.dtype}")
    return nudge_each(f, x.astype(np.float64), h)


def gradient_by_basis_vectors(f, x, h=1e-5):
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


@pytest.mark.parametrize("answer", [gradient_by_index, gradient_by_basis_vectors])
def test_numerical_gradient_accepts_correct_alternatives(answer):
    check("numerical_gradient", learner("numerical_gradient", answer))


def all_at_once(f, x, h=1e-5):
    x = x.astype(np.float64)
    return np.full(x.shape, (f(x + h) - f(x - h)) / (2 * h))


def flattened(f, x, h=1e-5):
    return gradient_by_index(f, x, h).ravel()


def never_restores(f, x, h=1e-5):
    if x.dtype.kind != "f":
        raise TypeError(f"dtype {x.dtype}")
    grad = np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        x[index] += h
        up = f(x)
        x[index] -= 2 * h
        grad[index] = (up - f(x)) / (2 * h)
    return grad


def drifting_copy(f, x, h=1e-5):
    if x.dtype.kind != "f":
        raise TypeError(f"dtype {x.dtype}")
    work = x.astype(np.float64)
    grad = np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        work[index] += h
        up = f(work)
        work[index] -= 2 * h  # ...and never put back
        grad[index] = (up - f(work)) / (2 * h)
    return grad


def accepts_integers(f, x, h=1e-5):
    return gradient_by_index(f, x.astype(np.float64), h)


def integer_error_without_dtype(f, x, h=1e-5):
    if x.dtype.kind != "f":
        raise TypeError("bad input")
    return gradient_by_index(f, x, h)


def keeps_float32(f, x, h=1e-5):
    if x.dtype.kind != "f":
        raise TypeError(f"dtype {x.dtype}")
    return nudge_each(f, x.copy(), h)  # nudges in the input's own dtype: float32 loses the nudge


@pytest.mark.parametrize("answer, phrases", [
    (all_at_once, ["whole array at once"]),
    (flattened, ["returned shape (6,)", "flattened"]),
    (never_restores, ["changed its input x"]),
    (drifting_copy, ["put back"]),
    (accepts_integers, ["int64 array was accepted"]),
    (integer_error_without_dtype, ["names the dtype"]),
    (lambda f, x, h=1e-5: (_ for _ in ()).throw(ValueError(f"bad dtype {x.dtype}")) if x.dtype.kind in "biu"
     else gradient_by_index(f, x, h), ["raise a TypeError, as the exercise asks"]),
    (keeps_float32, ["float32", "float64 copy"]),
    (lambda f, x, h=1e-5: [0.0], ["return a numpy array"]),
])
def test_numerical_gradient_rejects_wrong_implementations(answer, phrases):
    rejects("numerical_gradient", learner("numerical_gradient", answer), *phrases)


# ------------------------------------------------------------------------------------------- log_square_trace

def trace(x):
    e = x * x
    y = math.log(e)
    grad_e = 1.0 / e
    grad_x = grad_e * x
    grad_x += grad_e * x
    return {"e": e, "y": y, "grad_e": grad_e, "grad_x": grad_x}


def trace_both_edges_at_once(x):
    e = x * x
    grad_e = 1 / e
    return {"e": e, "y": np.log(e), "grad_e": grad_e, "grad_x": 2 * grad_e * x}


@pytest.mark.parametrize("answer", [trace, trace_both_edges_at_once])
def test_log_square_trace_accepts_correct_alternatives(answer):
    check("log_square_trace", learner("log_square_trace", answer))


def overwrites(x):
    result = trace(x)
    result["grad_x"] = result["grad_e"] * x  # `=` on the second edge: the first edge is lost
    return result


def log_rule_on_x(x):
    result = trace(x)
    result["grad_e"] = 1 / x
    result["grad_x"] = 2 * result["grad_e"] * x
    return result


def forgets_the_other_input(x):
    result = trace(x)
    result["grad_x"] = 2 * result["grad_e"]
    return result


@pytest.mark.parametrize("answer, phrases", [
    (overwrites, ["shared node", "+="]),
    (log_rule_on_x, ["its input is e = x*x"]),
    (forgets_the_other_input, ["the other input is x"]),
    (lambda x: (x * x, math.log(x * x)), ["return a dict"]),
    (lambda x: {**trace(x), "y": math.log(abs(x))}, ["forward pass"]),
])
def test_log_square_trace_rejects_wrong_implementations(answer, phrases):
    rejects("log_square_trace", learner("log_square_trace", answer), *phrases)


# ------------------------------------------------------------------------------------------- tanh_network_gradients

def by_chain_rule(x, w1, b1, w2, t):
    h = math.tanh(w1 * x + b1)
    g = 2 * (w2 * h - t)
    dz = g * w2 * (1 - h ** 2)
    return dz * x, dz, g * h


def with_sech_squared(x, w1, b1, w2, t):
    z = w1 * x + b1
    g = 2 * (w2 * math.tanh(z) - t)
    dz = g * w2 / math.cosh(z) ** 2
    return dz * x, dz, g * math.tanh(z)


def with_torch(x, w1, b1, w2, t):
    params = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (w1, b1, w2)]
    loss = (params[2] * torch.tanh(params[0] * x + params[1]) - t) ** 2
    loss.backward()
    return tuple(p.grad for p in params)


@pytest.mark.parametrize("answer", [by_chain_rule, with_sech_squared])
def test_tanh_network_gradients_accepts_correct_alternatives(answer):
    check("tanh_network_gradients", learner("tanh_network_gradients", answer))


def slip(change):
    """A chain-rule implementation with one step done wrong."""
    def wrong(x, w1, b1, w2, t):
        z = w1 * x + b1
        h = math.tanh(z)
        return change(x, z, h, 2 * (w2 * h - t), w2)
    return wrong


@pytest.mark.parametrize("answer, phrases", [
    (slip(lambda x, z, h, g, w2: (g / 2 * w2 * (1 - h * h) * x, g / 2 * w2 * (1 - h * h), g / 2 * h)), ["the 2 is missing"]),
    (slip(lambda x, z, h, g, w2: (-g * w2 * (1 - h * h) * x, -g * w2 * (1 - h * h), -g * h)), ["wrong sign"]),
    (slip(lambda x, z, h, g, w2: (g * w2 * (1 - z * z) * x, g * w2 * (1 - z * z), g * h)), ["1 - z²"]),
    (slip(lambda x, z, h, g, w2: (g * w2 * (1 - h) * x, g * w2 * (1 - h), g * h)), ["not 1 - h"]),
    (slip(lambda x, z, h, g, w2: (g * w2 * (1 - h * h), g * w2 * (1 - h * h), g * h)), ["dL/dw1 = dL/dz · x"]),
    (slip(lambda x, z, h, g, w2: (g * w2 * (1 - h * h) * x, g * w2 * (1 - h * h), g)), ["dL/dw2 = dL/dŷ · h"]),
    (slip(lambda x, z, h, g, w2: (g * (1 - h * h) * x, g * (1 - h * h), g * h)), ["skip the w2 edge"]),
    (slip(lambda x, z, h, g, w2: (g * h, g * w2 * (1 - h * h) * x, g * w2 * (1 - h * h))), ["wrong order"]),
    (lambda x, w1, b1, w2, t: (-3.2921, -2.1947, -3.0615), ["expected"]),  # hard-coded from the worked example
    (lambda x, w1, b1, w2, t: (1.0, 2.0), ["three numbers"]),
    # the exercise says not to use torch, and grading hides it: the learner's kernel must not accept it either
    (with_torch, ["is a torch Tensor", "by hand"]),
])
def test_tanh_network_gradients_rejects_wrong_implementations(answer, phrases):
    rejects("tanh_network_gradients", learner("tanh_network_gradients", answer), *phrases)


def test_every_notebook_1_exercise_has_a_check():
    from autograder.checks import exercise_ids
    assert {"central_difference", "numerical_gradient", "log_square_trace", "tanh_network_gradients"} <= set(exercise_ids())


# ------------------------------------------------------------------------------------------- found by red-teaming

def ignores_h(f, x, h=1e-5):
    return gradient_by_index(f, x, 1e-5)


def forward_gradient(f, x, h=1e-5):
    if x.dtype.kind != "f":
        raise TypeError(f"dtype {x.dtype}")
    work = x.astype(np.float64)
    grad = np.zeros(work.shape)
    base = f(work)
    for index in np.ndindex(work.shape):
        work[index] += h
        grad[index] = (f(work) - base) / h
        work[index] -= h
    return grad


def flat_view_trick(f, x, h=1e-5):
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


def refuses_only_int64(f, x, h=1e-5):
    if x.dtype == np.int64:
        raise TypeError("int64")
    return gradient_by_index(f, x.astype(np.float64), h)


def refuses_without_naming_dtype(f, x, h=1e-5):
    if x.dtype.kind != "f":
        raise TypeError("needs floating point input")  # 'point' contains 'int': naming the dtype means naming it
    return gradient_by_index(f, x, h)


@pytest.mark.parametrize("answer, phrases", [
    (ignores_h, ["ignores the h argument"]),
    (forward_gradient, ["forward difference"]),
    (lambda f, x, h: gradient_by_index(f, x, h), ["TypeError"]),  # no default h
    (lambda f, x, h=1e-5: gradient_by_index(f, x, h).astype(x.dtype), ["float64"]),
    (refuses_only_int64, ["int32 array was accepted"]),
    (refuses_without_naming_dtype, ["names the dtype"]),
    (flat_view_trick, ["transposed view"]),
    (lambda f, x, h=1e-5: np.zeros(x.shape) if x.size > 27 else gradient_by_index(f, x, h), ["received"]),
])
def test_numerical_gradient_rejects_red_team_answers(answer, phrases):
    rejects("numerical_gradient", learner("numerical_gradient", answer), *phrases)


def test_numerical_gradient_accepts_numpy_scalar_for_0d_input():
    def scalar_for_0d(f, x, h=1e-5):
        grad = gradient_by_index(f, x, h)
        return grad * 1.0  # numpy turns 0-d arithmetic into a np.float64 scalar
    check("numerical_gradient", learner("numerical_gradient", scalar_for_0d))


@pytest.mark.parametrize("answer, phrases", [
    (lambda f, x, h: 0.0 if abs(x) > 2 else central(f, x, h), ["expected"]),
    (lambda f, x, h: central(f, x, min(h, 0.1)), ["expected"]),
    (lambda f, x, h: np.float32(central(f, x, h)), ["float32", "float64"]),
])
def test_central_difference_rejects_red_team_answers(answer, phrases):
    rejects("central_difference", learner("central_difference", answer), *phrases)


def test_log_square_trace_names_a_sign_slip():
    rejects("log_square_trace", learner("log_square_trace", lambda x: {**trace(abs(x))}), "sign")


def test_tensor_that_requires_grad_is_a_diagnosis_not_a_crash():
    def tensors(x, w1, b1, w2, t):
        return tuple(torch.tensor(g, requires_grad=True) for g in by_chain_rule(x, w1, b1, w2, t))
    rejects("tanh_network_gradients", learner("tanh_network_gradients", tensors), "is a torch Tensor")


def test_tanh_slip_is_named_only_when_it_explains_both_probes():
    one_minus_z = slip(lambda x, z, h, g, w2: (g * w2 * (1 - z) * x, g * w2 * (1 - z), g * h))
    message = rejects("tanh_network_gradients", learner("tanh_network_gradients", one_minus_z), "expected")
    assert "1 - z²" not in message


def test_answer_that_changes_between_calls_is_diagnosed():
    calls = iter(range(10 ** 6))

    def sometimes_wrong(f, x, h):
        return central(f, x, h) * (1.5 if next(calls) == 30 else 1.0)
    rejects("central_difference", learner("central_difference", sometimes_wrong), "")


def test_the_h_slider_answers_state_what_the_slider_shows():
    """Notebook 1's answers to the h-slider questions quote measured errors (issue 12): they must stay true of
    labtools.nudging on the slider's own stops (10^-12 ... 1, every quarter decade)."""
    import nbformat

    from autograder.course import assignments
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
