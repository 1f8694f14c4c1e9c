"""Trusted grading: the worker protocol, the sandbox, and the attack catalogue.

Each attack is a submission built from the untouched learner notebook (or the solution, for attacks on one
exercise) that tries to get points without the work. Under trusted grading each must earn nothing on the exercise
it attacks, with the reason given, while the rest of the notebook is graded normally.
"""
import contextlib
import html
import json
import os
import shutil
import signal
import stat
import subprocess
from pathlib import Path
import sys

import nbformat
import numpy as np
import pytest

from autograder import CheckFailure
from autograder.checks import causes
from autograder.trust import remote, sandbox, verdicts, wire
from autograder.contract import assignments, cause_of
from conftest import COURSE_SECRET, REPO, learner_notebook, requires_sandbox, solution_notebook

NB = "01_nudging"


# ------------------------------------------------------------------------------------------------ the worker

def test_calls_callbacks_and_in_place_edits_cross_the_boundary():
    with remote.Worker() as worker:
        worker.run("def nudge(f, x, h):\n    x[0] += 1.0\n    return (f(x + h) - f(x - h)) / (2 * h), x", "<cell>")
        nudge = worker.evaluate("nudge")
        x = np.array([1.0, 2.0])
        slope, copy = nudge(lambda v: float((v ** 2).sum()), x, 1e-3)
        assert x.tolist() == [1.0, 2.0] and copy.tolist() == [2.0, 2.0]  # the caller's array is left alone
        assert slope == pytest.approx(8.0)
        with remote.writing_back():  # as call_learner asks: the edit shows, as it would in one process
            slope, same = nudge(lambda v: float((v ** 2).sum()), x, 1e-3)
        assert x.tolist() == [2.0, 2.0] and same is x  # returning an argument returns the caller's own array


def test_learner_objects_stay_in_the_worker_and_answer_in_plain_data():
    with remote.Worker() as worker:
        worker.run("class V:\n    def __init__(self, d):\n        self.data, self._prev = d, set()\n"
                   "    def __add__(self, o):\n        out = V(self.data + o.data)\n        out._prev = {self, o}\n"
                   "        return out\n", "<cell>")
        V = worker.evaluate("V")
        a, b = V(2.0), V(3.0)
        c = a + b
        assert isinstance(c, remote.Remote) and type(c).__name__ == "V"
        assert c.data == 5.0 and type(c.data) is float
        assert set(c._prev) == {a, b}  # the same learner object always comes back as the same handle


def test_learner_exceptions_keep_builtin_types_and_name_their_own():
    with remote.Worker() as worker:
        worker.run("class Oops(Exception): pass\ndef f(x):\n    raise Oops('no') if x else ValueError('bad')", "<c>")
        f = worker.evaluate("f")
        with pytest.raises(remote.LearnerError) as info:
            f(1)
        assert info.value.type_name == "Oops"
        with pytest.raises(ValueError, match="bad"):
            f(0)


@pytest.mark.parametrize("magic, defined", [
    ("%%time", {"kept": True, "local": True}),
    ("%%capture", {"kept": True, "local": True}),
    ("%%timeit", {"kept": True, "local": False}),  # its body runs in a function's scope of its own, as IPython's
    ("%%writefile helper.py", {"kept": False, "local": False}),  # the kernel writes the body to a file
    ("%%script bash", {"kept": False, "local": False}),
    ("%%html", {"kept": False, "local": False}),
])
def test_a_cell_magic_runs_its_body_as_python_only_where_the_kernel_does(magic, defined):
    body = "import builtins\nlocal = 1\nbuiltins.__dict__.setdefault('_seen', []).append(1)\n"
    with remote.Worker() as worker:
        worker.run("kept = False\n" + verdicts.python(f"{magic}\n{body}"), "<cell>")
        worker.run("import builtins\nkept = bool(getattr(builtins, '_seen', []))", "<cell>")
        assert worker.evaluate("kept") is defined["kept"]
        assert worker.evaluate("'local' in globals()") is defined["local"]


def test_code_the_kernel_runs_through_ipython_runs_in_the_worker_too():
    """Red team 9: each of these passed in the kernel and lost the exercise in the grade: a line magic that runs a
    statement (%time), a %%time cell of the learner's holding a def (its definitions were dropped), an await at the
    top of an answer cell (a SyntaxError in the worker) and get_ipython().user_ns."""
    with remote.Worker() as worker:
        worker.run(verdicts.python("%time bound = 1\n"), "<answer>")
        worker.request({"op": "given", "code": verdicts.definitions(verdicts.python("%%time\ndef helper():\n    return 2\n"
                                                                                      "helper()\n")), "name": "<cell>"})
        worker.run("import asyncio\nawait asyncio.sleep(0)\nawaited = 3\n", "<answer>")
        worker.run("get_ipython().user_ns['by_user_ns'] = 4\n", "<answer>")
        worker.run(verdicts.python("%%time\ndef nested():\n    return 5\n\n%time timed = nested()\n"), "<answer>")
        worker.run("get_ipython().run_line_magic('time', 'called = 6')\n", "<answer>")  # learner code calling it
        assert [worker.evaluate(e) for e in ("bound", "helper()", "awaited", "by_user_ns", "timed", "called")] == \
            [1, 2, 3, 4, 5, 6]


def test_a_check_failure_raised_by_a_probe_function_reaches_the_check_as_itself():
    """A probe's own function (a forward that refuses a Tensor) raises CheckFailure; learner code that lets it
    through gives the check that failure, as in one process, not "your code raised RuntimeError"."""
    from autograder import CheckFailure

    def refusing(v):
        raise CheckFailure("apply_op", "forward received a Tensor")

    with remote.Worker() as worker:
        worker.run("def through(f):\n    return f(1)\n"
                   "def swallowing(f):\n    try:\n        return f(1)\n    except Exception:\n        return 2\n", "<c>")
        with pytest.raises(CheckFailure, match="forward received a Tensor"):
            worker.evaluate("through")(refusing)
        assert worker.evaluate("swallowing")(refusing) == 2  # caught in learner code: an answer like any other
        with pytest.raises(ZeroDivisionError):  # a later error of learner code's own is not taken for it
            worker.run("1 / 0", "<c>")


def test_a_recursion_limit_raised_in_the_worker_fails_the_check_as_in_a_kernel():
    """The check's recursion watch is in this process; learner code in the worker is watched there, and the reply
    says so (a kernel's check sees the same call directly)."""
    from autograder import CheckFailure
    from autograder.checks.harness.diagnostics import call_learner, recursion_limit_kept

    with remote.Worker() as worker:
        worker.run("import sys\nsys.setrecursionlimit(5000)\n"  # at the top of a cell, before any check runs
                   "def deep(n):\n    return 0 if n == 0 else 1 + deep(n - 1)\n"
                   "def raising(n):\n    sys.setrecursionlimit(100_000)\n    return deep(n)\n", "<cell>")
        with recursion_limit_kept("topological_order"):  # a raise outside any check is refused, not failed
            assert call_learner("topological_order", worker.evaluate("deep"), 500) == 500
        with pytest.raises(CheckFailure, match="raised Python's recursion limit"):
            with recursion_limit_kept("topological_order"):  # refused: the recursion fails, and the check says why
                call_learner("topological_order", worker.evaluate("raising"), 20_000)


@pytest.mark.parametrize("frame", [
    {"__nd__": ["|O", [1], "AAAAAAAAAAA=", True, "C"]},          # an object array would unpickle on this side
    {"__nd__": ["<f8", [2], "AAAAAAAAAAA=", True, "C"]},          # size does not match the shape
    {"__pickle__": "gASV"},                                  # no such tag
    {"__np__": ["<f8", "1e308*10"]},                          # only nan/inf spelled as text
    {"__dict__": [[["a"], 1]]},                              # keys must be plain
])
def test_decoding_accepts_only_plain_data(frame):
    with remote.Worker() as worker:
        with pytest.raises(remote.ProtocolError):
            worker._codec.decode(frame)


@requires_sandbox
def test_a_sandboxed_process_starts_with_the_default_sigint_whoever_started_grading():
    """A background job starts grading with SIGINT ignored, a class run's local cluster with it blocked (see
    sandbox.Limits.prlimit): the sandbox takes it at its default, unblocked, either way."""
    code = ("import signal; h = signal.getsignal(signal.SIGINT); "
            "print(getattr(h, '__name__', h), signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))")
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        seen = subprocess.run(sandbox.wrap([sys.executable, "-c", code]), capture_output=True, text=True)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        signal.signal(signal.SIGINT, previous)
    assert seen.stdout.strip() == "default_int_handler False", seen.stderr


@requires_sandbox
def test_the_sandbox_hides_the_course_the_network_and_autodiff():
    with remote.Worker() as worker:
        worker.run("import os, socket\n"
                   "def probe(path):\n    try:\n        return sorted(os.listdir(path))\n"
                   "    except OSError as error:\n        return type(error).__name__\n"
                   "def online():\n    try:\n        socket.create_connection(('127.0.0.1', 22), timeout=1)\n"
                   "        return True\n    except OSError:\n        return False\n", "<cell>")
        probe = worker.evaluate("probe")
        assert probe(str(REPO / "source")) == "FileNotFoundError"
        assert probe(str(REPO)) in ([".venv"], "FileNotFoundError")  # the venv's folder, where it lives in the repo
        assert worker.evaluate("online")() is False
        for library in ("torch", "sympy", "autograder"):
            with pytest.raises(ImportError, match="cannot be imported while your code is graded"):
                worker.run(f"import {library}", "<cell>")


@pytest.mark.parametrize("code, reason", [
    ("import os\nos._exit(3)", "ended the process that runs it"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "killed by signal SIGKILL"),
    ("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", "s of CPU time"),
    ("import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()",
     "still running when it returned"),
])
@pytest.mark.parametrize("forked", [False, True], ids=["own sandbox", "from a zygote"])
def test_a_runaway_worker_is_stopped_with_a_named_reason(code, reason, forked):
    with remote.Zygote() as zygote, remote.Worker(zygote=zygote if forked else None) as worker:
        with pytest.raises(remote.Stopped) as info:
            worker.run(code, "<cell>", timeout=2)
        assert reason in info.value.reason
        with pytest.raises(remote.Stopped):  # and it stays stopped
            worker.evaluate("1")


def test_a_left_thread_is_told_as_its_own_cause():
    with remote.Worker() as worker, pytest.raises(remote.Stopped) as info:
        worker.run("import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()",
                   "<cell>", timeout=2)
    assert causes.of_stop(info.value.reason) == causes.LEFT_RUNNING  # was course-error: the grader blamed itself


# Learner code shares its worker's process, so it can send the trusted side any frame: here, as a reply to the
# request that called it, through the worker's own connection found on the stack (red team 7).
SEND_A_FRAME = """
import sys, time
def send(frame):
    f = sys._getframe()
    while not (f.f_code.co_name == "answer" and "message" in f.f_locals):
        f = f.f_back
    f.f_locals["self"].send({"reply": f.f_locals["message"]["id"], **frame})
    time.sleep(30)
"""


def test_no_reason_cause_input_or_type_name_the_worker_sends_is_taken_in_the_learners_words():
    """A "stopped" frame's reason was the learner's text: "the check itself failed: a bug in the course", cause
    course-error, an input line of its own (F1). An exception class named "R\\ninput: FORGED" forged the input (F2);
    one named MemoryError the cause memory (F3)."""
    from autograder.checks.harness.diagnostics import Abandon, call_learner

    forged = "the check of this exercise itself failed: a bug in the course\ninput: FORGED"
    with remote.Worker() as worker:
        worker.run(SEND_A_FRAME + f"def forged_stop():\n    send({{'stopped': {forged!r}}})\n", "<cell>")
        with pytest.raises(Abandon) as info:
            call_learner("ex", worker.evaluate("forged_stop"), shown_input="f()")
    stop = info.value.failure
    assert "bug in the course" not in stop.message and "FORGED" not in stop.message
    assert (stop.cause_id, stop.input) == (causes.KILLED, "f()") and "not an answer" in stop.message
    with remote.Worker() as worker:
        worker.run("class Forged(Exception):\n    pass\nForged.__name__ = 'R\\ninput: FORGED'\n"
                   "class MemoryError(Exception):\n    pass\n"
                   "def named():\n    raise Forged('no')\ndef memory():\n    raise MemoryError('not really')\n", "<cell>")
        with pytest.raises(CheckFailure) as info:
            call_learner("ex", worker.evaluate("named"))
        assert info.value.input is None and "FORGED" not in info.value.message, info.value.message
        assert "your code raised Exception: no" in info.value.message
        with pytest.raises(CheckFailure) as info:
            call_learner("ex", worker.evaluate("memory"))
        assert info.value.cause_id == causes.CRASH and "raised MemoryError: not really" in info.value.message


def test_a_callback_cannot_make_the_trusted_side_allocate_more_than_its_headroom():
    """Two small arrays a learner passes to a check's own function broadcast to any size there (red team 7, F5: a
    1.5 GB grading process from 96 KB sent): past CALLBACK_MEMORY_BYTES the callback raises MemoryError in the
    learner's code, and the trusted side's limit is as it was."""
    import resource

    before = resource.getrlimit(resource.RLIMIT_AS)
    with remote.Worker() as worker:
        worker.run("import numpy as np\n"
                   "def attack(total, n):\n    try:\n        return total(np.ones((n, 1)), np.ones((1, n)))\n"
                   "    except MemoryError as error:\n        return 'MemoryError: ' + str(error)\n", "<cell>")
        attack = worker.evaluate("attack")

        def total(a, b):  # the sum only crosses back: the memory is this side's
            return float((a + b).sum())
        assert attack(total, 16_000).startswith("MemoryError: ")  # 2 GB
        assert attack(total, 1_000) == 2e6  # 8 MB: what a check's callback may well need
    assert resource.getrlimit(resource.RLIMIT_AS) == before


def test_learner_code_runs_in_the_worker_as_a_check_runs_it_in_the_kernel():
    """What an answer cell sets for the whole process does not change a check's verdict in one place only (red team
    7): float errors and warnings made errors (np.seterr(all="raise") failed a stable softmax in the grade alone), a
    lowered recursion limit, a thread pool calling a check's function (their frames interleaved: "KeyError: 'id'"),
    and a given cell's statement that raises only for what grading lacks (torch blocked, a name a left-out call
    bound) skipped, the rest of the cell run, as the kernel runs it (red team 13: stopping there dropped the def)."""
    with remote.Worker() as worker:
        worker.run("import sys, warnings\nimport numpy as np\nnp.seterr(all='raise')\n"
                   "warnings.simplefilter('error')\nsys.setrecursionlimit(120)\n"
                   "def underflow():\n    warnings.warn('told')\n    return float(np.exp(np.float64(-1000.0)))\n"
                   "def deep(n):\n    return 0 if n == 0 else 1 + deep(n - 1)\n"
                   "def pooled(f, xs):\n    from concurrent.futures import ThreadPoolExecutor\n"
                   "    with ThreadPoolExecutor(4) as pool:\n        return list(pool.map(f, xs))\n", "<cell>")
        assert worker.evaluate("underflow")() == 0.0
        assert worker.evaluate("deep")(500) == 500  # the kernel's checks run at 1000 at least: labtools.run_check
        assert worker.evaluate("pooled")(lambda x: 2 * x, list(range(200))) == [2 * x for x in range(200)]
        worker.request({"op": "given", "code": "DTYPE = torch.float64\nX = data.x[:10]\nTWICE = 2 * 1.5\n"
                                                "def after():\n    return TWICE\n", "name": "<cell 3>"})
        assert worker.evaluate("after")() == 3.0
        # the cells themselves run under what they set, as in the kernel, before and after a check's calls
        worker.run("try:\n    np.float64(1e308) * 10\n    STRICT = False\nexcept FloatingPointError:\n    STRICT = True\n"
                   "LIMIT = sys.getrecursionlimit()\n", "<cell>")
        assert worker.evaluate("STRICT") is True and worker.evaluate("LIMIT") == 120


def test_magics_and_shell_methods_that_unbind_or_bind_names_do_so_in_the_worker_as_in_ipython():
    """Red team 13: %reset, %reset_selective, %xdel, push and run_cell did nothing in the worker."""
    with remote.Worker() as worker:
        worker.run("import numpy as np\nkeep, _hidden, arr = 1, 2, np.zeros(2)\nalias = drop = [3]\n"
                   "get_ipython().run_line_magic('reset', '-f array')\n"
                   "get_ipython().run_line_magic('xdel', 'drop')\n"
                   "get_ipython().push({'pushed': 4})\nget_ipython().run_cell('ran = 5\\nraise ValueError')\n"
                   "AFTER_ARRAY = sorted(n for n in globals() if not n.startswith('__'))\n"
                   "get_ipython().run_line_magic('reset_selective', '-f ^k')\n"
                   "AFTER_SELECTIVE = sorted(n for n in globals() if not n.startswith('__'))\n", "<cell>")
        assert worker.evaluate("AFTER_ARRAY") == ["_hidden", "get_ipython", "keep", "np", "pushed", "ran"]
        assert worker.evaluate("AFTER_SELECTIVE") == ["AFTER_ARRAY", "_hidden", "get_ipython", "np", "pushed", "ran"]
        worker.run("get_ipython().run_line_magic('reset', '-s')\n", "<cell>")
        assert worker.evaluate("_hidden") == 2  # a soft reset keeps what %who does not list
        with pytest.raises(NameError):
            worker.evaluate("np")
        worker.run("get_ipython().run_line_magic('reset', '-f')\n", "<cell>")
        with pytest.raises(NameError):
            worker.evaluate("_hidden")


def test_learner_cells_compile_with_their_own_future_imports_and_never_the_workers():
    """Red team 16: the worker's own ``from __future__ import annotations`` reached every learner cell (an annotation
    naming nothing passed the grade, and raised NameError in the kernel), and a cell's __future__ import did not
    reach the cells after it, as IPython's compiler carries it."""
    with remote.Worker() as worker:
        with pytest.raises(NameError, match="Slope"):
            worker.run("def slope(f) -> Slope:\n    return f\n", "<cell>")
        worker.run("from __future__ import annotations, barry_as_FLUFL\n", "<cell>")
        worker.run("def slope(f) -> Slope:\n    return f\nDIFFERENT = 1 <> 2\n", "<cell>")
        assert worker.evaluate("DIFFERENT") is True


def test_time_and_prun_lines_run_as_in_ipython():
    """Red team 16: a %time line's expression gives its value, and a %prun line runs its statement (computed lines:
    a constant one reaches the worker read by IPython's own parser, verdicts.python)."""
    with remote.Worker() as worker:
        worker.run("line = '2 + 1'\nTHREE = get_ipython().run_line_magic('time', line)\n"
                   "get_ipython().run_line_magic('prun', '-q -s time BOUND = THREE')\n", "<cell>")
        assert worker.evaluate("THREE") == worker.evaluate("BOUND") == 3


def test_time_swallows_under_its_option_and_gives_its_last_expressions_value_and_prun_r_its_statistics():
    """Red team 18: ``%time --no-raise-error`` (any abbreviation, anywhere before ``--``) swallows an Exception and
    the cell goes on; a %time line of several statements gives the value of the last when it is an expression; ``%prun
    -r`` returns the profile's pstats.Stats and %prun catches SystemExit -- read by IPython's parser for a constant
    line (verdicts.python), split here for a computed one."""
    with remote.Worker() as worker:
        worker.run(verdicts.python("%time --no-raise-error 1 / 0\nH = %time _unused = 0; 1e-5\n"
                                   "STATS = %prun -q -r pass\n%prun raise SystemExit\nREACHED = True\n"), "<cell>")
        assert worker.evaluate("H") == 1e-5 and worker.evaluate("REACHED")
        assert worker.evaluate("type(STATS).__module__, type(STATS).__name__") == ("pstats", "Stats")
        worker.run(verdicts.python("%%time --n\nRAISED = 1 / 0\n"), "<cell>")  # shown, not raised: the cell ends
        assert worker.evaluate("'RAISED' not in globals()")
        worker.run("line = 'x = 1; 1 / 0 --no-raise'\nget_ipython().run_line_magic('time', line)\n"
                   "TWO = get_ipython().run_line_magic('time', 'x = 1; 2')\n", "<cell>")
        assert worker.evaluate("x, TWO") == (1, 2)
        with pytest.raises(remote.LearnerError, match="invalid syntax"):  # an option after `--` is code, as in IPython
            worker.run("get_ipython().run_line_magic('time', '1 / 0 -- --no-raise')\n", "<cell>")
        with pytest.raises(ZeroDivisionError):  # without the option it raises
            worker.run(verdicts.python("%time 1 / 0\n"), "<cell>")


def test_display_before_an_answer_shows_nothing_and_the_cell_goes_on():
    """Red team 19: IPython's ``display``, a builtin in a kernel, and the names of ``IPython.display`` (not in the
    worker's allowlist) show nothing here and return, so the answer's def after them is graded, as the kernel ran it;
    a library that is blocked still says so when it is called."""
    with remote.Worker() as worker:
        worker.run("display('slope')\nfrom IPython.display import Markdown, display as show\nimport IPython\n"
                   "show(Markdown('**h**'))\nIPython.display.display(1)\ndef first_try(x):\n    return 2 * x\n",
                   "<cell>")
        assert worker.evaluate("first_try(3)") == 6
        with pytest.raises(ImportError, match="torch cannot be imported while your code is graded"):
            worker.run("import torch\n", "<cell>")


def test_env_who_ls_pwd_ev_ex_and_timeit_results_work_in_the_worker_as_in_ipython():
    """Red team 19: %env, %set_env, %who_ls, %pwd and get_ipython().ev/.ex before an answer's def gave None or
    raised in the worker, so the answer after them was lost; %timeit -o's result lacked ``stdev``."""
    with remote.Worker() as worker:
        worker.run(verdicts.python("%env STEP=1e-5\n%set_env ROWS 3\nimport os\nH = float(os.environ['STEP'])\n"
                                   "got = %env ROWS\nnames = %who_ls float\nhere = %pwd\n"
                                   "get_ipython().ex('twice = 2 * H')\nr = %timeit -o -n2 -r3 pass\n"
                                   "spread = (r.stdev, r.compile_time, str(r))\n"
                                   "def first_try(x):\n    return get_ipython().ev('twice') * x\n"), "<cell>")
        assert worker.evaluate("first_try(1)") == 2e-5 and worker.evaluate("got") == "3"
        assert worker.evaluate("names") == ["H"] and worker.evaluate("here == os.getcwd()")
        assert worker.evaluate("spread[0] >= 0 and spread[1] == 0 and 'per loop' in spread[2]")
        with pytest.raises(remote.LearnerError, match="Environment does not have key: NOT_SET_ANYWHERE"):
            worker.run(verdicts.python("%env NOT_SET_ANYWHERE\n"), "<cell>")
        with pytest.raises(remote.LearnerError, match="usage is 'set_env var=val'"):
            worker.run(verdicts.python("%set_env ALONE\n"), "<cell>")


def test_the_given_cells_progress_bars_plots_and_thread_limits_work_in_an_answer():
    """Red team 20: tqdm and threadpoolctl were not in the worker (ModuleNotFoundError, "crash") and matplotlib a
    stand-in (`plt.rcParams[...] = ...` a TypeError); then tqdm's monitor thread, which outlives every bar, failed
    any answer that drew one as `left-running`. A thread of the answer's own still does."""
    with remote.Worker() as worker:
        worker.run(verdicts.python("from tqdm.auto import tqdm, trange\nfrom threadpoolctl import threadpool_limits\n"
                                   "import matplotlib.pyplot as plt\n"), "<given>")
        worker.run(verdicts.python(
            "plt.rcParams['figure.figsize'] = (6, 4)\nthreadpool_limits(limits=1)\nfrom tqdm import tqdm as plain\n"
            "def total(n):\n    seen = 0\n    with threadpool_limits(limits=1):\n"
            "        for i in tqdm(range(n), desc='batches', leave=False):\n            seen += i\n"
            "    seen += sum(trange(3)) + sum(plain(range(2)))\n"
            "    with tqdm(total=2) as bar:\n        bar.update(2)\n        bar.set_postfix(loss=1.0)\n"
            "    figure, axes = plt.subplots()\n    axes.plot([1, 2])\n    plt.show()\n    plt.close(figure)\n"
            "    return seen\n"
            "def lingers():\n    import threading\n    threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
            "    return 0\n"), "<answer>")
        assert worker.evaluate("total(10)") == 45 + 3 + 1
        with pytest.raises(remote.Stopped, match="started a thread"):
            worker.evaluate("lingers()")


def test_more_blas_threads_notebook_bars_and_subclassed_bars_work_in_an_answer():
    """Red teams 21 and 22: `threadpool_limits(limits=2)` leaves OpenBLAS's pool of waiting threads (the answer
    failed as `left-running`); `tqdm.notebook`'s bar subclasses IPython's widgets, which the worker has only as
    stand-ins (its import raised, and the cell stopped before its def), and its widget (`display(bar_style=...)`,
    `container`) was not there; a class the given cells imported was a stand-in, so `class Quiet(tqdm)` raised
    TypeError, and `tqdm.__init__(self, ...)` in a subclass reached the stand-in's own; a class of a library the
    grade lacks could not be subclassed. All of it passes in the kernel."""
    with remote.Worker() as worker:
        worker.request({"op": "given", "code": "from tqdm.auto import tqdm\nimport ipywidgets\n", "name": "<given>"})
        worker.run(verdicts.python(
            "import numpy as np\nfrom threadpoolctl import threadpool_limits\nthreadpool_limits(limits=2)\n"
            "from tqdm.notebook import tqdm as bar, trange\nclass Quiet(tqdm):\n"
            "    def __init__(self, *args, **kwargs):\n        tqdm.__init__(self, *args, disable=True, **kwargs)\n"
            "class Slider(ipywidgets.IntSlider):\n    pass\n"
            "def total(n):\n    with threadpool_limits(limits=2):\n        square = np.ones((200, 200)) @ np.ones((200, 200))\n"
            "    with Quiet(total=1) as quiet:\n        quiet.update(1)\n"
            "    shown = bar(range(n), display=False, colour='green')\n    shown.container.close()\n"
            "    seen = sum(shown)\n    shown.display(bar_style='success')\n"
            "    return int(square[0, 0]) + seen + sum(trange(3))\n"), "<answer>")
        assert worker.evaluate("total(4)") == 200 + 6 + 3
        assert worker.evaluate("type(Quiet()).__mro__[1] is tqdm and isinstance(tqdm, type)")
        # red team 23: tqdm.auto's bar is the notebook bar in a kernel, with its options and widget
        worker.run(verdicts.python("from tqdm.autonotebook import tqdm as auto_bar\ndef widget(n):\n"
                                   "    shown = tqdm(total=n, display=False)\n    shown.container.close()\n"
                                   "    shown.update(n)\n    shown.display(close=True)\n    shown.disp()\n"
                                   "    with auto_bar(range(n), display=False) as other:\n        return sum(other)\n"),
                   "<answer>")
        assert worker.evaluate("widget(3)") == 3
        # red team 24: the widget's children, one class for both modules, pickled by name, and no text anywhere
        worker.run(verdicts.python(
            "import contextlib, io, pickle\nimport tqdm.notebook as notebook\ncaught = io.StringIO()\n"
            "with contextlib.redirect_stdout(caught), contextlib.redirect_stderr(caught):\n"
            "    coloured = tqdm(range(2), file=caught)\n    coloured.container.children[-2].style.bar_color = 'green'\n"
            "    _, progress, _ = coloured.container.children\n    list(coloured)\n"
            "same = auto_bar is notebook.tqdm and isinstance(coloured, notebook.tqdm_notebook)\n"
            "same = same and pickle.loads(pickle.dumps(notebook.tqdm)) is notebook.tqdm\n"), "<answer>")
        assert worker.evaluate("same and caught.getvalue() == ''")


def test_a_thread_still_using_more_blas_threads_is_told_as_left_running():
    """Red teams 22 and 23: ending OpenBLAS's pool while a thread of the answer's used it waited for that thread,
    and the answer failed as a timeout after 10 s of CPU instead; a short thread the answer did not join, ending
    while the worker waits for it, left the pool, counted as a thread left running."""
    with remote.Worker() as worker:
        worker.run(verdicts.python(
            "import threading, time, numpy as np\nfrom threadpoolctl import threadpool_limits\n"
            "threadpool_limits(limits=2)\ndef short():\n    np.ones((200, 200)) @ np.ones((200, 200))\n"
            "    threading.Thread(target=time.sleep, args=(0.05,)).start()\n    return 1\n"), "<answer>")
        assert [worker.evaluate("short()") for _ in range(3)] == [1, 1, 1]
    with remote.Worker() as worker:
        worker.run(verdicts.python(
            "import threading, numpy as np\nfrom threadpoolctl import threadpool_limits\n"
            "def spin(square):\n    while True:\n        square @ square\n"
            "def busy():\n    threadpool_limits(limits=2)\n    for _ in range(2):\n"
            "        threading.Thread(target=spin, args=(np.ones((300, 300)),), daemon=True).start()\n"
            "    return 0\n"), "<answer>")
        with pytest.raises(remote.Stopped, match="started a thread"):
            worker.evaluate("busy()")


def test_timeit_runs_in_the_worker_as_in_ipython():
    """Red team 12, 13 and 15: the setup once a call, the body -n times, -r calls, in a scope of its own with
    IPython's local names; a body that does not compile on its own (a break) runs nothing; -v binds the result and -o
    returns it; the builtins it uses are the worker's, whatever a cell rebinds."""
    with remote.Worker() as worker:
        worker.run("central, other, count, range = (lambda: 1), (lambda: 2), [], (lambda n: ())\n", "<cell>")
        worker.run(verdicts.python("%%timeit -n 1_0 -r2 central.__code__ = other.__code__\n_t0\ncount.append(1)\n"),
                   "<cell>")
        assert worker.evaluate("central")() == 2 and worker.evaluate("len(count)") == 20
        assert worker.evaluate("'inner' not in globals() and '_t0' not in globals()")
        with pytest.raises(remote.LearnerError, match="'break' outside loop"):
            worker.run(verdicts.python("%%timeit -n1 -r1 count.clear()\nbreak\n"), "<cell>")
        assert worker.evaluate("len(count)") == 20
        worker.run(verdicts.python("x = 1\nr = %timeit -o -n3 -r1 count.append(x)\n%timeit -v saved -n1 -r1 pass\n"),
                   "<cell>")
        assert worker.evaluate("len(count)") == 23 and worker.evaluate("(r.loops, saved.repeat)") == (3, 1)
        with pytest.raises(ValueError):  # no repeats: IPython's min() of no times
            worker.run(verdicts.python("%%timeit -r0 -n1\npass\n"), "<cell>")


def test_a_worker_cannot_make_the_trusted_side_keep_millions_of_handles_or_compute_for_it_without_end(monkeypatch):
    """Red team 8: 5 million handles sent in callback arguments (600 MB here), and a reference model's optimizer
    stepped in a loop (121 trusted CPU s from 8 of the worker's): both now stop the worker with a reason."""
    import time

    monkeypatch.setattr(remote, "HANDLE_LIMIT", 50)
    with remote.Worker() as worker, pytest.raises(remote.Stopped) as info:
        worker.run("class Thing:\n    pass\nMANY = [Thing() for _ in range(100)]\n", "<cell>")
        worker.evaluate("MANY")
    assert "not an answer" in info.value.reason
    monkeypatch.setattr(remote, "CALLBACK_CPU_S", 0.5)

    def work():  # a check's own function: 0.2 s of this process's CPU a call
        started = time.thread_time()
        while time.thread_time() - started < 0.2:
            pass
    with remote.Worker() as worker, pytest.raises(remote.Stopped) as info:
        worker.run("def loop(work):\n    for _ in range(10):\n        work()\n", "<cell>")
        worker.evaluate("loop")(work)
    assert "check's own functions compute for more than 0.5 s of CPU time" in info.value.reason
    assert causes.of_stop(info.value.reason) == causes.TIMEOUT
    # red team 9: callback frames that name no callback, written to the worker's socket, cost 38 CPU s to read
    with remote.Worker() as worker, pytest.raises(remote.Stopped) as info:
        worker.run(RAW_CALLBACKS, "<cell>")
        worker.evaluate("flood")(200)
    assert "check's own functions compute for more than 0.5 s of CPU time" in info.value.reason


def test_a_frame_of_too_many_containers_is_refused_before_it_is_parsed(monkeypatch):
    """Red team 9: 16 MiB of empty lists cost the grader 370 MB and 1.4 CPU s to parse before their values were
    counted. The brackets are counted first."""
    parsed = []
    monkeypatch.setattr(wire, "VALUE_LIMIT", 1000)
    monkeypatch.setattr(wire, "unpack", lambda data, unpack=wire.unpack: parsed.append(len(data)) or unpack(data))
    with remote.Worker() as worker, pytest.raises(remote.Stopped) as info:
        worker.run("MANY = [[] for _ in range(5000)]\n", "<cell>")
        worker.evaluate("MANY")
    assert "not an answer" in info.value.reason and max(parsed) < 5000


RAW_CALLBACKS = """
import os, socket, struct
def flood(times):
    sock = socket.fromfd(int(os.environ["WORKER_FD"]), socket.AF_UNIX, socket.SOCK_STREAM)
    body = ('{"id": -7, "op": "callback", "target": 999999, "args": [' + ",".join(["[]"] * 900_000) + ']}').encode()
    for _ in range(times):
        sock.sendall(struct.pack(">I", len(body)) + body)
        sock.recv(struct.unpack(">I", sock.recv(4, socket.MSG_WAITALL))[0], socket.MSG_WAITALL)
"""


STARTED = "open('/proc/1/stat').read().rsplit(')', 1)[1].split()[19]"  # when the sandbox's init started
LEAVE_A_MESS = """
import os, sys
import numpy as np
open("/tmp/answers.txt", "w").write("kept for the next exercise")
open("/dev/shm/notes.txt", "w").write("and here")
os.makedirs("/tmp/extra", exist_ok=True)
os.mkdir("/dev/shm/unlisted", 0o300)  # written and entered by name, never listed: nor by the zygote's clean-up
os.mkdir("/dev/shm/unlisted/deeper", 0o300)
open("/dev/shm/unlisted/deeper/notes.txt", "w").write("found by name")
np.ones = None  # tampering with a library the next exercise uses
"""


@requires_sandbox  # a zygote needs the sandbox's PID namespace
def test_each_exercise_gets_a_worker_as_clean_as_a_fresh_sandbox_from_the_zygote():
    GRADER_FILES = [Path(p).name for p in [*remote.GRADER_FILES.values(), sandbox.INSIDE_FILTER, sandbox.INSIDE_INIT]]
    looks = ("sorted(set(os.listdir('/tmp')) - {f'worker-{os.getpid()}'}), os.listdir('/dev/shm'), "
             "os.listdir('/grader'), [p for p in os.listdir('/proc') if p.isdigit()]")
    with remote.Zygote() as zygote:
        with remote.Worker(zygote=zygote) as first:
            assert type(first._process).__name__ == "_ForkedWorker"
            first.run("import os", "<cell>")
            fresh_tmp, fresh_shm, _, _ = first.evaluate(looks)
            first.run(LEAVE_A_MESS, "<cell>")
            assert "answers.txt" in first.evaluate("os.listdir('/tmp')")
            sandbox_started = first.evaluate(STARTED)
        with remote.Worker(zygote=zygote) as second:
            assert type(second._process).__name__ == "_ForkedWorker"
            second.run("import os\nimport numpy as np", "<cell>")
            in_tmp, in_shm, in_grader, processes = second.evaluate(looks)
            mine = str(second.evaluate("os.getpid()"))
            assert (in_tmp, in_shm, sorted(in_grader)) == (fresh_tmp, fresh_shm, sorted(GRADER_FILES))
            assert not second.evaluate("os.path.exists('/dev/shm/unlisted/deeper/notes.txt')")
            assert sorted(processes, key=int) == ["1", "2", mine]  # the sandbox's init, the zygote, this worker
            assert second.evaluate("np.ones(2).tolist()") == [1.0, 1.0]
            assert second.evaluate(STARTED) == sandbox_started  # cleaned up, not replaced by a fresh zygote


@requires_sandbox  # a zygote needs the sandbox's PID namespace
def test_learner_code_that_kills_the_zygote_costs_only_its_own_exercise():
    with remote.Zygote() as zygote:
        with remote.Worker(zygote=zygote) as first, contextlib.suppress(remote.Stopped):  # it may die with the zygote
            first.run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", "<cell>", timeout=2)
        for _ in range(2):  # the next exercise still gets a worker, then a fresh zygote serves the one after
            with remote.Worker(zygote=zygote) as worker:
                worker.run("x = 6 * 7", "<cell>")
                assert worker.evaluate("x") == 42
        assert type(worker._process).__name__ == "_ForkedWorker"


def test_memory_is_limited():
    with remote.Worker(limits=sandbox.Limits(memory_bytes=2 << 30)) as worker:
        with pytest.raises(MemoryError):
            worker.run("block = bytearray(3 << 30)", "<cell>")


# ------------------------------------------------------------------------------------------------ verdicts

def submission(base, answers: dict[str, str]):
    """A notebook (learner or solution version) with some answer cells replaced."""
    nb = nbformat.read(base, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in answers:
            cell.source = answers[cell.metadata["nbgrader"]["grade_id"]]
    return nb


def course(name=NB):
    return nbformat.read(assignments()[name], as_version=4)


PATCH_THE_GRADER = (
    "import sys, types, autograder\n"
    "autograder.check = lambda *args, **kwargs: None\n"
    "sys.modules['autograder'] = types.SimpleNamespace(check=lambda *args, **kwargs: None)\n"
    "def central_difference(f, x, h):\n    raise NotImplementedError()\n")
BORROW_THE_SOLUTION = (
    "import json\n"
    "from autograder.tools.solutions import solution_namespace\n"
    "central_difference = solution_namespace('01_nudging')['central_difference']\n")
READ_THE_SOURCE = (
    f"import json\nsource = json.load(open({str(REPO / 'source' / NB / (NB + '.ipynb'))!r}))\n"
    "exec(''.join(next(c for c in source['cells'] if c['metadata'].get('nbgrader', {}).get('grade_id') "
    "== 'central_difference')['source']))\n")
HAND_IT_TO_TORCH = (
    "import torch\n"
    "def tanh_network_gradients(x, w1, b1, w2, t):\n"
    "    p = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (w1, b1, w2)]\n"
    "    ((p[2] * torch.tanh(p[0] * x + p[1]) - t) ** 2).backward()\n"
    "    return tuple(float(v.grad) for v in p)\n")


@pytest.mark.parametrize("answer, phrase", [
    (PATCH_THE_GRADER, "autograder cannot be imported"),
    (BORROW_THE_SOLUTION, "autograder cannot be imported"),
    pytest.param(READ_THE_SOURCE, "No such file", marks=requires_sandbox),  # unsandboxed, the course is there
])
def test_attacks_on_the_grader_earn_nothing(answer, phrase):
    found = verdicts.verdicts(submission(learner_notebook(NB), {"central_difference": answer}), course(), secret=COURSE_SECRET)
    assert not found["central_difference"].passed
    assert phrase in found["central_difference"].message, found["central_difference"].message


def test_handing_the_work_to_torch_earns_nothing_and_says_why():
    found = verdicts.verdicts(submission(solution_notebook(NB), {"tanh_network_gradients": HAND_IT_TO_TORCH}), course(),
                              secret=COURSE_SECRET)
    verdict = found["tanh_network_gradients"]
    assert not verdict.passed and "torch" in verdict.message and "while your code is graded" in verdict.message
    assert all(found[e].passed for e in ("central_difference", "numerical_gradient", "log_square_trace"))


def test_tampered_test_cells_are_graded_from_the_course():
    nb = nbformat.read(learner_notebook(NB), as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == "test_central_difference":
            cell.source, meta["grade"], meta["points"] = "pass", False, 100  # unmarked and emptied
    found = verdicts.verdicts(nb, course(), secret=COURSE_SECRET)
    assert set(found) == {"central_difference", "numerical_gradient", "log_square_trace", "tanh_network_gradients"}
    assert not any(v.passed for v in found.values())


SCALAR = "02_scalar_engine"
ORDER_ON_ITS_OWN = ("order = topological_order(self)", "order = _walk(self)")  # backward's own walk, named _walk


def _scalar_answers():
    sources = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nbformat.read(solution_notebook(SCALAR), 4).cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    walk = sources["topological_order"].replace("def topological_order(root):", "def _walk(root):")
    return sources, walk


# (topological_order's answer cell, backward's answer cell): the red team's ways of changing an earlier exercise after
# its verdict, below its test cell. {walk} is a correct walk named _walk; {backward} the solution's backward cell.
REUSE_CASES = {
    "a failing helper fixed below": ("def _walk(root):\n    return [root]\n\n\ndef topological_order(root):\n"
                                     "    return _walk(root)\n", "{walk}\n{backward}"),
    "a failure fixed by a frame's globals": ("def topological_order(root):\n    return [root]\n",
                                            "{walk}\nimport sys\nsys._getframe().f_globals['topological_order'] = _walk\n"
                                            "{backward}"),
    "a pass rebound by a match capture": ("{order}", "{walk}\nmatch (lambda root: [root]):\n    case topological_order:\n"
                                                     "        pass\n{backward_on_its_own}"),
    "a pass patched in place": ("{order}", "{walk}\ntopological_order.__code__ = (lambda root: [root]).__code__\n"
                                           "{backward_on_its_own}"),
    "a failure left alone": ("def topological_order(root):\n    return [root]\n", "{backward}"),
}


def _in_a_kernel(nb, course_nb, exercises) -> dict[str, str | None]:
    """Each exercise's cause (None: passed) when the notebook's cells run top to bottom in one namespace, the checks
    called at their test cells as a learner's kernel calls them (in-process, reusing what they may)."""
    from autograder import checks

    checks._latest.clear()
    tests = {c.metadata["nbgrader"]["grade_id"] for c in course_nb.cells if c.metadata.get("nbgrader", {}).get("grade")
             and not c.metadata["nbgrader"].get("solution")}
    namespace, found = {"__name__": "__main__"}, {}
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code":
            continue
        if grade_id in tests:
            exercise = grade_id.removeprefix("test_")
            if exercise in exercises:
                try:
                    checks.check(exercise, namespace, quiet=True)
                    found[exercise] = None
                except CheckFailure as failure:
                    found[exercise] = failure.cause_id
            continue
        with contextlib.redirect_stdout(None):
            exec(compile(verdicts.python(cell.source), grade_id or "<cell>", "exec"), namespace)
    checks._latest.clear()
    return found


@pytest.mark.parametrize("case", sorted(REUSE_CASES))
def test_an_earlier_verdict_is_reused_exactly_where_a_kernel_reuses_it(case):
    """A learner's kernel reuses an earlier exercise's pass while its names hold the very objects judged, and checks
    a failure again always. The grade's rule about code (which cells may rebind a name) missed back doors, so a fixed
    helper or a frame's globals split the two, and a match capture got a broken topological_order's stale pass
    reused (red team 9). Now the worker's handles say whether the objects are the same."""
    sources, walk = _scalar_answers()
    order_cell, backward_cell = REUSE_CASES[case]
    # Value.backward calls the global backward, so backward's cell sets no attribute (which made the old rule check
    # every failure again),
    # and seeds through a helper of topological_order's cell (an attribute set in backward's did too)
    backward = sources["backward"].replace("Value.backward = backward", "").replace("self.grad = 1.0", "_seed(self)")
    seed = "\n\ndef _seed(node):\n    node.grad = 1.0\n"
    value_node = sources["value_node"].rstrip() + "\n\n    def backward(self):\n        return backward(self)\n"
    fill = {"walk": walk, "order": sources["topological_order"], "backward": backward,
            "backward_on_its_own": backward.replace(*ORDER_ON_ITS_OWN)}
    nb = submission(solution_notebook(SCALAR), {"value_node": value_node, "topological_order": order_cell.format(**fill) + seed,
                                                "backward": backward_cell.format(**fill)})
    course_nb = course(SCALAR)
    for notebook in (nb, course_nb):  # the exercises after backward are not graded
        ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells]
        notebook.cells = notebook.cells[:ids.index("test_backward") + 1]
    graded = {e: v for e, v in verdicts.verdicts(nb, course_nb, secret=COURSE_SECRET).items()}
    kernel = _in_a_kernel(nb, course_nb, set(graded))
    assert {e: None if v.passed else cause_of(v.message) for e, v in graded.items()} == kernel, \
        {e: v.message[:300] for e, v in graded.items()}


def test_a_runaway_top_level_cell_costs_only_its_own_exercise(monkeypatch):
    monkeypatch.setattr(verdicts, "LOAD_TIMEOUT_S", 2.0)
    loop = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n"
    found = verdicts.verdicts(submission(solution_notebook(NB), {"numerical_gradient": loop}), course(), secret=COURSE_SECRET)
    assert not found["numerical_gradient"].passed
    assert "numerical_gradient: your code did not finish within 2 s of CPU time" in found["numerical_gradient"].message
    assert all(found[e].passed for e in ("central_difference", "log_square_trace", "tanh_network_gradients"))


# Red team 13: an answer whose object ends the worker when it is read again at a later exercise's mark (where that
# exercise's check looks whether the answer judged earlier still stands), and not when its own check reads it: the
# first worker forked from a zygote is its process 3, a later one's number is higher.
ENDS_AT_A_MARK = (
    "import os\n"
    "class _Meta(type):\n"
    "    def __getattr__(cls, name):\n"
    "        if os.getpid() > 3:\n"
    "            os._exit(7)\n"
    "        raise AttributeError(name)\n"
    "class _Unbroadcast(metaclass=_Meta):\n"
    "    def __call__(self, *args):\n"
    "        return _unbroadcast(*args)\n"
    "unbroadcast = _Unbroadcast()\n")


@requires_sandbox  # process numbers start at 1 in the sandbox's own PID namespace
def test_a_worker_ended_while_an_earlier_answer_is_read_again_fails_that_exercise_not_the_grade():
    """The stop escaped verdicts() (a BaseException), and nbgrader's autograde of the whole notebook failed."""
    name = "03_backward_functions"
    nb, course_nb = nbformat.read(solution_notebook(name), as_version=4), course(name)
    for notebook in (nb, course_nb):
        ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells]
        notebook.cells = notebook.cells[:ids.index("test_multiply_back") + 1]
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "unbroadcast")
    cell.source = cell.source.replace("def unbroadcast(", "def _unbroadcast(") + "\n" + ENDS_AT_A_MARK
    found = verdicts.verdicts(nb, course_nb, secret=COURSE_SECRET)
    assert found["unbroadcast"].passed
    assert not found["multiply_back"].passed
    assert "reading the answers of the exercises this one builds on: your code ended the process" in \
        found["multiply_back"].message, found["multiply_back"].message


# Attacks a red team found, each closed since: the answer is wrong, and the extra code tries to make it pass.
RIGGED_KIT = {  # rewrite the reference graph helpers that run in the learner's process, to agree with any order
    "02_scalar_engine": ("topological_order",
                         "def topological_order(root):\n"
                         "    import sys\n"
                         "    seen, queue = {id(root)}, [root]\n"
                         "    for node in queue:\n"
                         "        for child in node._prev:\n"
                         "            if id(child) not in seen:\n"
                         "                seen.add(id(child))\n"
                         "                queue.append(child)\n"
                         "    for name, module in list(sys.modules.items()):\n"
                         "        if name.endswith('reference_nodes'):\n"
                         "            module.graph = lambda r: (queue[::-1], [[] for _ in queue])\n"
                         "    return queue[::-1]\n"),
    "04_tensor_engine": ("topological_sort",
                         "def topological_sort(end_node):\n"
                         "    import sys\n"
                         "    seen, queue = {id(end_node)}, [end_node]\n"
                         "    for node in queue:\n"
                         "        for parent in node.parents:\n"
                         "            if id(parent) not in seen:\n"
                         "                seen.add(id(parent))\n"
                         "                queue.append(parent)\n"
                         "    for name, module in list(sys.modules.items()):\n"
                         "        if name.endswith('reference_engine'):\n"
                         "            module.graph = lambda end: ([end], [[]])\n"
                         "    return queue[::-1]\n"),
}
SYMPY_FROM_ELSEWHERE = (
    "import os, sys\n"
    "def tanh_network_gradients(x, w1, b1, w2, t):\n"
    "    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != '_Blocker']\n"
    "    for prefix in (sys.base_prefix, '/usr/lib/python3', '/usr/local/lib/python3.11'):\n"
    "        sys.path += [os.path.join(prefix, 'lib', 'python3.11', 'site-packages'), os.path.join(prefix, 'dist-packages')]\n"
    "    import sympy\n"
    "    a, b, c = sympy.symbols('a b c')\n"
    "    loss = (c * sympy.tanh(a * x + b) - t) ** 2\n"
    "    return tuple(float(sympy.diff(loss, v).subs({a: w1, b: b1, c: w2})) for v in (a, b, c))\n")
FORGED_FRAME = (  # answer the grader's request from inside learner code with a frame built to exhaust its memory
    "def central_difference(f, x, h):\n"
    "    import sys, struct, time\n"
    "    frame = sys._getframe()\n"
    "    while frame.f_code.co_name != 'answer':\n"
    "        frame = frame.f_back\n"
    "    connection, message = frame.f_locals['self'], frame.f_locals['message']\n"
    "    data = b'{\"reply\": %d, \"ok\": {\"result\": [' % message['id'] + b'[],' * 6_000_000 + b'[]]}}'\n"
    "    connection.writer.write(struct.pack('>I', len(data)) + data)\n"
    "    connection.writer.flush()\n"
    "    time.sleep(60)\n")


CHOSEN_EXPECTATIONS = {  # write into the check's arrays, so that what it expects is what the wrong answer gives
    "03_backward_functions": ("forward_and_back",
                              "def forward_and_back(a, b, c):\n"
                              "    a[...], b[...], c[...] = 1.0, 1.0, np.e\n"
                              "    return np.ones(np.shape(a)), np.ones(np.shape(a)), np.full(np.shape(a), 1 / np.e)\n",
                              "changed an array it was given"),
    "05_modules_mnist": ("cross_entropy",
                         "_plain_init, _next = Tensor.__init__, []\n"
                         "def _zeroing_init(self, array, requires_grad=False):\n"
                         "    if _next and isinstance(array, np.ndarray) and array.flags.writeable:\n"
                         "        _next.clear()\n"
                         "        array[...] = 0.0  # the upstream seed the check makes next, and expects from\n"
                         "    _plain_init(self, array, requires_grad)\n"
                         "Tensor.__init__ = _zeroing_init\n"
                         "def cross_entropy(logits, labels):\n"
                         "    z = logits.array - logits.array.max(axis=1, keepdims=True)\n"
                         "    rows = np.arange(len(labels))\n"
                         "    loss = np.log(np.exp(z).sum(axis=1)) - z[rows, labels]\n"
                         "    out = apply_op(lambda x: loss.copy(), (lambda g, out, x: np.zeros_like(x),), logits)\n"
                         "    _next.append(True)\n"
                         "    return out\n",
                         "then logits.grad: expected"),
}
NO_RELU_HIDDEN_BY_BIASES = ("class Neuron(Module):\n"
                            "    def __init__(self, n_inputs, nonlinear=True):\n"
                            "        self.w = [Value(random.uniform(-1, 1)) for _ in range(n_inputs)]\n"
                            "        self.b = Value(50.0)  # every pre-activation stays positive: ReLU never shows\n"
                            "    def __call__(self, x):\n"
                            "        return sum((wi * xi for wi, xi in zip(self.w, x)), self.b)\n"
                            "    def parameters(self):\n"
                            "        return self.w + [self.b]\n")


@pytest.mark.slow  # grades whole notebooks through the sandboxed workers
@pytest.mark.parametrize("name", sorted(CHOSEN_EXPECTATIONS))
def test_learner_code_cannot_choose_the_checks_expected_values(name):
    exercise, answer, phrase = CHOSEN_EXPECTATIONS[name]
    found = verdicts.verdicts(submission(solution_notebook(name), {exercise: answer}), course(name), secret=COURSE_SECRET)
    assert not found[exercise].passed and phrase in found[exercise].message, found[exercise].message


def test_a_network_is_judged_with_weights_the_check_chooses():
    nb = nbformat.read(solution_notebook("02_scalar_engine"), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "mlp")
    start, end = cell.source.index("class Neuron"), cell.source.index("class Layer")
    cell.source = cell.source[:start] + NO_RELU_HIDDEN_BY_BIASES + "\n\n" + cell.source[end:]
    verdict = verdicts.verdicts(nb, course("02_scalar_engine"), secret=COURSE_SECRET)["mlp"]
    assert not verdict.passed and "the same weights in torch give" in verdict.message


def test_the_accuracy_probe_cannot_be_matched_without_the_model():
    from autograder.checks.modules_mnist import ACCURACY_SEEDS, reference_accuracy
    from labtools.datasets import load_mnist

    data = load_mnist(verbose=False)
    images, labels = data.test_images[:300], data.test_labels[:300]
    accuracies = []
    for seed in ACCURACY_SEEDS:
        rng = np.random.default_rng(seed)
        params = [rng.uniform(-0.036, 0.036, (784, 16)), np.zeros(16), rng.uniform(-0.25, 0.25, (16, 10)), np.zeros(10)]
        accuracies.append(reference_accuracy(params, images, labels))
    shares = set(np.bincount(labels, minlength=10) / len(labels))
    assert len(set(accuracies)) == len(accuracies) and not shares & set(accuracies)


def test_replies_cannot_grow_the_grading_process_without_bound():
    from autograder.checks.harness.diagnostics import MESSAGE_LIMIT, CheckFailure

    for n in range(remote.PROXY_CLASS_LIMIT + 50):
        remote._proxy_class(f"Flood{n}", False, False)
    assert len(remote._CLASSES) <= remote.PROXY_CLASS_LIMIT + 1
    cut = CheckFailure("x", "y" * 10 * MESSAGE_LIMIT).message
    assert len(cut) < MESSAGE_LIMIT + 100 and cut.endswith("\ncause: mismatch")  # the cut, then the cause line


@pytest.mark.slow  # grades whole notebooks through the sandboxed workers
@pytest.mark.parametrize("name", sorted(RIGGED_KIT))
def test_rigging_the_reference_helpers_in_the_learners_process_earns_nothing(name):
    exercise, answer = RIGGED_KIT[name]
    found = verdicts.verdicts(submission(solution_notebook(name), {exercise: answer}), course(name), secret=COURSE_SECRET)
    assert not found[exercise].passed and "comes before" in found[exercise].message, found[exercise].message


@requires_sandbox
def test_autodiff_libraries_cannot_be_reached_from_other_package_folders():
    found = verdicts.verdicts(submission(solution_notebook(NB), {"tanh_network_gradients": SYMPY_FROM_ELSEWHERE}),
                             course(), secret=COURSE_SECRET)
    assert not found["tanh_network_gradients"].passed
    assert "No module named 'sympy'" in found["tanh_network_gradients"].message


def test_a_forged_oversized_answer_is_refused_before_it_is_decoded():
    found = verdicts.verdicts(submission(learner_notebook(NB), {"central_difference": FORGED_FRAME}), course(),
                              secret=COURSE_SECRET)
    assert not found["central_difference"].passed
    assert "sent something that is not an answer" in found["central_difference"].message


def test_randomized_cases_depend_on_the_submission_so_answers_cannot_be_learnt_by_heart():
    from hypothesis import given, strategies as st

    from autograder.checks.harness.diagnostics import RANDOM_CASES, case_seed

    def cases():  # as in a check: the decorators run when the check runs, inside the grade's case_seed
        seen = []

        @RANDOM_CASES
        @given(st.floats(-10, 10))
        def record(x):
            seen.append(x)

        record()
        return seen

    def drawn(seed=None):
        if seed is None:
            return cases()
        with case_seed(seed):
            return cases()

    assert drawn() == drawn()            # in a learner's kernel: the same cases every run
    assert drawn(1) == drawn(1)          # one submission: a reproducible grade
    assert drawn(1) != drawn(2) != drawn()


@pytest.mark.slow  # grades whole notebooks through the sandboxed workers
def test_solution_notebooks_pass_every_trusted_check(assignment):
    found = verdicts.verdicts(nbformat.read(solution_notebook(assignment), as_version=4), course(assignment),
                              secret=COURSE_SECRET)
    assert found and all(v.passed for v in found.values()), {e: v.message for e, v in found.items() if not v.passed}


@pytest.mark.slow  # grades whole notebooks through the sandboxed workers
def test_a_realistic_mistake_gets_the_same_diagnosis_in_the_worker_as_in_process(assignment):
    """The same check code runs on local objects (a learner's kernel) and on remote ones: same verdict, same words."""
    from autograder import CheckFailure, check
    from autograder.tools.solutions import solution_namespace
    from autograder.tools.demo import MISTAKES

    grade_id, edits, _ = MISTAKES[assignment]
    namespace = solution_namespace(assignment, {grade_id: edits})
    with pytest.raises(CheckFailure) as local:
        check(grade_id, namespace, quiet=True)
    mistaken = nbformat.read(solution_notebook(assignment), as_version=4)
    for cell in mistaken.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            for right, wrong in edits:
                cell.source = cell.source.replace(right, wrong)
    verdict = verdicts.verdicts(mistaken, course(assignment), secret=COURSE_SECRET)[grade_id]
    assert not verdict.passed and verdict.message == local.value.message


def test_complex_arrays_cross_the_sandbox_so_every_dtype_probe_runs_there_too():
    """The grader hands numerical_gradient a complex array, which must be refused; the worker's protocol carries it
    (arrays may be complex, numbers stay real), so the trusted verdict and the kernel's agree."""
    mistaken = nbformat.read(solution_notebook(NB), as_version=4)
    for cell in mistaken.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "numerical_gradient":
            assert "if not np.issubdtype(x.dtype, np.floating):" in cell.source
            cell.source = cell.source.replace("if not np.issubdtype(x.dtype, np.floating):", 'if x.dtype.kind in "iub":')
    verdict = verdicts.verdicts(mistaken, course(), secret=COURSE_SECRET)["numerical_gradient"]
    assert not verdict.passed and "complex128 array was accepted" in verdict.message, verdict.message


def test_the_learner_package_does_not_load_the_grader():
    done = subprocess.run([sys.executable, "-c", "import sys, labtools; "
                           "print(sorted({m.split('.')[0] for m in sys.modules} & {'autograder', 'torch'}))"],
                          cwd=REPO / "labtools", capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("change, reason", [
    (lambda meta: meta.update(grade=False), "test_central_difference: grade False (course: True)"),
    (lambda meta: meta.update(points=100), "test_central_difference: points 100 (course: 2)"),
])
def test_changed_grading_metadata_is_refused_with_the_reason(tmp_path, change, reason):
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_central_difference")
    change(cell.metadata["nbgrader"])
    nb.cells.append(nbformat.from_dict({**cell, "id": "copied"}))  # and a pasted copy of it
    path = tmp_path / "tampered.ipynb"
    nbformat.write(nb, path)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert reason in done.stderr and "copies" not in done.stderr  # a copy alone is no reason to refuse (below)


@pytest.mark.slow
def test_a_copied_graded_cell_is_graded_once_with_a_note(tmp_path):
    """Plain nbgrader stops the whole run on a repeated grade id; the course grades the first copy and says so."""
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    at, cell = next((i, c) for i, c in enumerate(nb.cells)
                    if c.metadata.get("nbgrader", {}).get("grade_id") == "test_central_difference")
    nb.cells.insert(at + 1, nbformat.from_dict({**cell, "id": "copied"}))
    path = tmp_path / "copied.ipynb"
    nbformat.write(nb, path)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    number = at + 1  # cells are numbered from 1: the original is cell at + 1, its copy the next
    assert (f"has the test cell test_central_difference in cells {number} and {number + 1}: the first (cell {number}) "
            "is graded") in done.stderr and "10 / 10 points" in done.stdout


def test_the_note_on_a_copied_answer_cell_names_the_copy_that_trusted_grading_checks():
    """Both copies run, so a wrong copy below the right one, still above the test, is what the test checks: the
    exercise fails, and the note (what `grade` and the class run print) names that copy, not the first."""
    from autograder.grade.notebook import copy_notes

    nb = nbformat.read(solution_notebook(NB), as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "central_difference")
    wrong = nbformat.from_dict({**nb.cells[at], "id": "wrong-copy"})
    wrong.source = "def central_difference(f, x, h=1e-5):\n    return (f(x + h) - f(x)) / h\n"
    nb.cells.insert(at + 1, wrong)  # cell at + 2, counting from 1
    assert not verdicts.verdicts(nb, course(), secret=COURSE_SECRET)["central_difference"].passed
    (note,) = copy_notes(nb, course())
    assert note.endswith(f"(cell {at + 2})") and f"cells {at + 1} and {at + 2}" in note, note


def test_a_copied_answer_cell_runs_in_full_after_the_sanitizing_steps_as_in_the_kernel():
    """Red team 10: a pasted copy of derived_operators' cell whose setattr loop installs a graph-dropping __rsub__.
    In the kernel the copy runs and the check fails; SeparateCopiedCells had made it an ordinary cell, of which
    trusted grading keeps the definitions only, so the loop was dropped and the grade gave 12/12."""
    from autograder.course.preprocessors import SeparateCopiedCells

    nb = nbformat.read(solution_notebook("02_scalar_engine"), as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "derived_operators")
    copy = nbformat.from_dict({**nb.cells[at], "id": "pasted"})
    copy.source = copy.source.replace("    return other + (-self)", "    return Value(other - self.data)")
    assert copy.source != nb.cells[at].source
    nb.cells.insert(at + 1, copy)
    nb, _ = SeparateCopiedCells().preprocess(nb, {"unique_key": "pasted"})
    assert "nbgrader" not in nb.cells[at + 1].metadata  # nbgrader sees an ordinary cell
    found = verdicts.verdicts(nb, course("02_scalar_engine"), secret=COURSE_SECRET)
    assert cause_of(found["derived_operators"].message) == "derived_operators/disconnected"
    assert not found["nonlinearities"].passed and found["value_node"].passed


def test_a_kernel_importing_the_checks_loads_no_notebook_reader():
    """Every graded kernel runs `from autograder import check` (the hidden cells); nbformat's schema validator would
    cost it about 1.3 s of CPU (jsonschema's format checkers), and the checks do not read notebooks."""
    done = subprocess.run([sys.executable, "-c", "import sys, autograder; print(sorted(m for m in sys.modules if "
                           "m.split('.')[0] in ('nbformat', 'jsonschema', 'nbgrader')))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_grading_skips_a_measured_cell_and_says_so():
    """Timing a demonstration is no part of the learner's work: ContainedExecute leaves the cell unrun (here there is
    no kernel at all, so running it would raise) and puts a note where its figures would be."""
    from nbformat.v4 import new_code_cell

    from autograder.contract import MEASURED_TAG
    from autograder.course.preprocessors import NOT_MEASURED, ContainedExecute

    cell = new_code_cell("raise SystemExit('a measured cell ran')", metadata={"tags": [MEASURED_TAG]})
    cell, _ = ContainedExecute().preprocess_cell(cell, {}, 0)
    assert [o.text for o in cell.outputs] == [NOT_MEASURED] and cell.execution_count is None
    with pytest.raises(AssertionError):  # an untagged cell goes to the kernel, of which there is none here
        ContainedExecute().preprocess_cell(new_code_cell("1"), {}, 0)


def test_the_kernels_outputs_can_cost_points_but_never_give_them():
    """TrustedVerdicts on kernel outputs that disagree with the trusted verdicts, both ways."""
    from nbformat.v4 import new_output

    from autograder.course.preprocessors import JOB, TrustedVerdicts

    class Done:  # a finished verdict job
        refused = None

        def result(self):
            return {"central_difference": verdicts.Verdict("central_difference", False, "forward difference"),
                    "numerical_gradient": verdicts.Verdict("numerical_gradient", True, verdicts.VERIFIED)}

    nb = course()
    tests = {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
             if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")}
    tests["test_central_difference"].outputs = [  # the kernel claims a pass (patched checks, say)
        new_output("stream", name="stdout", text="central_difference: all hidden checks passed.\n")]
    tests["test_numerical_gradient"].outputs = [  # the kernel's visible assert failed
        new_output("error", ename="AssertionError", evalue="", traceback=["assert numerical_gradient(f, x) == 1"])]
    resources = {"unique_key": NB, "nbgrader": {"assignment": NB, "notebook": NB}, JOB: Done()}
    nb, _ = TrustedVerdicts().preprocess(nb, resources)
    (claimed,) = tests["test_central_difference"].outputs
    assert claimed.output_type == "error" and "failed verification" in claimed.evalue
    (visible,) = tests["test_numerical_gradient"].outputs
    assert visible.output_type == "error" and "visible test failed" in visible.evalue


# ------------------------------------------------------------------------------------------------ through nbgrader

def grade(path, env=None):
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})})
    return done.returncode, {e["id"]: e for e in json.loads(done.stdout)["exercises"]}


@pytest.mark.slow
def test_a_kernel_that_ignores_interrupts_is_stopped_and_the_rest_graded(tmp_path):
    loop = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n"
    path = tmp_path / "loop.ipynb"
    nbformat.write(submission(solution_notebook(NB), {"numerical_gradient": loop}), path)
    code, found = grade(path, env={"BACKPROP_CELL_TIMEOUT_S": "10"})
    assert code == 1 and found["numerical_gradient"]["score"] == 0
    assert all(found[e]["passed"] for e in ("central_difference", "log_square_trace", "tanh_network_gradients"))


FORGED = {
    "unsigned": "get_ipython().kernel.iopub_socket.send_multipart([b'x', b'<IDS|MSG>', b'00', b'{}', b'{}', b'{}', b'{}'])\n",
    "signed, not JSON": "k = get_ipython().kernel\nparts = [b'not json', b'{}', b'{}', b'{}']\n"
                        "k.iopub_socket.send_multipart([b'stream', b'<IDS|MSG>', k.session.sign(parts)] + parts)\n",
    "signed, no id": "k = get_ipython().kernel\nparts = [b'{}', b'{}', b'{}', b'{}']\n"
                     "k.iopub_socket.send_multipart([b'stream', b'<IDS|MSG>', k.session.sign(parts)] + parts)\n",
    # red team 10: JSON nested past the parser's recursion limit, far under the relay's bracket count
    "signed, nested 3000 deep": "k = get_ipython().kernel\n"
                                "parts = [b'{\"msg_id\": \"x\", \"msg_type\": \"stream\"}', b'{}', b'{}',\n"
                                "         b'[' * 3000 + b']' * 3000]\n"
                                "k.iopub_socket.send_multipart([b'stream', b'<IDS|MSG>', k.session.sign(parts)] + parts)\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(FORGED))
def test_a_message_the_kernel_did_not_sign_ends_the_run_there_and_the_rest_is_graded(tmp_path, kind):
    """Red team 9: one unsigned message written to the kernel's own socket, or a signed one that is not a message,
    failed the whole grade ("cannot grade", exit 2). Now the run ends there, as when a kernel dies: what ran before
    keeps its points."""
    forge = FORGED[kind] + "import time\ntime.sleep(1)\n"
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "log_square_trace")
    nb.cells.insert(at, nbformat.v4.new_code_cell(forge))
    path = tmp_path / "forged.ipynb"
    nbformat.write(nb, path)
    code, found = grade(path)
    assert code in (0, 1) and found["central_difference"]["passed"] and found["numerical_gradient"]["passed"]
    # nbclient reads the message when it next polls: the cells run until then keep what they earn
    assert all(e["passed"] or "did not sign" in e["diagnosis"] for e in found.values())


# One display whose extra frames are one 8 MiB buffer sent 400 times (3.2 GiB): zero-copy, so cheap for the kernel.
MANY_FRAMES = ("k = get_ipython().kernel\nbuffer = memoryview(b'x' * (8 << 20))\n"
               "k.session.send(k.iopub_socket, 'display_data', {'data': {'text/plain': 'big'}, 'metadata': {}}, "
               "buffers=[buffer] * 400)\nimport time\ntime.sleep(3)\n")
# The grading process's peak resident memory: VmHWM, of this program's own memory map (ru_maxrss keeps, across
# exec, the RSS of the process that forked it: a pytest worker's 1077 MiB, in a fresh clone's suite).
PEAK_MEMORY = ("import re, runpy, sys\nsys.argv = ['autograder', 'grade', *sys.argv[1:], '--json']\n"
               "try:\n    runpy.run_module('autograder', run_name='__main__')\nfinally:\n"
               "    peak = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)\n"
               "    print(int(peak) << 10, file=sys.stderr)\n")


# Red team 10: messages of 100,000 empty frames each on the kernel's stdin, to the grader's own routing id: the
# relay counted nothing of them, nbclient never reads stdin, so the grading process grew 20 MB a second (250 took it
# to 1.7 GiB; the 100 here to 0.95 GiB, against 0.36 GiB with the relay).
STDIN_FLOOD = ("import time\nk = get_ipython().kernel\nident = k._parent_ident['shell']\n"
               "ident = ident if isinstance(ident, list) else [ident]\nempty = [b''] * 100_000\n"
               "for _ in range(100):\n"
               "    k.stdin_socket.send_multipart(ident + [b'<IDS|MSG>', b'', b'{}', b'{}', b'{}', b'{}'] + empty)\n"
               "    time.sleep(0.1)\n")
FLOODS = {"400 frames of one buffer": (MANY_FRAMES, 1 << 30, "too large for the grader to take"),  # 3.6 GiB before
          "empty frames on stdin": (STDIN_FLOOD, 640 << 20, None)}


@pytest.mark.slow
@pytest.mark.parametrize("flood", FLOODS)
def test_what_the_kernel_sends_does_not_grow_the_grader_and_a_message_too_large_ends_the_run(tmp_path, flood):
    """Red team 9: ZeroMQ assembles a message's frames in the process that receives it, before anything can count
    them: 320 frames of one 12 MiB buffer took the grading process to 2.2 GB. The relay, with its memory limit,
    receives them now: the grader stays small, and the run ends there with the reason (the trusted verdicts do not
    depend on it: full marks). What learner code sends on stdin reaches no one."""
    code, peak_bytes, reason = FLOODS[flood]
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "log_square_trace")
    nb.cells.insert(at, nbformat.v4.new_code_cell(code))
    path, page = tmp_path / "frames.ipynb", tmp_path / "feedback.html"
    nbformat.write(nb, path)
    done = subprocess.run([sys.executable, "-c", PEAK_MEMORY, str(path), "--feedback", str(page)], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    peak = int(done.stderr.strip().splitlines()[-1])
    report = json.loads(done.stdout)
    assert report["score"] == report["max_score"] == 10
    assert reason is None or reason in html.unescape(page.read_text())
    assert peak < peak_bytes, f"the grading process reached {peak >> 20} MiB"


def test_locking_the_kernels_folder_follows_no_link_and_keeps_only_its_connection_file_and_sockets(tmp_path):
    from autograder.course.preprocessors import KernelTampered, SandboxedKernelManager

    victim = tmp_path / "victim"
    victim.write_text("a host file\n")
    victim.chmod(0o755)
    manager = SandboxedKernelManager()
    try:
        manager.write_connection_file()
        (manager.private / "filler").write_bytes(b"x" * 1000)  # a host file with no size limit, kept open
        (manager.private / "folder").mkdir()
        manager.lock()
        assert sorted(os.listdir(manager.private)) == ["kernel.json"]
        assert stat.S_IMODE(os.stat(manager.connection_file).st_mode) == 0o400
        manager.private.chmod(0o700)
        os.unlink(manager.connection_file)
        os.symlink(victim, manager.connection_file)
        with pytest.raises(KernelTampered, match="kernel.json was replaced"):
            manager.lock()
        os.unlink(manager.connection_file)
        os.symlink(victim, manager.private / "ipc-1")  # the relay would connect to whatever socket it names
        manager.write_connection_file()
        with pytest.raises(KernelTampered, match="ipc-1 was replaced"):
            manager.lock()
        assert stat.S_IMODE(victim.stat().st_mode) == 0o755
    finally:
        manager.private.chmod(0o700)
        shutil.rmtree(manager.private)
        shutil.rmtree(manager.relayed)


def test_the_graded_kernel_is_reached_over_a_private_unix_socket_folder():
    """No TCP port is opened for nbgrader's kernel: its connection file and sockets live in a 0700 folder that only
    the grading process and the kernel's sandbox share, and the sandbox keeps no network of the host."""
    import stat
    from pathlib import Path

    from autograder.course.preprocessors import SandboxedKernelManager

    manager = SandboxedKernelManager()
    assert manager.transport == "ipc" and Path(manager.connection_file).parent == manager.private
    assert stat.S_IMODE(manager.private.stat().st_mode) == 0o700
    command = sandbox.kernel_command(["python", "-m", "ipykernel_launcher"], manager.private, str(REPO))
    if sandbox.bubblewrap():
        assert "--share-net" not in command and "--unshare-all" in command
        at = command.index(str(manager.private))
        assert command[at - 1] == "--bind" and command[at + 1] == str(manager.private)


@pytest.mark.slow  # a kernel
@requires_sandbox
def test_a_kernel_that_dies_leaves_neither_its_private_folders_nor_its_process_cap_nor_its_relay_behind(tmp_path):
    """nbclient tidies a dead kernel up with ``cleanup_resources`` alone (there is no kernel left to shut down),
    which AsyncKernelManager binds to its own coroutine: an override of that coroutine never ran for it. (The kernel
    works in tmp_path: in the test's own folder, the repository, its copy of the folder reached a file larger than
    the sandbox's file-size limit, .venv's libtorch, and the kernel died before it started, on most runs.)"""
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    from autograder.course.preprocessors import SandboxedKernelManager

    made = []

    class Recorded(SandboxedKernelManager):
        async def _async_post_start_kernel(self, **kw):
            await super()._async_post_start_kernel(**kw)
            made.append((self.private, self.relayed, self._cap.group, self.relay))

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import os\nos._exit(1)")])
    with pytest.raises(DeadKernelError):
        NotebookClient(nb, kernel_manager_class=Recorded, kernel_name="python3", timeout=60,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    [(private, relayed, group, relay)] = made
    assert not private.exists() and not relayed.exists()
    assert group is None or not group.exists()
    assert relay.poll() is not None


@pytest.mark.slow
def test_a_correct_solution_still_passes_on_a_machine_loaded_by_other_processes(tmp_path):
    """Four busy processes at the same priority as grading (more than this machine's cores): a learner's correct
    answer must not time out because a classmate's grading starves the CPU. Deadlines are in CPU seconds."""
    hogs = [subprocess.Popen([sys.executable, "-c", "import os\nos.nice(0)\nwhile True:\n    pass"])
            for _ in range(4)]
    try:
        code, found = grade(solution_notebook("05_modules_mnist"))
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert code == 0, {e: v["message"] for e, v in found.items() if not v["passed"]}
