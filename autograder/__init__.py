"""Hidden-test machinery for Backprop from Scratch.

A hidden test cell calls ``check(exercise_id, globals())``. The check reads the names it needs from the notebook's
namespace, compares the learner's code with torch.autograd in float64 and with central finite differences, runs
misconception probes, and raises :class:`CheckFailure` with a diagnosis when something is wrong.

``check`` and ``CheckFailure`` are loaded on first use (PEP 562): the checks import torch, which the command line and
a Dask worker, importing some other part of this package, do not need.
"""
import os
import tempfile

# Hypothesis keeps a cache folder (.hypothesis/) in the working directory, which is a learner's or nbgrader's folder
# here: keep it in the temp folder. Hypothesis reads this when it first writes, which is after this import.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "backprop-course-hypothesis"))

__all__ = ["CheckFailure", "check"]


def __getattr__(name: str):
    if name == "check":
        from autograder.checks import check  # on first use: the checks import torch
        return check
    if name == "CheckFailure":
        from autograder.checks.harness.diagnostics import CheckFailure  # on first use, as check
        return CheckFailure
    raise AttributeError(f"module 'autograder' has no attribute {name!r}")
