"""What a failed check tells a learner, and how learner code is called safely.

Every failure a learner sees is a :class:`CheckFailure`: a short diagnosis naming the misconception, the smallest
failing input, and expected vs received. It renders without a traceback, so neither the hidden test cell nor the
check's own source ever appears in a notebook output or in nbgrader feedback.
"""
from __future__ import annotations

import contextlib
import gc
import signal
import sys
import time
import types
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
from hypothesis import HealthCheck, seed, settings
from threadpoolctl import threadpool_limits

from autograder.checks import causes
from autograder.contract import with_cause, with_input
from autograder.trust import remote

PACKAGE = Path(__file__).resolve().parents[2]  # frames in autograder/ are the checks', not the learner's

# CPU seconds one call of learner code may take before we call it a runaway loop. Every exercise input is tiny.
CALL_TIMEOUT_S = 10
MESSAGE_LIMIT = 2000  # characters of one diagnosis
INPUT_LIMIT = 500  # characters of its failing input, kept as data

_SETTINGS = dict(max_examples=60, deadline=None, database=None, print_blob=False, report_multiple_bugs=False,
                 suppress_health_check=list(HealthCheck))
_CASE_SEED: list[int] = []  # set while a trusted grade runs (case_seed): the randomized cases depend on it


def RANDOM_CASES(test):
    """Settings for a check's randomized cases (hypothesis): 60 examples, no .hypothesis folder anywhere.

    In a learner's kernel the cases are derandomized, the same on every run. A trusted grade seeds them from the
    whole learner program (case_seed with autograder.trust.verdicts.program_seed), so they are reproducible for one
    submission but cannot be learnt by heart: a table of memorised answers changes the program, so the cases too.
    """
    return _cases(test, _SETTINGS)


def FEW_RANDOM_CASES(test):
    """RANDOM_CASES with 15 examples, for a check whose every case is a batch of calls that each cross into the
    worker many times (cross_entropy's loss and its gradient): the fixed probes diagnose, and one case a memorised
    table does not hold is enough to fail it."""
    return _cases(test, {**_SETTINGS, "max_examples": 15})


# How many more calls hypothesis may make once a case has failed, looking for a smaller one: each call runs the
# learner's code, and an unbounded shrink (about 360 calls for a slip in notebook 3's rules) took 2-8 s to report.
SHRINK_CALLS = 40


def _cases(test, chosen: dict):
    _bound_shrinking(test)
    if not _CASE_SEED:
        return settings(derandomize=True, **chosen)(test)
    return seed(_CASE_SEED[-1])(settings(derandomize=False, **chosen)(test))


def _bound_shrinking(test) -> None:
    """Stop a ``@given`` test SHRINK_CALLS calls after its first CheckFailure, with the smallest failure found by
    then: hypothesis only tries smaller inputs while it shrinks, so the latest failure is the smallest. The count of
    calls, not a clock, decides, so every path (a kernel, the trusted grader) reports the same input."""
    inner = test.hypothesis.inner_test  # hypothesis's documented hook for wrapping what each example runs
    latest: list[CheckFailure] = []
    calls = [0]

    def bounded(*args, **kwargs):
        if latest:
            calls[0] += 1
            if calls[0] > SHRINK_CALLS:
                raise Abandon(latest[-1])
        try:
            return inner(*args, **kwargs)
        except CheckFailure as failure:
            latest.append(failure)
            raise

    test.hypothesis.inner_test = bounded


def case_rng(stream: str) -> np.random.Generator:
    """A generator for a check's own random cases (those hypothesis does not draw): from the trusted grade's case
    seed, or the same on every run in a learner's kernel. ``stream`` (the check's name) keeps checks apart."""
    return np.random.default_rng([_CASE_SEED[-1] if _CASE_SEED else 0, zlib.crc32(stream.encode())])


@contextlib.contextmanager
def case_seed(value: int):
    """Draw every check's randomized cases from ``value`` inside the block."""
    _CASE_SEED.append(value)
    try:
        yield
    finally:
        _CASE_SEED.pop()


def _draws_blind_to_loaded_modules() -> None:
    """Make hypothesis draw a check's cases from its seed and strategies alone, whatever else is imported.

    Now and then hypothesis hands a strategy a literal found in the source of a "local" module: any loaded module
    outside site-packages and the standard library, which with an editable install means the course's own code.
    That pool grows with every import (nbgrader's preprocessors, the class run), so one seed drew other cases in a
    learner's kernel, a grading process and the test suite. Hypothesis has no setting or public hook for it (6.170);
    an empty pool is what it uses itself where it cannot tell local code apart (emscripten), and what a wheel
    install of the course gets anyway. Little is lost: the pool held the grader's own literals, not the learner's
    (notebook cells are not module files). tests/checks/test_draws.py fails if an upgrade of hypothesis undoes this.

    Raises:
        ImportError: the installed hypothesis no longer has the function replaced here (see requirements.txt).
    """
    from hypothesis.internal.conjecture import providers

    if not callable(getattr(providers, "_get_local_constants", None)) or not hasattr(providers, "CONSTANTS_CACHE"):
        raise ImportError("hypothesis no longer collects local constants through providers._get_local_constants: "
                          "the checks' cases would depend on what is imported; install the version requirements.txt "
                          "pins, or adapt autograder.checks.harness.diagnostics to the new one")
    nothing = providers.Constants()
    providers._get_local_constants = lambda: nothing
    providers.CONSTANTS_CACHE.cache.clear()  # pools a draw before this import may have taken from the old set


_draws_blind_to_loaded_modules()


def _hypothesis_random_registered() -> None:
    """Hypothesis registers a Random of its own before its first test in a thread, and collects the whole heap's
    garbage to do it (gc.collect() in hypothesis/internal/entropy.py's register_random): about 0.4 CPU s in a kernel
    that holds torch. Done when the checks are imported (a notebook's first test cell), not inside whichever check
    first draws a case. Only a cost moves: where hypothesis changes this, nothing is done."""
    try:
        from hypothesis.internal.entropy import deterministic_PRNG
    except ImportError:
        return
    with deterministic_PRNG():
        pass


_hypothesis_random_registered()


class CheckFailure(AssertionError):
    """A learner's answer is wrong; the message says how and why.

    Subclasses AssertionError so nbgrader and pytest treat it as an ordinary failed test.
    """

    def __init__(self, exercise: str, message: str, cause: BaseException | None = None, cause_id: str | None = None,
                 input: str | None = None):
        """``cause_id`` (autograder.checks.causes) names the cause (without it, a ``mismatch``); the message then ends
        with the line ``cause: <id>``, available as ``cause_id``. ``input`` is the failing input (the call as the
        diagnosis shows it), kept as data on the line before (``input: ...``, ``input``). Both come from these
        arguments only, never from lines in ``message``, which may quote learner text: a failure that wraps another
        passes that one's :attr:`told`, ``cause_id`` and ``input`` (:meth:`wrapped`)."""
        self.exercise = exercise
        self.cause_id = cause_id or causes.MISMATCH
        self.input = " ".join((input or "").split())[:INPUT_LIMIT] or None
        body = message.rstrip("\n")
        # A diagnosis quotes learner values; a huge one must not become a huge feedback page.
        body = body if len(body) <= MESSAGE_LIMIT else body[:MESSAGE_LIMIT] + " [...]"
        self.message = with_input(with_cause(body, self.cause_id), self.input)
        self.cause = cause  # the learner's own exception, when the failure is that their code raised
        super().__init__(f"[{exercise}] {self.message}")

    def wrapped(self, context: str, separator: str = "\n") -> "CheckFailure":
        """This failure, its cause and input kept, with ``context`` before what it told."""
        return CheckFailure(self.exercise, f"{context}{separator}{self.told}", cause_id=self.cause_id, input=self.input)

    @property
    def told(self) -> str:
        """The diagnosis without its input and cause lines: what a failure that quotes this one, under a cause of
        its own, repeats."""
        return with_input(self.message, None).rpartition("\n")[0]

    def _render_traceback_(self) -> list[str]:
        # IPython calls this instead of formatting frames: the learner sees the diagnosis, never hidden code.
        return [f"\x1b[0;31mCheckFailure\x1b[0m: [{self.exercise}]", *self.message.splitlines()]


class Abandon(BaseException):
    """Stops a check at once, past hypothesis (which would otherwise shrink, re-running a 10 s timeout per attempt).

    ``check`` unwraps it into its CheckFailure.
    """

    def __init__(self, failure: CheckFailure):
        super().__init__(failure.message)
        self.failure = failure


class _Timeout(BaseException):
    """Raised inside learner code by a timer; BaseException so a bare ``except Exception`` cannot swallow it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.cpu = signum == signal.SIGPROF


# The timers of learner code in this process: its CPU time, and the wall clock as a backstop for code that waits.
_TIMERS = ((signal.ITIMER_PROF, signal.SIGPROF, time.process_time, 1),
           (signal.ITIMER_REAL, signal.SIGALRM, time.monotonic, remote.WALL_FACTOR))


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise _Timeout in the block after ``seconds`` of this process's CPU time, or remote.WALL_FACTOR times as long
    on the wall clock. Only in the main thread (elsewhere the block runs without a limit rather than not at all)."""
    def on_timer(signum, frame):
        raise _Timeout(signum)

    try:
        previous = [signal.signal(signum, on_timer) for _, signum, _, _ in _TIMERS]
    except ValueError:  # not the main thread
        yield
        return
    # A limit inside another (a probe whose call runs learner code through call_learner again) ends no later than the
    # outer one, and gives the outer one back what is left of it.
    outer = [signal.getitimer(timer) for timer, _, _, _ in _TIMERS]
    started = [clock() for _, _, clock, _ in _TIMERS]
    for (timer, _, _, factor), (left, _) in zip(_TIMERS, outer):
        # Repeat every second after the first: code that swallows one _Timeout still gets stopped by the next.
        signal.setitimer(timer, min(factor * seconds, left) if left else factor * seconds, 1.0)
    try:
        yield
    finally:
        for (timer, signum, clock, _), (left, repeat), start, handler in zip(_TIMERS, outer, started, previous):
            rest = left - (clock() - start) if left else 0
            signal.setitimer(timer, max(rest, 1e-3) if left else 0, repeat)
            signal.signal(signum, handler)


# The exercise being checked in this process (kernel_limits): its budget, and this process's CPU time when it began.
_KERNEL_BUDGET: list[tuple[remote.Budget, float]] = []


@contextlib.contextmanager
def kernel_limits():
    """Trusted grading's limits for learner code that runs in this process (a learner's kernel, the tests).

    One BLAS thread, as the worker's environment gives it (OPENBLAS_NUM_THREADS=1): notebook 5's training check took
    10-34 s on a loaded 2-core machine with two, 0.9 s with one. And remote.EXERCISE_BUDGET_S seconds of this
    process's CPU time for the whole check, as a worker's exercise budget (here it also counts the check's own work,
    a small part): call_learner gives no call more than what is left. The exercises it builds on share its budget,
    as they share its worker. Both are restored on every exit. Nothing changes under a worker, which has its own.
    """
    if _KERNEL_BUDGET or remote.in_use():
        yield
        return
    with threadpool_limits(limits=1):
        _KERNEL_BUDGET.append((remote.Budget(remote.EXERCISE_BUDGET_S, "the checks of this exercise"),
                               time.process_time()))
        try:
            yield
        finally:
            _KERNEL_BUDGET.pop()


@contextlib.contextmanager
def heap_frozen():
    """The objects that exist when a check starts left out of the garbage collector's scans while it runs
    (gc.freeze), and put back in the oldest generation after (gc.unfreeze). A check records graphs of 10,000 nodes;
    each full collection it set off walked the whole heap of a kernel holding torch (over 400,000 objects), 0.5 of
    topological_order's 0.8 CPU s (make bench-checks). Garbage made during the check is still collected; what
    was already there and dies meanwhile, after. Where something else froze the heap, nothing changes."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _call_limit(exercise: str) -> tuple[float, str | None]:
    """CPU seconds the next learner call in this process may take, and what to say when it runs out: the call's
    own limit, or what is left of the exercise's budget when that is less.

    Raises:
        Abandon: the budget is used up already.
    """
    if not _KERNEL_BUDGET:
        return CALL_TIMEOUT_S, None
    budget, started = _KERNEL_BUDGET[-1]
    used = time.process_time() - started
    spent = budget.exhausted(used)
    if spent:
        raise Abandon(CheckFailure(exercise, spent, cause_id=causes.TIMEOUT))
    left = budget.left(used)
    return (left, budget.exhausted(budget.cpu_s)) if left < CALL_TIMEOUT_S else (CALL_TIMEOUT_S, None)


def call_learner(exercise: str, fn, *args, shown_input: str = "", changed_input: str = "", **kwargs):
    """Call learner code; turn a crash, a stub, a runaway loop or a changed argument into a CheckFailure.

    Learner code in a sandboxed worker (``autograder.trust.remote``) is timed by the worker's deadline; learner code in
    this process (a learner's own kernel) by its CPU timer, with a wall-clock backstop (_time_limit). No exercise asks
    to change an array it is given, and a check may use its arrays again afterwards, so an argument changed in place
    fails the exercise: ``changed_input`` says why in the exercise's terms.
    """
    where = f" for input {shown_input}" if shown_input else ""
    given = [(a, a.copy()) for a in (*args, *kwargs.values()) if isinstance(a, np.ndarray)]
    here = not remote.in_use()  # learner code in this process, not in a sandboxed worker
    limit, out_of_budget = _call_limit(exercise) if here else (CALL_TIMEOUT_S, None)
    try:
        with _time_limit(limit) if here else contextlib.nullcontext(), \
                _settings_for_the_call() if here else contextlib.nullcontext(), remote.writing_back():
            result = fn(*args, **kwargs)
    except CheckFailure:
        raise
    except NotImplementedError as stub:
        raise CheckFailure(exercise, f"`{_stub_name(stub, fn, exercise)}` is not written yet: in its cell, replace "
                                     "`raise NotImplementedError()` with your code, run that cell, then run this one "
                                     "again.", cause_id=causes.STUB) from None
    except remote.Stopped as stop:  # the worker's own deadline, in CPU seconds, or a budget: its reason says which
        raise Abandon(CheckFailure(exercise, f"{stop.reason} (while running{where or ' your code'})",
                                   cause_id=causes.of_stop(stop.reason), input=shown_input)) from None
    except _Timeout as timeout:
        if out_of_budget:
            raise Abandon(CheckFailure(exercise, f"{out_of_budget} (while running{where or ' your code'})",
                                       cause_id=causes.TIMEOUT, input=shown_input)) from None
        within = f"{limit:g} s of CPU time" if timeout.cpu else f"{remote.WALL_FACTOR * limit:g} s on the wall clock"
        raise Abandon(CheckFailure(exercise, f"your code did not finish within {within}{where}: "
                                             "is there a loop that never ends?", cause_id=causes.TIMEOUT,
                                   input=shown_input)) from None
    except (Exception, SystemExit) as error:  # SystemExit: exit() or sys.exit() in learner code
        kind = getattr(error, "type_name", type(error).__name__)  # remote.LearnerError keeps the learner's type name
        # By class, not by name: a learner's own class may call itself MemoryError.
        cause = next((c for crash, c in _CRASHES.items() if isinstance(error, crash)), causes.CRASH)
        raise CheckFailure(exercise, f"your code raised {kind}: {quoted(error)}{where}", cause=error, cause_id=cause,
                           input=shown_input) from None
    if any(now.shape != before.shape or not np.array_equal(now, before, equal_nan=True) for now, before in given):
        raise CheckFailure(exercise, changed_input or f"your code changed an array it was given, in place{where}: "
                                                      "compute new arrays instead of writing into your inputs.",
                           cause_id=causes.CHANGED_INPUT, input=shown_input)
    return result


@contextlib.contextmanager
def _settings_for_the_call():
    """What learner code sets for itself during a call lasts for that call, as in a sandboxed worker, which answers
    every request under a check's settings (worker.as_a_check_runs_it): warnings and float errors ignored, the
    recursion limit as before (red team 9: a ``warnings.simplefilter("error")`` in one call failed the next call in
    the kernel alone)."""
    limit = sys.getrecursionlimit()
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            yield
    finally:
        if sys.getrecursionlimit() != limit:
            sys.setrecursionlimit(limit)  # a lowered one back up to where the check had it: not a raise


# The learner's exceptions that name a cause of their own: the rest are crashes.
_CRASHES = {MemoryError: causes.MEMORY, RecursionError: causes.RECURSION}


def _stub_name(stub: NotImplementedError, fn, exercise: str) -> str:
    """The learner's function whose body is still the stub: the function that raised (a check often calls the
    learner's method through a lambda of its own; in a sandboxed worker the worker reports it), else the function
    called, else the exercise id."""
    frame = stub.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    here = frame.tb_frame.f_code if frame is not None else None
    learners = here if here is not None and not here.co_filename.startswith(str(PACKAGE)) else None
    called = fn if isinstance(fn, types.FunctionType | types.MethodType) else None
    for name in (getattr(stub, "raised_in", None), learners and learners.co_qualname,
                 called and called.__qualname__):
        if name and not name.rsplit(".", 1)[-1].startswith("<"):  # not a <lambda> or <genexpr>
            return name
    return exercise


def call_on_deep_graph(exercise: str, fn, *args, shown_input: str):
    """call_learner on a graph deeper than Python's recursion limit: a RecursionError gets its own diagnosis."""
    try:
        return call_learner(exercise, fn, *args, shown_input=shown_input)
    except CheckFailure as failure:
        if isinstance(failure.cause, RecursionError):
            raise CheckFailure(exercise, f"RecursionError on {shown_input}: a recursive walk needs one Python stack "
                                         "frame per node and Python allows about 1,000. Keep your own stack (a list) "
                                         "instead of recursing.", cause_id=causes.RECURSION) from None
        raise


@contextlib.contextmanager
def recursion_limit_kept(exercise: str):
    """Fail a check whose learner code raised Python's recursion limit, even if it put it back; restore it always.

    Raising the limit only moves a recursive walk's crash to a deeper graph, where the C stack overflows and the
    kernel dies (it did, in a kernel running a probe's 10,000-node graph); and a limit left raised would hide the
    RecursionError of every later probe. So a raise is refused as well as failed: the recursion it was for stops at
    the usual limit, and the check can say why. Learner code in this process is watched here; learner code in a
    sandboxed worker is watched there, the same way, and the worker's replies say what it asked for
    (remote.limit_raises).
    """
    limit, set_limit = sys.getrecursionlimit(), sys.setrecursionlimit
    requested = []
    raises_before = remote.limit_raises()

    def watched(n):
        if sys._getframe(1).f_globals.get("__name__", "").startswith("hypothesis"):  # hypothesis adjusts it too
            set_limit(n)
            return
        requested.append(n)
        if n <= limit:  # a raise is refused: the deep recursion it was for fails now instead of killing the kernel
            set_limit(n)

    def verdict():
        # the root cause: it wins over whatever else went wrong
        if any(n > limit for n in requested) or remote.limit_raises() > raises_before:
            raise CheckFailure(exercise, "your code raised Python's recursion limit. That only moves the crash: a "
                                         "deeper graph overflows the C stack and kills the kernel. Keep your own stack "
                                         "(a list) instead.", cause_id=causes.RECURSION) from None

    sys.setrecursionlimit = watched
    try:
        yield
    except CheckFailure:
        verdict()
        raise
    finally:
        sys.setrecursionlimit = set_limit
        set_limit(limit)
    verdict()


def quoted(error: BaseException) -> str:
    """A learner's exception text on one line, so it cannot pass for a diagnosis's own input or cause line."""
    return " ".join(str(error).split())


def described(value) -> str:
    """An answer as a diagnosis shows it, the same in a learner's kernel and in the grade: plain data by its repr, a
    learner's object by its type and, for a tensor, the array it holds (its own __repr__ is learner code, which the
    grade never runs: "<Tensor object>" there, "Tensor(1.3133, requires_grad=True)" in the kernel, split the two)."""
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        inner = ", ".join(described(v) for v in value[:8]) + (", ..." if len(value) > 8 else "")
        return f"[{inner}]" if type(value) is list else f"({inner}{',' if len(value) == 1 else ''})"
    if value is None or type(value) in (bool, int, float, str) or isinstance(value, (np.ndarray, np.generic)):
        return fmt(value)
    array = getattr(value, "array", None) if type(value).__name__ in ("Tensor", "Parameter") else None
    if isinstance(array, np.ndarray):
        return f"a {type(value).__name__} holding {fmt(array)}"
    return f"a {type(value).__name__}"


def fmt(value) -> str:
    """Short, stable text for a number or array in a diagnosis."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, np.ndarray):
        return np.array2string(value, precision=10, suppress_small=True, separator=", ")
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.10g}"
    return repr(value)


@dataclass(frozen=True)
class Tolerance:
    """How far a received number may be from the expected one: |received - expected| <= atol + rtol·|expected|."""
    rtol: float
    atol: float


# The course's named tolerances; a check module adds its own only with the reason next to it.
SAME_ARITHMETIC = Tolerance(1e-12, 1e-15)    # the same few float64 operations in another order: the last bits differ
AGAINST_TORCH = Tolerance(1e-9, 1e-12)       # float64 against torch.autograd in float64: summation orders differ
FLOAT32_INPUTS = Tolerance(1e-6, 1e-9)       # a float32 input keeps ~7 significant digits in any formula using it
AGAINST_DIFFERENCES = Tolerance(1e-4, 1e-5)  # central differences, h = 1e-6: truncation ~h² times the third
#                                              derivative, round-off ~1e-16 / h


def close(received, expected, tolerance: Tolerance = AGAINST_TORCH) -> bool:
    """True when received matches expected in shape and in value within ``tolerance`` (NaNs never match).

    A learner may return anything: what cannot become a float64 array does not match.
    """
    try:
        received = np.asarray(received, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    expected = np.asarray(expected, dtype=np.float64)
    return received.shape == expected.shape and bool(
        np.allclose(received, expected, rtol=tolerance.rtol, atol=tolerance.atol))


def as_float(exercise: str, value, what: str) -> float:
    """A learner's scalar result as a float, or a CheckFailure saying what came back instead."""
    if value is None:
        raise CheckFailure(exercise, f"{what} is None: did the function forget its `return`?",
                           cause_id=causes.WRONG_TYPE)
    if type(value).__module__.startswith("torch"):
        raise CheckFailure(exercise, f"{what} is a torch {type(value).__name__}: the exercise computes it by hand, "
                                     "with plain floats or numpy, not with torch.", cause_id=causes.WRONG_TYPE)
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError("text is not a number")
        kept = np.asarray(value)
        array = kept.astype(np.float64)
    except Exception:  # strings, objects, tensors that still require grad, ...
        raise CheckFailure(exercise, f"{what} should be a number, got {type(value).__name__}: {value!r}",
                           cause_id=causes.WRONG_TYPE) from None
    if kept.dtype in (np.float32, np.float16):
        raise CheckFailure(exercise, f"{what} is a {kept.dtype} ({float(array)!r}), which keeps only "
                                     f"~{7 if kept.dtype == np.float32 else 3} significant digits: compute in float64 "
                                     "(plain Python floats are float64).", cause_id=causes.WRONG_DTYPE)
    if array.shape != ():
        raise CheckFailure(exercise, f"{what} should be a single number, got an array of shape {array.shape}",
                           cause_id=causes.WRONG_SHAPE)
    return float(array)


class Slip(NamedTuple):
    """A known mistake, as the value it gives on one probe: when an answer gives that value, ``why`` is shown and
    ``cause`` (an id declared in autograder.checks.causes) is named."""
    value: object
    why: str
    cause: str


@dataclass(frozen=True)
class Probe:
    """One hand-picked input whose wrong answers have known causes: the course's misconception probes, as data.

    ``call`` runs the learner's code and returns what it gave (inside ``run_probes``, so a crash, a stub or a loop
    is a diagnosis too). When that is not ``expected``, the first of ``slips`` whose value it matches names the
    misconception; a value that matches none is shown as expected against received alone, and named a mismatch
    (or not-finite), never blamed on a slip it did not make. ``otherwise`` (why, cause id) is for the one kind of
    probe where every wrong value is the same slip: a value that must stay as it was (a parameter that takes no part
    in a step), so any other value means it moved.
    """
    shown: str                                    # the call as the learner would write it
    call: Callable[[], object]
    expected: object
    slips: tuple[Slip, ...] = ()
    tolerance: Tolerance = AGAINST_TORCH
    otherwise: tuple[str, str] | None = None


def run_probes(exercise: str, probes) -> None:
    """The one loop over probes: each is called, compared, and on a mismatch diagnosed.

    Raises:
        CheckFailure: at the first probe that fails, naming the slip its value matches (if any) and showing
            expected vs received.
    """
    for probe in probes:
        got = call_learner(exercise, probe.call, shown_input=probe.shown)
        if close(got, probe.expected, probe.tolerance):
            continue
        if probe.otherwise:
            raise CheckFailure(exercise, f"{probe.otherwise[0]}\n{probe.shown}: expected {fmt(probe.expected)}, "
                                         f"received {fmt(got)}.", cause_id=probe.otherwise[1], input=probe.shown)
        raise wrong_value(exercise, probe.shown, probe.expected, got, probe.slips, probe.tolerance)


def wrong_value(exercise: str, shown: str, expected, got, slips=(), tolerance: Tolerance = AGAINST_TORCH,
                said: str = "expected") -> CheckFailure:
    """The diagnosis of ``got`` where ``expected`` was due on input ``shown``: the first slip whose value ``got``
    matches (within ``tolerance``) names the cause; else inf or NaN where the expected value is finite is
    ``not-finite``, and anything else a ``mismatch``. ``said`` names the reference ("torch.autograd gives")."""
    slip = next((s for s in slips if _matches(got, s.value, tolerance)), None)
    told = f"{shown}: {said} {fmt(expected)}, received {fmt(got)}."
    if slip is not None:
        return CheckFailure(exercise, f"{slip.why}\n{told}", cause_id=slip.cause, input=shown)
    return CheckFailure(exercise, told, cause_id=causes.NOT_FINITE if _loses_finiteness(got, expected)
                        else causes.MISMATCH, input=shown)


def _matches(got, value, tolerance: Tolerance) -> bool:
    """``close``, with a NaN matching a NaN: a slip's value may hold the NaN the slip produces (a division by 0)."""
    try:
        got, value = np.asarray(got, dtype=np.float64), np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return got.shape == value.shape and bool(np.allclose(got, value, rtol=tolerance.rtol, atol=tolerance.atol,
                                                         equal_nan=True))


def _loses_finiteness(got, expected) -> bool:
    try:
        got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return bool(np.isfinite(expected).all() and not np.isfinite(got).all())
