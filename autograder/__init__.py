"""Hidden-test machinery for Backprop from Scratch.

A hidden test cell calls ``check(exercise_id, globals())``. The check reads the names it needs from the notebook's
namespace, compares the learner's code with torch.autograd in float64 and with central finite differences, runs
misconception probes, and raises :class:`CheckFailure` with a diagnosis when something is wrong.
"""
import os
import tempfile

# Hypothesis keeps a cache folder (.hypothesis/) in the working directory, which is a learner's or nbgrader's folder
# here: keep it in the temp folder. Hypothesis reads this when it first writes, which is after this import.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "backprop-course-hypothesis"))

from autograder.diagnostics import CheckFailure  # noqa: E402
from autograder.checks import check  # noqa: E402

__all__ = ["CheckFailure", "check"]
