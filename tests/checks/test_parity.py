"""One verdict everywhere: every case of the check tests gets the same verdict, for the same cause, from the trusted
grader (the sandboxed worker that ``python -m autograder grade`` uses) as in the tests' own process, and a sample of
them the same again from ``run_check`` in a real kernel, run as a learner runs a notebook.

The cases are read out of tests/checks/test_checks_*.py (``catalogue.harvest``). In the worker each case is one
learner program judged by ``autograder.trust.verdicts.judged``, as one exercise of a grade is: a fresh worker forked
from one zygote per notebook. "The same cause" is what the check test asserts of the diagnosis (its phrases) against
the trusted grader (a rejection's phrases include its ``cause: <id>`` line), and the whole headline (the diagnosis's
first line) and the cause between the kernel and the trusted grader.
Both run a case's program up to its exercise's test cell, as a grade does, then the case's own extra code.
"""
from __future__ import annotations

import ast
import functools
import re

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

from autograder.contract import cause_of
from autograder.course import KERNEL_ARGS
from autograder.course.kernels import LocalKernelManager
from autograder.trust import remote, verdicts
from catalogue import Case, Recipe, harvest, program_cells
from conftest import ASSIGNMENTS

# What the harvest cannot copy, and why: each of these tests changes a check's own constants (monkeypatch) or tests
# a piece of a check on a namespace it changes first. A test not listed here that yields no case fails the harness.
UNREAD = {
    "test_checks_scalar_engine::test_endless_walk_is_stopped_with_a_diagnosis[0]": "shortens the call timeout",
    "test_checks_scalar_engine::test_central_differences_run_the_program_that_was_graded[0]": "one program's replay",
    "test_checks_backward_functions::test_a_name_missing_from_the_notebook_is_named[0]#0": "a hand-made namespace",
    "test_checks_tensor_engine::test_whole_engine_programs_catch_what_they_run[0]": "one phase of a check",
    "test_checks_tensor_engine::test_the_drawn_graphs_prose_states_the_gradients_torch_computes[0]": "prose",
    "test_checks_modules_mnist::test_training_run_must_reach_the_floor[0]": "raises the accuracy floor",
    "test_checks_modules_mnist::"
    "test_torchs_default_initialisation_leaves_a_third_of_the_variance_as_section_5_2_says[0]": "prose",
}
# Where the trusted grader differs on purpose (a test, or one case of it): it fails these, for its own reason.
BY_DESIGN = {
    "test_checks_nudging::test_tanh_network_gradients_rejects_torch": "torch cannot be imported while grading",
    "test_checks_backward_functions::test_unbroadcast_accepts_correct_alternatives[2]": "the same: it calls torch",
    # exit() in a kernel is IPython's: it returns None and shuts the kernel down after the cell, no SystemExit
    "test_checks_backward_functions::test_backward_rules_reject_red_team_answers[5]": "it calls exit()",
}
PREFIX = "While running your notebook's cells: "


@functools.lru_cache(maxsize=None)
def catalogue():
    return harvest()


def cases_of(notebook: str) -> list[Case]:
    return [c for c in catalogue().cases if c.recipe.notebook == notebook]


def headline(message: str) -> str:
    """The diagnosis's first line: the cause it names (past what the trusted grader says of the cells first)."""
    if message.startswith(PREFIX):
        message = message.partition("\n")[2]
    return message.partition("\n")[0]


# Verdicts of the trusted grader by exercise and learner program, kept for the test process: a verdict is a function
# of the two (the cases are drawn from the default seed), so a program that several check tests build (about one
# case in eight: the solution itself, say), or that the kernel's sample shares with a notebook's run, is judged once.
JUDGED: dict[tuple, verdicts.Verdict] = {}


def trusted(cases: list[Case]) -> dict[str, verdicts.Verdict]:
    """Each case's verdict from a worker of its own, all forked from one zygote (a program judged before in this
    process, by this call or an earlier one, takes the verdict it got then)."""
    keys = {}
    with remote.Zygote() as zygote:
        for case in cases:
            cells = program_cells(case.recipe, case.exercise)
            keys[case.id] = key = (case.exercise, tuple((c.name, c.code, c.answer) for c in cells))
            if key not in JUDGED:
                budget = remote.Budget(remote.SUBMISSION_BUDGET_S, "the checks of this notebook")
                JUDGED[key] = verdicts.judged(case.exercise, verdicts.Judging(cells, {}, {}, zygote, budget))
    return {case.id: JUDGED[keys[case.id]] for case in cases}


def disagreements(cases: list[Case], found: dict[str, verdicts.Verdict]) -> list[str]:
    """What the trusted grader said that the check tests do not: another verdict, or a diagnosis without a phrase."""
    wrong = []
    for case in cases:
        verdict = found[case.id]
        if _by_design(case):
            if verdict.passed:
                wrong.append(f"{case.id} ({case.exercise}): graded as passing, but {BY_DESIGN[_design_key(case)]}")
        elif verdict.passed != case.passes:
            wrong.append(f"{case.id} ({case.exercise}): the tests say {'pass' if case.passes else 'fail'}, the "
                         f"trusted grader {'passes' if verdict.passed else 'fails'}: {verdict.message[:300]}")
        elif not verdict.passed and not all(p in verdict.message for p in case.phrases):
            missing = [p for p in case.phrases if p not in verdict.message]
            wrong.append(f"{case.id} ({case.exercise}): the trusted diagnosis lacks {missing}: {verdict.message[:300]}")
    return wrong


def _design_key(case: Case) -> str | None:
    return next((key for key in BY_DESIGN if case.id == key or case.id.startswith(key + "[")), None)


def _by_design(case: Case) -> bool:
    return _design_key(case) is not None


def test_the_catalogue_holds_every_case_of_the_check_tests():
    found = catalogue()
    assert found.unread.keys() == UNREAD.keys(), {k: v for k, v in found.unread.items() if k not in UNREAD}
    for notebook in ASSIGNMENTS:
        kinds = {c.passes for c in cases_of(notebook)}
        assert kinds == {True, False}, f"{notebook}: no {'rejection' if True in kinds else 'acceptance'} case read"
    assert len(found.cases) >= 370  # what the check tests held when the harness was written


# The trusted and kernel tests on one xdist worker (`make test` runs --dist loadgroup), in this order, so the kernel's
# sample finds its trusted verdicts judged already.
@pytest.mark.xdist_group("parity")
@pytest.mark.slow  # grades every case of one notebook through the sandboxed workers (half a minute to a minute)
@pytest.mark.parametrize("notebook", ASSIGNMENTS)
def test_the_trusted_grader_gives_every_case_the_verdict_the_check_tests_give(notebook):
    cases = cases_of(notebook)
    wrong = disagreements(cases, trusted(cases))
    assert not wrong, f"{len(wrong)} of {len(cases)} cases differ:\n" + "\n".join(wrong)


# ------------------------------------------------------------------------------------------------ in a kernel

SAMPLE_EVERY = 12  # of the catalogue's cases, in its order: about 30, with every notebook and both verdicts
# Cases that once got one verdict in a kernel and another in grading, kept in the sample whatever its size.
ALWAYS = ("test_topological_order_rejects_recursive_walks", "test_backward_rejects_other_walks[3]",
          "test_apply_op_rejects",
          # notebook 4's recursive topological_sort that raises the recursion limit (and puts it back): refused in
          # the kernel, where learner code shares the check's process, and by grade, where it runs in a worker
          "tensor_engine::test_red_team_findings_are_rejected[4]", "tensor_engine::test_red_team_findings_are_rejected[5]",
          # red team 20: the given cells' tqdm, plt and threadpool_limits in an answer (the grade lacked them)
          "test_answers_using_the_given_cells_progress_bar_and_plots_pass",
          "test_training_accepts_a_progress_bar_and_one_blas_thread")
CENTRAL = "def central_difference(f, x, h):"
RIGHT = "    return (f(x + h) - f(x - h)) / (2 * h)\n"
# An answer cell under a cell magic that does not run Python: the kernel defines nothing, so neither may grading.
WRITEFILE = Case("parity::writefile", "central_difference",
                 Recipe("01_nudging", {"central_difference": [(CENTRAL, "%%writefile central.py\n" + CENTRAL)]}),
                 passes=False, phrases=("`central_difference` is not defined",))
# and one under %%time, which runs it.
TIMED = Case("parity::time", "central_difference",
             Recipe("01_nudging", {"central_difference": [(CENTRAL, "%%time\n" + CENTRAL)]}), passes=True)
# Red team 10: a magic's line IPython refuses (a UsageError: nothing of the cell runs) defines nothing in grading
# either; one it takes runs the cell.
TIME_STATEMENT = Case("parity::%%time with a statement", "central_difference",
                      Recipe("01_nudging", {"central_difference": [(CENTRAL, "%%time x = 1\n" + CENTRAL)]}),
                      passes=False, phrases=("`central_difference` is not defined",))
CAPTURE_TWO = Case("parity::%%capture with two names", "central_difference",
                   Recipe("01_nudging", {"central_difference": [(CENTRAL, "%%capture a b\n" + CENTRAL)]}),
                   passes=False, phrases=("`central_difference` is not defined",))
CAPTURE_NAMED = Case("parity::%%capture with flags and a name", "central_difference",
                     Recipe("01_nudging", {"central_difference": [(CENTRAL, "%%capture --no-display out\n" + CENTRAL)]}),
                     passes=True)
CAPTURE_ABBREVIATED = Case("parity::%%capture with an abbreviated flag, %%time with its option", "central_difference",
                           Recipe("01_nudging", {"central_difference": [
                               (CENTRAL, "%%capture --no-d\n%%time --no-raise-error\n" + CENTRAL)]}), passes=True)
# Red team 12: %%prun parses its options as getopt does, not with a magic_arguments parser; one it refuses runs
# nothing (the grade had run the cell, and given a def under ``%%prun -Z`` the points the kernel refused).
PRUN_REFUSED = Case("parity::%%prun with an option it refuses", "central_difference",
                    Recipe("01_nudging", {"central_difference": [(CENTRAL, "%%prun -Z\n" + CENTRAL)]}),
                    passes=False, phrases=("`central_difference` is not defined",))
PRUN_TAKEN = Case("parity::%%prun with its options", "central_difference",
                  Recipe("01_nudging", {"central_difference": [(CENTRAL, "%%prun -q -s cumulative\n" + CENTRAL)]}),
                  passes=True)
# Red team 12: %%prun runs the rest of its line before the cell, %%timeit its line (its setup) once and its body
# -n times, in a scope of its own, -r times over (the worker ran the cell alone, once).
PRUN_LINE = Case("parity::%%prun with a statement on its line", "central_difference",
                 Recipe("01_nudging", {"central_difference": [(CENTRAL, "%%prun -q raise ValueError('stuck')\n" + CENTRAL)]}),
                 passes=False, phrases=("`central_difference` is not defined",))
TIMEIT_SETUP = Case("parity::%%timeit with a setup statement", "central_difference",
                    Recipe("01_nudging", extra="%%timeit -n1 -r1 central_difference.__code__ = "
                                               "(lambda f, x, h: (f(x + h) - f(x)) / h).__code__\npass\n"),
                    passes=False)
# Red team 13: a %timeit line among a cell's statements runs too, and a %%timeit body IPython cannot compile on its
# own (a break outside a loop) runs nothing, its setup neither.
TIMEIT_LINE = Case("parity::a %timeit line among statements", "central_difference",
                   Recipe("01_nudging", extra="STEP = 1\n%timeit -n1 -r1 central_difference.__code__ = "
                                              "(lambda f, x, h: 0.0).__code__\n"), passes=False)
TIMEIT_BREAK = Case("parity::a %%timeit body that does not compile alone", "central_difference",
                    Recipe("01_nudging", {"central_difference": [(RIGHT, "    return (f(x + h) - f(x)) / h\n")]},
                           extra="%%timeit -n1 -r1 central_difference.__code__ = (lambda f, x, h: "
                                 "(f(x + h) - f(x - h)) / (2 * h)).__code__\nbreak\n"), passes=False)
# Red team 15: a %timeit wherever it stands (here assigned), and a magic's line as IPython's own parser reads it
# (``%xdel name -n`` names "name -n": nothing is deleted, as in the kernel).
TIMEIT_ASSIGNED = Case("parity::a %timeit assigned", "central_difference",
                       Recipe("01_nudging", extra="timing = %timeit -o -n1 -r1 central_difference.__code__ = "
                                                  "(lambda f, x, h: 0.0).__code__\n"), passes=False)
XDEL_FLAG_LAST = Case("parity::%xdel with its flag after the name", "central_difference",
                      Recipe("01_nudging", given="%xdel central_difference -n\n"), passes=True)
TIMEIT_COUNTED = Case("parity::%%timeit runs its body -n times -r times over", "central_difference",
                      Recipe("01_nudging", extra="%%timeit -n2 -r3\nglobals().setdefault('RUNS', []).append(1)\n"
                             "if len(RUNS) == 6:\n    central_difference.__code__ = (lambda f, x, h: 0.0).__code__\n"),
                      passes=False)
# Red team 12: a %time line runs the words after its option, with the local names of the function it is in.
TIME_OPTION = Case("parity::%time with its option", "central_difference",
                   Recipe("01_nudging", {"central_difference": [
                       (CENTRAL, f"def first_try(f, x, h):\n{RIGHT}\n%time --no-raise-error central_difference = "
                                 "first_try\n\n\ndef unused(f, x, h):")]}), passes=True)
TIME_IN_A_DEF = Case("parity::%time in a function", "central_difference",
                     Recipe("01_nudging", {"central_difference": [
                         (CENTRAL, f"{CENTRAL}\n    half_step = h / 2\n    %time whole_step = 2 * half_step\n{RIGHT}\n\n"
                                   "def unused(f, x, h):")]}), passes=True)
# An answer cell that raises: what it defined before the raise is all there is, in a kernel as in grading.
RAISES_FIRST = Case("parity::raises before defining", "central_difference",
                    Recipe("01_nudging", {"central_difference": [(CENTRAL, "raise ValueError('stuck')\n" + CENTRAL)]}),
                    passes=False, phrases=("`central_difference` is not defined",))
RAISES_AFTER = Case("parity::raises after defining", "central_difference",
                    Recipe("01_nudging", {"central_difference": [
                        (CENTRAL, f"{CENTRAL}\n{RIGHT}\n\nraise ValueError('stuck')\n\n\ndef first_try(f, x, h):")]}),
                    passes=True)
# Red team 12 and 13: a cell of the learner's own, which the kernel runs whole and grading through its definitions,
# goes on past a statement that raises only where grading lacks what it names (torch, IPython's In), as
# the kernel goes on (stopping there dropped the wrong def after it in the grade alone), leaves out in both what reads
# a name only a left-out statement binds, and unbinds or patches as the kernel does (``del``, ``setattr``, ``+=``,
# %xdel and %reset_selective were left out: the grade passed what the kernel failed). Left on purpose: a statement that
# raises in the kernel too stops the kernel's cell there, and the grade, which cannot tell the two apart, goes on.
FORWARD = "def central_difference(f, x, h):\n    return (f(x + h) - f(x)) / h\n"
GOES_ON_PAST_WHAT_GRADING_LACKS = Case(
    "parity::a cell of your own goes on past what grading lacks", "central_difference",
    Recipe("01_nudging", given="DTYPE = torch.float64\nFIGURE = plt.figure\nHISTORY = In\n" + FORWARD), passes=False)
READS_WHAT_WAS_LEFT_OUT = Case(
    "parity::a cell of your own reads what a call bound", "central_difference",
    Recipe("01_nudging", {"central_difference": [(RIGHT, "    raise NotImplementedError\n")]},
           given=f"steps = dict(h=1e-5)\nh = steps['h']\nH: float = h / 2\n{CENTRAL}\n{RIGHT}"), passes=True)
INCREMENTS = Case("parity::a cell of your own increments what an answer reads", "central_difference",
                  Recipe("01_nudging", {"central_difference": [(RIGHT, RIGHT.replace("(2 * h)", "(SCALE[0] * h)"))]},
                         given="SCALE = [1]\nSCALE[0] += 1\n"), passes=True)
FORGETS = Case("parity::%xdel and %reset_selective in a cell of your own", "central_difference",
               Recipe("01_nudging", given="%xdel -n central_difference\n%reset_selective -f ^central"), passes=False,
               phrases=("`central_difference` is not defined",))
DELETES = Case("parity::a cell of your own deletes the answer", "central_difference",
               Recipe("01_nudging", given="del central_difference\n"), passes=False,
               phrases=("`central_difference` is not defined",))
PATCHES = Case("parity::a cell of your own patches the answer", "central_difference",
               Recipe("01_nudging", given=FORWARD.replace("central_difference", "forward") +
                      "setattr(central_difference, '__code__', forward.__code__)\n"), passes=False)
# Red team 16: `?` alone (IPython's help: a shell call without arguments) crashed the reading of the whole notebook;
# a line %prun runs its statement in the notebook's namespace; a %time line gives its expression's value and takes
# its option after the statement; an annotation is evaluated when its def runs (the worker had compiled every learner
# cell under its own `from __future__ import annotations`).
HELP = Case("parity::help with `?`", "central_difference",
            Recipe("01_nudging", {"central_difference": [(CENTRAL, "?\n" + CENTRAL)]}, given="?\n"), passes=True)
PRUN_LINE_BINDS = Case("parity::a %prun line binds the answer", "central_difference",
                       Recipe("01_nudging", {"central_difference": [
                           (CENTRAL, f"def first_try(f, x, h):\n{RIGHT}\n%prun -q central_difference = first_try\n\n\n"
                                     "def unused(f, x, h):")]}), passes=True)
TIME_VALUE = Case("parity::a %time line's value, and its option last", "central_difference",
                  Recipe("01_nudging", {"central_difference": [
                      (CENTRAL, f"TWO = %time 2\ndef first_try(f, x, h):\n{RIGHT.replace('(2 * h)', '(TWO * h)')}\n"
                                "%time central_difference = first_try --no-raise-error\n\n\ndef unused(f, x, h):")]}),
                  passes=True)
# Red team 18: `%time --no-raise-error` swallows what its code raises, a %time line's value is that of its last
# statement when that is an expression, and `%prun -r` gives the profile's statistics.
NO_RAISE_AND_VALUES = Case("parity::%time that raises under its option, and the values of %time and %prun -r",
                           "central_difference", Recipe("01_nudging", {"central_difference": [
                               (CENTRAL, "%time --no-raise-error 1 / 0\nTWO = %time _unused = 0; 2\n"
                                         "STATS = %prun -q -r pass\ndef first_try(f, x, h):\n"
                                         + RIGHT.replace("(2 * h)", "(TWO * h)")
                                         .replace("return ", "return 0 * STATS.total_calls + ")
                                         + "\ncentral_difference = first_try\n\n\ndef unused(f, x, h):")]}),
                           passes=True)
# Red team 19: display(...) before the answer's def, a builtin in the kernel, from IPython.display in the cell
DISPLAYS_FIRST = Case("parity::display before the answer", "central_difference",
                      Recipe("01_nudging", {"central_difference": [
                          (CENTRAL, "display('a slope')\nfrom IPython.display import Markdown, display\n"
                                    "display(Markdown('**slope**'))\n" + CENTRAL)]}),
                      passes=True)
# Red team 19: magics that gave None or raised in the worker, before the answer's def
ENV_FIRST = Case("parity::env, who_ls, ex and a timeit result before the answer", "central_difference",
                 Recipe("01_nudging", {"central_difference": [
                     (CENTRAL, "%env STEP_NOTE=central\nnames = %who_ls\nget_ipython().ex('HALF = 0.5')\n"
                               "r = %timeit -o -n1 -r2 pass\nspread = r.stdev + r.compile_time\n" + CENTRAL)]}),
                 passes=True)
ANNOTATED = Case("parity::an annotation that names nothing", "central_difference",
                 Recipe("01_nudging", {"central_difference": [(CENTRAL, CENTRAL.replace("):", ") -> Slope:"))]}),
                 passes=False, phrases=("`central_difference` is not defined",))
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def sample() -> list[Case]:
    cases = catalogue().cases
    return [c for i, c in enumerate(cases) if i % SAMPLE_EVERY == 0 or any(a in c.id for a in ALWAYS)] \
        + [WRITEFILE, TIMED, TIME_STATEMENT, CAPTURE_TWO, CAPTURE_NAMED, CAPTURE_ABBREVIATED, PRUN_REFUSED, PRUN_TAKEN,
           TIME_OPTION, TIME_IN_A_DEF, RAISES_FIRST, RAISES_AFTER,
           GOES_ON_PAST_WHAT_GRADING_LACKS, READS_WHAT_WAS_LEFT_OUT, INCREMENTS, FORGETS, DELETES,
           PATCHES, PRUN_LINE, TIMEIT_SETUP, TIMEIT_COUNTED, TIMEIT_LINE, TIMEIT_BREAK, TIMEIT_ASSIGNED,
           XDEL_FLAG_LAST, HELP, PRUN_LINE_BINDS, TIME_VALUE, NO_RAISE_AND_VALUES, DISPLAYS_FIRST, ENV_FIRST,
           ANNOTATED]


def in_a_kernel(cases: list[Case], folder) -> dict[str, verdicts.Verdict]:
    """Each case run in one kernel as a learner runs a notebook: its cells, then the test cell's ``run_check``
    line; ``%reset -f`` between cases, as a learner who starts over without restarting the kernel. A case that kills
    the kernel fails, saying so, and a new kernel takes the cases after it."""
    found = {}
    while len(found) < len(cases):
        left = [c for c in cases if c.id not in found]
        nb, checks = nbformat.v4.new_notebook(), {}
        for case in left:
            nb.cells.append(nbformat.v4.new_code_cell("%reset -f"))
            nb.cells += [nbformat.v4.new_code_cell(cell.code)
                         for cell in program_cells(case.recipe, case.exercise, whole=True)]
            checks[case.id] = len(nb.cells)
            nb.cells.append(nbformat.v4.new_code_cell(f"run_check({case.exercise!r}, globals())"))
        try:
            NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True, extra_arguments=KERNEL_ARGS,
                           kernel_manager_class=LocalKernelManager,
                           resources={"metadata": {"path": str(folder)}}).execute()
        except DeadKernelError:
            unrun = next(i for i, cell in enumerate(nb.cells) if cell.get("execution_count") is None)
            died = next(case_id for case_id, index in checks.items() if index >= unrun)
            checks = {case_id: index for case_id, index in checks.items() if index < unrun}
            found[died] = verdicts.Verdict("", False, "the kernel died")
        found.update({case_id: _verdict(nb.cells[index]) for case_id, index in checks.items()})
    return found


def _verdict(cell) -> verdicts.Verdict:
    """What a test cell showed: the CheckFailure's diagnosis (as its traceback renders it), or the passed line."""
    errors = [o for o in cell.outputs if o.output_type == "error"]
    if errors:
        lines = [ANSI.sub("", line) for line in errors[0].traceback]
        message = "\n".join(lines[1:]) if errors[0].ename == "CheckFailure" else f"{errors[0].ename}: {errors[0].evalue}"
        return verdicts.Verdict("", False, message)
    shown = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    return verdicts.Verdict("", "all hidden checks passed" in shown, shown)


@pytest.mark.xdist_group("parity")
@pytest.mark.slow  # one kernel runs about 30 cases, and the trusted grader the same ones (unless judged already)
def test_run_check_in_a_kernel_gives_a_sample_the_trusted_verdict_headline_and_cause(tmp_path):
    cases = [c for c in sample() if not _by_design(c)]  # torch is there in a kernel, exit() stops it
    kernel, graded = in_a_kernel(cases, tmp_path), trusted(cases)
    wrong = disagreements(cases, kernel)
    for case in cases:
        mine, theirs = kernel[case.id], graded[case.id]
        told = (headline(mine.message), cause_of(mine.message)) != (headline(theirs.message), cause_of(theirs.message))
        if mine.passed != theirs.passed or not mine.passed and told:
            wrong.append(f"{case.id}: the kernel says {mine.message[:200]!r}, the trusted grader "
                         f"{theirs.message[:200]!r}")
    assert not wrong, f"{len(wrong)} of {len(cases)} cases differ:\n" + "\n".join(wrong)


# ------------------------------------------------------------------------------------------------ no trace

# The exercises whose checks enter state in the learner's process: grad mode (apply_op's with-block probes), the
# recursion limit (topological_order's deep graphs), the random states (mlp's and linear's seeded draws).
STATEFUL = ("apply_op", "topological_order", "mlp", "linear")


def one_cell_slips(exercise: str) -> list[Case]:
    """The rejection cases of ``exercise`` that edit its answer cell alone, or add code that only defines its
    answer's names: what a learner types into that cell, runs, and later corrects."""
    from autograder.checks import answer_names

    def own(extra: str) -> bool:
        defined = [node.name for node in ast.parse(extra).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
        return len(defined) == len(ast.parse(extra).body) and set(defined) <= set(answer_names(exercise))

    return [c for c in catalogue().cases if c.exercise == exercise and not c.passes and not c.recipe.objects
            and set(c.recipe.edits) <= {exercise} and own(c.recipe.extra)]


@pytest.mark.slow  # every one-cell slip of four exercises, checked in this process (a minute)
@pytest.mark.parametrize("exercise", STATEFUL)
def test_after_every_slip_the_corrected_answer_passes_in_the_same_namespace(exercise):
    """As a learner works: one kernel, the answer cell run with a slip and checked (rejects: it fails, and leaves
    the process and the notebook's classes as they were), the next slip run over it, ..., then the solution's cell
    run again, which must pass."""
    from autograder import check
    from autograder.tools.solutions import solution_namespace
    from conftest import rejects, traces

    slips = one_cell_slips(exercise)
    assert slips, f"no one-cell slip of {exercise} in the check tests"
    namespace = solution_namespace(slips[0].recipe.notebook)
    start = traces(namespace)
    solution = next(c for c in program_cells(Recipe(slips[0].recipe.notebook)) if c.name == exercise)
    for slip in slips:
        for cell in program_cells(slip.recipe):
            if cell.name in (exercise, "your answer"):
                exec(compile(cell.code, f"<{slip.id}>", "exec"), namespace)
        rejects(exercise, namespace, *slip.phrases)
    exec(compile(solution.code, f"<{exercise}>", "exec"), namespace)
    check(exercise, namespace)
    assert traces(namespace) == start
