"""Notebook 3's harness: a learner's backward function asked for one vector–Jacobian product and judged.

``back(grad_out, out, *inputs, **kwargs)`` must return d/d inputs[index] of sum(grad_out · forward(*inputs)), the
upstream gradient times the local derivative, already summed back to that input's shape, as float64. The references
are torch.autograd in float64 (``torch_vjp``) and central differences (``numeric_vjp``); ``as_gradient`` is the one
rule for what a returned gradient must be. A shape error raised inside the learner's code is told in shapes.
"""
from __future__ import annotations

import re

import numpy as np
import torch

from autograder.checks.harness.diagnostics import (AGAINST_DIFFERENCES, AGAINST_TORCH, FLOAT32_INPUTS, CheckFailure, Probe,
                                                   call_learner, close, fmt)
from autograder.checks.harness.oracles import central_differences


def as_gradient(ex, name, result, shape, shown):
    """The learner's gradient as a float64 ndarray of the input's shape, or a CheckFailure.

    One rule for every backward function and unbroadcast. A view, ``grad_out`` itself or a read-only array (what
    ``np.broadcast_to`` gives) is accepted: the course's engines never write into a gradient, they add into new
    arrays (notebook 4). numpy turns 0-d arithmetic into numpy scalars (even ``np.sum(a, keepdims=True)`` of a 0-d
    ``a``), so a numpy scalar stands for a 0-d array.
    """
    if isinstance(result, np.generic):
        result = np.asarray(result)
    if not isinstance(result, np.ndarray):
        raise CheckFailure(ex, f"{name} returned {type(result).__name__}; return a numpy array ({shown}).")
    if result.shape != tuple(shape):
        hint = " Sum away what broadcasting added (unbroadcast)." if result.size > np.prod(shape, dtype=int) else ""
        raise CheckFailure(ex, f"{name} returned shape {result.shape}, but the input has shape {tuple(shape)} ({shown}): "
                               f"a gradient has its input's shape.{hint}")
    if np.issubdtype(result.dtype, np.integer) or result.dtype == bool:
        raise CheckFailure(ex, f"{name} returned dtype {result.dtype} ({shown}): an integer gradient buffer truncates "
                               "fractions. Build gradients in float64 (e.g. np.zeros(shape) or grad_out * 1.0).")
    if result.dtype != np.float64:
        raise CheckFailure(ex, f"{name} returned dtype {result.dtype} ({shown}): return float64, whatever the inputs' "
                               "dtype; float32 keeps only ~7 significant digits.")
    return np.array(result, dtype=np.float64, subok=False)  # a plain array: no subclass can bend the comparison


def torch_vjp(forward, inputs, index, grad_out, **kwargs):
    """d/d inputs[index] of sum(grad_out · forward(*inputs)), by torch.autograd in float64."""
    tensors = [torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=(j == index)) for j, v in enumerate(inputs)]
    out = forward(*tensors, **kwargs)
    (grad,) = torch.autograd.grad(out, tensors[index], torch.as_tensor(grad_out, dtype=torch.float64))
    return out.detach().numpy(), grad.numpy()


def numeric_vjp(forward, inputs, index, grad_out, **kwargs):
    """The same VJP by central differences (forward evaluated with torch, no autograd), nudging inputs[index] only."""
    upstream = torch.as_tensor(grad_out, dtype=torch.float64)
    tensors = [torch.tensor(np.asarray(v, dtype=np.float64)) for v in inputs]

    def weighted(value):
        tensors[index] = torch.from_numpy(value)  # the nudged copy; the other inputs stay as they are
        return float((upstream * forward(*tensors, **kwargs)).sum())
    return central_differences(weighted, inputs[index])[0]


def check_vjp(ex, name, back, forward, inputs, index, grad_out=None, smooth=True, **kwargs):
    """Call the learner's ``back(grad_out, out, *inputs, **kwargs)`` and compare with torch and central differences.

    smooth=False skips the differences: at a kink (relu at 0) they measure the mean of the two one-sided slopes,
    while torch, and the exercise, take the right-hand convention.
    """
    if grad_out is None:
        grad_out = _upstream(name, forward, inputs, kwargs)
    out, expected = torch_vjp(forward, inputs, index, grad_out, **kwargs)
    shown = _shown(name, grad_out, inputs, kwargs)
    got = learner_vjp(ex, name, back, forward, inputs, index, grad_out, out, shown, kwargs)
    if not close(got, expected, _tolerance(inputs)):
        raise CheckFailure(ex, f"{shown}: torch.autograd gives {fmt(expected)}, received {fmt(got)}.")
    numeric = numeric_vjp(forward, inputs, index, grad_out, **kwargs) if smooth else got
    if not close(got, numeric, AGAINST_DIFFERENCES):
        raise CheckFailure(ex, f"{shown}: central differences give {fmt(numeric)}, received {fmt(got)}.")
    return got


def vjp_probe(ex, why, name, back, forward, inputs, index, grad_out=None, slips=(), **kwargs) -> Probe:
    """A hand-picked input whose failure has a known cause, as a Probe for ``run_probes``: the expected value is
    torch's VJP, and every diagnosis, a wrong shape or dtype included, starts with ``why`` (or with the matching
    slip's cause). Central differences are left to the random cases: on a probe torch is exact."""
    if grad_out is None:
        grad_out = _upstream(name, forward, inputs, kwargs)
    out, expected = torch_vjp(forward, inputs, index, grad_out, **kwargs)
    shown = _shown(name, grad_out, inputs, kwargs)

    def call():
        try:
            return learner_vjp(ex, name, back, forward, inputs, index, grad_out, out, shown, kwargs)
        except CheckFailure as failure:
            raise CheckFailure(ex, f"{why}\n{failure.message}") from None
    return Probe(shown, call, expected, slips, why, _tolerance(inputs))


def learner_vjp(ex, name, back, forward, inputs, index, grad_out, out, shown, kwargs) -> np.ndarray:
    """The learner's gradient for inputs[index] as a float64 array of its shape; a shape error inside their code is
    told in shapes, and a changed argument is named."""
    sent = [np.array(grad_out), out, *[np.array(v) if isinstance(v, np.ndarray) else v for v in inputs]]
    try:
        result = call_learner(ex, back, *sent, shown_input=shown, **kwargs,
                              changed_input=f"{name} changed grad_out or an input in place ({shown}). In an engine "
                                            "the backward functions of one operation share grad_out: compute new "
                                            "arrays instead.")
    except CheckFailure as failure:
        if isinstance(failure.cause, ValueError) and SHAPE_ERROR.search(str(failure.cause)):
            raise CheckFailure(ex, shape_error(name, failure.cause, grad_out, inputs, index, forward)) from None
        raise
    return as_gradient(ex, name, result, np.shape(inputs[index]), shown)


def _upstream(name, forward, inputs, kwargs) -> np.ndarray:
    """A reproducible upstream gradient of the output's shape, with three decimals so that messages stay readable."""
    shape = forward(*[torch.tensor(np.asarray(v, dtype=np.float64)) for v in inputs], **kwargs).shape
    rng = np.random.default_rng(len(name) + sum(np.size(v) for v in inputs))
    return rng.uniform(-2, 2, size=tuple(shape)).round(3)


def _shown(name, grad_out, inputs, kwargs) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    return f"{name}(grad_out of shape {np.shape(grad_out)}, out, " + ", ".join(describe(v) for v in inputs) + f"{extra})"


def _tolerance(inputs):
    # A float32 input carries ~7 significant digits into any formula that uses it as it is (np.square(y) stays
    # float32): hold such results to float32's precision, and float64 ones to float64's.
    return FLOAT32_INPUTS if any(np.asarray(v).dtype == np.float32 for v in inputs) else AGAINST_TORCH


SHAPE_ERROR = re.compile(r"shape|broadcast|dimension|axes|axis")  # numpy's words for a shape mismatch


def shape_error(name, error, grad_out, inputs, index, forward) -> str:
    """A shape error raised inside a backward function, told in the exercise's terms: which shapes met, and which
    shape the result must have."""
    names = ["x", "y"][:len(inputs)]
    shapes = ", ".join(f"{n} {np.shape(v)}" for n, v in zip(names, inputs))
    told = (f"{name} raised ValueError ({error}). The shapes it was given: grad_out {np.shape(grad_out)} (the "
            f"output's), {shapes}; it must return an array of {names[index]}'s shape {np.shape(inputs[index])}.")
    if forward is torch.matmul:
        told += (" For out = x @ y, the gradient for x is grad_out @ y.T and the gradient for y is x.T @ grad_out: "
                 "multiplied by the other operand untransposed, the sizes that should meet in the product do not "
                 "(treat a 1-d x as a row and a 1-d y as a column first).")
    return told


def describe(value) -> str:
    if isinstance(value, (int, float)):
        return f"the Python number {value!r}"
    return f"{np.asarray(value).dtype} array of shape {np.shape(value)}"
