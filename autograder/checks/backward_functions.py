"""Checks for notebook 3, "Backward functions": numpy backward rules and ``unbroadcast``.

Every backward function ``f_back(grad_out, out, *inputs)`` must return the vector–Jacobian product for one input,
already summed back to that input's shape. Each is compared with torch.autograd in float64 (the VJP of the same
forward operation with the same upstream gradient) and with central differences of sum(grad_out · f(inputs)), on
randomized broadcastable shapes of rank 0–4 (hypothesis), float64, float32 and integer inputs, and Python scalars.
Probe numbers come from the course's handout "Backprop from scratch" and notebook 3's text: (3,) -> (2,3) sums to
[2,2,2]; (2,1) -> (2,3) sums to [[3],[3]]; upstream [[1,2,3],[4,5,6]] to shape (3,) is [5,7,9].
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
from hypothesis import given, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

from autograder.checks import causes
from autograder.checks.registry import exercise
from autograder.checks.harness.diagnostics import (RANDOM_CASES, CheckFailure, Probe, Slip, call_learner, close, described,
                                                   fmt,
                                                   run_probes, wrong_value)
from autograder.checks.harness.vjp import (IGNORES_UPSTREAM, VJPCase, as_gradient, check_vjp, describe, torch_vjp,
                                           vjp_probe)


# ------------------------------------------------------------------------------------------------ random inputs

def cast(values, dtype):
    """Inputs in a dtype the forward pass might have seen: float64, float32, integers or a Python number."""
    if dtype == "python" and np.ndim(values) == 0:
        return float(values)
    if dtype == "int":
        return np.round(values * 3).astype(np.int64) + (np.round(values * 3) == 0)  # no zeros: log and / stay defined
    return np.asarray(values, dtype=np.float32 if dtype == "float32" else np.float64)


def pair_cases():
    """Two inputs with broadcastable shapes (rank 0–4, size-1 and missing axes anywhere), values, dtypes."""
    return st.tuples(mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3),
                     st.integers(0, 2 ** 16), st.sampled_from(["float64", "float32", "int", "python"]),
                     st.sampled_from(["float64", "float32", "int", "python"]))


def make_pair(case, low=0.5, high=2.0):
    (shapes, seed, dtype0, dtype1) = case
    rng = np.random.default_rng(seed)
    signs = [rng.choice([-1.0, 1.0], size=s) for s in shapes.input_shapes]
    return [cast(rng.uniform(low, high, size=s) * sign, d)
            for s, sign, d in zip(shapes.input_shapes, signs, (dtype0, dtype1))]


def one_input(shape, seed, dtype, low=0.5, high=2.0, signed=True):
    """One random input of ``shape``: magnitudes in [low, high], each with a random sign when ``signed`` (a
    negative ``low`` already reaches both signs), cast to ``dtype`` (see cast)."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(low, high, size=shape)
    return cast(values * rng.choice([-1.0, 1.0], size=shape) if signed else values, dtype)


# ------------------------------------------------------------------------------------------------ unbroadcast

UB_NO_KEEPDIMS = causes.declare("unbroadcast/no-keepdims", "a stretched size-1 axis summed away instead of kept")
UB_KEEPS_PREPENDED = causes.declare("unbroadcast/keeps-prepended-axes", "the axes broadcasting prepended summed "
                                    "but kept, as size 1")
SHAPE_CAUSES = (causes.WRONG_SHAPE, causes.WRONG_DTYPE, causes.WRONG_TYPE, UB_NO_KEEPDIMS, UB_KEEPS_PREPENDED)
UB_NO_ASSERT = causes.declare("unbroadcast/no-shape-assert", "a result not of the original's shape returned "
                              "instead of failing the asked-for assert")
UB_SUMS_EVERYTHING = causes.declare("unbroadcast/sums-everything", "every axis summed, not only the broadcast ones")


def _unbroadcast_shape_slip(result, broadcasted_shape, original_shape) -> str | None:
    """The cause a result of the wrong shape points to: the stretched axes dropped (no keepdims), or the prepended
    axes kept; None for any other shape."""
    extra = len(broadcasted_shape) - len(original_shape)
    stretched = {i for i, n in enumerate(original_shape) if n == 1 and broadcasted_shape[extra + i] != 1}
    shape = np.shape(result)
    if stretched and shape == tuple(n for i, n in enumerate(original_shape) if i not in stretched):
        return UB_NO_KEEPDIMS
    if extra and shape == (1,) * extra + tuple(original_shape):
        return UB_KEEPS_PREPENDED
    return None


def _own_shape_assert(failure: CheckFailure, broadcasted_shape, original_shape) -> CheckFailure | None:
    """The learner's own shape assert (the exercise asks for one) failing where only stretched size-1 axes are to be
    summed: the no-keepdims slip, told as such rather than as a crash; None for any other failure."""
    if getattr(failure.cause, "type_name", type(failure.cause).__name__) != "AssertionError":
        return None
    stretched = any(n == 1 and m != 1 for n, m in zip(original_shape, broadcasted_shape))
    if len(broadcasted_shape) != len(original_shape) or not stretched:
        return None
    return CheckFailure(failure.exercise, f"your own shape assert failed: {original_shape} was stretched to "
                                          f"{broadcasted_shape}, so sum the stretched axes with keepdims=True, which "
                                          f"keeps them as size 1.\n{failure.told}", cause_id=UB_NO_KEEPDIMS,
                        input=failure.input)


@exercise("unbroadcast")
def check_unbroadcast(unbroadcast) -> None:
    ex = "unbroadcast"

    def run_text(broadcasted, original_shape):
        return f"unbroadcast(array of shape {np.shape(broadcasted)}, original of shape {original_shape})"

    def run(broadcasted, original_shape):
        original = np.zeros(original_shape)
        shown = run_text(broadcasted, original_shape)
        try:
            result = call_learner(ex, unbroadcast, np.array(broadcasted), original, shown_input=shown)
        except CheckFailure as failure:
            raise _own_shape_assert(failure, np.shape(broadcasted), tuple(original_shape)) or failure from None
        try:
            return as_gradient(ex, "unbroadcast", result, original_shape, shown), shown
        except CheckFailure as failure:
            slip = _unbroadcast_shape_slip(result, np.shape(broadcasted), original_shape)
            raise CheckFailure(ex, failure.told, cause_id=slip or failure.cause_id, input=failure.input) from None

    by_position = ("choose the axes to sum by position — where the original has size 1, or is missing on the left — "
                   "not by looking for sizes that differ or match.")
    probes = [
        (np.ones((2, 3)), (3,), np.full(3, 2.0), "case 1: a prepended axis is summed away (no keepdims)."),
        (np.ones((2, 3)), (2, 1), np.full((2, 1), 3.0),
         "case 2: a stretched size-1 axis is summed with keepdims=True."),
        (np.array([[1.0, 2, 3], [4, 5, 6]]), (3,), np.array([5.0, 7, 9]),
         "a bias of shape (3,) was added to every row: sum over the rows only."),
        (np.arange(1.0, 10.0).reshape(3, 3), (3, 1), np.array([[6.0], [15.0], [24.0]]),
         f"(3, 1) was stretched to (3, 3): sum axis 1, keeping it. Every size here is 3, so {by_position}"),
        (np.ones((2, 4, 3)), (1, 1, 3), np.full((1, 1, 3), 8.0),
         f"(1, 1, 3) was stretched along axes 0 and 1 (sizes 2 and 4): {by_position}"),
        (np.ones((1, 2)), (1,), np.full(1, 2.0),
         "(1,) -> (1, 2): the prepended axis must disappear (shape (1,), not (1, 1)); then axis 0 of the "
         "original, size 1, was stretched to 2."),
        (np.arange(6.0).reshape(2, 3), (), np.array(15.0), "a 0-d original collects the sum of everything."),
    ]
    everything = ("every entry is the sum of the whole upstream gradient: sum only over the axes broadcasting added "
                  "or stretched, not over every axis.")

    def probe(broadcasted, shape, expected, why):
        def call():
            try:
                return run(broadcasted, shape)[0]
            except CheckFailure as failure:  # a wrong shape or dtype: what the probe asks, first
                if failure.cause_id not in SHAPE_CAUSES:
                    raise
                raise failure.wrapped(why) from None
        return Probe(run_text(broadcasted, shape), call, expected,
                     slips=(Slip(np.full(np.shape(expected), broadcasted.sum()), everything, UB_SUMS_EVERYTHING),))

    run_probes(ex, [probe(*case) for case in probes])

    for broadcasted, original, why in (
            (np.ones((2, 3)), 7.0, "original may be a Python number (np.shape(7.0) is ()): use np.shape(original)."),
            (np.ones((2, 3), dtype=np.int64), np.zeros(3), "an integer upstream gradient must come back as float64."),
            (np.ones((2, 3), dtype=np.float32), np.zeros(3), "a float32 upstream gradient must come back as float64.")):
        shown = f"unbroadcast({broadcasted.dtype} array of shape {broadcasted.shape}, {original!r})"
        try:
            result = call_learner(ex, unbroadcast, broadcasted, original, shown_input=shown,
                                  changed_input="unbroadcast changed the array it was given: sum into a new array "
                                                "instead.")
            as_gradient(ex, "unbroadcast", result, np.shape(original), shown)
        except CheckFailure as failure:  # this input's kind, first: a crash on it is the slip it probes
            if failure.cause_id in (causes.STUB, causes.TIMEOUT, causes.MEMORY, causes.KILLED):
                raise
            raise failure.wrapped(why) from None
    shown = "unbroadcast(array of shape (2, 3), original of shape (4,))"
    try:
        result = call_learner(ex, unbroadcast, np.ones((2, 3)), np.zeros(4), shown_input=shown)
    except CheckFailure as failure:
        if failure.cause is None:  # a loop or a crash of the sandbox, not an exception of the learner's code
            raise
    else:
        raise CheckFailure(ex, f"{shown} returned {describe(result)}, but (4,) was never broadcast to (2, 3): the "
                               "exercise asks you to assert that the result has the original's shape, so a mistake "
                               "upstream fails here, loudly, instead of three operations later.",
                           cause_id=UB_NO_ASSERT)

    @RANDOM_CASES
    @given(mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4), st.integers(0, 2 ** 16))
    def random_case(shapes, seed):
        original_shape = shapes.input_shapes[0]
        upstream = np.random.default_rng(seed).uniform(-1, 1, size=shapes.result_shape)
        got, shown = run(upstream, original_shape)
        expected = torch_vjp(lambda o: o.expand(*shapes.result_shape) if shapes.result_shape else o,
                             [np.zeros(original_shape)], 0, upstream)[1]
        if not close(got, expected):
            raise wrong_value(ex, f"{shown}, with upstream = {fmt(upstream)}", expected, got,
                              (Slip(np.full(original_shape, upstream.sum()), everything, UB_SUMS_EVERYTHING),),
                              said="summing the upstream gradient over what broadcasting copied (torch.autograd "
                                   "agrees) gives")

    random_case()


# ------------------------------------------------------------------------------------------------ elementwise rules

def pair_exercise(ex, backs, forward, low=0.5, high=2.0, probes=()):
    """Check f_back0 (and f_back1) of a two-input elementwise operation on probes then random broadcast pairs.
    ``backs`` lists (name, backward function) by input; a probe is (inputs, index, grad_out, why)."""
    rules = [VJPCase(ex, name, back, forward, index=index) for index, (name, back) in enumerate(backs)]
    run_probes(ex, [vjp_probe(replace(rules[index], inputs=inputs, grad_out=grad_out), why, slips)
                    for inputs, index, grad_out, why, *slips in probes])

    @RANDOM_CASES
    @given(pair_cases(), st.integers(0, len(backs) - 1))
    def random_case(pair, index):
        check_vjp(replace(rules[index], inputs=make_pair(pair, low, high)))

    random_case()


def unary_exercise(rule: VJPCase, low, high):
    """``rule`` on random inputs of rank 0–4 (float64, float32, integers or a Python number) drawn by ``one_input``
    from [low, high]."""
    @RANDOM_CASES
    @given(mutually_broadcastable_shapes(num_shapes=1, max_dims=4, max_side=3), st.integers(0, 2 ** 16),
           st.sampled_from(["float64", "float32", "int", "python"]))
    def random_case(shapes, seed, dtype):
        x = one_input(shapes.input_shapes[0], seed, dtype, low, high, signed=low < 0)
        check_vjp(replace(rule, inputs=[x]))

    random_case()


@exercise("log_back")
def check_log_back(log_back) -> None:
    rule = VJPCase("log_back", "log_back", log_back, torch.log)
    check_vjp(replace(rule, inputs=[np.array([1.0, 2.0, 4.0])], grad_out=np.array([1.0, 1.0, 1.0])))
    unary_exercise(rule, 0.1, 5.0)


DIVIDES_BY_INPUT = causes.declare("multiply_back/divides-by-input", "the other operand recovered as out / x, "
                                  "which divides by zero where x is 0")


@exercise("multiply_back", builds_on=("unbroadcast",))
def check_multiply_back(multiply_back0, multiply_back1) -> None:
    ex = "multiply_back"
    probes = [
        ([np.array([[1.0], [2.0]]), np.array([1.0, 2.0, 3.0])], 0, np.ones((2, 3)),
         "x of shape (2, 1) was stretched to (2, 3): its gradient sums each row of grad_out · y, keeping the axis."),
        ([np.array([2.0, 3.0]), 4.0], 1, np.array([1.0, 1.0]),
         "y is a Python number: its gradient is one number, the sum over every element, as a 0-d array."),
        ([np.array([1, 2]), np.array([3, 5])], 0, np.array([0.5, 0.5]),
         "integer inputs with grad_out 0.5: the gradient y · 0.5 = [1.5, 2.5] must stay fractional."),
        ([np.array([0.0, 2.0]), np.array([3.0, 4.0])], 0, np.array([1.0, 1.0]),
         "x contains 0: the gradient for x is grad_out · y = [3, 4].",
         Slip(np.array([np.nan, 4.0]), "x contains 0: the gradient for x is grad_out · y = [3, 4]; computing y as "
                                       "out / x divides by zero.", DIVIDES_BY_INPUT)),
    ]
    pair_exercise(ex, [("multiply_back0", multiply_back0), ("multiply_back1", multiply_back1)], torch.mul, -2.0, 2.0,
                  probes)


@exercise("exp_back")
def check_exp_back(exp_back) -> None:
    unary_exercise(VJPCase("exp_back", "exp_back", exp_back, torch.exp), -2.0, 2.0)


TANH_X_FOR_OUT = causes.declare("tanh_back/input-for-output", "1 − x² where 1 − out² belongs")
TANH_TWICE = causes.declare("tanh_back/tanh-twice", "1 − tanh(out)²: tanh applied to its own output")
TANH_FLOAT32 = causes.declare("tanh_back/recomputed-in-float32", "tanh recomputed from a float32 x, losing digits "
                              "near ±1, instead of reading out")


@exercise("tanh_back")
def check_tanh_back(tanh_back) -> None:
    ex = "tanh_back"
    rule = VJPCase(ex, ex, tanh_back, torch.tanh)
    # grad_out is not all ones, so that forgetting it shows; x holds 0 and values of both signs.
    x, upstream = np.array([-1.0, 0.0, 0.5, 2.0]), np.array([1.0, -2.0, 0.5, 3.0])
    out = np.tanh(x)
    slips = (
        Slip(upstream * (1 - x ** 2), "this is grad_out · (1 − x²): the input x stands where the output belongs. "
                                      "tanh's local derivative is 1 − tanh(x)² = 1 − out², so use out.",
             TANH_X_FOR_OUT),
        Slip(1 - out ** 2, "this is the local derivative 1 − out² alone: a backward function returns it multiplied by "
                           "grad_out, the upstream gradient, element by element.", IGNORES_UPSTREAM),
        Slip(upstream * (1 - np.tanh(out) ** 2), "this applies tanh twice: out already is tanh(x), so the local "
                                                 "derivative is 1 − out², not 1 − tanh(out)².", TANH_TWICE),
    )
    # Near ±1, 1 − tanh(x)² cancels digits: recomputed from a float32 x it is off by far more than float32's 1e-6
    # (about 2.5e-5 at x = 4), while out (float64 here, from the forward pass) or 1/cosh(x)² stays accurate.
    x32 = np.array([0.5, 3.0, -4.0], dtype=np.float32)
    recomputed = (Slip(upstream[:3] * (1 - np.tanh(x32) ** 2),
                       "this recomputes tanh from the float32 x: near ±1, 1 − tanh(x)² cancels most of float32's 7 "
                       "digits. Use out, which the forward pass already computed (here in float64): "
                       "grad_out · (1 − out²).", TANH_FLOAT32),)
    run_probes(ex, [vjp_probe(replace(rule, inputs=[x], grad_out=upstream),
                              "tanh's local derivative is 1 − tanh(x)² = 1 − out²: return grad_out · (1 − out²).",
                              slips),
                    vjp_probe(replace(rule, inputs=[x32], grad_out=upstream[:3]),
                              "tanh's local derivative is 1 − out², with out the forward's output.", recomputed)])
    unary_exercise(rule, -2.0, 2.0)


@exercise("negative_back")
def check_negative_back(negative_back) -> None:
    unary_exercise(VJPCase("negative_back", "negative_back", negative_back, torch.neg), -2.0, 2.0)


def arithmetic_exercise(ex, back0, back1, forward):
    """add_back, subtract_back, divide_back: a probe for the bias case, then random broadcast pairs."""
    probes = [([np.ones((2, 3)), np.array([0.5, 1.0, 2.0])], 1, np.array([[1.0, 2, 3], [4, 5, 6]]),
               "the second input, shape (3,), was combined with every row: sum its gradient over the rows."),
              ([np.array([0.0, 1.0]), np.array([2.0, 2.0])], 1, np.array([1.0, 1.0]),
               "x contains 0: use x itself in the local rule, not a value recovered by dividing by it.")]
    pair_exercise(ex, [(f"{ex}0", back0), (f"{ex}1", back1)], forward, 0.5, 2.0, probes)


@exercise("add_back", builds_on=("unbroadcast",))
def check_add_back(add_back0, add_back1) -> None:
    arithmetic_exercise("add_back", add_back0, add_back1, torch.add)


@exercise("subtract_back", builds_on=("unbroadcast",))
def check_subtract_back(subtract_back0, subtract_back1) -> None:
    arithmetic_exercise("subtract_back", subtract_back0, subtract_back1, torch.sub)


@exercise("divide_back", builds_on=("unbroadcast",))
def check_divide_back(divide_back0, divide_back1) -> None:
    arithmetic_exercise("divide_back", divide_back0, divide_back1, torch.div)


# ------------------------------------------------------------------------------------------------ reductions and shapes

@st.composite
def reductions(draw):
    """(shape, dim, keepdim): rank 0–4 with sides 1–4; dim None, one axis or a tuple in any order, negative or not."""
    shape = tuple(draw(st.lists(st.integers(1, 4), max_size=4)))
    axes = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape))) if shape else []
    axes = [a - len(shape) if draw(st.booleans()) else a for a in axes]
    dim = None if not axes else axes[0] if len(axes) == 1 and draw(st.booleans()) else tuple(axes)
    return shape, dim, draw(st.booleans())


def reduction_exercise(rule: VJPCase):
    """Random reductions of random arrays: everything, any axes in any order (negative too), keepdim or not, of float
    and of integer arrays (a gradient buffer made with np.zeros_like(x) would truncate). ``rule.forward`` takes
    (t, dim, keepdim)."""
    @RANDOM_CASES
    @given(reductions(), st.integers(0, 2 ** 16), st.sampled_from(["float64", "int"]))
    def random_case(reduction, seed, dtype):
        shape, dim, keepdim = reduction
        x = cast(np.random.default_rng(seed).uniform(-1, 1, size=shape), dtype)
        check_vjp(replace(rule, inputs=[x], kwargs=dict(dim=dim, keepdim=keepdim)))

    random_case()


AXIS_MISPLACED = causes.declare("sum_back/axis-misplaced", "grad_out broadcast back without its reduced axes in "
                                "their places (np.expand_dims missing, or the axes put at the end)")


@exercise("sum_back")
def check_sum_back(sum_back) -> None:
    ex = "sum_back"
    rule = VJPCase(ex, ex, sum_back, lambda t, dim, keepdim: t.sum(dim=dim, keepdim=keepdim))
    # Probes: a square input hides a misplaced axis from any shape check; then a middle axis and a tuple.
    def misplaced(x, grad_out, why):
        """The values of grad_out broadcast without its reduced axes put back, or put back at the end."""
        found = []
        for placed in (grad_out, np.reshape(grad_out, np.shape(grad_out) + (1,) * (x.ndim - np.ndim(grad_out)))):
            try:
                found.append(Slip(np.broadcast_to(placed, x.shape) * 1.0, why, AXIS_MISPLACED))
            except ValueError:  # shapes that do not broadcast: that slip raises, it gives no value
                pass
        return tuple(found)

    def why(x, dim):
        return (f"sum over axis {dim} of shape {x.shape}: put each reduced axis back where it was, "
                "np.expand_dims(grad_out, dim), before broadcasting; otherwise the upstream values land along the "
                "wrong axis (for a square input, rows and columns swap with no shape error).")

    run_probes(ex, [vjp_probe(replace(rule, inputs=[x], grad_out=grad_out, kwargs=dict(dim=dim, keepdim=False)),
                              why(x, dim), misplaced(x, grad_out, why(x, dim)) if grad_out is not None else ())
                    for x, dim, grad_out in ((np.ones((3, 3)), 1, np.array([1.0, 2.0, 3.0])),
                                             (np.ones((3, 3)), 0, np.array([1.0, 2.0, 3.0])),
                                             (np.ones((2, 3, 4)), -2, None), (np.ones((2, 3, 4)), (2, 0), None))])
    reduction_exercise(rule)


WHOLE_SIZE = causes.declare("mean_back/divides-by-whole-size", "divided by the whole input's size, not by the "
                            "number of values each mean averages")
SUM_FOR_MEAN = causes.declare("mean_back/sum-for-mean", "sum's gradient, not divided by the count averaged")


@exercise("mean_back")
def check_mean_back(mean_back) -> None:
    ex = "mean_back"
    rule = VJPCase(ex, ex, mean_back, lambda t, dim, keepdim: t.mean(dim=dim, keepdim=keepdim))
    x = np.arange(6.0).reshape(2, 3)
    run_probes(ex, [
        vjp_probe(replace(rule, inputs=[x], grad_out=np.array([1.0, 1.0, 1.0]), kwargs=dict(dim=0, keepdim=False)),
                  "a mean over axis 0 of a 2×3 averages 2 numbers.",
                  (Slip(np.full((2, 3), 1 / 6), "a mean over axis 0 of a 2×3 averages 2 numbers: divide by the size of "
                                                "the reduced axes (2), not by the whole array's size (6).",
                        WHOLE_SIZE),
                   Slip(np.ones((2, 3)), "this is sum's gradient: a mean divides it by the number of values averaged "
                                         "(here 2).", SUM_FOR_MEAN))),
        vjp_probe(replace(rule, inputs=[x], grad_out=np.array([1.0, 2.0]), kwargs=dict(dim=-1, keepdim=False)),
                  "a mean over axis -1 of a 2×3 averages the 3 numbers of each row: dim counts from the end, so put "
                  "the axis back with np.expand_dims(grad_out, dim) and divide by 3."),
    ])
    reduction_exercise(rule)


@exercise("reshape_back")
def check_reshape_back(reshape_back) -> None:
    rule = VJPCase("reshape_back", "reshape_back", reshape_back, lambda t, new_shape: t.reshape(new_shape))

    @RANDOM_CASES
    @given(st.lists(st.integers(1, 3), min_size=0, max_size=4), st.integers(0, 2 ** 16), st.booleans())
    def random_case(shape, seed, inferred):
        x = np.random.default_rng(seed).uniform(-1, 1, size=shape)
        new_shape = (int(np.prod(shape)),) if len(shape) != 1 else (1, shape[0])
        if inferred:  # numpy and torch work out one size given as -1
            new_shape = new_shape[:-1] + (-1,)
        check_vjp(replace(rule, inputs=[x], kwargs=dict(new_shape=new_shape)))

    random_case()


@exercise("permute_back")
def check_permute_back(permute_back) -> None:
    ex = "permute_back"
    rule = VJPCase(ex, ex, permute_back, lambda t, axes: t.permute(*axes))
    run_probes(ex, [
        vjp_probe(replace(rule, inputs=[np.arange(24.0).reshape(2, 3, 4)], kwargs=dict(axes=(1, 2, 0))),
                  "(1, 2, 0) is not its own inverse: transpose grad_out by the inverse permutation, np.argsort(axes)."),
        vjp_probe(replace(rule, inputs=[np.arange(6.0).reshape(2, 3)], kwargs=dict(axes=(-1, 0))),
                  "axes (-1, 0) are (1, 0) counted from the end: make them positive (a % x.ndim) before inverting, "
                  "since np.argsort((-1, 0)) is (0, 1), the identity."),
    ])

    @RANDOM_CASES
    @given(st.lists(st.integers(1, 3), min_size=1, max_size=4), st.integers(0, 2 ** 16), st.randoms())
    def random_case(shape, seed, rnd):
        x = np.random.default_rng(seed).uniform(-1, 1, size=shape)
        axes = [a - len(shape) if rnd.random() < 0.5 else a for a in rnd.sample(range(len(shape)), len(shape))]
        check_vjp(replace(rule, inputs=[x], kwargs=dict(axes=tuple(axes))))

    random_case()


@exercise("expand_back", builds_on=("unbroadcast",))
def check_expand_back(expand_back) -> None:
    ex = "expand_back"
    # torch.broadcast_to is x.expand(*shape) that also takes a 0-d x
    rule = VJPCase(ex, ex, expand_back, lambda t, shape: torch.broadcast_to(t, shape))
    upstream = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])

    probes = [  # x, the gradient torch gives it, and why
        (np.array([0.5, 1.0, 2.0]), np.array([5.0, 7.0, 9.0]),
         "np.broadcast_to(x, (2, 3)) copies x of shape (3,) into both rows: sum grad_out over the rows, back to x's "
         "shape (3,), which is unbroadcast(grad_out, x). grad_out as it is has the output's shape, not x's."),
        (np.array([[0.5], [2.0]]), np.array([[6.0], [15.0]]),
         "x of shape (2, 1) was copied along axis 1 only: sum each row, keeping the axis, back to (2, 1)."),
        (1.5, np.array(21.0),
         "a 0-d x (here the Python number 1.5) was copied into every entry: its gradient is the sum of all of "
         "grad_out, as a 0-d array (shape ())."),
    ]
    to_2x3 = replace(rule, grad_out=upstream, kwargs=dict(shape=(2, 3)))
    run_probes(ex, [vjp_probe(replace(to_2x3, inputs=[x]), why) for x, _, why in probes])  # vjp_slips: the rest

    @RANDOM_CASES
    @given(mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3), st.integers(0, 2 ** 16),
           st.sampled_from(["float64", "float32", "int", "python"]))
    def random_case(shapes, seed, dtype):
        # x has the first shape (0-d, size-1 axes, fewer axes) and is broadcast to the shape of both together
        x = one_input(shapes.input_shapes[0], seed, dtype)
        check_vjp(replace(rule, inputs=[x], kwargs=dict(shape=tuple(shapes.result_shape))))

    random_case()


@exercise("matmul_back")
def check_matmul_back(matmul_back0, matmul_back1) -> None:
    ex = "matmul_back"
    rules = [VJPCase(ex, "matmul_back0", matmul_back0, torch.matmul, index=0),
             VJPCase(ex, "matmul_back1", matmul_back1, torch.matmul, index=1)]
    for x_shape, y_shape in (((2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)), ((3,), (3,))):
        rng = np.random.default_rng(7)
        for rule in rules:
            check_vjp(replace(rule, inputs=[rng.uniform(-1, 1, x_shape), rng.uniform(-1, 1, y_shape)]))

    @RANDOM_CASES
    @given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.booleans(), st.booleans(),
           st.integers(0, 2 ** 16), st.integers(0, 1))
    def random_case(n, m, k, x_vector, y_vector, seed, index):
        rng = np.random.default_rng(seed)
        x = rng.uniform(-1, 1, size=(m,) if x_vector else (n, m))
        y = rng.uniform(-1, 1, size=(m,) if y_vector else (m, k))
        check_vjp(replace(rules[index], inputs=[x, y]))

    random_case()


TIES = causes.declare("maximum_back/ties-not-split", "where x == y, the whole gradient (or none) given to one input, "
                      "not half to each")


@exercise("maximum_back", builds_on=("unbroadcast",))
def check_maximum_back(maximum_back0, maximum_back1) -> None:
    ex = "maximum_back"
    ties = "where x == y the maximum depends on both equally: torch gives each input half the gradient."
    probes = [
        ([np.array([1.0, 2.0, 2.0]), np.array([2.0, 2.0, 1.0])], 0, np.ones(3), ties,
         Slip(np.array([0.0, 1.0, 1.0]), ties, TIES), Slip(np.array([0.0, 0.0, 1.0]), ties, TIES)),
        ([np.array([1.0, 2.0, 2.0]), np.array([2.0, 2.0, 1.0])], 1, np.ones(3), ties,
         Slip(np.array([1.0, 1.0, 0.0]), ties, TIES), Slip(np.array([1.0, 0.0, 0.0]), ties, TIES)),
        ([np.array([3, 1]), np.array([2, 2])], 0, np.array([0.5, 0.5]),
         "integer inputs, grad_out 0.5: a gradient buffer made with np.zeros_like(x) is an integer array and "
         "truncates 0.5 to 0."),
    ]
    pair_exercise(ex, [("maximum_back0", maximum_back0), ("maximum_back1", maximum_back1)], torch.maximum, -2.0,
                  2.0, probes)


PASSES_AT_ZERO = causes.declare("relu_back/passes-at-zero", "gradient passed where x == 0 (x >= 0), where "
                                "torch passes none")


@exercise("relu_back")
def check_relu_back(relu_back) -> None:
    ex = "relu_back"
    rule = VJPCase(ex, ex, relu_back, torch.relu)
    at_zero = "relu passes gradient only where x > 0; at exactly 0 torch gives 0."
    run_probes(ex, [vjp_probe(replace(rule, inputs=[np.array([-1.0, 0.0, 2.0])], grad_out=np.ones(3)), at_zero,
                              (Slip(np.array([0.0, 1.0, 1.0]), at_zero, PASSES_AT_ZERO),))])
    unary_exercise(rule, -2.0, 2.0)


# ------------------------------------------------------------------------------------------------ forward_and_back

@exercise("forward_and_back", builds_on=("log_back", "multiply_back"))
def check_forward_and_back(forward_and_back) -> None:
    ex = "forward_and_back"

    def graph(a, b, c):
        return torch.log(a * b * torch.log(c))

    @RANDOM_CASES
    @given(st.lists(st.integers(1, 3), max_size=2).map(tuple), st.integers(0, 2 ** 16))
    def random_case(shape, seed):
        rng = np.random.default_rng(seed)
        a, b = rng.uniform(0.5, 2, size=shape), rng.uniform(0.5, 2, size=shape)
        c = rng.uniform(1.5, 4, size=shape)  # log c > 0, so f = a·b·log c > 0 and log f is defined
        shown = f"a, b, c of shape {shape}"
        result = call_learner(ex, forward_and_back, a, b, c, shown_input=shown)
        if not isinstance(result, (tuple, list)) or len(result) != 3:
            raise CheckFailure(ex, f"return three arrays (dg/da, dg/db, dg/dc), got {described(result)}",
                               cause_id=causes.WRONG_TYPE)
        for name, index, got in zip(("dg/da", "dg/db", "dg/dc"), range(3), result):
            got = as_gradient(ex, name, got, shape, shown)
            _, expected = torch_vjp(graph, [a, b, c], index, np.ones(shape))
            if not close(got, expected):
                raise wrong_value(ex, f"{name} for {shown}, with a = {fmt(a)}, b = {fmt(b)}, c = {fmt(c)}", expected,
                                  got, said="torch.autograd gives")

    random_case()
