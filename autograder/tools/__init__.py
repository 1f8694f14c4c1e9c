"""Maintainers' and learners' tools around the course: the demo class, the benchmarks, JupyterLab servers, and the
solution namespaces the tests run. Nothing in grading imports this package."""
