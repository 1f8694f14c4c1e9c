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
    """A stand-in kernel's sockets (ROUTER for the request channels, PUB for iopub), the relay started between them
    and a front folder, and the front's prefix."""
    context = zmq.Context()
    back, front = str(tmp_path / "kernel"), str(tmp_path / "front")
    sockets = {}
    for name in relay.CHANNELS:
        sockets[name] = context.socket(zmq.PUB if name == "iopub" else zmq.ROUTER)
        sockets[name].bind(relay.endpoint(back, PORTS[f"{name}_port"]))
    process = relay.start(back, front, PORTS)
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


def test_requests_reach_the_kernel_under_the_clients_own_id_and_its_replies_and_input_requests_come_back(kernel):
    sockets, process, front, context = kernel
    shell, stdin = client(context, front, "shell", b"session-1"), client(context, front, "stdin", b"session-1")
    shell.send_multipart([b"<IDS|MSG>", b"execute"])
    sockets["shell"].setsockopt(zmq.RCVTIMEO, 10_000)
    peer, *message = sockets["shell"].recv_multipart()
    assert (peer, message) == (b"session-1", [b"<IDS|MSG>", b"execute"])  # as the kernel would see it unrelayed
    sockets["stdin"].send_multipart([peer, b"<IDS|MSG>", b"input_request"])  # the kernel speaks first on stdin
    assert stdin.recv_multipart() == [b"<IDS|MSG>", b"input_request"]
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
        sockets["iopub"].send_multipart([b"stream", frame])
    assert process.wait(timeout=30) == relay.FLOODED


@pytest.mark.parametrize("frames, status", [
    (3, relay.ONE_MESSAGE),  # three frames under the frame cap, together past a message's
    (1, relay.DROPPED),  # one frame past the frame cap: libzmq drops the connection, as when memory runs out
])
def test_one_message_too_large_ends_the_relay_with_its_reason(kernel, frames, status):
    sockets, process, front, context = kernel
    size = relay.MESSAGE_BYTES // 3 + 1024 if frames == 3 else relay.FRAME_BYTES + 1024
    shell = client(context, front, "shell", b"session-1")
    shell.send_multipart([b"ping"])
    sockets["shell"].setsockopt(zmq.RCVTIMEO, 10_000)
    peer, _ = sockets["shell"].recv_multipart()
    sockets["shell"].send_multipart([peer] + [b"x" * size] * frames)
    assert process.wait(timeout=30) == status


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
