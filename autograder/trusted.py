"""Trusted verdicts: each exercise's check runs here, against the submission's code running in a sandboxed worker.

For one exercise the worker gets the learner's program up to that exercise's test cell -- answer cells whole,
every other cell reduced to its definitions (imports, functions, classes, attribute patches, constants), so
demonstrations and training runs are not repeated -- then the test cell's hidden ``check(...)`` call is evaluated
with its arguments taken from the worker, and the course's visible asserts run in the worker. Each exercise gets a
fresh worker: one exercise's crash, loop or tampering cannot touch another's.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from autograder import remote, sandbox
from autograder.course import exercise_id

HIDDEN_BLOCK = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
LOAD_TIMEOUT_S = 30.0  # one cell's top level: definitions take milliseconds; this only stops a runaway loop
VERIFIED = "all hidden checks passed (verified outside your notebook's kernel)."


@dataclass
class Verdict:
    exercise: str
    passed: bool
    message: str


@dataclass
class Cell:
    name: str      # what a learner recognises: the answer's grade id, or "cell 7"
    code: str
    answer: bool


def check_call(test_source: str) -> tuple[str, str] | None:
    """(exercise id, argument expression) of the hidden block's ``check("id", <expression>)``, if it has one."""
    start, end = test_source.find(HIDDEN_BLOCK[0]), test_source.find(HIDDEN_BLOCK[1])
    if start < 0 or end < 0:
        return None
    for node in ast.walk(ast.parse(test_source[start:end])):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check" and len(node.args) == 2:
            return ast.literal_eval(node.args[0]), ast.unparse(node.args[1])
    return None


def visible_part(test_source: str) -> str:
    """A test cell's source without its hidden block."""
    start, end = test_source.find(HIDDEN_BLOCK[0]), test_source.find(HIDDEN_BLOCK[1])
    if start < 0 or end < 0:
        return test_source
    return test_source[:start] + test_source[end + len(HIDDEN_BLOCK[1]):]


def definitions(code: str) -> str:
    """The statements of a non-answer cell that later code may need: imports, defs, classes, patches, constants."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ""
    kept = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.ClassDef)) or _patch_or_constant(s)]
    return "\n".join(ast.unparse(s) for s in kept)


def _patch_or_constant(statement) -> bool:
    if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.value is None:
        return False
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    if all(isinstance(t, ast.Attribute) for t in targets):
        return True  # Tensor.__add__ = add
    try:
        ast.literal_eval(statement.value)
    except ValueError:
        return False
    return True


def program(nb) -> tuple[list[Cell], dict[str, tuple[int, str, str]]]:
    """The learner program of a (sanitized) submission and, per graded test cell, (position, test source, id).

    Returns:
        cells: in notebook order; test cells are left out.
        tests: exercise id -> (number of program cells before its test cell, test cell source, grade id).
    """
    cells, tests = [], {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            tests[exercise_id(meta["grade_id"])] = (len(cells), cell.source, meta["grade_id"])
        elif meta.get("solution"):
            cells.append(Cell(meta.get("grade_id", f"cell {index + 1}"), cell.source, answer=True))
        else:
            code = definitions(cell.source)
            if code:
                cells.append(Cell(f"cell {index + 1}", code, answer=False))
    return cells, tests


def verdicts(nb, hide: tuple[Path, ...] = ()) -> dict[str, Verdict]:
    """The trusted verdict of every exercise of a sanitized submission whose test cell calls a check."""
    from autograder.checks import has_check

    cells, tests = program(nb)
    found = {}
    for exercise, (position, test_source, _) in tests.items():
        call = check_call(test_source)
        if call is None or not has_check(call[0]):
            continue
        found[exercise] = judge(call[0], call[1], cells[:position], visible_part(test_source), hide)
    return found


def judge(check_id: str, expression: str, cells: list[Cell], visible: str, hide: tuple[Path, ...] = ()) -> Verdict:
    """Run one exercise's check against a fresh worker holding ``cells``; the visible asserts run last."""
    from autograder.checks import check
    from autograder.diagnostics import CheckFailure

    with remote.Worker(hide=hide) as worker:
        problems = load(worker, cells)
        try:
            answer = worker.evaluate(expression)
            check(check_id, answer, quiet=True)
        except CheckFailure as failure:
            return Verdict(check_id, False, explain(failure.message, problems))
        except remote.Stopped as stop:
            return Verdict(check_id, False, explain(stopped_message(stop), problems))
        except NameError as error:
            return Verdict(check_id, False, explain(f"{error}: did an earlier cell fail, or was it renamed?", problems))
        except Exception as error:  # the expression itself could not be evaluated (a learner name bound to junk)
            return Verdict(check_id, False, explain(f"your answer could not be used ({type(error).__name__}: {error})",
                                                    problems))
        try:
            worker.run(visible, f"<test_{check_id}>")
        except remote.Stopped as stop:
            return Verdict(check_id, False, f"visible test: {stopped_message(stop)}")
        except AssertionError as error:
            return Verdict(check_id, False, f"visible test failed{': ' + str(error) if str(error) else ''}")
        except Exception as error:
            return Verdict(check_id, False, f"visible test raised {type(error).__name__}: {error}")
    return Verdict(check_id, True, VERIFIED)


def load(worker: remote.Worker, cells: list[Cell]) -> list[str]:
    """Run the learner program in the worker; returns what went wrong, cell by cell (the grade decides later)."""
    problems = []
    for cell in cells:
        try:
            if cell.answer:
                worker.run(cell.code, f"<{cell.name}>", timeout=LOAD_TIMEOUT_S)
            else:
                worker.request({"op": "given", "code": cell.code, "name": f"<{cell.name}>"}, timeout=LOAD_TIMEOUT_S)
        except remote.Stopped as stop:
            problems.append(f"{cell.name}: {stopped_message(stop, LOAD_TIMEOUT_S)}")
            break
        except (Exception, remote.LearnerError) as error:
            problems.append(f"{cell.name} raised {getattr(error, 'type_name', type(error).__name__)}: {error}")
    return problems


def stopped_message(stop: remote.Stopped, seconds: float = remote.DEFAULT_TIMEOUT_S) -> str:
    if stop.timeout:
        return f"your code did not finish within {seconds:g} s: is there a loop that never ends?"
    return stop.reason


def explain(message: str, problems: list[str]) -> str:
    if not problems:
        return message
    return message + "\nWhile running your notebook's cells: " + "; ".join(problems)


def sandbox_warning() -> str | None:
    return sandbox.warning()
