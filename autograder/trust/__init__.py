"""The trust boundary: what a security review of grading must read, and the only code that runs learner code.

- ``sandbox``: how every process that runs learner code is started (bubblewrap, limits), and what it can see.
- ``worker``: the code of ours that runs *inside* the sandbox, next to learner code (standard library and numpy
  only, started as a script, never imported by the trusted side), with ``wire``, the protocol both sides speak (its
  docstring is the specification).
- ``remote``: the trusted side's client of that worker; learner objects are seen only as plain data and handles.
- ``verdicts``: each exercise's check run against the worker, in a process that never executes learner code.

Nothing outside this package starts a process that runs learner code, except nbgrader's kernel, which
autograder.course.preprocessors starts through ``sandbox``.
"""
