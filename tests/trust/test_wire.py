"""The wire codec (autograder.trust.wire) as both sides use it: plain data survives a frame in either direction, and
the trusted side's strict decoder refuses everything else. No sandbox, no process: the two sides' codecs meet here."""
import collections
import math
import socket

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from autograder.trust import remote, wire
from autograder.trust import worker as worker_script

# The worker loads its own copy of wire.py, from beside it, as in the sandbox.

WORKER_ERROR = worker_script.wire.ProtocolError
ENOUGH = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture
def connection():
    """The worker side's codec, on a socket nobody reads (encoding and decoding never touch it)."""
    here, there = socket.socketpair()
    yield worker_script.Connection(there)
    here.close()
    there.close()


def trusted() -> remote._Codec:
    return remote._Codec(None)  # no worker: plain data, handles and callbacks need none


def across(value, sender, receiver):
    """What ``receiver`` reads of ``value`` sent by ``sender`` through one frame."""
    frame = wire.pack({"reply": 1, "ok": sender.encode(value)})
    header, body = frame[:wire.HEADER.size], frame[wire.HEADER.size:]
    assert wire.length(header) == len(body)
    if isinstance(receiver, wire.StrictCodec):
        receiver.values = 0
    return receiver.decode(wire.unpack(body)["ok"])


# ------------------------------------------------------------------------------------------------ plain data

def same_number(a, b) -> bool:
    if isinstance(a, (float, np.floating)) and math.isnan(a):
        return math.isnan(b)
    return a == b and (not isinstance(a, (float, np.floating)) or math.copysign(1, a) == math.copysign(1, b))


def same(a, b) -> bool:
    """Equal, of the same type: arrays bit for bit with the same dtype, shape and writeable flag; NaN equals NaN."""
    if isinstance(a, np.generic):
        # 'q' and 'l' are one dtype here but two scalar classes; the wire carries the dtype
        return isinstance(b, np.generic) and a.dtype == b.dtype and a.dtype.str == b.dtype.str and same_number(a, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return (a.dtype == b.dtype and a.dtype.str == b.dtype.str and a.shape == b.shape
                and a.flags.writeable == b.flags.writeable and a.tobytes() == b.tobytes())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return len(a) == len(b) and all(same(ka, kb) and same(va, vb)
                                        for (ka, va), (kb, vb) in zip(a.items(), b.items()))
    if isinstance(a, slice):
        return same(a.start, b.start) and same(a.stop, b.stop) and same(a.step, b.step)
    if isinstance(a, float):
        return same_number(a, b)
    return a == b


def depth(value) -> int:
    if isinstance(value, (list, tuple)):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


DTYPES = [np.dtype(c).newbyteorder(order) for c in wire.ARRAY_DTYPES for order in "<>"]


@st.composite
def arrays(draw):
    array = draw(hnp.arrays(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0,
                                                                        max_side=4)))
    if array.ndim >= 2 and draw(st.booleans()):
        array = array.T  # not C-contiguous: sent in C order all the same
    array.flags.writeable = draw(st.booleans())
    return array


def scalars():
    dtypes = [np.dtype(c) for c in wire.SCALAR_DTYPES]
    return st.sampled_from(dtypes).flatmap(lambda dtype: hnp.from_dtype(dtype).map(dtype.type))


bounds = st.none() | st.integers()
leaves = (st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.floats() | scalars() | arrays()
          | st.builds(slice, bounds, bounds, bounds) | st.just(Ellipsis))
plain = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.lists(inner, max_size=3).map(tuple)
                     | st.dictionaries(st.text(max_size=4) | st.integers(), inner, max_size=3), max_leaves=12)


@ENOUGH
@given(plain)
def test_what_the_worker_sends_the_trusted_side_reads_as_it_was(value):
    assume(depth(value) < wire.DEPTH_LIMIT)  # deeper, the worker keeps it and sends a handle
    here, there = socket.socketpair()
    try:
        assert same(value, across(value, worker_script.Connection(there), trusted()))
    finally:
        here.close()
        there.close()


@ENOUGH
@given(plain)
def test_what_the_trusted_side_sends_the_worker_reads_as_it_was(value):
    here, there = socket.socketpair()
    try:
        assert same(value, across(value, trusted(), worker_script.Connection(there)))
    finally:
        here.close()
        there.close()


def test_the_edges_of_plain_data_cross_both_ways(connection):
    values = [0.0, -0.0, math.inf, -math.inf, math.nan, np.float16("nan"), np.float32("-inf"), np.bool_(True),
              np.uint64(2 ** 64 - 1), np.int8(-128), np.longlong(7), np.zeros(()), np.zeros((0, 3), ">i2"),
              np.ones(2, np.complex64), np.arange(6.0).reshape(2, 3).T, {1: "a", "1": "b"}, (), [], {},
              slice(None), slice(-1, None, -2), Ellipsis, "__nd__", {"__nd__": 1}, 10 ** 40]
    for value in values:
        assert same(value, across(value, connection, trusted())), value
        assert same(value, across(value, trusted(), connection)), value


def test_a_received_array_is_its_own_c_contiguous_copy(connection):
    view = np.arange(12.0).reshape(3, 4)[:, ::2]
    received = across(view, connection, trusted())
    assert received.flags.c_contiguous and received.flags.owndata and received.tolist() == view.tolist()


def test_a_transposed_array_keeps_its_fortran_layout_across(connection):
    """np.array(x) of a transposed x keeps its layout and reshape(-1) of that is a copy: a learner's flat-view trick
    that fails on a transposed view in one process must fail in the worker too (the parity harness found it pass)."""
    transposed = np.arange(6.0).reshape(2, 3).T
    for received in (across(transposed, connection, trusted()), across(transposed, trusted(), connection)):
        assert received.flags.f_contiguous and not received.flags.c_contiguous and received.flags.owndata
        assert received.tolist() == transposed.tolist()
        assert not np.shares_memory(np.array(received).reshape(-1), received)


# ---------------------------------------------------------------------------- what stays behind a handle

def test_a_learner_subclass_of_plain_data_crosses_as_the_data_it_holds(connection):
    """Red team 9: a correct answer returned as a float subclass, a namedtuple or an OrderedDict passed in the kernel
    and failed the grade as "wrong-type" (it reached the check as a handle). Its data crosses, read through the base
    class, so a subclass's own methods decide nothing."""
    class Slope(float):
        def __float__(self):
            return 0.0

    class Text(str):
        pass

    class Count(int):
        pass

    class Lying(dict):
        def items(self):
            return [("a", 0)]

        def __iter__(self):
            return iter(["forged"])

    class Rows(list):
        def __iter__(self):
            return iter([])

    Grads = collections.namedtuple("Grads", "dw db")
    sent = [Slope(2.5), Text("ab"), Count(3), Grads(1.0, np.ones(2)), collections.OrderedDict(b=1),
            collections.defaultdict(float, {"w": 2.0}), Lying(a=1, b=2), Rows([1, 2]), np.str_("s")]
    received = across(sent, connection, trusted())
    expected = [2.5, "ab", 3, (1.0, np.ones(2)), {"b": 1}, {"w": 2.0}, {"a": 1, "b": 2}, [1, 2], "s"]
    assert all(same(e, r) for e, r in zip(expected, received, strict=True)), received


def test_the_worker_keeps_what_is_not_plain_data_and_sends_handles(connection, monkeypatch):
    monkeypatch.setattr(remote, "_CLASSES", {})  # proxy classes are capped per process: other tests use them up

    class Module:
        pass

    class Sequential(Module, list):  # red team 9: behaviour beyond its list's, which a check uses
        pass

    class Memoized(dict):  # callable: the classic memoizing decorator
        def __call__(self, x):
            return x

    deep = []
    for _ in range(wire.DEPTH_LIMIT + 1):
        deep = [deep]
    codec = trusted()
    for value in (Sequential([1]), Memoized(a=1), 1j, np.complex128(1), {(1, 2): 3}, ValueError("x"), np.array([None]), print):
        received = across(value, connection, codec)
        assert isinstance(received, remote.Remote) and type(received).__name__ == type(value).__name__, value
        assert connection.decode(codec.encode(received)) is value  # handed back: the worker's own object
    innermost = across(deep, connection, codec)
    for _ in range(wire.DEPTH_LIMIT):
        (innermost,) = innermost
    assert isinstance(innermost, remote.Remote) and type(innermost).__name__ == "list"
    assert across(connection.objects[0], connection, codec) is across(connection.objects[0], connection, codec)


def test_the_trusted_side_sends_its_own_containers_exceptions_and_functions(connection):
    Point = collections.namedtuple("Point", "x y")
    nested = [[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]
    assert across(Point(1, 2), trusted(), connection) == (1, 2)
    assert across(collections.OrderedDict(a=1), trusted(), connection) == {"a": 1}
    assert across(nested, trusted(), connection) == nested
    assert across(ValueError, trusted(), connection) is ValueError
    error = across(ValueError("bad"), trusted(), connection)
    assert type(error) is ValueError and error.args == ("bad",)

    class Spy:
        __remote_methods__ = ("step",)

        def step(self):
            return "stepped"

    codec, f = trusted(), lambda x: x
    callback = across(f, codec, connection)
    assert type(callback).__name__ == "Callback" and across(callback, connection, codec) is f
    spy = across(Spy(), codec, connection)
    assert type(spy).__name__ == "TrustedObject" and type(spy.step).__name__ == "Callback"


@pytest.mark.parametrize("value", [object(), 1j, np.complex64(1), np.array([None]), {(1, 2): 3}, {True: 1}, b"x"])
def test_the_trusted_side_refuses_to_send_what_is_not_data_nor_a_function(value):
    with pytest.raises(TypeError):
        trusted().encode(value)


def test_an_array_argument_returned_is_the_callers_own_array(connection):
    sent, other = np.zeros(2), np.ones(2)
    connection.args = [connection.decode(trusted().encode(sent))]
    codec = trusted()
    codec.call_args = (3, sent)  # arrays are counted among the array arguments only
    received = across([connection.args[0], other], connection, codec)
    assert received[0] is sent and same(received[1], other)


# ------------------------------------------------------------------------------------ what the trusted side refuses

REF = {"type": "V", "callable": False, "container": False}
REFUSED = [
    {},                                                          # an object without a tag
    {"__pickle__": "gASV"},                                      # no such tag
    {"type": "V", "__ref__": 0, "callable": False, "container": False},  # the tag comes first
    {"__obj__": [], "call": None},                               # only the trusted side sends these
    {"__exc__": ["ValueError", "x"]},
    {"__exctype__": "ValueError"},
    math.inf,                                                    # what 1e999 parses as
    [1, {"__pickle__": 1}],                                      # anywhere inside
    {"__nd__": ["|O", [1], "AAAAAAAAAAA=", True, "C"]},               # an object array would unpickle on this side
    {"__nd__": ["<M8[s]", [1], "AAAAAAAAAAA=", True, "C"]},           # datetimes are not numbers
    {"__nd__": ["<f8,<f8", [1], "AAAAAAAAAAAAAAAAAAAAAA==", True, "C"]},  # nor records
    {"__nd__": ["f8", [1], "AAAAAAAAAAA=", True, "C"]},               # dtype texts are spelled as dtype.str
    {"__nd__": ["<f16", [1], "AAAAAAAAAAAAAAAAAAAAAA==", True, "C"]},
    {"__nd__": ["<f8", [2], "AAAAAAAAAAA=", True, "C"]},              # size does not match the shape
    {"__nd__": ["<f8", [1], "AAAAAAAAAAA", True, "C"]},               # not base64
    {"__nd__": ["<f8", [1], "AAAAAAAA!AA=", True, "C"]},
    {"__nd__": ["<f8", ["1"], "AAAAAAAAAAA=", True, "C"]},            # dimensions are ints
    {"__nd__": ["<f8", [1.0], "AAAAAAAAAAA=", True, "C"]},
    {"__nd__": ["<f8", [True], "AAAAAAAAAAA=", True, "C"]},
    {"__nd__": ["<f8", [-1], "", True, "C"]},
    {"__nd__": ["<f8", [0, 2 ** 70], "", True, "C"]},                 # empty, but past what numpy indexes
    {"__nd__": ["<f8", [1] * (wire.MAX_DIMS + 1), "AAAAAAAAAAA=", True, "C"]},
    {"__nd__": ["<f8", [1], "AAAAAAAAAAA=", 1, "C"]},                 # writeable is a bool
    {"__nd__": ["<f8", [1], "AAAAAAAAAAA=", True]},              # five fields
    {"__nd__": ["<f8", [1], "AAAAAAAAAAA=", True, "K"]},         # the layout is C or F
    {"__nd__": "abcd"},
    {"__nd__": ["<f8", [1], "AAAAAAAAAAA=", True, "C"], "more": 1},   # a plain tag's object has one key
    {"__np__": ["<f8", "1e308*10"]},                             # only nan/inf spelled as text
    {"__np__": ["<c16", 1.0]},                                   # numbers stay real
    {"__np__": ["|i1", 300]},                                    # out of range
    {"__np__": ["<i8", 1.5]},                                    # the item's kind is the dtype's
    {"__np__": ["|b1", 1]},
    {"__np__": ["<f8", 1]},
    {"__np__": ["<i8", "nan"]},
    {"__np__": ["<f8", [1.0, 2.0]]},                             # np.float64([1, 2]) would be an array
    {"__np__": ["<f8", None]},                                   # np.float64(None) would be nan
    {"__np__": ["<f8"]},
    {"__float__": "1e999"},
    {"__float__": 1.0},
    {"__float__": ["nan"]},
    {"__tuple__": {"a": 1}},
    {"__tuple__": "ab"},
    {"__dict__": [[["a"], 1]]},                                  # keys must be plain
    {"__dict__": [[True, 1]]},
    {"__dict__": [[1.5, 1]]},
    {"__dict__": ["ab"]},                                        # pairs are lists of two
    {"__dict__": [["a", 1, 2]]},
    {"__dict__": {"a": 1}},
    {"__slice__": [0.5, None, None]},                            # slice bounds are ints or null
    {"__slice__": ["a", None, None]},
    {"__slice__": [{"__np__": ["<i8", 1]}, None, None]},
    {"__slice__": [True, None, None]},
    {"__slice__": [1, 2]},
    {"__ellipsis__": False},
    {"__ref__": "0", **REF},                                     # handles are non-negative ints
    {"__ref__": -1, **REF},
    {"__ref__": 0.0, **REF},
    {"__ref__": 0},                                              # with their three fields
    {"__ref__": 0, **REF, "more": 1},
    {"__ref__": 0, **REF, "type": ["V"]},
    {"__ref__": 0, **REF, "callable": 1},
    {"__cb__": 0},                                               # no function of ours has that number
    {"__cb__": -1},
    {"__cb__": "0"},
    {"__arg__": 0},                                              # no array argument either
    {"__arg__": -1},
    {"__arg__": None},
    (1, 2),                                                      # JSON has no tuples, sets or bytes
]


@pytest.mark.parametrize("value", REFUSED)
def test_the_trusted_side_refuses_anything_but_plain_data_and_its_handles(value):
    for codec in (trusted(), wire.StrictCodec()):
        with pytest.raises(wire.ProtocolError):
            codec.decode(value)


def test_the_trusted_side_counts_the_values_of_a_frame(monkeypatch):
    monkeypatch.setattr(wire, "VALUE_LIMIT", 100)
    codec = trusted()
    assert codec.decode([0] * 99) == [0] * 99  # the list and its 99 items
    with pytest.raises(wire.ProtocolError, match="too many values"):
        codec.decode([0])  # the same frame: the count goes on
    codec.values = 0  # a new frame
    assert codec.decode(trusted().encode(np.zeros(1000))).shape == (1000,)  # an array is one value
    codec.values = 0
    with pytest.raises(wire.ProtocolError, match="too many values"):
        codec.decode({"__dict__": [[str(i), i] for i in range(100)]})


def test_frames_are_bounded_json_objects_without_nan():
    assert wire.length(wire.HEADER.pack(wire.FRAME_LIMIT)) == wire.FRAME_LIMIT
    with pytest.raises(wire.ProtocolError, match="larger than 16 MiB"):
        wire.length(wire.HEADER.pack(wire.FRAME_LIMIT + 1))
    assert wire.length(wire.HEADER.pack(2 ** 32 - 1), limit=None) == 2 ** 32 - 1  # the worker reads what we send
    for data in (b"[1]", b"1", b'"a"', b"{", b"", b'{"a": NaN}', b'{"a": -Infinity}', b"\xff\xfe\xfd",
                 b"[" * 100_000 + b"]" * 100_000):
        with pytest.raises(wire.ProtocolError):
            wire.unpack(data)
    with pytest.raises(ValueError):
        wire.pack({"ok": math.nan})  # nothing non-finite is written bare
    assert wire.unpack(wire.pack({"ok": [1.5, "é"]})[wire.HEADER.size:]) == {"ok": [1.5, "é"]}


def test_the_worker_decodes_plain_data_with_the_same_checks(connection):
    for value in ({"__nd__": ["|O", [1], "AAAAAAAAAAA=", True, "C"]}, {"__np__": ["|i1", 300]}, {"__pickle__": 1},
                  {"__exc__": ["SystemExit", "x"]}, {"__exctype__": "print"}, {"__dict__": [[["a"], 1]]}):
        with pytest.raises(WORKER_ERROR):
            connection.decode(value)
    assert connection.decode({"__slice__": [{"__np__": ["<i8", 1]}, None, None]}) == slice(1, None)  # any bound
