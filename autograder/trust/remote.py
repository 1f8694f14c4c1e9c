"""The trusted side of grading: learner objects that live in a sandboxed worker, seen here only as plain data.

A :class:`Worker` starts ``autograder/trust/worker.py`` in the sandbox (``autograder.trust.sandbox``), runs the submission's
code there, and hands the checks a :class:`Remote` for each learner object. Using a Remote (calling it, reading an
attribute, applying an operator) sends a request; the worker performs it on the real object and answers with
plain data -- numbers, strings, arrays, lists, tuples, dicts -- or with a new handle. The checks, the oracles and
the comparison run here, in a process that never executes learner code: faking a pass means sending back the
right numbers, which takes a correct implementation.

Both speak the protocol of ``autograder.trust.wire``, which says what travels and how, and decodes strictly here:
only plain data, handles and our own functions and arrays come back, so nothing the worker sends can run code here.
Every request has a deadline in CPU seconds of the worker's sandbox (``autograder.trust.cputime``), so a loaded
machine cannot make a correct answer time out, and a limit on the time its sandbox was not even runnable (neither
running nor waiting for a CPU: ``cputime.Runnable``) for code that sleeps or blocks, which a starved sandbox never
reaches either; the workers of one submission share one :class:`Budget` that no exercise gives back. A worker that
misses a deadline, dies, or sends garbage is killed and named. Only a wall-clock limit far past all of those stops a
worker on a machine too loaded to grade (:class:`Overloaded`), and that is the grader's failure, not a verdict.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from autograder.trust import cputime, sandbox, wire
from autograder.trust.pids import ProcessCap
from autograder.trust.wire import MAPPED_ERRORS, ProtocolError

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
# Outside /tmp, on the sandbox's read-only root: learner code can neither change these files nor move their folder.
INSIDE_SCRIPT = "/grader/worker.py"
# Ours in the worker's sandbox, besides the init and the filter (sandbox.wrap): the worker and the codec it loads
# from its own folder, as it loads the filter's loader from the init's file.
GRADER_FILES = {WORKER_SCRIPT: INSIDE_SCRIPT, Path(wire.__file__): "/grader/wire.py"}
DEFAULT_TIMEOUT_S = 10.0  # CPU seconds of the worker's sandbox for one request
ZYGOTE_TIMEOUT_S = 10.0  # a fork, or killing a worker and tidying up: milliseconds; more means the zygote is gone
EXERCISE_BUDGET_S = 120.0  # CPU seconds of all of one exercise's requests together
SUBMISSION_BUDGET_S = 300.0  # CPU seconds of all the workers of one submission together (verdicts.verdicts)
# Code that sleeps or blocks uses no CPU: it is stopped once its sandbox has not been runnable for this many times a
# CPU limit (a starved sandbox is runnable, waiting for a CPU, so load cannot bring this on).
IDLE_FACTOR = 3
# The machine too loaded to grade: a request or budget still unfinished after this many times its CPU limit on the
# wall clock (1/30 of a core for a whole limit: at load 19 on 2 cores a sandbox gets about 1/10) fails the grading,
# never the code (Overloaded).
OVERLOAD_FACTOR = 30
# What a callback may add to this process's address space: learner code chooses its arguments, and a (6000, 1) and
# a (1, 6000) array, 96 KB sent, broadcast to 288 MB here (red team 7); a (30000, 1) pair would take the host's memory.
# The largest a check's own callback needs is a few MB (a batch through the reference model).
CALLBACK_MEMORY_BYTES = 1 << 30
# CPU seconds of this process one worker's callbacks may take in all (its own CPU limits do not count them): a few
# worker seconds sent a reference model one batch and stepped its optimizer for 121 s here (red team 8). A whole
# solution's grade takes 14.
CALLBACK_CPU_S = 60.0
# Handles of learner objects one worker may send (each stays a Remote here for the worker's life): 5 million of them,
# 6 worker CPU s, grew the grading process by 600 MB (red team 8). A check's largest graph has 10,000 nodes.
HANDLE_LIMIT = 1_000_000
# The in-kernel harness's own wall-clock backstop for a learner's JupyterLab, where no sandbox is measured
# (autograder/checks/harness/diagnostics.py).
WALL_FACTOR = 6
SLICE_S = 0.2  # a wait this long samples the worker's CPU (0.3 ms a sample); shorter requests never pay for it
MESSAGE_LIMIT = 300  # of a learner exception's text quoted in a diagnosis (it is the learner's text, not ours)


_OPEN_WORKERS = 0
_WRITE_BACK: list[bool] = []  # non-empty inside writing_back()
_LIMIT_RAISES = 0  # replies so far that said learner code raised its worker's recursion limit (limit_raises())


@contextlib.contextmanager
def writing_back():
    """Inside, what a learner call does to an array argument is copied into the caller's array (as in one process).

    Only ``call_learner`` asks for it, and it fails the exercise when an argument changed. Everywhere else the
    check's arrays stay as they were whatever learner code does to its copies: a check may compute its expected
    values from an array after handing it to learner code (``Tensor(seed)``) without that code choosing them.
    """
    _WRITE_BACK.append(True)
    try:
        yield
    finally:
        _WRITE_BACK.pop()


def limit_raises() -> int:
    """How many replies of any worker in this process have said that learner code raised its recursion limit: a
    check compares the count before and after it runs (diagnostics.recursion_limit_kept)."""
    return _LIMIT_RAISES


def in_use() -> bool:
    """Whether checks are running against a worker now (then the worker's deadlines time learner code)."""
    return _OPEN_WORKERS > 0


# Why a worker may say it stopped, by the code it sends: the sentences are the grader's own. Learner code shares the
# worker's process and can send any frame, so a reason in its words would be a diagnosis (and a cause) it wrote.
STOP_REASONS = {"threads": "your code started a thread (or process) that was still running when it returned; an "
                           "exercise must not leave any"}


class Stopped(BaseException):
    """The worker is gone: it used up a request's CPU time, a budget or a wall-clock backstop, died,
    or broke the protocol. ``reason`` is a whole sentence for the learner.

    A BaseException so that no ``except Exception`` in a check can mistake it for a wrong answer and go on.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Overloaded(Stopped):
    """The machine was too loaded to finish checking (OVERLOAD_FACTOR): grading failed, and says so; nothing is known
    about the answer."""


class Unavailable(Exception):
    """The worker could not be started, or did not answer before any learner code ran: nothing about the answer is
    known, so the exercise fails with this reason (never the learner's fault)."""


class Budget:
    """CPU seconds, and seconds of not being runnable, that workers may use between them, never given back; and a
    wall-clock limit from its creation past which the machine is taken as too loaded to grade.

    One per exercise (each Worker makes its own) and one per submission (verdicts.verdicts shares it between that
    submission's workers). A Worker charges it what its sandbox used when it closes, and checks it, with what it is
    using now, whenever it samples its CPU.
    """

    def __init__(self, cpu_s: float, what: str, wall_s: float | None = None):
        """``what`` names whose checks they are in a reason ("this exercise's checks"); it may spend IDLE_FACTOR
        times ``cpu_s`` not runnable; ``wall_s`` defaults to OVERLOAD_FACTOR times ``cpu_s``."""
        self.cpu_s, self.what = cpu_s, what
        self.idle_s = IDLE_FACTOR * cpu_s
        self.wall_s = OVERLOAD_FACTOR * cpu_s if wall_s is None else wall_s
        self.spent = 0.0  # CPU seconds charged by closed workers
        self.idled = 0.0  # seconds not runnable, charged by closed workers
        self._wall_end = time.monotonic() + self.wall_s

    def left(self, running: float = 0.0) -> float:
        """CPU seconds left, with ``running`` seconds used by a worker that has not closed yet."""
        return self.cpu_s - self.spent - running

    def exhausted(self, running: float = 0.0, idling: float = 0.0) -> str | None:
        """Why nothing more may run (CPU used up, or too long not runnable), or None; ``running`` and ``idling``:
        what a worker that has not closed yet used so far.

        Raises:
            Overloaded: the wall-clock limit has passed (the machine, not the code).
        """
        if self.left(running) <= 0:
            return (f"{self.what} used more than {self.cpu_s:g} s of CPU time in all, so the rest was not checked: "
                    "is your code very slow?")
        if self.idled + idling > self.idle_s:
            return (f"{self.what} spent more than {self.idle_s:g} s in all neither computing nor waiting for a CPU, "
                    "so the rest was not checked: does your code sleep or wait for input?")
        if time.monotonic() >= self._wall_end:
            raise Overloaded(f"grading failed, through no fault of your code: the machine was too loaded to finish "
                             f"{self.what} within {self.wall_s:g} s. Ask your instructor to grade it again.")
        return None


@dataclasses.dataclass
class _Deadline:
    """The limits of one request and the requests it makes while it waits (callbacks)."""
    cpu_start: float       # the worker's CPU seconds when it began
    cpu_s: float           # CPU seconds it may use, and IDLE_FACTOR times as many not runnable
    runnable_start: float  # the worker's runnable seconds when it began
    wall_start: float      # time.monotonic() when it began
    served: float = 0.0    # seconds spent serving its callbacks: the trusted side's time, not the worker's
    idled: float = 0.0     # seconds not runnable, as of its last sample (charged when it ends)

    def idle(self, runnable: float) -> float:
        """Seconds the worker was not runnable during the request, given its runnable seconds now."""
        return max(0.0, time.monotonic() - self.wall_start - self.served - (runnable - self.runnable_start))


class LearnerError(Exception):
    """An exception of a type defined by learner code (or SystemExit/KeyboardInterrupt raised by it)."""

    def __init__(self, type_name: str, message: str):
        super().__init__(message)
        self.type_name = type_name


class Remote:
    """A learner object that stays in the worker. Every use is a request; nothing of it runs here."""

    __slots__ = ("_worker", "_handle")

    def __getattr__(self, name: str):
        # numpy and copy probe dunders: never ask learner code, except a context manager's two (checks drive
        # `with no_grad():` step by step)
        if name.startswith("__") and name.endswith("__") and name not in ("__enter__", "__exit__"):
            raise AttributeError(name)
        return self._worker.request({"op": "getattr", "target": self, "name": name})

    def __setattr__(self, name: str, value) -> None:
        if name in Remote.__slots__:
            object.__setattr__(self, name, value)
        else:
            self._worker.request({"op": "setattr", "target": self, "name": name, "args": [value]})

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object>"

    def _op(self, name: str, *args):
        return self._worker.request({"op": "operator", "name": name, "args": list(args)})

    def __float__(self): return self._op("float", self)
    def __int__(self): return self._op("int", self)
    def __bool__(self): return self._op("bool", self)
    def __neg__(self): return self._op("neg", self)
    def __instancecheck__(self, obj): return self._op("isinstance", obj, self)  # isinstance(x, LearnerClass)
    def __subclasscheck__(self, cls): return self._op("issubclass", cls, self)


def _binary(name: str, reflected: bool = False):
    """Remote's operator method for ``name``: x + y sends ("add", x, y); 2 + x (reflected) sends ("add", 2, x)."""
    def method(self, other):
        return self._op(name, other, self) if reflected else self._op(name, self, other)
    return method


for _name in ("add", "sub", "mul", "truediv", "pow", "matmul"):
    setattr(Remote, f"__{_name}__", _binary(_name))
    setattr(Remote, f"__r{_name}__", _binary(_name, reflected=True))
for _name in ("lt", "le", "gt", "ge"):
    setattr(Remote, f"__{_name}__", _binary(_name))


class _Callable:
    def __call__(self, *args, **kwargs):
        return self._worker.request({"op": "call", "target": self, "args": list(args), "kwargs": kwargs},
                                    call_args=args if _WRITE_BACK else ())


class _Container:
    def __len__(self): return self._op("len", self)
    def __iter__(self): return iter(self._worker.request({"op": "list", "target": self}))
    def __getitem__(self, key): return self._op("getitem", self, key)
    def __setitem__(self, key, value): self._op("setitem", self, key, value)


_CLASSES: dict[tuple[str, bool, bool], type] = {}
PROXY_CLASS_LIMIT = 500


def _proxy_class(type_name: str, is_callable: bool, is_container: bool) -> type:
    """A Remote subclass named after the learner's type, so messages can say "got Value".

    Classes are kept for the process's life, so their number is capped: past it, new names all say "object".
    """
    name = re.sub(r"\W", "_", type_name)[:80] or "object"
    if (name, is_callable, is_container) not in _CLASSES and len(_CLASSES) >= PROXY_CLASS_LIMIT:
        name = "object"
    key = (name, is_callable, is_container)
    if key not in _CLASSES:
        bases = (Remote,) + ((_Callable,) if is_callable else ()) + ((_Container,) if is_container else ())
        _CLASSES[key] = type(name, bases, {"__slots__": ()})
    return _CLASSES[key]


REF_FIELDS = {"__ref__": int, "type": str, "callable": bool, "container": bool}  # of a handle the worker sends


class _Codec(wire.StrictCodec):
    """One worker's values as its client sends and reads them: a learner object's handle becomes a Remote (the same
    one for the same handle), a function of ours a callback the worker can call; ours come back as themselves."""

    def __init__(self, worker: Worker | None):
        super().__init__()
        self.worker = worker
        self.proxies: dict[int, Remote] = {}
        self.callbacks: list = []               # our functions the worker may call, by number
        self.callback_ids: dict[int, int] = {}  # id(function) -> its number
        self.call_args: tuple = ()              # the arguments of the call being answered, for {"__arg__": i}

    def container(self, value, depth: int) -> type | None:
        # A check's own containers go as the plain data they hold whatever their class (a namedtuple as its tuple),
        # however deep.
        for kind in (list, tuple, dict):
            if isinstance(value, kind):
                return kind if kind is not dict or wire.plain_keys(value) else None
        return None

    def encode_other(self, value, depth: int):
        if isinstance(value, Remote):
            if value._worker is not self.worker:
                raise ValueError("a value from another worker")
            return {"__ref__": value._handle}
        exception = wire.encode_exception(value)
        if exception is not None:
            return exception
        if hasattr(type(value), "__remote_methods__"):  # one of our objects, used by learner code through its methods
            methods = [[name, self.encode(getattr(value, name))] for name in type(value).__remote_methods__]
            return {"__obj__": methods, "call": self.encode(value.__call__) if callable(value) else None}
        if callable(value):
            if id(value) not in self.callback_ids:
                self.callback_ids[id(value)] = len(self.callbacks)
                self.callbacks.append(value)
            return {"__cb__": self.callback_ids[id(value)]}
        raise TypeError(f"cannot send a {type(value).__name__} to the learner's process")

    def decode_other(self, tag: str, value: dict):
        if tag == "__ref__":
            if set(value) != set(REF_FIELDS) or any(type(value[k]) is not t for k, t in REF_FIELDS.items()):
                raise ProtocolError("__ref__ fields")
            return self._proxy(_index(value["__ref__"]), value["type"], value["callable"], value["container"])
        if tag == "__cb__" and len(value) == 1:  # one of our functions, handed back (a recipe stores the ones given)
            return self.callbacks[_index(value["__cb__"], len(self.callbacks))]
        if tag == "__arg__" and len(value) == 1:
            sent = [a for a in self.call_args if isinstance(a, np.ndarray)]
            return sent[_index(value["__arg__"], len(sent))]
        return super().decode_other(tag, value)

    def _proxy(self, handle: int, type_name: str, is_callable: bool, is_container: bool) -> Remote:
        if handle not in self.proxies:
            if len(self.proxies) >= HANDLE_LIMIT:
                raise ProtocolError("too many handles")
            proxy = object.__new__(_proxy_class(type_name, is_callable, is_container))
            object.__setattr__(proxy, "_worker", self.worker)
            object.__setattr__(proxy, "_handle", handle)
            self.proxies[handle] = proxy
        return self.proxies[handle]


def _index(value, size: int | None = None) -> int:
    """A number received for a handle (``size``: how many there are). Raises ProtocolError unless an int in range."""
    if type(value) is not int or value < 0 or (size is not None and value >= size):
        raise ProtocolError("no such handle")
    return value


def _sandboxed_worker(fd: int, limits: sandbox.Limits, stderr, cap: ProcessCap, home: str = "/tmp",
                      **env) -> subprocess.Popen:
    """worker.py in a sandbox of its own, talking over the socket ``fd``, its tasks capped by ``cap`` (the caller
    closes it); ``env`` is added to its environment."""
    # no sandbox: a private folder stands for the sandbox's /tmp, matplotlib's settings and caches in it too (red team
    # 21: /tmp/.matplotlib was the host's, shared by every worker of every submission)
    private = "/tmp" if sandbox.bubblewrap() else home
    binds, env = dict(GRADER_FILES), {**sandbox.environment(private), "WORKER_FD": str(fd), **env}
    no_processes = sandbox.no_new_processes()  # each worker loads it before learner code runs (worker.py)
    if no_processes:
        binds[no_processes] = sandbox.INSIDE_FILTER
        env["WORKER_FILTER"] = sandbox.INSIDE_FILTER if sandbox.bubblewrap() else str(no_processes)
    command = sandbox.wrap([sys.executable, "-I", INSIDE_SCRIPT], binds=binds, env=env, limits=limits, cap=cap)
    if not sandbox.bubblewrap():  # no sandbox: the worker runs from its real path (wire.py beside it), in a private folder
        command[-1] = str(WORKER_SCRIPT)
    return subprocess.Popen(command, pass_fds=[fd], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=stderr, start_new_session=True)


class Zygote:
    """One sandbox for the exercises of one submission, whose process forks a fresh worker for each of them.

    Starting a worker then costs a fork instead of a sandbox, an interpreter and numpy's import (0.14 s of CPU,
    0.11 s of it numpy: about 4.5 s per student). The zygote never runs learner code, so every worker starts from
    the same clean state; ending a worker kills every other process of the sandbox and restores its writable
    folders, so the next exercise finds nothing the last one left (worker.py, ``zygote``). Where there is no
    sandbox, or the zygote stops answering (learner code can kill it), workers start as their own sandboxes.

    Use as a context manager around the exercises of one submission.
    """

    def __init__(self, limits: sandbox.Limits = sandbox.Limits()):
        self._limits = limits
        self._control: socket.socket | None = None
        self._process: subprocess.Popen | None = None
        self._cap: ProcessCap | None = None
        self._broken = not sandbox.bubblewrap()  # outside a PID namespace "every other process" is not ours

    def __enter__(self) -> "Zygote":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The PID (outside the sandbox) of the process at the root of its sandbox, None before it starts."""
        return None if self._process is None else self._process.pid

    def fork(self, connection: socket.socket, stderr, cpu_s: int) -> bool:
        """Start a worker on ``connection`` writing to ``stderr`` (a file), killed by the kernel (RLIMIT_CPU) after
        ``cpu_s`` CPU seconds of its own; False when this zygote cannot."""
        if self._broken:
            return False
        try:
            if self._control is None:
                self._start()
            socket.send_fds(self._control, [b"S" + struct.pack(">I", cpu_s)], [connection.fileno(), stderr.fileno()])
            self._answer()
            return True
        except (OSError, ProtocolError):
            self.close()  # the next exercise gets a fresh zygote
            return False

    def end(self) -> int:
        """End the worker and all it started; its exit code (negative: the signal that ended it).

        Raises:
            subprocess.TimeoutExpired: the zygote did not answer (it is killed, and its workers with it).
        """
        try:
            self._control.sendall(b"E")
            return self._answer()
        except (OSError, ProtocolError, AttributeError):
            self.close()
            raise subprocess.TimeoutExpired("zygote", ZYGOTE_TIMEOUT_S) from None

    def close(self) -> None:
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
            self._control.close()
            self._cap.close()
        self._process = self._control = self._cap = None

    def _start(self) -> None:
        here, there = socket.socketpair()
        self._cap = ProcessCap()
        try:
            self._process = _sandboxed_worker(there.fileno(), self._limits, subprocess.DEVNULL, self._cap,
                                              WORKER_ZYGOTE="1")
        except OSError:
            here.close()
            self._cap.close()
            raise
        finally:
            there.close()
        self._control = here
        self._control.settimeout(ZYGOTE_TIMEOUT_S)

    def _answer(self) -> int:
        data = b""
        while len(data) < 4:
            chunk = self._control.recv(4 - len(data))
            if not chunk:
                raise ProtocolError("the zygote hung up")
            data += chunk
        return struct.unpack(">i", data)[0]


class _ForkedWorker:
    """A worker process forked by a Zygote, seen through the one call Worker makes of a subprocess.Popen it did not
    start itself: ``wait``, which here also ends the worker (the zygote kills it and whatever it started)."""

    def __init__(self, zygote: Zygote):
        self._zygote, self.returncode = zygote, None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._zygote.end()
        return self.returncode


class Worker:
    """One sandboxed process holding one submission's code, for the checks of one exercise.

    Use as a context manager; the process is killed on exit whatever happened. With a ``zygote`` (one per
    submission), the process is forked from it instead of started as a sandbox of its own, and the zygote's sandbox
    and limits apply.
    """

    def __init__(self, limits: sandbox.Limits = sandbox.Limits(),
                 budget_s: float = EXERCISE_BUDGET_S, zygote: Zygote | None = None, shared: Budget | None = None):
        """``budget_s``: CPU seconds for all of this exercise's requests; ``shared``: the submission's budget, which
        this worker draws on too (it is charged when the worker closes).

        Raises:
            Unavailable: the worker's process could not be started, or did not answer a first request.
        """
        self._budgets = [Budget(budget_s, "the checks of this exercise")] + ([shared] if shared else [])
        hard_cpu = max(1, min(limits.cpu_seconds, math.ceil(min(b.left() for b in self._budgets)) + 1))
        here, there = socket.socketpair()
        self._socket = here
        self._cap: ProcessCap | None = None  # a worker of its own sandbox's (a forked one is in its zygote's)
        self._home = tempfile.TemporaryDirectory(prefix="grading-worker-")
        self._stderr = open(Path(self._home.name) / "stderr", "wb")
        try:
            self._process, self._root = self._spawn(there, dataclasses.replace(limits, cpu_seconds=hard_cpu),
                                                    zygote)
        except OSError as error:
            self._discard(here)
            raise Unavailable(f"the grader could not start the process that runs your code ({error})") from None
        finally:
            there.close()
        self._next_id = 0
        self._deadline: _Deadline | None = None
        self._codec = _Codec(self)
        self._installed: dict[str, Remote] = {}
        self.stopped: Stopped | None = None
        self._unsent: Exception | None = None  # a trusted callback's exception that crossed as a RuntimeError
        self._clock = cputime.Runnable(self._root)
        self._cpu = self._runnable = self._idled = 0.0  # CPU, runnable and not-runnable seconds so far
        self._served_cpu = 0.0  # CPU seconds of this thread spent serving the worker's callbacks
        self._sampled_at = time.monotonic()
        global _OPEN_WORKERS
        _OPEN_WORKERS += 1
        try:
            self.evaluate("None")  # before any learner code: a failure here is the grader's, not the answer's
        except (Stopped, ProtocolError) as failure:
            self.close()
            raise Unavailable(f"the grader could not start the process that runs your code ({failure})") from None

    def _spawn(self, there: socket.socket, limits: sandbox.Limits, zygote: Zygote | None):
        """The worker's process (forked from ``zygote`` when it can), and the PID of its sandbox's root."""
        if zygote is not None and zygote.fork(there, self._stderr, limits.cpu_seconds):
            return _ForkedWorker(zygote), zygote.pid
        self._cap = ProcessCap()
        process = _sandboxed_worker(there.fileno(), limits, self._stderr, self._cap, home=self._home.name)
        return process, process.pid

    def _discard(self, here: socket.socket) -> None:
        """Tidy up a worker whose process never started."""
        if self._cap is not None:
            self._cap.close()
        here.close()
        self._stderr.close()
        self._home.cleanup()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        global _OPEN_WORKERS
        if self._socket.fileno() < 0:
            return  # closed already
        _OPEN_WORKERS -= 1
        self._sample()
        for budget in self._budgets:
            budget.spent += self._cpu
            budget.idled += self._idled
        self._kill()
        if self._cap is not None:
            self._cap.close()
        self._socket.close()
        self._stderr.close()
        self._home.cleanup()

    def _kill(self) -> None:
        """End the worker and everything it started (its own process group, and its PID namespace with it)."""
        if isinstance(self._process, subprocess.Popen) and self._process.poll() is None:
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        with contextlib.suppress(subprocess.TimeoutExpired):  # a zygote that did not answer was killed instead
            self._process.wait()

    # -- the learner program -----------------------------------------------------------------------------------
    def run(self, code: str, name: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Execute code in the learner's namespace. Raises what the code raised (mapped) or Stopped."""
        self.request({"op": "exec", "code": code, "name": name}, timeout=timeout)

    def install(self, module) -> Remote:
        """Load one of our self-contained modules (numpy and the standard library only) into the worker.

        Checks use this for reference code that must sit next to learner objects: reference nodes built on a
        learner's class, a reference class carrying a learner's method. Such a module holds no exercise's answer.
        """
        if module.__name__ not in self._installed:
            source = Path(module.__file__).read_text()
            self._installed[module.__name__] = self.request({"op": "install", "name": module.__name__, "code": source})
        return self._installed[module.__name__]

    def evaluate(self, expression: str, timeout: float = DEFAULT_TIMEOUT_S):
        """An expression over the learner's names, as plain data and Remotes."""
        return self.request({"op": "eval", "code": expression}, timeout=timeout)

    # -- requests ----------------------------------------------------------------------------------------------
    def request(self, message: dict, timeout: float = DEFAULT_TIMEOUT_S, call_args: tuple = ()):
        """Send one request and wait for its reply, serving the worker's callbacks meanwhile.

        ``timeout`` is in CPU seconds of the worker's sandbox; the request is also stopped once the sandbox has not
        been runnable for IDLE_FACTOR times as long (callbacks served excepted), and, as the grader's failure, after
        OVERLOAD_FACTOR times as long on the wall clock. Nested requests (made by a callback while the outer one
        waits) share the outer request's deadline.

        Raises:
            Stopped: the worker missed a deadline, ran out of a budget, died or broke the protocol (it is killed).
            Overloaded: the machine was too loaded to finish the request (it is killed).
        """
        if self.stopped:
            raise self.stopped
        outermost = self._deadline is None
        if outermost:
            if time.monotonic() - self._sampled_at >= SLICE_S:  # many short requests add up too
                self._check()
            self._deadline = _Deadline(self._cpu, timeout, self._runnable, time.monotonic())
            self._unsent = None
        self._next_id += 1
        request_id = self._next_id
        encoded = {**message, "id": request_id, **self._encoded(message)}  # a failure here is ours, not the learner's
        if message["op"] == "call":
            encoded["write_back"] = bool(call_args)  # the worker then reports changed arguments, and names returned ones
        try:
            self._send(encoded)
            while True:
                cpu = time.thread_time()  # a callback's cost starts with reading its frame (red team 9: 16 MiB frames
                frame = self._receive()   # naming no callback cost 38 CPU s to read, and nothing to serve)
                if frame.get("reply") == request_id:
                    break
                if frame.get("op") == "callback" and isinstance(frame.get("id"), int) and frame["id"] < 0:
                    served = time.monotonic()
                    self._send(self._serve_callback(frame))
                    self._deadline.served += time.monotonic() - served
                    self._served_cpu += time.thread_time() - cpu
                    if self._served_cpu > CALLBACK_CPU_S:
                        raise self._stop(f"your code made the check's own functions compute for more than "
                                         f"{CALLBACK_CPU_S:g} s of CPU time: does it call them in a loop?")
                    continue
                raise ProtocolError("a reply to no request")
            if type(frame.get("raised_recursion_limit")) is int:
                global _LIMIT_RAISES
                _LIMIT_RAISES += 1
            if "stopped" in frame:
                raise self._stop(STOP_REASONS[frame["stopped"]])  # KeyError, TypeError: not an answer
            if "error" not in frame:
                return self._outcome(message["op"], frame["ok"], call_args)
            failure = self._exception(frame["error"])  # raised below, where it is not taken for a broken answer
        except (ProtocolError, ValueError, TypeError, KeyError, IndexError, RecursionError, OverflowError):
            raise self._stop("the process running your code sent something that is not an answer: does your code "
                             "write to file descriptors it did not open, or change the grading process's code?") from None
        finally:
            if outermost:
                self._idled += self._deadline.idled  # as sampled: the wait for the reply's reading is the grader's
                self._deadline = None
        raise self._original(failure)

    def _original(self, failure: BaseException) -> BaseException:
        """The exception a trusted callback raised, when learner code let it through (it crossed as a RuntimeError,
        a CheckFailure of a probe's own function, say): in one process it would have reached the check as itself."""
        unsent, self._unsent = self._unsent, None
        if unsent is not None and type(failure) is RuntimeError and str(unsent).startswith(str(failure)):
            return unsent
        return failure

    def _outcome(self, op: str, value, call_args: tuple):
        if op != "call":
            return self._codec.decode(value)
        codec = self._codec
        saved, codec.call_args = codec.call_args, call_args
        try:
            for sent, changed in zip(call_args, value["arguments"]):
                self._write_back(sent, changed)
            return codec.decode(value["result"])
        finally:
            codec.call_args = saved

    def _encoded(self, message: dict) -> dict:
        return {key: self._codec.encode(message[key]) for key in ("target", "args", "kwargs") if key in message}

    def _write_back(self, sent, changed) -> None:
        """Copy what a call did to an array argument into the caller's array, as if the call had run here."""
        if not isinstance(sent, np.ndarray) or changed is None or not sent.flags.writeable:
            return
        now = self._codec.decode(changed)
        if isinstance(now, np.ndarray) and now.shape == sent.shape and not np.array_equal(now, sent, equal_nan=True):
            np.copyto(sent, now, casting="unsafe")

    def _serve_callback(self, frame: dict) -> dict:
        try:
            fn = self._codec.callbacks[int(frame["target"])]
            args = [self._codec.decode(a) for a in wire.fields(frame.get("args", []))]
            kwargs = self._codec.decode(frame.get("kwargs", {"__dict__": []}))
            with memory_headroom(CALLBACK_MEMORY_BYTES):
                result = self._codec.encode(fn(*args, **kwargs))
            return {"reply": frame["id"], "ok": result}
        except (Stopped, ProtocolError):
            raise
        except Exception as error:  # the trusted function rejected the learner's input: an answer, like any other
            kind = type(error).__name__ if type(error).__name__ in MAPPED_ERRORS else "RuntimeError"
            if kind == "RuntimeError":
                self._unsent = error
            return {"reply": frame["id"], "error": {"type": kind, "message": str(error)[:500], "builtin": True}}

    def _exception(self, error: dict) -> BaseException:
        if type(error) is not dict:
            raise ProtocolError("an error that is not an object")
        kind, message = str(error.get("type", "Exception"))[:80], str(error.get("message", ""))[:MESSAGE_LIMIT]
        if not kind.isidentifier():  # a learner's class may name itself anything: "R\ninput: FORGED", say
            kind = "Exception"
        exception = MAPPED_ERRORS[kind](message) if error.get("builtin") and kind in MAPPED_ERRORS \
            else LearnerError(kind, message)
        raised_in = str(error.get("raised_in", ""))[:80]  # where in the worker: no frames cross over
        exception.raised_in = raised_in if re.fullmatch(r"[\w.<>]*", raised_in) else ""  # a qualified name, or none
        return exception

    # -- frames ------------------------------------------------------------------------------------------------
    def _send(self, message: dict) -> None:
        """Send one frame, checking the worker's CPU every SLICE_S that it takes the worker to read it.

        Not ``sendall``: on a socket with a timeout that limits the whole send, and a large frame to a worker
        starved of the CPU took longer than SLICE_S, which was taken for its death (and the zygote, asked how it
        died, killed it: "killed by signal SIGKILL" on a loaded machine).
        """
        data = memoryview(wire.pack(message))
        self._socket.settimeout(SLICE_S)
        while data:
            try:
                data = data[self._socket.send(data):]
            except socket.timeout:
                self._check()
            except OSError:
                raise self._stop(self._death()) from None

    def _receive(self) -> dict:
        self._codec.values = 0
        data = self._read(wire.length(self._read(wire.HEADER.size)))
        # Counted before parsing: JSON decoding builds every container first (16 MiB of "[]," became 370 MB and 1.4 CPU
        # s before the decoded values were counted, red team 9); base64 and numbers hold no bracket.
        if data.count(b"[") + data.count(b"{") > wire.VALUE_LIMIT:
            raise ProtocolError("too many values in one answer")
        return wire.unpack(data)

    def _read(self, size: int) -> bytes:
        """``size`` bytes from the worker, checking its CPU every SLICE_S of waiting."""
        chunks, left = [], size
        self._socket.settimeout(SLICE_S)
        while left:
            try:
                chunk = self._socket.recv(min(left, 1 << 20))
            except socket.timeout:
                self._check()
                continue
            except OSError:
                chunk = b""
            if not chunk:
                raise self._stop(self._death())
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def cpu_seconds(self) -> float:
        """CPU seconds the worker's sandbox has used since this worker started, as last sampled."""
        return self._cpu

    def _sample(self) -> None:
        """Read the sandbox's CPU and runnable seconds (never less than before: a sandbox that is gone reads 0)."""
        cpu, runnable = self._clock.sample()
        self._cpu, self._runnable = max(self._cpu, cpu), max(self._runnable, runnable)
        self._sampled_at = time.monotonic()

    def _check(self) -> None:
        """Sample the worker's CPU and stop it if the request or a budget is past its limit.

        Raises:
            Stopped: with the limit that was passed.
            Overloaded: the machine was too loaded to go on (OVERLOAD_FACTOR): no verdict.
        """
        self._sample()
        deadline = self._deadline
        if deadline is not None and self._cpu - deadline.cpu_start > deadline.cpu_s:
            raise self._stop(f"your code did not finish within {deadline.cpu_s:g} s of CPU time: is there a loop "
                             "that never ends?")
        idle = 0.0
        if deadline is not None:
            idle = deadline.idled = deadline.idle(self._runnable)
        for budget in self._budgets:
            try:
                reason = budget.exhausted(self._cpu, self._idled + idle)
            except Overloaded as overloaded:
                raise self._stop(overloaded.reason, Overloaded) from None
            if reason:
                raise self._stop(reason)
        if deadline is None:
            return
        if idle > IDLE_FACTOR * deadline.cpu_s:
            raise self._stop(f"your code spent {IDLE_FACTOR * deadline.cpu_s:g} s neither computing nor waiting for "
                             "a CPU, so it was stopped: does it sleep, or wait for input or a lock?")
        if time.monotonic() - deadline.wall_start - deadline.served > OVERLOAD_FACTOR * deadline.cpu_s:
            raise self._stop(f"grading failed, through no fault of your code: the machine was too loaded to finish "
                             f"one step of the checks within {OVERLOAD_FACTOR * deadline.cpu_s:g} s. Ask your "
                             "instructor to grade it again.", Overloaded)

    def _stop(self, reason: str, kind: type[Stopped] = Stopped) -> Stopped:
        """Kill the worker and remember why: every later request fails at once with the same reason."""
        self._kill()
        self.stopped = kind(reason)
        return self.stopped

    def _death(self) -> str:
        """Why the worker ended, in words a learner can act on."""
        try:
            code = self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the process that runs your code stopped answering"
        self._stderr.flush()
        tail = Path(self._home.name, "stderr").read_bytes()[-2000:].decode(errors="replace")
        if code is not None and code > 128 and code - 128 in signal.Signals._value2member_map_:
            code = -(code - 128)  # bubblewrap reports a signal death inside the sandbox as 128 + the signal
        if "MemoryError" in tail:
            return "your code ran out of memory (the limit is 4 GiB)"
        if code == -signal.SIGXCPU:
            return ("your code used up the CPU time left for checking it (the operating system stopped it): is your "
                    "code very slow?")
        if code == -signal.SIGSEGV:
            return ("the process running your code crashed (segmentation fault): usually unbounded recursion past "
                    "a raised recursion limit. Keep your own stack (a list) instead of recursing.")
        if code is not None and code < 0:
            return (f"the process running your code was killed by signal {signal.Signals(-code).name}: does your "
                    "code kill processes?")
        return (f"your code ended the process that runs it (exit code {code}): do not call exit(), sys.exit(), "
                "os._exit() or kill processes in an exercise.")


@contextlib.contextmanager
def memory_headroom(extra_bytes: int):
    """At most ``extra_bytes`` more address space for this process until the block ends (RLIMIT_AS's soft limit,
    lowered, then put back): past it an allocation raises MemoryError. Within a block already bounded more tightly
    (a callback nested in another), the outer bound stands."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        cap = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE") + extra_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY and soft <= cap:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def call_method(value, name: str, *args):
    """value.name(*args), in one request when value is remote (instead of one for the method, one for the call)."""
    if isinstance(value, Remote):
        return value._worker.request({"op": "method", "target": value, "name": name, "args": list(args)})
    return getattr(value, name)(*args)


def repeat(value, name: str, times: int) -> list:
    """[value.name(), value.name().name(), ...]: ``times`` calls, each on the previous result.

    One request when value is remote: a check building a 10,000-link chain waits for one reply, not 10,000.
    """
    if isinstance(value, Remote):
        return value._worker.request({"op": "repeat", "target": value, "name": name, "times": times})
    results = []
    for _ in range(times):
        value = getattr(value, name)()
        results.append(value)
    return results


def beside(answer, module):
    """``module`` where the learner's objects live: the module itself for local answers, installed in the worker
    for remote ones (``answer`` may be a dict of answers, as some test cells pass)."""
    found = [v for v in (answer.values() if isinstance(answer, dict) else [answer]) if isinstance(v, Remote)]
    return found[0]._worker.install(module) if found else module
