"""Random tensor programs for notebook 4's checks, their replay in torch float64, and the reference backward pass
(the recorded backward functions walked in topological order) that judges the learner's operators."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from hypothesis import strategies as st

from autograder.checks.reference_engine import graph_inputs
from autograder.diagnostics import CheckFailure, Tolerance, close, fmt
from labtools.graph import inputs_first

# A random program chains up to 40 operations, each rounding once: more than AGAINST_TORCH allows near cancellations.
LONG_PROGRAMS = Tolerance(1e-8, 1e-10)


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
        if not close(array, want, LONG_PROGRAMS):
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
