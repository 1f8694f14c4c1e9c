"""Reference operators for notebook 4's checks: correct backward rules, and a Tensor subclass that records with them.

Self-contained on purpose (numpy and the standard library only): under trusted grading this module is installed in
the sandboxed worker next to the learner's code (``autograder.trust.remote.beside``), because ``reference_class``
subclasses the learner's ``Tensor``, so that ``topological_sort`` and ``backprop`` are tested on graphs the
learner's own operators did not record. It holds neither of those two answers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

def _unbroadcast(grad, like):
    shape = np.shape(like)
    grad = np.asarray(grad, dtype=np.float64)
    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape)))) if grad.ndim > len(shape) else grad
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=stretched, keepdims=True) if stretched else grad


def _reduce_back(grad, x, dim, keepdim):
    grad = np.asarray(grad, dtype=np.float64)
    if dim is not None and not keepdim:
        grad = np.expand_dims(grad, dim)
    return np.broadcast_to(grad, np.shape(x)).copy()


def _matrices(grad, x, y):
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    y2 = y.reshape(-1, 1) if y.ndim == 1 else y
    return grad.reshape(x2.shape[0], y2.shape[1]), x2, y2


def _getitem_back(grad, out, x, index):
    result = np.zeros(np.shape(x))
    np.add.at(result, index, grad)
    return result


# name -> (forward on arrays, one backward function per input). Signatures as in notebook 3.
REFERENCE_RULES = {
    "add": (np.add, (lambda g, o, x, y: _unbroadcast(g, x), lambda g, o, x, y: _unbroadcast(g, y))),
    "subtract": (np.subtract, (lambda g, o, x, y: _unbroadcast(g, x), lambda g, o, x, y: _unbroadcast(-g, y))),
    "multiply": (np.multiply, (lambda g, o, x, y: _unbroadcast(g * y, x), lambda g, o, x, y: _unbroadcast(g * x, y))),
    "divide": (np.divide, (lambda g, o, x, y: _unbroadcast(g / y, x),
                           lambda g, o, x, y: _unbroadcast(-g * x / np.square(y), y))),
    "negative": (np.negative, (lambda g, o, x: -np.asarray(g, dtype=np.float64),)),
    "exp": (np.exp, (lambda g, o, x: g * o,)),
    "log": (np.log, (lambda g, o, x: g / x,)),
    "relu": (lambda x: np.maximum(x, 0.0), (lambda g, o, x: g * (x > 0),)),
    "matmul": (np.matmul, (lambda g, o, x, y: (lambda g2, x2, y2: (g2 @ y2.T).reshape(x.shape))(*_matrices(g, x, y)),
                           lambda g, o, x, y: (lambda g2, x2, y2: (x2.T @ g2).reshape(y.shape))(*_matrices(g, x, y)))),
    "sum": (lambda x, dim=None, keepdim=False: np.sum(x, axis=dim, keepdims=keepdim),
            (lambda g, o, x, dim=None, keepdim=False: _reduce_back(g, x, dim, keepdim),)),
    "mean": (lambda x, dim=None, keepdim=False: np.mean(x, axis=dim, keepdims=keepdim),
             (lambda g, o, x, dim=None, keepdim=False: _reduce_back(g, x, dim, keepdim) * (np.size(o) / np.size(x)),)),
    "reshape": (lambda x, new_shape: np.reshape(x, new_shape),
                (lambda g, o, x, new_shape: np.asarray(g, dtype=np.float64).reshape(np.shape(x)),)),
    "getitem": (lambda x, index: x[index], (_getitem_back,)),
}


@dataclass(frozen=True)
class RefRecipe:
    """A recorded operation, with the fields the notebook's ``Recipe`` has."""
    inputs: tuple
    backwards: tuple
    kwargs: dict


def reference_class(Tensor):
    """A subclass of the learner's Tensor whose operators are the reference's: graphs to test backprop on.

    Each node counts how often its backward functions ran (``backward_calls``), to catch walks that follow paths.
    """
    def record(name, *inputs, **kwargs):
        forward, backwards = REFERENCE_RULES[name]
        out = Node(forward(*[x.array if isinstance(x, Tensor) else x for x in inputs], **kwargs))
        if any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
            out.requires_grad = True

            def counted(back):
                def run(*args, **kw):
                    out.backward_calls += 1
                    return back(*args, **kw)
                return run
            out.recipe = RefRecipe(tuple(inputs), tuple(counted(b) for b in backwards), dict(kwargs))
        return out

    class Node(Tensor):
        backward_calls = 0
        __add__ = lambda self, other: record("add", self, other)
        __radd__ = lambda self, other: record("add", other, self)
        __sub__ = lambda self, other: record("subtract", self, other)
        __rsub__ = lambda self, other: record("subtract", other, self)
        __mul__ = lambda self, other: record("multiply", self, other)
        __rmul__ = lambda self, other: record("multiply", other, self)
        __truediv__ = lambda self, other: record("divide", self, other)
        __rtruediv__ = lambda self, other: record("divide", other, self)
        __neg__ = lambda self: record("negative", self)
        __matmul__ = lambda self, other: record("matmul", self, other)
        __getitem__ = lambda self, index: record("getitem", self, index=index)
        exp = lambda self: record("exp", self)
        log = lambda self: record("log", self)
        relu = lambda self: record("relu", self)
        sum = lambda self, dim=None, keepdim=False: record("sum", self, dim=dim, keepdim=keepdim)
        mean = lambda self, dim=None, keepdim=False: record("mean", self, dim=dim, keepdim=keepdim)
        reshape = lambda self, new_shape: record("reshape", self, new_shape=new_shape)

    return Node


def graph_inputs(node):
    recipe = getattr(node, "recipe", None)
    if recipe is None:
        return []
    return [x for x in recipe.inputs if hasattr(x, "array") and getattr(x, "requires_grad", False)]


def make_cycle(a, b, c=None):
    """Point a's recipe back at c (or b), closing a cycle, as no correct operator could."""
    a.recipe = RefRecipe((c if c is not None else b,), REFERENCE_RULES["negative"][1], {})
