"""Reference nodes for notebook 2's checks: a minimal correct micrograd-style node, and graph helpers.

Self-contained on purpose (the standard library only): under trusted grading this module is installed in the
sandboxed worker next to the learner's code (``autograder.trust.remote.beside``), since its nodes are handed to the
learner's ``topological_order`` and carry the learner's ``backward``. It holds neither of those two answers.
"""
from __future__ import annotations

import math
import random

class RefNode:
    """A minimal correct node used to test topological_order and backward without the learner's Value.

    Operations build nodes of the same class as their operand, so a subclass carrying a learner's backward()
    propagates through the whole graph. ``backward_calls`` counts how often a node's _backward ran.
    """

    def __init__(self, data, children=(), op=""):
        self.data = float(data)
        self.grad = 0.0
        self._prev = set(children)
        self._op = op
        self._backward = lambda: None
        self.backward_calls = 0

    def _wrap(self, out, rule):
        def _backward():
            out.backward_calls += 1
            rule()
        out._backward = _backward
        return out

    def __add__(self, other):
        out = type(self)(self.data + other.data, (self, other), "+")

        def rule():
            self.grad += out.grad
            other.grad += out.grad
        return self._wrap(out, rule)

    def __mul__(self, other):
        out = type(self)(self.data * other.data, (self, other), "*")

        def rule():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
        return self._wrap(out, rule)

    def tanh(self):
        out = type(self)(math.tanh(self.data), (self,), "tanh")

        def rule():
            self.grad += (1 - out.data ** 2) * out.grad
        return self._wrap(out, rule)


def carrying_backward(backward):
    """A RefNode subclass whose backward() is the learner's function, to test it on graphs it did not build."""
    return type("Node", (RefNode,), {"backward": backward})


def seed(value: int) -> None:
    """Seed the random module where the learner's code draws its weights."""
    random.seed(value)
