"""What this machine needs from outside Python, per role, and the command that installs each missing piece.

``make setup`` runs this with the system's ``python3`` before the virtual environment exists (``python3 -m
autograder.prerequisites``), so it imports the standard library only and runs on an older Python too: saying that
Python is too old is one of its jobs. It prints one line per missing piece and exits 1 when a learner's piece is
missing (nothing works without it), 0 otherwise: without the grading pieces a learner still works, ``make grade``
and ``make demo`` still run with a loud warning, and only grading a class is refused (autograder.trust.sandbox).

Roles: a learner needs Python 3.11 with venv, and make; grading needs Linux, GNU env, util-linux's prlimit, a
bubblewrap that can create namespaces, and libseccomp; ``make test`` also drives Chromium; ``make hub`` needs npm.
"""
from __future__ import annotations

import ctypes.util
import os
import platform
import shutil
import subprocess
import sys

MIN_PYTHON = (3, 11)  # pyproject.toml's requires-python; tests/test_prerequisites.py keeps the two the same
# The sandbox's probe: what bubblewrap must do for grading to use it, with every option the sandbox needs of it
# (autograder.trust.sandbox.unusable).
BWRAP_PROBE = ["--unshare-all", "--as-pid-1", "--clearenv", "--ro-bind", "/", "/", "--", "true"]
# Package names: Debian's (apt), Fedora's (dnf), Homebrew's; None where that system has no such package.
PACKAGES = {
    "python": ("python3.11", "python3.11", "python@3.11"),
    "venv": ("python3-venv", None, None),
    "make": ("make", "make", "make"),
    "coreutils": ("coreutils", "coreutils", None),
    "util-linux": ("util-linux", "util-linux", None),
    "bubblewrap": ("bubblewrap", "bubblewrap", None),
    "libseccomp": ("libseccomp2", "libseccomp", None),
    "chromium": ("chromium", "chromium", None),
    "npm": ("npm", "nodejs-npm", "node"),
}
MANAGERS = (("apt-get", "apt install"), ("dnf", "dnf install"), ("brew", "brew install"))


def bubblewrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox learner code here, in a sentence, or None when it can: it is not on PATH, or it
    cannot create the namespaces (a container without user namespaces, a kernel or AppArmor that forbids them)."""
    found = shutil.which("bwrap")
    if not found:
        return "there is no `bwrap` on PATH"
    probe = subprocess.run([found, *BWRAP_PROBE], capture_output=True)
    if probe.returncode == 0:
        return None
    said = probe.stderr.decode(errors="replace").strip().splitlines() or [f"exit code {probe.returncode}"]
    return f"`{found}` cannot create namespaces here ({said[-1]}): user namespaces must be allowed"


def install(package: str) -> str:
    """The command that installs ``package`` (a key of PACKAGES) with this machine's package manager."""
    names = dict(zip([tool for tool, _ in MANAGERS], PACKAGES[package]))
    sudo = "" if hasattr(os, "geteuid") and os.geteuid() == 0 else "sudo "
    for tool, command in MANAGERS:
        if shutil.which(tool) and names[tool]:
            return f"{sudo if tool != 'brew' else ''}{command} {names[tool]}"
    return f"install {PACKAGES[package][0]} (Debian's name) with this system's package manager"


def _gnu_env() -> bool:
    """Whether ``env`` takes --default-signal (GNU coreutils 8.31 or later): the sandbox resets signals with it."""
    try:
        return subprocess.run(["env", "--default-signal", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


def _venv() -> bool:
    try:
        import ensurepip  # noqa: F401 (Debian splits it off into python3-venv; `python3 -m venv` fails without it)
        import venv  # noqa: F401
    except ImportError:
        return False
    return True


def missing(version: tuple[int, ...] = tuple(sys.version_info), system: str = platform.system()) -> list[tuple[str, str]]:
    """(role, line) for every missing piece, in the order to fix them; each line says what it is for and how to
    install it. ``version`` and ``system`` are this interpreter's and this machine's unless given."""
    found = []

    def need(role: str, what: str, why: str, package: str) -> None:
        found.append((role, f"missing ({role}): {what}, {why} -- {install(package)}"))

    if version[:2] < MIN_PYTHON:
        need("learner", f"Python {'.'.join(map(str, MIN_PYTHON))} (this is {'.'.join(map(str, version[:3]))})",
             "then run make with PYTHON=python3.11", "python")
    if not _venv():
        need("learner", "Python's venv and ensurepip", "which make the course's .venv", "venv")
    if not shutil.which("make"):
        need("learner", "make", "which runs every command of the course", "make")
    if system != "Linux":
        found.append(("grading", f"missing (grading): Linux (this is {system}): grading needs its namespaces, /proc "
                                 "and cgroups; learners can work here, grade on a Linux machine"))
        return found
    if not _gnu_env():
        need("grading", "GNU env with --default-signal (coreutils 8.31 or later)", "which starts sandboxes",
             "coreutils")
    if not shutil.which("prlimit"):
        need("grading", "prlimit", "which sets the resource limits of learner code", "util-linux")
    problem = bubblewrap_problem()
    if problem and not shutil.which("bwrap"):
        need("grading", "bubblewrap", "the sandbox learner code is graded in", "bubblewrap")
    elif problem:
        found.append(("grading", f"missing (grading): a usable bubblewrap: {problem}. On Debian: sysctl -w "
                                 "kernel.unprivileged_userns_clone=1; on Ubuntu 24.04: sysctl -w "
                                 "kernel.apparmor_restrict_unprivileged_userns=0; in a container, allow user "
                                 "namespaces (e.g. docker run --privileged)"))
    if not ctypes.util.find_library("seccomp"):
        need("grading", "libseccomp", "the filter that keeps graded code from starting processes", "libseccomp")
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        need("tests", "chromium", "the browser `make test` drives JupyterLab in (those tests skip without it)",
             "chromium")
    if not shutil.which("npm"):
        need("hub", "npm", "which installs the JupyterHub's proxy for `make hub` (configurable-http-proxy; its test "
             "skips without it)", "npm")
    return found


def main() -> int:
    lines = missing()
    for _, line in lines:
        print(line)
    roles = {role for role, _ in lines}
    if "grading" in roles:
        print("Without the grading pieces, `make grade` and `make demo` run with a loud warning (the demo skips its "
              "attacker), and grading a class is refused unless asked for with --without-sandbox; see the README's "
              "set-up section.")
    if not lines:
        print("prerequisites: all there (learner, grading, tests, hub)")
    return 1 if "learner" in roles else 0


if __name__ == "__main__":
    sys.exit(main())
