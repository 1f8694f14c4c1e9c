"""The wire between the trusted side and the worker: its frames, its value encoding, and the protocol over them.

Both ends use this file: the trusted side imports it (``autograder.trust.remote``), and the worker
(``autograder.trust.worker``) loads it from its own folder -- inside the sandbox that is ``/grader``, where both
files are bound read-only. So it imports only the standard library and numpy, and holds nothing a learner should
not read.

Frames
    A 4-byte big-endian unsigned length n, then n bytes of JSON (as ``json.dumps`` writes it: ASCII) holding one
    object, the message. Neither side writes NaN or Infinity literals, and both refuse them, as they refuse a number
    too large for a float (``1e999``): non-finite floats travel only tagged. The trusted side refuses a frame longer
    than FRAME_LIMIT (16 MiB) before reading it, and a frame holding more than VALUE_LIMIT (1,000,000) values; the
    worker reads the trusted side's frames whatever their size. The zygote's control channel is not framed
    (worker.py, ``zygote``).

Messages
    The trusted side numbers its requests 1, 2, 3, ... for each worker; each is answered by a reply with its id.
    ``target`` is a handle, ``args`` a list of values and ``kwargs`` a dict value; ``name`` and ``code`` are strings.

    {"id": n, "op": "exec", "code", "name"}       run a learner cell as ``name``               ok: null
    {"id": n, "op": "given", "code", "name"}      run a given cell; importing a blocked library
                                                  binds a stand-in that says why, a display
                                                  library (matplotlib, tqdm) one that imports
                                                  it on first use                              ok: null
    {"id": n, "op": "eval", "code"}               an expression over the learner's names       ok: value
    {"id": n, "op": "getattr", "target", "name"}  target.name                                  ok: value
    {"id": n, "op": "setattr", "target", "name", "args": [value]}                              ok: null
    {"id": n, "op": "method", "target", "name", "args"}   target.name(*args)                   ok: value
    {"id": n, "op": "call", "target", "args", "kwargs", "write_back": bool}
                                                  target(*args, **kwargs)                      ok: {"result": value,
                                                                                               "arguments": [...]}
        Arguments are copies in the worker. Without write_back, "arguments" is []. With it, it holds one entry per
        argument: the array as the call left it if the call changed it, else null; and the result (or any value in
        it) that *is* an array argument is {"__arg__": i}.
    {"id": n, "op": "operator", "name", "args"}   OPERATORS[name](*args): add sub mul truediv pow matmul neg getitem
                                                  setitem lt le gt ge, and the builtins len float int bool
                                                  isinstance issubclass type                   ok: value
    {"id": n, "op": "list", "target"}             list(target)                                 ok: list
    {"id": n, "op": "repeat", "target", "name", "times": int}
                                                  [t.name(), t.name().name(), ...], times calls ok: list
    {"id": n, "op": "install", "name", "code"}    reference code a check needs beside learner
                                                  objects, run as module ``name`` (never an
                                                  answer)                                      ok: the module's handle

    Replies, from the worker:
      {"reply": n, "ok": value}
      {"reply": n, "error": {"type": str, "message": str, "builtin": bool, "where": str, "raised_in": str}}
          what the learner's code raised: the type's name (80 characters at most), its message (300), whether it is
          the builtin of that name (an ImportError subclass counts as ImportError), the exception's last line
          when it is not builtin (300), and the function it was raised in (80). On the trusted side a builtin type
          in MAPPED_ERRORS is raised as itself, any other type as LearnerError naming it.
      {"reply": n, "stopped": code}: the answer cannot count; the code is a key of remote.STOP_REASONS ("threads":
      learner code left a thread or process running), whose sentence the trusted side gives as the reason.
      Any reply may also carry "raised_recursion_limit": int, the highest recursion limit above the worker's own
      that learner code asked for (sys.setrecursionlimit) while the request ran: the checks fail that, as they do
      in a learner's kernel, where they watch the same call.

    The trusted side raises Stopped for "stopped" (any other code breaks the protocol), quotes at most 300
    characters of an error's message, and takes a type name that is not an identifier for "Exception".

    Callbacks: the worker calls a function of the trusted side (a probe's f(x)) with a request of its own, its id
    negative (and distinct from the others):
      {"id": -k, "op": "callback", "target": int, "args": [values], "kwargs": dict value}
    answered by {"reply": -k, "ok": value} or {"reply": -k, "error": {"type", "message", "builtin": true}} (a message of 500
    characters at most), the type
    one of MAPPED_ERRORS (anything else the trusted function raised is "RuntimeError"), raised in the worker as that
    type. While waiting for a reply each side serves the other's requests, to any depth: the worker every request,
    the trusted side callbacks only, and any other frame is refused. All requests nested in one share its deadline.

Values
    Plain data, sent and decoded alike in both directions (:class:`Codec`):

      null, true, false, int, str           themselves (exactly these types: a subclass is not plain data)
      float                                 a JSON number when finite, else {"__float__": "nan" | "inf" | "-inf"}
      {"__nd__": [dtype, shape, data, writeable, order]}
                                            a numpy array: dtype one of ARRAY_TYPES (a type of ARRAY_DTYPES as its
                                            ``dtype.str``: byte order, kind and size, e.g. "<f8", "|b1", ">i4"),
                                            shape a list of at most MAX_DIMS non-negative ints, data the base64
                                            (standard, padded) of its bytes in ``order``, exactly
                                            itemsize * prod(shape) of them, writeable a bool, order "F" for an array
                                            laid out in Fortran order only (a transposed view: code that copies it
                                            with np.array keeps that layout, and reshape(-1) of it is a copy, as in
                                            one process) and "C" for any other. Decoded as a new array that owns its
                                            data, in that layout; its dtype is equal to the one sent, though not
                                            always of the same scalar class (np.longlong is "<i8" like np.int64, and
                                            is read as np.int64).
      {"__np__": [dtype, item]}             a numpy scalar of SCALAR_TYPES (no complex): item a bool for "|b1", an
                                            int in range for integers, a float or "nan" | "inf" | "-inf" for floats
      [value, ...]                          a list
      {"__tuple__": [value, ...]}           a tuple
      {"__dict__": [[key, value], ...]}     a dict whose keys are str or int, in its order
      {"__slice__": [start, stop, step]}    a slice, each bound a value
      {"__ellipsis__": true}                Ellipsis

    A tagged value is a JSON object whose first key is its tag; a plain tag's object has no other key. Then, in one
    direction or both:

      {"__ref__": handle, "type": str, "callable": bool, "container": bool}
                                            worker -> trusted: an object that stays in the worker, where it is kept
                                            alive. Handles are non-negative ints, the same for the same object. The
                                            trusted side makes it a Remote (the same one for the same handle) of a
                                            class named after ``type``, callable and indexable as the two flags say.
      {"__ref__": handle}                   trusted -> worker: a Remote handed back, meaning the worker's object.
      {"__cb__": k}                         trusted -> worker: the trusted side's k-th function (from 0), which the
                                            worker calls with callback requests; worker -> trusted: one handed back.
      {"__obj__": [[name, {"__cb__": k}], ...], "call": {"__cb__": k} | null}
                                            trusted -> worker: an object of the checks (a spy optimizer) whose class
                                            lists its methods in ``__remote_methods__``; in the worker an object with
                                            those methods, callable when "call" is not null.
      {"__exctype__": name}, {"__exc__": [name, message]}
                                            trusted -> worker: an exception type of MAPPED_ERRORS, or an instance of
                                            one, made from its message.
      {"__arg__": i}                        worker -> trusted, in a write_back call's answer: the caller's own i-th
                                            array argument (counting arrays only), not a copy.

    What each side sends as what:
      The worker sends plain data as plain data when its lists, tuples and dicts are exactly those types, nested at
      most DEPTH_LIMIT deep, with str or int keys. Anything else stays in the worker as a handle: a learner's
      subclass of list, a deeper nest, a complex number, an exception, a function.
      The trusted side also sends subclasses of list, tuple and dict (a namedtuple as its tuple) at any depth; a
      Remote as its handle; mapped exceptions and their types; an object with ``__remote_methods__`` as __obj__;
      any other callable as __cb__. Anything else is a TypeError before a byte is sent.

What each side refuses
    The trusted side decodes strictly (:class:`StrictCodec`): nothing the worker sends can run code there or make
    anything but the plain types above, a Remote, or one of its own functions and arrays. It raises ProtocolError,
    and kills the worker, for a frame longer than FRAME_LIMIT or holding more than VALUE_LIMIT values (arrays count
    one each); a frame that is not JSON, or not an object, or holds NaN or Infinity; a JSON number that is not a
    finite float; anything but null, bool, number, string, list or a tagged object where a value is expected (an
    empty object too); an unknown tag, or one only the trusted side sends (__obj__, __exc__, __exctype__); a plain
    tag's object with other keys; a field of the wrong type or length: every check in this file (dtype text
    outside the allowlist, an object or datetime array, a bad shape, base64 or byte count, a scalar item of the
    wrong kind or out of range, float text other than nan/inf/-inf, a dict key that is not str or int, a slice
    bound that is not an int or null, an Ellipsis not ``true``); a __ref__ without exactly its four fields, of
    their types, or with a negative handle; a __cb__ or __arg__ with other keys or naming no function or array
    argument of its own; a reply's "error" that is not an object; a frame that is neither the reply awaited nor a
    callback request.
    The worker applies the same checks to plain data, without the limits, and a slice there may be bounded by any
    value (a numpy int); what it cannot decode (a handle it never gave) is an error answered like any other.
"""
from __future__ import annotations

import base64
import binascii
import getopt
import json
import math
import struct

import numpy as np

# Answers are numbers and modest arrays; a bigger frame is an attack on the trusted process's memory (JSON decoding
# costs ~50 bytes per element, ~70 per empty list), so both the frame and the number of values in it are capped (the
# trusted side counts a frame's brackets before it parses it).
FRAME_LIMIT = 16 * 1024 * 1024
VALUE_LIMIT = 1_000_000
DEPTH_LIMIT = 20  # lists, tuples and dicts nested deeper than this stay in the worker, as handles
MAX_DIMS = 32
HEADER = struct.Struct(">I")
SCALAR_DTYPES = "?bBhHiIlLqQefd"  # bool, signed and unsigned integers, float16/32/64: the kinds a gradient can have
ARRAY_DTYPES = SCALAR_DTYPES + "FD"  # arrays may also be complex (a check hands one over to be refused)
# The dtype texts that decode, in either byte order: a dtype is never parsed from anything else the worker sends.
SCALAR_TYPES = {np.dtype(c).newbyteorder(order).str for c in SCALAR_DTYPES for order in "<>"}
ARRAY_TYPES = {np.dtype(c).newbyteorder(order).str for c in ARRAY_DTYPES for order in "<>"}
# Learner exceptions that keep their type on the trusted side (checks tell them apart), and the exceptions the
# trusted side sends: only these classes are ever instantiated from what the other side says.
MAPPED_ERRORS = {cls.__name__: cls for cls in (
    ArithmeticError, AssertionError, AttributeError, FloatingPointError, ImportError, IndexError, KeyError,
    LookupError, MemoryError, ModuleNotFoundError, NameError, NotImplementedError, OverflowError, RecursionError,
    RuntimeError, StopIteration, TypeError, UnboundLocalError, ValueError, ZeroDivisionError)}
EXCEPTION_TAGS = ("__exctype__", "__exc__")
PLAIN_TAGS = ("__nd__", "__np__", "__float__", "__tuple__", "__dict__", "__slice__", "__ellipsis__")
FLOAT_TEXTS = ("nan", "inf", "-inf")


# IPython's magics whose code the kernel runs as Python in the notebook's namespace, which both sides read so (the
# trusted side keeps a given cell's definitions from them, the worker runs them); %%timeit runs its body in a
# function's scope of its own (its assignments do not stay). Every other magic (%%writefile, %%script, %%html, %run,
# ...) hands its text to something else, so the worker runs nothing of it, as the kernel runs no Python of it.
LINE_MAGICS_IN_NAMESPACE = ("time", "prun")  # %prun runs its line as %%prun does (red team 16)
FORGETTING_MAGICS = ("reset", "reset_selective", "xdel")  # they unbind the notebook's names: the worker does too
CELL_MAGICS_IN_NAMESPACE = ("time", "capture", "prun")
CELL_MAGICS_IN_SCOPE = ("timeit",)
CAPTURE_FLAGS = ("--no-stderr", "--no-stdout", "--no-display")
# The options IPython's %%prun and %%timeit take (getopt strings, from IPython.core.magics.execution, which parses
# them with Magics.parse_options rather than a magic_arguments parser): an option outside them is a UsageError, and
# nothing of the cell runs (red team 12: ``%%prun -Z`` over a def). %%timeit's counts must be whole numbers
# (whole_number).
GETOPT_MAGICS = {"prun": "D:l:rs:T:q", "timeit": "n:r:tcp:qov:"}
WHOLE_NUMBER_OPTIONS = {"timeit": "-n -r -p"}


def line_magic_code(magic: str, line: str) -> tuple[str, str]:
    """The code IPython's ``%time`` or ``%prun`` runs of its ``line``, and the option of it that changes how the code
    runs (``RUN_OPTIONS``, or ""), from a line computed as the cell runs (the trusted side parses a constant line with
    IPython's own parser): for %time the words other than its one option, ``--no-raise-error`` (argparse takes it,
    or any abbreviation of it, anywhere before a ``--``), for %prun those after its getopt options, joined by single
    spaces as IPython joins them.

    Raises:
        ValueError: an option %prun does not take."""
    words = line.split()
    if magic == "prun":
        try:
            options, rest = getopt.getopt(words, GETOPT_MAGICS["prun"])
        except getopt.GetoptError as error:
            raise ValueError(f"%prun: {error}") from None
        return " ".join(rest), run_option(magic, {o for o, _ in options})
    end = words.index("--") if "--" in words else len(words)
    flags = {w for w in words[:end] if len(w) > 2 and RUN_OPTIONS["time"].startswith(w)}
    code = [w for i, w in enumerate(words) if not (i < end and w in flags)]
    return " ".join(code), run_option(magic, flags and {RUN_OPTIONS["time"]})


# The option of %time and of %prun that changes what running their code does: %time --no-raise-error shows an
# Exception and goes on (red team 18), %prun -r returns the profile's statistics (pstats.Stats).
RUN_OPTIONS = {"time": "--no-raise-error", "prun": "-r"}


def run_option(magic: str, options) -> str:
    """``RUN_OPTIONS[magic]`` when ``options`` (the magic's parsed options) hold it, else ""."""
    return RUN_OPTIONS[magic] if RUN_OPTIONS[magic] in options else ""


# The getopt strings of IPython's magics that unbind names (IPython.core.magics.namespace).
FORGETTING_OPTIONS = {"reset": ("sf", ["aggressive"]), "reset_selective": ("f", []), "xdel": ("n", [])}


def timeit_line(line: str) -> tuple[dict, str]:
    """%timeit's options and the rest of its line, split at whitespace for getopt. The trusted side parses a
    constant line with IPython's own parser (``verdicts``); this reads a line computed as the cell runs.

    Raises:
        ValueError: an option %timeit does not take."""
    try:
        options, rest = getopt.getopt(line.split(), GETOPT_MAGICS["timeit"])
    except getopt.GetoptError as error:
        raise ValueError(f"%timeit: {error}") from None
    return {o[1:]: value for o, value in options}, " ".join(rest)


def forgetting_line(magic: str, line: str) -> dict:
    """What %reset, %reset_selective or %xdel is asked, as ``Shell.autograder_forget`` takes it (``{"refused":
    reason}`` for an option the magic does not take), from a line split at whitespace; the trusted side gives the same
    from IPython's own parser for a constant line."""
    short, long = FORGETTING_OPTIONS[magic]
    try:
        options, rest = getopt.getopt(line.split(), short, long)
    except getopt.GetoptError as error:
        return {"refused": f"%{magic}: {error}"}
    return forgetting(magic, {o.lstrip("-") for o, _ in options}, rest)


def forgetting(magic: str, flags: set, rest) -> dict:
    """The parsed request of a forgetting magic: its flags and the words (or text) after them."""
    if magic == "reset":
        return {"soft": "s" in flags, "targets": list(rest)}
    text = rest if isinstance(rest, str) else " ".join(rest)
    return {"regex": text} if magic == "reset_selective" else {"name": text, "by_name": "n" in flags}


def whole_number(text) -> bool:
    """Whether IPython's ``int(...)`` of a count takes ``text`` (``1_0``, ``+1`` and ``-1`` too: red team 13)."""
    try:
        int(text)
        return True
    except (TypeError, ValueError):
        return False


def runs_its_code(magic: str, line: str) -> bool:
    """Whether the worker runs the code of cell magic ``magic`` with ``line`` after its name, as IPython would:
    ``%%time`` takes nothing there, ``%%capture`` its flags and at most one name (anything else is a UsageError, and
    nothing of the cell runs: red team 10's ``%%time x = 1`` and ``%%capture a b``). The worker has no IPython, so
    this is stricter than IPython's parser; the trusted side decides with that parser and hands the worker a cell's
    code itself when IPython runs it (autograder.trust.verdicts._ipython_runs), so only what IPython refuses, or an
    explicit ``run_cell_magic`` call, reaches this."""
    words = line.split()
    if magic == "time":
        return not words
    if magic == "capture":
        names = [word for word in words if word not in CAPTURE_FLAGS]
        return len(names) <= 1 and all(name.isidentifier() for name in names)
    if magic in GETOPT_MAGICS:
        try:
            options, _ = getopt.getopt(words, GETOPT_MAGICS[magic])
        except getopt.GetoptError:
            return False
        counts = WHOLE_NUMBER_OPTIONS.get(magic, "").split()
        return all(whole_number(value) for option, value in options if option in counts)
    return True


class ProtocolError(Exception):
    """What was received is not a message of this protocol."""


# -- frames ------------------------------------------------------------------------------------------------------
def pack(message: dict) -> bytes:
    """One frame holding ``message``. Raises ValueError for a non-finite float, TypeError for a non-JSON value."""
    data = json.dumps(message, allow_nan=False).encode()
    return HEADER.pack(len(data)) + data


def length(header: bytes, limit: int | None = FRAME_LIMIT) -> int:
    """The length of the JSON that follows a frame's 4-byte ``header``.

    Raises:
        ProtocolError: the length is more than ``limit`` (None: no limit).
    """
    (size,) = HEADER.unpack(header)
    if limit is not None and size > limit:
        raise ProtocolError(f"an answer larger than {limit >> 20} MiB")
    return size


def unpack(data: bytes) -> dict:
    """The message a frame's JSON holds. Raises ProtocolError for anything but a JSON object without NaN/Infinity."""
    try:
        message = json.loads(data, parse_constant=_no_constant)
    except (ValueError, RecursionError) as error:  # not UTF-8, not JSON, nested past the parser's stack
        raise ProtocolError(f"not JSON: {str(error)[:80]}") from None
    if type(message) is not dict:
        raise ProtocolError("a message is a JSON object")
    return message


def _no_constant(name: str):
    raise ProtocolError(f"bare {name} in an answer")


# -- values ------------------------------------------------------------------------------------------------------
class Codec:
    """Values to JSON-ready data and back: plain data here, what only one side sends through the hooks.

    ``encode`` turns plain data into JSON-ready data and hands anything else to :meth:`encode_other`; ``decode``
    reads plain data (with every check of this file) and hands any other tag to :meth:`decode_other`. By default
    both refuse: a side overrides them for its handles and callbacks, :meth:`container` for the containers it sends
    as plain data, and :meth:`decode_slice` for the bounds it accepts.
    """

    def encode(self, value, depth: int = 0):
        """JSON-ready data for ``value``; ``depth``: how many containers hold it. Raises what encode_other does."""
        kind = type(value)
        if value is None or kind in (bool, int, str):
            return value
        if kind is float:
            return value if math.isfinite(value) else {"__float__": repr(value)}
        if isinstance(value, np.ndarray) and value.dtype.char in ARRAY_DTYPES:
            order = "F" if value.flags.f_contiguous and not value.flags.c_contiguous else "C"
            return {"__nd__": [value.dtype.str, list(value.shape), base64.b64encode(value.tobytes(order)).decode(),
                               bool(value.flags.writeable), order]}
        if isinstance(value, np.generic) and value.dtype.char in SCALAR_DTYPES:
            item = value.item()
            return {"__np__": [value.dtype.str, item if not isinstance(item, float) or math.isfinite(item) else repr(item)]}
        if kind is slice:
            return {"__slice__": [self.encode(bound, depth + 1) for bound in (value.start, value.stop, value.step)]}
        if value is Ellipsis:
            return {"__ellipsis__": True}
        for base in (int, float, str):  # a subclass (bool is int's, and handled above) as the value it holds
            if isinstance(value, base) and only_data(value, base):
                return self.encode(getattr(base, f"__{base.__name__}__")(value), depth)
        container = self.container(value, depth)
        # Read through the base class: a subclass's own __iter__ or items() does not decide what is sent.
        if container is list:
            return [self.encode(v, depth + 1) for v in list.__iter__(value)]
        if container is tuple:
            return {"__tuple__": [self.encode(v, depth + 1) for v in tuple.__iter__(value)]}
        if container is dict:
            return {"__dict__": [[k, self.encode(v, depth + 1)] for k, v in dict.items(value)]}
        return self.encode_other(value, depth)

    def container(self, value, depth: int) -> type | None:
        """list, tuple or dict when ``value`` is sent as that container of plain data, else None: those types and
        their subclasses (a namedtuple is its tuple, an OrderedDict or defaultdict its dict: a check reads an
        answer's data, as it reads an ndarray subclass's array), at most DEPTH_LIMIT deep, dict keys str or int."""
        for kind in (list, tuple, dict):
            if isinstance(value, kind) and only_data(value, kind):
                return kind if depth < DEPTH_LIMIT and (kind is not dict or plain_keys(value)) else None
        return None

    def encode_other(self, value, depth: int):
        """What to send for a value that is not plain data. Raises TypeError (a side that sends more overrides it)."""
        raise TypeError(f"cannot send a {type(value).__name__} over the wire")

    def decode(self, value):
        """The value JSON-ready data stands for. Raises ProtocolError (or what decode_other raises)."""
        kind = type(value)
        if value is None or kind in (bool, int, str):
            return value
        if kind is float:
            if not math.isfinite(value):  # 1e999 parses as inf
                raise ProtocolError("a non-finite number")
            return value
        if kind is list:
            return [self.decode(v) for v in value]
        if kind is not dict or not value:
            raise ProtocolError(f"unexpected {kind.__name__}")
        tag = next(iter(value))
        if tag not in PLAIN_TAGS:
            return self.decode_other(tag, value)
        if len(value) != 1:
            raise ProtocolError(f"{tag} with other keys")
        body = value[tag]
        if tag == "__nd__":
            return decode_array(body)
        if tag == "__np__":
            return decode_scalar(body)
        if tag == "__float__":
            return decode_float(body)
        if tag == "__tuple__":
            return tuple(self.decode(v) for v in fields(body))
        if tag == "__dict__":
            return {_key(k): self.decode(v) for k, v in (fields(pair, 2) for pair in fields(body))}
        if tag == "__slice__":
            return self.decode_slice(*(self.decode(bound) for bound in fields(body, 3)))
        if body is not True:
            raise ProtocolError("__ellipsis__ is true")
        return Ellipsis

    def decode_slice(self, start, stop, step) -> slice:
        """A slice of decoded bounds (a side that refuses some bounds overrides it)."""
        return slice(start, stop, step)

    def decode_other(self, tag: str, value: dict):
        """What a value tagged other than plain data stands for. Raises ProtocolError (a side overrides it)."""
        raise ProtocolError(f"unknown tag {tag[:20]!r}")


class StrictCodec(Codec):
    """The trusted side's decoding of what the worker sends: at most VALUE_LIMIT values in one frame, and slice
    bounds are ints or None. Set ``values`` to 0 when a frame arrives."""

    def __init__(self):
        self.values = 0

    def decode(self, value):
        self.values += 1
        if self.values > VALUE_LIMIT:
            raise ProtocolError("too many values in one answer")
        return super().decode(value)

    def decode_slice(self, start, stop, step) -> slice:
        if not all(bound is None or type(bound) is int for bound in (start, stop, step)):
            raise ProtocolError("slice bounds")
        return slice(start, stop, step)


def decode_array(body) -> np.ndarray:
    """The array of an ``__nd__`` tag's body: a new array that owns its data, in the layout sent (C or Fortran
    order). Raises ProtocolError."""
    dtype, shape, data, writeable, order = fields(body, 5)
    dtype = _dtype(dtype, ARRAY_TYPES)
    shape = fields(shape)
    if len(shape) > MAX_DIMS or not all(type(n) is int and n >= 0 for n in shape):
        raise ProtocolError("array shape")
    if type(data) is not str or type(writeable) is not bool or order not in ("C", "F"):
        raise ProtocolError("array data")
    try:
        raw = base64.b64decode(data, validate=True)
    except binascii.Error:
        raise ProtocolError("array data is not base64") from None
    if len(raw) != dtype.itemsize * math.prod(shape):  # exact: no int64 product to wrap round
        raise ProtocolError("array size")
    try:
        array = np.frombuffer(raw, dtype=dtype).reshape(shape, order=order).copy(order=order)
    except (ValueError, OverflowError):  # an empty array with a dimension past what numpy indexes
        raise ProtocolError("array shape") from None
    array.flags.writeable = writeable
    return array


def decode_scalar(body) -> np.generic:
    """The numpy scalar of an ``__np__`` tag's body. Raises ProtocolError."""
    dtype, item = fields(body, 2)
    dtype = _dtype(dtype, SCALAR_TYPES)
    expected = bool if dtype.kind == "b" else int if dtype.kind in "iu" else float
    if dtype.kind == "f" and type(item) is str:
        item = decode_float(item)
    if type(item) is not expected:
        raise ProtocolError(f"a {dtype} scalar holding a {type(item).__name__}")
    try:
        return dtype.type(item)
    except OverflowError:  # an int out of the type's range
        raise ProtocolError(f"{item} out of {dtype}'s range") from None


def decode_float(text) -> float:
    """The non-finite float a ``__float__`` tag spells. Raises ProtocolError for any text but nan, inf, -inf."""
    if type(text) is not str or text not in FLOAT_TEXTS:
        raise ProtocolError(f"not a float: {str(text)[:20]!r}")
    return float(text)


def encode_exception(value) -> dict | None:
    """The tag of a type of MAPPED_ERRORS or an instance of one (its message kept), None for anything else."""
    if isinstance(value, type) and MAPPED_ERRORS.get(value.__name__) is value:
        return {"__exctype__": value.__name__}
    if isinstance(value, BaseException) and MAPPED_ERRORS.get(type(value).__name__) is type(value):
        return {"__exc__": [type(value).__name__, str(value)]}
    return None


def decode_exception(tag: str, body):
    """The exception type an ``__exctype__`` tag names, or the exception an ``__exc__`` tag describes.

    Raises:
        ProtocolError: a name outside MAPPED_ERRORS, or a body of the wrong shape.
    """
    name, message = (body, None) if tag == "__exctype__" else fields(body, 2)
    if type(name) is not str or name not in MAPPED_ERRORS or (message is not None and type(message) is not str):
        raise ProtocolError(f"not an exception of the protocol: {str(name)[:20]!r}")
    return MAPPED_ERRORS[name] if message is None else MAPPED_ERRORS[name](message)


def fields(value, count: int | None = None) -> list:
    """``value``, which must be a JSON list (of ``count`` items, when given). Raises ProtocolError."""
    if type(value) is not list or (count is not None and len(value) != count):
        raise ProtocolError("expected a list" + (f" of {count}" if count is not None else ""))
    return value


def _key(value) -> str | int:
    """A dict key received: a str or an int. Raises ProtocolError."""
    if type(value) not in (str, int):
        raise ProtocolError("dict key")
    return value


def only_data(value, base: type) -> bool:
    """Whether ``value``, an instance of the plain type ``base`` or of a subclass, is data alone: not callable, and of
    no class besides ``base``'s own kind (a namedtuple, an OrderedDict, a float subclass are data; a memoizing
    ``dict`` subclass with ``__call__``, or a ``Sequential(Module, list)``, has behaviour a check uses, and stays an
    object: red team 9). numpy's scalars (np.str_) are data too."""
    return type(value) is base or not callable(value) and all(issubclass(c, (base, np.generic)) for c in type(value).__mro__[:-1])


def plain_keys(value: dict) -> bool:
    """Whether every key of ``value`` is a str or an int, as plain data's keys are."""
    return all(type(k) in (str, int) for k in dict.keys(value))


def _dtype(text, allowed: set[str]) -> np.dtype:
    if type(text) is not str or text not in allowed:
        raise ProtocolError(f"dtype {str(text)[:20]!r} is not a number type")
    return np.dtype(text)

