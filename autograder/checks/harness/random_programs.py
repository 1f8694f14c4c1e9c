"""Random programs for both engines' checks (notebook 2's Value, notebook 4's Tensor), drawn and made valid once.

A program is drawn as free choices (operation, operands, a parameter) and resolved once, on numpy values, into
lines that stay inside every operation's domain. The same lines are then replayed on the learner's objects, on
torch float64 tensors (the expected values and gradients) and on nudged leaves (central differences), so every
replay runs exactly the program that was graded: a step near a domain edge cannot turn into another operation on
one side of a nudge only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from hypothesis import strategies as st

from autograder.checks.harness.diagnostics import fmt
from autograder.checks.harness.oracles import backward_with_seed

CONSTANTS = [-2.0, 0.5, 3.0]
ARITHMETIC = ["+", "-", "*", "/"]                # two nodes
NUMBER_LEFT = ["c+", "c-", "c*", "c/"]           # a number, then a node: the reflected operators
NUMBER_RIGHT = ["-c", "/c"]                      # a node, then a number
POWERS = ["**2", "**3", "**-1", "**0.5"]
NONLINEAR = ["exp", "log", "tanh", "relu"]


@dataclass(frozen=True)
class Engine:
    """What one notebook's engine offers a random program, and how its listing reads."""
    shapes: tuple                                  # leaf shapes to draw from
    ops: tuple                                     # operations to draw from (repeats weigh an operation up)
    data_leaves: bool                              # draw leaves that need no gradient (requires_grad=False)
    explicit_seeds: bool                           # draw an upstream gradient for the end, or always seed with 1
    leaf_text: Callable[[np.ndarray, bool], str]   # the listing's line creating a leaf (value, requires_grad)
    run_text: Callable[[int, object], str]         # the listing's last line: backward from v<n>, with a seed or None


VALUE = Engine(shapes=((),), ops=tuple(ARITHMETIC + NUMBER_LEFT + ["neg"] + POWERS + NONLINEAR), data_leaves=False,
               explicit_seeds=False, leaf_text=lambda value, _: f"Value({fmt(value)})",
               run_text=lambda n, _: f"v{n}.backward()")
TENSOR = Engine(shapes=((), (3,), (1, 3), (2, 1), (2, 3), (3, 2)),
                ops=tuple(ARITHMETIC * 2 + ["@"] * 2 + NUMBER_LEFT + NUMBER_RIGHT
                          + ["neg", "exp", "log", "relu", "sum", "mean", "reshape", "index"]),
                data_leaves=True, explicit_seeds=True,
                leaf_text=lambda value, requires_grad: f"Tensor({fmt(value)}, requires_grad={requires_grad})",
                run_text=lambda n, seed: f"backprop(v{n})" if seed is None else
                f"backprop(v{n}, end_grad=Tensor({fmt(seed)}))")


@dataclass(frozen=True)
class Step:
    """One drawn line of a program, before it is made valid: the operation and free choices (operands, params)."""
    op: str
    a: int
    b: int
    k: int


@dataclass
class Program:
    """A valid program: leaves (values, requires_grad), resolved lines (op, i, j, param) and the backward seed
    (None: seed with ones, the default of backward())."""
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


def programs(engine: Engine, max_steps: int, ops=None):
    """Hypothesis strategy for valid programs on ``engine``, using ``ops`` (default: all the engine's operations).

    Hypothesis draws the size and a seed; the seed draws the rest, so every operation appears at every size, and
    shrinking towards fewer steps gives the smallest failing program."""
    return st.builds(lambda n_leaves, n_steps, seed: _drawn_program(engine, ops or engine.ops, n_leaves, n_steps, seed),
                     st.integers(1, 3), st.integers(1, max_steps), st.integers(0, 2 ** 32 - 1))


def _drawn_program(engine, ops, n_leaves, n_steps, seed):
    rng = np.random.default_rng(seed)
    leaves = []
    for n in range(n_leaves):
        shape = engine.shapes[rng.integers(len(engine.shapes))]
        value = (rng.uniform(0.2, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).round(2)
        leaves.append((np.asarray(value), n == 0 or not engine.data_leaves or bool(rng.random() < 0.7)))
    steps = [Step(ops[rng.integers(len(ops))], *(int(v) for v in rng.integers(10 ** 6, size=3)))
             for _ in range(n_steps)]
    explicit = engine.explicit_seeds and bool(rng.random() < 0.5)
    return make_program(engine, leaves, steps, int(rng.integers(2 ** 16)) if explicit else None)


def make_program(engine: Engine, leaves, steps, seed_choice) -> Program:
    """Build a valid program from drawn parts; its output is the last value that depends on a grad-requiring leaf.

    Args:
        leaves: (value ndarray, requires_grad) per leaf; the first must require grad.
        steps: the drawn Steps, resolved in order.
        seed_choice: None to end with backward()'s default seed (after a sum, if the output is not one number),
            or an integer that draws an explicit upstream gradient of the output's shape.
    """
    values = [value for value, _ in leaves]
    needs_grad = [requires_grad for _, requires_grad in leaves]
    listing = [f"v{n} = {engine.leaf_text(value, rg)}" for n, (value, rg) in enumerate(leaves)]
    lines = []
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
    if seed_choice is None and values[last].size > 1:  # end with a sum, so the default seed of 1 applies
        lines.append(("sum", last, None, None))
        listing.append(f"v{last + 1} = {_text('sum', last, None, None)}")
        last, values = last + 1, values[:last + 1] + [np.asarray(values[last].sum())]
    seed = None
    if seed_choice is not None:
        seed = np.random.default_rng(seed_choice).uniform(-2, 2, values[last].shape).round(1)
    listing.append(engine.run_text(last, seed))
    return Program([(value, rg) for value, rg in leaves], lines, seed, "\n  ".join(listing))


def torch_run(program: Program):
    """The program's output and leaf gradients (None where torch leaves .grad unset), by torch.autograd in float64."""
    leaves = [torch.tensor(v, dtype=torch.float64, requires_grad=rg) for v, rg in program.leaves]
    out = program.replay(leaves)[-1]
    out.backward() if program.seed is None else backward_with_seed(out, program.seed)
    return out.detach().numpy(), [None if leaf.grad is None else leaf.grad.numpy() for leaf in leaves]


# ------------------------------------------------------------------------------------------------ resolving a step

def _apply(op, x, y, p):
    simple = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y, "/": lambda: x / y, "@": lambda: x @ y,
              "c+": lambda: p + x, "c-": lambda: p - x, "c*": lambda: p * x, "c/": lambda: p / x,
              "-c": lambda: x - p, "/c": lambda: x / p, "neg": lambda: -x, "reshape": lambda: x.reshape(p),
              "index": lambda: x[p]}
    if op in simple:
        return simple[op]()
    if op.startswith("**"):
        return x ** _exponent(op)
    if op in ("sum", "mean"):
        reduce = getattr(x, op)
        return reduce() if p is None else reduce(dim=p[0], keepdim=p[1])
    return getattr(x, op)()  # exp, log, tanh, relu: methods on both engines and on torch


def _exponent(op):
    return float(op[2:]) if "." in op else int(op[2:])


def _text(op, i, j, p):
    if op in ARITHMETIC + ["@"]:
        return f"v{i} {op} v{j}"
    if op in NUMBER_LEFT:
        return f"{p} {op[1]} v{i}"
    if op in NUMBER_RIGHT:
        return f"v{i} {op[0]} {p}"
    if op == "neg":
        return f"-v{i}"
    if op.startswith("**"):
        return f"v{i} ** {_exponent(op)}"
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
    if op in ARITHMETIC:
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
    if _unsafe(op, x):
        op = "c*"
    if op in NUMBER_LEFT + NUMBER_RIGHT:
        p = CONSTANTS[step.k % len(CONSTANTS)]
    value = np.asarray(_apply(op, torch.from_numpy(x), None if j is None else torch.from_numpy(values[j]), p).numpy())
    if not np.all(np.isfinite(value)) or np.max(np.abs(value), initial=0) > 1e4:  # keep clear of overflow
        op, j, p = "c*", None, 0.5
        value = np.asarray(0.5 * x)
    return (op, i, j, p), value, needs_grad[i] or (j is not None and needs_grad[j])


def _unsafe(op, x) -> bool:
    """Near a domain edge, a kink or overflow; central differences nudge the leaves by up to 1e-5·scale, and the
    relu margin keeps every nudge on one side of its kink."""
    smallest = np.min(np.abs(x), initial=np.inf)
    return ((op in ("c/", "**-1") and smallest < 0.2) or (op in ("log", "**0.5") and np.min(x, initial=1) < 0.05)
            or (op == "exp" and np.max(x, initial=0) > 5) or (op == "relu" and smallest < 1e-3))


def _broadcastable(a, b):
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False
