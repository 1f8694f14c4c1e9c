# nbgrader configuration for this repository as a course directory. The settings live in autograder.course so
# that `python -m autograder`, `make demo` and an instructor's `nbgrader ...` commands all grade the same way.
import os
from pathlib import Path

from autograder.course import configure, configure_exchange

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)
configure(c)
# The course's own exchange/ on one machine; on `make hub`'s JupyterHub the shared one, which it names here.
configure_exchange(c, Path(os.environ.get("BACKPROP_EXCHANGE") or Path(__file__).resolve().parent / "exchange"))
