"""Pictures for notebook 1: how the error of a measured slope depends on the nudge h.

The running example is f(x) = log(x*x) at x = 3, whose true slope is 2/x = 2/3 (the course's source handout
"Backprop from scratch").
Two error sources compete (any numerical-analysis text, e.g. Nocedal & Wright, *Numerical Optimization*, §8.1):
truncation, about h·|f''|/2 for a forward difference and h²·|f'''|/6 for a central one, shrinks with h;
round-off, about eps·|f|/h with eps the machine epsilon of the dtype (2.2e-16 for float64, 1.2e-7 for float32),
grows as h shrinks.
"""
from __future__ import annotations

import io
from typing import Callable

import numpy as np

from labtools.widgets import unattended


def log_square(x):
    """log(x*x), computed in the dtype of x."""
    return np.log(x * x)


def slope_errors(h_values, dtype=np.float64, f: Callable = log_square, x: float = 3.0,
                 exact: float = 2 / 3) -> dict[str, np.ndarray]:
    """Absolute errors of forward and central differences of f at x, computed entirely in ``dtype``.

    Args:
        h_values: 1-d sequence of positive nudges.
        dtype: np.float64 or np.float32; x, h and every evaluation of f use it.
        f: a numpy function that keeps its input's dtype.
        x: the point; exact: the true slope there.

    Returns:
        {"forward": errors, "central": errors}, float64 arrays shaped like ``h_values``.
    """
    x = dtype(x)
    errors = {"forward": [], "central": []}
    for h in h_values:
        h = dtype(h)
        errors["forward"].append((f(x + h) - f(x)) / h)
        errors["central"].append((f(x + h) - f(x - h)) / (2 * h))
    return {kind: np.abs(np.asarray(values, dtype=np.float64) - exact) for kind, values in errors.items()}


def plot_slope_errors(h_values=None, ax=None, mark_h: float | None = None):
    """Log-log plot of slope error vs h: forward and central differences, float64 and float32.

    Returns the matplotlib Axes. A dashed vertical line marks ``mark_h`` when given.
    """
    h_values = np.logspace(-13, 0, 105) if h_values is None else np.asarray(h_values)
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7, 4.5))
    styles = {"forward": "tab:orange", "central": "tab:blue"}
    for dtype, line in ((np.float64, "-"), (np.float32, ":")):
        for kind, error in slope_errors(h_values, dtype).items():
            # An exact hit (error 0) has no place on a log axis; floor it at the smallest float64 step near 2/3.
            ax.loglog(h_values, np.maximum(error, 1e-17), line, color=styles[kind],
                      label=f"{kind}, {np.dtype(dtype).name}")
    ax.loglog(h_values, h_values / 3, "k--", lw=0.8, alpha=0.5, label="slope 1 (∝ h)")
    ax.loglog(h_values, h_values ** 2 / 10, "k-.", lw=0.8, alpha=0.5, label="slope 2 (∝ h²)")
    if mark_h is not None:
        ax.axvline(mark_h, color="crimson", lw=1, label=f"h = {mark_h:.1e}")
    ax.set(xlabel="nudge h", ylabel="|measured slope − 2/3|", ylim=(1e-17, 10),
           title="Slope of log(x·x) at x = 3: truncation (right) vs round-off (left)")
    ax.legend(fontsize=8, ncol=2, loc="lower left")
    return ax


def h_explorer(start: float = 1e-3):
    """A slider for h (10^-12 to 1) that redraws the error plot and prints the four measured slopes.

    Each redraw draws a new ``matplotlib.figure.Figure`` into an image widget rather than through pyplot: pyplot's
    current figure is global to the kernel, and with two people on one notebook (real-time collaboration) a redraw
    asked for by one browser ran in the middle of another's and came out blank.

    Returns the ipywidgets box to display (None while nbgrader runs the notebook: see labtools.widgets).
    """
    if unattended("The h slider"):
        return None
    import ipywidgets as widgets

    slider = widgets.FloatLogSlider(value=start, base=10, min=-12, max=0, step=0.25, description="h",
                                    readout_format=".1e", continuous_update=False)
    readout = widgets.HTML()
    picture = widgets.Image(format="png")

    def redraw(change=None):
        h = slider.value
        lines = []
        for dtype in (np.float64, np.float32):
            err = slope_errors([h], dtype)
            lines.append(f"{np.dtype(dtype).name}: forward error {err['forward'][0]:.2e}, "
                         f"central error {err['central'][0]:.2e}")
        readout.value = "<pre>" + "\n".join(lines) + "</pre>"
        picture.value = slope_errors_png(mark_h=h)

    slider.observe(redraw, names="value")
    redraw()
    return widgets.VBox([slider, readout, picture])


def slope_errors_png(mark_h: float | None = None) -> bytes:
    """plot_slope_errors as PNG bytes, drawn on a figure of its own (no pyplot state is touched)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5))
    plot_slope_errors(ax=figure.subplots(), mark_h=mark_h)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    return buffer.getvalue()
