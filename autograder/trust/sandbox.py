"""Where learner code runs while it is graded: a bubblewrap sandbox with resource limits.

Every process that runs learner code during grading (the check worker, and nbgrader's kernel) is started through
:func:`wrap`. With bubblewrap (Debian's ``bubblewrap``) the process gets its own user, PID, IPC and mount
namespaces, and its own network namespace, with nothing but a loopback of its own (nbgrader's kernel talks to its
client over Unix sockets in a folder the two share); the whole file system is read-only; ``/tmp``, home folders and
the course folder are empty tmpfs, so ``source/``, ``solutions/``, other submissions and the gradebook cannot be read
or written (the check worker cannot read the checks either; nbgrader's kernel gets ``autograder/`` back, read-only, so
that test cells can call ``run_check``); libraries that differentiate for you (torch, sympy, ...) are hidden; and the process dies
with its parent. ``prlimit`` caps CPU time, address space, file size and open files, so a runaway is stopped by the
kernel, not by a polite signal.

Without bubblewrap (or where the machine forbids user namespaces) the limits still apply but the files are not
hidden: :func:`warning` says so, and grading prints it.
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HIDDEN_PACKAGE = Path(__file__).with_name("hidden_package.py")
# Directory names under site-packages that must look empty inside the sandbox: autodiff and symbolic calculus.
HIDDEN_PACKAGES = ("torch", "functorch", "torchgen", "sympy", "mpmath", "jax", "jaxlib", "autograd", "tensorflow")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed process (Linux rlimits, set with prlimit)."""
    cpu_seconds: int = 300          # total CPU time of the process: a check's budget, not one call's
    memory_bytes: int = 4 << 30     # address space; numpy and OpenBLAS reserve ~1 GiB of it before any work
    file_bytes: int = 64 << 20      # largest file it may write (its tmpfs lives in memory)
    open_files: int = 256

    def prlimit(self) -> list[str]:
        """The limits, and every signal at its default disposition (GNU env): a background job, or a local Dask
        cluster shielding its workers from Ctrl-C, starts grading with SIGINT ignored, and that survives exec. A
        kernel's bubblewrap that ignores SIGINT outlives jupyter_client's SIGINT at shutdown and waits while the
        kernel runs IPython's teardown: about 0.8 s of CPU per notebook."""
        return ["env", "--default-signal", "prlimit", f"--cpu={self.cpu_seconds}", f"--as={self.memory_bytes}",
                f"--fsize={self.file_bytes}", f"--nofile={self.open_files}", "--core=0", "--"]


@functools.lru_cache(maxsize=1)
def bubblewrap() -> str | None:
    """The bwrap executable if it exists and can create namespaces on this machine, else None."""
    found = shutil.which("bwrap")
    if not found:
        return None
    probe = subprocess.run([found, "--unshare-all", "--ro-bind", "/", "/", "--", "true"], capture_output=True)
    return found if probe.returncode == 0 else None


def warning() -> str | None:
    """A loud, one-paragraph warning when grading runs without the sandbox; None when the sandbox is there."""
    if bubblewrap():
        return None
    return ("WARNING: bubblewrap is not available (apt install bubblewrap), so learner code is graded WITHOUT a "
            "sandbox: it still runs in a separate process with CPU, memory and file-size limits, and verdicts are "
            "still computed outside it, but it can read files it should not (source/, solutions/, other "
            "submissions) and write to the course folder. Do not grade a class like this.")


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def other_site_packages() -> list[Path]:
    """Package folders other than this environment's: the base interpreter's, and the system's."""
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
    found = {Path(base["purelib"]), Path(base["platlib"]), *Path("/usr/lib").glob("python3*/dist-packages"),
             *Path("/usr/local/lib").glob("python3*/dist-packages"),
             *Path("/usr/local/lib").glob("python3*/site-packages")}
    return sorted(p for p in found if p.is_dir() and p != site_packages())


def wrap(argv: list[str], *, hide: list[Path] = (), binds: dict[Path, Path] | None = None,
         writable: dict[Path, Path] | None = None, workdir: str = "/tmp",
         hide_packages: bool = True, env: dict[str, str] | None = None, limits: Limits = Limits()) -> list[str]:
    """The command line that runs ``argv`` sandboxed and limited.

    Args:
        argv: the program and its arguments, as seen inside the sandbox.
        hide: extra folders to replace with an empty tmpfs (the course folder and the repository always are).
        binds: read-only bind mounts {outside path: inside path}, made after hiding.
        writable: read-write bind mounts {outside path: inside path}.
        workdir: the working directory inside the sandbox.
        hide_packages: hide torch, sympy and the like (the check worker; nbgrader's kernel keeps them).
        env: variables to set inside the sandbox (None: unset).
        limits: rlimits for the process and everything it starts.
    """
    bwrap = bubblewrap()
    if not bwrap:
        return limits.prlimit() + argv
    command = [bwrap, "--unshare-all", "--die-with-parent",
               "--new-session", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for folder in ("/root", "/home", str(REPO), *map(str, hide)):
        if Path(folder).exists():
            command += ["--tmpfs", folder]
    # The interpreter and its libraries may live under a hidden folder (a venv in the repository, pyenv in ~).
    for needed in {Path(sys.prefix), Path(sys.base_prefix)}:
        command += ["--ro-bind", str(needed), str(needed)]
    if hide_packages:
        for folder in other_site_packages():  # a learner can put any of them on sys.path: sympy lives there too
            command += ["--tmpfs", str(folder)]
        for name in HIDDEN_PACKAGES:  # an empty folder would still import, as a namespace package: make it refuse
            if (site_packages() / name).is_dir():
                command += ["--tmpfs", str(site_packages() / name),
                            "--ro-bind", str(HIDDEN_PACKAGE), str(site_packages() / name / "__init__.py")]
    for outside, inside in (binds or {}).items():
        command += ["--ro-bind", str(outside), str(inside)]
    for outside, inside in (writable or {}).items():
        command += ["--bind", str(outside), str(inside)]
    for key, value in (env or {}).items():
        command += ["--unsetenv", key] if value is None else ["--setenv", key, value]
    return limits.prlimit() + command + ["--chdir", workdir, "--", *argv]


def environment(home: str = "/tmp") -> dict[str, str]:
    """A small environment for a sandboxed process: no secrets, one BLAS thread (small matrices run faster)."""
    kept = ("PATH", "LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    keep = {k: v for k, v in os.environ.items() if k in kept}
    return {**keep, "HOME": home, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "MPLCONFIGDIR": f"{home}/.matplotlib", "PYTHONDONTWRITEBYTECODE": "1", "WORKER_HOME": home}


KERNEL_LIMITS = Limits(cpu_seconds=1200)  # a whole notebook: notebook 5 trains for tens of seconds


def kernel_command(argv: list[str], private: Path, cwd: str | None) -> list[str]:
    """nbgrader's kernel, sandboxed: it sees a copy of its submission folder, the course's importable packages
    (the notebooks import labtools, the hidden tests still call autograder), the ``private`` folder that holds its
    connection file and IPC sockets, and nothing else of the course. It has no network: its own network namespace
    has only a loopback of its own."""
    cwd = str(Path(cwd or os.getcwd()).resolve())
    copy = Path(tempfile.mkdtemp(prefix="kernel-submission-"))
    shutil.copytree(cwd, copy, dirs_exist_ok=True)
    atexit.register(shutil.rmtree, copy, ignore_errors=True)
    binds = {}
    for package in ("autograder", "labtools", "data"):
        if (REPO / package).exists():
            binds[REPO / package] = REPO / package
    env = {"HOME": "/tmp", "IPYTHONDIR": "/tmp/.ipython", "MPLCONFIGDIR": "/tmp/.matplotlib",
           "JUPYTER_RUNTIME_DIR": "/tmp/.jupyter-runtime",
           # ipykernel exits when its parent PID looks like init's; inside its own PID namespace it always does.
           # --die-with-parent ends the sandbox with nbgrader instead.
           "JPY_PARENT_PID": None}
    hide = [Path(cwd).parents[2] if len(Path(cwd).parents) > 2 else Path(cwd)]
    return wrap(argv, hide=hide, binds=binds, writable={copy: Path(cwd), private: private}, workdir=cwd,
                hide_packages=False, env=env, limits=KERNEL_LIMITS)
