"""What notebook 4's checks compare a random program's results with (the programs themselves come from
``autograder.checks.harness.random_programs``): the reference backward pass (the recorded backward functions walked in
topological order) that judges the learner's operators, and every leaf's .grad against torch's."""
from __future__ import annotations

import numpy as np

from autograder.checks import causes
from autograder.checks.reference.engine import graph_inputs
from autograder.checks.harness.random_programs import torch_run
from autograder.checks.harness.diagnostics import CheckFailure, Tolerance, call_learner, close, fmt
from labtools.graph import inputs_first

# A random program chains up to 40 operations, each rounding once: more than AGAINST_TORCH allows near cancellations.
LONG_PROGRAMS = Tolerance(1e-8, 1e-10)

# Where the learner's backprop keeps a gradient torch does not (declared here, where every leaf is judged).
GRAD_ON_NON_LEAF = causes.declare("backprop/grad-on-non-leaf", "a gradient kept on a non-leaf that did not "
                                  "retain_grad()")
GRAD_REQUIRES_GRAD = causes.declare("backprop/grad-requires-grad", "a gradient stored as a Tensor that requires "
                                    "grad, where a gradient is data")


def reference_gradients(end, seed) -> dict[int, np.ndarray]:
    """Gradient of every node reached from ``end``, keyed by id, by the recorded backward functions.

    Reads the graph only; no ``.grad`` is written. ``seed`` is an ndarray of end's shape.
    """
    grads = {id(end): np.asarray(seed, dtype=np.float64)}
    for node in reversed(inputs_first(end, graph_inputs)):
        if node.recipe is None or id(node) not in grads:
            continue
        arrays = [x.array if hasattr(x, "array") else x for x in node.recipe.inputs]
        for x, back in zip(node.recipe.inputs, node.recipe.backwards):
            if hasattr(x, "array") and x.requires_grad:
                part = np.asarray(back(grads[id(node)], node.array, *arrays, **node.recipe.kwargs), dtype=np.float64)
                grads[id(x)] = grads[id(x)] + part if id(x) in grads else part
    return grads


def run_both(ex, Tensor, program):
    """The program run on the learner's Tensor and on torch: (leaves, every value, torch's output, torch's leaf
    gradients). The learner's run goes through call_learner, so a crash or a loop is a diagnosis."""
    leaves = [Tensor(v.copy(), requires_grad=rg) for v, rg in program.leaves]
    values = call_learner(ex, program.replay, leaves, shown_input=program.listing)
    return (leaves, values, *torch_run(program))


def compare_leaf_grads(ex, Tensor, leaves, values, expected, listing):
    """Every leaf's .grad must be what torch stores (None included); every non-leaf's must stay None."""
    for n, (leaf, want) in enumerate(zip(leaves, expected)):
        got = leaf.grad
        if want is None and got is not None:
            why = ("it has requires_grad=False: data gets no gradient" if not leaf.requires_grad else
                   "it took no part in computing the output")
            raise CheckFailure(ex, f"v{n}.grad should stay None ({why}), but it was set.\n  {listing}",
                               input=listing)
        if want is None:
            continue
        if got is None:
            raise CheckFailure(ex, f"v{n}.grad is None, but torch gives {fmt(want)}: the gradient never reached this "
                                   f"leaf, or was not stored on it.\n  {listing}", input=listing)
        array = grad_array(ex, Tensor, got, f"v{n}.grad")
        if not close(array, want, LONG_PROGRAMS):
            raise CheckFailure(ex, f"gradient of v{n} differs from torch.autograd for the program\n  {listing}\n"
                                   f"expected {fmt(want)}, received {fmt(array)}.", input=listing)
    for n, node in enumerate(values[len(leaves):], start=len(leaves)):
        if node.grad is not None:
            raise CheckFailure(ex, f"v{n} is not a leaf (an operation made it), yet its .grad was set. Like torch, "
                                   f"store gradients only on leaves, unless retain_grad() was called.\n  {listing}",
                               cause_id=GRAD_ON_NON_LEAF, input=listing)


def grad_array(ex, Tensor, grad, what) -> np.ndarray:
    if not isinstance(grad, Tensor):
        raise CheckFailure(ex, f"{what} is a {type(grad).__name__}; store a Tensor, as torch does: Tensor(gradient).",
                           cause_id=causes.WRONG_TYPE)
    if np.asarray(grad.array).dtype != np.float64:
        raise CheckFailure(ex, f"{what} holds {np.asarray(grad.array).dtype} numbers: keep gradients in float64, which "
                               "the backward functions return (float32 keeps only ~7 significant digits).",
                           cause_id=causes.WRONG_DTYPE)
    if grad.requires_grad:
        raise CheckFailure(ex, f"{what} requires grad: a gradient is data, Tensor(gradient) without requires_grad, "
                               "as in torch.", cause_id=GRAD_REQUIRES_GRAD)
    return np.array(grad.array, dtype=np.float64)  # a copy: later passes must not change what was read
