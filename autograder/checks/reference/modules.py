"""Reference code for notebook 5's checks that must live next to the learner's classes.

Self-contained on purpose (numpy and the standard library only): under trusted grading this module is installed in
the sandboxed worker (``autograder.trust.remote.beside``). It subclasses the learner's ``Module`` and seeds the random
generators the learner's code draws from. It judges nothing: a check never trusts what it says, only what it builds
for the learner's code to use.
"""
from __future__ import annotations

import numpy as np


def seed(value: int) -> None:
    """np.random.seed where the learner's Linear draws its weights."""
    np.random.seed(value)


def generator(value: int):
    """np.random.default_rng(value), made where the learner's train_epoch draws from it."""
    return np.random.default_rng(value)


def module_classes(Module, Parameter, Tensor):
    """Three small modules built on the learner's Module: (Pair, Outer, Ordered)."""

    class Pair(Module):
        def __init__(self):
            super().__init__()
            self.a = Parameter(np.ones(2))
            self.b = Parameter(np.zeros(3))
            self.scale = 3.0
            self.data = Tensor(np.zeros(2))

    class Outer(Module):
        def __init__(self):
            super().__init__()
            self.first = Pair()
            self.w = Parameter(np.zeros((2, 2)))
            self.second = Pair()
            self.again = self.first  # the same sub-module twice: its parameters must still count once
            self.tied = self.second.a  # a shared parameter

    class Ordered(Module):
        def __init__(self):
            super().__init__()
            self.first = Pair()
            self.w = Parameter(np.zeros(1))
            self.second = Pair()

    return Pair, Outer, Ordered


def drawn_module(Module, Parameter, Tensor, entries):
    """A module that assigns ``entries`` in order, each [name, kind, value], plain data a check drew:

    - "parameter", shape: a new Parameter of zeros;  "data", shape: a Tensor of zeros that is not a Parameter;
    - "number", x: the number x;  "module", entries: a new sub-module assigning those entries;
    - "alias", names: what an attribute path already holds (["c"] an earlier sub-module, ["c", "x"] its parameter).
    """
    class Drawn(Module):
        def __init__(self, assigned):
            super().__init__()
            for name, kind, value in assigned:
                setattr(self, name, _made(self, kind, value))

    def _made(module, kind, value):
        if kind == "parameter":
            return Parameter(np.zeros(value))
        if kind == "data":
            return Tensor(np.zeros(value))
        if kind == "module":
            return Drawn(value)
        if kind == "alias":
            for name in value:
                module = getattr(module, name)
            return module
        return value

    return Drawn(entries)
