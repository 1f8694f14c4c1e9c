"""`make progress`: a self-study learner's view of the course, the class report's small version.

Grades each of the five notebooks under notebooks/ as ``make grade`` does (about 20 s each) and prints one table:
every exercise, done or open, and for an open one the cause its diagnosis names (autograder.tools.class_data).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from autograder.contract import REPO, assignments
from autograder.tools.class_data import cause_of


def progress(notebooks: dict[str, Path], grade, out) -> int:
    """Print each notebook's exercises; returns how many are open (a notebook that cannot be graded counts one).

    ``grade`` is autograder.grade.notebook.grade (tests pass another); its UnusableNotebook and GradingSecretError
    are printed as the notebook's one line, with the reason.
    """
    from autograder.grade.notebook import UnusableNotebook  # what grading a notebook refuses
    from autograder.trust.secret import GradingSecretError

    open_count = 0
    for name, path in notebooks.items():
        try:
            report = grade(path)
        except (UnusableNotebook, GradingSecretError) as reason:
            print(f"{name}: cannot be graded ({reason})", file=out)
            open_count += 1
            continue
        done = [e for e in report.exercises if e.passed]
        print(f"{name}: {len(done)}/{len(report.exercises)} exercises done, {report.score:g}/{report.max_score:g} "
              "points", file=out)
        for e in report.exercises:
            print(f"  {'done' if e.passed else 'open':<4}  {e.id:<28} {'' if e.passed else cause_of(e.message)}",
                  file=out)
        open_count += len(report.exercises) - len(done)
    return open_count


def main() -> int:
    """0 when every exercise of the five notebooks is done, 1 otherwise."""
    from autograder.grade.notebook import grade  # nbgrader and the checks: loaded once the command runs
    from autograder.trust import sandbox

    if sandbox.refusal():  # a self-study learner grades their own notebooks: allowed, with the warning
        os.environ[sandbox.WITHOUT_SANDBOX_ENV] = "1"
    notebooks = {name: REPO / "notebooks" / name / f"{name}.ipynb" for name in assignments()}
    print(f"Grading your {len(notebooks)} notebooks against the hidden tests, about 20 s each...", file=sys.stderr,
          flush=True)
    left = progress(notebooks, grade, sys.stdout)
    print("\nAll done." if not left else f"\n{left} open: `make grade NB=<notebook>` shows each diagnosis in full.")
    return 0 if not left else 1
