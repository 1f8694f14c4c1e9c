"""Class runs on real Dask clusters whose workers misbehave, for test_class_grading.py (run inside ``unshare --net``).

``python faulty_workers.py MODE COURSE EXECUTED OUT TIMEOUT``; each task hands back the pickled execution in EXECUTED
instead of grading, unless the student's name says otherwise (Faulty):

- ``local``: a local cluster of one worker process, the run's own: what waits behind a frozen worker waits for its
  replacement, and the snapshot the tasks need is lost with the only worker that held it.
- ``lost``: a scheduler started here, first alone (the run must refuse to start), then with one worker; the task of
  ``bob-ends-cluster`` kills the scheduler.

Writes OUT/report.json: each row, what the run printed, its seconds and, for ``lost``, why it first refused.
"""
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from distributed import Client

from autograder.grade import class_run, on_dask_worker, submission
from autograder.grade.submission import Executed


class DoesNotPickle(Exception):
    """What a task's clean-up can raise: an exception Dask cannot send back."""

    def __reduce__(self):
        raise TypeError("this exception does not pickle")


class Faulty:
    """The task: ``frozen`` stops its worker (SIGSTOP) on its first attempt, ``does-not-pickle`` raises
    DoesNotPickle, ``bob-ends-cluster`` kills the scheduler; every other student gets the stored execution."""

    def __init__(self, executed, folder: Path):
        self.executed, self.folder = executed, folder

    def __call__(self, snapshot, task):
        on_dask_worker.announce_start()  # as execute_submission does once its grading process has started
        if task.student == "frozen" and task.attempt == 1:
            time.sleep(1)  # grading, while the worker's event loop sends the announcement on; then the worker freezes
            (self.folder / "frozen.pid").write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGSTOP)
        if task.student == "does-not-pickle":
            raise DoesNotPickle("raised while removing the scratch folder")
        if task.student == "bob-ends-cluster":
            time.sleep(3)  # long enough for the run to have fetched the result before this one: the cluster ends mid-run
            os.kill(int((self.folder / "scheduler.pid").read_text()), signal.SIGKILL)
            time.sleep(30)
        return Executed(task.student, self.executed.notebooks, "log", 0.1, "faulty")


def main(mode: str, course: Path, executed_path: Path, out: Path, timeout_s: float) -> None:
    fault = Faulty(pickle.loads(executed_path.read_bytes()), out)
    submission.SANDBOXES_IDLE_S = 0.0  # no learner code sleeps here: the deadline a frozen worker meets is seconds
    report, said = {}, out / "said.txt"
    started = time.monotonic()
    with open(said, "w") as printed:
        if mode == "local":
            rows = class_run.grade_class(course, "01_nudging", workers=1, timeout_s=timeout_s, execute=fault,
                                         out=printed)
        else:
            rows = lost(course, fault, out, timeout_s, printed, report)
    report.update(seconds=time.monotonic() - started, said=said.read_text(),
                  rows={r.student: [r.status, r.score, r.note, r.attempts] for r in rows})
    (out / "report.json").write_text(json.dumps(report))


def lost(course: Path, fault: Faulty, out: Path, timeout_s: float, printed, report: dict):
    """A run whose scheduler has no worker (it must not start), then one that loses its scheduler halfway."""
    address = "tcp://127.0.0.1:8786"  # this network namespace's own loopback: nothing else listens here
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--port", "8786",
                                  "--no-dashboard"], stderr=subprocess.DEVNULL)
    (out / "scheduler.pid").write_text(str(scheduler.pid))
    listening(8786)
    class_run.NO_WORKERS_S = 3  # the run's patience with a workerless scheduler, shortened for the test
    started = time.monotonic()
    try:
        class_run.grade_class(course, "01_nudging", scheduler=address, timeout_s=timeout_s, execute=fault, out=printed)
    except class_run.ClassGradingError as refused:
        report["refused"], report["refused after"] = str(refused), time.monotonic() - started
    environment = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                               "--no-dashboard"], env=environment, stderr=subprocess.DEVNULL)
    try:
        # The run's patience (3 s, above) is for a scheduler without workers; this one has one once it has started,
        # which takes longer than that on a loaded machine.
        with Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=120)
        return class_run.grade_class(course, "01_nudging", scheduler=address, timeout_s=timeout_s, execute=fault,
                                     out=printed)
    finally:
        for process in (worker, scheduler):
            process.kill()
            process.wait()


def listening(port: int) -> None:
    """Wait (up to a minute) until something accepts connections on this port."""
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on port {port}")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), float(sys.argv[5]))
