"""Solution notebooks run in this process, as a learner's kernel would hold them: the fixture behind the checks'
tests, the demo's and the benchmarks' namespaces. Grading never imports it."""
from __future__ import annotations

import sys
import types

import nbformat

from autograder.contract import assignments
from autograder.course import solution_version
from autograder.trust.verdicts import bindings, definitions


def solution_namespace(name: str, edits: dict | None = None, extra: str = "") -> dict:
    """Run a solution notebook's code as a learner's kernel would hold it, for tests and benchmarks.

    Runs the given cells before the first exercise whole, every answer cell, and the definitions of the given cells
    after it (autograder.trust.verdicts.definitions: a class such as notebook 2's ``Module``), skipping test cells;
    ``edits`` ({grade_id: [(right, wrong), ...]}) are applied to answer cells first, then ``extra`` code runs (for
    example a correct alternative that redefines a function).

    Raises:
        ValueError: an edit no longer matches the solution, or names no answer cell.
    """
    nb = solution_version(nbformat.read(assignments()[name], as_version=4))
    edits = dict(edits or {})
    module = types.ModuleType("__learner__")  # registered, as a notebook's __main__ is: dataclasses look it up
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    seen_answer, unbound = False, set()
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        seen_answer = seen_answer or meta.get("solution", False)
        if cell.cell_type != "code" or meta.get("grade"):
            continue
        given = seen_answer and not meta.get("solution")
        source = definitions(cell.source, unbound) if given else cell.source
        for right, wrong in edits.pop(meta.get("grade_id"), []):
            if right not in source:
                raise ValueError(f"edit no longer matches the solution of {meta.get('grade_id')}: {right!r}")
            source = source.replace(right, wrong)
        if not given:
            unbound -= bindings(source)
        exec(compile(source, f"<{name}:{cell.id}>", "exec", dont_inherit=True), namespace)
    if edits:
        raise ValueError(f"edits for unknown answer cells: {sorted(edits)}")
    exec(compile(extra, "<alternative>", "exec", dont_inherit=True), namespace)
    return namespace
