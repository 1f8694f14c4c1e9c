"""Every rejection and acceptance case of the check tests, as data another path can run: the parity harness's input.

The check tests (tests/checks/test_checks_*.py) declare their cases the way a learner's slip looks: a solution
notebook with text edits and extra code (``solution_namespace``), or answer objects dropped into it (``learner``),
handed to ``check`` (must pass) or ``rejects`` (must fail, naming phrases). :func:`harvest` reads those cases out of
the tests themselves instead of a second copy that could drift: it calls each test function once per parameter set
with the builders and both verdict helpers replaced by recorders, so nothing is checked and nothing is executed but
the test body. A test body that needs a fixture, or reaches into a namespace before judging it, records nothing; the
harness lists those (``Harvest.unread``) so a new kind of test is noticed rather than silently skipped.

A case becomes a learner program with :func:`program_cells`: the solution notebook's cells as
``autograder.tools.solutions.solution_namespace`` runs them, the edits applied, then one more answer cell holding
the extra code or the answer objects' source.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import inspect
import itertools
import textwrap
import types
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.contract import assignments, exercise_id
from autograder.course import solution_version
from autograder.tools.exercise_tests import assignment_of
from autograder.trust.verdicts import Cell, bindings, definitions, python
from conftest import flat

MODULES = ("test_checks_nudging", "test_checks_scalar_engine", "test_checks_backward_functions",
           "test_checks_tensor_engine", "test_checks_modules_mnist")
PLAIN_DATA = (type(None), type(Ellipsis), bool, int, float, str, list, tuple, dict)


@dataclass(frozen=True)
class Recipe:
    """How a check test built a namespace: a solution notebook, edits to its answer cells, extra code, and answer
    objects by name (``conftest.learner``)."""
    notebook: str
    edits: dict = field(default_factory=dict)
    extra: str = ""
    objects: dict = field(default_factory=dict)
    source: types.ModuleType | None = None  # the test module the objects were defined in
    given: str = ""  # a cell of the learner's own after the answers: the kernel runs it whole (see program_cells)


@dataclass(frozen=True)
class Case:
    id: str               # "<test module>::<test function>[<parameter set>]" and, past the first, "#<call>"
    exercise: str
    recipe: Recipe
    passes: bool          # check(...) in the test: must pass; rejects(...): must fail
    phrases: tuple = ()   # what the diagnosis of a rejection must contain


@dataclass
class Harvest:
    cases: list[Case]
    unread: dict[str, str]  # test (function[parameters]) -> why it gave no case


def harvest(modules=MODULES) -> Harvest:
    """Every case of the named check test modules (imported from tests/checks/, which must be on sys.path)."""
    found = Harvest([], {})
    for name in modules:
        module = importlib.import_module(name)
        for function_name, function in vars(module).items():
            if function_name.startswith("test_") and inspect.isfunction(function):
                _read_test(module, function, found)
    return found


def _read_test(module, function, found: Harvest) -> None:
    parameters = list(inspect.signature(function).parameters)
    for index, arguments in enumerate(_parameter_sets(function)):
        test_id = f"{module.__name__}::{function.__name__}[{index}]"
        if "capsys" in parameters:  # read after the check, for its "passed" line: a recorder prints none
            arguments = {**arguments, "capsys": _PassedLine()}
        fixtures = [p for p in parameters if p not in arguments]
        if fixtures:
            found.unread[test_id] = f"needs the fixtures {fixtures}"
            continue
        calls: list[tuple] = []
        with _recording(module, calls):
            try:
                function(**arguments)
            except Exception as error:  # a body that reads the recorders' stand-ins: it judged nothing we can copy
                if not calls:
                    found.unread[test_id] = f"{type(error).__name__}: {str(error)[:120]}"
        for number, (exercise, recipe, passes, phrases) in enumerate(calls):
            if not isinstance(recipe, Recipe):
                found.unread[f"{test_id}#{number}"] = "judges a namespace no builder made"
                continue
            found.cases.append(Case(test_id + (f"#{number}" if number else ""), exercise, recipe, passes,
                                    tuple(phrases)))


class _PassedLine:
    """Stands for pytest's capsys in a test that reads the line a passing check prints."""

    def readouterr(self):
        return types.SimpleNamespace(out="all hidden checks passed", err="")


def _parameter_sets(function) -> list[dict]:
    """The keyword arguments of each call pytest makes of ``function`` (the product of its parametrize marks)."""
    axes = []
    for mark in getattr(function, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = []
        for value in values:
            value = value.values if hasattr(value, "values") and hasattr(value, "marks") else value  # pytest.param
            rows.append(dict(zip(names, value if len(names) > 1 else [value])))
        axes.append(rows)
    return [dict(itertools.chain.from_iterable(r.items() for r in combo)) for combo in itertools.product(*axes)]


@contextlib.contextmanager
def _recording(module, calls: list):
    """Inside, the module's builders return Recipes and its check/rejects record what they were given."""
    import autograder.tools.solutions as solutions

    def build(notebook, edits=None, extra=""):
        return Recipe(notebook, {k: list(v) for k, v in (edits or {}).items()}, extra)

    def learner(exercise_id, *answer):
        from autograder.checks import answer_names

        names = answer_names(exercise_id)
        own = answer[0] if len(answer) == 1 and len(names) > 1 and isinstance(answer[0], dict) \
            else dict(zip(names, answer))
        return Recipe(assignment_of(exercise_id), objects=dict(own), source=module)

    replaced = {"solution_namespace": build, "learner": learner,
                "check": lambda exercise, namespace, **_: calls.append((exercise, namespace, True, ())),
                "rejects": lambda exercise, namespace, *phrases: calls.append((exercise, namespace, False,
                                                                               flat(phrases))) or ""}
    saved = {name: vars(module)[name] for name in replaced if name in vars(module)}
    kept = solutions.solution_namespace
    vars(module).update({name: replaced[name] for name in saved})
    solutions.solution_namespace = build  # a test that imports it inside its body (notebook 3's ``solution``)
    try:
        yield
    finally:
        vars(module).update(saved)
        solutions.solution_namespace = kept


# ------------------------------------------------------------------------------------------------ programs

def program_cells(recipe: Recipe, exercise: str | None = None, whole: bool = False) -> list[Cell]:
    """The learner program of a case, cell by cell, as the trusted grader and a kernel both run it.

    Given cells keep only their definitions (``autograder.trust.verdicts.definitions``: no demonstration, no training
    run); answer cells run whole, with the recipe's edits; the extra code or the answer objects come last, in an
    answer cell of their own, and then the recipe's own given cell. Answer cells are read as plain Python
    (``verdicts.python``) and that given cell reduced to its definitions, as grading reads them, or, ``whole``, all
    three kept as a learner typed them, for a kernel (which gets the solution's given cells reduced too: they define
    the same either way). With
    ``exercise``, the program stops at that exercise's test cell, as a grade's does
    (``autograder.trust.verdicts.program``).

    Raises:
        ValueError: an edit no longer matches the solution (the check test itself fails the same way).
    """
    nb = _solution_notebook(recipe.notebook)
    edits = {k: list(v) for k, v in recipe.edits.items()}
    cells, cut, unbound = [], False, frozenset()
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        cut = cut or (meta.get("grade") and not meta.get("solution") and exercise_id(meta["grade_id"]) == exercise)
        if cell.cell_type != "code" or meta.get("grade") and not meta.get("solution"):
            continue
        source = cell.source
        if meta.get("solution"):
            for right, wrong in edits.pop(meta["grade_id"], []):
                if right not in source:
                    raise ValueError(f"edit no longer matches the solution of {meta['grade_id']}: {right!r}")
                source = source.replace(right, wrong)
            code, answer, name = source if whole else _python(source), True, meta["grade_id"]
            unbound -= _bindings(_python(source))
        else:
            (code, unbound), answer, name = _definitions(source, unbound), False, f"cell {index + 1}"
        if code and not cut:
            cells.append(Cell(name, code, answer))
    if edits:
        raise ValueError(f"edits for unknown answer cells: {sorted(edits)}")
    added = recipe.extra + (answer_source(recipe.objects, recipe.source) if recipe.objects else "")
    if added.strip():
        cells.append(Cell("your answer", added if whole else _python(added), answer=True))
        unbound -= _bindings(_python(added))
    code = recipe.given if whole else _definitions(recipe.given, unbound)[0]
    if code:
        cells.append(Cell("your cell", code, answer=False))
    return cells


# Read and transformed once per test process: every case of a notebook starts from the same cells (the harness
# builds over 400 programs), and none of these is changed by a caller.
@functools.lru_cache(maxsize=None)
def _solution_notebook(notebook: str) -> nbformat.NotebookNode:
    return solution_version(nbformat.read(assignments()[notebook], as_version=4))


_python = functools.lru_cache(maxsize=None)(python)


@functools.lru_cache(maxsize=None)
def _definitions(source: str, unbound: frozenset) -> tuple[str, frozenset]:
    """``definitions`` of a given cell, and the names left unbound after it (keyed by what was unbound before)."""
    left = set(unbound)
    return definitions(python(source), left), frozenset(left)


_bindings = functools.lru_cache(maxsize=None)(bindings)


def answer_source(objects: dict, module: types.ModuleType) -> str:
    """Python source that binds each answer name to a copy of its object: plain data by value, a function by its
    source (with the test module's helpers and imports it uses, defined first)."""
    lines, defined = [], set()
    for name, value in objects.items():
        lines.append(f"{name} = {_expression(value, module, lines, defined)}")
    return "\n".join(lines) + "\n"


def _expression(value, module, lines: list[str], defined: set) -> str:
    if isinstance(value, types.FunctionType):
        _define_helpers(value, module, lines, defined)
        if value.__name__ == "<lambda>":
            return _lambda_source(value)
        if value.__name__ not in defined:
            lines.append(textwrap.dedent(inspect.getsource(value)))
            defined.add(value.__name__)
        return value.__name__
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_expression(v, module, lines, defined)}" for k, v in value.items()) + "}"
    if isinstance(value, PLAIN_DATA):
        return repr(value)
    raise TypeError(f"cannot copy a {type(value).__name__} answer into another process")


def _define_helpers(function, module, lines: list[str], defined: set) -> None:
    """The module-level names ``function`` reads from its test module: imports and functions, defined first."""
    for name in sorted(_global_names(function.__code__)):
        value = vars(module).get(name)
        if name in defined or value is None or not name.isidentifier():  # pytest's assert rewriting adds "@py_..."
            continue
        if isinstance(value, types.ModuleType):
            lines.append(f"import {value.__name__} as {name}")
            defined.add(name)
        elif isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
            defined.add(name)
            _define_helpers(value, module, lines, defined)
            lines.append(textwrap.dedent(inspect.getsource(value)))


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _global_names(constant)
    return names


def _lambda_source(function) -> str:
    """A lambda's own text, found in its module's syntax tree by line and parameter names."""
    path = inspect.getsourcefile(function)
    text = Path(path).read_text()
    parameters = list(function.__code__.co_varnames[:function.__code__.co_argcount])
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Lambda) and node.lineno == function.__code__.co_firstlineno \
                and [a.arg for a in node.args.args] == parameters:
            return "(" + ast.get_source_segment(text, node) + ")"
    raise ValueError(f"no lambda with parameters {parameters} at {path}:{function.__code__.co_firstlineno}")
