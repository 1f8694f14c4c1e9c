"""Gradient checkpointing on the course's tensor engine (notebook 5), and a measured picture of what it saves.

Reverse mode keeps every activation of the forward pass until the backward pass has used it. ``checkpoint`` runs a
segment of layers without recording it, keeps only the segment's input, and runs the segment again, recording, when
its gradient arrives. With n layers cut into segments of k, about n/k + k activations are alive at the peak instead
of n, for about one extra forward pass; k = √n gives O(√n) memory (T. Chen, B. Xu, C. Zhang and C. Guestrin,
"Training Deep Nets with Sublinear Memory Cost", arXiv:1604.06174, 2016).
"""
from __future__ import annotations

import statistics
import time
import tracemalloc

import numpy as np

MIB = 2 ** 20


def checkpoint(segment, x, engine: dict):
    """``segment(x)`` as one recorded node that keeps no activation inside the segment.

    Forward: the segment runs under ``no_grad()``, so its intermediate tensors are freed at once. Backward: the node's
    backward functions run the segment again from the kept input, recording, backpropagate the incoming gradient
    through that fresh graph, and hand the gradients of the input and of the segment's parameters to the outer pass.

    Args:
        segment: a Module (anything with ``__call__`` and ``parameters()``), e.g. ``Sequential(Linear, ReLU, ...)``.
            It must compute the same function both times (no dropout, no randomness).
        x: the segment's input, a Tensor of shape (B, in_features).
        engine: the notebook's engine by name: ``{"Tensor": Tensor, "apply_op": apply_op, "no_grad": no_grad}``.

    Returns:
        A Tensor, the segment's output (B, out_features); recorded when x or a parameter requires grad.

    Raises:
        KeyError: ``engine`` lacks one of the three names.
        RuntimeError: the backward pass runs with recording switched off, so the segment cannot be recomputed.
    """
    Tensor, apply_op, no_grad = engine["Tensor"], engine["apply_op"], engine["no_grad"]
    params = list(segment.parameters())
    pending = {}  # input position -> gradient, filled by one recomputation per backward pass

    def forward(x_array, *param_arrays):
        with no_grad():
            return segment(Tensor(x_array)).array

    def recompute(grad_out, x_array):
        saved = [p.grad for p in params]  # the outer pass's gradients so far: set aside, restored below
        for p in params:
            p.grad = None
        x_leaf = Tensor(x_array, requires_grad=x.requires_grad)
        out = segment(x_leaf)
        if out.recipe is None:
            raise RuntimeError("checkpoint: the segment recorded nothing when it was run again; call backward() "
                               "outside no_grad()")
        out.backward(Tensor(grad_out))
        for i, leaf in enumerate([x_leaf, *params]):
            if leaf.requires_grad:  # the outer pass asks only for these
                pending[i] = np.zeros(leaf.shape) if leaf.grad is None else leaf.grad.array
        for p, grad in zip(params, saved):
            p.grad = grad

    def backward_for(i):
        def back(grad_out, out, x_array, *param_arrays):
            if i not in pending:
                recompute(grad_out, x_array)
            return pending.pop(i)
        return back

    return apply_op(forward, tuple(backward_for(i) for i in range(1 + len(params))), x, *params)


def peak_memory_and_time(step, repeats: int = 3) -> tuple[float, float]:
    """Median peak memory and median wall time of ``step()``, each over ``repeats`` calls.

    Memory is the peak of what Python and numpy allocate during a call (``tracemalloc``; numpy reports its arrays
    to it), above what was allocated before the call. Time is measured in separate calls without tracing, which
    would slow them down.

    Args:
        step: a function of no arguments, e.g. one forward and backward pass.
        repeats: calls per measurement, at least 1.

    Returns:
        (peak memory in MiB, time in seconds).

    Raises:
        ValueError: repeats < 1.
        RuntimeError: tracemalloc is already tracing (another measurement is running).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if tracemalloc.is_tracing():
        raise RuntimeError("tracemalloc is already tracing: stop it first (tracemalloc.stop())")
    peaks, seconds = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
        tracemalloc.start()
        try:
            step()
            peaks.append(tracemalloc.get_traced_memory()[1] / MIB)
        finally:
            tracemalloc.stop()
    return statistics.median(peaks), statistics.median(seconds)


def plot_memory_and_time(xs, results: dict, xlabel: str = "depth n (Linear + ReLU layers)", title: str = "",
                         log_x: bool = False, baseline: tuple | None = None):
    """Peak memory (MiB) and time (s) of forward + backward against depth or segment length, one line per way.

    Args:
        xs: the values measured (depths, or layers per segment), increasing.
        results: label -> list of (MiB, seconds) pairs, one per x (what ``peak_memory_and_time`` returns).
        xlabel: what xs are.
        title: the figure's title.
        log_x: a base-2 logarithmic x axis, with xs as its ticks (for k = 1, 2, 4, ...).
        baseline: optional (label, (MiB, seconds)): one measurement that does not depend on x (plain backprop when
            x is the segment length), drawn as a dashed horizontal line in the first colour.

    Returns:
        The matplotlib Figure.

    Raises:
        ValueError: a list in ``results`` does not have one pair per x.
    """
    import matplotlib.pyplot as plt

    for label, pairs in results.items():
        if len(pairs) != len(xs):
            raise ValueError(f"{label}: {len(pairs)} measurements for {len(xs)} values of x")
    figure, (memory, seconds) = plt.subplots(1, 2, figsize=(10, 3.6))
    if baseline is not None:
        label, (mib, s) = baseline
        memory.axhline(mib, color="C0", linestyle="--", label=label)
        seconds.axhline(s, color="C0", linestyle="--", label=label)
    first = 0 if baseline is None else 1
    for i, ((label, pairs), marker) in enumerate(zip(results.items(), "osd^v")):
        memory.plot(xs, [mib for mib, _ in pairs], marker=marker, color=f"C{first + i}", label=label)
        seconds.plot(xs, [s for _, s in pairs], marker=marker, color=f"C{first + i}", label=label)
    memory.set(xlabel=xlabel, ylabel="peak memory (MiB)", title="memory of forward + backward")
    seconds.set(xlabel=xlabel, ylabel="time (s)", title="time of forward + backward")
    for ax in (memory, seconds):
        if log_x:
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    return figure
