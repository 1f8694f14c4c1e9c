"""Where learner code runs while it is graded: a bubblewrap sandbox that sees an allowlist, with resource limits.

Every process that runs learner code during grading (the check worker, and nbgrader's kernel) is started through
:func:`wrap`. With bubblewrap (Debian's ``bubblewrap``) the process gets its own user, PID, IPC, mount and network
namespaces (the network has nothing but a loopback of its own; nbgrader's kernel talks to its client over Unix
sockets in a folder the two share). Its file system starts empty and gets, read-only, only what its role needs
(:class:`Role`):

- the shared libraries of the system (``/usr/lib/<multiarch>``, ``/usr/lib64``) and the dynamic loader's cache;
- the interpreter: its executable, ``libpython``, the standard library (without the interpreter's own
  site-packages) and the virtual environment's ``pyvenv.cfg``;
- the role's distributions and everything they require, file by file from their installed records: the check
  worker gets numpy and the given cells' matplotlib, tqdm and threadpoolctl, the kernel what the notebooks and the
  course's kernel-side code import;
- the role's own files (the worker's two scripts; the kernel's ``labtools``, ``data`` and a stand-in
  ``autograder`` without the checks);
- a size-limited ``/tmp``, and for the kernel a size-limited copy of its own submission folder.

Nothing else of the host exists inside: not the rest of site-packages (torch, sympy and micrograd are simply not
there for the worker), not ``/opt``, ``/srv``, ``/var``, home folders, the course folder, other submissions, an
exchange or wheels lying on disk, wherever they are. ``prlimit`` caps CPU time, address space, file size and open
files, so a runaway is stopped by the kernel, not by a polite signal, and the process dies with its parent.

Without bubblewrap (or where the machine forbids user namespaces) the limits still apply but nothing is hidden:
:func:`unusable` says why, :func:`refusal` stops grading unless WITHOUT_SANDBOX_ENV says to go on, and
:func:`warning` is printed when it does.
"""
from __future__ import annotations

import atexit
import contextlib
import csv
import errno
import functools
import importlib.metadata
import os
import shutil
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from autograder.prerequisites import bubblewrap_problem
from autograder.trust.pids import ProcessCap, fallback_warning, maker_ended, maker_tag
from autograder.trust.worker import CPU_KILL_MARGIN_S  # the forked workers' margin: one value for every sandbox

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed process (Linux rlimits, set with prlimit)."""
    cpu_seconds: int = 300          # total CPU time of the process (SIGXCPU): a check's budget, not one call's
    memory_bytes: int = 4 << 30     # address space; numpy and OpenBLAS reserve ~1 GiB of it before any work
    file_bytes: int = 64 << 20      # largest file it may write (its tmpfs lives in memory)
    open_files: int = 256

    def prlimit(self) -> list[str]:
        """The limits, and every signal at its default disposition and unblocked (GNU env's --default-signal does
        both): a background job starts grading with SIGINT ignored, a class run's local cluster (shielding its
        workers from Ctrl-C) with SIGINT blocked, and both survive exec. A kernel's bubblewrap that does not take
        SIGINT outlives jupyter_client's SIGINT at shutdown and waits while the kernel runs IPython's teardown: about
        0.8 s of CPU per notebook. The CPU limit's hard value is CPU_KILL_MARGIN_S above its soft one (why: there)."""
        cpu = f"{self.cpu_seconds}:{self.cpu_seconds + CPU_KILL_MARGIN_S}"
        return ["env", "--default-signal", "prlimit", f"--cpu={cpu}", f"--as={self.memory_bytes}",
                f"--fsize={self.file_bytes}", f"--nofile={self.open_files}", "--core=0", "--"]


@dataclass(frozen=True)
class Role:
    """What one kind of sandboxed process may see besides the system's libraries and the interpreter.

    Attributes:
        packages: distribution names (as pip knows them); each comes with everything it requires.
        tmp_bytes: the size of its /tmp (a tmpfs, in memory: a full one answers ENOSPC).
    """
    packages: tuple[str, ...]
    tmp_bytes: int


# The check worker: learner code and the worker script. numpy for both; and the libraries the notebooks' given
# cells import for pictures, progress bars and BLAS threads, which an answer may use too (red team 20: `for start in
# tqdm(...)` in train_epoch, `with threadpool_limits(1):`, `plt.rcParams[...] = ...` in an answer cell passed in the
# kernel and raised in the grade). The worker imports them only when learner code uses them.
WORKER = Role(packages=("numpy", "matplotlib", "tqdm", "threadpoolctl"), tmp_bytes=128 * MIB)
# nbgrader's kernel: what the notebooks import (tests/trust/test_sandbox.py proves the list is enough), and ipykernel.
# torch stays: the visible asserts of test cells compare with it, and the kernel's outputs never earn a point.
KERNEL = Role(packages=("ipykernel", "ipywidgets", "numpy", "torch", "matplotlib", "tqdm", "threadpoolctl",
                        "graphviz", "hypothesis", "micrograd", "mlxtend"), tmp_bytes=256 * MIB)
SHM_BYTES = 64 * MIB
# Ours in every sandbox, on its read-only root: process 1, and the process filter it loads.
INIT_SCRIPT = Path(__file__).with_name("sandbox_init.py")
KERNEL_AUTOGRADER = Path(__file__).with_name("kernel_autograder.py")
INSIDE_INIT = "/grader/sandbox_init.py"
INSIDE_FILTER = "/grader/no-new-processes.bpf"
SUBMISSION_BYTES = 512 * MIB  # the kernel's writable copy of its submission folder (checkpoints, saved figures)


# The explicit flag that lets grading go on where bubblewrap cannot sandbox: "1" to grade anyway. `python -m autograder
# grade` (a self-study learner's own notebook) and `make demo` set it; an instructor sets it for `nbgrader autograde`,
# or passes `python -m autograder autograde --without-sandbox`, knowing what it costs (:func:`warning`).
WITHOUT_SANDBOX_ENV = "BACKPROP_WITHOUT_SANDBOX"


@functools.lru_cache(maxsize=1)
def unusable() -> str | None:
    """Why bubblewrap cannot sandbox learner code on this machine, in a sentence, or None when it can (the same
    probe as `make setup`'s: autograder.prerequisites.bubblewrap_problem)."""
    return bubblewrap_problem()


def bubblewrap() -> str | None:
    """The bwrap executable if it exists and can create namespaces on this machine, else None."""
    return None if unusable() else shutil.which("bwrap")


def refusal() -> str | None:
    """Why grading must not start here (no sandbox, and WITHOUT_SANDBOX_ENV not set), in a paragraph; None when it
    may."""
    why = unusable()
    if why is None or os.environ.get(WITHOUT_SANDBOX_ENV) == "1":
        return None
    return (f"refusing to grade without a sandbox: {why}. Learner code would run with only resource limits, able to "
            "read source/, solutions/ and other submissions. Make bubblewrap usable (make setup says how), or, "
            f"knowing that, set {WITHOUT_SANDBOX_ENV}=1 (python -m autograder autograde --without-sandbox).")


CLONE_THREAD = 0x10000  # linux/sched.h: clone() making a thread of the same process, not a new process
# Also kept from a process under the filter, each {system call: the errno it returns instead of running}.
# A file's mode and extended attributes (ACLs): the kernel's sandbox runs as the owner of the host folder its sockets
# are in, which its mode alone keeps read-only once they exist. A mode change does nothing and reports success
# (IPython's start-up copies a file with its mode); an attribute is "not supported", which copies pass over.
# Memory no limit counts (RLIMIT_AS leaves it out, no tmpfs holds it): memfd_create's files, System V shared memory.
REFUSED = {**dict.fromkeys(("chmod", "fchmod", "fchmodat", "fchmodat2"), 0),
           **dict.fromkeys(("setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr"),
                           errno.ENOTSUP),
           **dict.fromkeys(("memfd_create", "memfd_secret", "shmget"), errno.ENOSYS),
           # System V semaphores and message queues: kernel memory no limit counts (one semget of 32,000 takes 2 MiB
           # in 2 ms; a red team grew the host's slab by 500 MiB), and state a later exercise's worker can read.
           **dict.fromkeys(("semget", "semop", "semtimedop", "semctl", "msgget", "msgsnd", "msgrcv", "msgctl",
                            "mq_open"), errno.ENOSYS),
           # Disk reserved past the end of a file (FALLOC_FL_KEEP_SIZE) is not counted by the file-size limit: a
           # worker's stderr file on the host took 1 GiB so. The C library writes zeros instead when told this.
           "fallocate": errno.EOPNOTSUPP,
           # Keyrings are the kernel's, not the sandbox's: learner code read the grader's session keyring and left
           # keys for every later sandbox. (The init also gives the sandbox a fresh, empty session keyring.)
           **dict.fromkeys(("add_key", "keyctl", "request_key"), errno.ENOSYS),
           # io_uring runs file operations (a chmod by ACL, say) that the filter never sees: as if the kernel had none.
           **dict.fromkeys(("io_uring_setup", "io_uring_enter", "io_uring_register"), errno.ENOSYS),
           # A namespace of its own would give learner code every capability in it again, and mounts (an unsized tmpfs
           # is memory no limit counts).
           **dict.fromkeys(("unshare", "setns", "mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount",
                            "move_mount", "open_tree", "mount_setattr"), errno.EPERM),
           # Scheduling attributes in a structure a filter cannot read (policy, nice): the policy and priority rules
           # of no_new_processes say why; `nice` is a call of its own on some architectures (not x86-64's).
           **dict.fromkeys(("sched_setattr", "nice"), errno.EPERM)}


@functools.lru_cache(maxsize=1)
def no_new_processes() -> Path | None:
    """A seccomp filter (classic BPF, compiled by libseccomp) under which a process may start threads but no
    process: fork, vfork and a clone without CLONE_THREAD fail with EPERM; clone3, whose flags a filter cannot
    read, fails with ENOSYS, so that the C library falls back to clone. Nor may it trace another process or read or
    write its memory (ptrace, process_vm_readv/writev). None where libseccomp is missing.

    Nor may it change a file's mode or attributes, or hold memory outside every limit (``REFUSED``).

    The file lives in a private folder for this process's life. The sandbox's init (sandbox_init.py) loads it into
    the kernel before the kernel starts; a check worker, forked from a zygote that must fork, loads it itself
    before it runs any learner code (autograder/trust/worker.py). Either way it holds for everything the process
    runs or starts, for good.
    """
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError):  # the package, or the C library it loads
        return None
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for call in ("fork", "vfork"):
        try:
            rules.add_rule(seccomp.ERRNO(errno.EPERM), call)
        except (RuntimeError, ValueError):  # arm64 and riscv have no such call: clone alone makes processes
            pass
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for call in ("ptrace", "process_vm_readv", "process_vm_writev"):  # nor reach into another process's memory
        rules.add_rule(seccomp.ERRNO(errno.EPERM), call)
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    # Its own limits only: a worker that lowered the zygote's address space (prlimit on its pid) made every later
    # exercise fail as the grader's fault.
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "prlimit64", seccomp.Arg(0, seccomp.NE, 0))
    # No lower priority nor another scheduling policy than a task starts with (the grading process's, which its
    # sandboxes inherit: nice 0 and SCHED_OTHER unless grading was started under `nice` or `chrt`). A thread at idle
    # priority (SCHED_IDLE, nice 19) that spins is runnable all the time while it hardly runs, so its sandbox never
    # counted as sleeping nor spent its CPU time, and a sleeping answer held grading up to the wall-clock limit (red
    # team 5, 02). With its weight kept, a runnable task gets its fair share of a CPU, and spends its budget.
    # Setting those values again stays allowed: ZeroMQ sets its policy for each of its threads and aborts when
    # refused (every kernel died before replying to nbgrader), and os.nice(0) is how Python reads a nice value.
    # Compared as unsigned 64-bit numbers: a negative nice (a raised priority) is refused too.
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "setpriority", seccomp.Arg(1, seccomp.NE, 0))  # (which, who, nice)
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "setpriority",
                   seccomp.Arg(2, seccomp.GT, max(0, os.getpriority(os.PRIO_PROCESS, 0))))
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "sched_setscheduler",
                   seccomp.Arg(1, seccomp.NE, os.sched_getscheduler(0)))
    for call, answer in REFUSED.items():
        try:
            rules.add_rule(seccomp.ERRNO(answer), call)
        except (RuntimeError, ValueError):  # a call this machine's libseccomp does not know, so no program makes
            pass
    folder = _filter_folder()
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "no-new-processes.bpf"
    with open(path, "wb") as out:
        rules.export_bpf(out)
    return path


FILTER_PREFIX = "sandbox-filter-"


def _filter_folder() -> Path:
    """A new private folder (mode 0700) in the temporary folder for this process's filter, named after the process
    (:func:`maker_tag`), once those of processes that have ended are removed: a process killed (or ended by
    os._exit) never runs its atexit, whatever command it was."""
    for stale in Path(tempfile.gettempdir()).glob(f"{FILTER_PREFIX}*-*-*-*"):
        tag = stale.name[len(FILTER_PREFIX):].rsplit("-", 1)[0]
        with contextlib.suppress(OSError):
            mine = stale.lstat().st_uid == os.geteuid() and stale.is_dir() and not stale.is_symlink()
            if mine and maker_ended(tag):
                shutil.rmtree(stale)
    return Path(tempfile.mkdtemp(prefix=f"{FILTER_PREFIX}{maker_tag()}-"))


def warning() -> str | None:
    """A loud, one-paragraph warning when grading runs without the sandbox, its process filter or a pids cgroup for
    it; None when all are there."""
    if bubblewrap() and no_new_processes():
        return fallback_warning()
    if bubblewrap():
        return ("WARNING: libseccomp is not available (apt install libseccomp2), so learner code being graded can "
                "start processes: each sandbox still ends them all, but a fork bomb can slow the machine for the "
                "class. Install it before grading a class.")
    return (f"WARNING: learner code is graded WITHOUT a sandbox, because {unusable()}. It still runs in a "
            "separate process with CPU, memory and file-size limits, and verdicts are still computed outside it, "
            "but it can read files it should not (source/, solutions/, other submissions) and write to the course "
            "folder. Do not grade a class like this.")


@functools.lru_cache(maxsize=None)
def distributions(roots: tuple[str, ...]) -> frozenset[str]:
    """The installed distributions ``roots`` need: themselves and, recursively, what they require on this
    platform (extras left out), by normalised name.

    Raises:
        importlib.metadata.PackageNotFoundError: a root is not installed.
    """
    found, queue = set(), [importlib.metadata.distribution(name) for name in roots]
    while queue:
        dist = queue.pop()
        name = _normalised(dist.metadata["Name"])
        if name in found:
            continue
        found.add(name)
        for line in dist.requires or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                try:
                    queue.append(importlib.metadata.distribution(requirement.name))
                except importlib.metadata.PackageNotFoundError:
                    pass  # an optional dependency pip left out: nothing to mount
    return frozenset(found)


def _normalised(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


@functools.lru_cache(maxsize=None)
def package_paths(roots: tuple[str, ...]) -> tuple[Path, ...]:
    """The top-level entries of site-packages that the distributions of ``roots`` installed (their packages,
    modules, bundled libraries and metadata folders), never a ``.pth`` file: nothing else runs at start-up, and never
    site-packages' own ``__pycache__`` (a single-file module's record lists its bytecode there, and mounting the
    folder let learner code load every other such module's bytecode, red team 21: the modules run from source)."""
    paths = set()
    for name in distributions(roots):
        dist = importlib.metadata.distribution(name)  # the first on sys.path: the copy that imports
        base = Path(dist.locate_file(""))
        paths.update(base / top for top in _top_level_entries(dist) - {"..", "__pycache__"} if not top.endswith(".pth"))
    return tuple(sorted(p for p in paths if p.exists()))


def _top_level_entries(dist: importlib.metadata.Distribution) -> set[str]:
    """The first path component of every file a distribution installed, from its install record. Read as text:
    ``dist.files`` makes a Path of each of the kernel's 41,000 lines, 0.4 s of CPU in every grading process."""
    record = dist.read_text("RECORD")
    if record is None:  # installed without a RECORD (an old egg-info): the slow way
        return {file.parts[0] for file in dist.files or () if file.parts}
    return {row[0].split("/", 1)[0] for row in csv.reader(record.splitlines()) if row}


def interpreter_paths() -> list[tuple[Path, Path]]:
    """Read-only binds {outside: inside} that let ``sys.executable`` start: the executable (at its real path and
    at the path it is called by), libpython, the standard library and a virtual environment's pyvenv.cfg."""
    executable = Path(sys.executable)
    binds = [(executable.resolve(), executable.resolve()), (executable.resolve(), executable)]
    if sys.prefix != sys.base_prefix:
        binds.append((Path(sys.prefix) / "pyvenv.cfg", Path(sys.prefix) / "pyvenv.cfg"))
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix,
                                     "installed_base": sys.base_prefix})
    for folder in {Path(base["stdlib"]), Path(base["platstdlib"])}:
        binds.append((folder, folder))
    library = sysconfig.get_config_var("INSTSONAME")
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and library:
        shared = Path(sysconfig.get_config_var("LIBDIR")) / library
        binds.append((shared.resolve(), shared))
    return binds


def system_arguments() -> list[str]:
    """bwrap arguments for the system's shared libraries and the merged-/usr links to them."""
    multiarch = sysconfig.get_config_var("MULTIARCH")
    libraries = Path("/usr/lib") / multiarch if multiarch else Path("/usr/lib")  # Debian's layout, or the others'
    arguments = []
    for found in (libraries, Path("/usr/lib64"), Path("/usr/lib/locale"), Path("/etc/ld.so.cache")):
        if found.exists():
            arguments += ["--ro-bind", str(found), str(found)]
    for top in ("/lib", "/lib64"):
        if os.path.islink(top):
            arguments += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            arguments += ["--ro-bind", top, top]
    return arguments


def _interpreters_packages() -> list[Path]:
    """The base interpreter's own package folders, where they lie inside its standard library (pyenv, a build
    from source): emptied, since the standard library is mounted whole."""
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
    stdlib = Path(base["stdlib"])
    return sorted({Path(base[key]) for key in ("purelib", "platlib")
                   if Path(base[key]).is_dir() and stdlib in Path(base[key]).parents})


def wrap(argv: list[str], *, role: Role = WORKER, binds: dict[Path, Path] | None = None,
         writable: dict[Path, Path] | None = None, workdir: str = "/tmp", env: dict[str, str | None] | None = None,
         limits: Limits = Limits(), extra: list[str] = (), seccomp: bool = False,
         cap: ProcessCap | None = None) -> list[str]:
    """The command line that runs ``argv`` sandboxed and limited.

    Args:
        argv: the program and its arguments, as seen inside the sandbox.
        role: the packages the process may import and the size of its /tmp.
        binds: more read-only bind mounts {outside path: inside path}.
        writable: read-write bind mounts {outside path: inside path}.
        workdir: the working directory inside the sandbox.
        env: variables inside the sandbox besides :func:`environment`'s (None: left out). Nothing else of the
            caller's environment goes in.
        limits: rlimits for the process and everything it starts.
        extra: more bwrap arguments, placed after the mounts above (a sized tmpfs, say).
        seccomp: start no process (no_new_processes), where that filter exists; threads are fine.
        cap: the pids cgroup (or, without one, the init's RLIMIT_NPROC) capping the sandbox's processes and threads;
            the caller closes it once the sandbox has ended. None: RLIMIT_NPROC alone.
    """
    bwrap = bubblewrap()
    cap = cap or ProcessCap.rlimit_only()
    if not bwrap:  # no user namespace of its own, so no RLIMIT_NPROC either: the group alone, where there is one
        return cap.command(limits.prlimit() + argv)
    binds = {**(binds or {}), INIT_SCRIPT: Path(INSIDE_INIT)}
    env = {**environment(), **(env or {}), **cap.environment()}
    if seccomp and no_new_processes():  # loaded by the init into the program, before it starts
        binds[no_new_processes()] = Path(INSIDE_FILTER)
        env["SANDBOX_FILTER"] = INSIDE_FILTER
    # No capability inside either (as root, bwrap would keep them all in the sandbox's namespaces): file modes hold,
    # mounts cannot be changed, and no process can be traced. Process 1 is ours (sandbox_init.py), not bwrap's.
    command = [bwrap, "--unshare-all", "--as-pid-1", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
               "--clearenv",
               *system_arguments(),
               # /proc read-only: its per-process files change the scheduler's view of a process (an autogroup's
               # nice, as a spinning thread's priority; see no_new_processes), its timer slack or statistics
               "--proc", "/proc", "--remount-ro", "/proc",
               # /dev holds device nodes only (read-only; writing to /dev/null still works) and a small /dev/shm
               "--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
               "--size", str(role.tmp_bytes), "--tmpfs", "/tmp"]
    for outside, inside in interpreter_paths():
        command += ["--ro-bind", str(outside), str(inside)]
    for folder in _interpreters_packages():
        command += ["--tmpfs", str(folder), "--remount-ro", str(folder)]
    for path in package_paths(role.packages):
        command += ["--ro-bind", str(path), str(path)]
    for outside, inside in binds.items():
        command += ["--ro-bind", str(outside), str(inside)]
    for outside, inside in (writable or {}).items():
        command += ["--bind", str(outside), str(inside)]
    command += [*extra, "--remount-ro", "/"]  # the empty root, and the folders made in it for the mounts
    for key, value in env.items():
        if value is not None:
            command += ["--setenv", key, value]
    return cap.command(limits.prlimit() + command + ["--chdir", workdir, "--", sys.executable, "-I", INSIDE_INIT,
                                                     *argv])


def environment(home: str = "/tmp") -> dict[str, str]:
    """A small environment for a sandboxed process: no secrets, one BLAS thread (small matrices run faster)."""
    kept = ("PATH", "LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    keep = {k: v for k, v in os.environ.items() if k in kept}
    return {**keep, "HOME": home, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "MPLCONFIGDIR": f"{home}/.matplotlib", "PYTHONDONTWRITEBYTECODE": "1", "WORKER_HOME": home}


KERNEL_LIMITS = Limits(cpu_seconds=1200)  # a whole notebook: notebook 5 trains for tens of seconds
SUBMISSION_INSIDE = "/submission"
# Runs before the kernel, so before any learner code: fills the sandbox's sized, writable copy of the submission
# folder from the read-only original, then becomes the kernel.
# A link is copied as a link (it points nowhere in here) and a special file not at all; contents only, as the
# filter refuses mode changes (a folder's copied mode is among the errors passed over). A file larger than the
# file-size limit is left out: writing it would kill the process (SIGXFSZ) and the kernel would never start.
COPY_THEN_KERNEL = ("import os, resource, shutil, sys\n"
                    "most = resource.getrlimit(resource.RLIMIT_FSIZE)[0]\n"
                    "def copy(source, target):\n"
                    "    if most == resource.RLIM_INFINITY or os.path.getsize(source) <= most:\n"
                    "        shutil.copyfile(source, target)\n"
                    "try:\n    shutil.copytree(sys.argv[1], sys.argv[2], symlinks=True, dirs_exist_ok=True,\n"
                    "                    copy_function=copy)\n"
                    "except shutil.Error:\n    pass\n"
                    "os.chdir(sys.argv[2])\nos.execvp(sys.argv[3], sys.argv[3:])\n")


def kernel_command(argv: list[str], private: Path, cwd: str | None, cap: ProcessCap | None = None) -> list[str]:
    """nbgrader's kernel, sandboxed (role :data:`KERNEL`): it works in a size-limited, writable copy of its
    submission folder (``cwd``, at the same path), imports the course's ``labtools`` and a stand-in ``autograder``
    (kernel_autograder.py: the hidden tests call ``check``, whose verdict comes from outside; the checks and their
    reference answers are not there) and reads ``data/``, all read-only, and
    shares ``private`` (its connection file and IPC sockets) with nbgrader. Nothing else of the course exists
    inside, and it has no network: its own network namespace has only a loopback of its own. ``cap`` caps its
    processes and threads (see :func:`wrap`)."""
    if not bubblewrap():  # nothing to copy into: the kernel runs in nbgrader's own copy of the submission, limited
        return (cap or ProcessCap.rlimit_only()).command(KERNEL_LIMITS.prlimit() + argv)
    cwd = str(Path(cwd or os.getcwd()).resolve())
    binds = {Path(cwd): Path(SUBMISSION_INSIDE)}
    for package in ("labtools", "data"):
        if (REPO / package).exists():
            binds[REPO / package] = REPO / package
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":  # grading: the verdicts come from outside the kernel
        binds[KERNEL_AUTOGRADER] = REPO / "autograder" / "__init__.py"  # the name test cells call; no check, no answer
    else:  # `nbgrader validate`, a learner's own Validate button: the checks run in the kernel, on their machine
        binds[REPO / "autograder"] = REPO / "autograder"
    # JPY_PARENT_PID is left out: ipykernel exits when its parent PID looks like init's, which in its own PID
    # namespace it always does. --die-with-parent ends the sandbox with nbgrader instead.
    # PYTHONSAFEPATH: the submission's folder is not on sys.path, so nothing in it stands in for a module the kernel
    # imports as it starts, before its private folder is locked (red team 17: an ipykernel_launcher.py of the
    # submission's ran first and had lock() chmod a host file through a link); IPython then adds no '' either.
    env = {"IPYTHONDIR": "/tmp/.ipython", "JUPYTER_RUNTIME_DIR": "/tmp/.jupyter-runtime", "PYTHONPATH": str(REPO),
           "PYTHONSAFEPATH": "1"}
    copy = [sys.executable, "-I", "-c", COPY_THEN_KERNEL, SUBMISSION_INSIDE, cwd, *argv]
    return wrap(copy, role=KERNEL, binds=binds, writable={private: private}, workdir="/", env=env,
                limits=KERNEL_LIMITS, extra=["--size", str(SUBMISSION_BYTES), "--tmpfs", cwd], seccomp=True, cap=cap)
