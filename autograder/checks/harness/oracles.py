"""The two references every check compares against: torch.autograd in float64 and central finite differences.

``central_differences`` lives in ``labtools`` (learners' ``gradcheck`` uses it too): the grader may import the
learner-side package, never the other way round.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from labtools.finite_differences import central_differences  # noqa: F401 (re-exported for the checks)


def torch_gradients(fn: Callable[..., torch.Tensor], *inputs) -> list[np.ndarray]:
    """Gradients of a scalar function by torch.autograd, in float64.

    Args:
        fn: takes one float64 tensor per input and returns a 0-d tensor built with torch operations.
        inputs: numbers or arrays of any shape; each becomes a float64 leaf that requires grad.

    Returns:
        One float64 ndarray per input, with that input's shape.

    Raises:
        ValueError: ``fn`` did not return a single number.
    """
    leaves = [torch.tensor(np.asarray(x, dtype=np.float64), requires_grad=True) for x in inputs]
    out = fn(*leaves)
    if out.numel() != 1:
        raise ValueError(f"oracle function must return one number, got shape {tuple(out.shape)}")
    grads = torch.autograd.grad(out.reshape(()), leaves, allow_unused=True)
    return [np.zeros(leaf.shape) if g is None else g.detach().numpy() for leaf, g in zip(leaves, grads)]
