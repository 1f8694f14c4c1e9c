"""Trusted verdicts: each exercise's check runs here, against the submission's code running in a sandboxed worker.

For one exercise the worker gets the learner's program up to that exercise's test cell -- answer cells whole,
every other cell reduced to its definitions (imports, functions, classes, attribute patches, constants), so
demonstrations and training runs are not repeated -- then the exercise's check runs here, reading the names it
declares (``autograder.checks.answer_names``) from the worker. Each exercise gets a fresh worker, forked from a clean
zygote (``remote.Zygote``) that kills whatever the last worker left: one exercise's crash, loop or tampering cannot
touch another's.
"""
from __future__ import annotations

import ast
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from autograder.checks import answer_names, causes, check, has_check, prerequisites
from autograder.checks.harness.diagnostics import CheckFailure, case_seed, quoted
from autograder.checks.harness.faults import CourseError
from autograder.trust import remote, wire
from autograder.contract import exercise_id, nbgrader_meta, with_cause

HIDDEN_BLOCK = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
LOAD_TIMEOUT_S = 30.0  # CPU seconds of one cell's top level: definitions take milliseconds; this stops a runaway loop
VERIFIED = "all hidden checks passed (verified outside your notebook's kernel)."


@dataclass
class Verdict:
    exercise: str
    passed: bool
    message: str  # a failure's ends with the line ``cause: <id>`` (autograder.checks.causes)
    course_error: bool = False  # the check failed by itself (harness.faults.CourseError): the course's bug


@dataclass
class Cell:
    name: str      # what a learner recognises: the answer's grade id, or "cell 7"
    code: str
    answer: bool


def checked_exercise(test_source: str) -> str | None:
    """The exercise id of the hidden block's ``check("id", globals())``, if it has one."""
    start, end = test_source.find(HIDDEN_BLOCK[0]), test_source.find(HIDDEN_BLOCK[1])
    if start < 0 or end < 0:
        return None
    for node in ast.walk(ast.parse(test_source[start:end])):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check" and node.args:
            return ast.literal_eval(node.args[0])
    return None


class WorkerNamespace(Mapping):
    """The learner's names, read from the worker when a check asks for them (as Remotes or plain data)."""

    def __init__(self, worker: remote.Worker):
        self.worker, self._read = worker, {}

    def __getitem__(self, name: str):
        if name not in self._read:
            if not name.isidentifier():
                raise KeyError(name)
            try:
                self._read[name] = self.worker.evaluate(name)
            except NameError:
                raise KeyError(name) from None
        return self._read[name]

    def __iter__(self):  # the checks look names up; they never list them
        return iter(self._read)

    def __len__(self) -> int:
        return len(self._read)


# What Python's own parser, literal_eval and unparse raise on code they cannot take (nested too deeply, a set of
# lists, ...): a cell that the kernel could not run either, so it defines nothing.
UNREADABLE = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError)


def definitions(code: str, unbound: set[str] | None = None) -> str:
    """The statements of a non-answer cell that later code may need: imports, defs, classes, patches, constants,
    ``del`` and ``setattr``/``delattr`` statements.

    ``unbound`` (updated in place, for the cells of one program in order): the names whose latest binding is a
    statement left out (``data = load()``), so the kernel holds a value for them that the worker does not. A statement
    that would read one when it runs (``x = data.x``, a default argument, a class body) is left out too, and the
    names it binds join them; what a kept statement binds or deletes leaves the set, as what an answer cell binds does
    (``bindings``). So nothing runs in the worker with a value the kernel no longer holds (the worker skips a
    statement that raises anyway: worker.run_given).

    A cell Python cannot parse, and a statement it cannot write back out, contribute nothing (never an exception:
    the cell is the learner's data)."""
    unbound = set() if unbound is None else unbound
    try:
        tree = ast.parse(code)
    except UNREADABLE:
        return ""
    kept = []
    for statement in tree.body:
        magic = _python_magic(statement)
        if magic is not None:  # %%time over a def, %time x = y: the kernel runs that code as if it were the cell
            kept.append(definitions(magic[0], unbound))
            continue
        if isinstance(statement, ast.Delete):  # a name the worker never got is unbound in both places after it
            gone = {t.id for t in statement.targets if isinstance(t, ast.Name) and t.id in unbound}
            unbound -= gone
            statement = ast.Delete([t for t in statement.targets if not (isinstance(t, ast.Name) and t.id in gone)])
            if not statement.targets:
                continue
        text = None
        if _defines(statement) and not _eager_reads(statement) & unbound:
            try:
                text = ast.unparse(statement)
            except UNREADABLE:
                pass
        if text is None:
            unbound |= bindings(statement)
        else:
            kept.append(text)
            unbound -= bindings(statement)
    return "\n".join(kept)


def _defines(statement) -> bool:
    return isinstance(statement, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
        or _patch_or_constant(statement) or _deletion(statement)


def _deletion(statement) -> bool:
    """``del name``, ``del Tensor.__add__``, ``setattr(f, "__code__", g.__code__)``, ``delattr(Tensor, "exp")``: what
    unbinds or patches, as the kernel runs it (red team 12: a given cell's setattr that broke an answer was left out,
    and the grade passed what the kernel failed)."""
    if isinstance(statement, ast.Delete):
        return all(_without_calls(target) for target in statement.targets)
    call = statement.value if isinstance(statement, ast.Expr) else None
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "autograder_forget" \
            and isinstance(call.func.value, ast.Call) and getattr(call.func.value.func, "id", None) == "get_ipython":
        return True  # %reset -f, %xdel name (_IPythonCalls): run by the worker too
    if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) in ("setattr", "delattr")
            and not call.keywords and len(call.args) == (3 if call.func.id == "setattr" else 2)):
        return False
    target, name, *value = call.args
    return isinstance(name, ast.Constant) and type(name.value) is str and _without_calls(target) \
        and all(isinstance(v, (ast.Name, ast.Attribute, ast.Lambda, ast.Constant)) for v in value)


def _eager_reads(statement) -> set[str]:
    """The names ``statement`` reads when it runs (or deletes): not those read only inside a function or lambda body,
    which run when called, but a def's decorators, defaults and annotations and a class's bases and body."""
    found, stack = set(), [statement]  # a walk of our own, not recursive: a learner's code may be deeply nested
    while stack:
        node = stack.pop()
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)  # SCALE += 1 reads SCALE
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Store):
                found.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            arguments = node.args
            stack += [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
            if not isinstance(node, ast.Lambda):
                every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg,
                         arguments.kwarg]
                stack += [*node.decorator_list, *(a.annotation for a in every if a is not None and a.annotation),
                          *([node.returns] if node.returns else [])]
        else:
            stack.extend(ast.iter_child_nodes(node))
    return found


# What binds a name where it stands, besides a Name stored or deleted (the names of defs, classes, imports, except
# and match captures); comprehensions, functions and classes have scopes of their own.
_OWN_SCOPE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
              ast.DictComp, ast.GeneratorExp)


def bindings(code) -> set[str]:
    """The module-level names a statement (or a cell's code, as text) binds or deletes when it runs, wherever it
    does so at the top level: ``x = ...``, ``for x in ...``, ``with ... as x``, ``import x``, ``def x``, ``except E as
    x``, ``case x``, ``del x``. Code that does not parse binds nothing."""
    if isinstance(code, str):
        try:
            code = ast.parse(code)
        except UNREADABLE:
            return set()
    found, stack = set(), [code]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {alias.asname or alias.name.split(".")[0] for alias in node.names if alias.name != "*"}
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            found.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            found.add(node.rest)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        if not isinstance(node, _OWN_SCOPE):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _python_magic(statement) -> tuple[str, str] | None:
    """The code of ``get_ipython().run_cell_magic("time", "", code)`` (what ``python`` makes of a magic) or of its
    line form, when the kernel runs that code in the notebook's namespace (wire's MAGICS_IN_NAMESPACE), with the
    option that changes how it runs (wire.RUN_OPTIONS, or ""); else None."""
    call = statement.value if isinstance(statement, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Call)
            and getattr(call.func.value.func, "id", None) == "get_ipython" and not call.keywords
            and all(isinstance(a, ast.Constant) and type(a.value) is str for a in call.args)):
        return None
    if call.func.attr == "autograder_run" and len(call.args) in (2, 3):  # a %time or %prun line python() has read
        return call.args[1].value, call.args[2].value if len(call.args) == 3 else ""
    magics = {"run_cell_magic": (wire.CELL_MAGICS_IN_NAMESPACE, 3), "run_line_magic": (wire.LINE_MAGICS_IN_NAMESPACE, 2)}
    if call.func.attr not in magics:  # red team 16: `?` alone is get_ipython().show_usage(), with no arguments
        return None
    names, arity = magics[call.func.attr]
    if len(call.args) != arity or call.args[0].value not in names:
        return None
    if arity == 3:
        return _cell_magic_code(*(a.value for a in call.args))
    return _line_magic_code(*(a.value for a in call.args))


def _line_magic_code(magic: str, line: str) -> tuple[str, str] | None:
    """The code IPython's ``%time`` or ``%prun`` runs of its ``line``, by IPython's own parser, with the option that
    changes how it runs (wire.RUN_OPTIONS, or ""); None when it refuses the line. A line %prun runs its line as
    %%prun does (red team 16)."""
    return _time_line_code(line) if magic == "time" else _cell_magic_code(magic, line, "")


def _time_line_code(line: str) -> tuple[str, str] | None:
    """The code IPython's ``%time`` runs of ``line`` (the words after its options), by IPython's own parser, and
    ``--no-raise-error`` when the line asks for it; None when IPython refuses the line."""
    from IPython.core.magic_arguments import parse_argstring
    from IPython.core.magics.execution import ExecutionMagics

    try:
        options, words = parse_argstring(ExecutionMagics.time, line, partial=True)
    except (Exception, SystemExit):
        return None
    return " ".join(words), wire.RUN_OPTIONS["time"] if options.no_raise_error else ""


def _cell_magic_code(magic: str, line: str, cell: str) -> tuple[str, str] | None:
    """The code IPython runs of cell magic ``magic`` given ``line``, by IPython's own parser of its line, with the
    option that changes how it runs (wire.RUN_OPTIONS, or ""); None when IPython refuses the line (red team 10:
    ``%%capture --no-d``, an abbreviation argparse takes, and ``%%time --no-raise-error`` run). ``%%prun`` runs the
    rest of its line before the cell (red team 12). What IPython refuses reaches the worker as the magic's call,
    which refuses it too (wire.runs_its_code)."""
    from IPython.core.magic_arguments import parse_argstring
    from IPython.core.magics.execution import ExecutionMagics

    if magic == "prun":  # parsed by IPython's own parse_options, which needs no shell
        try:
            options, rest = ExecutionMagics(None).parse_options(line, wire.GETOPT_MAGICS[magic], posix=False,
                                                                 list_all=True)
        except Exception:  # UsageError
            return None
        return f"{rest}\n{cell}", wire.run_option(magic, {f"-{o}" for o in options})
    function = getattr(ExecutionMagics, magic, None)
    if not hasattr(function, "parser"):
        return cell, ""
    try:
        if magic == "time":
            options, words = parse_argstring(function, line, partial=True)
            # a statement after %%time: UsageError
            return None if words else (cell, wire.RUN_OPTIONS["time"] if options.no_raise_error else "")
        parse_argstring(function, line)
        return cell, ""
    except (Exception, SystemExit):  # UsageError, and argparse's exit on --help
        return None


def _patch_or_constant(statement) -> bool:
    """``Tensor.__add__ = add`` (a class patched with a function), ``FULL_MNIST = False`` (a named constant),
    ``HALF = 1 / 2``, ``tanh = math.tanh``, ``SCALE += 1``, ``STEPS[0] = 1e-5``: a name, attribute or item given a
    value computed without a call (_without_calls), its targets too (red team 13: ``SCALE += 1`` left out made the
    grade judge an answer with another SCALE than the kernel's)."""
    if isinstance(statement, ast.AugAssign):
        targets = [statement.target]
    elif isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
        targets = [leaf for t in (statement.targets if isinstance(statement, ast.Assign) else [statement.target])
                   for leaf in _leaves(t)]
    else:
        return False
    if not all(isinstance(t, (ast.Name, ast.Attribute, ast.Subscript)) and _without_calls(t) for t in targets):
        return False
    try:
        ast.literal_eval(statement.value)
    except UNREADABLE:
        return _without_calls(statement.value)
    return True


# What a kept name's value may be made of besides a literal. Never a call, so a given cell's data loading or training
# stays out; a learner's own helper cell (``HALF = 1 / 2``, ``tanh = math.tanh``) is read as the kernel read it, not
# left out to fail the answers that use it with NameError (red team 7). A lambda is a function, like a def.
_COMPUTED = (ast.Constant, ast.Name, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Slice, ast.Tuple,
             ast.Load, ast.Store, ast.Del, ast.operator, ast.unaryop)  # Store, Del: a kept statement's targets


def _without_calls(value) -> bool:
    stack = [value]  # a walk of our own, not recursive: a learner's expression may be thousands of levels deep
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Lambda):
            continue  # its body runs only when called
        if not isinstance(node, _COMPUTED):
            return False
        stack.extend(ast.iter_child_nodes(node))
    return True


def python(source: str) -> str:
    """A cell's source as plain Python: IPython's magics and shell escapes become calls, as the kernel sees them, and
    the calls of magics the worker runs itself carry what IPython's own parser reads in their lines (_IPythonCalls).

    A cell IPython cannot take (inconsistent indentation makes it raise, or 500 magic lines) comes back as it is: the
    worker then raises what the kernel did, in that cell alone. Never raises."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        code = TransformerManager().transform_cell(source)
    except Exception:  # red team 15: RuntimeError, "Input transformation still changing after 500 iterations"
        return source
    try:
        tree = ast.parse(code)
    except UNREADABLE:
        return code
    if len(tree.body) == 1:
        magic = _python_magic(tree.body[0])
        # a %%time cell (or a %time line): the kernel runs its code as IPython code, its own magics included (red
        # team 9: a %time line in a %%time cell was a SyntaxError in the worker), as the cell itself -- unless an
        # option changes how it runs (%time --no-raise-error, %prun -r: red team 18)
        name = tree.body[0].value.args[0].value if magic is not None else None
        if magic is not None and not magic[1] and name != "prun":  # %prun also catches SystemExit: the worker's does
            return python(magic[0])
        if magic is not None:
            return _run_call(name, *magic)
    calls = _IPythonCalls()
    try:
        tree = calls.visit(tree)
        return ast.unparse(tree) if calls.changed else code
    except UNREADABLE:
        return code


def _shell_call(node) -> tuple[str, list[str]] | None:
    """``("run_line_magic", ["timeit", "-n1 x"])`` for a call ``get_ipython().run_line_magic("timeit", "-n1 x")``
    whose arguments are all text written in the cell; else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call)
            and getattr(node.func.value.func, "id", None) == "get_ipython" and not node.func.value.args
            and not node.keywords and all(isinstance(a, ast.Constant) and type(a.value) is str for a in node.args)):
        return None
    return node.func.attr, [a.value for a in node.args]


class _IPythonCalls(ast.NodeTransformer):
    """Wherever they stand in a cell (an assignment, a block), the calls of %time, %prun, %timeit and %%timeit, of
    the magics that unbind names (%reset, %reset_selective, %xdel) and of ``run_cell`` with text written in the cell
    become calls of the worker's shell with what IPython's own parser reads in them (red team 15: a ``%timeit`` in an
    assignment, ``%reset -sf`` and ``%xdel name -n`` split apart from the kernel). A line IPython's parser refuses stays the
    magic's call: the worker refuses it too (wire.runs_its_code)."""

    changed = False

    def visit_Call(self, node):
        self.generic_visit(node)
        found = _shell_call(node)
        method, args = found if found else (None, [])
        replacement = None
        if method == "run_line_magic" and len(args) == 2 and args[0] == "timeit":
            replacement = _timeit_call(args[1], None)
        elif method == "run_cell_magic" and len(args) == 3 and args[0] == "timeit":
            replacement = _timeit_call(args[1], args[2])
        elif method == "run_line_magic" and len(args) == 2 and args[0] in wire.LINE_MAGICS_IN_NAMESPACE:
            found = _line_magic_code(*args)  # red team 16: `H = %time 1e-5`, `%time f = g --no-raise-error`
            if found is not None:
                replacement = _run_call(args[0], *found)
        elif method == "run_line_magic" and len(args) == 2 and args[0] in wire.FORGETTING_MAGICS:
            replacement = f"get_ipython().autograder_forget({args[0]!r}, {_forgetting(*args)!r})"
        elif method == "run_cell" and len(args) == 1:
            replacement = f"get_ipython().run_cell({python(args[0])!r})"
        if replacement is None:
            return node
        self.changed = True
        return ast.copy_location(ast.parse(replacement, mode="eval").body, node)


def _run_call(magic: str, code: str, option: str) -> str:
    """The worker's call for a %time or %prun whose code and run option (wire.RUN_OPTIONS) IPython's parser read."""
    return f"get_ipython().autograder_run({magic!r}, {python(code)!r}{f', {option!r}' if option else ''})"


def _timeit_call(line: str, cell: str | None) -> str | None:
    """The worker's call for IPython's %timeit (``cell`` None) or %%timeit: its options, setup and statement, read
    as IPython reads them (``Shell.autograder_timeit`` runs them as IPython does); None when IPython refuses the
    line."""
    from IPython.core.inputtransformer2 import TransformerManager
    from IPython.core.magics.execution import ExecutionMagics

    try:
        options, rest = ExecutionMagics(None).parse_options(line, wire.GETOPT_MAGICS["timeit"], posix=False,
                                                            strict=False, preserve_non_opts=True)
        if cell is None and rest == "":
            return "None"  # IPython times nothing
        setup, statement = ("pass", rest) if cell is None else (rest, cell)
        setup, statement = (TransformerManager().transform_cell(part) for part in (setup, statement))
    except Exception:  # UsageError, or a part IPython's transformer cannot take
        return None
    return f"get_ipython().autograder_timeit({setup!r}, {statement!r}, {dict(options)!r})"


def _forgetting(magic: str, line: str) -> dict:
    """What %reset, %reset_selective or %xdel is asked by ``line``, by IPython's own parser (wire.forgetting)."""
    from IPython.core.magics.execution import ExecutionMagics

    short, long = wire.FORGETTING_OPTIONS[magic]
    try:
        options, rest = ExecutionMagics(None).parse_options(line, short, *long, **({"mode": "list"} if magic == "reset"
                                                                                    else {}))
    except Exception as error:  # UsageError
        return {"refused": f"%{magic}: {error}"}
    return wire.forgetting(magic, set(options), rest)


def _leaves(node) -> list:
    """The elements of a (nested) tuple expression, or the expression itself."""
    return [leaf for element in node.elts for leaf in _leaves(element)] if isinstance(node, ast.Tuple) else [node]


# Where SeparateCopiedCells keeps the grade id of a copied cell, whose nbgrader metadata it removes: a copy of an
# answer cell still runs in full, as in the kernel. Learner data like the rest: it only ever names an answer cell
# of the course to be run in full, which is what the kernel does with any cell.
COPY_OF = "copy_of"


def program(nb, course_nb) -> tuple[list[Cell], dict[str, tuple[int, str]]]:
    """The learner program of a submission, with the course's own test cells.

    Cells are recognised by the grade ids of the course's source notebook, never by the submission's flags, so a
    learner who unmarks, re-marks or edits a test cell changes nothing: test sources come from the course.

    Returns:
        cells: in the submission's order, test cells left out.
        tests: exercise id -> (number of program cells before its test cell, the course's test cell source).
    """
    course = {c.metadata["nbgrader"]["grade_id"]: c for c in course_nb.cells
              if c.metadata.get("nbgrader", {}).get("grade_id")}
    answers = {g for g, c in course.items() if c.metadata["nbgrader"].get("solution")}
    tests = {g: c.source for g, c in course.items() if c.metadata["nbgrader"].get("grade")
             and not c.metadata["nbgrader"].get("solution")}
    cells, found, copied, unbound = [], {}, set(), set()
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        copy_of = cell.metadata.get(COPY_OF)  # an answer's copy only, never a test's (red team 10)
        copied_answer = copy_of if isinstance(copy_of, str) and copy_of in answers else None
        grade_id = nbgrader_meta(cell).get("grade_id") or copied_answer
        if grade_id in tests and exercise_id(grade_id) not in found:
            found[exercise_id(grade_id)] = (len(cells), tests[grade_id])
        elif grade_id in answers:
            # Every pasted copy too, in full, as the kernel runs it (red team 10: a copy's setattr loop was left out).
            name = f"{grade_id} (copy, cell {index + 1})" if grade_id in copied else grade_id
            cells.append(Cell(name, python(cell.source), answer=True))
            copied.add(grade_id)
            unbound -= bindings(cells[-1].code)
        elif grade_id not in tests:
            code = definitions(python(cell.source), unbound)
            if code:
                cells.append(Cell(f"cell {index + 1}", code, answer=False))
    for grade_id, source in tests.items():  # a deleted test cell is still graded, after everything
        found.setdefault(exercise_id(grade_id), (len(cells), source))
    return cells, found


def verdicts(nb, course_nb, budget_s: float = remote.SUBMISSION_BUDGET_S, *, secret: bytes) -> dict[str, Verdict]:
    """The trusted verdict of every exercise whose course test cell calls a check.

    All the exercises' workers share one budget of ``budget_s`` CPU seconds (and its wall-clock backstop): once it
    is used up, the exercise being checked and every one after it fail with that reason. An exercise the grader
    cannot check (its worker does not start, or the grader itself fails) fails with the reason. Never raises for
    anything in ``nb``.

    ``secret`` is the course's grading secret (autograder.trust.secret): it keys the randomized cases' seed
    (program_seed), so a learner cannot compute which cases a submission will be graded on.
    """
    cells, tests = program(nb, course_nb)
    found, poisoned, settled = {}, {}, {}  # settled: exercise -> (its latest verdict, the program position it judged)
    budget = remote.Budget(budget_s, "the checks of this notebook")
    seed = program_seed(cells, secret)
    with remote.Zygote() as zygote:
        for exercise, (position, test_source) in tests.items():
            check_id = checked_exercise(test_source)
            if check_id is None or not has_check(check_id):
                continue
            run = Judging(cells[:position], poisoned, {}, zygote, budget,
                          earlier={e: settled[e] for e in _built_on(check_id) if e in settled})
            with case_seed(seed):
                found[exercise] = judged(check_id, run)
            settled.update({e: (verdict, position) for e, verdict in run.settled.items()})
    return found


def _built_on(exercise: str) -> set[str]:
    """Every exercise whose verdict the check of ``exercise`` may consult: what it builds on, and what those build on."""
    found, stack = set(), list(prerequisites(exercise))
    while stack:
        earlier = stack.pop()
        if earlier not in found:
            found.add(earlier)
            stack.extend(prerequisites(earlier))
    return found


def program_seed(cells: list[Cell], secret: bytes) -> int:
    """The case seed of a learner program: a 60-bit int, an HMAC keyed with the course's ``secret`` of every cell
    that reaches the worker, in order.

    Answer cells count whole and every other cell by the definitions kept from it (what ``program`` returns), each
    with its kind, since the worker runs the two differently, and its name: the worker compiles the cell under it
    ("cell 12"), so code can read its own cell's position (``__code__.co_filename``), and positions must not carry
    what the seed does not see. The same submission always gets the same cases in one course, so the
    same grade; a cell added, removed or changed anywhere in what the worker runs gives other cases, so a table of
    answers recorded from one grade, pasted into any cell, is checked on inputs it does not hold. Without the
    secret the seed cannot be computed, so no edit can be tried out until the drawn cases miss a bug.
    """
    text = json.dumps([["answer" if c.answer else "given", c.name, c.code] for c in cells])  # unambiguous
    return int(hmac.new(secret, text.encode(), hashlib.sha256).hexdigest()[:15], 16)


@dataclass
class Judging:
    """What one exercise's check is run with: the cells before its test cell, and what the submission shares."""
    cells: list[Cell]
    poisoned: dict[str, str]    # cells whose top level killed or stalled a worker -> why (see judge)
    settled: dict               # the verdicts this check may reuse, then every verdict it reaches (checks.check)
    zygote: remote.Zygote
    budget: remote.Budget       # the submission's CPU seconds, shared by every worker
    earlier: dict = field(default_factory=dict)  # exercise built on -> (its latest verdict, its program position)


def judged(check_id: str, run: Judging) -> Verdict:
    """judge, failing closed: an exercise whose check could not be run fails with the reason, never passes."""
    try:
        exhausted = run.budget.exhausted()
        if exhausted:
            return Verdict(check_id, False, with_cause(exhausted, causes.of_stop(exhausted)))
        return judge(check_id, run)
    except remote.Overloaded as overloaded:  # the machine's fault: no verdict, and the reason says so
        return Verdict(check_id, False, with_cause(overloaded.reason, causes.COURSE_ERROR))
    except remote.Unavailable as unavailable:
        return Verdict(check_id, False, with_cause(f"{unavailable} Ask your instructor to grade it again.",
                                                   causes.COURSE_ERROR))
    except remote.Stopped as stop:  # the worker ended where judge does not look for it (red team 13: at a mark)
        return Verdict(check_id, False, with_cause(stop.reason, causes.of_stop(stop.reason)))
    except Exception as error:  # the grader's own failure: no verdict, so no points, and the reason
        return Verdict(check_id, False, with_cause(f"the grader could not check this exercise ({type(error).__name__}: "
                                                   f"{str(error)[:200]}). Ask your instructor to grade it again.",
                                                   causes.COURSE_ERROR))


def judge(check_id: str, run: Judging) -> Verdict:
    """Run one exercise's check against a fresh worker holding ``cells``.

    The test cell's visible asserts are not run here: they use torch as a reference, and they can only fail a
    submission, so the kernel's run of them is good enough (TrustedVerdicts counts a failure there).

    ``run.poisoned`` maps cells whose top level killed or stalled a worker to why; they are left out from then on
    (and reported), so one runaway cell costs its own exercise, not every exercise after it. ``run.earlier`` holds
    the latest verdicts of the exercises this one builds on; those that still stand (reusable) go into
    ``run.settled``, so they are not checked again (``autograder.checks.check``), and every verdict reached is
    added there.

    Raises:
        remote.Unavailable: a worker could not be started.
    """
    marks = {e: position for e, (verdict, position) in run.earlier.items() if verdict is None}
    while True:
        worker = remote.Worker(zygote=run.zygote, shared=run.budget)
        try:
            problems, culprit, judged_objects = load(worker, run.cells, run.poisoned, marks)
        except remote.Overloaded:
            worker.close()
            raise
        if culprit is None:
            break
        worker.close()
        exhausted = run.budget.exhausted()
        if exhausted:  # the runaway cell used up the submission's budget: nothing more is checked
            return Verdict(check_id, False, explain(with_cause(exhausted, causes.of_stop(exhausted)), problems))
        run.poisoned[culprit] = problems[-1]
    problems = [f"{why} -- so that cell was left out" for name, why in run.poisoned.items()
                if any(c.name == name for c in run.cells)] + problems
    with worker:
        try:
            run.settled.update(reusable(worker, run, judged_objects))
            check(check_id, WorkerNamespace(worker), quiet=True, settled=run.settled)
        except CheckFailure as failure:
            return Verdict(check_id, False, explain(failure.message, problems), isinstance(failure, CourseError))
        except remote.Overloaded:
            raise
        except remote.Stopped as stop:  # reading a name stalled or killed the worker
            return Verdict(check_id, False, explain(with_cause(stop.reason, causes.of_stop(stop.reason)), problems))
    return Verdict(check_id, True, VERIFIED)


def load(worker: remote.Worker, cells: list[Cell], poisoned: dict[str, str],
         marks: dict[str, int]) -> tuple[list[str], str | None, dict[str, tuple | None]]:
    """Run the learner program in the worker, cells in ``poisoned`` left out.

    ``marks``: exercise -> a position in ``cells``; the objects of the exercise's names are read when the program
    reaches it (see reusable).

    Returns:
        what went wrong, cell by cell (the checks decide what it costs), the cell that stopped the worker, and the
        objects read at each mark.
    """
    problems, judged_objects = [], {}
    for index, cell in enumerate([*cells, None]):
        try:
            judged_objects.update({e: objects(worker, e) for e, at in marks.items() if at == index})
        except remote.Stopped as stop:  # reading an earlier answer ended the worker: the check will find it so
            problems.append(f"reading the answers of the exercises this one builds on: {stop.reason}")
            return problems, None, judged_objects
        if cell is None or cell.name in poisoned:
            continue
        try:
            if cell.answer:
                worker.run(cell.code, f"<{cell.name}>", timeout=LOAD_TIMEOUT_S)
            else:
                worker.request({"op": "given", "code": cell.code, "name": f"<{cell.name}>"}, timeout=LOAD_TIMEOUT_S)
        except remote.Overloaded:  # not the cell's doing: it must not be left out as a runaway
            raise
        except remote.Stopped as stop:
            problems.append(f"{cell.name}: {stop.reason}")
            return problems, cell.name, judged_objects
        except NotImplementedError:
            pass  # an exercise not done yet: its check says so
        except Exception as error:
            if cell.answer:  # a given cell failing here (an import of the blocked torch, say) is not the learner's
                problems.append(f"{cell.name} raised {getattr(error, 'type_name', type(error).__name__)}: {quoted(error)}")
    return problems, None, judged_objects


def objects(worker: remote.Worker, exercise: str) -> tuple | None:
    """The learner's objects bound to the names ``exercise``'s check reads, as the worker's handles (the same object
    is always the same handle); None when a name is unbound or holds plain data, which has no identity to compare."""
    try:
        found = tuple(worker.evaluate(name) for name in answer_names(exercise))
    except remote.Overloaded:
        raise
    except Exception:  # a name not bound, or the learner's object raised while it was read (the check says why)
        return None
    return found if all(isinstance(o, remote.Remote) for o in found) else None


def reusable(worker: remote.Worker, run: Judging, judged_objects: dict[str, tuple | None]) -> dict:
    """The earlier verdicts this check may take as they are, by a learner's kernel's rule (checks._still_valid): a
    pass while the names it judged hold the very objects judged, however they were rebound or left alone since; a
    failure only while no cell has run since (the kernel checks a failure again always: a helper it calls, or the
    class it judged, may have been fixed in place). Rules about code (which cells may rebind a name) missed back
    doors (red team 9: sys._getframe, a match capture, a fixed helper); identities miss nothing.

    The worker says which object a name holds, and learner code can rewrite what it says (its table of handles):
    then the check is handed, and judges, that other object of the learner's own (red team 9 handed over the
    correct topological_order it had broken since). That can give no points for work not done, so it is left."""
    reuse = {}
    for exercise, (verdict, position) in run.earlier.items():
        if verdict is not None:
            if position == len(run.cells):
                reuse[exercise] = verdict
            continue
        then = judged_objects.get(exercise)
        now = objects(worker, exercise) if then is not None else None
        if now is not None and all(a is b for a, b in zip(then, now, strict=True)):
            reuse[exercise] = None
    return reuse


def explain(message: str, problems: list[str]) -> str:
    """The check's diagnosis, after what went wrong while running the notebook's cells (often the real cause)."""
    if not problems:
        return message
    return "While running your notebook's cells: " + "; ".join(problems) + "\n" + message
