"""Tools for notebook 3: a gradient auditor for backward functions, and a picture of what broadcasting copies."""
from __future__ import annotations

import numpy as np

from labtools.finite_differences import central_differences


def gradcheck(back, forward, *inputs, index: int = 0, grad_out=None, tolerance: float = 1e-5) -> float:
    """Audit a backward function against central differences and print the worst relative error.

    The reference is the gradient of sum(grad_out · forward(*inputs)) with respect to ``inputs[index]``, measured by
    nudging each element (h = 1e-6, float64). Use small arrays: it evaluates ``forward`` twice per element.

    Args:
        back: your backward function, called as back(grad_out, out, *inputs).
        forward: the numpy forward function, e.g. np.log or np.multiply.
        inputs: the forward inputs (arrays or numbers).
        index: which input's gradient ``back`` returns.
        grad_out: the upstream gradient; random (seed 0) of the output's shape when omitted.
        tolerance: the worst relative error still reported as OK.

    Returns:
        The worst relative error (inf when the shapes disagree).
    """
    out = forward(*inputs)
    if grad_out is None:
        grad_out = np.random.default_rng(0).standard_normal(np.shape(out))
    analytic = np.asarray(back(grad_out, out, *inputs), dtype=np.float64)
    numeric = central_differences(lambda *xs: float(np.sum(grad_out * forward(*xs))), *inputs)[index]
    name = getattr(back, "__name__", "backward function")
    if analytic.shape != numeric.shape:
        print(f"{name}: returned shape {analytic.shape}, but input {index} has shape {numeric.shape}")
        return float("inf")
    scale = np.maximum(np.maximum(np.abs(analytic), np.abs(numeric)), 1e-8)
    worst = float(np.max(np.abs(analytic - numeric) / scale, initial=0.0))
    verdict = "OK" if worst <= tolerance else "MISMATCH: compare the two arrays below"
    print(f"{name}: worst relative error {worst:.1e} over {numeric.size} elements -> {verdict}")
    if worst > tolerance:
        print("yours:  ", analytic.round(6).tolist(), "\nnudged: ", numeric.round(6).tolist())
    return worst


def show_broadcast(original_shape: tuple, target_shape: tuple, ax=None):
    """Two grids: the original array and its broadcast copy, each cell coloured by the original element it copies.

    Only for shapes of at most 2 axes. Returns the pair of matplotlib Axes.
    """
    import matplotlib.pyplot as plt

    source = np.arange(int(np.prod(original_shape))).reshape(original_shape)
    copied = np.broadcast_to(source, target_shape)
    if ax is None:
        _, ax = plt.subplots(1, 2, figsize=(7, 2.4), gridspec_kw={"width_ratios": [1, 1.6]})
    for axis, grid, title in ((ax[0], source, f"original {tuple(original_shape)}"),
                              (ax[1], copied, f"broadcast to {tuple(target_shape)}")):
        cells = np.atleast_2d(grid)
        axis.imshow(cells % 10, cmap="tab10", vmin=0, vmax=9, alpha=0.6)
        for (r, c), value in np.ndenumerate(cells):
            axis.text(c, r, f"b{value}", ha="center", va="center")
        axis.set(title=title, xticks=[], yticks=[])
    counts = copied.size // source.size
    ax[1].set_xlabel(f"each element copied {counts}×: its gradient is the sum of {counts} upstream entries")
    return ax
