"""The relay between nbgrader and its kernel (autograder.trust.relay), against a stand-in kernel of plain sockets:
what it forwards, where, and when it ends."""
import subprocess
import sys
import time

import pytest
import zmq

from autograder.course.preprocessors import KernelWatch
from autograder.trust import relay

PORTS = {f"{name}_port": port for port, name in enumerate(relay.CHANNELS, start=1)}


@pytest.fixture
def kernel(tmp_path):
    """A stand-in kernel's sockets (ROUTER for the request channels, XPUB for iopub), the relay started between them
    and a front folder, and the front's prefix."""
    context = zmq.Context()
    back, front = str(tmp_path / "kernel"), str(tmp_path / "front")
    sockets = {}
    for name in relay.CHANNELS:
        sockets[name] = context.socket(zmq.XPUB if name == "iopub" else zmq.ROUTER)  # as ipykernel's iopub
        sockets[name].setsockopt(zmq.SNDHWM, 0)  # queue all a test sends, to the last message that ends the relay
        sockets[name].bind(relay.endpoint(back, PORTS[f"{name}_port"]))
    process = relay.start(back, front, PORTS)
    sockets["iopub"].setsockopt(zmq.RCVTIMEO, 10_000)
    assert sockets["iopub"].recv() == b"\x01"  # the relay has subscribed: what is published now reaches it
    yield sockets, process, front, context
    process.kill()
    process.wait()
    context.destroy(linger=0)


def client(context, front: str, name: str, identity: bytes | None = None) -> zmq.Socket:
    socket = context.socket(zmq.SUB if name == "iopub" else zmq.DEALER)
    if identity:
        socket.setsockopt(zmq.IDENTITY, identity)
    if name == "iopub":
        socket.setsockopt(zmq.SUBSCRIBE, b"")
    socket.connect(relay.endpoint(front, PORTS[f"{name}_port"]))
    socket.setsockopt(zmq.RCVTIMEO, 10_000)
    return socket


def test_requests_reach_the_kernel_under_the_clients_own_id_and_its_replies_come_back(kernel):
    sockets, process, front, context = kernel
    shell = client(context, front, "shell", b"session-1")
    shell.send_multipart([b"<IDS|MSG>", b"execute"])
    sockets["shell"].setsockopt(zmq.RCVTIMEO, 10_000)
    peer, *message = sockets["shell"].recv_multipart()
    assert (peer, message) == (b"session-1", [b"<IDS|MSG>", b"execute"])  # as the kernel would see it unrelayed
    sockets["shell"].send_multipart([peer, b"<IDS|MSG>", b"reply"])
    assert shell.recv_multipart() == [b"<IDS|MSG>", b"reply"]
    assert process.poll() is None


def test_iopub_reaches_the_client_and_the_relay_ends_when_the_kernel_sends_too_much(kernel):
    sockets, process, front, context = kernel
    iopub = client(context, front, "iopub")
    deadline = time.monotonic() + 10
    while True:  # a subscriber misses what is published before it is connected, through the relay as without it
        sockets["iopub"].send_multipart([b"status", b"starting"])
        if iopub.poll(200) or time.monotonic() > deadline:
            break
    assert iopub.recv_multipart() == [b"status", b"starting"]
    frame = b"x" * (relay.FRAME_BYTES - 1024)
    for _ in range(relay.RUN_BYTES // len(frame) + 1):
        sockets["iopub"].send_multipart(SIGNED + [HEADER, b"{}", b"{}", frame])
    assert process.wait(timeout=30) == relay.FLOODED


SIGNED = [b"<IDS|MSG>", b"signature"]
HEADER = b'{"msg_id": "1", "msg_type": "stream", "date": "2026-12-03T00:00:00"}'
ONE_TOO_LARGE = {  # (the message, how the relay ends)
    "three frames, each under the frame cap, together past a message's":
        ([b"x" * (relay.MESSAGE_BYTES // 3 + 1024)] * 3, relay.ONE_MESSAGE),
    "one frame past the frame cap (libzmq drops the connection, as when memory runs out)":
        ([b"x" * (relay.FRAME_BYTES + 1024)], relay.DROPPED),
    "more frames than a kernel's message has": (SIGNED + [HEADER, b"{}", b"{}", b"{}"] + [b""] * 100, relay.MALFORMED),
    "a header past its cap": (SIGNED + [b'{"x": "' + b"y" * relay.HEADER_BYTES + b'"}', b"{}", b"{}", b"{}"],
                              relay.MALFORMED),
    "content of more brackets than any output": (SIGNED + [HEADER, b"{}", b"{}", b"[" + b"{}," * 100_000 + b"{}]"],
                                                 relay.NESTED),
    "content of more commas and colons than any output (keys cost the grader 17 times their bytes)":
        (SIGNED + [HEADER, b"{}", b"{}", b'{"text": "' + b"," * (relay.MESSAGE_ITEMS + 1) + b'"}'], relay.NESTED),
}


@pytest.mark.parametrize("case", ONE_TOO_LARGE)
def test_one_message_too_large_or_not_a_kernels_ends_the_relay_with_its_reason(kernel, case):
    sockets, process, front, context = kernel
    message, status = ONE_TOO_LARGE[case]
    shell = client(context, front, "shell", b"session-1")
    shell.send_multipart([b"ping"])
    sockets["shell"].setsockopt(zmq.RCVTIMEO, 10_000)
    peer, _ = sockets["shell"].recv_multipart()
    sockets["shell"].send_multipart([peer, *message])
    assert process.wait(timeout=30) == status


def test_empty_frames_count_and_headers_count_in_all(kernel):
    """Red team 10: 100,000 empty frames a message counted nothing, and dates in headers cost the grader 50 times
    what their bytes do: each frame counts FRAME_CHARGE, and the headers of a run have a budget of their own."""
    sockets, process, front, context = kernel
    empty = SIGNED + [HEADER, b"{}", b"{}", b"{}"] + [b""] * (relay.MAX_FRAMES - 7)
    for _ in range(relay.RUN_BYTES // (relay.FRAME_CHARGE * len(empty)) + 1):
        sockets["iopub"].send_multipart(empty)
    assert process.wait(timeout=30) == relay.FLOODED


def test_a_run_of_headers_near_their_cap_ends_past_their_budget(kernel):
    sockets, process, front, context = kernel
    header = b'{"d": ["' + b'", "'.join([b"2026-12-03T00:00:00"] * 170) + b'"]}'  # under HEADER_BYTES
    assert len(header) < relay.HEADER_BYTES
    for _ in range(relay.HEADERS_RUN_BYTES // (2 * len(header)) + 1):
        sockets["iopub"].send_multipart(SIGNED + [header, header, b"{}", b"{}"])
    assert process.wait(timeout=30) == relay.MALFORMED


def test_the_watch_stops_a_kernel_whose_relay_ended_and_leaves_one_that_ended_too_to_nbclient():
    living = subprocess.Popen([sys.executable, "-c", "import time\ntime.sleep(60)"])
    ended = subprocess.Popen([sys.executable, "-c", f"import sys\nsys.exit({relay.DROPPED})"])
    ended.wait()
    watch = KernelWatch(living, 60, relay=ended)
    watch.start()
    try:
        assert living.wait(timeout=10) < 0 and watch.reason == relay.WHY[relay.DROPPED]
    finally:
        living.kill()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    watch = KernelWatch(gone, 60, relay=ended)
    watch.start()
    time.sleep(4 * KernelWatch.POLL_S)
    watch.stop()
    assert watch.reason is None
