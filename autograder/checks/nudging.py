"""Checks for notebook 1, "Derivatives by nudging".

Each check first runs fixed probes whose wrong answers identify a known misconception, then randomized cases
(hypothesis, shrunk to the smallest failing input) compared with torch.autograd in float64 and with central
differences. Worked numbers come from the course seeds: log(x*x) at x = 3 has slope 2/3, and the tanh network
at (x, w1, b1, w2, t) = (1.5, 0.8, -0.2, 1.3, 3.0) has gradients (-3.2921, -2.1947, -3.0615).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, strategies as st

from autograder.checks import causes
from autograder.checks.registry import exercise
from autograder.checks.harness.diagnostics import (AGAINST_DIFFERENCES, AGAINST_TORCH, FLOAT32_INPUTS, RANDOM_CASES,
                                    SAME_ARITHMETIC, CheckFailure, Probe, Slip, Tolerance, as_float, call_learner,
                                    close, described, fmt, run_probes)
from autograder.checks.harness.oracles import central_differences, torch_gradients

# Smooth scalar functions written once for both numpy (floats) and torch (tensors): `m` is the module.
SCALAR_FUNCTIONS = {
    "sin(3x) + x**2": lambda m, x: m.sin(3 * x) + x ** 2,
    "exp(x/2) * x": lambda m, x: m.exp(x / 2) * x,
    "tanh(x)**3": lambda m, x: m.tanh(x) ** 3,
    "x**3 - 2x": lambda m, x: x ** 3 - 2 * x,
}

# The same central difference computed in another order (x + h·e_i, (up - down) / 2 / h, ...): the round-off of f,
# ~ε·|f| / h, differs between the two, and reaches ~1e-9 for |f| ~ 400 at h = 1e-4.
SAME_DIFFERENCE = Tolerance(1e-8, 1e-9)


# ---------------------------------------------------------------------------------------------- central_difference

FORWARD = causes.declare("central_difference/forward-difference", "(f(x+h) - f(x)) / h, one-sided")
BACKWARD = causes.declare("central_difference/backward-difference", "(f(x) - f(x-h)) / h, one-sided")
BY_H = causes.declare("central_difference/divides-by-h", "the central difference divided by h, not 2h")
PRECEDENCE = causes.declare("central_difference/operator-precedence", "`/ 2 * h` where `/ (2 * h)` is meant")
IGNORES_H = causes.declare("central_difference/ignores-h", "a nudge of its own, not the h it was given")


@exercise("central_difference")
def check_central_difference(central_difference) -> None:
    ex = "central_difference"

    def run(f, x, h, shown):
        result = call_learner(ex, central_difference, f, x, h, shown_input=shown)
        slope = as_float(ex, result, "the slope")
        if not isinstance(result, float):  # np.float64 is a float; a 0-d array or an int is not
            what = "a 0-d numpy array" if isinstance(result, np.ndarray) else f"a {type(result).__name__}"
            raise CheckFailure(ex, f"{shown}: the slope came back as {what} ({fmt(slope)}); the exercise returns a "
                                   "float. Divide numbers, not arrays, or convert with float(...).",
                               cause_id=causes.WRONG_TYPE)
        return slope

    # Probe: a cubic at a large h makes every one-sided or mis-scaled formula land on its own number. The slips are 0.01
    # or more apart, so they are told apart as differences; the random cases below hold the answer to SAME_DIFFERENCE.
    cube = lambda x: x ** 3
    x, h = 2.0, 0.1
    shown = "f(x) = x**3, x = 2.0, h = 0.1"
    right = (cube(x + h) - cube(x - h)) / (2 * h)  # 12.01
    run_probes(ex, [Probe(shown, lambda: run(cube, x, h, shown), right, slips=(
        Slip((cube(x + h) - cube(x)) / h,
             "this is the forward difference (f(x+h) - f(x)) / h. Its error shrinks only like h; nudging both ways, "
             "(f(x+h) - f(x-h)) / (2h), cancels the curvature term and the error shrinks like h².", FORWARD),
        Slip((cube(x) - cube(x - h)) / h,
             "this is the backward difference (f(x) - f(x-h)) / h. Nudge both ways: (f(x+h) - f(x-h)) / (2h).",
             BACKWARD),
        Slip((cube(x + h) - cube(x - h)) / h,
             "twice the slope: the two nudged points x-h and x+h are 2h apart, so divide by 2h, not h.", BY_H),
        Slip(right * h * h,
             "the right slope multiplied by h²: `... / 2 * h` divides by 2 and then multiplies by h, since Python "
             "evaluates / and * from left to right. Write `/ (2 * h)`.", PRECEDENCE),
        Slip(12.0, "your result ignores the h argument: with h = 0.1 the central difference of x**3 at 2 is 12.01 "
                   "(it carries an h² error on purpose), not the true slope 12.", IGNORES_H),
    ), tolerance=AGAINST_DIFFERENCES)])

    @RANDOM_CASES
    @given(name=st.sampled_from(sorted(SCALAR_FUNCTIONS)), x=st.floats(-20, 20),
           h=st.sampled_from([1.0, 0.5, 1e-1, 1e-2, 1e-3, 1e-4]))
    def random_case(name, x, h):
        fn = SCALAR_FUNCTIONS[name]
        shown = f"f(x) = {name}, x = {x!r}, h = {h!r}"
        got = run(lambda v: fn(np, v), x, h, shown)
        reference = central_differences(lambda v: fn(np, v), x, h=h)[0]
        exact = torch_gradients(lambda v: fn(torch, v), x)[0]
        if not close(got, reference, SAME_DIFFERENCE):
            raise CheckFailure(ex, f"{shown}: expected {fmt(float(reference))}, received {fmt(got)}.", input=shown)
        # With a small nudge the measured slope must also match the true derivative (torch.autograd, float64).
        if h <= 1e-3 and not close(got, exact, AGAINST_DIFFERENCES):
            raise CheckFailure(ex, f"{shown}: the true derivative is {fmt(float(exact))}, received {fmt(got)}.",
                               input=shown)

    random_case()


# ---------------------------------------------------------------------------------------------- numerical_gradient

# Scalar-valued functions of a whole array, each with fixed weights so every element matters differently.
def _array_functions(shape):
    weights = np.linspace(-1.5, 2.0, num=max(1, int(np.prod(shape)))).reshape(shape)
    return {
        "sum(w * sin(x))": lambda m, x: (_like(m, weights, x) * m.sin(x)).sum(),
        "sum(x**2) * sum(x)": lambda m, x: (x ** 2).sum() * x.sum(),
        "sum(tanh(x))**2": lambda m, x: m.tanh(x).sum() ** 2,
        "log(sum(exp(w * x)))": lambda m, x: m.log(m.exp(_like(m, weights, x) * x).sum()),
    }


def _like(m, array, x):
    return torch.as_tensor(array, dtype=x.dtype) if m is torch else array


@exercise("numerical_gradient")
def check_numerical_gradient(numerical_gradient) -> None:
    ex = "numerical_gradient"
    _check_misconception_probes(ex, numerical_gradient)
    _check_default_nudge(ex, numerical_gradient)
    _check_callers_x_untouched(ex, numerical_gradient)
    _check_non_float_dtypes_refused(ex, numerical_gradient)
    _check_random_functions(ex, numerical_gradient)


def _gradient_returned(ex, numerical_gradient, f, x, shown, h=None) -> np.ndarray:
    """The learner's ``numerical_gradient(f, x, h)``, called without h when ``h`` is None (so the default, 1e-5, is
    used), as a float64 array of x's shape.

    Raises:
        CheckFailure: the call failed or changed x, or the result is not a numpy array of x's shape and dtype float64.
    """
    result = call_learner(ex, numerical_gradient, f, x, *([] if h is None else [h]), shown_input=shown,
                          changed_input=f"your function changed its input x ({shown}): put each element back "
                                        "after nudging it, or nudge a float64 copy.")
    if isinstance(result, np.generic):  # numpy hands back a scalar for 0-d arithmetic; that is shape ()
        result = np.asarray(result)
    if not isinstance(result, np.ndarray):
        raise CheckFailure(ex, f"return a numpy array, got {type(result).__name__} ({shown}).",
                           cause_id=causes.WRONG_TYPE)
    if result.shape != np.shape(x):
        flat = " It looks flattened: give each partial derivative the position of its element." \
            if result.size == np.size(x) else ""
        raise CheckFailure(ex, f"returned shape {result.shape} for an input of shape {np.shape(x)} ({shown}); "
                               f"the gradient has one partial derivative per element, in x's shape.{flat}",
                           cause_id=causes.WRONG_SHAPE)
    if result.dtype != np.float64:
        raise CheckFailure(ex, f"returned dtype {result.dtype}; return float64 whatever x's dtype ({shown}).",
                           cause_id=causes.WRONG_DTYPE)
    return result


ALL_AT_ONCE = causes.declare("numerical_gradient/nudges-all-at-once", "every element nudged together, not one at "
                             "a time")
GRADIENT_FORWARD = causes.declare("numerical_gradient/forward-difference", "one-sided differences")
GRADIENT_IGNORES_H = causes.declare("numerical_gradient/ignores-h", "a nudge of its own, not the h it was given")
NOT_RESTORED = causes.declare("numerical_gradient/element-not-restored", "a nudged element not put back before the "
                              "next one is nudged")
IN_FLOAT32 = causes.declare("numerical_gradient/nudges-in-float32", "a float32 x nudged in float32, which keeps "
                            "about 2 digits of a 1e-5 nudge")
FLOAT32_WHY = ("float32 input: a float32 holds about 7 significant digits, so x + 1e-5 keeps only ~2 of the nudge: "
               "do the nudging on a float64 copy, np.array(x, dtype=np.float64).")


def _float32_nudge(x32: np.ndarray, h: float) -> np.ndarray:
    """What central differences of sum(sin(x)) give, element by element, when each nudge is made in float32 (the
    function's value itself in float64, as the probe's f computes it)."""
    found = np.zeros(x32.shape)
    for i in range(x32.size):
        up, down = x32.copy(), x32.copy()
        up[i] += np.float32(h)
        down[i] -= np.float32(h)
        found[i] = (float(np.sin(up).sum()) - float(np.sin(down).sum())) / (2 * h)
    return found


def _check_misconception_probes(ex, numerical_gradient) -> None:
    """Four fixed inputs whose wrong answers name a slip: nudging everything at once, a one-sided or h-ignoring
    difference, an element not put back, float32 nudging."""
    def probe(shown, f, x, h, expected, tolerance=SAME_DIFFERENCE, slips=()):
        return Probe(shown, lambda: _gradient_returned(ex, numerical_gradient, f, x, shown, h), expected, slips,
                     tolerance)

    drift = ("later entries drift: an earlier element was not put back before the next one was nudged, so every later "
             "partial is measured one step of h further from x.")
    w = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])
    x2 = np.array([1.0, -2.0])
    x32 = np.array([0.5, 1.0, 1.5], dtype=np.float32)
    run_probes(ex, [
        # A linear function with distinct weights. Nudging all elements at once gives sum(w) everywhere.
        probe("f(x) = sum(w * x), x of shape (2, 3)", lambda v: float((w * v).sum()), np.arange(6.0).reshape(2, 3) / 4,
              1e-5, w, slips=(Slip(np.full_like(w, w.sum()),
                                   "every entry equals the change when all elements move together: you nudged the "
                                   "whole array at once. A partial derivative nudges one element and holds the others "
                                   "still.", ALL_AT_ONCE),),
              tolerance=AGAINST_DIFFERENCES),
        # A cubic at a large h, where the central difference carries an exact h² term (0.01 apart from the slope).
        probe("f(x) = sum(x**3), x = [1, -2], h = 0.1", lambda v: float((v ** 3).sum()), x2, 0.1, 3 * x2 ** 2 + 0.01,
              slips=(Slip(3 * x2 ** 2 + 3 * x2 * 0.1 + 0.01, "this is the forward difference (f(x+h) - f(x)) / h; "
                                                             "nudge each element both ways and divide by 2h.",
                          GRADIENT_FORWARD),
                     Slip(3 * x2 ** 2, "your result ignores the h argument (it matches a tiny nudge, not h = 0.1).",
                          GRADIENT_IGNORES_H)),
              tolerance=AGAINST_DIFFERENCES),
        # A coupled function at a large h. If an element is not restored, later partials drift by 2h each.
        probe("f(x) = sum(x)**2, x = [1, 2, 3], h = 0.1", lambda v: float(v.sum() ** 2), np.array([1.0, 2.0, 3.0]), 0.1,
              [12.0, 12.0, 12.0], slips=(Slip([12.0, 11.8, 11.6], drift, NOT_RESTORED),
                                         Slip([12.0, 12.2, 12.4], drift, NOT_RESTORED))),
        # float32 holds ~7 digits, so a 1e-5 nudge keeps ~2 of them. The answer must be computed in float64.
        probe("f(x) = sum(sin(x)), x = [0.5, 1, 1.5] as float32", lambda v: float(np.sin(v).sum()), x32, 1e-5,
              np.cos(x32.astype(np.float64)), slips=(Slip(_float32_nudge(x32, 1e-5), FLOAT32_WHY, IN_FLOAT32),),
              tolerance=FLOAT32_INPUTS),
    ])


def _check_default_nudge(ex, numerical_gradient) -> None:
    """The default nudge is the signature's h = 1e-5: an f that records how far each call moved x from where it
    was."""
    base = np.array([0.25, -0.5])
    nudges = []

    def recording(v):
        moved = np.abs(np.asarray(v, dtype=np.float64) - base)
        if moved.max() > 0:
            nudges.append(moved.max())
        return float((np.asarray(v) ** 2).sum())

    shown = "numerical_gradient(f, x) with x = [0.25, -0.5] and no h"
    _gradient_returned(ex, numerical_gradient, recording, base.copy(), shown)
    wrong = [n for n in nudges if not close(n, 1e-5, SAME_ARITHMETIC)]
    if wrong:
        raise CheckFailure(ex, f"{shown}: your code nudged x by {fmt(wrong[0])}; the exercise's signature is "
                               "numerical_gradient(f, x, h=1e-5), so without an h the nudge is 1e-5.",
                           cause_id=causes.MISMATCH)


def _check_callers_x_untouched(ex, numerical_gradient) -> None:
    """The caller's x is never written into, not even nudged and put back: a read-only x must work, as it does on a
    copy. (Watching f for the caller's own array instead would see it only in one process: under trusted grading f
    runs on the other side of the sandbox and receives a copy.)"""
    read_only = np.array([1.0, 2.0])
    read_only.flags.writeable = False
    try:
        _gradient_returned(ex, numerical_gradient, lambda v: float((np.asarray(v) ** 2).sum()), read_only,
                           "a read-only x = [1, 2]", h=1e-5)
    except CheckFailure as failure:
        if isinstance(failure.cause, ValueError) and "read-only" in str(failure.cause):
            raise CheckFailure(ex, "for a read-only x = [1, 2] your code tried to write into x: work on a float64 "
                                   "copy and leave the caller's x alone: `work = x` (and np.asarray(x, "
                                   "dtype=np.float64) of a float64 x) is the same array, while x.astype(np.float64) "
                                   "is a new one.", cause_id=causes.MISMATCH) from None
        raise


def _check_non_float_dtypes_refused(ex, numerical_gradient) -> None:
    """Arrays whose dtype is not a floating-point one are refused with a TypeError naming the dtype. Integer and
    boolean arrays cannot hold a nudge of 1e-5; a complex one is not a point of a function of real numbers."""
    refused = [np.array([1, 2, 3]), np.array([1, 2], dtype=np.int32), np.array([3], dtype=np.uint8),
               np.array([True, False]), np.array([1 + 0j, 2 + 0j])]
    for bad in refused:
        article = "an" if bad.dtype.name[0] in "aeio" else "a"
        why = ("the exercise measures slopes of functions of real numbers" if bad.dtype.kind == "c" else
               f"writing x + 1e-5 back into a {bad.dtype} array truncates it, so the nudge is lost")
        try:
            accepted = call_learner(ex, numerical_gradient, lambda v: float((v * v).sum()), bad, 1e-5)
        except CheckFailure as failure:
            if not isinstance(failure.cause, TypeError) or str(bad.dtype) not in str(failure.cause):
                raise CheckFailure(ex, f"for {article} {bad.dtype} array, raise a TypeError, as the exercise asks, "
                                       f"whose message names the dtype ({bad.dtype}); instead "
                                       f"{failure.told}", cause_id=causes.MISMATCH) from None
        else:
            raise CheckFailure(ex, f"{article} {bad.dtype} array was accepted (result {fmt(accepted)}): {why}. Its "
                                   "dtype is not a floating-point one, so raise a TypeError naming the dtype.",
                               cause_id=causes.MISMATCH)


def _check_random_functions(ex, numerical_gradient) -> None:
    """Random scalar functions of random arrays (rank 0–4, transposed views too) at the default h, against central
    differences and torch.autograd."""
    shapes = st.lists(st.integers(1, 5), min_size=0, max_size=4).map(tuple)

    @RANDOM_CASES
    @given(shape=shapes, seed=st.integers(0, 2 ** 16), pick=st.integers(0, 3), transposed=st.booleans())
    def random_case(shape, seed, pick, transposed):
        x = np.random.default_rng(seed).uniform(-1.5, 1.5, size=shape)
        if transposed:  # a non-contiguous view: reshape(-1) of it is a copy, not a window
            x = x.T
        name, fn = sorted(_array_functions(x.shape).items())[pick]
        shown = (f"f(x) = {name}, x = {fmt(x)} "
                 f"(shape {x.shape}{', a transposed view' if transposed and x.ndim > 1 else ''})")
        got = _gradient_returned(ex, numerical_gradient, lambda v: float(fn(np, v)), x, shown)  # the default h = 1e-5
        exact = torch_gradients(lambda v: fn(torch, v), x)[0]
        reference = central_differences(lambda v: fn(np, v), x, h=1e-5)[0]
        for expected, source in ((reference, "central differences"), (exact, "torch.autograd")):
            if not close(got, expected, AGAINST_DIFFERENCES):
                raise CheckFailure(ex, f"{shown}: {source} gives {fmt(expected)}, received {fmt(got)}.", input=shown)

    random_case()


# ---------------------------------------------------------------------------------------------- tanh_network_gradients

def _tanh_net(m, x, w1, b1, w2, t):
    """L = (w2 * tanh(w1 * x + b1) - t)**2, the two-parameter network of the handout "Backprop in Python"."""
    return (w2 * m.tanh(w1 * x + b1) - t) ** 2


NET_HALF = causes.declare("tanh_network_gradients/loss-derivative-halved", "the 2 of d(ŷ - t)²/dŷ missing")
NET_SIGN = causes.declare("tanh_network_gradients/sign", "2(t - ŷ) where 2(ŷ - t) belongs")
NET_Z_FOR_H = causes.declare("tanh_network_gradients/input-for-output", "1 - z² where 1 - tanh(z)² belongs")
NET_NOT_SQUARED = causes.declare("tanh_network_gradients/not-squared", "1 - h where 1 - h² belongs")
NET_W1_NO_X = causes.declare("tanh_network_gradients/w1-without-x", "dL/dw1 missing its local derivative x")
NET_W2_NO_H = causes.declare("tanh_network_gradients/w2-without-h", "dL/dw2 missing its local derivative h")
NET_SKIPS_W2 = causes.declare("tanh_network_gradients/skips-w2", "the chain through ŷ = w2·h skips w2")
NET_ORDER = causes.declare("tanh_network_gradients/wrong-order", "the right gradients returned in another order")


def _tanh_net_mistakes(x, w1, b1, w2, t):
    """Gradients (dw1, db1, dw2) as each known slip computes them, with the diagnosis it earns."""
    z = w1 * x + b1
    h = math.tanh(z)
    g = 2 * (w2 * h - t)
    right = (g * w2 * (1 - h * h) * x, g * w2 * (1 - h * h), g * h)
    return [
        ((right[0] / 2, right[1] / 2, right[2] / 2),
         "every gradient is half the right size: d(ŷ - t)²/dŷ is 2(ŷ - t); the 2 is missing.", NET_HALF),
        ((-right[0], -right[1], -right[2]),
         "every gradient has the wrong sign: dL/dŷ = 2(ŷ - t), not 2(t - ŷ).", NET_SIGN),
        ((g * w2 * (1 - z * z) * x, g * w2 * (1 - z * z), right[2]),
         "dL/dw1 and dL/db1 use 1 - z² as tanh's local derivative; it is 1 - tanh(z)² = 1 - h², "
         "evaluated at the unit's output h.", NET_Z_FOR_H),
        ((g * w2 * (1 - h) * x, g * w2 * (1 - h), right[2]),
         "tanh's local derivative is 1 - h² (h squared), not 1 - h.", NET_NOT_SQUARED),
        ((right[1], right[1], right[2]),
         "dL/dw1 equals dL/db1: z = w1·x + b1, so the local derivative for w1 is x and dL/dw1 = dL/dz · x.",
         NET_W1_NO_X),
        ((right[0], right[1], g),
         "dL/dw2 is missing its local derivative: ŷ = w2·h, so dL/dw2 = dL/dŷ · h.", NET_W2_NO_H),
        ((right[0] / w2, right[1] / w2, right[2]),
         "dL/dw1 and dL/db1 skip the w2 edge: dL/dh = dL/dŷ · w2 before you go through tanh.", NET_SKIPS_W2),
        ((right[2], right[0], right[1]),
         "the right numbers in the wrong order: return (dL/dw1, dL/db1, dL/dw2).", NET_ORDER),
    ], right


@exercise("tanh_network_gradients")
def check_tanh_network_gradients(tanh_network_gradients) -> None:
    ex = "tanh_network_gradients"

    def run(args):
        shown = "(x, w1, b1, w2, t) = " + ", ".join(f"{a:g}" for a in args)
        result = call_learner(ex, tanh_network_gradients, *args, shown_input=shown)
        try:
            values = [as_float(ex, value, "each gradient") for value in result]
        except TypeError:
            raise CheckFailure(ex, f"return three numbers (dL/dw1, dL/db1, dL/dw2), got {described(result)}",
                               cause_id=causes.WRONG_TYPE) from None
        if len(values) != 3:
            raise CheckFailure(ex, f"return three numbers (dL/dw1, dL/db1, dL/dw2), got {len(values)}",
                               cause_id=causes.WRONG_SHAPE)
        if not isinstance(result, tuple):
            raise CheckFailure(ex, f"return the tuple (dL/dw1, dL/db1, dL/dw2), as the exercise asks; got a "
                                   f"{type(result).__name__} ({shown}). `return a, b, c` makes a tuple.",
                               cause_id=causes.WRONG_TYPE)
        return values, shown

    # Probe: the worked example and a point where its coincidences (z = 1, so 1 - z = 1 - z² = 0) vanish, as one
    # probe: a slip is named only when it explains the answers at both points.
    points = ((1.5, 0.8, -0.2, 1.3, 3.0), (0.7, -1.2, 0.3, 0.9, -0.5))
    models = [_tanh_net_mistakes(*args) for args in points]
    slips = tuple(Slip(np.concatenate([m[0][k][0] for m in models]), why, cause)
                  for k, (_, why, cause) in enumerate(models[0][0]))
    shown = "(dL/dw1, dL/db1, dL/dw2) at (x, w1, b1, w2, t) = " + " and at ".join(
        "(" + ", ".join(f"{a:g}" for a in args) + ")" for args in points)
    run_probes(ex, [Probe(shown, lambda: np.concatenate([run(args)[0] for args in points]),
                          np.concatenate([right for _, right in models]), slips, tolerance=SAME_ARITHMETIC)])

    unit = st.floats(-8, 8)

    @RANDOM_CASES
    @given(x=unit, w1=unit, b1=unit, w2=unit, t=unit)
    def random_case(x, w1, b1, w2, t):
        got, shown = run((x, w1, b1, w2, t))
        exact = torch_gradients(lambda a, b, c: _tanh_net(torch, x, a, b, c, t), w1, b1, w2)
        numeric = central_differences(lambda a, b, c: _tanh_net(np, x, a, b, c, t), w1, b1, w2)
        for expected, source, tolerance in ((exact, "torch.autograd", AGAINST_TORCH),
                                            (numeric, "central differences", AGAINST_DIFFERENCES)):
            if not close(got, np.array(expected), tolerance):
                raise CheckFailure(ex, f"{shown}: {source} gives {fmt(np.array(expected, dtype=float))}, "
                                       f"received {fmt(np.array(got))}.", input=shown)

    random_case()


# ---------------------------------------------------------------------------------------------- log_square_trace

TRACE_KEYS = ("e", "y", "grad_e", "grad_x")


Y_OF_X = causes.declare("log_square_trace/y-of-x", "y = log(x) where y = log(e) belongs")
LOG_OF_X = causes.declare("log_square_trace/log-derivative-at-x", "1 / x where log's input e = x*x belongs")
TRACE_SIGN = causes.declare("log_square_trace/sign", "dy/dx with the wrong sign for a negative x")
ONE_EDGE = causes.declare("log_square_trace/one-edge", "only one of the two edges into x counted (= instead of +=)")
OTHER_INPUT = causes.declare("log_square_trace/wrong-other-input", "grad_e times something other than the "
                             "multiply's other input, x")


@exercise("log_square_trace")
def check_log_square_trace(log_square_trace) -> None:
    ex = "log_square_trace"

    def run(x):
        shown = f"x = {x!r}"
        trace = call_learner(ex, log_square_trace, x, shown_input=shown)
        if not isinstance(trace, dict) or set(TRACE_KEYS) - set(trace):
            raise CheckFailure(ex, f"return a dict with the keys {list(TRACE_KEYS)}, got {described(trace)}",
                               cause_id=causes.WRONG_TYPE)
        return {key: as_float(ex, trace[key], f"trace[{key!r}]") for key in TRACE_KEYS}, shown

    def diagnose(x, got, shown):
        e = x * x
        other_input = "each edge through the multiply carries grad_e × (the other input), and the other input is x."
        run_probes(ex, [
            Probe(f"{shown}: (e, y)", lambda: np.array([got["e"], got["y"]]), np.array([e, math.log(e)]),
                  (Slip(np.array([e, math.log(abs(x))]), "forward pass: e = x*x and y = log(e), the log of e, not of "
                                                          "x.", Y_OF_X),), tolerance=SAME_ARITHMETIC),
            Probe(f"{shown}: grad_e", lambda: got["grad_e"], 1 / e,
                  slips=(Slip(1 / x, "log's local derivative is 1 / (its input), and its input is e = x*x, not x.",
                              LOG_OF_X),),
                  tolerance=SAME_ARITHMETIC),
            Probe(f"{shown}: grad_x", lambda: got["grad_x"], 2 / x, slips=(
                Slip(-2 / x, "the sign is wrong for this x: dy/dx = 2/x is negative when x is (log(x*x) falls as x "
                             "grows towards 0 from below).", TRACE_SIGN),
                Slip(1 / x, "only one of the two edges into x was counted. x is a shared node: it feeds the multiply "
                            "twice, so its gradient is the sum of both edges; the second one needs += (an = overwrote "
                            "the first).", ONE_EDGE),
                Slip(2 / e, other_input, OTHER_INPUT),
                Slip(1 / e, other_input, OTHER_INPUT),
            ), tolerance=SAME_ARITHMETIC),
        ])

    got, shown = run(3.0)
    diagnose(3.0, got, shown)

    @RANDOM_CASES
    @given(magnitude=st.floats(1e-3, 1e3), negative=st.booleans())
    def random_case(magnitude, negative):
        x = -magnitude if negative else magnitude
        got, shown = run(x)
        diagnose(x, got, shown)
        exact = torch_gradients(lambda v: torch.log(v * v), x)[0]
        numeric = central_differences(lambda v: np.log(v * v), x)[0]
        for expected, source, tolerance in ((exact, "torch.autograd", AGAINST_TORCH),
                                            (numeric, "central differences", AGAINST_DIFFERENCES)):
            if not close(got["grad_x"], expected, tolerance):
                raise CheckFailure(ex, f"{shown}: {source} gives grad_x = {fmt(float(expected))}, received "
                                       f"{fmt(got['grad_x'])}.", input=shown)

    random_case()
