"""Checks for notebook 4, "The tensor engine": recording the graph, topological_sort, backprop, leaf semantics.

The engine's contract (fixed by the notebook's given code): a ``Tensor`` holds ``.array`` (float ndarray),
``.requires_grad``, ``.grad`` (None or a Tensor), ``.recipe`` (None on leaves; else ``.inputs``, ``.backwards`` with
one backward function per input, ``.kwargs``), ``.retains_grad``, and the properties ``.is_leaf`` and ``.parents``.

``topological_sort`` and ``backprop`` are checked on graphs that a reference implementation of the operators records
(:func:`reference_class`), so a slip in the learner's operators cannot hide or fake a backprop bug; the operators
are checked with a reference backward pass (:func:`reference_gradients`); the ``engine`` check then runs random
programs on the learner's whole engine. Every gradient is compared with torch.autograd in float64.

Numbers from course seed 002: f = log(x) + exp(y)·z at (1, 3, 2) gives (1, 40.1711, 20.0855); w = 2, x = 3,
(w·x − 1)² gives w.grad 30 and x.grad None; x = [2, 3], y = [x0·x1, x0 + x1], seed v = [2, −1] gives [5, 3];
X = arange(6).reshape(2, 3), b = zeros(3), mean(X + b) gives 1/6 and 1/3, then sum(X + b) gives ones and 2s;
w = 2: w² then 3w gives w.grad 4 then 7, and 3 after clearing; y = a·a at a = 3 gives 6; x = 2, h = 3x retained,
loss = ½h² + zero² gives x.grad 18, h.grad 6, zero.grad 0, unused.grad None.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from hypothesis import given, strategies as st

from autograder.checks import exercise, reference_engine
from autograder.checks.graph_walks import EARLY_NODE, EVERY_PATH, SHARED_IS_NOT_A_CYCLE, TENSOR, check_order
from autograder.checks.recorded import RecordedGraph
from autograder.checks.reference_engine import REFERENCE_RULES, graph_inputs
from autograder.diagnostics import RANDOM_CASES, CheckFailure, call_learner, call_on_deep_graph, fmt
from autograder.remote import beside
from labtools.graph import inputs_first

CHAIN_LENGTH = 10_000  # deeper than Python's default recursion limit (1,000)
SCALAR_ONLY = "grad can be implicitly created only for scalar outputs"  # torch's RuntimeError texts
NO_GRAD_FN = "element 0 of tensors does not require grad and does not have a grad_fn"


def reference_gradients(end, seed) -> dict[int, np.ndarray]:
    """Gradient of every node reached from ``end``, keyed by id, by the recorded backward functions.

    Reads the graph only; no ``.grad`` is written. ``seed`` is an ndarray of end's shape.
    """
    grads = {id(end): np.asarray(seed, dtype=np.float64)}
    for node in reversed(inputs_first(end, graph_inputs)):
        if node.recipe is None or id(node) not in grads:
            continue
        arrays = [x.array if hasattr(x, "array") else x for x in node.recipe.inputs]
        for x, back in zip(node.recipe.inputs, node.recipe.backwards):
            if hasattr(x, "array") and x.requires_grad:
                part = np.asarray(back(grads[id(node)], node.array, *arrays, **node.recipe.kwargs), dtype=np.float64)
                grads[id(x)] = grads[id(x)] + part if id(x) in grads else part
    return grads


# ------------------------------------------------------------------------------------------------ random programs

SHAPES = [(), (3,), (1, 3), (2, 1), (2, 3), (3, 2)]
BINARY = ["+", "-", "*", "/", "@"]
WITH_NUMBER = ["c+", "c-", "c*", "c/", "-c", "/c"]
UNARY = ["neg", "exp", "log", "relu", "sum", "mean", "reshape", "index"]
CONSTANTS = [-2.0, 0.5, 3.0]


@dataclass(frozen=True)
class Step:
    """One drawn line of a program, before it is made valid: the operation and free choices (operands, params)."""
    op: str
    a: int
    b: int
    k: int


@dataclass
class Program:
    """A valid program: leaves (values, requires_grad), resolved lines (op, i, j, param) and the backward seed."""
    leaves: list
    lines: list
    seed: np.ndarray | None
    listing: str

    def replay(self, leaves):
        """Run the lines on any objects with torch's tensor API; returns every value, leaves first."""
        values = list(leaves)
        for op, i, j, param in self.lines:
            values.append(_apply(op, values[i], values[j] if j is not None else None, param))
        return values


def _apply(op, x, y, p):
    simple = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y, "/": lambda: x / y, "@": lambda: x @ y,
              "c+": lambda: p + x, "c-": lambda: p - x, "c*": lambda: p * x, "c/": lambda: p / x,
              "-c": lambda: x - p, "/c": lambda: x / p, "neg": lambda: -x, "exp": lambda: x.exp(),
              "log": lambda: x.log(), "relu": lambda: x.relu(), "reshape": lambda: x.reshape(p), "index": lambda: x[p]}
    if op in simple:
        return simple[op]()
    reduce = getattr(x, op)  # sum or mean
    return reduce() if p is None else reduce(dim=p[0], keepdim=p[1])


def _text(op, i, j, p):
    infix = {"+": "+", "-": "-", "*": "*", "/": "/", "@": "@"}
    if op in infix:
        return f"v{i} {infix[op]} v{j}"
    if op in ("c+", "c-", "c*", "c/"):
        return f"{p} {op[1]} v{i}"
    if op in ("-c", "/c"):
        return f"v{i} {op[0]} {p}"
    if op == "neg":
        return f"-v{i}"
    if op in ("sum", "mean"):
        return f"v{i}.{op}()" if p is None else f"v{i}.{op}(dim={p[0]}, keepdim={p[1]})"
    if op == "reshape":
        return f"v{i}.reshape({p})"
    if op == "index":
        return f"v{i}[{_index_text(p)}]"
    return f"v{i}.{op}()"


def _index_text(index):
    if isinstance(index, tuple):
        return ", ".join(":" if isinstance(part, slice) else repr(part) for part in index)
    return repr(index)


def _resolve(step, values, needs_grad):
    """Turn a drawn step into a valid line for the current values (numpy arrays): (op, i, j, param)."""
    n = len(values)
    i = n - 1 - step.a % min(n, 3) if step.a % 2 else step.a % n  # half the time a recent value: deep graphs
    x = values[i]
    op, j, p = step.op, None, None
    if op in ("+", "-", "*", "/"):
        partners = [m for m in range(n) if _broadcastable(x.shape, values[m].shape)]  # includes i: reuse
        j = partners[step.b % len(partners)]
        if op == "/" and np.min(np.abs(values[j]), initial=np.inf) < 0.2:
            op = "*"
    elif op == "@":
        partners = [m for m in range(n) if x.ndim in (1, 2) and values[m].ndim in (1, 2)
                    and values[m].shape[0] == x.shape[-1] and not (x.ndim == 1 and values[m].ndim == 1)]
        if partners:
            j = partners[step.b % len(partners)]
        else:
            op = "c*"
    elif op == "sum" or op == "mean":
        axes = [None] + [(d, bool(step.b % 2)) for d in range(-1, x.ndim)] if x.ndim else [None]
        p = axes[step.k % len(axes)]
    elif op == "reshape":
        p = [(x.size,), (1, x.size), (x.size, 1)][step.k % 3]
    elif op == "index":
        choices = ([0, [0, 0]] if x.ndim and x.shape[0] else []) + ([(slice(None), 0)] if x.ndim == 2 else [])
        if choices:
            p = choices[step.k % len(choices)]
        else:
            op = "c*"
    unsafe = ((op == "c/" and np.min(np.abs(x), initial=np.inf) < 0.2) or (op == "log" and np.min(x, initial=1) < 0.05)
              or (op == "exp" and np.max(x, initial=0) > 5) or (op == "relu" and np.min(np.abs(x), initial=1) < 1e-6))
    if op in WITH_NUMBER + ["c*"] and p is None or unsafe:
        op = "c*" if unsafe else op
        p = CONSTANTS[step.k % len(CONSTANTS)]
    value = np.asarray(_apply(op, torch.from_numpy(x), None if j is None else torch.from_numpy(values[j]), p).numpy())
    if not np.all(np.isfinite(value)) or np.max(np.abs(value), initial=0) > 1e4:
        op, j, p = "c*", None, 0.5
        value = np.asarray(0.5 * x)
    return (op, i, j, p), value, needs_grad[i] or (j is not None and needs_grad[j])


def _broadcastable(a, b):
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


def make_program(leaf_specs, steps, implicit_seed, seed_choice) -> Program:
    """Build a valid program from drawn parts; its output is the last value that depends on a grad-requiring leaf."""
    leaves, values, needs_grad, lines = [], [], [], []
    listing = []
    for n, (shape, requires_grad, value_seed) in enumerate(leaf_specs):
        rng = np.random.default_rng(value_seed)
        value = np.asarray((rng.uniform(0.2, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).round(2))
        requires_grad = requires_grad or n == 0
        leaves.append((value, requires_grad))
        values.append(value)
        needs_grad.append(requires_grad)
        listing.append(f"v{n} = Tensor({fmt(value)}, requires_grad={requires_grad})")
    for step in steps:
        line, value, grad = _resolve(step, values, needs_grad)
        lines.append(line)
        values.append(value)
        needs_grad.append(grad)
        listing.append(f"v{len(values) - 1} = {_text(*line)}")
    last = max(k for k, g in enumerate(needs_grad) if g)
    if last < len(leaves):  # nothing computed needs a gradient: the output is one line from a grad-requiring leaf
        lines, listing = [("c*", last, None, 3.0)], listing[:len(leaves)] + [f"v{len(leaves)} = 3.0 * v{last}"]
        last, values = len(leaves), values[:len(leaves)] + [np.asarray(3.0 * values[last])]
    lines = lines[:last - len(leaves) + 1]
    listing = listing[:last + 1]
    if implicit_seed and values[last].size > 1:  # end with a sum, so the default seed of 1 applies
        lines.append(("sum", last, None, None))
        listing.append(f"v{last + 1} = {_text('sum', last, None, None)}")
        last, values = last + 1, values[:last + 1] + [np.asarray(values[last].sum())]
    out = values[last]
    seed = None
    if not implicit_seed:
        seed = np.random.default_rng(seed_choice).uniform(-2, 2, out.shape).round(1)
        listing.append(f"backprop(v{last}, end_grad=Tensor({fmt(seed)}))")
    else:
        listing.append(f"backprop(v{last})")
    return Program(leaves, lines, seed, "\n  ".join(listing))


def programs(max_steps=40):
    """Hypothesis strategy for valid programs. Hypothesis draws the size and a seed; the seed draws the rest, so
    every operation appears at every size, and shrinking towards fewer steps gives the smallest failing program."""
    return st.builds(_drawn_program, st.integers(1, 3), st.integers(1, max_steps), st.integers(0, 2 ** 32 - 1),
                     st.booleans())


def _drawn_program(n_leaves, n_steps, seed, implicit_seed):
    rng = np.random.default_rng(seed)
    ops = BINARY * 2 + WITH_NUMBER + UNARY
    leaf_specs = [(SHAPES[rng.integers(len(SHAPES))], bool(rng.random() < 0.7), int(rng.integers(2 ** 16)))
                  for _ in range(n_leaves)]
    steps = [Step(ops[rng.integers(len(ops))], *(int(v) for v in rng.integers(10 ** 6, size=3))) for _ in range(n_steps)]
    return make_program(leaf_specs, steps, implicit_seed, int(rng.integers(2 ** 16)))


def torch_run(program):
    """The program's output and leaf gradients (None where torch leaves .grad unset), by torch.autograd in float64."""
    leaves = [torch.tensor(v, dtype=torch.float64, requires_grad=rg) for v, rg in program.leaves]
    out = program.replay(leaves)[-1]
    out.backward(None if program.seed is None else torch.tensor(program.seed))
    return out.detach().numpy(), [None if leaf.grad is None else leaf.grad.numpy() for leaf in leaves]


def compare_leaf_grads(ex, Tensor, leaves, values, expected, listing):
    """Every leaf's .grad must be what torch stores (None included); every non-leaf's must stay None."""
    for n, (leaf, want) in enumerate(zip(leaves, expected)):
        got = leaf.grad
        if want is None and got is not None:
            why = ("it has requires_grad=False: data gets no gradient" if not leaf.requires_grad else
                   "it took no part in computing the output")
            raise CheckFailure(ex, f"v{n}.grad should stay None ({why}), but it was set.\n  {listing}")
        if want is None:
            continue
        if got is None:
            raise CheckFailure(ex, f"v{n}.grad is None, but torch gives {fmt(want)}: the gradient never reached this "
                                   f"leaf, or was not stored on it.\n  {listing}")
        array = grad_array(ex, Tensor, got, f"v{n}.grad")
        if array.shape != want.shape or not np.allclose(array, want, rtol=1e-8, atol=1e-10):
            raise CheckFailure(ex, f"gradient of v{n} differs from torch.autograd for the program\n  {listing}\n"
                                   f"expected {fmt(want)}, received {fmt(array)}.")
    for n, node in enumerate(values[len(leaves):], start=len(leaves)):
        if node.grad is not None:
            raise CheckFailure(ex, f"v{n} is not a leaf (an operation made it), yet its .grad was set. Like torch, "
                                   f"store gradients only on leaves, unless retain_grad() was called.\n  {listing}")


def grad_array(ex, Tensor, grad, what) -> np.ndarray:
    if not isinstance(grad, Tensor):
        raise CheckFailure(ex, f"{what} is a {type(grad).__name__}; store a Tensor, as torch does: Tensor(gradient).")
    if np.asarray(grad.array).dtype != np.float64:
        raise CheckFailure(ex, f"{what} holds {np.asarray(grad.array).dtype} numbers: keep gradients in float64, which "
                               "the backward functions return (float32 keeps only ~7 significant digits).")
    if grad.requires_grad:
        raise CheckFailure(ex, f"{what} requires grad: a gradient is data, Tensor(gradient) without requires_grad, "
                               "as in torch.")
    return np.array(grad.array, dtype=np.float64)  # a copy: later passes must not change what was read


# ------------------------------------------------------------------------------------------------ apply_op

@exercise("apply_op")
def check_apply_op(apply_op, no_grad, Tensor) -> None:
    ex = "apply_op"
    multiply = REFERENCE_RULES["multiply"][1]

    def forward(a, b):
        if isinstance(a, Tensor) or isinstance(b, Tensor):
            raise CheckFailure(ex, "forward received a Tensor: pass it the arrays (x.array), since numpy functions know "
                                   "nothing about Tensors.")
        return np.multiply(a, b)

    x, y = Tensor(np.array([1.0, 2.0]), requires_grad=True), Tensor(np.array([3.0, 4.0]))
    shown = "apply_op(np.multiply, (multiply_back0, multiply_back1), x, y) with x requiring grad"
    out = call_learner(ex, apply_op, forward, multiply, x, y, shown_input=shown)
    _expect_tensor(ex, Tensor, out, np.array([3.0, 8.0]), shown)
    if not out.requires_grad or out.recipe is None:
        raise CheckFailure(ex, f"{shown}: the result should require grad and carry a Recipe, since x requires grad.")
    recipe = out.recipe
    if len(recipe.inputs) != 2 or recipe.inputs[0] is not x or recipe.inputs[1] is not y:
        raise CheckFailure(ex, f"{shown}: recipe.inputs should be the inputs themselves, (x, y), in order (the Tensors, "
                               "not their arrays: backprop must reach the input tensors).")
    if type(recipe.inputs) is not tuple or type(recipe.backwards) is not tuple:
        raise CheckFailure(ex, f"{shown}: recipe.inputs and recipe.backwards should be tuples, as Recipe declares "
                               f"(got {type(recipe.inputs).__name__} and {type(recipe.backwards).__name__}): "
                               "tuple(...) them.")
    if tuple(recipe.backwards) != tuple(multiply) or dict(recipe.kwargs) != {}:
        raise CheckFailure(ex, f"{shown}: recipe.backwards should be the backward functions given, in order, and "
                               f"recipe.kwargs the keyword arguments ({{}} here); got {recipe.backwards!r}, {recipe.kwargs!r}.")
    if out.grad is not None:
        raise CheckFailure(ex, "a new tensor's .grad should be None until backprop fills it.")

    plain = call_learner(ex, apply_op, np.multiply, multiply, y, 2.0, shown_input="apply_op(..., y, 2.0) with y data only")
    _expect_tensor(ex, Tensor, plain, np.array([6.0, 8.0]), "y * 2.0")
    if plain.requires_grad or plain.recipe is not None:
        raise CheckFailure(ex, "no input requires grad, so nothing should be recorded (requires_grad False, recipe "
                               "None): torch builds no graph for computations on data alone.")
    scaled = call_learner(ex, apply_op, np.multiply, multiply, 2.0, x, shown_input="apply_op(..., 2.0, x)")
    _expect_tensor(ex, Tensor, scaled, np.array([2.0, 4.0]), "2.0 * x")
    if scaled.recipe is None or tuple(scaled.recipe.inputs) != (2.0, x):
        raise CheckFailure(ex, "2.0 * x should record inputs (2.0, x): plain numbers are inputs too, left as they are.")

    def summing(a, dim=None, keepdim=None):
        if keepdim is None:
            raise CheckFailure(ex, "forward did not receive the keyword arguments: call forward(*arrays, **kwargs).")
        return np.sum(a, axis=dim, keepdims=keepdim)

    m = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    shown = "apply_op(summing, (sum_back,), m, dim=0, keepdim=True)"
    total = call_learner(ex, apply_op, summing, REFERENCE_RULES["sum"][1], m, dim=0, keepdim=True, shown_input=shown)
    _expect_tensor(ex, Tensor, total, np.array([[3.0, 5.0, 7.0]]), shown)
    if total.recipe is None or dict(total.recipe.kwargs) != {"dim": 0, "keepdim": True}:
        raise CheckFailure(ex, f"{shown}: pass the keyword arguments to forward and keep them in recipe.kwargs, so the "
                               "backward functions receive them too.")
    _check_no_grad(ex, apply_op, no_grad, multiply, x, y)


def _expect_tensor(ex, Tensor, out, expected, shown):
    if not isinstance(out, Tensor):
        raise CheckFailure(ex, f"{shown} returned {type(out).__name__}; return a Tensor wrapping forward's result.")
    if not np.array_equal(np.asarray(out.array), expected) or np.asarray(out.array).shape != expected.shape:
        raise CheckFailure(ex, f"{shown}: expected an array {fmt(expected)}, received {fmt(np.asarray(out.array))}.")


def _in_block(ex, no_grad, body, error: BaseException | None = None):
    """Run body() inside the learner's ``with no_grad():``, every learner call guarded; ``error`` ends the block."""
    manager = call_learner(ex, no_grad, shown_input="no_grad()")
    call_learner(ex, manager.__enter__, shown_input="entering `with no_grad():`")
    result = body()
    exc_info = (type(error), error, None) if error is not None else (None, None, None)
    if call_learner(ex, manager.__exit__, *exc_info, shown_input="leaving `with no_grad():`") and error is not None:
        raise CheckFailure(ex, "an exception raised inside `with no_grad():` was swallowed: no_grad must restore the "
                               "mode and let the exception go on (do not catch it, and do not return True from "
                               "__exit__).")
    return result


def _check_no_grad(ex, apply_op, no_grad, rules, x, y):
    def recorded():
        out = call_learner(ex, apply_op, np.multiply, rules, x, y, shown_input="apply_op(np.multiply, ..., x, y)")
        return out.requires_grad or out.recipe is not None

    def outer():
        if recorded():
            raise CheckFailure(ex, "inside `with no_grad():` nothing should be recorded: apply_op must read "
                                   "GradMode.enabled and give results requires_grad=False and no recipe.")
        _in_block(ex, no_grad, lambda: None)
        if recorded():
            raise CheckFailure(ex, "after a nested `with no_grad():` ends, the outer block is still in no-grad mode: "
                                   "restore the mode that was on before, not True.")

    _in_block(ex, no_grad, outer)
    if not recorded():
        raise CheckFailure(ex, "after `with no_grad():` ends, recording must be back on.")
    _in_block(ex, no_grad, lambda: None, error=KeyError("raised inside the block"))
    if not recorded():
        raise CheckFailure(ex, "an exception inside `with no_grad():` left recording off: restore the mode in "
                               "__exit__ (or in a finally: block), which runs however the block ends.")


# ------------------------------------------------------------------------------------------------ operators

@exercise("operators", builds_on=("apply_op",))
def check_operators(Tensor) -> None:
    ex = "operators"
    x = np.array([[0.5, -1.0, 2.0], [1.5, 3.0, -0.5]])
    b = np.array([1.0, -2.0, 4.0])
    w = np.array([[1.0, 0.5], [-1.0, 2.0], [0.5, 0.25]])
    cases = [  # (shown, function of (x, b, w) on tensors, what the exercise text says about it)
        ("x + b", lambda x, b, w: x + b, ""), ("2.0 + x", lambda x, b, w: 2.0 + x, "needs __radd__"),
        ("x - b", lambda x, b, w: x - b, ""), ("2.0 - x", lambda x, b, w: 2.0 - x,
                                                "is 2 - x, not x - 2: in __rsub__ the tensor is the right operand"),
        ("x * b", lambda x, b, w: x * b, ""), ("x / b", lambda x, b, w: x / b, ""),
        ("1.0 / b", lambda x, b, w: 1.0 / b, "is 1 / b, not b / 1: in __rtruediv__ the tensor is the right operand"),
        ("-x", lambda x, b, w: -x, ""), ("x @ w", lambda x, b, w: x @ w, ""), ("b @ w", lambda x, b, w: b @ w, ""),
        ("b.exp()", lambda x, b, w: b.exp(), ""), ("(x * x).log()", lambda x, b, w: (x * x).log(), ""),
        ("x.relu()", lambda x, b, w: x.relu(), ""), ("x.sum()", lambda x, b, w: x.sum(), ""),
        ("x.sum(dim=1)", lambda x, b, w: x.sum(dim=1), "removes axis 1"),
        ("x.sum(dim=0, keepdim=True)", lambda x, b, w: x.sum(dim=0, keepdim=True), "keeps axis 0 as size 1"),
        ("x.mean()", lambda x, b, w: x.mean(), ""), ("x.mean(dim=-1)", lambda x, b, w: x.mean(dim=-1), ""),
        ("x.mean(dim=1, keepdim=True)", lambda x, b, w: x.mean(dim=1, keepdim=True), "keeps axis 1 as size 1"),
        ("x.reshape((3, 2))", lambda x, b, w: x.reshape((3, 2)), ""), ("x[1]", lambda x, b, w: x[1], ""),
        ("x[:, 0]", lambda x, b, w: x[:, 0], ""),
        ("b[[0, 0, 2]]", lambda x, b, w: b[[0, 0, 2]],
         "picks b[0] twice: its gradient must add both copies. `grad[index] += grad_out` keeps only one of repeated "
         "indices; np.add.at(grad, index, grad_out) adds them all"),
    ]
    for shown, fn, note in cases:
        _check_operator(ex, Tensor, shown, fn, (x, b, w), note)

    @RANDOM_CASES
    @given(programs(max_steps=12))
    def random_case(program):
        leaves = [Tensor(v.copy(), requires_grad=rg) for v, rg in program.leaves]
        values = call_learner(ex, program.replay, leaves, shown_input=program.listing)
        want_out, want_grads = torch_run(program)
        out = values[-1]
        if not isinstance(out, Tensor) or not np.allclose(np.asarray(out.array, dtype=np.float64), want_out,
                                                          rtol=1e-10, atol=1e-12):
            raise CheckFailure(ex, f"the program's result differs from torch:\n  {program.listing}\nexpected "
                                   f"{fmt(want_out)}, received {fmt(getattr(out, 'array', out))}.")
        seed = np.ones(want_out.shape) if program.seed is None else program.seed
        grads = reference_gradients(out, seed)
        for n, (leaf, want) in enumerate(zip(leaves, want_grads)):
            got = grads.get(id(leaf))
            if (want is None) != (got is None) or (want is not None and not np.allclose(got, want, rtol=1e-8, atol=1e-10)):
                raise CheckFailure(ex, f"the graph your operators record gives v{n} the gradient {fmt(got)}, torch "
                                       f"{fmt(want)}, for the program\n  {program.listing}\nCheck which backward "
                                       "functions each operator records, and that inputs are in the order of "
                                       "the arguments of forward.")

    random_case()


def _swapped_inputs(shown, got, arrays):
    """A hint when a binary operator computed its inputs the other way round (y - x for x - y)."""
    x, b, w = arrays
    swaps = {"x - b": b - x, "x / b": b / x, "2.0 - x": x - 2.0, "1.0 / b": b / 1.0}
    if shown in swaps and got.shape == np.shape(swaps[shown]) and np.allclose(got, swaps[shown], rtol=1e-12):
        return " That is the operation with its inputs swapped: forward(x, y) must compute x op y, in that order."
    return ""


def _check_operator(ex, Tensor, shown, fn, arrays, note):
    tensors = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    out = call_learner(ex, fn, *tensors, shown_input=shown)
    leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    want = fn(*leaves)
    hint = f" ({shown} {note}.)" if note else ""
    if not isinstance(out, Tensor):
        raise CheckFailure(ex, f"{shown} returned {type(out).__name__}; an operator returns a Tensor (from apply_op).")
    got = np.asarray(out.array)
    if got.shape != tuple(want.shape) or not np.allclose(got, want.detach().numpy(), rtol=1e-12):
        swapped = _swapped_inputs(shown, got, arrays)
        raise CheckFailure(ex, f"{shown}: expected {fmt(want.detach().numpy())}, received {fmt(got)}.{hint}{swapped}")
    if not out.requires_grad or out.recipe is None:
        raise CheckFailure(ex, f"{shown} was not recorded (no recipe), though its inputs require grad: build it "
                               "with apply_op.")
    seed = np.arange(1.0, want.numel() + 1).reshape(tuple(want.shape))
    want.backward(torch.tensor(seed))
    grads = reference_gradients(out, seed)
    for name, tensor, leaf in zip("xbw", tensors, leaves):
        expected = None if leaf.grad is None else leaf.grad.numpy()
        got = grads.get(id(tensor))
        if expected is None:
            continue
        if got is None or got.shape != expected.shape or not np.allclose(got, expected, rtol=1e-12):
            shape = ("" if got is None or got.shape == expected.shape else
                     f" That gradient has shape {got.shape}, but {name} has shape {expected.shape}: the backward "
                     "functions are probably in the wrong order (backwards[i] belongs to inputs[i]).")
            raise CheckFailure(ex, f"{shown}: with upstream gradient {fmt(seed)}, the recorded backward functions give "
                                   f"{name} the gradient {fmt(got)}; torch gives {fmt(expected)}.{hint}{shape}")


# ------------------------------------------------------------------------------------------------ topological_sort

@exercise("topological_sort")
def check_topological_sort(topological_sort, Tensor) -> None:
    ex = "topological_sort"
    kit = beside(Tensor, reference_engine)
    Node = kit.reference_class(Tensor)
    g = RecordedGraph(Node, only_requiring_grad=True)

    def sort(end, shown):
        try:
            order = call_learner(ex, topological_sort, end, shown_input=shown)
        except CheckFailure as failure:
            if isinstance(failure.cause, ValueError):
                raise CheckFailure(ex, f"{failure.message}\nThat graph has no cycle: {SHARED_IS_NOT_A_CYCLE}") from None
            raise
        check_order(ex, g, order, end, shown, TENSOR)

    sort(g.leaf(1.0, requires_grad=True), "a single leaf")
    x = g.leaf(2.0, requires_grad=True)
    a = g.mul(x, x)
    sort(g.add(g.mul(a, x), g.mul(a, g.leaf(3.0))), "a = x*x; y = a*x + a*3 (x reached along three paths)")
    total = g.leaf(0.0, requires_grad=True)
    for i in range(20):  # marking on push instead of on expansion gets about half of these diamonds wrong
        d = g.leaf(float(i), requires_grad=True)
        total = g.add(total, g.add(d, g.mul(d, g.leaf(2.0, requires_grad=True))))
    sort(total, "a sum of 20 diamonds d + d·k")
    layered = g.leaf(1.0, requires_grad=True)
    for _ in range(40):  # 2^40 paths: a walk that follows paths never ends
        layered = g.add(g.mul(layered, 2.0), g.mul(layered, 3.0))
    sort(layered, "40 stacked diamonds (2^40 paths)")
    _check_deep(ex, g, lambda end, shown: sort(end, shown))
    _check_cycle(ex, kit, topological_sort, Node)

    @RANDOM_CASES
    @given(st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(0, 10 ** 6), st.sampled_from("+*n")),
                    min_size=1, max_size=25))
    def random_graph(recipe):
        nodes = [g.leaf(1.0, requires_grad=True), g.leaf(2.0, requires_grad=True), g.leaf(3.0)]
        for i, j, op in recipe:
            p, q = nodes[i % len(nodes)], nodes[j % len(nodes)]
            nodes.append(g.add(p, q) if op == "+" else g.mul(p, q) if op == "*" else g.neg(p))
        end = next(n for n in reversed(nodes) if g.requires_grad[id(n)])
        sort(end, f"a random graph of {len(nodes)} tensors with shared inputs")

    random_graph()


def _check_deep(ex, graph, run):
    """Run ``run(end, shown)`` on a chain of CHAIN_LENGTH negations; returns (leaf, end, run's result)."""
    x, end = graph.chain(CHAIN_LENGTH, "__neg__", requires_grad=True)
    shown = f"a chain of {CHAIN_LENGTH} operations"
    return x, end, call_on_deep_graph(ex, run, end, shown, shown_input=shown)


def _check_cycle(ex, kit, topological_sort, Node):
    a = Node(1.0, requires_grad=True)
    b = -a
    c = b * 2.0
    kit.make_cycle(a, b, c)  # a now depends on itself: a -> b -> c -> a
    _expect_cycle_error(ex, topological_sort, c, "a graph with a cycle a -> b -> c -> a")
    a = Node(1.0, requires_grad=True)
    b = -a
    kit.make_cycle(a, b)
    _expect_cycle_error(ex, topological_sort, (b * 2.0) + Node(1.0, requires_grad=True),
                        "a graph whose cycle a -> b -> a does not pass through the end node")


def _expect_cycle_error(ex, topological_sort, c, shown):
    try:
        call_learner(ex, topological_sort, c, shown_input=shown)
    except CheckFailure as failure:
        cause = failure.cause
        if isinstance(cause, ValueError):
            return
        if isinstance(cause, RecursionError):
            raise CheckFailure(ex, f"RecursionError on {shown}: detect the cycle and raise ValueError instead.") from None
        if cause is not None:
            raise CheckFailure(ex, f"on {shown} your code raised {getattr(cause, 'type_name', type(cause).__name__)}: "
                                   f"{cause}. Raise a ValueError that says the graph has a cycle, as the exercise "
                                   "asks.") from None
        raise
    raise CheckFailure(ex, f"{shown} returned an order, but none exists: a tensor met again while its own parents are "
                           "still being visited closes a cycle. Raise ValueError.")


# ------------------------------------------------------------------------------------------------ backprop

@exercise("backprop", builds_on=("topological_sort",))
def check_backprop(backprop, Tensor) -> None:
    ex = "backprop"
    kit = beside(Tensor, reference_engine)
    Node = kit.reference_class(Tensor)

    def run(end, end_grad=None, shown=""):
        return call_learner(ex, backprop, end, end_grad, shown_input=shown)

    def grad(node, what):
        if node.grad is None:
            return None
        return grad_array(ex, Tensor, node.grad, what)

    _probe_seed_numbers(ex, run, grad, Node)
    _probe_shared_and_order(ex, run, grad, Node)
    _probe_data_leaf(ex, run, grad, Node)
    _probe_leaf_semantics(ex, run, grad, Node)
    _probe_explicit_seeds(ex, run, grad, Node)
    _probe_accumulation(ex, run, grad, Node)
    _probe_paths(ex, run, grad, Node)
    _probe_pending_and_end(ex, run, grad, Node)
    _probe_nothing_requires_grad(ex, run, Node)
    x, end, _ = _check_deep(ex, RecordedGraph(Node, only_requiring_grad=True), lambda end, shown: run(end, None, shown))
    if grad(x, "x.grad") is None or grad(x, "x.grad") != 1.0:  # an even number of negations
        raise CheckFailure(ex, f"a chain of {CHAIN_LENGTH} negations: expected x.grad = 1, received {x.grad!r}.")

    @RANDOM_CASES
    @given(programs())
    def random_case(program):
        leaves = [Node(v.copy(), requires_grad=rg) for v, rg in program.leaves]
        values = program.replay(leaves)
        run(values[-1], None if program.seed is None else Node(program.seed.copy()), program.listing)
        compare_leaf_grads(ex, Tensor, leaves, values, torch_run(program)[1], program.listing)

    random_case()


def _close(received, expected):
    return received is not None and np.shape(received) == np.shape(expected) and np.allclose(received, expected,
                                                                                               rtol=1e-9, atol=1e-12)


def _probe_seed_numbers(ex, run, grad, Node):
    x, y, z = (Node(np.array([v]), requires_grad=True) for v in (1.0, 3.0, 2.0))
    shown = "f = x.log() + y.exp() * z at x, y, z = [1.], [3.], [2.]"
    run(x.log() + y.exp() * z, None, shown)
    got = [grad(t, name + ".grad") for t, name in ((x, "x"), (y, "y"), (z, "z"))]
    if all(g is None or not np.any(g) for g in got):
        raise CheckFailure(ex, f"{shown}: no gradient reached the leaves. Seed the end node's gradient with ones "
                               "(df/df = 1), since every backward function multiplies by it, and walk "
                               "reversed(topological_sort(end_node)), so the end node is processed first.")
    want = [np.array([1.0]), np.array([3 * 0 + 2 * math.exp(3.0)]), np.array([math.exp(3.0)])]
    if not all(_close(g, w) for g, w in zip(got, want)):
        raise CheckFailure(ex, f"{shown}: expected x.grad, y.grad, z.grad = [1.], [40.1711], [20.0855] (torch agrees), "
                               f"received {', '.join(fmt(g) for g in got)}.")


def _probe_data_leaf(ex, run, grad, Node):
    w, data = Node(np.array([2.0]), requires_grad=True), Node(np.array([3.0]))
    d = w * data - 1.0
    shown = "w = [2.] (requires grad), x = [3.] (data), loss = (w*x - 1) * (w*x - 1)"
    run(d * d, None, shown)
    if grad(data, "x.grad") is not None:
        raise CheckFailure(ex, f"{shown}: x has requires_grad=False, so x.grad must stay None (torch: data gets no "
                               "gradient). Store gradients only on leaves that require grad.")
    if not _close(grad(w, "w.grad"), [30.0]):
        raise CheckFailure(ex, f"{shown}: expected w.grad = [30.] (2(wx - 1)x = 2·5·3), received {w.grad!r}.")


def _probe_shared_and_order(ex, run, grad, Node):
    a = Node(3.0, requires_grad=True)
    run(a * a, None, "a = 3; y = a * a")
    got = grad(a, "a.grad")
    if _close(got, 3.0):
        raise CheckFailure(ex, "y = a * a at a = 3 gave a.grad = 3, not 6. a is both inputs of the multiply, so two "
                               "gradients arrive at it: add them (pending = pending + contribution, a new array), do "
                               "not let the second overwrite the first.")
    if not _close(got, 6.0):
        raise CheckFailure(ex, f"y = a * a at a = 3: expected a.grad = 6, received {fmt(got)}.")

    x = Node(2.0, requires_grad=True)
    a = x * x
    shown = "x = 2; a = x * x; y = a + a * 3"
    run(a + a * 3.0, None, shown)
    got = grad(x, "x.grad")
    if got is not None and 0 < float(np.sum(got)) < 16.0:
        raise CheckFailure(ex, f"{shown}: expected x.grad = 16, received {fmt(got)}. a feeds y and a * 3, and {EARLY_NODE}")
    if not _close(got, 16.0):
        raise CheckFailure(ex, f"{shown}: expected x.grad = 16, received {fmt(got)}.")


def _probe_leaf_semantics(ex, run, grad, Node):
    x, unused, zero = (Node(v, requires_grad=True) for v in (2.0, 7.0, 0.0))
    h = 3.0 * x
    h.retain_grad()
    half = 0.5 * h
    shown = "x = 2; h = 3 * x; h.retain_grad(); loss = 0.5 * h * h + zero * zero"
    run(half * h + zero * zero, None, shown)
    expected = {"x": (x, 18.0), "h": (h, 6.0), "zero": (zero, 0.0)}
    for name, (node, value) in expected.items():
        got = grad(node, f"{name}.grad")
        if got is None:
            why = {"h": "h.retain_grad() was called, so h keeps its gradient like a leaf (check node.retains_grad)",
                   "zero": "zero took part in the loss, so it gets a gradient; that it is 0 does not make it None",
                   "x": "x is a leaf that requires grad"}[name]
            raise CheckFailure(ex, f"{shown}: {name}.grad is None; {why}. Expected {value}.")
        if not _close(got, value):
            raise CheckFailure(ex, f"{shown}: expected {name}.grad = {value}, received {fmt(got)}.")
    if unused.grad is not None:
        raise CheckFailure(ex, f"{shown}: unused.grad should stay None (it took no part), received {unused.grad!r}.")
    if half.grad is not None:
        raise CheckFailure(ex, f"{shown}: 0.5 * h is not a leaf and did not retain_grad(), yet its .grad was set. Like "
                               "torch, keep gradients on leaves only (and on non-leaves that asked to retain them).")


def _probe_explicit_seeds(ex, run, grad, Node):
    x = Node(np.array([2.0, 3.0]), requires_grad=True)
    y = x[0] * x[1] * Node(np.array([1.0, 0.0])) + (x[0] + x[1]) * Node(np.array([0.0, 1.0]))
    shown = "x = [2., 3.]; y = [x0·x1, x0 + x1]; backprop(y)"
    try:
        run(y, None, shown)
    except CheckFailure as failure:
        if not isinstance(failure.cause, RuntimeError):
            raise CheckFailure(ex, f"{shown} should raise RuntimeError('{SCALAR_ONLY}'), as torch does; your code "
                                   f"raised {type(failure.cause).__name__}: {failure.cause}") from None
    else:
        raise CheckFailure(ex, f"{shown} should raise RuntimeError('{SCALAR_ONLY}'), as torch does: without end_grad, "
                               "the seed 1 only makes sense for a one-element output. Seeding with ones silently "
                               "differentiates y.sum() instead.")
    shown = "x = [2., 3.]; y = [x0·x1, x0 + x1]; backprop(y, end_grad=Tensor([2., -1.]))"
    x.grad = None
    run(y, Node(np.array([2.0, -1.0])), shown)
    got = grad(x, "x.grad")
    slips = {(4.0, 3.0): "end_grad was ignored: this is the gradient for the seed [1, 1]. Start the walk from end_grad.",
             (13.0, 9.0): "end_grad was applied twice (the gradient for the seed [4, 1] = v·v): seed the end node "
                          "with end_grad once and let the walk carry it."}
    for wrong, why in slips.items():
        if _close(got, np.array(wrong)):
            raise CheckFailure(ex, f"{shown}: expected x.grad = [5., 3.] (Jᵀv with J = [[3, 2], [1, 1]]), received "
                                   f"{fmt(got)}. {why}")
    if not _close(got, np.array([5.0, 3.0])):
        raise CheckFailure(ex, f"{shown}: expected x.grad = [5., 3.] (Jᵀv with J = [[3, 2], [1, 1]]), received {fmt(got)}.")

    a = Node(3.0, requires_grad=True)
    run(a * a, Node(2.0), "a = 3; backprop(a * a, end_grad=Tensor(2.))")
    if not _close(grad(a, "a.grad"), 12.0):
        raise CheckFailure(ex, f"a = 3; backprop(a * a, end_grad=Tensor(2.)): expected a.grad = 12 (2 · 2a), "
                               f"received {fmt(grad(a, 'a.grad'))}. A scalar output with an explicit end_grad uses it.")
    for seed in (np.array(1.0), np.array([[1.0, 1.0]])):  # one numpy would broadcast, one of the right size
        shown = f"backprop(y of shape (2,), end_grad of shape {seed.shape})"
        try:
            run(Node(np.array([1.0, 2.0]), requires_grad=True) * 2.0, Node(seed), shown)
        except CheckFailure as failure:
            if failure.cause is None:
                raise
            if not isinstance(failure.cause, RuntimeError) or isinstance(failure.cause, RecursionError):
                raise CheckFailure(ex, f"{shown} raised {getattr(failure.cause, 'type_name', type(failure.cause).__name__)}"
                                       f": {failure.cause}; raise RuntimeError, as the exercise asks and torch does "
                                       "('Mismatch in shape').") from None
        else:
            raise CheckFailure(ex, f"{shown} should raise (torch: RuntimeError 'Mismatch in shape'): end_grad must have "
                                   "exactly the end node's shape; numpy would broadcast or reshape it silently.")


def _probe_accumulation(ex, run, grad, Node):
    w = Node(2.0, requires_grad=True)
    run(w * w, None, "w = 2; backprop(w * w)")
    first = grad(w, "w.grad")
    run(3.0 * w, None, "then backprop(3 * w) without clearing")
    second = grad(w, "w.grad")
    if _close(first, 4.0) and _close(second, 3.0):
        raise CheckFailure(ex, "w = 2: backprop(w * w) then backprop(3 * w) should leave w.grad = 4 + 3 = 7, as torch "
                               "does (which is why training loops call zero_grad()); the second call overwrote it with 3.")
    if not (_close(first, 4.0) and _close(second, 7.0)):
        raise CheckFailure(ex, f"w = 2: backprop(w * w) then backprop(3 * w): expected w.grad 4 then 7, received "
                               f"{fmt(first)} then {fmt(second)}.")
    w.grad = None
    run(3.0 * w, None, "w.grad = None; backprop(3 * w)")
    if not _close(grad(w, "w.grad"), 3.0):
        raise CheckFailure(ex, f"after w.grad = None, backprop(3 * w) should give w.grad = 3, received {w.grad!r}.")

    a, b = Node(np.array([1.0, 2.0]), requires_grad=True), Node(np.array([3.0, 4.0]), requires_grad=True)
    seed = Node(np.array([1.0, -1.0]))
    run(a + b, seed, "backprop(a + b, end_grad=Tensor([1., -1.]))")
    run((a * 3.0).sum(), None, "then backprop((a * 3).sum())")
    if not np.array_equal(seed.array, [1.0, -1.0]) or not _close(grad(b, "b.grad"), np.array([1.0, -1.0])):
        raise CheckFailure(ex, "after backprop(a + b, end_grad=Tensor([1., -1.])) and backprop((a * 3).sum()), b.grad or "
                               f"end_grad changed (b.grad = {b.grad!r}, end_grad = {seed!r}). add_back passes its "
                               "gradient through, so a.grad, b.grad and end_grad can share one array: accumulate with "
                               "a new array (old + new), never in place (+= on an array).")
    if not _close(grad(a, "a.grad"), np.array([4.0, 2.0])):
        raise CheckFailure(ex, f"after backprop(a + b, end_grad=Tensor([1., -1.])) and backprop((a * 3).sum()), "
                               f"expected a.grad = [4., 2.], received {a.grad!r}.")


def _probe_pending_and_end(ex, run, grad, Node):
    x = Node(1.0, requires_grad=True)
    p = 3.0 * x
    shown = "x = 1; p = 3x; y = (x + p) + 2p"
    run((x + p) + p * 2.0, None, shown)
    if not _close(grad(x, "x.grad"), 10.0):
        raise CheckFailure(ex, f"{shown}: expected x.grad = 10, received {fmt(grad(x, 'x.grad'))}. add_back passes its "
                               "array through, so two pending gradients can be one array: add them into a new array "
                               "(pending = pending + contribution), never with += in place.")
    w = Node(np.array([2.0, 3.0]), requires_grad=True)
    run(w, Node(np.array([1.0, -1.0])), "backprop(w, end_grad=Tensor([1., -1.])) on a leaf w")
    if not _close(grad(w, "w.grad"), np.array([1.0, -1.0])):
        raise CheckFailure(ex, "backprop on a leaf that requires grad should store end_grad in its .grad (torch: "
                               f"w.backward(v) gives w.grad = v); received {w.grad!r}.")
    h = Node(2.0, requires_grad=True) * 3.0
    h.retain_grad()
    run(h * h, None, "h = 3w; h.retain_grad(); backprop(h * h)")
    run(2.0 * h, None, "then backprop(2 * h)")
    run(h, None, "then backprop(h)")
    if not _close(grad(h, "h.grad"), 12.0 + 2.0 + 1.0):
        raise CheckFailure(ex, "a retained non-leaf accumulates like a leaf, and the end node itself gets its seed: "
                               "h = 6 with retain_grad(), backprop(h * h), backprop(2 * h), backprop(h) gives h.grad = "
                               f"12 + 2 + 1 = 15 in torch; received {h.grad!r}.")


def _probe_nothing_requires_grad(ex, run, Node):
    """torch refuses to differentiate an output that does not require grad; a silent return hides a forgotten
    requires_grad=True."""
    for end, shown in ((Node(np.array([2.0])) * 3.0, "x = [2.] (data); backprop(3 * x)"),
                       (Node(np.array([2.0])), "backprop(x) on a data leaf x = [2.]")):
        try:
            run(end, None, shown)
        except CheckFailure as failure:
            if isinstance(failure.cause, RuntimeError) and not isinstance(failure.cause, RecursionError):
                continue
            raise CheckFailure(ex, f"{shown} should raise RuntimeError('{NO_GRAD_FN}'), as torch does; your code "
                                   f"raised {type(failure.cause).__name__}: {failure.cause}") from None
        raise CheckFailure(ex, f"{shown} returned quietly, but nothing in that graph requires grad, so there is nothing "
                               f"to differentiate: raise RuntimeError('{NO_GRAD_FN}'), as torch does, so a forgotten "
                               "requires_grad=True is noticed.")


def _probe_paths(ex, run, grad, Node):
    x = Node(0.5, requires_grad=True)
    a = x.exp()
    run(a * -2.0 + a * -3.0, None, "a = x.exp(); y = -2a - 3a")
    if a.backward_calls > 1:
        raise CheckFailure(ex, f"a's backward function ran {a.backward_calls} times in one pass (a = x.exp() feeds two "
                               f"products): {EVERY_PATH}")
    got = grad(x, "x.grad")
    if any(_close(got, -share * math.exp(0.5)) for share in (2.0, 3.0)):  # a ran after one of its two consumers
        raise CheckFailure(ex, f"a = x.exp(); y = -2a - 3a at x = 0.5: expected x.grad = {fmt(-5 * math.exp(0.5))}, "
                               f"received {fmt(got)}, the share of one product only: {EARLY_NODE}")
    if not _close(got, -5 * math.exp(0.5)):
        raise CheckFailure(ex, f"a = x.exp(); y = -2a - 3a at x = 0.5: expected x.grad = {fmt(-5 * math.exp(0.5))}, "
                               f"received {x.grad!r}.")


# ------------------------------------------------------------------------------------------------ jacobian

# (shown, f(x, constant) with torch's tensor API, x): constant() makes a data tensor of the engine under test.
JACOBIAN_CASES = [
    ("f(x) = [x0·x1, x0 + x1] at x = [2, 3]",
     lambda x, c: x[0] * x[1] * c([1.0, 0.0]) + (x[0] + x[1]) * c([0.0, 1.0]), [2.0, 3.0]),
    ("f(x) = (x·x)[[0, 2]] - exp(x1) at x = [0.5, -1, 2]", lambda x, c: (x * x)[[0, 2]] - x[1].exp(), [0.5, -1.0, 2.0]),
    ("f(x)_j = x_j · sum(x) at x = [1, 2, -0.5]", lambda x, c: (x.reshape((3, 1)) * x).sum(dim=0), [1.0, 2.0, -0.5]),
    ("f(x) = [sum(x·x)] at x = [1, -2, 3, 0.5]", lambda x, c: (x * x).sum().reshape((1,)), [1.0, -2.0, 3.0, 0.5]),
    ("f(x) = relu(W @ x) / 2 at x = [1, 0.5, -1]",
     lambda x, c: (c([[1.0, -2.0, 0.5], [0.3, 1.0, -1.0]]) @ x).relu() / 2.0, [1.0, 0.5, -1.0]),
]


@exercise("jacobian", builds_on=("operators", "backprop"))
def check_jacobian(jacobian, Tensor) -> None:
    """``jacobian`` against torch, then random programs through the learner's whole engine (operators, apply_op and
    backprop, reached through Tensor.backward)."""
    ex = "jacobian"
    calls = []

    def sum_of_squares(t):
        calls.append(1)
        return (t * t).sum().reshape((1,))

    got = call_learner(ex, jacobian, sum_of_squares, np.linspace(-1, 1, 50), shown_input="f(x) = [sum(x·x)], 50 inputs")
    if len(calls) > 2:
        raise CheckFailure(ex, f"jacobian called f {len(calls)} times for an f with 50 inputs and 1 output: reverse mode "
                               "needs one pass per output (seed e_i), not one evaluation per input (that is forward "
                               "mode, or finite differences).")
    if not isinstance(got, np.ndarray) or got.dtype != np.float64:
        raise CheckFailure(ex, f"jacobian should return a float64 ndarray, got {type(got).__name__} "
                               f"{getattr(got, 'dtype', '')}.")
    for shown, f, x in JACOBIAN_CASES:
        want = torch.autograd.functional.jacobian(
            lambda t: f(t, lambda v: torch.tensor(v, dtype=torch.float64)), torch.tensor(x, dtype=torch.float64)).numpy()
        got = call_learner(ex, jacobian, lambda t: f(t, Tensor), np.array(x), shown_input=shown)
        got = np.asarray(got, dtype=np.float64) if isinstance(got, (np.ndarray, list)) else got
        if not isinstance(got, np.ndarray):
            raise CheckFailure(ex, f"{shown}: return an ndarray of shape (m, n), got {type(got).__name__}.")
        if got.shape == want.T.shape and np.allclose(got.T, want, rtol=1e-9, atol=1e-12):
            raise CheckFailure(ex, f"{shown}: rows and columns are swapped. Expected shape {want.shape}, one row per "
                                   "output: row i is the gradient of output i, from the pass seeded with e_i.")
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-9, atol=1e-12):
            if got.shape == want.shape and np.allclose(got, np.cumsum(want, axis=0), rtol=1e-9, atol=1e-12):
                raise CheckFailure(ex, f"{shown}: each row is the sum of all rows so far: x.grad accumulates across "
                                       "passes, so clear it (x.grad = None) before each one.")
            raise CheckFailure(ex, f"{shown}: expected\n{fmt(want)}\nreceived\n{fmt(got)}")
    _check_whole_engine(ex, Tensor)


def _check_whole_engine(ex, Tensor):
    whole = "your engine as a whole (operators, apply_op and backprop together)"
    X = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    b = Tensor(np.zeros(3), requires_grad=True)
    call_learner(ex, lambda: (X + b).mean().backward(), shown_input="(X + b).mean().backward()")
    _expect_grads(ex, Tensor, [("X", X, np.full((2, 3), 1 / 6)), ("b", b, np.full(3, 1 / 3))],
                  f"{whole}, X = arange(6).reshape(2, 3), b = zeros(3): (X + b).mean().backward()",
                  "the mean has six inputs, so each X element gets 1/6; b is broadcast over 2 rows, so 2/6 = 1/3.")
    X.grad = b.grad = None
    call_learner(ex, lambda: (X + b).sum().backward(), shown_input="(X + b).sum().backward()")
    _expect_grads(ex, Tensor, [("X", X, np.ones((2, 3))), ("b", b, np.full(3, 2.0))],
                  f"{whole}, after clearing: (X + b).sum().backward()", "a sum passes 1 to each X element; b collects 2 rows.")

    @RANDOM_CASES
    @given(programs())
    def random_case(program):
        leaves = [Tensor(v.copy(), requires_grad=rg) for v, rg in program.leaves]
        values = call_learner(ex, program.replay, leaves, shown_input=program.listing)
        want_out, want_grads = torch_run(program)
        if not np.allclose(np.asarray(values[-1].array, dtype=np.float64), want_out, rtol=1e-10, atol=1e-12):
            raise CheckFailure(ex, f"{whole} computes a different result from torch for the program\n  {program.listing}")
        seed = None if program.seed is None else Tensor(program.seed.copy())
        call_learner(ex, values[-1].backward, seed, shown_input=program.listing)
        try:
            compare_leaf_grads(ex, Tensor, leaves, values, want_grads, program.listing)
        except CheckFailure as failure:
            raise CheckFailure(ex, f"{whole}: {failure.message}") from None

    random_case()


def _expect_grads(ex, Tensor, expected, shown, why):
    for name, node, want in expected:
        got = None if node.grad is None else grad_array(ex, Tensor, node.grad, f"{name}.grad")
        if not _close(got, want):
            raise CheckFailure(ex, f"{shown}: expected {name}.grad = {fmt(want)}, received {fmt(got)}: {why}")


# ------------------------------------------------------------------------------------------------ predictions

NOT_ANSWERED = "not answered yet: replace each ... with your prediction."


def _compare_predictions(ex, predicted, actual: dict, reasons: dict):
    if isinstance(predicted, dict) and ... in predicted.values():
        raise CheckFailure(ex, NOT_ANSWERED)
    if not isinstance(predicted, dict) or set(predicted) != set(actual):
        raise CheckFailure(ex, f"give a dict with exactly the keys {sorted(actual)}, got {predicted!r}.")
    for key, value in actual.items():
        guess = predicted[key]
        right = guess is None if value is None else (
            guess is not None and not isinstance(guess, (str, bool)) and _number_equal(guess, value))
        if not right:
            raise CheckFailure(ex, f"{key}: you predicted {guess!r}, torch gives {value!r}. {reasons[key]}")


def _number_equal(guess, value):
    try:
        return math.isclose(float(guess), value, rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return False


def _grad_or_none(t):
    return None if t.grad is None else float(t.grad)


@exercise("predict_leaf_grads")
def check_predict_leaf_grads(predicted_grads) -> None:
    x = torch.tensor(2.0, requires_grad=True)
    unused = torch.tensor(7.0, requires_grad=True)
    zero = torch.tensor(0.0, requires_grad=True)
    h = 3 * x
    h.retain_grad()
    (0.5 * h.square() + zero.square()).backward()
    actual = {"x": _grad_or_none(x), "h": _grad_or_none(h), "zero": _grad_or_none(zero), "unused": _grad_or_none(unused)}
    _compare_predictions("predict_leaf_grads", predicted_grads, actual, {
        "x": "x is a leaf that requires grad: d loss/dx = d loss/dh · dh/dx = h · 3 = 6 · 3.",
        "h": "h is not a leaf, but h.retain_grad() asks torch to keep its gradient: d loss/dh = h = 6.",
        "zero": "zero took part in the loss, so a gradient reached it: d(zero²)/d zero = 2·zero = 0. Zero is a value; "
                "None means no gradient arrived at all.",
        "unused": "unused never took part in the loss, so no gradient arrived and torch leaves .grad None.",
    })


@exercise("predict_detach_clone")
def check_predict_detach_clone(predicted_values) -> None:
    original = torch.tensor([2.0], requires_grad=True)
    shared = original.detach()
    snapshot = original.detach().clone()
    shared.add_(3)
    actual = {"original": original.item(), "snapshot": snapshot.item()}
    _compare_predictions("predict_detach_clone", predicted_values, actual, {
        "original": "detach() makes a tensor outside the graph that shares the same storage, so adding 3 to it in "
                    "place changes original too.",
        "snapshot": "clone() copies the storage, so the snapshot keeps the value it had when it was taken.",
    })


@exercise("predict_accumulation")
def check_predict_accumulation(predicted_prints) -> None:
    w = torch.tensor(2.0, requires_grad=True)
    seen = []
    (w ** 2).backward()
    seen.append(w.grad.item())
    (3 * w).backward()
    seen.append(w.grad.item())
    w.grad = None
    (3 * w).backward()
    seen.append(w.grad.item())
    reasons = ["d(w²)/dw = 2w = 4.", "backward adds to .grad: 4 + d(3w)/dw = 4 + 3.",
               "after w.grad = None the sum starts again: 3."]
    ex = "predict_accumulation"
    if isinstance(predicted_prints, np.ndarray):
        predicted_prints = predicted_prints.tolist()
    if isinstance(predicted_prints, (list, tuple)) and ... in predicted_prints:
        raise CheckFailure(ex, NOT_ANSWERED)
    if not isinstance(predicted_prints, (list, tuple)) or len(predicted_prints) != 3:
        raise CheckFailure(ex, f"give a list of the three printed values, got {predicted_prints!r}.")
    for n, (guess, value, why) in enumerate(zip(predicted_prints, seen, reasons), start=1):
        if isinstance(guess, (str, bool)) or not _number_equal(guess, value):
            raise CheckFailure(ex, f"print {n}: you predicted {guess!r}, torch prints {value}. {why}")
