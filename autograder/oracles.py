"""The two references every check compares against: torch.autograd in float64 and central finite differences."""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch


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


def central_differences(fn: Callable[..., float], *inputs, h: float = 1e-6) -> list[np.ndarray]:
    """Gradients of a scalar function by central differences, element by element, in float64.

    Each partial derivative is (f(x + h e_i) - f(x - h e_i)) / 2h, whose error is O(h^2) plus round-off of
    order eps * |f| / h (eps = 2.2e-16). Inputs are copied, never changed.

    Args:
        fn: takes one float64 ndarray per input and returns a number.
        inputs: numbers or arrays of any shape.
        h: the nudge; 1e-6 balances truncation and round-off for functions of size ~1.

    Returns:
        One float64 ndarray per input, with that input's shape.
    """
    arrays = [np.array(x, dtype=np.float64) for x in inputs]
    grads = []
    for arg in arrays:
        grad = np.zeros_like(arg)
        for index in np.ndindex(arg.shape):
            saved = arg[index]
            arg[index] = saved + h
            up = float(fn(*arrays))
            arg[index] = saved - h
            down = float(fn(*arrays))
            arg[index] = saved
            grad[index] = (up - down) / (2 * h)
        grads.append(grad)
    return grads

