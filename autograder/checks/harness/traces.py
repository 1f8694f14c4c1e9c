"""What a check may change in the process it runs in, put back however the check ends.

In a learner's kernel the check runs in the learner's own process, so whatever it enters stays for the cells after
it: a probe that fails inside the learner's ``with no_grad():`` never leaves the block (notebook 4's
``GradMode.enabled`` stayed False, and the corrected answer then failed), a probe seeds ``random`` and
``np.random`` where the learner's code draws. :func:`left_as_found` keeps those; the recursion limit and numpy's
error state have their own keepers in ``autograder.checks._run`` (``recursion_limit_kept``, ``np.errstate``), and
:func:`torch_defaults` gives the check's references torch's defaults whatever the notebook set.
"""
from __future__ import annotations

import contextlib
import random
from collections.abc import Mapping

import numpy as np

# Class attributes of these types are a class's switches and counters (GradMode.enabled): kept and put back.
SWITCH_TYPES = (bool, int, float, str, type(None))


@contextlib.contextmanager
def left_as_found(namespace: Mapping):
    """Inside, a check may change the random states and the switches of the notebook's own classes; after it, on
    every exit path, they are as they were.

    The notebook's own classes are the classes among ``namespace``'s values defined in it (their ``__module__`` is
    the namespace's ``__name__``); a mapping of a sandboxed worker's objects has none here (that worker ends with
    its exercise anyway).
    """
    python_state, numpy_state = random.getstate(), np.random.get_state()
    switches = _switches(namespace)
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        for cls, values in switches.items():
            for name, value in values.items():
                if vars(cls).get(name, _MISSING) is not value:
                    setattr(cls, name, value)


_MISSING = object()


@contextlib.contextmanager
def torch_defaults():
    """torch as a fresh process has it, for a check's own reference computations: gradients recorded, no inference
    mode, float32 by default, whatever the notebook set (red team 9: ``torch.set_grad_enabled(False)`` in an answer
    cell made notebook 1's reference raise in the kernel alone, where the grader's torch is untouched). The
    notebook's settings are its own again after."""
    import torch

    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        with torch.enable_grad(), torch.inference_mode(False):
            yield
    finally:
        torch.set_default_dtype(dtype)


def _switches(namespace: Mapping) -> dict[type, dict[str, object]]:
    if not isinstance(namespace, dict):
        return {}
    module = namespace.get("__name__")
    return {value: {name: attribute for name, attribute in vars(value).items()
                    if type(attribute) in SWITCH_TYPES and not name.startswith("__")}
            for value in list(namespace.values()) if isinstance(value, type) and value.__module__ == module}
