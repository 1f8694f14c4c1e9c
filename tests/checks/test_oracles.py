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


def test_the_sgd_checks_step_is_torch_optim_sgds_step():
    """check_sgd steps its torch copies with the functional SGD (the optimizer's constructor costs a second): it must
    move them exactly as torch.optim.SGD does, a parameter without a gradient included."""
    from autograder.checks.modules_mnist import _torch_sgd_step

    rng = np.random.default_rng(3)
    starts = [rng.normal(size=(3, 4)), rng.normal(size=2), rng.normal(size=5)]
    ours, theirs = ([torch.tensor(s, requires_grad=True) for s in starts] for _ in range(2))
    for step in range(3):
        grads = [rng.normal(size=s.shape) for s in starts]
        for n, (a, b, g) in enumerate(zip(ours, theirs, grads)):
            a.grad, b.grad = (None, None) if n == 1 and step else (torch.tensor(g), torch.tensor(g))
        _torch_sgd_step(ours, 0.05)
        if step == 0:
            optimizer = torch.optim.SGD(theirs, lr=0.05)
        optimizer.step()
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
    assert not torch.equal(ours[0], torch.tensor(starts[0]))


def test_a_backward_with_a_seed_gives_the_leaves_the_very_numbers_torchs_own_does():
    """backward_with_seed runs (out * seed).sum()'s backward instead of out.backward(seed), whose first call imports
    sympy: the same gradients to the last bit, and a seed of another shape refused rather than broadcast."""
    from autograder.checks.harness.oracles import backward_with_seed

    rng = np.random.default_rng(5)
    x0, w0, seed = rng.normal(size=(4, 3)), rng.normal(size=(3, 2)), rng.normal(size=(4, 2))
    grads = []
    for run in (lambda out: out.backward(torch.tensor(seed)), lambda out: backward_with_seed(out, seed)):
        x, w = (torch.tensor(a, requires_grad=True) for a in (x0, w0))
        run(torch.tanh(x @ w) * x.sum())
        grads.append((x.grad.numpy(), w.grad.numpy()))
    assert all(np.array_equal(a, b) for a, b in zip(*grads))
    with pytest.raises(ValueError, match="a seed of shape"):
        backward_with_seed(torch.ones(4, 2, requires_grad=True), np.ones(2))
