"""The references themselves: torch.autograd in float64 and central differences must agree with known numbers."""
import numpy as np
import pytest
import torch

from autograder.checks.harness.oracles import central_differences, torch_gradients


def test_seed_example_log_plus_exp_times_z():
    # Handout #6, "Backprop in Practice", §1: f = log(x) + exp(y)·z at (1, 3, 2) has gradient (1, 40.1711, 20.0855).
    exact = torch_gradients(lambda x, y, z: torch.log(x) + torch.exp(y) * z, 1.0, 3.0, 2.0)
    numeric = central_differences(lambda x, y, z: np.log(x) + np.exp(y) * z, 1.0, 3.0, 2.0)
    for grads in (exact, numeric):
        assert np.allclose([float(g) for g in grads], [1.0, 40.1711, 20.0855], atol=1e-4)


def test_shapes_follow_inputs_and_inputs_are_not_changed():
    x = np.arange(6.0).reshape(2, 3)
    kept = x.copy()
    exact, = torch_gradients(lambda v: (v ** 2).sum(), x)
    numeric, = central_differences(lambda v: (v ** 2).sum(), x)
    assert exact.shape == numeric.shape == (2, 3)
    assert np.allclose(exact, 2 * x) and np.allclose(numeric, 2 * x, atol=1e-6)
    assert np.array_equal(x, kept)


def test_unused_input_gets_zero_gradient():
    grads = torch_gradients(lambda a, b: a * 2, 1.0, np.ones(3))
    assert np.array_equal(grads[1], np.zeros(3))


def test_non_scalar_output_is_refused():
    with pytest.raises(ValueError, match="one number"):
        torch_gradients(lambda v: v * 2, np.ones(3))
