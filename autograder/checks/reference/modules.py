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
