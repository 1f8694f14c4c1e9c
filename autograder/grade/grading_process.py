"""The grading process: one submission's "execute" stage of ``nbgrader autograde``, forked on a Dask worker.

Trusted code (nbgrader, the checks, torch) in a process of its own, limited and in a session of its own, so that
what it starts (the sandboxed kernel, the check workers) dies with it. It writes ``report.json`` and leaves.
"""
from __future__ import annotations

import json
import os
import pickle
import resource
import signal
import tempfile
from pathlib import Path

from autograder.course import quiet_nbgrader
from autograder.grade.cpu import CpuMeter
from autograder.trust.sandbox import Limits


# The grading process (nbgrader, the checks, torch) is trusted code, but it starts the learner's kernel, whose own
# limits (sandbox.KERNEL_LIMITS) must fit under these: an unprivileged process cannot raise a hard limit.
GRADING_LIMITS = Limits(cpu_seconds=3600, memory_bytes=16 << 30, file_bytes=1 << 30, open_files=4096)
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _grade_here(root: str, assignment: str, student: str, config: bytes) -> None:
    """The grading process: nbgrader's autograde, "execute" stage, for one student in the scratch course ``root``.

    Writes ``report.json`` (success and nbgrader's log) and leaves without Python's slow teardown.
    """
    try:
        report = _autograde_here(root, assignment, student, config)
    except BaseException:  # whatever stops nbgrader is the reason this submission failed
        import traceback
        report = {"success": False, "log": traceback.format_exc()}
    try:
        Path(root, "report.json").write_text(json.dumps(report))
    except OSError:  # the run ended and removed the scratch course: nobody waits for the report
        os._exit(1)
    os._exit(0)


def _autograde_here(root: str, assignment: str, student: str, config: bytes) -> dict:
    _become_disposable(root)
    jupyter = Path(root) / ".jupyter"
    for folder in ("config", "data", "runtime", "ipython"):
        (jupyter / folder).mkdir(parents=True, exist_ok=True)
    os.environ.update({
        "JUPYTER_CONFIG_DIR": str(jupyter / "config"), "JUPYTER_DATA_DIR": str(jupyter / "data"),
        "JUPYTER_RUNTIME_DIR": str(jupyter / "runtime"), "IPYTHONDIR": str(jupyter / "ipython"),
        "HYPOTHESIS_STORAGE_DIRECTORY": str(Path(root) / ".hypothesis"),
        # One BLAS/OpenMP thread per process: one grading per core, and small matrices run faster single-threaded.
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    # After the settings above, which torch and BLAS read when they load.
    import torch
    from nbgrader.apps import NbGraderAPI
    from threadpoolctl import threadpool_limits

    quiet_nbgrader()  # this process's stderr is the Dask worker's, which a local cluster prints over the progress bar
    torch.set_num_threads(1)
    threadpool_limits(1)
    config = pickle.loads(config)
    config.CourseDirectory.root = root
    config.CourseDirectory.db_url = f"sqlite:///{root}/gradebook.db"  # the snapshot, whatever the course uses
    meter = CpuMeter("grade")  # counts the sandboxed kernel and check workers too, killed or not
    try:
        outcome = NbGraderAPI(config=config).autograde(assignment, student, force=True, create=True)
        cpu = meter.read()
    finally:
        meter.close()
    return {"success": bool(outcome.get("success")), "log": outcome.get("log") or outcome.get("error") or "",
            "cpu_seconds": cpu}


def _become_disposable(root: str) -> None:
    """Limits, a session of its own, death with the fork server, and every temporary file under ``root``
    (this process leaves with os._exit, so nothing may rely on atexit to clean up after it)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setsid()
    for limit, value in ((resource.RLIMIT_CPU, GRADING_LIMITS.cpu_seconds), (resource.RLIMIT_AS, GRADING_LIMITS.memory_bytes),
                         (resource.RLIMIT_FSIZE, GRADING_LIMITS.file_bytes), (resource.RLIMIT_NOFILE, GRADING_LIMITS.open_files)):
        _, hard = resource.getrlimit(limit)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)  # never above what this machine allows
        resource.setrlimit(limit, (value, value))
    os.chdir(root)
    temporary = Path(root) / "tmp"
    temporary.mkdir()
    os.environ["TMPDIR"] = tempfile.tempdir = str(temporary)


