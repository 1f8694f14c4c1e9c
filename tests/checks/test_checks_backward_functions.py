"""Notebook 3 checks: a wrong implementation per probe is rejected with that probe's message; correct alternatives
(loop-based and vectorised unbroadcast, different formulations of each rule) pass."""
import numpy as np
import pytest

from autograder import check
from conftest import learner, rejects


# ------------------------------------------------------------------------------------------- unbroadcast

def unbroadcast_vectorised(broadcasted, original):
    shape = np.shape(original)
    extra = broadcasted.ndim - len(shape)
    result = broadcasted.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and result.shape[i] != 1)
    result = np.asarray(result.sum(axis=stretched, keepdims=True), dtype=float)
    assert result.shape == shape
    return result


def unbroadcast_loop(broadcasted, original):
    shape = np.shape(original)
    result = np.array(broadcasted, dtype=float)
    while result.ndim > len(shape):
        result = result.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and result.shape[axis] > 1:
            result = result.sum(axis=axis, keepdims=True)
    assert result.shape == shape
    return np.asarray(result)  # sum over the last axis of a 1-d array gives a numpy scalar


def unbroadcast_via_torch_style_sum_to_size(broadcasted, original):
    import torch
    return torch.as_tensor(np.asarray(broadcasted, dtype=float)).sum_to_size(np.shape(original)).numpy()


@pytest.mark.parametrize("answer", [unbroadcast_vectorised, unbroadcast_loop, unbroadcast_via_torch_style_sum_to_size])
def test_unbroadcast_accepts_correct_alternatives(answer):
    check("unbroadcast", learner("unbroadcast", answer))


def keeps_prepended_axes(broadcasted, original):
    shape = np.shape(original)
    result = np.array(broadcasted, dtype=float)
    extra = result.ndim - len(shape)
    for axis in range(result.ndim):
        if axis < extra or shape[axis - extra] == 1:
            result = result.sum(axis=axis, keepdims=True)
    return result.reshape(result.shape[extra:]) if result.size == np.prod(shape) and extra == 0 else result


def axes_by_size(broadcasted, original):
    shape = np.shape(original)
    result = np.array(broadcasted, dtype=float)
    for axis in reversed(range(result.ndim)):
        if result.shape[axis] not in shape:  # looks for a matching size instead of the matching position
            result = result.sum(axis=axis)
    return result.reshape(shape) if result.size == np.prod(shape) else result


def sums_everything(broadcasted, original):
    return np.full(np.shape(original), float(np.sum(broadcasted)))


def drops_stretched_axes(broadcasted, original):
    shape = np.shape(original)
    result = np.array(broadcasted, dtype=float)
    while result.ndim > len(shape):
        result = result.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and result.shape[axis] > 1:
            result = result.sum(axis=axis)  # forgets keepdims
    return result


@pytest.mark.parametrize("answer, phrases", [
    (keeps_prepended_axes, ["prepended axis", "cause: unbroadcast/keeps-prepended-axes"]),
    (axes_by_size, ["by position"]),
    (sums_everything, ["not over every axis", "cause: unbroadcast/sums-everything"]),
    (drops_stretched_axes, ["returned shape", "cause: unbroadcast/no-keepdims"]),
])
def test_unbroadcast_rejects_wrong_implementations(answer, phrases):
    rejects("unbroadcast", learner("unbroadcast", answer), *phrases)


# ------------------------------------------------------------------------------------------- backward rules

def ub(grad, x):
    return unbroadcast_loop(np.asarray(grad, dtype=float), x)


RIGHT = {
    "log_back": lambda g, out, x: ub(g / x, x),
    "multiply_back0": lambda g, out, x, y: ub(g * y, x),
    "multiply_back1": lambda g, out, x, y: ub(g * x, y),
    "exp_back": lambda g, out, x: ub(g * out, x),
    "negative_back": lambda g, out, x: ub(-g, x),
    "add_back0": lambda g, out, x, y: ub(g, x),
    "add_back1": lambda g, out, x, y: ub(g, y),
    "subtract_back0": lambda g, out, x, y: ub(g, x),
    "subtract_back1": lambda g, out, x, y: ub(-g, y),
    "divide_back0": lambda g, out, x, y: ub(g / y, x),
    "divide_back1": lambda g, out, x, y: ub(-g * out / y, y),  # x/y² written as out/y
    "maximum_back0": lambda g, out, x, y: ub(g * np.where(x == y, 0.5, (x > y) * 1.0), x),
    "maximum_back1": lambda g, out, x, y: ub(g * np.where(x == y, 0.5, (y > x) * 1.0), y),
    "relu_back": lambda g, out, x: ub(g * (out > 0), x),
}


def sum_back(g, out, x, dim=None, keepdim=False):
    g = np.asarray(g, dtype=float)
    if dim is not None and not keepdim:
        for axis in sorted(np.atleast_1d(dim) % np.ndim(x)):
            g = np.expand_dims(g, int(axis))
    return g + np.zeros(np.shape(x))


def mean_back(g, out, x, dim=None, keepdim=False):
    return sum_back(g, out, x, dim, keepdim) * np.size(out) / np.size(x)


def matmul_back0(g, out, x, y):
    if x.ndim == 1 and y.ndim == 1:
        return g * y
    if x.ndim == 1:
        return y @ g
    if y.ndim == 1:
        return np.outer(g, y)
    return g @ y.T


def matmul_back1(g, out, x, y):
    if x.ndim == 1 and y.ndim == 1:
        return g * x
    if x.ndim == 1:
        return np.outer(x, g)
    if y.ndim == 1:
        return x.T @ g
    return x.T @ g


def bundle(*names, **overrides):
    return {name: overrides.get(name, RIGHT.get(name)) for name in names}


CORRECT = {
    "log_back": RIGHT["log_back"],
    "multiply_back": bundle("multiply_back0", "multiply_back1"),
    "exp_back": RIGHT["exp_back"],
    "negative_back": RIGHT["negative_back"],
    "add_back": bundle("add_back0", "add_back1"),
    "subtract_back": bundle("subtract_back0", "subtract_back1"),
    "divide_back": bundle("divide_back0", "divide_back1"),
    "sum_back": sum_back,
    "mean_back": mean_back,
    "reshape_back": lambda g, out, x, new_shape: np.reshape(g, np.shape(x)) * 1.0,
    "permute_back": lambda g, out, x, axes: np.moveaxis(g * 1.0, range(len(axes)), axes),
    "matmul_back": {"matmul_back0": matmul_back0, "matmul_back1": matmul_back1},
    "maximum_back": bundle("maximum_back0", "maximum_back1"),
    "relu_back": RIGHT["relu_back"],
    "forward_and_back": lambda a, b, c: (
        1 / a + 0 * b, 1 / b + 0 * a, 1 / (c * np.log(c))),  # g = log a + log b + log log c, simplified by hand
}


def sum_to(broadcasted, original):
    """A well-known textbook's version: sum the leading axes, then the stretched ones with keepdims. For a 0-d
    original numpy returns a numpy scalar (np.float64), which stands for a 0-d array."""
    shape = np.shape(original)
    lead = broadcasted.ndim - len(shape)
    axes = tuple(lead + i for i, size in enumerate(shape) if size == 1)
    result = broadcasted.sum(tuple(range(lead)) + axes, keepdims=True)
    result = (np.squeeze(result, tuple(range(lead))) if lead > 0 else result).astype(np.float64) * 1.0
    assert np.shape(result) == shape  # as the exercise asks
    return result


def sum_back_as_a_view(g, out, x, dim=None, keepdim=False):
    g = np.asarray(g, dtype=np.float64)
    return np.broadcast_to(np.expand_dims(g, dim) if dim is not None and not keepdim else g, np.shape(x))


@pytest.mark.parametrize("exercise_id, answer, sample", [
    ("sum_back", sum_back_as_a_view, lambda f: f(np.ones(3), None, np.ones((2, 3)), 0)),
    ("unbroadcast", lambda b, original: np.broadcast_to(unbroadcast_loop(b, original), np.shape(original)),
     lambda f: f(np.ones((2, 3)), np.zeros(3))),
])
def test_read_only_views_are_accepted_by_every_rule_alike(exercise_id, answer, sample):
    """One rule for every backward function: the course's engines add gradients into new arrays, never in place, so
    a read-only view (np.broadcast_to) is as good as a copy."""
    assert not sample(answer).flags.writeable
    check(exercise_id, learner(exercise_id, answer))


def test_unbroadcast_accepts_a_numpy_scalar_for_a_0d_original():
    assert isinstance(sum_to(np.ones((2, 3)), 7.0), np.float64)
    check("unbroadcast", learner("unbroadcast", sum_to))


@pytest.mark.parametrize("exercise_id", sorted(CORRECT))
def test_backward_rules_accept_correct_alternatives(exercise_id):
    check(exercise_id, learner(exercise_id, CORRECT[exercise_id]))


def zeros_like_buffer(g, out, x, y):
    grad = np.zeros_like(x)  # an int buffer when x is an int array
    grad[...] = ub(g * np.where(x == y, 0.5, (x > y) * 1.0), x)
    return grad


def no_expand_dims(g, out, x, dim=None, keepdim=False):
    return np.broadcast_to(np.asarray(g, dtype=float), np.shape(x)).copy()


@pytest.mark.parametrize("exercise_id, answer, phrases", [
    ("log_back", lambda g, out, x: ub(g / out, x), ["torch.autograd gives", "cause: vjp/output-for-input"]),
    ("multiply_back", bundle("multiply_back0", "multiply_back1", multiply_back0=lambda g, out, x, y: g * y),
     ["returned shape", "unbroadcast"]),
    ("multiply_back", bundle("multiply_back0", "multiply_back1", multiply_back0=lambda g, out, x, y: ub(g * x, x)),
     ["uses x where the other operand, y, belongs", "cause: vjp/wrong-operand"]),
    ("multiply_back", bundle("multiply_back0", "multiply_back1", multiply_back1=lambda g, out, x, y: ub(g, y)),
     ["grad_out passed on unchanged", "cause: vjp/local-derivative-missing"]),
    ("multiply_back", bundle("multiply_back0", "multiply_back1",
                             multiply_back1=lambda g, out, x, y: np.sum(g * x).astype(np.int64) * np.ones(np.shape(y), int)),
     ["Python number"]),
    ("exp_back", lambda g, out, x: ub(g * x, x), ["exp_back"]),
    ("negative_back", lambda g, out, x: ub(g, x), ["negative_back", "opposite sign", "cause: vjp/sign"]),
    ("add_back", bundle("add_back0", "add_back1", add_back1=lambda g, out, x, y: np.full(np.shape(y), float(np.sum(g)))),
     ["not over every axis", "cause: vjp/sums-everything", "cause: vjp/sums-everything"]),
    ("subtract_back", bundle("subtract_back0", "subtract_back1", subtract_back1=RIGHT["add_back1"]), ["subtract_back1"]),
    ("divide_back", bundle("divide_back0", "divide_back1", divide_back1=lambda g, out, x, y: ub(-g / np.square(y), y)),
     ["divide_back1"]),
    ("sum_back", no_expand_dims, ["rows and columns swap", "cause: sum_back/axis-misplaced"]),
    ("mean_back", lambda g, out, x, dim=None, keepdim=False: sum_back(g, out, x, dim, keepdim) / np.size(x),
     ["divide by the size of the reduced axes", "cause: mean_back/divides-by-whole-size"]),
    ("mean_back", sum_back, ["mean_back", "cause: mean_back/sum-for-mean"]),
    ("reshape_back", lambda g, out, x, new_shape: np.asarray(g), ["returned shape"]),
    ("permute_back", lambda g, out, x, axes: np.transpose(g, axes), ["inverse permutation"]),
    ("matmul_back", {"matmul_back0": lambda g, out, x, y: g @ y, "matmul_back1": matmul_back1},
     ["matmul_back0 raised ValueError", "grad_out @ y.T", "x's shape (2, 3)", "cause: vjp/shapes-do-not-meet"]),
    ("matmul_back", {"matmul_back0": matmul_back0, "matmul_back1": lambda g, out, x, y: x @ g},
     ["matmul_back1 raised ValueError", "x.T @ grad_out", "y's shape (3, 4)"]),
    ("permute_back", lambda g, out, x, axes: np.transpose(np.asarray(g, dtype=float), np.argsort(axes)),
     ["counted from the end"]),
    ("maximum_back", bundle("maximum_back0", "maximum_back1", maximum_back0=lambda g, out, x, y: ub(g * (x >= y), x)),
     ["half the gradient", "cause: maximum_back/ties-not-split"]),
    ("maximum_back", bundle("maximum_back0", "maximum_back1", maximum_back0=zeros_like_buffer), ["truncates"]),
    ("relu_back", lambda g, out, x: ub(g * (x >= 0), x), ["at exactly 0", "cause: relu_back/passes-at-zero"]),
    ("forward_and_back", lambda a, b, c: (1 / a, 1 / b, 1 / c), ["dg/dc"]),
])
def test_backward_rules_reject_wrong_implementations(exercise_id, answer, phrases):
    rejects(exercise_id, learner(exercise_id, answer), *phrases)


def test_a_name_missing_from_the_notebook_is_named():
    rejects("matmul_back", {"matmul_back0": matmul_back0}, "`matmul_back1` is not defined", "cause: not-defined")


# ------------------------------------------------------------------------------------------- found by red-teaming

def sum_back_axes_at_the_end(g, out, x, dim=None, keepdim=False):
    g = np.asarray(g, dtype=float)
    if dim is not None and not keepdim:
        for _ in np.atleast_1d(dim):
            g = g[..., None]  # right only when the reduced axes were the last ones
    return g + np.zeros(np.shape(x))


def unbroadcast_needs_an_array(broadcasted, original):
    _ = original.shape  # AttributeError for a Python number
    return unbroadcast_loop(broadcasted, original)


def multiply_back0_in_place(g, out, x, y):
    g *= y  # the engine's other backward function reads the same grad_out
    return ub(g, x)


@pytest.mark.parametrize("exercise_id, answer, phrases", [
    ("sum_back", sum_back_axes_at_the_end, ["where it was"]),
    ("multiply_back", bundle("multiply_back0", "multiply_back1", multiply_back0=multiply_back0_in_place), ["in place"]),
    ("multiply_back", bundle("multiply_back0", "multiply_back1", multiply_back0=lambda g, out, x, y: ub(g * out / x, x)),
     ["divides by zero", "cause: multiply_back/divides-by-input"]),
    ("exp_back", lambda g, out, x: ub(g * out, x).astype(np.float32), ["float64"]),
    ("unbroadcast", unbroadcast_needs_an_array, ["Python number"]),
    ("negative_back", lambda g, out, x: exit(), ["SystemExit"]),
])
def test_backward_rules_reject_red_team_answers(exercise_id, answer, phrases):
    rejects(exercise_id, learner(exercise_id, answer), *phrases)


# ------------------------------------------------------------------------------------------- slips of the solution

def solution(edits):
    """The solution notebook's namespace with text edits of its answer cells: a learner's slip, as it looks."""
    import matplotlib.pyplot as plt

    from autograder.tools.solutions import solution_namespace

    namespace = solution_namespace("03_backward_functions", edits)
    plt.close("all")  # each run draws section 3.1's two broadcast figures again: more than 20 open ones warn
    return namespace


@pytest.mark.parametrize("exercise_id, edits, phrases", [
    ("unbroadcast", {"unbroadcast": [('    assert result.shape == shape, f"unbroadcast produced {result.shape}, '
                                      'expected {shape}"\n', "")]}, ["assert that the result has the original's shape",
                                           "cause: unbroadcast/no-shape-assert"]),
    ("unbroadcast", {"unbroadcast": [("result = np.asarray(result, dtype=np.float64)",
                                      "result = np.asarray(result, dtype=np.float64 if result.dtype.kind in 'iub' "
                                      "else result.dtype)")]}, ["float32 upstream gradient", "float64"]),
    ("sum_back", {"sum_back": [("    return np.broadcast_to(grad_out, np.shape(x)).copy()",
                                "    buffer = np.zeros_like(x)\n    buffer[...] = grad_out\n    return buffer")]},
     ["integer gradient buffer"]),
    ("forward_and_back", {"log_back": [("grad_out / x", "grad_out * x")]}, ["Fix log_back first"]),
])
def test_stated_requirements_reject_the_slips_that_break_them(exercise_id, edits, phrases):
    rejects(exercise_id, solution(edits), *phrases)


# ------------------------------------------------------------------------------------------- expand_back

def expand_back_loop(g, out, x, shape):
    """Without unbroadcast: add up the copies one leading axis at a time, then each stretched size-1 axis."""
    g = np.array(g, dtype=np.float64)
    while g.ndim > np.ndim(x):
        g = sum(g[i] for i in range(len(g)))
    for axis, size in enumerate(np.shape(x)):
        if size == 1 and g.shape[axis] != 1:
            g = np.sum(g, axis=axis, keepdims=True)
    return np.asarray(g, dtype=np.float64)


def expand_back_from_shape(g, out, x, shape):
    """Reads `shape` instead of grad_out's shape: the axes are the leading ones and those x has as size 1."""
    lead = len(shape) - np.ndim(x)
    stretched = tuple(lead + i for i, size in enumerate(np.shape(x)) if size == 1 and shape[lead + i] != 1)
    summed = np.sum(np.asarray(g, dtype=np.float64), axis=tuple(range(lead)) + stretched, keepdims=True)
    return summed.reshape(np.shape(x))


def test_expand_back_solution_passes():
    check("expand_back", solution({}))


@pytest.mark.parametrize("answer", [expand_back_loop, expand_back_from_shape])
def test_expand_back_accepts_correct_alternatives(answer):
    check("expand_back", learner("expand_back", answer))


RIGHT_EXPAND = "    return unbroadcast(grad_out, x)"


@pytest.mark.parametrize("wrong, phrases", [
    ("    return grad_out", ["sum grad_out over the rows", "returned shape (2, 3), but the input has shape (3,)"]),
    ("    return np.full(np.shape(x), np.sum(grad_out))", ["not over every axis", "received [21., 21., 21.]"]),
    ("    return unbroadcast(grad_out, x) * np.size(x) / np.size(grad_out)", ["not averaged", "cause: vjp/mean-for-sum",
         "cause: vjp/mean-for-sum"]),
    ("    return np.broadcast_to(grad_out, np.shape(x))", ["expand_back raised ValueError", "x's shape (3,)"]),
    ("    return np.sum(grad_out, axis=0)", ["copied along axis 1 only", "returned shape (3,)"]),
    ("    return unbroadcast(grad_out, x).astype(np.asarray(x).dtype)", ["expand_back returned dtype"]),  # random cases
])
def test_expand_back_rejects_slips_with_their_messages(wrong, phrases):
    rejects("expand_back", solution({"expand_back": [(RIGHT_EXPAND, wrong)]}), *phrases)


def test_unbroadcast_without_keepdims_that_fails_its_own_shape_assert_is_told_the_slip():
    """The exercise asks for an assert on the result's shape; the solution's own assert then fired first, and the
    no-keepdims slip was told as a crash (issue 24)."""
    edits = {"unbroadcast": [("result.sum(axis=stretched, keepdims=True)", "result.sum(axis=stretched)")]}
    rejects("unbroadcast", solution(edits), "your own shape assert failed", "keepdims=True",
            "cause: unbroadcast/no-keepdims")


def raises_an_assertion_of_its_own(broadcasted, original):
    raise AssertionError("not a shape assert")


def test_an_assertion_where_no_axis_was_stretched_stays_a_crash():
    rejects("unbroadcast", learner("unbroadcast", raises_an_assertion_of_its_own), "AssertionError", "cause: crash")


def test_expand_back_earns_nothing_while_unbroadcast_fails():
    """The page says so: the check runs unbroadcast's check first (builds_on)."""
    edits = {"unbroadcast": [("result.sum(axis=stretched, keepdims=True)", "result.sum(axis=stretched)")]}
    rejects("expand_back", solution(edits), "runs your code from unbroadcast", "Fix unbroadcast first")


def test_expand_back_page_states_what_numpy_and_torch_do():
    """The numbers on the exercise page: broadcast_to's example, torch's stride-0 view, and its summing backward."""
    import torch

    assert np.broadcast_to(np.array([1.0, 2.0, 3.0]), (2, 3)).tolist() == [[1, 2, 3], [1, 2, 3]]
    x = torch.tensor([[0.5], [2.0]], dtype=torch.float64, requires_grad=True)
    expanded = x.expand(2, 3)
    assert expanded.stride() == (1, 0)  # the copies along axis 1 repeat each element in memory with stride 0
    expanded.backward(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=torch.float64))
    assert x.grad.tolist() == [[6.0], [15.0]]  # the test cell's numbers: each row's three copies add up


# ------------------------------------------------------------------------------------------- tanh_back

def tanh_back_through_cosh(g, out, x):
    """1 / cosh(x)², the textbook form of tanh's derivative, computed from the input rather than the output."""
    return np.asarray(g, dtype=np.float64) / np.cosh(x) ** 2


def tanh_back_factored(g, out, x):
    """(1 - out)(1 + out): the same polynomial, factored."""
    return ub(g * (1 - out) * (1 + out), x)


def test_tanh_back_solution_passes():
    check("tanh_back", solution({}))


def tanh_back_recomputed_in_float64(g, out, x):
    """tanh recomputed from x instead of reading out: fine in float64 (in float32 it loses digits, see below)."""
    return ub(g * (1 - np.tanh(np.asarray(x, dtype=np.float64)) ** 2), x)


@pytest.mark.parametrize("answer", [tanh_back_through_cosh, tanh_back_factored, tanh_back_recomputed_in_float64])
def test_tanh_back_accepts_correct_alternatives(answer):
    check("tanh_back", learner("tanh_back", answer))


RIGHT_TANH = "    return grad_out * (1 - out ** 2)"


@pytest.mark.parametrize("wrong, phrases", [
    ("    return grad_out * (1 - x ** 2)", ["the input x stands where the output belongs",
         "cause: tanh_back/input-for-output"]),
    ("    return 1 - out ** 2", ["the local derivative 1 − out² alone", "cause: vjp/ignores-upstream"]),
    ("    return grad_out * (1 - np.tanh(out) ** 2)", ["applies tanh twice", "cause: tanh_back/tanh-twice"]),
    ("    return grad_out * (1 + out ** 2)", ["expected [ 0.4199743416", "cause: mismatch"]),  # no slip's value
    ("    return (grad_out * (1 - out ** 2)).astype(np.float32)", ["tanh_back returned dtype float32"]),
    ("    return grad_out * (1 - np.tanh(x) ** 2)", ["recomputes tanh from the float32 x",
         "cause: tanh_back/recomputed-in-float32"]),
])
def test_tanh_back_rejects_slips_with_their_messages(wrong, phrases):
    rejects("tanh_back", solution({"tanh_back": [(RIGHT_TANH, wrong)]}), *phrases)


def test_tanh_back_page_states_what_torch_computes():
    """The numbers on the exercise page, in its test cell and in its Swap roles box, against torch.autograd."""
    import nbformat
    import torch

    from autograder.contract import assignments

    cells = {c.id: c.source for c in nbformat.read(assignments()["03_backward_functions"], as_version=4).cells}
    assert "`out = 0.7616` and the slope is `1 − 0.7616² = 0.4200`" in cells["c22-tanh"]
    assert "[1.0, 0.8400], atol=1e-4" in cells["c22-tanh-test"]
    assert "np.array([-20.0, 0.0, 0.5, 20.0])" in cells["c22-tanh-swap"] and "exactly 0" in cells["c22-tanh-swap"]
    x = torch.tensor([0.0, 1.0, -20.0, 0.5, 20.0], dtype=torch.float64, requires_grad=True)
    out = torch.tanh(x)
    out.backward(torch.tensor([1.0, 2.0, 1.0, 1.0, 1.0], dtype=torch.float64))
    assert round(out[1].item(), 4) == 0.7616 and round(1 - out[1].item() ** 2, 4) == 0.4200
    assert x.grad[:2].tolist() == pytest.approx([1.0, 0.8400], abs=1e-4)  # the test cell's grad_out [1, 2]
    # the swap box: saturated at ±20 (tanh is ±1.0 in float64, so the gradient is exactly 0), 0.79 at 0.5
    assert x.grad[2].item() == 0.0 and x.grad[4].item() == 0.0 and round(x.grad[3].item(), 2) == 0.79
    assert np.tanh(20.0) == 1.0
