# nbgrader configuration for this repository as a course directory. The settings live in autograder.course so
# that `python -m autograder`, `make demo` and an instructor's `nbgrader ...` commands all grade the same way.
from pathlib import Path

from autograder.course import configure, configure_exchange

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)
configure(c)
configure_exchange(c, Path(__file__).resolve().parent / "exchange")
