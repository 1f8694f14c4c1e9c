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


def backward_with_seed(out: torch.Tensor, seed) -> None:
    """``out.backward(seed)``: the vector–Jacobian product seedᵀ·J accumulated into the leaves' ``.grad``, as the
    backward of ``(out * seed).sum()``, which hands the leaves the very same numbers (the sum's backward gives ones,
    the product's ones · seed = seed, exactly). Called with a gradient tensor, torch's backward imports its symbolic
    shapes (sympy) the first time: about 0.5 CPU s of a learner's first check of a kernel (make bench-checks).

    Args:
        out: a float tensor in a graph. seed: numbers of ``out``'s shape, taken as ``out``'s dtype.

    Raises:
        ValueError: ``seed``'s shape is not ``out``'s (``backward`` raises RuntimeError; a product would broadcast).
    """
    seed = torch.as_tensor(np.asarray(seed), dtype=out.dtype)
    if seed.shape != out.shape:
        raise ValueError(f"a seed of shape {tuple(seed.shape)} for an output of shape {tuple(out.shape)}")
    (out * seed).sum().backward()
