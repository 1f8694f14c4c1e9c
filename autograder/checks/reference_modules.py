"""Reference code for notebook 5's checks that must live next to the learner's classes.

Self-contained on purpose (numpy and the standard library only): under trusted grading this module is installed in
the sandboxed worker (``autograder.remote.beside``). It subclasses the learner's ``Module``, reads names from the
learner's namespace, seeds the random generators the learner's code draws from, and provides a model and an
optimizer that *record* what ``train_epoch`` does with them. It judges nothing and computes no gradient: the check
compares the recordings with torch on the trusted side.
"""
from __future__ import annotations

import numpy as np


def seed(value: int) -> None:
    """np.random.seed where the learner's Linear draws its weights."""
    np.random.seed(value)


def generator(value: int):
    """np.random.default_rng(value), made where the learner's train_epoch draws from it."""
    return np.random.default_rng(value)


def global_of(fn, name: str):
    """A name from the namespace the learner's function was defined in (None if absent)."""
    return getattr(fn, "__globals__", {}).get(name)


def module_answer(ModuleSubclass):
    """The Module and Parameter classes behind a learner's layer class, for checking exercise 1 first."""
    return {"Module": next(c for c in ModuleSubclass.__mro__ if c.__name__ == "Module"),
            "Parameter": global_of(ModuleSubclass.__init__, "Parameter")}


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


class ReferenceModel:
    """A 784-16-10 network on the notebook's given engine (not the learner's modules), to test the training loop.

    It knows each training row by its content, so however train_epoch indexes or copies the images, every recorded
    forward pass logs which rows it saw (``batches``); ``recorded`` says for each forward pass whether a graph was
    recorded; ``foreign_rows`` is set when a row is not a row of the images.
    """

    def __init__(self, Tensor, images, seed):
        rng = np.random.default_rng(seed)
        self.params = [Tensor(rng.uniform(-0.036, 0.036, (784, 16)), requires_grad=True),
                       Tensor(np.zeros(16), requires_grad=True),
                       Tensor(rng.uniform(-0.25, 0.25, (16, 10)), requires_grad=True),
                       Tensor(np.zeros(10), requires_grad=True)]
        self.row_of = {np.asarray(row, dtype=np.float64).tobytes(): n for n, row in enumerate(images)}
        self.batches, self.recorded, self.foreign_rows = [], [], False

    def parameters(self):
        return list(self.params)

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def __call__(self, x):
        w1, b1, w2, b2 = self.params
        out = ((x @ w1 + b1).relu()) @ w2 + b2
        self.recorded.append(out.recipe is not None)
        if out.recipe is not None:
            rows = [self.row_of.get(np.asarray(row, dtype=np.float64).tobytes()) for row in np.asarray(x.array)]
            if None in rows:
                self.foreign_rows = True
                raise ValueError("the model received rows that are not rows of the images")
            self.batches.append(rows)
        return out

    def arrays(self):
        return [np.array(p.array, dtype=np.float64) for p in self.params]


class SpyOptimizer:
    """Plain SGD that records, at every step, the parameters, the gradients it found and the batch just seen."""

    def __init__(self, model, lr):
        self.model, self.lr, self.steps = model, lr, []

    def zero_grad(self):
        self.model.zero_grad()

    def step(self):
        params = self.model.params
        found = [None if p.grad is None else np.asarray(p.grad.array, dtype=np.float64).copy() for p in params]
        batch = self.model.batches[-1] if self.model.batches else None
        self.steps.append({"params": self.model.arrays(), "grads": found, "rows": batch})
        for p, g in zip(params, found):
            if g is not None:
                p.array -= self.lr * g
