"""Notebook 4, recording the graph: ``apply_op`` with ``no_grad``, and the Tensor operators built on it."""
from __future__ import annotations

import numpy as np
import torch
from hypothesis import given

from autograder.checks import causes
from autograder.checks.registry import exercise
from autograder.checks.harness.oracles import backward_with_seed
from autograder.checks.harness.random_programs import TENSOR, programs
from autograder.checks.reference.engine import REFERENCE_RULES
from autograder.checks.tensor_engine.programs import LONG_PROGRAMS, reference_gradients, run_both
from autograder.checks.harness.diagnostics import RANDOM_CASES, CheckFailure, call_learner, case_rng, close, described, fmt


FORWARD_GETS_TENSORS = causes.declare("apply_op/forward-given-tensors", "forward called with the Tensors, not their "
                                      "arrays")
NOT_RECORDED = causes.declare("apply_op/not-recorded", "a result whose inputs require grad recorded no Recipe (or "
                              "does not require grad)")
INPUTS_NOT_KEPT = causes.declare("apply_op/inputs-not-kept", "recipe.inputs not the inputs themselves, in order "
                                 "(arrays, or numbers wrapped)")
RECIPE_FIELDS = causes.declare("apply_op/recipe-fields", "recipe.backwards or recipe.kwargs not what apply_op was "
                               "given, or not of the Recipe's types")
RECORDS_DATA = causes.declare("apply_op/records-data", "a computation on data alone recorded as a graph")
KWARGS_LOST = causes.declare("apply_op/kwargs-not-passed", "the keyword arguments not passed to forward or not kept "
                             "in recipe.kwargs")
OWN_FLAG = causes.declare("apply_op/grad-mode-not-read", "recording switched by a flag of its own, not "
                          "GradMode.enabled")
RECORDS_IN_NO_GRAD = causes.declare("no_grad/records-inside", "apply_op recording inside `with no_grad():`")
NOT_RESTORED = causes.declare("no_grad/mode-not-restored", "no_grad() not restoring the mode that was on before it "
                              "(nested blocks, or when the block raises)")
SWALLOWS = causes.declare("no_grad/swallows-exceptions", "no_grad's __exit__ swallowing the block's exception")


@exercise("apply_op")
def check_apply_op(apply_op, no_grad, Tensor, GradMode) -> None:
    ex = "apply_op"
    multiply = REFERENCE_RULES["multiply"][1]

    def forward(a, b):
        if isinstance(a, Tensor) or isinstance(b, Tensor):
            raise CheckFailure(ex, "forward received a Tensor: pass it the arrays (x.array), since numpy functions "
                                   "know nothing about Tensors.", cause_id=FORWARD_GETS_TENSORS)
        return np.multiply(a, b)

    x, y = Tensor(np.array([1.0, 2.0]), requires_grad=True), Tensor(np.array([3.0, 4.0]))
    shown = "apply_op(np.multiply, (multiply_back0, multiply_back1), x, y) with x requiring grad"
    out = call_learner(ex, apply_op, forward, multiply, x, y, shown_input=shown)
    _expect_tensor(ex, Tensor, out, np.array([3.0, 8.0]), shown)
    if not out.requires_grad or out.recipe is None:
        raise CheckFailure(ex, f"{shown}: the result should require grad and carry a Recipe, since x requires grad.",
                           cause_id=NOT_RECORDED)
    recipe = out.recipe
    if len(recipe.inputs) != 2 or recipe.inputs[0] is not x or recipe.inputs[1] is not y:
        raise CheckFailure(ex, f"{shown}: recipe.inputs should be the inputs themselves, (x, y), in order (the "
                               "Tensors, not their arrays: backprop must reach the input tensors).",
                           cause_id=INPUTS_NOT_KEPT)
    if type(recipe.inputs) is not tuple or type(recipe.backwards) is not tuple:
        raise CheckFailure(ex, f"{shown}: recipe.inputs and recipe.backwards should be tuples, as Recipe declares "
                               f"(got {type(recipe.inputs).__name__} and {type(recipe.backwards).__name__}): "
                               "tuple(...) them.", cause_id=RECIPE_FIELDS)
    if tuple(recipe.backwards) != tuple(multiply) or dict(recipe.kwargs) != {}:
        raise CheckFailure(ex, f"{shown}: recipe.backwards should be the backward functions given, in order, and "
                               "recipe.kwargs the keyword arguments ({} here); "
                               f"got {described(recipe.backwards)}, {described(recipe.kwargs)}.", cause_id=RECIPE_FIELDS)
    if out.grad is not None:
        raise CheckFailure(ex, "a new tensor's .grad should be None until backprop fills it.", cause_id=causes.MISMATCH)

    plain = call_learner(ex, apply_op, np.multiply, multiply, y, 2.0,
                         shown_input="apply_op(..., y, 2.0) with y data only")
    _expect_tensor(ex, Tensor, plain, np.array([6.0, 8.0]), "y * 2.0")
    if plain.requires_grad or plain.recipe is not None:
        raise CheckFailure(ex, "no input requires grad, so nothing should be recorded (requires_grad False, recipe "
                               "None): torch builds no graph for computations on data alone.", cause_id=RECORDS_DATA)
    scaled = call_learner(ex, apply_op, np.multiply, multiply, 2.0, x, shown_input="apply_op(..., 2.0, x)")
    _expect_tensor(ex, Tensor, scaled, np.array([2.0, 4.0]), "2.0 * x")
    if scaled.recipe is None or tuple(scaled.recipe.inputs) != (2.0, x):
        raise CheckFailure(ex, "2.0 * x should record inputs (2.0, x): plain numbers are inputs too, left as they are.",
                           cause_id=INPUTS_NOT_KEPT)

    def summing(a, dim=None, keepdim=None):
        if keepdim is None:
            raise CheckFailure(ex, "forward did not receive the keyword arguments: call forward(*arrays, **kwargs).",
                               cause_id=KWARGS_LOST)
        return np.sum(a, axis=dim, keepdims=keepdim)

    m = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    shown = "apply_op(summing, (sum_back,), m, dim=0, keepdim=True)"
    total = call_learner(ex, apply_op, summing, REFERENCE_RULES["sum"][1], m, dim=0, keepdim=True, shown_input=shown)
    _expect_tensor(ex, Tensor, total, np.array([[3.0, 5.0, 7.0]]), shown)
    if total.recipe is None or dict(total.recipe.kwargs) != {"dim": 0, "keepdim": True}:
        raise CheckFailure(ex, f"{shown}: pass the keyword arguments to forward and keep them in recipe.kwargs, so the "
                               "backward functions receive them too.", cause_id=KWARGS_LOST)
    _check_no_grad(ex, apply_op, no_grad, multiply, x, y)
    _check_grad_mode_is_the_switch(ex, apply_op, no_grad, GradMode, multiply, x, y)
    drawn = case_rng(ex)
    for _ in range(DRAWN_CALLS):
        _check_drawn_call(ex, apply_op, Tensor, drawn)


DRAWN_CALLS = 6  # each has a Tensor that requires grad after one that does not with probability about 1/2
# Backward functions to hand a drawn call, one per input: apply_op only keeps them, so any distinct functions do.
_SOME_BACKWARDS = tuple(back for _, backs in REFERENCE_RULES.values() for back in backs)


def _check_drawn_call(ex, apply_op, Tensor, drawn):
    """One call drawn from the case seed: 2 to 4 inputs in a random order, at least one Tensor that requires grad
    and one that does not, the others either or plain numbers, arrays of a random shape, a random keyword argument;
    what the fixed probes alone would let an apply_op that knows their inputs (or looks at the first Tensor alone)
    get right."""
    shape = tuple(int(n) for n in drawn.integers(1, 4, size=drawn.integers(1, 3)))
    kinds = ["grad", "data", *drawn.choice(["grad", "data", "number"], size=drawn.integers(0, 3))]
    kinds = [kinds[n] for n in drawn.permutation(len(kinds))]
    inputs = [round(float(drawn.normal()), 3) if kind == "number" else
              Tensor(drawn.normal(size=shape), requires_grad=kind == "grad") for kind in kinds]
    arrays = [x if kind == "number" else np.array(x.array) for x, kind in zip(inputs, kinds)]
    scale, backwards = round(float(drawn.uniform(0.5, 2.0)), 3), _SOME_BACKWARDS[:len(inputs)]

    def forward(*given, scale):
        if any(isinstance(a, Tensor) for a in given):
            raise CheckFailure(ex, "forward received a Tensor: pass it the arrays (x.array), since numpy functions "
                                   "know nothing about Tensors.", cause_id=FORWARD_GETS_TENSORS)
        return scale * np.prod(np.broadcast_arrays(*given), axis=0)

    shown = (f"apply_op(forward, backwards, {', '.join(_describe(x, kind) for x, kind in zip(inputs, kinds))}, "
             f"scale={scale}), arrays of shape {shape}")
    out = call_learner(ex, apply_op, forward, backwards, *inputs, scale=scale, shown_input=shown)
    _expect_tensor(ex, Tensor, out, forward(*arrays, scale=scale), shown)
    if not out.requires_grad or out.recipe is None:
        raise CheckFailure(ex, f"{shown}: the result should require grad and carry a Recipe, since some input "
                               "requires grad: record when any Tensor among the inputs does, wherever it stands.",
                           cause_id=NOT_RECORDED)
    recipe = out.recipe
    kept = tuple(recipe.inputs)
    if len(kept) != len(inputs) or not all(got is x if kind != "number" else got == x
                                           for got, x, kind in zip(kept, inputs, kinds)):
        raise CheckFailure(ex, f"{shown}: recipe.inputs should be the inputs themselves, in order: Tensors as "
                               "Tensors, numbers as they are.", cause_id=INPUTS_NOT_KEPT)
    if tuple(recipe.backwards) != backwards or dict(recipe.kwargs) != {"scale": scale}:
        raise CheckFailure(ex, f"{shown}: recipe.backwards should be the backward functions given, in order, and "
                               "recipe.kwargs the keyword arguments ({'scale': ...}).", cause_id=RECIPE_FIELDS)
    if out.grad is not None:
        raise CheckFailure(ex, "a new tensor's .grad should be None until backprop fills it.", cause_id=causes.MISMATCH)


def _describe(x, kind) -> str:
    return {"grad": "a Tensor requiring grad", "data": "a data Tensor"}.get(kind, repr(x))


def _check_grad_mode_is_the_switch(ex, apply_op, no_grad, GradMode, rules, x, y):
    """GradMode.enabled is the one switch, as the notebook says: no_grad() turns it off and back on, and apply_op
    obeys it whoever set it (other code, such as notebook 5's checkpointing, sets it directly)."""
    seen = []
    _in_block(ex, no_grad, lambda: seen.append(GradMode.enabled))
    if seen != [False] or GradMode.enabled is not True:
        raise CheckFailure(ex, "GradMode.enabled should be False inside `with no_grad():` and True again after it; it "
                               f"was {seen[0] if seen else '?'!r} inside and {GradMode.enabled!r} after. no_grad must "
                               "switch GradMode.enabled itself, not a flag of its own.", cause_id=OWN_FLAG)
    GradMode.enabled = False
    try:
        out = call_learner(ex, apply_op, np.multiply, rules, x, y, shown_input="GradMode.enabled = False; "
                                                                                "apply_op(np.multiply, ..., x, y)")
    finally:
        GradMode.enabled = True
    if out.requires_grad or out.recipe is not None:
        raise CheckFailure(ex, "with GradMode.enabled = False, apply_op still recorded: read GradMode.enabled, the "
                               "switch no_grad() turns, rather than a flag of your own.", cause_id=OWN_FLAG)


def _expect_tensor(ex, Tensor, out, expected, shown):
    if not isinstance(out, Tensor):
        raise CheckFailure(ex, f"{shown} returned {type(out).__name__}; return a Tensor wrapping forward's result.",
                           cause_id=causes.WRONG_TYPE)
    if not np.array_equal(np.asarray(out.array), expected) or np.asarray(out.array).shape != expected.shape:
        raise CheckFailure(ex, f"{shown}: expected an array {fmt(expected)}, received {fmt(np.asarray(out.array))}.")


def _in_block(ex, no_grad, body, error: BaseException | None = None):
    """Run body() inside the learner's ``with no_grad():``, every learner call guarded; ``error`` ends the block."""
    manager = call_learner(ex, no_grad, shown_input="no_grad()")
    call_learner(ex, manager.__enter__, shown_input="entering `with no_grad():`")
    result = body()
    exc_info = (type(error), error, None) if error is not None else (None, None, None)
    if call_learner(ex, manager.__exit__, *exc_info, shown_input="leaving `with no_grad():`") and error is not None:
        raise CheckFailure(ex, "an exception raised inside `with no_grad():` was swallowed: no_grad must restore the "
                               "mode and let the exception go on (do not catch it, and do not return True from "
                               "__exit__).", cause_id=SWALLOWS)
    return result


def _check_no_grad(ex, apply_op, no_grad, rules, x, y):
    def recorded():
        out = call_learner(ex, apply_op, np.multiply, rules, x, y, shown_input="apply_op(np.multiply, ..., x, y)")
        return out.requires_grad or out.recipe is not None

    def outer():
        if recorded():
            raise CheckFailure(ex, "inside `with no_grad():` nothing should be recorded: apply_op must read "
                                   "GradMode.enabled and give results requires_grad=False and no recipe.",
                               cause_id=RECORDS_IN_NO_GRAD)
        _in_block(ex, no_grad, lambda: None)
        if recorded():
            raise CheckFailure(ex, "after a nested `with no_grad():` ends, the outer block is still in no-grad mode: "
                                   "restore the mode that was on before, not True.", cause_id=NOT_RESTORED)

    _in_block(ex, no_grad, outer)
    if not recorded():
        raise CheckFailure(ex, "after `with no_grad():` ends, recording must be back on.", cause_id=NOT_RESTORED)
    _in_block(ex, no_grad, lambda: None, error=KeyError("raised inside the block"))
    if not recorded():
        raise CheckFailure(ex, "an exception inside `with no_grad():` left recording off: restore the mode in "
                               "__exit__ (or in a finally: block), which runs however the block ends.",
                           cause_id=NOT_RESTORED)


# ------------------------------------------------------------------------------------------------ operators

@exercise("operators", builds_on=("apply_op",))
def check_operators(Tensor) -> None:
    ex = "operators"
    x = np.array([[0.5, -1.0, 2.0], [1.5, 3.0, -0.5]])
    b = np.array([1.0, -2.0, 4.0])
    w = np.array([[1.0, 0.5], [-1.0, 2.0], [0.5, 0.25]])
    cases = [  # (shown, function of (x, b, w) on tensors, what the exercise text says about it)
        ("x + b", lambda x, b, w: x + b, ""), ("2.0 + x", lambda x, b, w: 2.0 + x, "needs __radd__"),
        ("x - b", lambda x, b, w: x - b, ""), ("2.0 - x", lambda x, b, w: 2.0 - x,
                                                "is 2 - x, not x - 2: in __rsub__ the tensor is the right operand"),
        ("x * b", lambda x, b, w: x * b, ""), ("x / b", lambda x, b, w: x / b, ""),
        ("1.0 / b", lambda x, b, w: 1.0 / b, "is 1 / b, not b / 1: in __rtruediv__ the tensor is the right operand"),
        ("-x", lambda x, b, w: -x, ""), ("x @ w", lambda x, b, w: x @ w, ""), ("b @ w", lambda x, b, w: b @ w, ""),
        ("b.exp()", lambda x, b, w: b.exp(), ""), ("(x * x).log()", lambda x, b, w: (x * x).log(), ""),
        ("x.relu()", lambda x, b, w: x.relu(), ""), ("x.sum()", lambda x, b, w: x.sum(), ""),
        ("x.sum(dim=1)", lambda x, b, w: x.sum(dim=1), "removes axis 1"),
        ("x.sum(dim=0, keepdim=True)", lambda x, b, w: x.sum(dim=0, keepdim=True), "keeps axis 0 as size 1"),
        ("x.mean()", lambda x, b, w: x.mean(), ""), ("x.mean(dim=-1)", lambda x, b, w: x.mean(dim=-1), ""),
        ("x.mean(dim=1, keepdim=True)", lambda x, b, w: x.mean(dim=1, keepdim=True), "keeps axis 1 as size 1"),
        ("x.reshape((3, 2))", lambda x, b, w: x.reshape((3, 2)), ""), ("x[1]", lambda x, b, w: x[1], ""),
        ("x[:, 0]", lambda x, b, w: x[:, 0], ""),
        ("b[[0, 0, 2]]", lambda x, b, w: b[[0, 0, 2]],
         "picks b[0] twice: its gradient must add both copies. `grad[index] += grad_out` keeps only one of repeated "
         "indices; np.add.at(grad, index, grad_out) adds them all"),
    ]
    for shown, fn, note in cases:
        _check_operator(ex, Tensor, shown, fn, (x, b, w), note)

    @RANDOM_CASES
    @given(programs(TENSOR, max_steps=12))
    def random_case(program):
        leaves, values, want_out, want_grads = run_both(ex, Tensor, program)
        out = values[-1]
        if not isinstance(out, Tensor) or not close(out.array, want_out):
            raise CheckFailure(ex, f"the program's result differs from torch:\n  {program.listing}\nexpected "
                                   f"{fmt(want_out)}, received {fmt(getattr(out, 'array', out))}.",
                               input=program.listing)
        seed = np.ones(want_out.shape) if program.seed is None else program.seed
        grads = reference_gradients(out, seed)
        for n, (leaf, want) in enumerate(zip(leaves, want_grads)):
            got = grads.get(id(leaf))
            if (want is None) != (got is None) or (want is not None and not close(got, want, LONG_PROGRAMS)):
                raise CheckFailure(ex, f"the graph your operators record gives v{n} the gradient {fmt(got)}, torch "
                                       f"{fmt(want)}, for the program\n  {program.listing}\nCheck which backward "
                                       "functions each operator records, and that inputs are in the order of "
                                       "the arguments of forward.", input=program.listing)

    random_case()


OPERATOR_NOT_RECORDED = causes.declare("operators/not-recorded", "an operator computing its result outside apply_op, "
                                       "so nothing is recorded")
BACKWARDS_ORDER = causes.declare("operators/backwards-out-of-order", "backward functions recorded in another order "
                                 "than their inputs (backwards[i] belongs to inputs[i])")


def _swapped_inputs(shown, got, arrays):
    """A hint when a binary operator computed its inputs the other way round (y - x for x - y)."""
    x, b, w = arrays
    swaps = {"x - b": b - x, "x / b": b / x, "2.0 - x": x - 2.0, "1.0 / b": b / 1.0}
    if shown in swaps and close(got, swaps[shown]):
        return " That is the operation with its inputs swapped: forward(x, y) must compute x op y, in that order."
    return ""


def _check_operator(ex, Tensor, shown, fn, arrays, note):
    tensors = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    out = call_learner(ex, fn, *tensors, shown_input=shown)
    leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    want = fn(*leaves)
    hint = f" ({shown} {note}.)" if note else ""
    if not isinstance(out, Tensor):
        raise CheckFailure(ex, f"{shown} returned {type(out).__name__}; an operator returns a Tensor (from apply_op).",
                           cause_id=causes.WRONG_TYPE)
    got = np.asarray(out.array)
    if not close(got, want.detach().numpy()):
        swapped = _swapped_inputs(shown, got, arrays)
        raise CheckFailure(ex, f"{shown}: expected {fmt(want.detach().numpy())}, received {fmt(got)}.{hint}{swapped}",
                           cause_id=causes.MISMATCH)
    if not out.requires_grad or out.recipe is None:
        raise CheckFailure(ex, f"{shown} was not recorded (no recipe), though its inputs require grad: build it "
                               "with apply_op.", cause_id=OPERATOR_NOT_RECORDED)
    seed = np.arange(1.0, want.numel() + 1).reshape(tuple(want.shape))
    backward_with_seed(want, seed)
    grads = reference_gradients(out, seed)
    for name, tensor, leaf in zip("xbw", tensors, leaves):
        expected = None if leaf.grad is None else leaf.grad.numpy()
        got = grads.get(id(tensor))
        if expected is None:
            continue
        if got is None or not close(got, expected):
            shape = ("" if got is None or got.shape == expected.shape else
                     f" That gradient has shape {got.shape}, but {name} has shape {expected.shape}: the backward "
                     "functions are probably in the wrong order (backwards[i] belongs to inputs[i]).")
            raise CheckFailure(ex, f"{shown}: with upstream gradient {fmt(seed)}, the recorded backward functions give "
                                   f"{name} the gradient {fmt(got)}; torch gives {fmt(expected)}.{hint}{shape}",
                               cause_id=BACKWARDS_ORDER if shape else causes.MISMATCH)
