"""Notebook 4, the predictions: what torch does with leaves, detach/clone and accumulation, predicted before
running it; each guess is compared with torch run here."""
from __future__ import annotations

import numpy as np
import torch

from autograder.checks import causes
from autograder.checks.registry import exercise
from autograder.checks.harness.diagnostics import CheckFailure, close


NOT_ANSWERED = "not answered yet: replace each ... with your prediction."


# What a wrong guess about each key shows was missed: its cause, by the key of the prediction.
MISSED = {
    "predict_leaf_grads": {
        "x": causes.declare("predict_leaf_grads/leaf-gradient", "a leaf's gradient mispredicted (the chain rule "
                            "through h)"),
        "h": causes.declare("predict_leaf_grads/retain-grad", "retain_grad() not seen to keep a non-leaf's gradient"),
        "zero": causes.declare("predict_leaf_grads/zero-is-not-none", "a gradient of 0 taken for no gradient (None)"),
        "unused": causes.declare("predict_leaf_grads/unused-leaf-gets-none", "a leaf that took no part expected to "
                                 "get a gradient"),
    },
    "predict_detach_clone": {
        "original": causes.declare("predict_detach_clone/detach-shares-storage", "detach() taken for a copy, though it "
                                   "shares the storage"),
        "snapshot": causes.declare("predict_detach_clone/clone-copies", "clone() taken to share the storage"),
        "original_grad": causes.declare("predict_detach_clone/clone-stays-in-graph", "clone() taken to leave the graph, "
                                        "or a detached copy's gradient expected to reach the original"),
        "isolated_grad": causes.declare("predict_detach_clone/detached-leaf", "a leaf made by detach().clone() "
                                        ".requires_grad_() mispredicted"),
    },
}


def _compare_predictions(ex, predicted, actual: dict, reasons: dict):
    if isinstance(predicted, dict) and ... in predicted.values():
        raise CheckFailure(ex, NOT_ANSWERED, cause_id=causes.STUB)
    if not isinstance(predicted, dict) or set(predicted) != set(actual):
        raise CheckFailure(ex, f"give a dict with exactly the keys {sorted(actual)}, got {predicted!r}.",
                           cause_id=causes.WRONG_TYPE)
    for key, value in actual.items():
        guess = predicted[key]
        right = guess is None if value is None else (
            guess is not None and not isinstance(guess, (str, bool)) and _number_equal(guess, value))
        if not right:
            raise CheckFailure(ex, f"{key}: you predicted {guess!r}, torch gives {value!r}. {reasons[key]}",
                               cause_id=MISSED[ex][key])


def _number_equal(guess, value):
    try:
        return close(float(guess), value)
    except (TypeError, ValueError):
        return False


def _grad_or_none(t):
    return None if t.grad is None else float(t.grad)


@exercise("predict_leaf_grads")
def check_predict_leaf_grads(predicted_grads) -> None:
    x = torch.tensor(2.0, requires_grad=True)
    unused = torch.tensor(7.0, requires_grad=True)
    zero = torch.tensor(0.0, requires_grad=True)
    h = 3 * x
    h.retain_grad()
    (0.5 * h.square() + zero.square()).backward()
    actual = {"x": _grad_or_none(x), "h": _grad_or_none(h), "zero": _grad_or_none(zero),
              "unused": _grad_or_none(unused)}
    _compare_predictions("predict_leaf_grads", predicted_grads, actual, {
        "x": "x is a leaf that requires grad: d loss/dx = d loss/dh · dh/dx = h · 3 = 6 · 3.",
        "h": "h is not a leaf, but h.retain_grad() asks torch to keep its gradient: d loss/dh = h = 6.",
        "zero": "zero took part in the loss, so a gradient reached it: d(zero²)/d zero = 2·zero = 0. Zero is a value; "
                "None means no gradient arrived at all.",
        "unused": "unused never took part in the loss, so no gradient arrived and torch leaves .grad None.",
    })


@exercise("predict_detach_clone")
def check_predict_detach_clone(predicted_values) -> None:
    original = torch.tensor([2.0], requires_grad=True)
    shared = original.detach()
    snapshot = original.detach().clone()
    shared.add_(3)
    copy = original.clone()
    (3 * copy).sum().backward()
    isolated = original.detach().clone().requires_grad_()
    (isolated * isolated).sum().backward()
    actual = {"original": original.item(), "snapshot": snapshot.item(), "original_grad": _grad_or_none(original),
              "isolated_grad": _grad_or_none(isolated)}
    _compare_predictions("predict_detach_clone", predicted_values, actual, {
        "original": "detach() makes a tensor outside the graph that shares the same storage, so adding 3 to it in "
                    "place changes original too.",
        "snapshot": "clone() copies the storage, so the snapshot keeps the value it had when it was taken.",
        "original_grad": "clone() alone does not leave the graph: torch records it (CloneBackward0), so copy is a "
                         "non-leaf and d(3·copy)/d original = 3 reaches original. The second backward starts from "
                         "isolated, a leaf made from a detached copy: none of it reaches original, which keeps 3.",
        "isolated_grad": "isolated is a new leaf of its own (detach().clone() cut the link, requires_grad_() made it "
                         "ask for a gradient), copied after the in-place add, so it holds 5: d(isolated²)/d isolated "
                         "= 2 · 5.",
    })


@exercise("predict_accumulation")
def check_predict_accumulation(predicted_prints) -> None:
    w = torch.tensor(2.0, requires_grad=True)
    seen = []
    (w ** 2).backward()
    seen.append(w.grad.item())
    (3 * w).backward()
    seen.append(w.grad.item())
    w.grad = None
    (3 * w).backward()
    seen.append(w.grad.item())
    reasons = ["d(w²)/dw = 2w = 4.", "backward adds to .grad: 4 + d(3w)/dw = 4 + 3.",
               "after w.grad = None the sum starts again: 3."]
    missed = [causes.MISMATCH, ACCUMULATES, RESTARTS]
    ex = "predict_accumulation"
    if isinstance(predicted_prints, np.ndarray):
        predicted_prints = predicted_prints.tolist()
    if isinstance(predicted_prints, (list, tuple)) and ... in predicted_prints:
        raise CheckFailure(ex, NOT_ANSWERED, cause_id=causes.STUB)
    if not isinstance(predicted_prints, (list, tuple)) or len(predicted_prints) != 3:
        raise CheckFailure(ex, f"give a list of the three printed values, got {predicted_prints!r}.",
                           cause_id=causes.WRONG_TYPE)
    for n, (guess, value, why, cause) in enumerate(zip(predicted_prints, seen, reasons, missed), start=1):
        if isinstance(guess, (str, bool)) or not _number_equal(guess, value):
            raise CheckFailure(ex, f"print {n}: you predicted {guess!r}, torch prints {value}. {why}", cause_id=cause)


ACCUMULATES = causes.declare("predict_accumulation/grad-accumulates", "a second backward() taken to replace .grad, "
                             "not to add to it")
RESTARTS = causes.declare("predict_accumulation/none-restarts", "w.grad = None not seen to start the sum again")
