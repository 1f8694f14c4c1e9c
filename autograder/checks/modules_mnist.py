"""Checks for notebook 5, "Modules, and MNIST on your own engine".

Modules are checked for registration (Parameters and sub-Modules on assignment, nothing else), recursion, each
parameter once, and zero_grad; Linear, Sequential and cross_entropy against torch.nn.functional in float64 with the
learner's own weights; SGD against torch.optim.SGD, each array updated in place; the training loop first for its
protocol (every row once per epoch in a new shuffled order drawn from the given rng, at each step exactly the gradient
of that batch's mean loss, that loss as it was before the step returned for each batch, evaluation without
recording), then by training a small network with all the learner's classes on real digits, which must beat
TRAINING_FLOOR.

Numbers: logits [0, 1000] with label 0 give loss 1000 and gradient [-1, 1] (notebook-5 issue); logits
[[0, 1], [1000, 1001]] expose a shift by the batch maximum; Linear's initial range is ±1/sqrt(in_features)
(torch.nn.Linear, from He et al. 2015's analysis as implemented in torch.nn.init.kaiming_uniform_ with a = sqrt(5)).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, strategies as st

from autograder.checks import causes
from autograder.checks.registry import exercise
from autograder.checks.reference import modules as reference_modules
from autograder.checks.harness.oracles import backward_with_seed
from autograder.checks.harness.diagnostics import (AGAINST_TORCH, FEW_RANDOM_CASES, SAME_ARITHMETIC, CheckFailure, Probe,
                                                   Slip, Tolerance, call_learner, case_rng, close, described, fmt, quoted,
                                                   run_probes)
from autograder.trust.remote import beside

# A 784-64-10 network trained 3 epochs (batch 32, lr 0.1) on the 4,000 training digits of the offline sample reaches
# 0.880-0.892 on the first 500 test digits with the reference solution (8 seeds measured); a bug upstream lands below.
TRAINING_FLOOR = 0.80
TRAINING_SLICE, TRAINING_TEST_SLICE, TRAINING_EPOCHS, TRAINING_LR = 4000, 500, 3, 0.1

# Gradients of the training check's 784-16-10 network found by the notebook's engine against torch's: products over
# 784 inputs and 64 rows, summed in other orders by each library's BLAS; the slips they tell apart (the sum instead of
# the mean, the previous batch's gradient added) are off by a factor or by a whole gradient.
NETWORK_GRADIENTS = Tolerance(1e-8, 1e-12)


def _ids(params):
    return [id(p) for p in params]


def _array_of(out):
    """A Tensor's array, or what came back when it is not a Tensor (a probe compares it and shows it)."""
    return getattr(out, "array", out)


# ------------------------------------------------------------------------------------------------ module

NOT_REGISTERED = causes.declare("module/parameters-not-registered", "Parameters assigned as attributes not "
                                "registered by __setattr__")
REGISTERS_NON_PARAMETERS = causes.declare("module/registers-non-parameters", "a Tensor that is not a Parameter (data, "
                                          "a computed result) registered as a parameter")
LISTED_TWICE = causes.declare("module/parameter-listed-twice", "a shared parameter or sub-module listed more than "
                              "once")
NOT_RECURSIVE = causes.declare("module/not-recursive", "sub-modules' parameters left out of parameters()")
PARAMETER_ORDER = causes.declare("module/parameter-order", "parameters listed in another order than torch's (own "
                                 "first, then each sub-module's, in assignment order)")
KEEPS_REASSIGNED = causes.declare("module/keeps-reassigned-name", "a name re-assigned (to a new Parameter or to a "
                                  "non-Parameter) still registered with its old value")
ZERO_GRAD_MISSES = causes.declare("module/zero-grad-misses-parameters", "zero_grad left some parameters' gradients "
                                  "(a sub-module's) in place")
ZERO_GRAD_ZEROS = causes.declare("module/zero-grad-writes-zeros", "zero_grad wrote zeros into .grad instead of "
                                 "setting it to None")

@exercise("module")
def check_module(Module, Parameter, Tensor) -> None:
    ex = "module"
    kit = beside(Tensor, reference_modules)
    Pair, Outer, Ordered = kit.module_classes(Module, Parameter, Tensor)

    pair = call_learner(ex, Pair, shown_input="a module with Parameters a, b, a number and a plain Tensor")
    got = call_learner(ex, pair.parameters, shown_input="pair.parameters()")
    if not isinstance(got, list):
        raise CheckFailure(ex, f"parameters() should return a list, got {type(got).__name__}.",
                           cause_id=causes.WRONG_TYPE)
    if any(p is pair.data for p in got):
        raise CheckFailure(ex, "a plain Tensor attribute (requires_grad False) was listed as a parameter: register "
                               "only values that are Parameters (isinstance(value, Parameter)).",
                           cause_id=REGISTERS_NON_PARAMETERS)
    if sorted(_ids(got)) != sorted([id(pair.a), id(pair.b)]):
        raise CheckFailure(ex, f"a module with Parameters a and b should list exactly those two, got {len(got)} "
                               "items: register Parameters in __setattr__ as they are assigned.",
                           cause_id=NOT_REGISTERED)
    outer = call_learner(ex, Outer, shown_input="a module with two sub-modules, one assigned twice, and a shared "
                                                "parameter")
    got = call_learner(ex, outer.parameters, shown_input="outer.parameters()")
    want = {id(outer.w), id(outer.first.a), id(outer.first.b), id(outer.second.a), id(outer.second.b)}
    if len(_ids(got)) != len(set(_ids(got))):
        raise CheckFailure(ex, "parameters() listed a parameter more than once (a sub-module assigned under two names, "
                               "or one parameter shared by two modules): keep each once, or an optimizer would update "
                               "it twice per step.", cause_id=LISTED_TWICE)
    if set(_ids(got)) != want:
        missing = len(want - set(_ids(got)))
        raise CheckFailure(ex, f"parameters() missed {missing} of the 5 parameters of a module with its own Parameter "
                               "and two sub-modules: include every sub-module's parameters(), recursively.",
                           cause_id=NOT_RECURSIVE)
    ordered = call_learner(ex, Ordered, shown_input="Ordered(): first = Pair(), w = Parameter, second = Pair()")
    names = {id(ordered.w): "w", id(ordered.first.a): "first.a", id(ordered.first.b): "first.b",
             id(ordered.second.a): "second.a", id(ordered.second.b): "second.b"}
    listed = [names.get(id(p), "?") for p in call_learner(ex, ordered.parameters, shown_input="ordered.parameters()")]
    if listed != ["w", "first.a", "first.b", "second.a", "second.b"]:
        raise CheckFailure(ex, f"parameters() listed {listed}; torch's order is the module's own parameters first, "
                               "then each sub-module's, all in assignment order: [w, first.a, first.b, second.a, "
                               "second.b]. Iterate over the dictionaries, not over a set, so the order is fixed.",
                           cause_id=PARAMETER_ORDER)
    deep = pair
    for _ in range(30):
        holder = call_learner(ex, Module, shown_input="Module()")
        holder.inner = deep
        deep = holder
    if len(call_learner(ex, deep.parameters, shown_input="30 nested modules")) != 2:
        raise CheckFailure(ex, "30 modules nested inside each other around one with two parameters should list 2.",
                           cause_id=NOT_RECURSIVE)

    pair.b = Parameter(np.ones(3))
    if sorted(_ids(pair.parameters())) != sorted([id(pair.a), id(pair.b)]):
        raise CheckFailure(ex, "after re-assigning pair.b to a new Parameter, parameters() should list the new one "
                               "instead of the old one.", cause_id=KEEPS_REASSIGNED)
    for value, shown in ((3.0, "pair.b = 3.0"), (None, "pair.b = None")):
        pair.b = Parameter(np.ones(3))
        pair.b = value
        if _ids(pair.parameters()) != [id(pair.a)]:
            raise CheckFailure(ex, f"after `{shown}`, b is no longer a parameter: __setattr__ should forget a name "
                                   "that is re-assigned to anything that is not a Parameter.",
                               cause_id=KEEPS_REASSIGNED)
    pair.result = Parameter(np.ones(2)) * 2.0  # an intermediate result that requires grad, not a Parameter
    if any(p is pair.result for p in pair.parameters()):
        raise CheckFailure(ex, "pair.result = pair.a * 2 (a computed Tensor that requires grad) was registered as a "
                               "parameter: only Parameters are trainable; check isinstance(value, Parameter).",
                           cause_id=REGISTERS_NON_PARAMETERS)
    holder = Outer()
    removed = holder.first
    holder.first = None
    holder.again = None
    if any(p is removed.a or p is removed.b for p in holder.parameters()):
        raise CheckFailure(ex, "after `outer.first = None` (and its alias), that sub-module's parameters are still "
                               "listed: __setattr__ should also forget a sub-module name re-assigned to a non-Module.",
                           cause_id=KEEPS_REASSIGNED)

    for top, shown in ((outer, "a module with two sub-modules"), (deep, "30 nested modules")):
        everything = call_learner(ex, top.parameters, shown_input=f"parameters() of {shown}")
        _check_zero_grad(ex, top.zero_grad, everything, Tensor, f"zero_grad() on {shown}")
    # Then modules drawn from the case seed: names, shapes, how many of each, the order they are assigned in, a
    # sub-module assigned twice, a sub-module's parameter shared, numbers and data tensors in between. A parameters()
    # that knows the fixed modules (whose names are assigned in alphabetical order, say) does not know these.
    drawn = case_rng(ex)
    for _ in range(DRAWN_MODULES):
        entries = _drawn_entries(drawn)
        shown = f"a module assigning {_spelled_entries(entries)}"
        top = call_learner(ex, kit.drawn_module, Module, Parameter, Tensor, entries, shown_input=shown)
        paths = _torch_order(entries)
        names = {id(_attribute(top, path)): ".".join(path) for path in paths}
        got = call_learner(ex, top.parameters, shown_input=f"parameters() of {shown}")
        listed = [names.get(id(p), "?") for p in got]
        if listed != [".".join(path) for path in paths]:
            raise CheckFailure(ex, f"for {shown}, parameters() listed [{', '.join(listed)}]; torch's order is the "
                                   "module's own parameters first, then each sub-module's, all in assignment order, "
                                   f"each once: [{', '.join('.'.join(path) for path in paths)}].",
                               cause_id=PARAMETER_ORDER)
        _check_zero_grad(ex, top.zero_grad, got, Tensor, f"zero_grad() on {shown}")


DRAWN_MODULES = 2
_NAMES = tuple("abcdefghijklmnopqrstuvxyz")  # no w: the fixed modules' own parameter


def _drawn_entries(drawn) -> list:
    """A module to build with reference_modules.drawn_module: 2 or 3 own parameters and 2 or 3 sub-modules of 1 to 3
    parameters (and maybe a number), in a drawn order, then maybe a sub-module under a second name, a sub-module's
    parameter as an own one, a number and a data tensor; single-letter names in a drawn order."""
    names = iter(drawn.permutation(_NAMES).tolist())

    def shape():
        return [int(n) for n in drawn.integers(1, 4, size=drawn.integers(1, 3))]

    def parameter():
        return [next(names), "parameter", shape()]

    subs = []
    for _ in range(drawn.integers(2, 4)):
        inner = [parameter() for _ in range(drawn.integers(1, 4))]
        if drawn.random() < 0.5:
            inner.insert(int(drawn.integers(len(inner) + 1)), [next(names), "number", round(float(drawn.normal()), 2)])
        subs.append([next(names), "module", inner])
    entries = [parameter() for _ in range(drawn.integers(2, 4))] + subs
    entries = [entries[n] for n in drawn.permutation(len(entries))]
    sub = subs[int(drawn.integers(len(subs)))]
    extras = [[next(names), "alias", [sub[0]]], [next(names), "alias", [sub[0], sub[2][-1][0]]],
              [next(names), "number", 3.0], [next(names), "data", shape()]]
    if sub[2][-1][1] != "parameter":
        extras.pop(1)  # the sub-module's last entry is its number
    for extra in extras:
        if drawn.random() < 0.5:
            entries.insert(int(drawn.integers(entries.index(sub) + 1, len(entries) + 1)), extra)
    return entries


def _torch_order(entries, prefix=()) -> list[tuple[str, ...]]:
    """The attribute paths of the parameters torch lists for drawn_module(entries), in its order: the module's own
    (an alias of a sub-module's parameter among them) first, then each sub-module's; each parameter once, under the
    path it was made at."""
    own, nested = [], []
    for name, kind, value in entries:
        if kind == "parameter":
            own.append(prefix + (name,))
        elif kind == "module":
            nested += _torch_order(value, prefix + (name,))
        elif kind == "alias" and len(value) == 2:
            own.append(prefix + tuple(value))
    return list(dict.fromkeys(own + nested))


def _attribute(module, path):
    for name in path:
        module = getattr(module, name)
    return module


def _spelled_entries(entries) -> str:
    """drawn_module's entries, as the assignments they are."""
    def spelled(name, kind, value):
        if kind in ("parameter", "data"):
            return f"{name} = {'Parameter' if kind == 'parameter' else 'Tensor'}(np.zeros({tuple(value)}))"
        if kind == "module":
            return f"{name} = Module({_spelled_entries(value)})"
        return f"{name} = {'.'.join(value) if kind == 'alias' else value}"
    return ", ".join(spelled(*entry) for entry in entries)


def _ones_like(parameter) -> np.ndarray:
    """Ones shaped like ``parameter``'s array, read from the array itself (it crosses from a worker as data, within a
    frame's limit), never from the shape the parameter reports: a learner's ``shape`` property of (8192, 8192) made
    the grader allocate 6.5 GB (red team 9). Raises TypeError for an array that is not numbers."""
    return np.ones_like(np.asarray(parameter.array, dtype=float))


def _check_zero_grad(ex: str, zero_grad, params, Tensor, shown: str) -> None:
    """``zero_grad`` must set every parameter's .grad to None, as the notebook asks and torch does by default
    (``set_to_none=True``): once when some parameters have no gradient yet, once when all of them have one.

    Raises:
        CheckFailure: a gradient is left, is zeros instead of None, or zero_grad crashes on a missing gradient.
    """
    params = list(params)
    for p in params[1:]:
        p.grad = None  # as after creation, or after the last zero_grad
    params[0].grad = Tensor(_ones_like(params[0]))
    try:
        call_learner(ex, zero_grad, shown_input=f"{shown}, where only the first parameter has a gradient")
    except CheckFailure as failure:
        if isinstance(failure.cause, (AttributeError, TypeError)) and "NoneType" in str(failure.cause):
            raise CheckFailure(ex, f"{shown} crashed on a parameter that has no gradient yet (its .grad is None, as "
                                   "after creation or after the last zero_grad): set .grad = None rather than "
                                   f"writing zeros into it ({quoted(failure.cause)}).", cause_id=ZERO_GRAD_ZEROS) from None
        raise
    for p in params:
        p.grad = Tensor(_ones_like(p))
    call_learner(ex, zero_grad, shown_input=shown)
    left = [p.grad for p in params if p.grad is not None]
    if any(np.any(np.asarray(g.array)) for g in left):
        raise CheckFailure(ex, f"{shown} left some gradients in place: clear every parameter's gradient, at any "
                               "depth (set .grad to None for each of self.parameters()).", cause_id=ZERO_GRAD_MISSES)
    if left:
        raise CheckFailure(ex, f"{shown} left arrays of zeros: set each .grad to None instead, as the notebook asks "
                               "(and torch's zero_grad does), so that a gradient that was never computed stays "
                               "distinguishable from a zero one.", cause_id=ZERO_GRAD_ZEROS)


# ------------------------------------------------------------------------------------------------ linear

NOT_GLOBAL_GENERATOR = causes.declare("linear/not-global-generator", "weights not drawn from numpy's global "
                                      "generator, so np.random.seed does not make them reproducible")
LINEAR_PARAMETERS = causes.declare("linear/wrong-parameters", "Linear's parameters() not [weight, bias]")
IGNORES_NO_BIAS = causes.declare("linear/ignores-bias-false", "bias=False still gives the layer a bias")
INIT_RANGE = causes.declare("linear/wrong-init-range", "weights or bias not uniform in [-k, k], k = "
                            "1/sqrt(in_features)")
WEIGHT_TRANSPOSED = causes.declare("linear/weight-transposed", "the weight stored as (in_features, out_features), "
                                   "not torch's (out_features, in_features)")

@exercise("linear", builds_on=("module",))
def check_linear(Linear, Tensor) -> None:
    ex = "linear"
    kit = beside(Tensor, reference_modules)
    kit.seed(1)
    layer = _initialised(ex, Linear, 400, 300)
    weight, bias = layer.weight, layer.bias
    kit.seed(1)
    again = call_learner(ex, Linear, 400, 300, shown_input="Linear(400, 300) after the same np.random.seed(1)")
    second = call_learner(ex, Linear, 400, 300, shown_input="a second Linear(400, 300)")
    if not np.array_equal(np.asarray(again.weight.array), np.asarray(weight.array)):
        raise CheckFailure(ex, "the same np.random.seed gave different weights: draw them with np.random.uniform, so "
                               "that np.random.seed makes a model reproducible.", cause_id=NOT_GLOBAL_GENERATOR)
    if np.array_equal(np.asarray(second.weight.array), np.asarray(again.weight.array)):
        raise CheckFailure(ex, "two layers made one after the other have identical weights: draw from numpy's global "
                               "generator (np.random.uniform) instead of a generator seeded inside __init__.",
                           cause_id=NOT_GLOBAL_GENERATOR)
    params = call_learner(ex, layer.parameters, shown_input="Linear(400, 300).parameters()")
    if sorted(_ids(params)) != sorted([id(weight), id(bias)]):
        raise CheckFailure(ex, "Linear(400, 300).parameters() should be [weight, bias].", cause_id=LINEAR_PARAMETERS)
    plain = call_learner(ex, Linear, 5, 4, bias=False, shown_input="Linear(5, 4, bias=False)")
    if getattr(plain, "bias", "missing") is not None:
        raise CheckFailure(ex, "Linear(5, 4, bias=False) should set self.bias = None (torch does the same).",
                           cause_id=IGNORES_NO_BIAS)
    if _ids(call_learner(ex, plain.parameters,
                         shown_input="Linear(5, 4, bias=False).parameters()")) != [id(plain.weight)]:
        raise CheckFailure(ex, "Linear(5, 4, bias=False).parameters() should be [weight] alone.",
                           cause_id=IGNORES_NO_BIAS)
    rows = np.random.default_rng(2).uniform(-1, 1, (6, 5))
    seed = np.random.default_rng(3).uniform(-1, 1, (6, 4))
    for layer, shown in ((call_learner(ex, Linear, 5, 4, shown_input="Linear(5, 4)"), "Linear(5, 4)"),
                         (plain, "Linear(5, 4, bias=False)")):
        _compare_with_torch_linear(ex, Tensor, layer, shown, rows, seed)
    # Then sizes, a seed and inputs drawn from the case seed: a layer that knows the fixed ones (k = 0.05, the fixed
    # Linear(400, 300)'s, written in) does not know these. In and out features are drawn so that k is at least twice
    # 0.05 and the sample statistics stay within about 6 of their standard deviations for a correct layer.
    drawn = case_rng(ex)
    kit.seed(int(drawn.integers(2 ** 31)))
    _initialised(ex, Linear, int(drawn.integers(25, 101)), int(drawn.integers(1000, 1501)))
    # Small layers and a wide one: a forward that is right only up to some width (a bias left out past 8 inputs,
    # say) meets one past it.
    for with_bias, low, high in ((True, 1, 9), (False, 1, 65), (True, 17, 65)):
        n_in, n_out = (int(n) for n in drawn.integers(low, high, size=2))
        batch = int(drawn.integers(1, 9))
        shown = f"Linear({n_in}, {n_out}{'' if with_bias else ', bias=False'})"
        layer = call_learner(ex, Linear, n_in, n_out, bias=with_bias, shown_input=shown)
        _compare_with_torch_linear(ex, Tensor, layer, shown, drawn.uniform(-1, 1, (batch, n_in)),
                                   drawn.uniform(-1, 1, (batch, n_out)))


def _initialised(ex, Linear, n_in, n_out):
    """Linear(n_in, n_out), made after the check seeded np.random: its weight and bias are Parameters of torch's
    shapes, uniform in [-k, k] with k = 1/sqrt(n_in). Returns the layer.

    The sample statistics are judged within a few hundredths: under a seed nobody chose, a correct layer passes with
    certainty only when n_out is 1,000 or more and n_in * n_out 25,000 or more (6 standard deviations or more)."""
    shown = f"Linear({n_in}, {n_out})"
    layer = call_learner(ex, Linear, n_in, n_out, shown_input=shown)
    weight, bias = getattr(layer, "weight", None), getattr(layer, "bias", None)
    for name, p, shape in (("weight", weight, (n_out, n_in)), ("bias", bias, (n_out,))):
        if p is None or not hasattr(p, "array"):
            raise CheckFailure(ex, f"{shown}.{name} should be a Parameter, got {p!r}.", cause_id=causes.WRONG_TYPE)
        if tuple(p.shape) != shape:
            hint = " torch stores the weight as (out_features, in_features)." if name == "weight" else ""
            cause = WEIGHT_TRANSPOSED if tuple(p.shape) == shape[::-1] != shape else causes.WRONG_SHAPE
            raise CheckFailure(ex, f"{shown}.{name} has shape {tuple(p.shape)}, expected {shape}.{hint}",
                               cause_id=cause)
        if not p.requires_grad or not p.is_leaf:
            raise CheckFailure(ex, f"{shown}.{name} must be a Parameter (a leaf that requires grad).",
                               cause_id=causes.WRONG_TYPE)
    k = 1 / math.sqrt(n_in)
    for name, p in (("weight", weight), ("bias", bias)):
        values = np.asarray(p.array)
        inner = np.mean(np.abs(values) < k / 2)  # uniform on [-k, k]: half the values lie within k/2
        spread = 0.02 if values.size > 10_000 else 0.1
        if (np.max(np.abs(values)) > k or np.max(np.abs(values)) < 0.9 * k or abs(inner - 0.5) > spread
                or abs(np.std(values) - k / math.sqrt(3)) > 0.1 * k / math.sqrt(3)):
            raise CheckFailure(ex, f"{shown}.{name} should be uniform in [-k, k] with k = 1/sqrt({n_in}) = {k:.4g} "
                                   f"(standard deviation k/√3 = {k / math.sqrt(3):.4f}); got values from "
                                   f"{values.min():.4f} to {values.max():.4f}, standard deviation {values.std():.4f}.",
                               cause_id=INIT_RANGE)
    return layer


def _compare_with_torch_linear(ex, Tensor, layer, shown, x, seed):
    """The layer's output on rows ``x`` and its gradients for the upstream gradient ``seed``, against F.linear's."""
    xt = Tensor(x.copy(), requires_grad=True)
    out = call_learner(ex, layer, xt, shown_input=f"{shown}(x of shape {x.shape})")
    w = torch.tensor(np.asarray(layer.weight.array), requires_grad=True)
    b = None if layer.bias is None else torch.tensor(np.asarray(layer.bias.array), requires_grad=True)
    xtorch = torch.tensor(x, requires_grad=True)
    want = torch.nn.functional.linear(xtorch, w, b)
    if not hasattr(out, "array") or not close(out.array, want.detach().numpy(), AGAINST_TORCH):
        raise CheckFailure(ex, f"{shown} on x of shape {x.shape} should equal x @ weight.T + bias = torch's F.linear "
                               f"with the same weights, shape {seed.shape}; got "
                               f"{fmt(np.asarray(getattr(out, 'array', out)))}.")
    backward_with_seed(want, seed)
    call_learner(ex, out.backward, Tensor(seed), shown_input=f"{shown}(x).backward(seed)")
    pairs = [("weight", layer.weight, w), ("input", xt, xtorch)] + ([("bias", layer.bias, b)] if b is not None else [])
    for name, mine, theirs in pairs:
        got = None if mine.grad is None else np.asarray(mine.grad.array)
        if got is None or not close(got, theirs.grad.numpy(), AGAINST_TORCH):
            raise CheckFailure(ex, f"{shown}: the gradient for the {name} differs from torch's F.linear: expected "
                                   f"{fmt(theirs.grad.numpy())}, received {fmt(got)}.")


# ------------------------------------------------------------------------------------------------ sequential

RELU_IDENTITY = causes.declare("sequential/relu-returns-input", "ReLU's forward returns its input unchanged")
LAYERS_NOT_REGISTERED = causes.declare("sequential/layers-not-registered", "the layers kept in a list, not assigned as "
                                       "attributes, so Module sees no sub-modules and no parameters")
LAYER_ORDER = causes.declare("sequential/layers-not-chained", "the layers not applied one after the other, in the "
                             "order given, each to the previous one's output")


@exercise("sequential", builds_on=("linear",))
def check_sequential(Sequential, ReLU, Linear, Tensor) -> None:
    ex = "sequential"
    relu = call_learner(ex, ReLU, shown_input="ReLU()")
    x = np.array([-2.0, 0.0, 3.0])
    run_probes(ex, [Probe("ReLU()(Tensor([-2, 0, 3])).array", lambda: _array_of(relu(Tensor(x.copy()))),
                          np.array([0.0, 0.0, 3.0]),
                          (Slip(x, "ReLU returned its input unchanged: its forward is x.relu().", RELU_IDENTITY),),
                          tolerance=SAME_ARITHMETIC)])
    if call_learner(ex, relu.parameters, shown_input="ReLU().parameters()") != []:
        raise CheckFailure(ex, "ReLU has no parameters.")
    kit = beside(Tensor, reference_modules)
    kit.seed(4)
    fixed = [(3, 4), "relu", [(4, 5), "relu"], (5, 2)]
    _check_network(ex, Sequential, ReLU, Linear, Tensor, fixed, np.random.default_rng(5).uniform(-1, 1, (7, 3)),
                   np.random.default_rng(6).uniform(-1, 1, (7, 2)))
    # Then networks drawn from the case seed: 2 to 4 Linear layers of drawn widths, each followed by a ReLU or not,
    # some of them in a nested Sequential, on drawn rows: a Sequential that knows the fixed network (a ReLU between
    # every two layers, wherever the ReLU modules are) does not know these.
    drawn = case_rng(ex)
    for _ in range(DRAWN_NETWORKS):
        widths = [int(n) for n in drawn.integers(1, 6, size=drawn.integers(3, 6))]
        layers = []
        for pair in zip(widths, widths[1:]):
            layers += [pair, "relu"] if drawn.random() < 0.5 else [pair]
        start = int(drawn.integers(len(layers)))
        end = int(drawn.integers(start + 1, len(layers) + 1))
        layers[start:end] = [layers[start:end]]
        kit.seed(int(drawn.integers(2 ** 31)))
        batch = int(drawn.integers(1, 9))
        _check_network(ex, Sequential, ReLU, Linear, Tensor, layers, drawn.uniform(-1, 1, (batch, widths[0])),
                       drawn.uniform(-1, 1, (batch, widths[-1])))


DRAWN_NETWORKS = 2


def _check_network(ex, Sequential, ReLU, Linear, Tensor, layers, x, seed):
    """A Sequential of the learner's classes built from ``layers`` ((in, out) for a Linear, "relu" for a ReLU, a list
    for a nested Sequential): its parameters, its output on rows ``x`` against the layers applied in order, and its
    gradients for the upstream gradient ``seed`` against torch's for the same network."""
    model, flat = _built(Sequential, ReLU, Linear, layers)
    shown = _spelled(layers)
    linears = [layer for layer in flat if not isinstance(layer, str)]  # a learner's object is never compared
    expected = [p for layer in linears for p in (layer.weight, layer.bias)]
    got = call_learner(ex, model.parameters, shown_input="model.parameters()")
    if sorted(_ids(got)) != sorted(_ids(expected)):
        raise CheckFailure(ex, f"{shown} has {len(expected)} parameters (two per Linear, nested ones included); "
                               f"parameters() gave {len(got)}. Register each layer as a sub-module by assigning it as "
                               "an attribute (setattr), so Module.__setattr__ sees it.", cause_id=LAYERS_NOT_REGISTERED)
    out = call_learner(ex, model, Tensor(x), shown_input=f"model(x of shape {x.shape})")
    h = x
    for layer in flat:
        h = np.maximum(h, 0) if isinstance(layer, str) else \
            h @ np.asarray(layer.weight.array).T + np.asarray(layer.bias.array)
    if not hasattr(out, "array") or not close(out.array, h, AGAINST_TORCH):
        raise CheckFailure(ex, f"the output of {shown} differs from applying its layers one after the other, in the "
                               "order given: the forward pass must feed each layer's output to the next.",
                           cause_id=LAYER_ORDER)
    call_learner(ex, out.backward, Tensor(seed), shown_input="model(x).backward(seed)")
    weights = [torch.tensor(np.asarray(p.array), requires_grad=True) for p in expected]
    h, params = torch.tensor(x), iter(weights)
    for layer in flat:
        h = torch.relu(h) if isinstance(layer, str) else torch.nn.functional.linear(h, next(params), next(params))
    backward_with_seed(h, seed)
    for p, t in zip(expected, weights):
        if p.grad is None or not close(p.grad.array, t.grad.numpy(), AGAINST_TORCH):
            raise CheckFailure(ex, f"the parameters' gradients after model(x).backward(seed) for {shown} differ from "
                                   "torch's for the same network: every layer, ReLU included, must build its output "
                                   "with Tensor operations (x.relu(), linear(...)), so the graph reaches the weights.")


def _built(Sequential, ReLU, Linear, layers):
    """The learner's Sequential of ``layers`` (see _check_network), and its Linear layers and "relu"s in order."""
    made, flat = [], []
    for layer in layers:
        if layer == "relu":
            made.append(ReLU())
            flat.append("relu")
        elif isinstance(layer, list):
            inner, inner_flat = _built(Sequential, ReLU, Linear, layer)
            made.append(inner)
            flat += inner_flat
        else:
            made.append(Linear(*layer))
            flat.append(made[-1])
    return Sequential(*made), flat


def _spelled(layers) -> str:
    """``layers`` (see _check_network) as the Python that builds them."""
    return "Sequential(" + ", ".join("ReLU()" if layer == "relu" else _spelled(layer) if isinstance(layer, list)
                                     else f"Linear{layer}" for layer in layers) + ")"


# ------------------------------------------------------------------------------------------------ cross_entropy

def _torch_cross_entropy(logits, labels, seed):
    z = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(z, torch.tensor(labels), reduction="none")
    backward_with_seed(loss, seed)
    return loss.detach().numpy(), z.grad.numpy()


@exercise("cross_entropy")
def check_cross_entropy(cross_entropy, Tensor) -> None:
    ex = "cross_entropy"

    def run(logits, labels, seed=None):
        logits, labels = np.array(logits, dtype=np.float64), np.array(labels)
        seed = np.ones(len(labels)) if seed is None else seed
        z = Tensor(logits.copy(), requires_grad=True)
        shown = f"cross_entropy(logits={fmt(logits)}, labels={labels.tolist()})"
        loss = call_learner(ex, cross_entropy, z, labels.copy(), shown_input=shown)
        if not hasattr(loss, "array") or np.shape(loss.array) != labels.shape:
            raise CheckFailure(ex, f"{shown} should return a Tensor of shape {labels.shape}, one loss per example "
                                   f"(the training loop takes the mean); got {described(loss)}.", cause_id=causes.WRONG_SHAPE)
        call_learner(ex, loss.backward, Tensor(seed), shown_input=f"{shown}.backward()")
        grad = None if z.grad is None else np.asarray(z.grad.array)
        return shown, np.asarray(loss.array), grad, *_torch_cross_entropy(logits, labels, seed)

    shown, loss, _, want, _ = run([[1000.0, 1001.0]], [0])
    if not np.all(np.isfinite(loss)):
        raise CheckFailure(ex, f"{shown} gave {fmt(loss)}: e^1000 overflows to inf. Subtract each row's maximum before "
                               f"exp(); the loss does not change. Expected {fmt(want)}.", cause_id=NO_SHIFT)
    shown, loss, _, want, _ = run([[0.0, 1.0], [1000.0, 1001.0]], [0, 0])
    if not np.isfinite(loss[1]):  # row 1 shifted by [1, 1001] column by column: e^(1000 - 1) overflows
        raise CheckFailure(ex, f"{shown} gave {fmt(loss)}: {NO_KEEPDIMS} Here the second row became "
                               f"[1000 - 1, 1001 - 1001] = [999, 0] and e^999 overflows. Expected {fmt(want)}.",
                           cause_id=SHIFT_NO_KEEPDIMS)
    if not np.isfinite(loss[0]):
        raise CheckFailure(ex, f"{shown} gave {fmt(loss)}: shifting by the maximum of the whole batch (1001) pushes "
                               "the first row to e^-1000, which underflows to 0, and log(0) = -inf. Shift each row by "
                               f"its own maximum (max over axis 1, keepdims=True). Expected {fmt(want)}.",
                           cause_id=BATCH_MAX)
    # A row whose true logit is 1000 below the other: log(softmax) fails here, before any other case shows it
    _run_cross_entropy_probes(ex, cross_entropy, Tensor, [(np.array([[0.0, 1000.0]]), np.array([0]), np.ones(1))])
    shown, loss, _, want, _ = run([[0.0, 2000.0], [-3000.0, 5.0]], [1, 0])
    if not np.all(np.isfinite(loss)):
        raise CheckFailure(ex, f"{shown} gave {fmt(loss)}: some exp() overflowed. Shift each row by its maximum, which "
                               "makes the largest exponent exactly 0 whatever the spread of the row (a mean or a "
                               f"midpoint does not). Expected {fmt(want)}.", cause_id=OTHER_SHIFT)
    rng = np.random.default_rng(6)
    cases = [(rng.normal(0, 3, (batch, classes)).round(3), rng.integers(0, classes, batch),
              rng.uniform(0.5, 2, batch).round(2)) for batch, classes in ((1, 2), (3, 4), (8, 10), (5, 3))]
    _run_cross_entropy_probes(ex, cross_entropy, Tensor, cases)

    @FEW_RANDOM_CASES
    @given(st.integers(0, 2 ** 16), st.integers(1, 8), st.integers(2, 10))
    def random_case(seed, batch, classes):
        _run_cross_entropy_probes(ex, cross_entropy, Tensor, [_cross_entropy_batch(seed, batch, classes)])

    random_case()


def _cross_entropy_batch(seed: int, batch: int, classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random batch for cross_entropy, drawn from ``seed`` as the fixed ones are: logits (batch, classes) float64
    ~ N(0, 3²) to three decimals, labels (batch,) int64 in [0, classes), an upstream gradient (batch,) float64 in
    [0.5, 2] to two decimals."""
    rng = np.random.default_rng(seed)
    return (rng.normal(0, 3, (batch, classes)).round(3), rng.integers(0, classes, batch),
            rng.uniform(0.5, 2, batch).round(2))


def _run_cross_entropy_probes(ex, cross_entropy, Tensor, cases) -> None:
    """Each case's loss and gradient, against torch; numpy's refusal to broadcast a max without keepdims explained."""
    try:
        run_probes(ex, [probe for case in cases for probe in _cross_entropy_probes(cross_entropy, Tensor, *case)])
    except CheckFailure as failure:
        if isinstance(failure.cause, ValueError) and "broadcast" in str(failure.cause):
            raise CheckFailure(ex, f"{failure.told}\n{NO_KEEPDIMS}", cause_id=SHIFT_NO_KEEPDIMS) from None
        raise

NO_SHIFT = causes.declare("cross_entropy/no-max-shift", "exp() of the raw logits, which overflows: each row not "
                          "shifted by its maximum")
SHIFT_NO_KEEPDIMS = causes.declare("cross_entropy/no-keepdims", "the row maxima subtracted without keepdims, so they "
                                   "line up with the classes axis")
BATCH_MAX = causes.declare("cross_entropy/batch-max-shift", "every row shifted by the whole batch's maximum")
OTHER_SHIFT = causes.declare("cross_entropy/shift-not-row-max", "each row shifted by something other than its "
                             "maximum (a mean, a midpoint)")
NO_KEEPDIMS = ("logits.max(axis=1) has shape (batch,), and subtracting it from (batch, classes) logits lines it up "
               "with the classes axis: row i's maximum is subtracted from column i of every row (and for a batch "
               "whose size differs from the number of classes numpy refuses to broadcast). Keep the axis, "
               "max(axis=1, keepdims=True), so each row is shifted by its own maximum.")
BATCH_AXIS = ("That is a softmax over the batch axis (axis 0): normalise each row over its classes (axis 1), since "
              "every example is its own distribution.")
LOG_OF_SOFTMAX = ("The softmax probability of class 0 is e^-1000, which underflows to 0 before the log sees it. "
                  "Compute log-sum-exp(row) - row[label] directly instead of log(softmax).")
BATCH_AXIS_CAUSE = causes.declare("cross_entropy/softmax-over-batch", "the softmax taken over the batch axis, "
                                  "not over each row's classes")
LOG_OF_SOFTMAX_CAUSE = causes.declare("cross_entropy/log-of-softmax", "log(softmax), which gives log(0) where a "
                                      "probability underflows")


def _cross_entropy_probes(cross_entropy, Tensor, logits, labels, seed) -> list[Probe]:
    """The loss and the gradient of one batch, against torch; the known wrong losses (a softmax over the batch axis,
    log of an underflowed probability) named."""
    want, want_grad = _torch_cross_entropy(logits, labels, seed)
    shown = f"cross_entropy(logits={fmt(logits)}, labels={labels.tolist()})"

    def loss():
        out = cross_entropy(Tensor(logits.copy(), requires_grad=True), labels.copy())
        return getattr(out, "array", out)

    def gradient():
        z = Tensor(logits.copy(), requires_grad=True)
        cross_entropy(z, labels.copy()).backward(Tensor(seed.copy()))
        return None if z.grad is None else z.grad.array

    shifted = logits - logits.max(axis=0, keepdims=True)
    over_batch = -(shifted - np.log(np.exp(shifted).sum(axis=0, keepdims=True)))[np.arange(len(labels)), labels]
    slips = (Slip(over_batch, BATCH_AXIS, BATCH_AXIS_CAUSE),)
    if np.ptp(logits) >= 1000:  # e^-1000 underflows: log(softmax) gives log(0)
        slips += (Slip(np.full(len(labels), np.inf), LOG_OF_SOFTMAX, LOG_OF_SOFTMAX_CAUSE),)
    return [Probe(shown, loss, want, slips),
            Probe(f"{shown}.backward({fmt(seed)}), then logits.grad", gradient, want_grad)]


# ------------------------------------------------------------------------------------------------ sgd

@exercise("sgd")
def check_sgd(SGD, Parameter, Tensor) -> None:
    ex = "sgd"
    rng = np.random.default_rng(7)
    # The fixed probe: lr 0.3, three parameters, the last taking part in no step.
    starts = [rng.normal(size=(3,)), rng.normal(size=(2, 2)), rng.normal(size=(4,))]
    optimizer, mine = _steps_like_torch(ex, SGD, Parameter, Tensor, starts, 0.3, rng, [{2}] * 3, "")
    _check_zero_grad(ex, optimizer.zero_grad, mine, Tensor, "optimizer.zero_grad()")
    # Then an optimizer drawn from the case seed, whose lr, parameters' shapes and steps sat out a step that knows the
    # probe's numbers (lr 0.3 written into step(), say) does not know. Parameter 0 always takes part, so every step
    # moves something.
    drawn = case_rng(ex)
    lr = round(float(drawn.uniform(0.01, 0.9)), 4)
    # Parameter 0 is large (17-40 entries a side): a step that updates only the first few entries fails on it.
    starts = [drawn.normal(size=tuple(drawn.integers(17, 41, size=drawn.integers(1, 3))))]
    starts += [drawn.normal(size=tuple(drawn.integers(1, 5, size=drawn.integers(1, 3))))
               for _ in range(drawn.integers(1, 4))]
    idle = [{n for n in range(1, len(starts)) if drawn.random() < 0.3} for _ in range(drawn.integers(2, 4))]
    _steps_like_torch(ex, SGD, Parameter, Tensor, starts, lr, drawn, idle,
                      f"SGD({len(starts)} parameters of shapes {[s.shape for s in starts]}, lr={lr!r}): ")


def _torch_sgd_step(params: list, lr: float) -> None:
    """What ``torch.optim.SGD(params, lr=lr).step()`` does (no momentum, no weight decay; a parameter whose .grad is
    None is left out), by the functional SGD that the optimizer's step calls (torch/optim/sgd.py): the optimizer's
    constructor imports torch._dynamo, over 1 CPU s on a learner's first SGD check (make bench-checks)."""
    from torch.optim.sgd import sgd  # its module only, not torch.optim.SGD's construction

    live = [t for t in params if t.grad is not None]
    with torch.no_grad():
        sgd(live, [t.grad for t in live], [None] * len(live), weight_decay=0.0, momentum=0.0, lr=lr, dampening=0.0,
            nesterov=False, maximize=False)


def _steps_like_torch(ex, SGD, Parameter, Tensor, starts, lr, rng, idle, setup):
    """One step per entry of ``idle`` (the parameters whose .grad is None in that step) with gradients drawn from
    ``rng``, each compared with torch.optim.SGD's; ``setup`` opens every diagnosis. Returns (optimizer, params)."""
    mine = [Parameter(s.copy()) for s in starts]
    theirs = [torch.tensor(s, requires_grad=True) for s in starts]
    optimizer = call_learner(ex, SGD, mine, lr=lr, shown_input=f"SGD(params, lr={lr!r})")
    for step, resting in enumerate(idle):
        grads = [rng.normal(size=s.shape) for s in starts]
        for n, (p, t, g) in enumerate(zip(mine, theirs, grads)):
            # a parameter with no gradient took no part in this step: it must not move
            p.grad, t.grad = (None, None) if n in resting else (Tensor(g.copy()), torch.tensor(g))
        before = [np.array(p.array) for p in mine]
        # p.detach() shares p's array (notebook 4's engine): it sees the step only if the array itself is updated
        sharing = [call_learner(ex, p.detach, shown_input="p.detach()") for p in mine]
        call_learner(ex, optimizer.step, shown_input=f"{setup}step {step + 1}: optimizer.step()")
        _torch_sgd_step(theirs, lr)
        if all(np.array_equal(b, p.array) for b, p in zip(before, mine)):
            changed = any(p.grad is not None and not np.array_equal(p.grad.array, g) for p, g in zip(mine, grads))
            why = (" The update went into .grad: subtract lr * grad from p.array." if changed else
                   " Update each parameter in place (p.array -= ...): rebinding a loop variable changes nothing.")
            raise CheckFailure(ex, f"{setup}optimizer.step() left every parameter unchanged.{why}",
                               cause_id=INTO_GRAD if changed else REBINDS)
        run_probes(ex, [Probe(f"{setup}parameter {n} after step {step + 1} (expected: torch.optim.SGD's)",
                              lambda p=p: p.array, t.detach().numpy(),
                              () if n in resting else
                              (Slip(b + lr * g, WRONG_WAY, WRONG_WAY_CAUSE), Slip(b - g, NO_LR, NO_LR_CAUSE)),
                              tolerance=SAME_ARITHMETIC, otherwise=(NOT_TAKING_PART, MOVED_IDLE) if n in resting
                              else None)
                        for n, (p, t, b, g) in enumerate(zip(mine, theirs, before, grads))])
        for n, (p, alias) in enumerate(zip(mine, sharing)):
            if not np.array_equal(np.asarray(alias.array), np.asarray(p.array)):
                raise CheckFailure(ex, f"optimizer.step() gave parameter {n} a new array instead of updating its own "
                                       "in place: a p.detach() taken before the step, which shares p's array, still "
                                       "shows the old values. Subtract into the array itself, p.array -= lr * "
                                       "p.grad.array, as the notebook asks (torch's optimizers also update a "
                                       "parameter's storage in place).", cause_id=NOT_IN_PLACE)
        for p in mine:
            if not p.is_leaf or not p.requires_grad:
                raise CheckFailure(ex, "after step() a parameter is no longer a leaf that requires grad: update its "
                                       "array in place under no_grad(), do not replace it with the result of an "
                                       "operation.", cause_id=REPLACED)
    return optimizer, mine


WRONG_WAY = "It moved along the gradient: the rule is p <- p - lr * grad, against it."
NO_LR = "It moved by the whole gradient: the step is lr times the gradient, p <- p - lr * grad."
NOT_TAKING_PART = "A parameter whose .grad is None took no part and stays put."
WRONG_WAY_CAUSE = causes.declare("sgd/steps-up-the-gradient", "p + lr * grad: a step along the gradient")
NO_LR_CAUSE = causes.declare("sgd/no-learning-rate", "p - grad: the step not scaled by lr")
MOVED_IDLE = causes.declare("sgd/moves-parameter-without-grad", "a parameter whose .grad is None moved")
INTO_GRAD = causes.declare("sgd/updates-grad", "the step subtracted from .grad instead of from the parameter")
REBINDS = causes.declare("sgd/rebinds-loop-variable", "p = p - lr * grad: a loop variable rebound, no parameter "
                         "changed")
NOT_IN_PLACE = causes.declare("sgd/not-in-place", "each parameter given a new array instead of its own updated in "
                              "place")
REPLACED = causes.declare("sgd/replaces-parameter", "a parameter left no longer a leaf that requires grad by the "
                          "step (replaced by an operation's result, or its flag changed)")


# ------------------------------------------------------------------------------------------------ training

class _ReferenceModel:
    """A 784-16-10 network on the notebook's given engine (not the learner's modules), to test the training loop alone.

    It knows each training row by its content, so however train_epoch indexes or copies the images, every
    recorded forward pass logs which rows it saw; and it knows each row's label, to compute the gradient that
    optimizer.step() should find: that of the mean cross-entropy of the current batch. It stays on the checking
    side under trusted grading: the learner's train_epoch calls it (autograder.trust.remote's trusted objects), so what
    it records cannot be forged. The parameters' values are kept here too (``current``, moved only by
    _SpyOptimizer): the expected gradients and losses never depend on what the learner's process reports.
    """

    __remote_methods__ = ("parameters", "zero_grad")

    def __init__(self, Tensor, images, labels, seed):
        rng = np.random.default_rng(seed)
        self.Tensor, self.labels = Tensor, labels
        self.initial = [rng.uniform(-0.036, 0.036, (784, 16)), np.zeros(16), rng.uniform(-0.25, 0.25, (16, 10)),
                        np.zeros(10)]
        self.current = [array.copy() for array in self.initial]
        self.params = [Tensor(array.copy(), requires_grad=True) for array in self.initial]
        self.images = np.array(images, dtype=np.float64)
        self.row_of = {row.tobytes(): n for n, row in enumerate(self.images)}
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
                self.foreign_rows = True  # the check says so once train_epoch returns (a learner may catch this)
                raise ValueError("the model received rows that are not rows of the images")
            self.batches.append(rows)
        return out

    def batch_loss(self, rows, gradients=False):
        """The mean cross-entropy over ``rows`` at the current parameters, by torch; with its gradients if asked."""
        tensors = [torch.tensor(array, requires_grad=gradients) for array in self.current]
        logits = torch.relu(torch.tensor(self.images[rows]) @ tensors[0] + tensors[1]) @ tensors[2] + tensors[3]
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(self.labels[rows]))
        if not gradients:
            return loss.item()
        loss.backward()
        return loss.item(), [t.grad.numpy() for t in tensors]


class _SpyOptimizer:
    """Plain SGD that, at every step, checks the gradients are those of the current batch's mean loss, and notes
    that loss before the step (what train_epoch should report for the batch) and after it (a known slip)."""

    __remote_methods__ = ("zero_grad", "step")

    def __init__(self, model, lr):
        self.model, self.lr, self.steps, self.problems, self.previous = model, lr, 0, [], None
        self.losses_before, self.losses_after, self.sizes = [], [], []

    def zero_grad(self):
        self.model.zero_grad()

    def step(self):
        self.steps += 1
        params = self.model.params
        found = [None if p.grad is None else np.asarray(p.grad.array, dtype=np.float64) for p in params]
        if not self.model.batches or any(g is None for g in found):
            self.problems.append("missing")
        else:
            rows = self.model.batches[-1]
            loss, want = self.model.batch_loss(rows, gradients=True)
            if not all(close(g, w, NETWORK_GRADIENTS) for g, w in zip(found, want)):
                if self.previous is not None and all(close(g, w + v, NETWORK_GRADIENTS)
                                                     for g, w, v in zip(found, want, self.previous)):
                    self.problems.append("accumulated")
                elif all(close(g, len(rows) * w, NETWORK_GRADIENTS) for g, w in zip(found, want)):
                    self.problems.append("sum")
                else:
                    self.problems.append("different")
            for array, w in zip(self.model.current, want):
                array -= self.lr * w
            self.losses_before.append(loss)
            self.sizes.append(len(rows))
            self.losses_after.append(self.model.batch_loss(rows))
            for p, array in zip(params, self.model.current):
                p.array = array.copy()
        self.previous = found


# What _SpyOptimizer finds at a step, by its name there: the cause, and what the learner is told.
PROTOCOL_CAUSES = {
    "missing": causes.declare("training/zero-grad-before-step", "the gradients cleared between backward() and "
                              "step(), or backward() not run on the batch's loss"),
    "accumulated": causes.declare("training/no-zero-grad", "the gradients not cleared once per batch, so each step "
                                  "adds the previous batches' gradients"),
    "sum": causes.declare("training/sum-for-mean", "the batch's summed loss differentiated, not its mean"),
    "different": causes.MISMATCH,
}
PROTOCOL_PROBLEMS = {
    "missing": "optimizer.step() found no gradients: call optimizer.zero_grad() before loss.backward() (or after "
               "step()), never between backward() and step(), and run backward() on the batch's loss.",
    "accumulated": "at optimizer.step() the gradients held the previous batch's too: .grad accumulates, so clear the "
                   "gradients once per batch (optimizer.zero_grad()) before backward().",
    "sum": "at optimizer.step() the gradients were batch_size times too large: the loss to differentiate is the mean "
           "of cross_entropy over the batch, not its sum (a sum makes the step size grow with the batch).",
    "different": "at optimizer.step() the gradients differ from those of the mean cross-entropy of the batch the model "
                 "just saw. If cross_entropy passes its own test, check that the loss is "
                 "cross_entropy(model(Tensor(images[batch])), labels[batch]).mean() and that backward() runs on it.",
}


@exercise("training", builds_on=("sequential", "cross_entropy", "sgd"))
def check_training(train_epoch, accuracy, Sequential, Linear, ReLU, SGD, Tensor) -> None:
    ex = "training"
    from labtools.datasets import load_mnist  # labtools loads matplotlib and widgets: only this check needs it

    kit = beside(Tensor, reference_modules)
    rng = np.random.default_rng(11)
    images, labels = rng.random((200, 784)), rng.integers(0, 10, 200)  # random rows: each one unique
    model = _ReferenceModel(Tensor, images, labels, seed=8)
    optimizer = _SpyOptimizer(model, 0.1)
    shown = "train_epoch(model, optimizer, 200 images, labels, batch_size=64, rng)"
    epoch_rng = kit.generator(9)
    losses = call_learner(ex, train_epoch, model, optimizer, images, labels, 64, epoch_rng, shown_input=shown)
    if model.foreign_rows:
        raise CheckFailure(ex, "the model received rows that are not rows of the images: pass Tensor(images[batch]), "
                               "the rows unchanged.")
    if not isinstance(losses, list) or len(losses) != 4:
        raise CheckFailure(ex, f"{shown} should return a list of 4 losses (batches of 64, 64, 64 and 8), "
                               f"got {described(losses)}.", cause_id=causes.WRONG_TYPE)
    if not all(isinstance(v, float) and math.isfinite(v) for v in losses):
        raise CheckFailure(ex, f"{shown} should return plain finite floats (loss.item()), got {described(losses)}.",
                           cause_id=causes.WRONG_TYPE)
    if optimizer.steps != 4:
        raise CheckFailure(ex, f"{shown}: optimizer.step() ran {optimizer.steps} times; once per batch makes 4.",
                           cause_id=STEPS)
    if optimizer.problems:
        problem = optimizer.problems[0]
        raise CheckFailure(ex, f"{shown}: {PROTOCOL_PROBLEMS[problem]}", cause_id=PROTOCOL_CAUSES[problem])
    run_probes(ex, [_losses_probe(shown, losses, optimizer)])
    first = model.batches
    _check_visits(ex, first, len(labels), shown)
    model.batches = []
    call_learner(ex, train_epoch, model, optimizer, images, labels, 64, epoch_rng,
                 shown_input=f"a second epoch: {shown}")
    if sorted(map(sorted, model.batches)) == sorted(map(sorted, first)):
        raise CheckFailure(ex, "the second epoch (same rng object) made the same batches as the first: shuffle with "
                               "the rng you are given, drawing a new permutation every epoch (rng.permutation).",
                           cause_id=NOT_SHUFFLED)
    replay = _ReferenceModel(Tensor, images, labels, seed=8)
    call_learner(ex, train_epoch, replay, _SpyOptimizer(replay, 0.1), images, labels, 64, kit.generator(9),
                 shown_input=f"{shown} with a new rng of the same seed")
    if replay.batches != first:
        raise CheckFailure(ex, "a new rng with the same seed gave a different order: shuffle with the rng argument "
                               "(rng.permutation), not np.random or a generator of your own, so runs are reproducible.",
                           cause_id=OWN_RNG)

    data = load_mnist(verbose=False)
    # Two untrained networks whose accuracies differ from each other and from every label's share (asserted in the
    # tests): an accuracy() that never looks at the model cannot match both. Then one drawn from the case seed, on
    # 300 digits drawn too: an accuracy() that knows the two by heart does not know it.
    drawn = case_rng("training")
    rows = np.sort(drawn.choice(len(data.test_labels), 300, replace=False))
    for seed, chosen in [(s, slice(0, 300)) for s in ACCURACY_SEEDS] + [(int(drawn.integers(100, 2 ** 31)), rows)]:
        images, labels = data.test_images[chosen], data.test_labels[chosen]
        evaluated = _ReferenceModel(Tensor, images, labels, seed=seed)
        got = call_learner(ex, accuracy, evaluated, images, labels, shown_input="accuracy(model, 300 images, labels)")
        want = reference_accuracy(evaluated.initial, images, labels)
        if isinstance(got, bool) or not isinstance(got, (float, np.floating)) or not close(got, want, SAME_ARITHMETIC):
            raise CheckFailure(ex, f"accuracy(...) should be the fraction {want} (a float in [0, 1]) of rows whose "
                                   f"largest logit is the true label; got {described(got)}.")
        if any(evaluated.recorded):
            raise CheckFailure(ex, "accuracy() recorded a graph: evaluate inside `with no_grad():`, since nothing "
                                   "will be differentiated.", cause_id=ACCURACY_GRAPH)
    _check_learning(ex, (train_epoch, Sequential, Linear, ReLU, SGD), kit, data)


VISITS = causes.declare("training/rows-not-once-per-epoch", "an epoch that skips or repeats rows")
BATCHING = causes.declare("training/wrong-batches", "batches not of batch_size rows, the last one holding the rest")
NOT_SHUFFLED = causes.declare("training/not-shuffled", "the rows visited in their stored order, or the same order "
                              "every epoch")
OWN_RNG = causes.declare("training/ignores-rng", "a shuffle not drawn from the rng argument, so not reproducible")
STEPS = causes.declare("training/not-one-step-per-batch", "optimizer.step() not called exactly once per batch")
ACCURACY_GRAPH = causes.declare("training/accuracy-records-graph", "accuracy() evaluated outside no_grad()")
LOSS_SUMS = causes.declare("training/losses-summed", "each batch's summed loss reported, not its mean")
LOSS_AFTER = causes.declare("training/losses-after-step", "each loss computed after optimizer.step()")
LOSS_RUNNING = causes.declare("training/running-mean", "a running mean over the epoch reported, not each batch's loss")
LOSS_SIZES = causes.declare("training/batch-sizes", "the batch sizes reported instead of the losses")


def _losses_probe(shown, losses, optimizer) -> Probe:
    """train_epoch's list against the mean cross-entropy of each batch at the parameters before its step, computed
    here by torch from the rows the model saw; the usual wrong lists named."""
    want, sizes = np.array(optimizer.losses_before), np.array(optimizer.sizes, dtype=np.float64)
    return Probe(f"the losses returned by {shown}", lambda: losses, want, (
        Slip(want * sizes, "Those are the sums of each batch's losses: report the mean, the loss you called "
                           "backward() on (loss.item()).", LOSS_SUMS),
        Slip(np.array(optimizer.losses_after), "Those are the losses after optimizer.step() moved the parameters: "
                                               "report loss.item() of the loss you called backward() on, computed "
                                               "before the step.", LOSS_AFTER),
        Slip(np.cumsum(want) / np.arange(1, len(want) + 1), "That is a running mean over the epoch: report each "
                                                             "batch's own loss, one entry per batch.", LOSS_RUNNING),
        Slip(sizes, "Those are the batch sizes: report each batch's loss, loss.item().", LOSS_SIZES),
    ))


ACCURACY_SEEDS = (9, 12)


def reference_accuracy(params, images, labels) -> float:
    """Accuracy of _ReferenceModel's network with the given weights (784-16-10, x @ w + b)."""
    w1, b1, w2, b2 = params
    logits = np.maximum(images @ w1 + b1, 0) @ w2 + b2
    return float(np.mean(logits.argmax(axis=1) == labels))


def _test_accuracy(ex, model, data, shown) -> float:
    """The trained model's accuracy on the first test digits, computed here from its weights (torch.nn.Linear's
    layout), not by the learner's accuracy(): a number the learner's code reports is not evidence of learning."""
    params = call_learner(ex, model.parameters, shown_input=f"model.parameters() after {shown}")
    arrays = [np.asarray(p.array, dtype=np.float64) for p in params] if isinstance(params, list) else []
    shapes = [(64, 784), (64,), (10, 64), (10,)]
    if [a.shape for a in arrays] != shapes:
        raise CheckFailure(ex, f"after {shown}, model.parameters() gave shapes {[a.shape for a in arrays]}; expected "
                               f"{shapes} (weight, bias of each Linear, in order).", cause_id=causes.WRONG_SHAPE)
    w1, b1, w2, b2 = arrays
    images = data.test_images[:TRAINING_TEST_SLICE]
    logits = np.maximum(images @ w1.T + b1, 0) @ w2.T + b2
    return float(np.mean(logits.argmax(axis=1) == data.test_labels[:TRAINING_TEST_SLICE]))


def _check_visits(ex, batches, n, shown):
    rows = [row for batch in batches for row in batch]
    if sorted(rows) != list(range(n)):
        raise CheckFailure(ex, f"{shown} should show the model every row exactly once per epoch; its training forward "
                               f"passes saw {len(rows)} rows, {len(set(rows))} of them distinct.", cause_id=VISITS)
    if [len(batch) for batch in batches] != [64, 64, 64, 8]:
        raise CheckFailure(ex, f"{shown} made batches of {[len(b) for b in batches]} rows: take batch_size rows at a "
                               "time, the last batch holding what is left.", cause_id=BATCHING)
    if rows == list(range(n)) or rows == list(range(n))[::-1]:
        raise CheckFailure(ex, f"{shown} visited the rows in their stored order: shuffle them each epoch "
                               "(rng.permutation), or every epoch sees the same batches in the same order.",
                           cause_id=NOT_SHUFFLED)


def _check_learning(ex, classes, kit, data):
    train_epoch, Sequential, Linear, ReLU, SGD = classes
    shown = (f"training Sequential(Linear(784, 64), ReLU(), Linear(64, 10)) with your SGD (lr {TRAINING_LR}) for "
             f"{TRAINING_EPOCHS} epochs on {TRAINING_SLICE:,} digits, batch 32")
    kit.seed(0)
    model = call_learner(ex, lambda: Sequential(Linear(784, 64), ReLU(), Linear(64, 10)), shown_input=shown)
    optimizer = call_learner(ex, SGD, model.parameters(), lr=TRAINING_LR, shown_input=shown)
    rng = kit.generator(0)
    for _ in range(TRAINING_EPOCHS):
        call_learner(ex, train_epoch, model, optimizer, data.train_images[:TRAINING_SLICE],
                     data.train_labels[:TRAINING_SLICE], 32, rng, shown_input=shown)
    reached = _test_accuracy(ex, model, data, shown)
    if not reached >= TRAINING_FLOOR:
        raise CheckFailure(ex, f"{shown} reached a test accuracy of {reached:.1%} on {TRAINING_TEST_SLICE} digits; a "
                               f"correct pipeline gets about 87%, and the test asks for {TRAINING_FLOOR:.0%}. "
                               "Something upstream is off: if Module, Linear, Sequential, cross_entropy and SGD pass "
                               "their own tests, look at how train_epoch puts them together.")
