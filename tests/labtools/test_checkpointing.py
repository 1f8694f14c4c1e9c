"""labtools.checkpointing on notebook 5's own engine (the solution notebook's code): gradient checkpointing gives the
plain gradients, keeps less memory alive, and the measuring and plotting helpers say what they measured (fast)."""
import math

import numpy as np
import pytest

from autograder.tools.solutions import solution_namespace
from labtools.checkpointing import checkpoint, peak_memory_and_time, plot_memory_and_time

WIDTH, BATCH = 16, 256  # activations (B × W) outweigh the weights (W × W), as in the notebook's picture


@pytest.fixture(scope="module")
def nb5():
    ns = solution_namespace("05_modules_mnist")
    ns["engine"] = {name: ns[name] for name in ("Tensor", "apply_op", "no_grad")}
    return ns


def deep_stack(nb5, depth, seed=0):
    np.random.seed(seed)
    return [nb5["Sequential"](nb5["Linear"](WIDTH, WIDTH), nb5["ReLU"]()) for _ in range(depth)]


def forward_backward(nb5, blocks, x, every=None):
    if every is None:
        for block in blocks:
            x = block(x)
    else:
        for start in range(0, len(blocks), every):
            x = checkpoint(nb5["Sequential"](*blocks[start:start + every]), x, nb5["engine"])
    (x * x).sum().backward()


def gradients(blocks):
    return [p.grad.array.copy() for block in blocks for p in block.parameters()]


@pytest.mark.parametrize("every", [1, 3, 4, 12])
@pytest.mark.parametrize("input_requires_grad", [False, True])
def test_checkpointed_gradients_equal_the_plain_ones(nb5, every, input_requires_grad):
    Tensor = nb5["Tensor"]
    blocks = deep_stack(nb5, 12)
    for block in blocks:  # Kaiming-like scale, so that gradients do not fade to nothing over 12 layers
        block.layer0.weight.array *= math.sqrt(6)
    data = np.random.default_rng(1).standard_normal((BATCH, WIDTH))
    x = Tensor(data.copy(), requires_grad=input_requires_grad)
    forward_backward(nb5, blocks, x)
    plain, plain_input = gradients(blocks), x.grad
    for block in blocks:
        block.zero_grad()
    x = Tensor(data.copy(), requires_grad=input_requires_grad)
    forward_backward(nb5, blocks, x, every)
    assert all(np.abs(g).max() > 1e-3 for g in plain[:2]), "the first layer's gradient should not vanish"
    for expected, received in zip(plain, gradients(blocks)):
        np.testing.assert_allclose(received, expected, rtol=1e-12, atol=0)
    if input_requires_grad:
        np.testing.assert_allclose(x.grad.array, plain_input.array, rtol=1e-12, atol=0)
    else:
        assert x.grad is None


def test_gradients_already_in_the_parameters_are_accumulated_not_lost(nb5):
    Tensor = nb5["Tensor"]
    blocks = deep_stack(nb5, 4)
    x = Tensor(np.random.default_rng(2).standard_normal((BATCH, WIDTH)))
    forward_backward(nb5, blocks, x)
    once = gradients(blocks)
    forward_backward(nb5, blocks, x, every=2)  # no zero_grad: torch-like leaves accumulate
    for single, double in zip(once, gradients(blocks)):
        np.testing.assert_allclose(double, 2 * single, rtol=1e-12)


def test_checkpointing_keeps_less_memory_alive_and_only_its_checkpoints_are_recorded(nb5):
    Tensor = nb5["Tensor"]
    blocks = deep_stack(nb5, 16)
    rows = 2048  # 256 KiB per activation, so that arrays, not Python objects, decide the peak
    x = Tensor(np.random.default_rng(3).standard_normal((rows, WIDTH)))
    plain_mib, _ = peak_memory_and_time(lambda: forward_backward(nb5, blocks, x), repeats=1)
    kept_mib, _ = peak_memory_and_time(lambda: forward_backward(nb5, blocks, x, every=4), repeats=1)
    activation_mib = rows * WIDTH * 8 / 2 ** 20
    assert plain_mib > 2 * 16 * activation_mib  # a Linear and a ReLU output per layer, all alive at once
    # 4 checkpoints, then one segment's 8 activations at a time: 12 instead of 32, plus a few gradients
    assert kept_mib < 0.55 * plain_mib, (plain_mib, kept_mib)
    out = x
    for start in range(0, 16, 4):
        out = checkpoint(nb5["Sequential"](*blocks[start:start + 4]), out, nb5["engine"])
    recorded = [node for node in nb5["topological_sort"](out) if not node.is_leaf]
    assert len(recorded) == 4, "one recorded node per segment: nothing inside a segment is kept"


def test_backward_with_recording_off_cannot_recompute_and_says_so(nb5):
    Tensor = nb5["Tensor"]
    blocks = deep_stack(nb5, 2)
    out = checkpoint(nb5["Sequential"](*blocks), Tensor(np.ones((3, WIDTH))), nb5["engine"])
    loss = out.sum()
    with nb5["no_grad"](), pytest.raises(RuntimeError, match="outside no_grad"):
        loss.backward()


def test_peak_memory_and_time_measures_what_a_step_allocates():
    mib, seconds = peak_memory_and_time(lambda: np.ones(2 ** 20).sum(), repeats=3)  # 8 MiB, freed at once
    assert 7.9 < mib < 9 and 0 < seconds < 1
    with pytest.raises(ValueError, match="at least 1"):
        peak_memory_and_time(lambda: None, repeats=0)


def test_plot_has_labelled_axes_and_refuses_a_measurement_per_depth_missing():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plot_memory_and_time([4, 8], {"plain": [(1.0, 0.1), (2.0, 0.2)], "every 2": [(0.5, 0.2), (0.8, 0.3)]})
    memory, seconds = figure.axes
    assert memory.get_ylabel() == "peak memory (MiB)" and seconds.get_ylabel() == "time (s)"
    assert [line.get_label() for line in memory.get_lines()] == ["plain", "every 2"]
    assert memory.get_xlabel() == "depth n (Linear + ReLU layers)"
    plt.close(figure)
    figure = plot_memory_and_time([1, 2, 4], {"n = 4": [(3.0, 0.1)] * 3}, xlabel="k", log_x=True,
                                  baseline=("plain", (5.0, 0.05)))
    assert [line.get_label() for line in figure.axes[0].get_lines()] == ["plain", "n = 4"]
    assert figure.axes[0].get_lines()[0].get_ydata()[0] == 5.0 and figure.axes[1].get_lines()[0].get_ydata()[0] == 0.05
    assert figure.axes[0].get_xscale() == "log" and [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["1", "2", "4"]
    plt.close(figure)
    with pytest.raises(ValueError, match="1 measurements for 2 values of x"):
        plot_memory_and_time([4, 8], {"plain": [(1.0, 0.1)]})
