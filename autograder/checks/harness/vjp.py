"""Notebook 3's harness: a learner's backward function asked for one vector–Jacobian product and judged.

``back(grad_out, out, *inputs, **kwargs)`` must return d/d inputs[index] of sum(grad_out · forward(*inputs)), the
upstream gradient times the local derivative, already summed back to that input's shape, as float64. The references
are torch.autograd in float64 (``torch_vjp``) and central differences (``numeric_vjp``); ``as_gradient`` is the one
rule for what a returned gradient must be. A shape error raised inside the learner's code is told in shapes.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from autograder.checks import causes
from autograder.checks.harness.diagnostics import (AGAINST_DIFFERENCES, AGAINST_TORCH, FLOAT32_INPUTS, CheckFailure, quoted,
                                                   Probe, Slip, call_learner, close, fmt, wrong_value)
from autograder.checks.harness.oracles import backward_with_seed, central_differences


@dataclass(frozen=True)
class VJPCase:
    """One vector–Jacobian product asked of a learner's backward function.

    ``back(grad_out, out, *inputs, **kwargs)`` is asked for d/d inputs[index] of sum(grad_out · forward(*inputs,
    **kwargs)): the upstream gradient times the local derivative of the output with respect to that input, summed
    back to the input's shape. An exercise builds its case once, without inputs, and completes it for each call
    with ``dataclasses.replace``.
    """
    ex: str                                # the exercise id every CheckFailure carries
    name: str                              # the backward function as messages name it: "multiply_back1"
    back: Callable                         # the learner's backward function
    forward: Callable                      # the forward operation on float64 torch tensors: torch.mul, a lambda
    inputs: Sequence = ()                  # the forward's inputs: numpy arrays of any dtype, or Python numbers
    index: int = 0                         # the input whose gradient ``back`` returns
    grad_out: np.ndarray | None = None     # the upstream gradient, of the output's shape; None: a reproducible one
    kwargs: Mapping[str, object] = field(default_factory=dict)  # the forward's keywords (dim=...); back gets them too
    # False at a kink (relu at 0): there central differences measure the mean of the two one-sided slopes, while
    # torch, and the exercise, take the right-hand convention, so check_vjp skips them.
    smooth: bool = True


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
        raise CheckFailure(ex, f"{name} returned {type(result).__name__}; return a numpy array ({shown}).",
                           cause_id=causes.WRONG_TYPE)
    if result.shape != tuple(shape):
        hint = " Sum away what broadcasting added (unbroadcast)." if result.size > np.prod(shape, dtype=int) else ""
        raise CheckFailure(ex, f"{name} returned shape {result.shape}, but the input has shape {tuple(shape)} "
                               f"({shown}): a gradient has its input's shape.{hint}", cause_id=causes.WRONG_SHAPE)
    if np.issubdtype(result.dtype, np.integer) or result.dtype == bool:
        raise CheckFailure(ex, f"{name} returned dtype {result.dtype} ({shown}): an integer gradient buffer truncates "
                               "fractions. Build gradients in float64 (e.g. np.zeros(shape) or grad_out * 1.0).",
                           cause_id=causes.WRONG_DTYPE)
    if result.dtype != np.float64:
        raise CheckFailure(ex, f"{name} returned dtype {result.dtype} ({shown}): return float64, whatever the inputs' "
                               "dtype; float32 keeps only ~7 significant digits.", cause_id=causes.WRONG_DTYPE)
    return np.array(result, dtype=np.float64, subok=False)  # a plain array: no subclass can bend the comparison


def torch_vjp(forward, inputs, index, grad_out, **kwargs):
    """d/d inputs[index] of sum(grad_out · forward(*inputs)), by torch.autograd in float64."""
    tensors = [torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=(j == index)) for j, v in enumerate(inputs)]
    out = forward(*tensors, **kwargs)
    backward_with_seed(out, grad_out)
    return out.detach().numpy(), tensors[index].grad.numpy()


def numeric_vjp(forward, inputs, index, grad_out, **kwargs):
    """The same VJP by central differences (forward evaluated with torch, no autograd), nudging inputs[index] only."""
    upstream = torch.as_tensor(grad_out, dtype=torch.float64)
    tensors = [torch.tensor(np.asarray(v, dtype=np.float64)) for v in inputs]

    def weighted(value):
        tensors[index] = torch.from_numpy(value)  # the nudged copy; the other inputs stay as they are
        return float((upstream * forward(*tensors, **kwargs)).sum())
    return central_differences(weighted, inputs[index])[0]


def check_vjp(case: VJPCase) -> np.ndarray:
    """Ask the learner's backward function for ``case`` and compare with torch and central differences (the latter
    skipped when ``case.smooth`` is False).

    Returns:
        The learner's gradient, a float64 array of ``case.inputs[case.index]``'s shape.

    Raises:
        CheckFailure: a wrong value (showing the inputs' values, torch's or the differences' answer, and the common
            slip (``vjp_slips``) that gives the value received, if one does), shape or dtype, a shape error inside
            the learner's code told in shapes, or an argument changed in place.
    """
    case, out, expected, shown = _prepare(case)
    got = learner_vjp(case, out, shown)
    tolerance = _tolerance(case.inputs)
    if not close(got, expected, tolerance):
        raise wrong_value(case.ex, f"{shown}, with {_values(case)}", expected, got, vjp_slips(case, out, expected),
                          tolerance, said="torch.autograd gives")
    numeric = numeric_vjp(case.forward, case.inputs, case.index, case.grad_out, **case.kwargs) if case.smooth else got
    if not close(got, numeric, AGAINST_DIFFERENCES):
        raise CheckFailure(case.ex, f"{shown}, with {_values(case)}: central differences give {fmt(numeric)}, "
                                    f"received {fmt(got)}.", input=f"{shown}, with {_values(case)}")
    return got


def vjp_probe(case: VJPCase, why: str, slips: tuple[Slip, ...] = ()) -> Probe:
    """A hand-picked input whose failure has a known cause, as a Probe for ``run_probes``: the expected value is
    torch's VJP; a value received is matched against ``slips`` first, then against the rule's common slips
    (``vjp_slips``). ``why`` says what the probe asks, and starts a diagnosis of a wrong shape, dtype or type (never
    one of a stub, a crash or a wrong value). Central differences are left to the random cases: on a probe torch
    is exact."""
    case, out, expected, shown = _prepare(case)

    def call():
        try:
            return learner_vjp(case, out, shown)
        except CheckFailure as failure:
            if failure.cause_id in (causes.WRONG_SHAPE, causes.WRONG_DTYPE, causes.WRONG_TYPE):
                raise failure.wrapped(why) from None
            raise
    return Probe(shown, call, expected, (*slips, *vjp_slips(case, out, expected)), _tolerance(case.inputs))


# The slips any backward function can make, as values computed from the case (vjp_slips); each names its cause.
SIGN = causes.declare("vjp/sign", "the right gradient with the wrong sign (a minus missing or added)")
IGNORES_UPSTREAM = causes.declare("vjp/ignores-upstream", "the local derivative alone: grad_out was not multiplied in")
UPSTREAM_ALONE = causes.declare("vjp/local-derivative-missing", "grad_out passed on without the local derivative")
AT_OUTPUT = causes.declare("vjp/output-for-input", "the local derivative evaluated at out where the input belongs")
SAME_OPERAND = causes.declare("vjp/wrong-operand", "the input itself where the other operand belongs")
SUMS_EVERYTHING = causes.declare("vjp/sums-everything", "the whole gradient summed into every entry, over every axis")
MEAN_FOR_SUM = causes.declare("vjp/mean-for-sum", "the copies' gradients averaged where they add up")


def vjp_slips(case: VJPCase, out: np.ndarray, expected: np.ndarray) -> tuple[Slip, ...]:
    """What the common slips of a backward rule give on ``case`` (its ``grad_out`` set), in the order they are
    tried. A slip that cannot be computed for this case (shapes that do not meet, a forward undefined there) is left
    out, and so is one whose value equals the right answer, which could not tell the two apart."""
    x = case.inputs[case.index]
    shape = np.shape(x)
    other = [j for j in range(len(case.inputs)) if j != case.index]
    names = "xy"
    candidates = [
        (lambda: -expected, SIGN, f"this is the right gradient with the opposite sign: check the sign of "
                                  f"{case.name}'s local derivative."),
        (lambda: _vjp_with(case, grad_out=np.ones(np.shape(case.grad_out))), IGNORES_UPSTREAM,
         "this is the local derivative alone: a backward function returns it multiplied by grad_out, the upstream "
         "gradient."),
        (lambda: _sum_to(np.asarray(case.grad_out, dtype=np.float64), shape), UPSTREAM_ALONE,
         "this is grad_out passed on unchanged (summed to the input's shape): it still needs multiplying by the "
         "local derivative."),
        (lambda: _vjp_with(case, inputs=[out if j == case.index else v for j, v in enumerate(case.inputs)])
         if np.shape(out) == shape else None, AT_OUTPUT,
         "this is the local derivative evaluated at out, the forward's output: the rule needs the input there."),
        (lambda: _vjp_with(case, inputs=[v if j == case.index else _spread(x, v) for j, v in enumerate(case.inputs)])
         if other else None, SAME_OPERAND,
         f"this uses {names[case.index]} where the other operand, {names[other[0]] if other else ''}, belongs: the "
         "gradient for one input is grad_out times the local derivative with respect to that input."),
        (lambda: np.full(shape, expected.sum()) if expected.size > 1 else None, SUMS_EVERYTHING,
         "every entry is the sum of the whole gradient: sum only over the axes broadcasting added or stretched, "
         "not over every axis."),
        (lambda: expected * expected.size / np.size(case.grad_out) if expected.size < np.size(case.grad_out) else None,
         MEAN_FOR_SUM, "this is the mean over the copies: each copy passes on its whole gradient, so the gradients "
                       "add up, they are not averaged."),
    ]
    slips = []
    for value, cause, why in candidates:
        try:
            got = value()
        except Exception:  # a slip that cannot even be computed here cannot be the one made
            continue
        if got is not None and not close(got, expected, _tolerance(case.inputs)):
            slips.append(Slip(got, why, cause))
    return tuple(slips)


def _vjp_with(case: VJPCase, **changed) -> np.ndarray:
    """torch's VJP of ``case`` with some of its fields changed, summed to the real input's shape."""
    other = replace(case, **changed)
    return _sum_to(torch_vjp(other.forward, other.inputs, other.index, other.grad_out, **other.kwargs)[1],
                   np.shape(case.inputs[case.index]))


def _spread(x, like) -> np.ndarray:
    """``x`` broadcast to where it meets ``like``: the input standing in for the other operand."""
    return np.broadcast_to(np.asarray(x, dtype=np.float64), np.broadcast_shapes(np.shape(x), np.shape(like)))


def _sum_to(values: np.ndarray, shape: tuple) -> np.ndarray:
    """``values`` summed over what broadcasting to their shape added to ``shape`` (torch's sum_to_size)."""
    values = np.array(values, dtype=np.float64)
    return torch.from_numpy(values).sum_to_size(shape).numpy() if shape else np.array(values.sum())


def _values(case: VJPCase) -> str:
    """The case's inputs and upstream gradient by value, as a diagnosis shows them (a 0-d input too)."""
    names = ["x", "y"] if len(case.inputs) == 2 else ["x"] * len(case.inputs)
    shown = [f"{n} = {fmt(np.asarray(v))}" for n, v in zip(names, case.inputs)]
    return ", ".join([*shown, f"grad_out = {fmt(np.asarray(case.grad_out))}"])


def learner_vjp(case: VJPCase, out: np.ndarray, shown: str) -> np.ndarray:
    """The learner's gradient for inputs[index] as a float64 array of its shape; a shape error inside their code is
    told in shapes, and a changed argument is named.

    ``case.grad_out`` must be set; ``out`` is the forward's output (float64) and ``shown`` the call as messages show
    it. Raises CheckFailure.
    """
    sent = [np.array(case.grad_out), out, *[np.array(v) if isinstance(v, np.ndarray) else v for v in case.inputs]]
    try:
        result = call_learner(case.ex, case.back, *sent, shown_input=shown, **case.kwargs,
                              changed_input=f"{case.name} changed grad_out or an input in place ({shown}). In an "
                                            "engine the backward functions of one operation share grad_out: compute "
                                            "new arrays instead.")
    except CheckFailure as failure:
        if isinstance(failure.cause, ValueError) and SHAPE_ERROR.search(str(failure.cause)):
            raise CheckFailure(case.ex, shape_error(case, failure.cause), cause_id=SHAPES_DO_NOT_MEET) from None
        raise
    return as_gradient(case.ex, case.name, result, np.shape(case.inputs[case.index]), shown)


def _prepare(case: VJPCase) -> tuple[VJPCase, np.ndarray, np.ndarray, str]:
    """What asking ``case`` needs: the case with an upstream gradient (a reproducible one when it names none), the
    forward's output and torch's VJP (float64 arrays), and the call as messages show it."""
    if case.grad_out is None:
        case = replace(case, grad_out=_upstream(case))
    out, expected = torch_vjp(case.forward, case.inputs, case.index, case.grad_out, **case.kwargs)
    return case, out, expected, _shown(case)


def _upstream(case: VJPCase) -> np.ndarray:
    """A reproducible upstream gradient of the output's shape, with three decimals so that messages stay readable."""
    shape = case.forward(*[torch.tensor(np.asarray(v, dtype=np.float64)) for v in case.inputs], **case.kwargs).shape
    rng = np.random.default_rng(len(case.name) + sum(np.size(v) for v in case.inputs))
    return rng.uniform(-2, 2, size=tuple(shape)).round(3)


def _shown(case: VJPCase) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in case.kwargs.items())
    return (f"{case.name}(grad_out of shape {np.shape(case.grad_out)}, out, "
            + ", ".join(describe(v) for v in case.inputs) + f"{extra})")


def _tolerance(inputs):
    # A float32 input carries ~7 significant digits into any formula that uses it as it is (np.square(y) stays
    # float32): hold such results to float32's precision, and float64 ones to float64's.
    return FLOAT32_INPUTS if any(np.asarray(v).dtype == np.float32 for v in inputs) else AGAINST_TORCH


SHAPES_DO_NOT_MEET = causes.declare("vjp/shapes-do-not-meet", "the rule combined arrays whose shapes do not "
                                    "broadcast (often a transpose missing or misplaced)")
SHAPE_ERROR = re.compile(r"shape|broadcast|dimension|axes|axis")  # numpy's words for a shape mismatch


def shape_error(case: VJPCase, error: ValueError) -> str:
    """A shape error raised inside a backward function, told in the exercise's terms: which shapes met, and which
    shape the result must have. ``case.grad_out`` must be set."""
    names = ["x", "y"][:len(case.inputs)]
    shapes = ", ".join(f"{n} {np.shape(v)}" for n, v in zip(names, case.inputs))
    told = (f"{case.name} raised ValueError ({quoted(error)}). The shapes it was given: grad_out {np.shape(case.grad_out)} "
            f"(the output's), {shapes}; it must return an array of {names[case.index]}'s shape "
            f"{np.shape(case.inputs[case.index])}.")
    if case.forward is torch.matmul:
        told += (" For out = x @ y, the gradient for x is grad_out @ y.T and the gradient for y is x.T @ grad_out: "
                 "multiplied by the other operand untransposed, the sizes that should meet in the product do not "
                 "(treat a 1-d x as a row and a 1-d y as a column first).")
    return told


def describe(value) -> str:
    if isinstance(value, (int, float)):
        return f"the Python number {value!r}"
    return f"{np.asarray(value).dtype} array of shape {np.shape(value)}"
