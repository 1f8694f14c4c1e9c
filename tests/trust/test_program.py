"""What trusted grading runs for each exercise: the pure functions of autograder.trust.verdicts, on in-memory notebooks.

No worker, kernel or sandbox here: these decide which statements reach the worker (``definitions``), how a cell's
IPython syntax is read (``python``), which check a test cell calls (``checked_exercise``), which cells form the
learner's program up to each test cell (``program``) and the seed of its randomized cases (``program_seed``). A wrong
answer here grades the wrong code, so each rule the module states is pinned by one small case.
"""
import ast

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell

from autograder.contract import assignments
from autograder.trust.verdicts import (COPY_OF, Cell, _patch_or_constant, bindings, checked_exercise, definitions,
                                       program, program_seed, python)
from conftest import COURSE_SECRET


# ------------------------------------------------------------------------------------------------ definitions

def test_definitions_keep_imports_functions_and_classes_and_drop_what_runs():
    """A given cell's demonstration (prints, calls, plots, a docstring-like string) is not repeated in the worker."""
    cell = ('"""A demonstration."""\n'
            "import math\n"
            "from labtools import plot_slope_errors\n"
            "def f(x):\n    return math.log(x * x)\n"
            "async def later():\n    pass\n"
            "class Point:\n    pass\n"
            "print(f(3.0))\n"
            "plot_slope_errors()\n"
            "f(2.0) + 1\n")
    assert definitions(cell) == ("import math\n"
                                 "from labtools import plot_slope_errors\n"
                                 "def f(x):\n    return math.log(x * x)\n"
                                 "async def later():\n    pass\n"
                                 "class Point:\n    pass")


def test_definitions_drop_training_loops_and_computed_values():
    """A training run or a computed array is the slow part of a notebook, and nothing a check reads."""
    cell = ("import numpy as np\n"
            "weights = np.zeros(3)\n"
            "for epoch in range(20):\n    weights += 1\n"
            "while False:\n    pass\n"
            "losses = []\n"
            "losses.append(1.0)\n"
            "weights[0] = 2.0\n"
            "total += 1\n")
    assert definitions(cell) == "import numpy as np\nlosses = []\ntotal += 1"  # weights: computed, with its item


def test_definitions_keep_only_top_level_statements():
    """An import or def nested in if/try/with/for is dropped with its block (the whole block would otherwise run)."""
    cell = ("try:\n    import scipy\nexcept ImportError:\n    scipy = None\n"
            "if True:\n    def g():\n        pass\n"
            "with open('x') as handle:\n    import os\n"
            "import sys\n")
    assert definitions(cell) == "import sys"


def test_definitions_of_the_course_patch_cell_keep_every_patch():
    """Notebook 5 attaches notebook 4's functions to its Tensor: the checks need the patched class."""
    cell = ("from labtools.tensor import Tensor, add, exp, log\n"
            "Tensor.__add__ = add\n"
            "Tensor.__radd__ = lambda self, other: add(other, self)\n"
            "Tensor.exp, Tensor.log = exp, log\n"
            "print(Tensor([1.0]) + Tensor([2.0]))\n")
    assert definitions(cell).splitlines() == ["from labtools.tensor import Tensor, add, exp, log",
                                              "Tensor.__add__ = add",
                                              "Tensor.__radd__ = lambda self, other: add(other, self)",
                                              "Tensor.exp, Tensor.log = (exp, log)"]


def test_definitions_of_a_cell_with_a_syntax_error_is_empty():
    """The kernel runs nothing of a cell that does not parse, so the worker gets nothing of it either."""
    assert definitions("import math\ndef f(:\n    pass\n") == ""
    assert definitions("import math\n  import os\n") == ""  # an indentation error


@pytest.mark.parametrize("code", [
    "A = {[1]: 2}", "A = {1, [2]}",                    # literal_eval: unhashable
    "A = " + "-" * 3000 + "1",                         # the parser's recursion limit
    "def f(): pass\nf" + ".a" * 3000,
    "T.x = a" + ".a" * 500,                            # kept as a patch, then too deep to write back out
], ids=["dict-of-lists", "set-of-lists", "deep-unary", "deep-attribute", "deep-patch"])
def test_definitions_of_code_python_cannot_take_define_nothing_and_never_raise(code):
    """A learner's cell is data: whatever Python's parser, literal_eval or unparse cannot take must not stop
    grading the notebook (the kernel cannot run such a cell either)."""
    assert "A =" not in definitions(code) and "T.x" not in definitions(code)


def test_definitions_read_plain_python_only_so_magics_must_be_translated_first():
    """``program`` passes every cell through ``python`` before ``definitions``: raw IPython syntax does not parse."""
    cell = "%matplotlib inline\nimport numpy as np\n"
    assert definitions(cell) == ""
    assert definitions(python(cell)) == "import numpy as np"


def test_definitions_of_an_empty_cell_is_empty():
    assert definitions("") == "" and definitions("# only a comment\n") == ""


def test_what_reads_a_name_only_a_left_out_statement_binds_is_left_out_too():
    """Red team 12: the kernel has ``data`` (``load()`` ran there), the worker does not; what reads it when it runs is
    left out with it, across cells, so the worker can stop a cell where it raises as the kernel does."""
    unbound = set()
    cell = ("data = load()\n"
            "X = data.x\n"                                  # reads data
            "Y: int = X[0]\n"                               # reads X, which is unbound now
            "def f(scale=data.scale):\n    pass\n"          # a default runs with the def
            "@data.wrap\ndef g():\n    pass\n"
            "class C(data.Base):\n    pass\n"
            "class D:\n    size = X\n"                      # a class body runs too
            "def h():\n    return data.x\n"                # a body runs only when called: kept
            "K = lambda: data\n"
            "Z = undefined\n")                              # nothing left out binds it: the worker raises, as the kernel
    assert definitions(cell, unbound).splitlines() == ["def h():", "    return data.x", "K = lambda: data",
                                                       "Z = undefined"]
    assert unbound == {"data", "X", "Y", "f", "g", "C", "D"}
    assert definitions("Y = 2\nW = X\n", unbound) == "Y = 2"  # the next cell: X still unbound, Y bound again
    assert unbound == {"data", "X", "f", "g", "C", "D", "W"}
    assert definitions("data = 3\nX = data\n") == "data = 3\nX = data"  # nothing given: no name is unbound


@pytest.mark.parametrize("cell, call", [
    ("%%timeit -n2 x = 1\ncount.append(x)\n", "get_ipython().autograder_timeit('x = 1\\n', 'count.append(x)\\n', {'n': '2'})"),
    ("r = %timeit -o -n1 c.d = e\n", "r = get_ipython().autograder_timeit('pass\\n', 'c.d = e\\n', {'o': '', 'n': '1'})"),
    ("if True:\n    %timeit -n1\n", "if True:\n    None"),                  # no statement: IPython times nothing
    ("%reset -sf\n", "get_ipython().autograder_forget('reset', {'soft': True, 'targets': []})"),
    ('%reset_selective -f "^k"\n', "get_ipython().autograder_forget('reset_selective', {'regex': '^k'})"),
    ("%xdel SCALE -n\n", "get_ipython().autograder_forget('xdel', {'name': 'SCALE -n', 'by_name': False})"),
    ("%reset -x\n", "get_ipython().autograder_forget('reset', {'refused': "
                    "'%reset: option -x not recognized (allowed: \"sf\" aggressive)'})"),
    ("get_ipython().run_cell('%time a = 1')\n", "get_ipython().run_cell('a = 1\\n')"),
    ("H = %time 1e-5\n", "H = get_ipython().autograder_run('time', '1e-5\\n')"),
    ("x = 1\n%time y = x --no-r\n", "x = 1\nget_ipython().autograder_run('time', 'y = x\\n', '--no-raise-error')"),
    ("x = 1\n%time y = x -- --no-r\n", "x = 1\nget_ipython().autograder_run('time', 'y = x -- --no-r\\n')"),
    ("x = 1\n%prun -q -s time y = x\n", "x = 1\nget_ipython().autograder_run('prun', 'y = x\\n')"),
    ("S = %prun -r -q y = 1\n", "S = get_ipython().autograder_run('prun', 'y = 1\\n', '-r')"),
    ("%%time --no-raise-error\n1 / 0\n", "get_ipython().autograder_run('time', '1 / 0\\n', '--no-raise-error')"),
    ("%%prun\nx = 1\n", "get_ipython().autograder_run('prun', 'x = 1\\n')"),
], ids=["timeit-cell", "timeit-assigned", "timeit-empty", "reset-joined-flags", "reset-selective-quoted",
        "xdel-name-then-flag", "reset-refused", "run-cell", "time-assigned", "time-option-last", "time-option-after-dashes",
        "prun-line", "prun-returns", "time-cell-option", "prun-cell"])
def test_magics_the_worker_runs_carry_what_ipythons_own_parser_reads_in_their_lines(cell, call):
    """Red team 15: wherever such a call stands, its line is read by IPython's parser on the trusted side, so the
    worker neither splits it differently (``-sf``, ``name -n``, quotes) nor misses it (an assignment, a block)."""
    assert python(cell) == call


@pytest.mark.parametrize("cell", ["x = 1\n%timeit x = = 1\n", "\n".join(["%time pass"] * 501),
                                  "%timeit " + "(" * 5000 + "\nx = 1", "?", "x = 1\n??\n", "%time ?"])
def test_a_cell_ipython_or_python_cannot_read_is_given_back_never_raised(cell):
    """Red team 15: a %timeit line that does not parse among other statements, and 501 magic lines (IPython's
    transformer gives up), raised out of python() and failed the whole notebook's grade; red team 16: so did `?`
    (``get_ipython().show_usage()``, a call without arguments) in reading a cell's definitions."""
    assert isinstance(python(cell), str) and isinstance(definitions(python(cell)), str)


@pytest.mark.parametrize("code", ["del central_difference", "del Tensor.__add__, Tensor.exp",
                                  "setattr(central_difference, '__code__', forward.__code__)",
                                  "setattr(Tensor, 'relu', lambda self: self)", "delattr(Tensor, 'exp')"])
def test_definitions_keep_what_unbinds_or_patches(code):
    """Red team 12: a given cell's ``del`` or ``setattr`` changes the answer in the kernel; left out, the grade judged
    the answer as it was before."""
    assert definitions(code) == ast.unparse(ast.parse(code))


@pytest.mark.parametrize("code", ["setattr(make(), 'x', f)", "setattr(T, name, f)", "setattr(T, 'x', make())",
                                  "setattr(T, 'x', f, g)", "del items[compute()]", "getattr(T, 'x')"])
def test_definitions_leave_out_setattr_and_del_that_compute(code):
    assert definitions(code) == ""


def test_a_kept_deletion_or_binding_ends_a_names_unbound_state_and_a_left_out_one_begins_it():
    unbound = {"data", "X"}
    assert definitions("del X, Y\ndel data.x\nfor i in range(3):\n    total = i\nY = 1\ndel Y\n", unbound) == \
        "del Y\nY = 1\ndel Y"  # X: the worker never had it, and the kernel has it no more
    assert unbound == {"data", "i", "total"}


def test_the_names_a_cell_binds_are_its_top_level_bindings():
    """What an answer cell binds is taken off the unbound names; names bound inside a function, class or
    comprehension are its own."""
    code = ("import numpy as np, os.path\nfrom math import tau as turn\nx, (y, *z) = 1, (2, 3)\nfor i in []:\n"
            "    pass\nwith open('f') as handle:\n    pass\ntry:\n    pass\nexcept Exception as error:\n    pass\n"
            "match 1:\n    case [first, *rest] | {'k': first, **rest}:\n        pass\ndef f():\n    inner = 1\n"
            "class C:\n    attribute = 1\nsquares = [k * k for k in range(3)]\ndel gone\nif (w := 1):\n    pass\n")
    assert bindings(code) == {"np", "os", "turn", "x", "y", "z", "i", "handle", "error", "first", "rest", "f", "C",
                              "squares", "gone", "w"}
    assert bindings("def f(:\n") == set()


# ------------------------------------------------------------------------------------------------ _patch_or_constant

def statement(code: str):
    (node,) = ast.parse(code).body
    return node


@pytest.mark.parametrize("code", [
    "Tensor.__add__ = add",                                   # a class patched with a function
    "Tensor.sum = ops.tensor_sum",                            # ... with a function from a module
    "Tensor.backward = lambda self, g=None: backprop(self, g)",
    "Tensor.exp, Tensor.log = exp, log",                      # several patches at once
    "(Tensor.a, Tensor.b), Tensor.c = (f, g), h",             # nested tuples are read leaf by leaf
    "Tensor.__add__: object = add",                           # an annotated patch
    "FULL_MNIST = False",                                     # a named constant
    "EPOCHS, BATCH_SIZE, LEARNING_RATE = 20, 32, 0.2",
    "depths = [8, 16, 32]",
    "by_depth = {'plain backprop': [], 'checkpointed': []}",
    "SCALE = -1.5",
    "NOTHING = None",
    "EMPTY = set()",                                          # ast.literal_eval reads set() as a literal
    "A = B = 3",                                              # chained names
    "LIMIT: int = 3",
    # computed without a call: a learner's helper cell, which left out failed the answers using it (red team 7)
    "PI = math.pi",
    "THREE = 1 + 2",
    "HALF = 1 / 2",
    "tanh = math.tanh",
    "first = BATCHES[0][:2]",
    "double = lambda x: 2 * f(x)",                            # a function: its body runs when called
    # any target given a value without a call, as the kernel gives it (red team 13: SCALE += 1 left out judged the
    # answer with another SCALE than the kernel's)
    "Tensor.training = True", "Tensor.pair = (f, 1)", "Tensor.a, b = f, g", "Tensor.__add__ = b = add",
    "weights[0] = 1.0", "total += 1", "STEPS[i] += 0.5",
])
def test_patches_and_named_constants_are_kept(code):
    assert _patch_or_constant(statement(code)) is True


@pytest.mark.parametrize("code", [
    "Tensor.__add__ = make_add()",                            # a computed patch runs code
    "make().x = 1", "STEPS[pick()] = 1", "total += f(1)",     # ... as does a computed target or increment
    "weights = np.zeros(3)",                                  # a computed value
    "SHIFTED = math.pi + f(1)",                               # a call anywhere in the value
    "ROWS = (1, [x])",                                        # a list display holding a name
    "LABEL = f'run {n}'",
    "TABLE = {key: 1}",
    "LIMIT: int",                                             # an annotation without a value
    "*head, tail = 1, 2, 3",                                  # a starred target
    "print(1)",
    "import os",                                              # kept by definitions, but not as a patch/constant
])
def test_other_statements_are_not_patches_or_constants(code):
    assert _patch_or_constant(statement(code)) is False


# ------------------------------------------------------------------------------------------------ python

@pytest.mark.parametrize("source, expected", [
    ("%matplotlib inline", "get_ipython().run_line_magic('matplotlib', 'inline')\n"),
    ("!pip list", "get_ipython().system('pip list')\n"),
    ("files = !ls", "files = get_ipython().getoutput('ls')\n"),
    ("len?", "get_ipython().run_line_magic('pinfo', 'len')\n"),
    ("x = 1\n%time y = 2", "x = 1\nget_ipython().autograder_run('time', 'y = 2\\n')"),
    ("%%time\ndef f():\n    pass", "def f():\n    pass\n"),  # the kernel runs the body as the cell: it is the cell
    ("%time y = 2", "y = 2\n"),
    ("%%writefile f.py\nx = 1", "get_ipython().run_cell_magic('writefile', 'f.py', 'x = 1\\n')\n"),
])
def test_python_turns_magics_and_shell_escapes_into_calls(source, expected):
    """As the kernel sees the cell: the worker then fails on get_ipython, not on a SyntaxError it cannot name."""
    assert python(source) == expected


@pytest.mark.parametrize("source", ["def f(x):\n    return 2 * x", "def f(:\n    pass", '"""never closed'])
def test_python_leaves_plain_and_unparseable_python_as_written(source):
    """Only a final newline is added: a syntax error reaches the worker intact, to be reported as the learner's."""
    assert python(source) == source + "\n"


# ------------------------------------------------------------------------------------------------ checked_exercise

def course_test_source(grade_id: str, name: str = "01_nudging") -> str:
    nb = nbformat.read(assignments()[name], as_version=4)
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def test_checked_exercise_reads_the_id_of_a_course_test_cell():
    assert checked_exercise(course_test_source("test_central_difference")) == "central_difference"


@pytest.mark.parametrize("source", [
    'run_check("central_difference", globals())\nassert True',                       # no hidden block (a learner copy)
    '### BEGIN HIDDEN TESTS\ncheck("central_difference", globals())\n',              # a block never closed
    '### BEGIN HIDDEN TESTS\nfrom autograder import check\n### END HIDDEN TESTS\n',  # a block that checks nothing
    '### END HIDDEN TESTS\ncheck("a", globals())\n### BEGIN HIDDEN TESTS\n',         # markers the wrong way round
])
def test_checked_exercise_is_none_without_a_check_in_a_hidden_block(source):
    assert checked_exercise(source) is None


def test_checked_exercise_reads_only_the_hidden_block():
    """A check call before the block (or run_check after it) names nothing: the hidden block is the course's."""
    source = ('check("before", globals())\n'
              '### BEGIN HIDDEN TESTS\nfrom autograder import check\ncheck("inside", globals())\n'
              'check("second", globals())\n### END HIDDEN TESTS\n'
              'run_check("after", globals())\n')
    assert checked_exercise(source) == "inside"


# ------------------------------------------------------------------------------------------------ program

def answer(grade_id: str, source: str):
    return new_code_cell(source, metadata={"nbgrader": {
        "grade": False, "grade_id": grade_id, "locked": False, "schema_version": 3, "solution": True, "task": False}})


def graded_cell(grade_id: str, source: str, points: int = 2):
    return new_code_cell(source, metadata={"nbgrader": {
        "grade": True, "grade_id": grade_id, "locked": True, "points": points, "schema_version": 3,
        "solution": False, "task": False}})


def hidden(exercise: str) -> str:
    return (f'### BEGIN HIDDEN TESTS\nfrom autograder import check\ncheck("{exercise}", globals())\n'
            f'### END HIDDEN TESTS\nrun_check("{exercise}", globals())\n')


GIVEN = "import math\nx = math.sin(0.5)\nprint(x)\n"                # program: "import math"
ANSWER_A = "def a(x):\n    return 2 * x\nprint(a(1))\n"
ANSWER_B = "def b(x):\n    return a(x) + 1\n"
HELPER = "def helper():\n    return 1\nhelper()\n"                   # program: "def helper():..."


def course_nb():
    """Two exercises shaped like the course's: a given cell, then per exercise an answer cell and a test cell."""
    return new_notebook(cells=[
        new_markdown_cell("# Two exercises"),
        new_code_cell(GIVEN),                          # cell 2
        answer("a", ANSWER_A),                         # cell 3
        graded_cell("test_a", hidden("a")),              # cell 4
        new_markdown_cell("## The second"),
        new_code_cell(HELPER),                         # cell 6
        answer("b", ANSWER_B),                         # cell 7
        graded_cell("test_b", hidden("b"), points=3),    # cell 8
    ])


def shape(cells):
    return [(c.name, c.answer, c.code) for c in cells]


def test_answer_cells_are_taken_whole_and_other_cells_reduced_to_their_definitions():
    cells, tests = program(course_nb(), course_nb())
    assert shape(cells) == [("cell 2", False, "import math"),
                            ("a", True, ANSWER_A),  # the answer's own print stays: it is the learner's code
                            ("cell 6", False, "def helper():\n    return 1"),
                            ("b", True, ANSWER_B)]
    assert tests == {"a": (2, hidden("a")), "b": (4, hidden("b"))}


def test_each_exercise_is_given_the_program_cells_above_its_test_cell():
    """The count is of program cells, not notebook cells: cells[:count] is what the exercise's worker loads."""
    nb = course_nb()
    nb.cells.insert(4, new_code_cell("def extra():\n    pass\n"))  # a learner cell between test_a and b's cells
    cells, tests = program(nb, course_nb())
    assert [c.name for c in cells] == ["cell 2", "a", "cell 5", "cell 7", "b"]
    assert tests["a"][0] == 2 and tests["b"][0] == 5


def test_an_answer_moved_below_its_test_cell_is_not_part_of_that_exercise():
    nb = course_nb()
    nb.cells[2], nb.cells[3] = nb.cells[3], nb.cells[2]
    cells, tests = program(nb, course_nb())
    assert [c.name for c in cells[:tests["a"][0]]] == ["cell 2"]


def test_test_sources_come_from_the_course_whatever_the_submission_holds():
    """A learner who empties, unflags or re-points a test cell changes nothing: the grade id finds the course's."""
    nb = course_nb()
    meta = nb.cells[3].metadata["nbgrader"]
    nb.cells[3].source, meta["grade"], meta["points"] = "pass", False, 100
    nb.cells[7].source = 'run_check("b", globals())\n'  # as in a learner's copy: the hidden block stripped
    cells, tests = program(nb, course_nb())
    assert tests == {"a": (2, hidden("a")), "b": (4, hidden("b"))}
    assert "pass" not in [c.code for c in cells]  # a test cell is never part of the program


def test_cells_are_recognised_by_the_courses_grade_ids_not_the_submissions_flags():
    nb = course_nb()
    nb.cells[2].metadata["nbgrader"]["solution"] = False  # still the course's answer cell "a"
    nb.cells.append(answer("mine", "def mine():\n    pass\nmine()\n"))  # flags the course does not give
    cells, _ = program(nb, course_nb())
    assert ("a", True, ANSWER_A) in shape(cells)
    assert shape(cells)[-1] == ("cell 9", False, "def mine():\n    pass")


def test_cells_the_learner_added_give_their_definitions_named_by_their_position():
    """"cell N" counts every cell of the notebook from 1, markdown included, as JupyterLab shows them."""
    nb = course_nb()
    nb.cells.insert(1, new_markdown_cell("my notes"))
    nb.cells.insert(3, new_code_cell("import numpy as np\nnp.ones(3)\n"))
    cells, _ = program(nb, course_nb())
    assert shape(cells)[:2] == [("cell 3", False, "import math"), ("cell 4", False, "import numpy as np")]


def test_cells_with_nothing_to_define_markdown_and_raw_cells_are_left_out():
    nb = course_nb()
    nb.cells[1:1] = [new_code_cell("print('hello')\n"), new_code_cell(""), new_raw_cell("import os"),
                     new_markdown_cell("import os")]
    cells, tests = program(nb, course_nb())
    assert [c.name for c in cells] == ["cell 6", "a", "cell 10", "b"]
    assert tests["a"][0] == 2


def test_every_pasted_copy_of_an_answer_cell_runs_in_full_as_in_the_kernel():
    """The kernel runs a copy like any cell, its top level included (red team 10: a copy's setattr loop, left out as
    a given cell's, broke the operators in the kernel only), so trusted grading runs it as an answer cell too,
    named by its place; after the sanitizing steps it is found by the id SeparateCopiedCells keeps (copy_of)."""
    from autograder.course.preprocessors import SeparateCopiedCells

    nb = course_nb()
    source = "def a(x):\n    return 3 * x\nprint(a(2))\n"
    nb.cells.insert(3, answer("a", source))
    cells, tests = program(nb, course_nb())
    assert shape(cells)[1:3] == [("a", True, ANSWER_A), ("a (copy, cell 4)", True, source)]
    assert tests["a"][0] == 3
    sanitized, _ = SeparateCopiedCells().preprocess(nb, {"unique_key": "copy"})
    assert program(sanitized, course_nb())[0] == cells


@pytest.mark.parametrize("copy_of", ["test_a", ["a"], {"a": 1}, 7])
def test_a_copy_of_that_names_no_answer_changes_nothing(copy_of):
    """Red team 10: ``copy_of`` set by the learner on a given cell, naming a test, moved that test there and dropped
    the cell's code (8/10 for a correct notebook). Only an answer's id counts, and SeparateCopiedCells, which writes
    it, first removes any the learner set."""
    from autograder.course.preprocessors import SeparateCopiedCells

    nb = course_nb()
    nb.cells[1].metadata[COPY_OF] = copy_of
    assert program(nb, course_nb()) == program(course_nb(), course_nb())
    nb.cells[1].metadata[COPY_OF] = "a"  # the learner's: gone after the sanitizing steps
    sanitized, _ = SeparateCopiedCells().preprocess(nb, {"unique_key": "set"})
    assert program(sanitized, course_nb()) == program(course_nb(), course_nb())


def test_a_copied_test_cell_marks_its_exercise_once_and_adds_nothing():
    nb = course_nb()
    nb.cells.append(graded_cell("test_a", "anything"))
    nb.cells.append(new_code_cell("def late():\n    pass\n"))
    cells, tests = program(nb, course_nb())
    assert tests["a"] == (2, hidden("a"))  # the first copy's place
    assert [c.name for c in cells] == ["cell 2", "a", "cell 6", "b", "cell 10"]


def test_a_deleted_test_cell_is_still_graded_after_the_whole_program():
    nb = course_nb()
    del nb.cells[3]
    nb.cells.append(new_code_cell("def late():\n    pass\n"))  # below every test cell: still before a's check
    cells, tests = program(nb, course_nb())
    assert tests["a"] == (len(cells), hidden("a")) == (5, hidden("a"))
    assert tests["b"] == (4, hidden("b"))


def test_a_test_cell_turned_into_markdown_counts_as_deleted():
    nb = course_nb()
    nb.cells[3] = new_markdown_cell(nb.cells[3].source, metadata=nb.cells[3].metadata)
    cells, tests = program(nb, course_nb())
    assert tests["a"] == (len(cells), hidden("a"))


def test_an_answer_cell_that_lost_its_metadata_gives_only_its_definitions():
    """Without the grade id it is an ordinary cell: its functions still reach the worker, its prints do not."""
    nb = course_nb()
    nb.cells[2].metadata = {}
    cells, _ = program(nb, course_nb())
    assert ("cell 3", False, "def a(x):\n    return 2 * x") in shape(cells)
    assert all(c.name != "a" for c in cells)


def test_magics_in_answer_and_given_cells_are_read_as_the_kernel_reads_them():
    nb = course_nb()
    nb.cells[1].source = "%matplotlib inline\n" + GIVEN
    nb.cells[2].source = "%time value = 1\n" + ANSWER_A
    cells, _ = program(nb, course_nb())
    assert shape(cells)[:2] == [("cell 2", False, "import math"),
                                ("a", True, "get_ipython().autograder_run('time', 'value = 1\\n')\n\n" +
                                 ANSWER_A.rstrip("\n"))]


def test_an_answer_that_does_not_parse_is_still_sent_whole():
    """Its SyntaxError is then reported to the learner by the worker, instead of the answer vanishing."""
    nb = course_nb()
    nb.cells[2].source = "def a(x:\n    return x"
    cells, _ = program(nb, course_nb())
    assert ("a", True, "def a(x:\n    return x\n") in shape(cells)


def test_the_course_notebooks_own_program_has_every_exercise_with_a_check():
    """On a real course notebook: every test cell is found, in order, and calls the check of its own exercise."""
    course = nbformat.read(assignments()["01_nudging"], as_version=4)
    cells, tests = program(course, course)
    assert list(tests) == ["central_difference", "numerical_gradient", "log_square_trace", "tanh_network_gradients"]
    assert all(checked_exercise(source) == exercise for exercise, (_, source) in tests.items())
    answers = [c.name for c in cells if c.answer]
    assert answers == list(tests)
    assert all(cells[position - 1].name == exercise for exercise, (position, _) in tests.items())


# ------------------------------------------------------------------------------------------------ program_seed

def seed_of(nb, secret: bytes = COURSE_SECRET) -> int:
    return program_seed(program(nb, course_nb())[0], secret)


def test_the_same_program_always_gets_the_same_seed():
    assert seed_of(course_nb()) == seed_of(course_nb())


@pytest.mark.parametrize("change", [
    lambda nb: nb.cells.insert(4, new_code_cell("TABLE = {(2.0, 0.1): 12.01}\n")),  # a table in a cell of its own
    lambda nb: setattr(nb.cells[5], "source", HELPER + "TABLE = {(2.0, 0.1): 12.01}\n"),  # or in a given cell
    lambda nb: setattr(nb.cells[6], "source", ANSWER_B + "# a comment\n"),  # any edit of an answer cell
    lambda nb: nb.cells.insert(1, new_code_cell("def unused():\n    pass\n")),  # a definition above everything
    # the same code in other positions: the worker names a given cell by its position, which code can read
    lambda nb: nb.cells.insert(1, new_markdown_cell("")),
], ids=["added cell", "given cell", "answer cell", "first cell", "positions"])
def test_any_change_to_what_the_worker_runs_changes_the_seed(change):
    nb = course_nb()
    change(nb)
    assert seed_of(nb) != seed_of(course_nb())


def test_what_never_reaches_the_worker_leaves_the_seed_alone():
    """A given cell's demonstration, markdown and test cells are not run there, so they do not change the cases."""
    nb = course_nb()
    nb.cells[1].source = GIVEN + "print(math.e)\n"
    nb.cells[0].source = "# Two exercises, annotated"
    nb.cells[3].source = "pass"
    assert seed_of(nb) == seed_of(course_nb())


def test_the_seed_tells_an_answer_cell_from_a_given_cell_with_the_same_code():
    """The worker runs the two differently (a given cell's failing import binds a stand-in), so they count apart."""
    code = "def a(x):\n    return 2 * x"
    assert program_seed([Cell("a", code, answer=True)], COURSE_SECRET) != \
        program_seed([Cell("a", code, answer=False)], COURSE_SECRET)


def test_one_program_gets_another_seed_under_another_courses_secret():
    """The secret keys the seed: with it unknown, no edit can be tried out against the cases it would draw."""
    assert seed_of(course_nb(), bytes(32)) != seed_of(course_nb()) == seed_of(course_nb(), bytes(COURSE_SECRET))
