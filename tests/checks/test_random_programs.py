"""The random programs both engines' checks draw (autograder/checks/harness/random_programs.py): every operation an engine
offers is exercised, programs stay inside every operation's domain, and a Value program uses only what a Value has."""
import numpy as np
import pytest

from autograder.checks.harness.random_programs import TENSOR, VALUE, _drawn_program, torch_run

SEEDS = range(300)


def drawn(engine):
    return [_drawn_program(engine, engine.ops, 1 + seed % 3, 1 + seed % 12, seed) for seed in SEEDS]


@pytest.mark.parametrize("engine", [VALUE, TENSOR], ids=["Value", "Tensor"])
def test_every_operation_is_exercised(engine):
    """An operation that always fell back to a scaling (its domain guard too strict) would never be graded."""
    used = {op for program in drawn(engine) for op, *_ in program.lines}
    assert set(engine.ops) <= used


@pytest.mark.parametrize("engine", [VALUE, TENSOR], ids=["Value", "Tensor"])
def test_programs_stay_finite_and_reach_a_leaf(engine):
    for program in drawn(engine):
        out, grads = torch_run(program)
        assert np.all(np.isfinite(out)), program.listing
        assert any(g is not None for g in grads), program.listing
        assert all(g is None or np.all(np.isfinite(g)) for g in grads), program.listing


def test_value_programs_use_numbers_and_value_operations_only():
    for program in drawn(VALUE):
        assert all(np.shape(value) == () and requires_grad for value, requires_grad in program.leaves)
        assert program.seed is None and program.listing.endswith(".backward()")
        assert not {op for op, *_ in program.lines} & {"@", "sum", "mean", "reshape", "index"}

