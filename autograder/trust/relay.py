"""The relay between nbgrader and the sandboxed kernel it grades: every message either sends the other passes
through this process, which bounds what the kernel's messages can cost the grading process to read.

ZeroMQ hands a message over whole: its frames are assembled in the receiving process before anyone can count them.
A kernel that sent one 8 MiB buffer 400 times as the frames of one message (zero-copy, so cheap for it) grew the
grading process to 3.6 GB. Here that assembling happens in a process of its own with MEMORY_BYTES of address space
(RLIMIT_AS, set by :func:`start`): a message too large for it drops the kernel's connection (libzmq frees what it
had), as one frame past FRAME_BYTES does, and the relay ends with DROPPED. It reads every message the kernel sends
before forwarding it, and ends (forwarding nothing more) with
- ONE_MESSAGE for one past MESSAGE_BYTES, FLOODED for more than RUN_BYTES in all (each frame counting FRAME_CHARGE
  at least: red team 10 queued 100,000 empty frames a message);
- MALFORMED for one no Jupyter kernel sends: more than MAX_FRAMES frames, a header or parent header past
  HEADER_BYTES, or more than HEADERS_RUN_BYTES of them in all (jupyter_client reads the dates in every string of a
  header, at about 50 times the cost of the JSON: red team 10 spent 13 CPU s of the grader's on 48 MiB of dates);
- NESTED for one whose JSON holds more than MESSAGE_BRACKETS ``[`` and ``{``, or MESSAGE_ITEMS ``,`` and ``:``
  (inside strings too: counting is cheap, parsing is not): each becomes Python objects in the grading process (red
  team 10's 31 MiB of ``[{},{},...]`` took it to 1.5 GB, and 2.6 million keys in 24 MiB to 1.1 GB).
The grader then stops the kernel and names the reason (autograder.course.preprocessors.KernelWatch): WHY.

The relay forwards messages as they are, signatures included, and adds no endpoint anyone else can reach: it
connects to the kernel's Unix sockets and binds its own in a private folder of the grading process, which the
kernel's sandbox does not see. Each peer of the request channels (shell, control, heartbeat) gets a socket of its
own towards the kernel, with its own routing id, so the kernel sees the ids it would see without the relay. It has
no stdin channel: nbgrader allows no input, so the kernel never asks for any, and what learner code sends there
reaches no one (nbclient never reads it: red team 10 queued 3.6 GB of it in the grading process).

Run as ``python -m autograder.trust.relay KERNEL_PREFIX FRONT_PREFIX SHELL IOPUB CONTROL HB``: the ipc endpoints
are ``PREFIX-PORT``, as jupyter_client names them, and the numbers are the connection file's ports.
"""
import os
import resource
import subprocess
import sys

import zmq

from autograder.course.limits import FLOOD_BYTES, MAX_CELL_OUTPUT_BYTES, MAX_NOTEBOOK_BYTES

CHANNELS = ("shell", "iopub", "control", "hb")  # in the order of the ports on the command line
DELIMITER = b"<IDS|MSG>"  # then the signature, header, parent header, metadata, content and buffers (the protocol)
FRAME_BYTES = MAX_NOTEBOOK_BYTES + MAX_CELL_OUTPUT_BYTES  # a kernel message may echo a whole cell's source
MESSAGE_BYTES = FLOOD_BYTES  # a message past what a whole run may send ends the run anyway
# Twice what stops a run in the grader (autograder.course.preprocessors.OutputCap), which counts the same messages
# a little differently: the grader's own reason comes first.
RUN_BYTES = 2 * FLOOD_BYTES
FRAME_CHARGE = 256  # what a frame costs the grader to hold and read, however small (a few Python objects)
MAX_FRAMES = 64  # a kernel's message has seven or so, and a widget's a few buffers more
HEADER_BYTES = 4 << 10  # a header is about 300 bytes, and a parent header is the request's header
HEADERS_RUN_BYTES = 8 << 20  # about 14,000 messages' headers and parent headers
MESSAGE_BRACKETS = 100_000  # a printed list of 100,000 lists, or data no output holds
MESSAGE_ITEMS = 1_000_000  # commas and colons: a printed list of a million numbers, or data no output holds
MEMORY_BYTES = 768 << 20  # the interpreter and libzmq take about 150 MB of address space; a message up to RUN_BYTES fits

ONE_MESSAGE, FLOODED, DROPPED, MALFORMED, NESTED = 3, 4, 5, 6, 7  # exit statuses
STOPPED = "so the kernel was stopped and the cells after it were not run"
WHY = {
    ONE_MESSAGE: f"the kernel sent one message of more than {MESSAGE_BYTES >> 20} MiB (one huge output, or data "
                 f"written to the kernel's own sockets), {STOPPED}",
    FLOODED: f"the kernel sent more than {RUN_BYTES >> 20} MiB in all, {STOPPED}: does a cell print or display "
             "without end?",
    DROPPED: f"the kernel sent a message too large for the grader to take (one output of more than "
             f"{FRAME_BYTES >> 20} MiB, or data written to the kernel's own sockets), {STOPPED}",
    MALFORMED: f"the kernel sent a message no Jupyter kernel sends (more than {MAX_FRAMES} parts, or headers too "
               f"large), {STOPPED}: does your code write to the kernel's own sockets?",
    NESTED: f"the kernel sent one message too costly to read (more than {MESSAGE_BRACKETS:,} [ or {{, or "
            f"{MESSAGE_ITEMS:,} commas and colons), {STOPPED}: does a cell print a huge list or dict, or write to "
            "the kernel's own sockets?",
}


def endpoint(prefix: str, port: int) -> str:
    return f"ipc://{prefix}-{port}"


class Relay:
    """The sockets and the loop (see the module's docstring)."""

    def __init__(self, kernel: str, front: str, ports: dict[str, int]):
        self.context, self.poller = zmq.Context(), zmq.Poller()
        self.kernel, self.ports = kernel, ports
        self.front = {name: self._bind(front, name) for name in CHANNELS}
        self.channel_of = {socket: name for name, socket in self.front.items()}
        self.back: dict[tuple[str, bytes], zmq.Socket] = {}  # (channel, peer's routing id) -> socket to the kernel
        self.route: dict[zmq.Socket, tuple[str, bytes]] = {}  # the other way
        self.watchers: set[zmq.Socket] = set()
        self.iopub = self._connect("iopub", zmq.SUB)
        self.iopub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sent = self.headers = 0

    def _bind(self, front: str, name: str) -> zmq.Socket:
        socket = self.context.socket(zmq.PUB if name == "iopub" else zmq.ROUTER)
        socket.bind(endpoint(front, self.ports[name]))
        if name != "iopub":
            self.poller.register(socket, zmq.POLLIN)
        return socket

    def _connect(self, name: str, kind: int, peer: bytes | None = None) -> zmq.Socket:
        socket = self.context.socket(kind)
        socket.setsockopt(zmq.MAXMSGSIZE, FRAME_BYTES)
        if peer is not None:
            socket.setsockopt(zmq.IDENTITY, peer)
        # The kernel never drops its end while it lives: when the relay's end is dropped, a message was too large
        # (or the kernel has ended, which the grader tells apart).
        watcher = socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        self.watchers.add(watcher)
        for each in (socket, watcher):
            self.poller.register(each, zmq.POLLIN)
        socket.connect(endpoint(self.kernel, self.ports[name]))
        return socket

    def _towards_kernel(self, name: str, peer: bytes) -> zmq.Socket:
        """The socket that carries ``peer``'s messages on channel ``name`` (made on its first)."""
        if (name, peer) not in self.back:
            socket = self._connect(name, zmq.DEALER, peer)
            self.back[name, peer], self.route[socket] = socket, (name, peer)
        return self.back[name, peer]

    def run(self) -> int:
        """Forward until the kernel's connection drops or it sends too much; the exit status."""
        while True:
            for socket, _ in self.poller.poll():
                status = self._forward(socket)
                if status:
                    return status

    def _forward(self, socket: zmq.Socket) -> int | None:
        if socket in self.watchers:
            return DROPPED
        frames = socket.recv_multipart(copy=False)
        if socket in self.channel_of:  # from the grader: [peer, *message]
            peer, *message = frames
            self._towards_kernel(self.channel_of[socket], peer.bytes).send_multipart(message, copy=False)
            return None
        refused = self._refusal(frames)
        if refused:
            return refused
        if socket is self.iopub:
            self.front["iopub"].send_multipart(frames, copy=False)
        else:
            channel, peer = self.route[socket]
            self.front[channel].send_multipart([peer, *frames], copy=False)
        return None

    def _refusal(self, frames: list) -> int | None:
        """Why the kernel's message ``frames`` is not forwarded (an exit status), or None; counts it."""
        size = sum(len(frame) for frame in frames)
        self.sent += size + FRAME_CHARGE * len(frames)
        if size > MESSAGE_BYTES:
            return ONE_MESSAGE
        if self.sent > RUN_BYTES:
            return FLOODED
        if len(frames) > MAX_FRAMES:
            return MALFORMED
        data = [frame.bytes for frame in frames]
        at = data.index(DELIMITER) + 2 if DELIMITER in data else 0  # the header, when the message has the delimiter
        headers = data[at:at + 2]
        self.headers += sum(map(len, headers))
        if any(len(header) > HEADER_BYTES for header in headers) or self.headers > HEADERS_RUN_BYTES:
            return MALFORMED
        parts = data[at:at + 4]
        if sum(part.count(b"[") + part.count(b"{") for part in parts) > MESSAGE_BRACKETS \
                or sum(part.count(b",") + part.count(b":") for part in parts) > MESSAGE_ITEMS:
            return NESTED
        return None


def start(kernel: str, front: str, connection: dict) -> subprocess.Popen:
    """The relay, started, between the kernel's endpoints ``kernel`` and the grader's ``front`` (ipc prefixes) on
    the ports of ``connection`` (jupyter_client's connection info). It ends with the grading process
    (PR_SET_PDEATHSIG) and when the kernel's connection drops; its exit status is a key of WHY then."""
    ports = [str(connection[f"{name}_port"]) for name in CHANNELS]
    argv = [sys.executable, "-m", "autograder.trust.relay", kernel, front, *ports]
    env = {**os.environ, "MALLOC_ARENA_MAX": "2"}  # each malloc arena reserves 64 MiB of the address space
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=_limited)


def _limited() -> None:
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (linux/prctl.h)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def main(argv: list[str]) -> int:
    kernel, front, *ports = argv
    return Relay(kernel, front, dict(zip(CHANNELS, map(int, ports)))).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
