"""Process 1 of every sandbox (``bwrap --as-pid-1``): trusted code, undumpable, whose death ends the sandbox.

bubblewrap's own init is an ordinary process of the sandbox's user. Learner code could open its memory
(``/proc/1/mem``, which needs no ptrace), write code into it and run that code outside the process filter, with
the parent-death signal cleared: processes that outlive the grading. This init makes itself undumpable before
anything else runs, so that no process of the same user can open its memory, its files or trace it. It keeps the
parent-death signal bubblewrap gave it (``--die-with-parent``), starts the sandbox's program (under the process
filter when ``SANDBOX_FILTER`` names one), reaps whatever is orphaned, and leaves with the program's status (128 + the
signal, as bubblewrap's init does, when a signal ended it) once no process is left: a check worker whose learner code
killed its zygote (the program of a worker's sandbox) still answers, whatever the machine's load, instead of dying
mid-reply with the namespace. The trusted side ends the sandbox when it is done with it (killing bubblewrap, whose
death signal then ends this init, and with it every process in the sandbox's PID namespace).

Runs *inside the sandbox* as a script, like worker.py: standard library only.
Usage: ``python -I init.py PROGRAM [ARG...]``.
"""
from __future__ import annotations

import ctypes
import os
import resource
import sys

PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 4, 38, 22, 2  # linux/prctl.h, seccomp.h
KEYCTL_JOIN_SESSION_KEYRING = 1  # linux/keyctl.h
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)  # the C library has no wrapper for keyctl


class _Program(ctypes.Structure):  # struct sock_fprog
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def forbid_new_processes(path: str) -> None:
    """Load the seccomp filter at ``path`` (autograder.trust.sandbox.no_new_processes): from here on this process
    and its threads can start no process, and nothing can lift that. Runs before any learner code.

    Raises:
        OSError: the kernel refused the filter.
    """
    with open(path, "rb") as program:
        code = program.read()
    libc = ctypes.CDLL(None, use_errno=True)
    fprog = _Program(len(code) // 8, code)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0):
        raise OSError(ctypes.get_errno(), "the seccomp filter that keeps learner code from starting processes")


def main(argv: list[str]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0):
        raise SystemExit("the sandbox's init could not make itself undumpable")
    if SYS_KEYCTL is not None:  # a new, empty session keyring: the grader's own keys are not the sandbox's
        libc.syscall(SYS_KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, None)
    tasks = os.environ.pop("SANDBOX_NPROC", None)  # no pids cgroup for this sandbox (autograder/trust/pids.py)
    if tasks:  # counted in this sandbox's own user namespace, so the host's other processes of the user do not count
        resource.setrlimit(resource.RLIMIT_NPROC, (int(tasks), int(tasks)))
    program = os.fork()
    if program == 0:
        try:
            path = os.environ.pop("SANDBOX_FILTER", None)
            if path:
                forbid_new_processes(path)
            os.execv(argv[0], argv)  # a fresh image: dumpable again, as any process of learner code may be
        except OSError as error:
            print(f"the sandbox's init could not start {argv[0]}: {error}", file=sys.stderr)
        os._exit(127)
    # No signal handler: as a PID namespace's init, this process then takes no signal from inside the sandbox, and
    # from outside only SIGKILL, which ends the sandbox.
    ended = 0
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:  # no process is left in the sandbox
            os._exit(ended)
        if pid == program:
            ended = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


if __name__ == "__main__":
    main(sys.argv[1:])
