"""The learner side of trusted grading: runs one submission's code and answers requests in plain data.

This file runs *inside the sandbox*, as a script, with nothing of the course importable: only the standard
library and numpy. It is the only code of ours in the process that executes learner code, and it holds no check,
no oracle and no solution, so there is nothing here worth tampering with: whatever it sends back is judged by the
trusted side (``autograder.trust.remote``), which decodes it as plain data and compares it with its own references.

It talks to the trusted side over the socket whose descriptor is in $WORKER_FD, in the protocol that ``wire.py``
specifies (frames, messages, values, and what each side refuses) and implements for both sides. That file sits next
to this one, in the sandbox as outside it, and is loaded from there.
"""
from __future__ import annotations

import __future__
import ast
import builtins
import contextlib
import ctypes
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import math
import operator
import os
import resource
import shutil
import signal
import socket
import struct
import sys
import threading
import time
import traceback
import types
import warnings

import numpy as np

# Libraries that differentiate for you. Learner code must not reach them while being graded; the sandbox also
# hides their files, this is the second line (and the only one where no sandbox exists).
AUTODIFF = ("torch", "functorch", "torchgen", "jax", "jaxlib", "autograd", "tensorflow", "sympy", "mpmath", "theano",
            "aesara", "pytensor", "mxnet", "chainer", "tinygrad", "micrograd")
COURSE = ("autograder", "labtools")  # the grader and the notebooks' helpers: not part of any answer
# Imported by given cells for pictures, which grading never shows: loaded only if something uses it (half a second
# per worker). Other imports are the library itself, as in the kernel: a stand-in for a class is no class (red team
# 22: `tqdm.__init__(self, ...)` in a subclass reached the stand-in's own, and `type(bar) is tqdm` was False).
LAZY = ("matplotlib",)
# Imported by the zygote, so a worker whose given cells import them (notebooks 2 and 5) starts as cheaply as one
# whose cells do not (tqdm.auto alone: 0.08 s of CPU).
PRELOADED = ("tqdm.auto", "threadpoolctl")
OPERATORS = {name: getattr(operator, name) for name in (
    "add", "sub", "mul", "truediv", "pow", "matmul", "neg", "getitem", "setitem", "lt", "le", "gt", "ge")}
OPERATORS.update(len=len, float=float, int=int, bool=bool, isinstance=isinstance, issubclass=issubclass, type=type)

# What the __future__ imports of the learner's cells so far turned on: IPython's compiler carries them into later
# cells, as codeop.Compile does (red team 16: `from __future__ import barry_as_FLUFL`, then `<>` in an answer).
FUTURE_FLAGS = [getattr(__future__, name).compiler_flag for name in __future__.all_feature_names]
LEARNER_FUTURE = [0]


def learner_code(source, name: str, mode: str = "exec", flags: int = 0):
    """``compile`` for learner code: with the __future__ features of its earlier cells, never with this file's own
    (red team 16: its ``annotations`` made every learner annotation go unevaluated, so ``-> Tensor`` inside ``class
    Tensor`` passed the grade and raised NameError in the kernel)."""
    code = compile(source, name, mode, flags | LEARNER_FUTURE[0], dont_inherit=True)
    if isinstance(code, types.CodeType):
        LEARNER_FUTURE[0] |= sum(flag for flag in FUTURE_FLAGS if code.co_flags & flag)
    return code


class Unavailable(ImportError):
    pass


class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in AUTODIFF:
            raise Unavailable(f"{name} cannot be imported while your code is graded: the exercise is to compute "
                              "gradients yourself, with numpy")
        if top in COURSE:
            raise Unavailable(f"{name} cannot be imported while your code is graded: an answer may use numpy and "
                              "the standard library, not the course's own packages")
        if top == "IPython" and importlib.machinery.PathFinder.find_spec(name, path) is None:
            return importlib.util.spec_from_loader(name, _ShowsNothing(), is_package=True)
        if name in ("tqdm.notebook", "tqdm.autonotebook"):
            return importlib.util.spec_from_loader(name, _TextBars())
        if name in ON_IMPORT and (spec := importlib.machinery.PathFinder.find_spec(name, path)) is not None:
            spec.loader = _Configured(spec.loader, ON_IMPORT[name])
            return spec
        return None


# Set on a library as it is imported, before learner code sees it. tqdm's monitor is a thread that outlives every
# bar (tqdm 4.70), so an answer drawing a progress bar failed as `left-running` (red team 20); without it a bar
# shows the same, refreshed as it iterates.
ON_IMPORT = {"tqdm.std": lambda module: setattr(module.tqdm, "monitor_interval", 0)}


class _Configured(importlib.abc.Loader):
    """``loader``'s module, then ``configure`` run on it."""

    def __init__(self, loader, configure):
        self._loader, self._configure = loader, configure

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._configure(module)

    def __getattr__(self, name):  # get_source (tracebacks), is_package, ...
        return getattr(self._loader, name)


class _TextBars(importlib.abc.Loader):
    """tqdm.notebook without ipywidgets, which the worker's allowlist leaves out: the same names, as tqdm's text bar
    with the notebook bar's options and widget too. The real module subclasses IPython's widgets, whose stand-ins
    (Missing) raised on import, so a cell using it stopped before its def in the grade alone (red team 21); what a
    bar shows is never graded. tqdm.autonotebook too, which picks the notebook bar in a kernel (and tqdm.auto's bar
    is built on it): there `tqdm(..., display=False)` and `bar.container` raised in the grade alone (red team 23)."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if module.__name__ == "tqdm.autonotebook":  # the same bar as tqdm.notebook's, as in a kernel
            notebook = importlib.import_module("tqdm.notebook")
            module.__dict__.update(tqdm=notebook.tqdm, trange=notebook.trange, __all__=["tqdm", "trange"])
            return
        text_bar = importlib.import_module("tqdm.std").tqdm
        nowhere = open(os.devnull, "w")  # the widget writes no text (red teams 23 and 24: a flood of bars filled the
        # worker's 64 MiB stderr file; an answer's own redirect_stdout caught the bar)

        class tqdm_notebook(text_bar):  # tqdm's own name
            __module__, __qualname__ = "tqdm.notebook", "tqdm_notebook"  # where pickle finds it

            def __init__(self, *args, display=True, **kwargs):  # display: whether to show the widget at once
                super().__init__(*args, **{**kwargs, "file": nowhere})
                # the widget, which a cell may display, close or colour itself (its children: text, bar, text):
                # here it shows nothing, as IPython's names
                self.container, self.displayed = Missing("IPython.tqdm_notebook.container", ""), display
                self.container._names["children"] = tuple(Missing(f"IPython.tqdm_notebook.{part}", "")
                                                          for part in ("description", "bar", "counter"))
                self.disp = self.display

            def display(self, msg=None, pos=None, close=False, bar_style=None, check_delay=True):
                return super().display(msg, pos)

        def tnrange(*args, **kwargs):
            return tqdm_notebook(range(*args), **kwargs)

        module.__dict__.update(tqdm_notebook=tqdm_notebook, tqdm=tqdm_notebook, tnrange=tnrange, trange=tnrange,
                               __all__=["tqdm_notebook", "tnrange", "tqdm", "trange"])


class _ShowsNothing(importlib.abc.Loader):
    """IPython where the worker's allowlist leaves it out: each name in it is a stand-in (Missing) whose calls show
    nothing, so ``from IPython.display import display`` and ``display(...)`` before an answer's def let the cell go
    on to it, as in the kernel (red team 19)."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        def stand_in(attribute):
            if attribute.startswith("__"):  # what the import system and copying probe for
                raise AttributeError(attribute)
            return Missing(f"{module.__name__}.{attribute}", f"{module.__name__} is not available while grading")
        module.__getattr__ = stand_in


def _load_sibling(name: str) -> types.ModuleType:
    """``name``.py, from this file's folder. Run as a script, this file has no package to import it from, and -I
    keeps the folder off sys.path (where learner code would find our files by name); compiled here, not imported, so
    no bytecode is written beside it for learner code to rewrite."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    module = types.ModuleType(name)
    module.__file__ = path
    with open(path) as source:
        exec(compile(source.read(), path, "exec"), module.__dict__)
    return module


wire = _load_sibling("wire")
forbid_new_processes = _load_sibling("sandbox_init").forbid_new_processes  # the same loader the sandbox's init uses


class Connection(wire.Codec):
    """Frames over a socket, and the values of this side: what is not plain data stays here behind a handle."""

    def __init__(self, sock: socket.socket):
        self.reader, self.writer = sock.makefile("rb"), sock.makefile("wb")
        self.objects: dict[int, object] = {}   # handle -> object kept alive here
        self.handles: dict[int, int] = {}      # id(object) -> handle
        self.next_id = 0
        self.args: list = []                   # the arrays of the current call, for {"__arg__": i}
        # One callback at a time: learner threads calling a check's function at once would interleave their frames
        # (a correct pool.map over f got "KeyError: 'id'", red team 7). Reentrant: a callback's nested requests
        # may run learner code that calls back again on this thread.
        self.callback_lock = threading.RLock()

    def send(self, message: dict) -> None:
        self.writer.write(wire.pack(message))
        self.writer.flush()

    def receive(self) -> dict:
        header = self.reader.read(wire.HEADER.size)
        if len(header) < wire.HEADER.size:
            raise SystemExit(0)  # the trusted side hung up: nothing more to do
        return wire.unpack(self.reader.read(wire.length(header, limit=None)))

    # -- values ------------------------------------------------------------------------------------------------
    def encode(self, value, depth: int = 0):
        # An array argument of the call being answered is named, not copied: the caller gets its own array back.
        for i, sent in enumerate(self.args):
            if value is sent:
                return {"__arg__": i}
        return super().encode(value, depth)

    def encode_other(self, value, depth: int):
        if type(value) is Callback:
            return {"__cb__": value._target}
        return self.reference(value)

    def reference(self, value) -> dict:
        handle = self.handles.get(id(value))
        if handle is None:
            handle = self.handles[id(value)] = self.next_id
            self.objects[handle] = value
            self.next_id += 1
        kind = type(value)
        return {"__ref__": handle, "type": kind.__name__[:80], "callable": callable(value),
                "container": hasattr(kind, "__iter__") or hasattr(kind, "__getitem__")}

    def decode_other(self, tag: str, value: dict):
        if tag == "__ref__":
            return self.objects[value["__ref__"]]
        if tag == "__cb__":
            return Callback(self, value["__cb__"])
        if tag == "__obj__":
            return TrustedObject({name: self.decode(method) for name, method in value["__obj__"]},
                                 self.decode(value["call"]))
        if tag in wire.EXCEPTION_TAGS:
            return wire.decode_exception(tag, value[tag])
        return super().decode_other(tag, value)

    # -- requests ----------------------------------------------------------------------------------------------
    def wait_for(self, request_id: int, namespace: dict):
        """Serve the trusted side's requests until the reply to ``request_id`` (0: until it hangs up) arrives."""
        while True:
            message = self.receive()
            if message.get("reply") == request_id and request_id:
                return message
            self.send(self.answer(message, namespace))

    def answer(self, message: dict, namespace: dict) -> dict:
        asked_before = len(LIMITS_ASKED)
        try:
            with contextlib.nullcontext() if message.get("op") in LOADING else as_a_check_runs_it():
                reply = {"reply": message["id"], "ok": self.perform(message, namespace)}
        except BaseException as error:  # noqa: B036 -- SystemExit and KeyboardInterrupt from learner code are answers too
            if isinstance(error, RecursionError):
                SET_RECURSION_LIMIT(RECURSION_LIMIT)
            reply = {"reply": message["id"], "error": describe(error)}
        if not threads_ended():  # they could change results after we answer: the answer is void
            reply = {"reply": message["id"], "stopped": "threads"}
        raised = [n for n in LIMITS_ASKED[asked_before:] if n > RECURSION_LIMIT]
        if raised:
            reply["raised_recursion_limit"] = max(raised)
        return reply

    def perform(self, message: dict, namespace: dict):
        op = message["op"]
        if op == "exec":
            code = learner_code(message["code"], message.get("name", "<cell>"), flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            if code.co_flags & CO_COROUTINE:  # an await at the top of a cell, which IPython runs in its event loop
                import asyncio
                asyncio.run(eval(code, namespace))
            else:
                exec(code, namespace)
            return None
        if op == "eval":
            return self.encode(eval(learner_code(message["code"], "<answer>", "eval"), namespace))
        target = self.decode(message.get("target"))
        args = self.decode(message.get("args", []))
        kwargs = self.decode(message.get("kwargs", {"__dict__": []}))
        if op == "getattr":
            return self.encode(getattr(target, message["name"]))
        if op == "method":
            return self.encode(getattr(target, message["name"])(*args))
        if op == "setattr":
            setattr(target, message["name"], args[0])
            return None
        if op == "list":
            return self.encode(list(target))
        if op == "repeat":  # x.f(), x.f().f(), ...: a deep chain in one request instead of one per link
            results = []
            for _ in range(message["times"]):
                target = getattr(target, message["name"])()
                results.append(target)
            return self.encode(results)
        if op == "operator":
            return self.encode(OPERATORS[message["name"]](*args))
        if op == "call":
            if not message.get("write_back"):
                return {"result": self.encode(target(*args, **kwargs)), "arguments": []}
            before = [a.copy() if isinstance(a, np.ndarray) else None for a in args]
            result = target(*args, **kwargs)
            # Arguments are copies here: send back what the call did to them, so in-place edits stay visible.
            changed = [self.encode(a) if isinstance(a, np.ndarray) and not np.array_equal(a, b, equal_nan=True)
                       else None for a, b in zip(args, before)]
            self.args = [a for a in args if isinstance(a, np.ndarray)]
            try:
                return {"result": self.encode(result), "arguments": changed}
            finally:
                self.args = []
        if op == "install":  # reference code a check needs next to the learner's objects (never an answer)
            module = types.ModuleType(message["name"])
            sys.modules[message["name"]] = module
            exec(compile(message["code"], message["name"], "exec"), module.__dict__)
            return self.reference(module)
        if op == "given":
            return self.run_given(message["code"], message.get("name", "<cell>"), namespace)
        raise ValueError(f"unknown request {op!r}")


    def run_given(self, code: str, name: str, namespace: dict) -> None:
        """Run a given cell's definitions statement by statement; an import of a blocked library binds a stand-in
        instead, so a learner who calls torch later is told why it is missing.

        A statement that raises is skipped and the rest run: here it cannot be told from one that raises only for
        what grading leaves out or lacks (``DTYPE = torch.float64`` with torch blocked, IPython's ``In``, a name
        bound by a left-out call through ``global`` or ``exec``), and stopping there would drop, unseen, the defs
        after it that the kernel ran (red team 13). Your kernel stops such a cell where it raises, and shows it."""
        for statement in ast.parse(code).body:
            if isinstance(statement, (ast.Import, ast.ImportFrom)) and lazy(statement, namespace):
                continue
            try:
                exec(learner_code(ast.Module([statement], []), name), namespace)
            except Exception as error:
                if isinstance(error, ImportError) and isinstance(statement, (ast.Import, ast.ImportFrom)):
                    for alias in statement.names:
                        bound = alias.asname or alias.name.split(".")[0]
                        namespace[bound] = Missing(bound, str(error))


def lazy(statement, namespace: dict) -> bool:
    """Bind the names of an import of LAZY modules to stand-ins that import on first use."""
    module = statement.module if isinstance(statement, ast.ImportFrom) else None
    names = [alias.name for alias in statement.names]
    if getattr(statement, "level", 0) or any(top.split(".")[0] not in LAZY for top in ([module] if module else names)):
        return False
    for alias in statement.names:
        if module is None:  # import a.b as c binds c to a.b; import a.b binds a
            bound = alias.asname or alias.name.split(".")[0]
            namespace[bound] = Lazy(alias.name if alias.asname else alias.name.split(".")[0])
        else:
            namespace[alias.asname or alias.name] = Lazy(module, alias.name)
    return True


class Lazy:
    """A module (or one of its attributes) imported when first used."""

    def __init__(self, module: str, attribute: str | None = None):
        self._module, self._attribute = module, attribute

    def _load(self):
        loaded = importlib.import_module(self._module)
        return getattr(loaded, self._attribute) if self._attribute else loaded

    def __getattr__(self, name):
        try:
            loaded = self._load()
        except ImportError as error:  # not in the worker's allowlist: a name in it is a stand-in, as in Missing
            return Missing(f"{self._module}.{name}", str(error))
        return getattr(loaded, name)

    def __call__(self, *args, **kwargs):
        return self._load()(*args, **kwargs)


class Missing:
    """Stands for a library that cannot be imported while grading (or a name in it); calling it says so.

    Naming what is in it is no use of it: ``DTYPE = torch.float64`` binds another stand-in, as the kernel binds the
    dtype, so the cell goes on as in the kernel (red team 13: the raise stopped an answer cell, and the wrong def after
    it, in the grade alone)."""

    def __init__(self, name: str, why: str):
        self._name, self._why, self._names = name, why, {}

    def __getattr__(self, attribute):
        if attribute.startswith("__") or attribute == "_names":  # Python's protocols (copying), or not set up yet
            raise AttributeError(attribute)
        # the same stand-in each time, as torch.float64 is torch.float64 (red team 15: `DT is torch.float64`)
        return self._names.setdefault(attribute, Missing(f"{self._name}.{attribute}", self._why))

    def __instancecheck__(self, instance) -> bool:  # isinstance(x, torch.Tensor): nothing here is one
        return False

    def __mro_entries__(self, bases):  # class Slider(ipywidgets.IntSlider): the cell goes on to its def (red team 22)
        return ()

    def __subclasscheck__(self, subclass) -> bool:
        return False

    def __call__(self, *args, **kwargs):
        # display(...), Markdown(...): grading shows nothing (the outputs graded are the kernel's), and the cell goes
        # on to the answer's def, as in the kernel (red team 19)
        if self._name.split(".")[0] == "IPython":
            return self
        raise Unavailable(self._why)


class Shell:
    """What ``get_ipython()`` returns here: notebook magics (already turned into calls by the trusted side) do
    nothing, except those that run Python (%time, %%time, %%capture, ...): they run their code, where the kernel
    does (wire.MAGICS_IN_NAMESPACE), %timeit and %%timeit, the magics that unbind names (%reset, %reset_selective,
    %xdel), ``push`` and ``run_cell``. The trusted side parses a magic's constant line with IPython's own parser and
    hands its parts to ``autograder_timeit`` or ``autograder_forget``; a line computed at run time is split here
    as plainly as IPython splits a simple one. ``user_ns`` is the notebook's namespace, as in the kernel."""

    user_ns = user_global_ns = property(lambda self: NAMESPACE)

    def get_ipython(self):  # the notebook's get_ipython is this bound method, as a kernel's is its shell's
        return self

    def run_line_magic(self, name, line, *args, _stack_depth=1):
        if name in wire.LINE_MAGICS_IN_NAMESPACE:
            code, option = wire.line_magic_code(name, line)
            return self._run_magic_code(name, code, option, sys._getframe(_stack_depth).f_locals)
        if name == "timeit":
            options, statement = _timeit_line(line)
            return self.autograder_timeit("pass", statement, options) if statement.strip() else None
        if name in wire.FORGETTING_MAGICS:
            self.autograder_forget(name, wire.forgetting_line(name, line))
        if name in ("env", "set_env"):
            return _environment(name, line)
        if name == "who_ls":
            kinds = set(line.split())
            return sorted(n for n in _user_names() if not kinds or type(NAMESPACE[n]).__name__ in kinds)
        if name == "pwd":
            return os.getcwd()
        return None

    def ev(self, expression):
        """IPython's: ``expression`` evaluated in the notebook's namespace (red team 19: it raised here)."""
        return eval(learner_code(expression, "<ev>", "eval"), NAMESPACE)

    def ex(self, code):
        """IPython's: ``code`` run in the notebook's namespace."""
        exec(learner_code(code, "<ex>"), NAMESPACE)

    def autograder_run(self, name: str, code: str, option: str = ""):
        """%time or %prun of a line whose code, and option that changes how it runs (wire.RUN_OPTIONS), the trusted
        side read with IPython's own parser (and turned into Python): run as ``_run_magic_code`` runs it, with the
        caller's local names."""
        return self._run_magic_code(name, code, option, sys._getframe(1).f_locals)

    @staticmethod
    def _run_magic_code(name: str, code: str, option: str, local_names: dict):
        """As IPython's ExecutionMagics runs the code of %time and %prun. %prun: in the notebook's namespace alone, a
        SystemExit caught, returning the profile's statistics with ``-r`` (else nothing). %time: with the caller's
        local names, returning the value of a last statement that is an expression (red team 16 and 18: ``H = %time
        1e-5``, ``H = %time x = 0; 1e-5``), and with ``--no-raise-error`` an Exception swallowed, as IPython 9
        does."""
        if name == "prun":
            return _profiled(learner_code(code, "<%prun>"), option)
        tree = learner_code(code, "<%time>", flags=ast.PyCF_ONLY_AST)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        try:
            exec(learner_code(tree, "<%time>"), NAMESPACE, local_names)
            if last is not None:
                return eval(learner_code(ast.Expression(last.value), "<%time>", "eval"), NAMESPACE, local_names)
        except Exception:
            if not option:
                raise
        return None

    def autograder_timeit(self, setup: str, statement: str, options: dict):
        """%%timeit (or %timeit, whose setup is ``pass``) as IPython runs it: its template function, compiled in a
        scope of its own, called ``-r`` times with ``-n`` loops; where IPython chooses the number by timing (no
        ``-n``), one trial call and one loop a call, so that grading does not time your code for seconds; ``-v
        name`` binds the result, ``-o`` returns it (red team 13, 15)."""
        number, repeat = int(options.get("n", 0)), int(options.get("r", 7))
        int(options.get("p", 3))
        parts = {}
        for key, code in (("setup", setup), ("stmt", statement)):
            tree = learner_code(code, f"<magic-timeit-{key}>", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            learner_code(tree, f"<magic-timeit-{key}>", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            parts[key] = tree.body or [ast.Pass()]
        template = ast.parse(TIMEIT_TEMPLATE)
        inner = template.body[0]
        inner.body[0:1] = parts["setup"]
        next(node for node in inner.body if isinstance(node, ast.For)).body = parts["stmt"]
        scope = {}
        exec(learner_code(ast.fix_missing_locations(template), "<magic-timeit>"), NAMESPACE, scope)
        run = scope["inner"]
        if number == 0:  # IPython chooses it by timing, 1 loop at first: one trial stands for its trials
            number = 1
            run(itertools.repeat(None, number), time.perf_counter)
        runs = [run(itertools.repeat(None, number), time.perf_counter) for _ in range(repeat)]
        result = TimeitResult(number, repeat, min(runs) / number, max(runs) / number, runs)
        if options.get("v"):
            NAMESPACE[options["v"]] = result
        return result if "o" in options else None

    def autograder_forget(self, name: str, parsed: dict) -> None:
        """%reset, %reset_selective or %xdel, from their lines as IPython parsed them (``wire.forgetting_line``)."""
        if "refused" in parsed:
            raise UsageError(parsed["refused"])
        if name == "reset":
            if parsed["soft"]:
                _forget(_user_names())
            elif not parsed["targets"]:
                _forget([n for n in NAMESPACE if not (n.startswith("__") and n.endswith("__")) and n != "get_ipython"])
            if "array" in [t.lower() for t in parsed["targets"]]:
                _forget([n for n, value in NAMESPACE.items() if isinstance(value, np.ndarray)])
        elif name == "reset_selective":
            import re

            if parsed["regex"]:
                _forget([n for n in _user_names() if re.search(parsed["regex"], n)])
        elif parsed["name"] in ("__builtin__", "__builtins__"):
            print(f"ValueError: Refusing to delete {parsed['name']}")
        elif parsed["name"] not in NAMESPACE:
            print(f"NameError: name '{parsed['name']}' is not defined")
        elif parsed["by_name"]:
            _forget([parsed["name"]])
        else:
            _forget([n for n, value in NAMESPACE.items() if value is NAMESPACE[parsed["name"]]])

    def push(self, variables, interactive=True):
        """IPython's: names into the notebook's namespace, from a dict, or from the caller's local names (a string
        of names split at whitespace, or a list); a name it cannot read is printed (red team 13)."""
        if isinstance(variables, dict):
            found = variables
        elif isinstance(variables, (str, list, tuple)):
            caller, found = sys._getframe(1), {}
            for name in variables.split() if isinstance(variables, str) else variables:
                try:
                    found[name] = eval(name, caller.f_globals, caller.f_locals)
                except BaseException:  # noqa: B036 -- IPython's bare except
                    print(f"Could not get variable {name} from {caller.f_code.co_name}")
        else:
            raise ValueError("variables must be a dict/str/list/tuple")
        NAMESPACE.update(found)

    def run_cell(self, raw_cell, *args, **kwargs):
        """IPython's: the code in the notebook's namespace, whatever it raises shown, not raised; returns how it went
        (``success``, ``error_in_exec``). The trusted side hands a constant cell over as Python (verdicts.python)."""
        result = types.SimpleNamespace(success=True, error_before_exec=None, error_in_exec=None, result=None)
        try:
            exec(learner_code(raw_cell, "<run_cell>"), NAMESPACE)
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # noqa: B036 -- IPython shows SystemExit too, and goes on
            result.success, result.error_in_exec = False, error
        return result

    def run_cell_magic(self, name, line, cell):
        if not wire.runs_its_code(name, line):
            raise UsageError(f"%%{name} does not take {line.strip()!r} on its line (IPython refuses the cell)")
        if name in wire.CELL_MAGICS_IN_NAMESPACE:
            exec(learner_code(cell, f"<%%{name}>"), NAMESPACE)
        elif name in wire.CELL_MAGICS_IN_SCOPE:
            options, setup = _timeit_line(line)
            return self.autograder_timeit(setup, cell, options)
        return None

    def system(self, *args, **kwargs):
        return None

    show_usage = system  # what `?` alone calls (red team 16): it prints IPython's help in the kernel

    getoutput = system


def _profiled(code, option: str):
    """``code`` run under cProfile in the notebook's namespace, as IPython's %prun runs it (a SystemExit printed,
    not raised); its ``pstats.Stats`` when ``option`` is ``-r``, else None."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    try:
        profile.runctx(code, NAMESPACE, NAMESPACE)
    except SystemExit:
        print("*** SystemExit exception caught in code being profiled.")
    return pstats.Stats(profile) if option else None


# IPython's own (IPython.core.magics.execution.ExecutionMagics.timeit): ``setup`` and ``stmt`` stand for the parts.
TIMEIT_TEMPLATE = ("def inner(_it, _timer):\n    setup\n    _t0 = _timer()\n    for _i in _it:\n        stmt\n"
                   "    _t1 = _timer()\n    return _t1 - _t0\n")


class TimeitResult:
    """What IPython's %timeit -o returns, in the names a notebook reads (IPython.core.magics.execution.TimeitResult):
    seconds per loop, each repeat's total seconds in ``all_runs``; ``compile_time`` is 0 (nothing is timed compiling
    here)."""

    compile_time = 0.0

    def __init__(self, loops, repeat, best, worst, all_runs):
        self.loops, self.repeat, self.best, self.worst, self.all_runs = loops, repeat, best, worst, all_runs
        self.timings = [t / loops for t in all_runs]
        self.average = math.fsum(self.timings) / len(self.timings)
        self.stdev = (math.fsum((t - self.average) ** 2 for t in self.timings) / len(self.timings)) ** 0.5

    def __str__(self):
        return (f"{self.average:.3g} s ± {self.stdev:.3g} s per loop (mean ± std. dev. of {self.repeat} runs, "
                f"{self.loops} loops each)")


def _environment(name: str, line: str):
    """IPython's %env and %set_env (IPython.core.magics.osm), on the worker's own environment: %env alone gives a
    copy (likely secrets hidden), ``%env var`` its value (a UsageError if unset), ``var=val`` or ``var val`` sets it
    and prints so."""
    split = "=" if "=" in line else " "
    if name == "env" and len(line.split(split)) == 1 and line.strip():
        if line.strip() not in os.environ:
            raise UsageError(f"Environment does not have key: {line.strip()}")
        return os.environ[line.strip()]
    if name == "env" and not line.strip():  # IPython hides what looks like a secret
        return {k: "<hidden>" if any(s in k.lower() for s in ("key", "token", "secret")) else v
                for k, v in os.environ.items()}
    parts = line.split(split, 1)
    if len(parts) < 2 or not line.strip():
        raise UsageError("usage is 'set_env var=val'")
    key, value = parts[0].strip(), parts[1].strip()
    if any(c.isspace() for c in key):
        raise UsageError(f"refusing to set env var with whitespace: '{value}'")
    os.environ[key] = value
    print(f"env: {key}={value}")
    return None


def _timeit_line(line: str) -> tuple[dict, str]:
    try:
        return wire.timeit_line(line)
    except ValueError as error:
        raise UsageError(str(error)) from None


def _user_names() -> list[str]:
    """What IPython's %who lists: the names not starting with an underscore, the shell's own left out."""
    return [n for n in NAMESPACE if not n.startswith("_") and n != "get_ipython"]


def _forget(names) -> None:
    for name in list(names):
        NAMESPACE.pop(name, None)


class UsageError(Exception):
    """IPython's name for a magic used wrongly."""


class TrustedObject:
    """An object of the checking side (a reference model, a spy optimizer): its methods are callbacks."""

    def __init__(self, methods: dict, call):
        self.__dict__.update(methods)
        self._call = call

    def __call__(self, *args, **kwargs):
        if self._call is None:
            raise TypeError("this object is not callable")
        return self._call(*args, **kwargs)


class Callback:
    """A function that lives on the trusted side (a probe's f(x)); calling it asks the trusted side to run it."""

    def __init__(self, connection: Connection, target: int):
        self._connection, self._target = connection, target

    def __call__(self, *args, **kwargs):
        conn = self._connection
        with conn.callback_lock:
            conn.next_id += 1
            request_id = -conn.next_id  # negative ids: requests that start on this side
            saved, conn.args = conn.args, []
            try:
                conn.send({"id": request_id, "op": "callback", "target": self._target,
                           "args": [conn.encode(a) for a in args],
                           "kwargs": {"__dict__": [[k, conn.encode(v)] for k, v in kwargs.items()]}})
            finally:
                conn.args = saved
            reply = conn.wait_for(request_id, NAMESPACE)
        if "error" in reply:
            raise wire.MAPPED_ERRORS.get(reply["error"]["type"], RuntimeError)(reply["error"]["message"])
        return conn.decode(reply["ok"])


LOADING = ("exec", "given")  # a notebook's cells, run as its kernel runs them: under what they set themselves


@contextlib.contextmanager
def as_a_check_runs_it():
    """Learner code called by a check, as a check in a learner's kernel calls it (autograder.checks._run,
    labtools.run_check): float errors and warnings ignored and a recursion limit of at least RECURSION_LIMIT,
    whatever an answer cell set (np.seterr(all="raise") failed a stable softmax in the grade alone); what the cells
    set is theirs again after."""
    limit = sys.getrecursionlimit()
    SET_RECURSION_LIMIT(max(limit, RECURSION_LIMIT))
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            yield
    finally:
        SET_RECURSION_LIMIT(limit)


def describe(error: BaseException) -> dict:
    kind = type(error)
    builtin = getattr(builtins, kind.__name__, None) is kind
    try:
        message = str(error)
    except BaseException:  # noqa: B036 -- a learner exception whose __str__ fails still has a type
        message = "(its message could not be shown)"
    if not builtin and isinstance(error, ImportError):
        builtin, kind = True, ImportError
    frame = error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return {"type": kind.__name__[:80], "message": message[:300], "builtin": builtin,
            "where": "".join(traceback.format_exception_only(kind, error))[-300:] if not builtin else "",
            # the function that raised, e.g. a stub's name (diagnostics names it for the learner)
            "raised_in": frame.tb_frame.f_code.co_qualname[:80] if frame is not None else ""}


def running_threads() -> int:
    """Threads of this process, whoever started them (the threading module does not see _thread or C threads)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def threads_ended(grace_s: float = 0.2) -> bool:
    """Whether only this process's own threads are left, waiting up to ``grace_s``: a thread that learner code
    joined has finished its Python work but may take a moment (under load, longer) to leave /proc."""
    deadline, pools_ended = time.monotonic() + grace_s, False
    while running_threads() > BASELINE_THREADS:
        # once no thread of the answer's is alive, nothing uses a BLAS pool: ending it earlier would wait for the
        # thread using it, and a thread left running would be told as a timeout (red teams 22 and 23)
        if not pools_ended and threading.active_count() == 1:
            shut_idle_blas_pools()
            pools_ended = True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def shut_idle_blas_pools() -> None:
    """End OpenBLAS's pool of waiting threads, which ``threadpool_limits(n)`` with n > 1 starts and leaves (a pool
    that only waits for work changes no result; the next call that needs it starts it again). Without this an answer
    calling it, as notebook 5 does with 1, failed in the grade alone as `left-running` (red team 21). Call it only
    when no thread of the answer's is alive: it waits for a pool in use. Without threadpoolctl loaded there is no
    pool: with one BLAS thread (sandbox.environment) OpenBLAS starts none."""
    threadpoolctl = sys.modules.get("threadpoolctl")
    if threadpoolctl is None:
        return
    with contextlib.suppress(Exception):  # a threadpoolctl learner code replaced: its threads are counted as they are
        for library in threadpoolctl.ThreadpoolController().lib_controllers:
            if library.internal_api == "openblas":
                symbol = "blas_thread_shutdown_"
                shutdown = getattr(library.dynlib, symbol, None) or library._get_symbol(symbol)
                if shutdown is not None:
                    shutdown()


CO_COROUTINE = 0x80  # inspect.CO_COROUTINE, without importing inspect into every worker
RECURSION_LIMIT = sys.getrecursionlimit()
SET_RECURSION_LIMIT = sys.setrecursionlimit
LIMITS_ASKED: list[int] = []  # every sys.setrecursionlimit(n) of learner code, in order (answer() reports them)


def watched_recursion_limit(limit):
    """sys.setrecursionlimit for learner code: a lower limit is set, a higher one refused (the deep recursion it is
    for would overflow the C stack and kill this process, instead of failing with a reason), and the request's reply
    says it was asked for, as a check in a learner's kernel refuses and fails it."""
    if limit <= RECURSION_LIMIT:
        SET_RECURSION_LIMIT(limit)
    LIMITS_ASKED.append(limit)


BASELINE_THREADS = running_threads()
LEARNER = types.ModuleType("__main__")  # learner code runs as a notebook's __main__ (dataclasses look it up)
NAMESPACE = LEARNER.__dict__
NAMESPACE["get_ipython"] = Shell().get_ipython
NAMESPACE["__builtins__"] = builtins  # a module, as in a kernel (a dict by default in exec)


def display(*objects, **options) -> None:
    """IPython's display, which a kernel puts in the builtins: it shows nothing here (red team 19: a `display(...)`
    before an answer's def stopped the cell with a NameError in the grade alone)."""


builtins.display = display


PR_SET_DUMPABLE = 4  # linux/prctl.h
# Seconds between RLIMIT_CPU's soft limit and its hard one. Linux checks the hard limit first, so with the two equal a
# process out of CPU time gets SIGKILL, which reads as "your code kills processes"; below it, SIGXCPU, which says
# what happened. Code that ignores SIGXCPU still dies at the hard limit. (sandbox.Limits gives every sandbox the same.)
CPU_KILL_MARGIN_S = 2


def main() -> None:
    if os.environ.get("WORKER_FILTER"):
        forbid_new_processes(os.environ["WORKER_FILTER"])
    sys.meta_path.insert(0, _Blocker())
    sys.setrecursionlimit = watched_recursion_limit
    sys.modules["__main__"] = LEARNER
    os.chdir(os.environ.get("WORKER_HOME", "/tmp"))
    connection = Connection(socket.socket(fileno=int(os.environ["WORKER_FD"])))
    connection.wait_for(0, NAMESPACE)


def zygote(control: socket.socket) -> None:
    """Fork a fresh worker for each exercise of one submission from this process, which has numpy and this module
    loaded and never runs learner code (autograder.trust.remote.Zygote). One request at a time on ``control``:

      b"S", its CPU seconds (4 bytes) and two descriptors, the worker's socket and its stderr: fork a worker whose
            RLIMIT_CPU is those seconds; answer its pid (4 bytes).
      b"E": end the worker: kill every other process of this sandbox, remove what appeared in its writable folders
            (/tmp and /dev/shm), answer the worker's exit code (4 bytes, negative
            for a signal), so the next exercise finds nothing the last one left.

    Anything else ends the zygote. Only inside the sandbox's own PID namespace, where "every other process" is this
    submission's, as the child of its init.
    """
    if os.getppid() != 1:
        raise SystemExit("zygote mode needs the sandbox's PID namespace")
    # Not dumpable: a worker, which runs as the same user, cannot open this process's /proc/<pid>/mem (its forks
    # inherit the setting). The workers' filter forbids ptrace besides.
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0):
        raise SystemExit("the zygote could not make itself undumpable")
    preload()
    worker, fresh = None, _scratch()
    while True:
        message, fds, _, _ = socket.recv_fds(control, 5, 2)
        if message[:1] == b"S" and len(message) == 5 and len(fds) == 2 and worker is None:
            worker = os.fork()
            if worker == 0:
                control.close()
                _forked_worker(*fds, cpu_seconds=struct.unpack(">I", message[1:])[0])
            for fd in fds:
                os.close(fd)
            control.sendall(struct.pack(">i", worker))
        elif message == b"E" and not fds and worker is not None:
            code = _end(worker, fresh)
            worker = None
            control.sendall(struct.pack(">i", code))
        else:
            return


def preload() -> None:
    """Import PRELOADED as a worker would, set up as ON_IMPORT says."""
    blocker = _Blocker()
    sys.meta_path.insert(0, blocker)
    try:
        for name in PRELOADED:
            importlib.import_module(name)
    finally:
        sys.meta_path.remove(blocker)


def _forked_worker(connection_fd: int, stderr_fd: int, cpu_seconds: int) -> None:
    """A worker as if freshly started: its own session, stderr, folder, random state and CPU limit (``cpu_seconds``
    soft, so the worker ends by SIGXCPU, and CPU_KILL_MARGIN_S more hard, which learner code cannot raise). Never
    returns."""
    code = 1
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + CPU_KILL_MARGIN_S))
        os.setsid()
        os.dup2(stderr_fd, 2)
        os.close(stderr_fd)
        np.random.seed()  # a forked child would otherwise repeat the zygote's stream
        home = f"/tmp/worker-{os.getpid()}"
        os.mkdir(home)
        # matplotlib's settings and font cache per exercise too, as everything else it may write
        os.environ.update(WORKER_FD=str(connection_fd), WORKER_HOME=home, MPLCONFIGDIR=f"{home}/.matplotlib")
        main()
        code = 0
    except SystemExit as done:  # what the interpreter would exit with
        code = done.code if isinstance(done.code, int) else 0 if done.code is None else 1
    except BaseException:  # noqa: B036 -- as an uncaught exception ends a process: traceback, exit code 1
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def _end(worker: int, fresh: set[str]) -> int:
    """Kill every process of the sandbox but its init and this one, and remove from its writable folders what is
    not in ``fresh`` (what they held when the sandbox started); the worker's exit code."""
    me = os.getpid()
    for _ in range(100):  # a process may fork while the others are being killed: go round until none is left
        alive = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if pid not in (1, me)
                 and _state(pid) not in ("Z", "X", "")]
        if not alive:
            break
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    _, status = os.waitpid(worker, 0)
    for path in sorted(_scratch() - fresh):  # sorted: a folder before what it holds, which goes with it
        if os.path.isdir(path) and not os.path.islink(path):
            _readable(path)
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            try:
                os.unlink(path)
            except OSError:
                pass
    return os.waitstatus_to_exitcode(status)


def _readable(top: str) -> None:
    """Give the owner back every right on ``top`` and each folder below it (links not followed): learner code may
    make a folder it can write and enter but not list (mode 0o300; its filter refuses chmod, not mkdir's mode),
    which neither the walk nor rmtree could empty, and a later exercise would find what it holds by name. Only this
    process, without the filter, and only once every process of the exercise is gone."""
    pending = [top]
    while pending:  # not recursive: the folders may nest deeper than Python's recursion limit
        folder = pending.pop()
        try:
            os.chmod(folder, 0o700)  # a folder, not a link (seen so), and no process is left to swap it
            with os.scandir(folder) as entries:
                pending.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            continue


def _scratch() -> set[str]:
    """Every path in the sandbox's writable tmpfs folders, not descending into what is mounted on them (the
    worker's two files): the same set before and after a clean exercise."""
    visible = {}
    with open("/proc/self/mountinfo") as mounts:  # the last mount on a point is the one that shows
        for line in mounts:
            fields = line.split()
            kind = fields[fields.index("-") + 1]
            visible[fields[4]] = kind == "tmpfs" and "rw" in fields[5].split(",")
    found = set()
    for point in (point for point, writable in visible.items() if writable):
        try:
            device = os.stat(point).st_dev
        except OSError:
            continue
        for folder, dirs, files in os.walk(point):
            dirs[:] = [d for d in dirs if os.lstat(os.path.join(folder, d)).st_dev == device]
            found.update(os.path.join(folder, name) for name in dirs + files)
    return found


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


if __name__ == "__main__":
    if os.environ.get("WORKER_ZYGOTE"):
        zygote(socket.socket(fileno=int(os.environ["WORKER_FD"])))
    else:
        main()
