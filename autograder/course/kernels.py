"""The kernel the course's own notebook runs use (`make solutions`, `make bench-checks`, the parity sample of the
tests): a plain local kernel, reached over Unix sockets instead of loopback ports.

jupyter_client picks a kernel's five TCP ports by binding and closing them before the kernel binds them again, so
two kernels starting at once on a busy machine can pick the same port ("Address already in use": the kernel dies
before replying, seen failing `make test` in a fresh clone). Sockets in a folder of the kernel's own cannot meet.
Graded kernels have their own manager (autograder.course.preprocessors.SandboxedKernelManager), also on sockets.
"""
from __future__ import annotations

import os
import tempfile

from jupyter_client.manager import AsyncKernelManager


class LocalKernelManager(AsyncKernelManager):
    """An AsyncKernelManager on ZeroMQ's ipc transport, its sockets and connection file in a private temporary
    folder (mode 0700), removed when the manager is."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._folder = tempfile.TemporaryDirectory(prefix="kernel-")
        self.transport, self.ip = "ipc", os.path.join(self._folder.name, "ipc")
        self.connection_file = os.path.join(self._folder.name, "kernel.json")
