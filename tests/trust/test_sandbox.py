"""The sandbox sees an allowlist: what each role may import and read, and nothing else of the host.

Each test starts a sandboxed interpreter (about 0.2 s; 3 s for the kernel role, which imports torch) and probes it
from the inside, as learner code would.
"""
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from autograder.trust import sandbox
from conftest import REPO, requires_sandbox

pytestmark = requires_sandbox


def run(code: str, **wrap_args) -> subprocess.CompletedProcess:
    command = sandbox.wrap([sys.executable, "-I", "-c", code], **wrap_args)
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=sandbox.environment())


def seen(paths, **wrap_args) -> dict[str, bool]:
    """Which of ``paths`` exist inside a sandbox of that kind."""
    done = run(f"import json, os; print(json.dumps({{p: os.path.lexists(p) for p in {list(map(str, paths))!r}}}))",
               **wrap_args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def planted():
    """Files a learner must not reach, planted where a host keeps such things: /opt, /srv, /var, a home folder,
    next to the course, and a package folder on disk that no role needs."""
    places = [Path(tempfile.mkdtemp(prefix="planted-", dir=folder)) for folder in ("/opt", "/srv", "/var/tmp")]
    places += [Path(tempfile.mkdtemp(prefix="planted-", dir=Path.home())),
               Path(tempfile.mkdtemp(prefix="planted-", dir=REPO.parent))]
    for place in places:
        (place / "secret.txt").write_text("the solution")
    yield [place / "secret.txt" for place in places]
    for place in places:
        (place / "secret.txt").unlink()
        place.rmdir()


def test_nothing_of_the_host_outside_the_allowlist_exists_in_the_worker(planted):
    site = sandbox.sysconfig.get_paths()["purelib"]
    absent = [*planted, REPO / "source", REPO / "solutions", REPO / "autograder", REPO / "nbgrader_config.py",
              "/opt", "/srv", "/var", "/home", "/etc/passwd", f"{site}/torch", f"{site}/sympy", f"{site}/micrograd",
              f"{site}/nbgrader", f"{site}/distributed", f"{site}/__pycache__", "/usr/bin", "/usr/lib/python3/dist-packages",
              "/usr/share/python-wheels"]
    found = seen(absent)
    assert not any(found.values()), [p for p, there in found.items() if there]
    assert all(seen([f"{site}/numpy", sys.executable]).values())


@pytest.mark.parametrize("library", ["torch", "sympy", "micrograd", "autograd", "IPython", "ipywidgets", "nbformat",
                                     "dask", "nbgrader", "autograder", "labtools"])
def test_the_worker_can_import_numpy_the_given_cells_display_libraries_and_the_standard_library_only(library):
    """No import blocker is involved: the library's files are not there."""
    done = run(f"import numpy, json, ctypes, decimal, matplotlib.pyplot, tqdm.auto, threadpoolctl\nimport {library}")
    assert "ModuleNotFoundError" in done.stderr and done.returncode == 1, done.stderr
    assert f"No module named '{library}'" in done.stderr, done.stderr


def test_sandbox_roots_are_read_only_and_tmp_is_small():
    """The empty root and /dev cannot be written (writing to /dev/null still works); /tmp fills up at its size."""
    done = run("import errno, os\n"
               "for path in ('/made-here', '/dev/made-here', '/usr/lib/made-here'):\n"
               "    try:\n        open(path, 'w')\n        print('wrote', path)\n"
               "    except OSError as error:\n        print(errno.errorcode[error.errno])\n"
               "open('/dev/null', 'w').write('fine')\n"
               "chunk = b'x' * (16 << 20)\nwritten = 0\n"
               "try:\n"
               "    for i in range(100):\n"
               "        with open(f'/tmp/fill{i}', 'wb') as f:\n            f.write(chunk)\n"
               "        written += len(chunk)\n"
               "except OSError as error:\n    print(errno.errorcode[error.errno], written >> 20)\n")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines[:3] == ["EROFS", "EROFS", "EROFS"], done.stdout
    assert lines[3] == "ENOSPC" and int(lines[4]) <= sandbox.WORKER.tmp_bytes >> 20, done.stdout


LOWER_THE_AUTOGROUP = ("import errno\ntry:\n    with open('/proc/self/autogroup', 'w') as own:\n        own.write('19')\n"
                       "    print('lowered')\nexcept OSError as error:\n    print(errno.errorcode[error.errno])\n")


def test_a_sandbox_cannot_lower_its_autogroups_priority():
    """With the scheduler's autogroups, the processes of a session (each sandbox is one) share one weight, which a
    nice written to /proc/self/autogroup lowers, with no system call the filter could refuse: a thread that spins
    at that weight is runnable all the time while it hardly runs. The sandbox's /proc is read-only."""
    assert run(LOWER_THE_AUTOGROUP).stdout.split() == ["EROFS"]
    if os.path.exists("/proc/self/autogroup"):  # outside, in a session of its own, the same write lowers it
        outside = subprocess.run([sys.executable, "-c", LOWER_THE_AUTOGROUP], capture_output=True, text=True,
                                 start_new_session=True, timeout=60)
        assert outside.stdout.split() == ["lowered"], outside.stdout + outside.stderr


def test_the_kernel_role_imports_everything_the_notebooks_and_the_kernel_side_of_the_course_import(monkeypatch):
    """KERNEL's package list is enough: every top-level module a course notebook imports, and the modules the
    notebooks' helpers and `run_check` load, import inside the kernel's sandbox; the grading machinery and the
    checks (which hold reference answers) do not, while grading."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    modules = {"ipykernel.kernelapp", "mlxtend.data"} | {
        f"labtools.{p.stem}" for p in (REPO / "labtools").glob("*.py") if p.stem != "__init__"}
    for path in REPO.glob("source/*/*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                modules |= imported(cell["source"])
    private = Path(tempfile.mkdtemp())
    code = (f"import importlib\nfor name in {sorted(modules)!r}:\n    importlib.import_module(name)\n"
            "for name in ('nbgrader', 'distributed', 'jupyterlab', 'notebook', 'autograder.checks',\n"
            "             'autograder.trust', 'autograder.course'):\n"
            "    try:\n        importlib.import_module(name)\n        print('importable', name)\n"
            "    except ModuleNotFoundError:\n        pass\n")
    command = sandbox.kernel_command([sys.executable, "-c", code], private, str(private))
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=sandbox.environment())
    private.rmdir()
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""


def imported(source) -> set[str]:
    """The modules a notebook cell imports (IPython's magics and shell escapes dropped)."""
    text = "".join(source) if isinstance(source, list) else source
    tree = ast.parse("\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("%", "!"))))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module)
    return found


def test_the_kernel_works_in_a_sized_copy_of_its_submission_and_reaches_nothing_else(tmp_path, planted, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # as nbgrader sets it while grading
    submission = tmp_path / "student" / "01_nudging"
    submission.mkdir(parents=True)
    (submission / "data.txt").write_text("given")
    (submission / "outside").symlink_to(planted[0])
    with open(submission / "weights.npy", "wb") as huge:  # past the file-size limit: left out, not fatal
        huge.truncate(sandbox.KERNEL_LIMITS.file_bytes + 1)
    probe = (f"import os\nprint(open('data.txt').read(), os.path.exists('weights.npy'))\n"
             "open('data.txt', 'w').write('changed')\n"
             f"print(os.path.exists('outside'), os.path.exists({str(planted[0])!r}), os.path.exists({str(tmp_path)!r}"
             " + '/student/other'))\n"
             f"print(os.path.exists({str(REPO / 'autograder' / 'checks')!r}), os.path.exists({str(REPO / 'source')!r}))\n"
             "try:\n    for i in range(12):\n        open(f'big{i}', 'wb').write(b'x' * (50 << 20))\n"
             "except OSError as error:\n    print(error.errno)\n")
    (tmp_path / "student" / "other").mkdir()
    private = tmp_path / "private"
    private.mkdir()
    command = sandbox.kernel_command([sys.executable, "-c", probe], private, str(submission))
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=sandbox.environment())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["given False", "False False False", "False False"], done.stdout
    assert "28" in done.stdout.split("\n")[3]  # ENOSPC: the copy is a tmpfs of SUBMISSION_BYTES
    assert (submission / "data.txt").read_text() == "given" and not (submission / "big0").exists()


def test_package_paths_come_from_install_records_without_start_up_hooks():
    paths = sandbox.package_paths(("numpy",))
    names = {p.name for p in paths}
    assert "numpy" in names and any(n.startswith("numpy-") and n.endswith(".dist-info") for n in names)
    assert not any(n.endswith(".pth") for n in names)
    kernel = {p.name for p in sandbox.package_paths(sandbox.KERNEL.packages)}
    assert {"torch", "IPython", "matplotlib", "zmq"} <= kernel and not {"nbgrader", "distributed"} & kernel
    # red team 21: threadpoolctl's and pylab's records list bytecode in site-packages' own __pycache__, which holds
    # every single-file module's (the editable install's finder, naming the course's folders, among them)
    assert "threadpoolctl.py" in kernel and "__pycache__" not in kernel


START_A_PROCESS = """
import os, subprocess, sys, threading
found = []
thread = threading.Thread(target=found.append, args=("thread",))
thread.start()
thread.join()
for name, start in (("fork", os.fork), ("subprocess", lambda: subprocess.run([sys.executable, "-c", "pass"])),
                    ("posix_spawn", lambda: os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], {}))):
    try:
        if start() == 0:
            os._exit(0)
        found.append(name)
    except PermissionError:
        pass
print(" ".join(found))
"""


def test_a_check_worker_starts_threads_but_no_process():
    from autograder.trust import remote

    with remote.Zygote() as zygote, remote.Worker(zygote=zygote) as worker:
        worker.run(START_A_PROCESS.replace("print(", "result = ("), "<cell>")
        assert worker.evaluate("found") == ["thread"]
    with remote.Worker() as worker:  # a worker in a sandbox of its own, as when the zygote is gone
        worker.run(START_A_PROCESS.replace("print(", "result = ("), "<cell>")
        assert worker.evaluate("found") == ["thread"]


def test_a_worker_whose_code_kills_its_zygote_still_answers_however_late():
    """Learner code may kill the process that forked its worker (the zygote, its parent): the worker's reply must not
    race the end of its sandbox, or the cause a learner is told would depend on the machine's load."""
    from autograder.trust import remote

    code = ("import os, signal, time\ndef kill_the_parent():\n    os.kill(os.getppid(), signal.SIGKILL)\n"
            "    time.sleep(0.5)  # a loaded machine's delay, made certain\n    return 'still here'\n")
    with remote.Zygote() as zygote, remote.Worker(zygote=zygote) as worker:
        worker.run(code, "<cell>")
        assert worker.evaluate("kill_the_parent()") == "still here"
    with remote.Worker(zygote=zygote) as worker:  # the next exercise: a fresh zygote
        assert worker.evaluate("1 + 1") == 2


def test_the_kernel_starts_threads_but_no_process(tmp_path):
    command = sandbox.kernel_command([sys.executable, "-c", START_A_PROCESS], tmp_path, str(tmp_path))
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=sandbox.environment())
    assert (done.returncode, done.stdout.strip()) == (0, "thread"), done.stderr
    unfiltered = subprocess.run(sandbox.wrap([sys.executable, "-c", START_A_PROCESS]), capture_output=True, text=True,
                                timeout=120, env=sandbox.environment())
    assert unfiltered.stdout.split() == ["thread", "fork", "subprocess", "posix_spawn"], unfiltered.stderr


def test_a_worker_can_move_none_of_the_graders_files_nor_reach_the_zygotes_memory():
    """Its scripts and filter lie on the read-only root, and the zygote, which forks every worker, is not dumpable:
    a worker of the same user can neither write its /proc/<pid>/mem nor trace it."""
    from autograder.trust import remote

    probe = ("import os\nfound = []\n"
             "for name, act in (('rename', lambda: os.rename('/grader', '/tmp/grader')),\n"
             "                  ('replace', lambda: open('/grader/no-new-processes.bpf', 'wb')),\n"
             "                  ('memory', lambda: open(f'/proc/{os.getppid()}/mem', 'r+b'))):\n"
             "    try:\n        act()\n        found.append(name)\n    except OSError:\n        pass\n")
    with remote.Zygote() as zygote, remote.Worker(zygote=zygote) as worker:
        worker.run(probe, "<cell>")
        assert worker.evaluate("found") == []


PRIVATE_FOLDER = """
import ipykernel.connect, os
folder = os.path.dirname(ipykernel.connect.get_connection_file())
for name, act in (("a file", lambda: open(os.path.join(folder, "filler"), "wb")),
                  ("a link", lambda: os.symlink("/tmp", os.path.join(folder, "link"))),
                  ("the connection file", lambda: open(ipykernel.connect.get_connection_file(), "a"))):
    try:
        act()
        print("private folder: wrote", name)
    except OSError:
        print("private folder: refused", name)
"""


@pytest.mark.slow  # a kernel, through nbgrader
def test_once_the_kernel_runs_learner_code_its_private_host_folder_is_read_only(tmp_path):
    """The folder it shares with nbgrader lies on the host's disk, without a size limit: learner code may not add to
    it (a disk filled, a tree nothing can remove, a socket swapped for a link)."""
    from autograder.contract import assignments

    name = "01_nudging"
    nb = nbformat.read(REPO / "solutions" / name / f"{name}.ipynb", as_version=4)
    nb.cells.insert(1, nbformat.v4.new_code_cell(PRIVATE_FOLDER))
    path, page = tmp_path / f"{name}.ipynb", tmp_path / "feedback.html"
    nbformat.write(nb, path)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--json", "--feedback", str(page)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and name in assignments(), done.stdout + done.stderr
    shown = page.read_text()
    for what in ("a file", "a link", "the connection file"):  # printed by the cell (its source shows neither)
        assert f"private folder: refused {what}" in shown and f"private folder: wrote {what}" not in shown


KERNEL_SCHEDULING = """
import os
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
print("kernel filter:", status["Seccomp"].strip())
try:
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    print("kernel idle scheduling: set")
except PermissionError:
    print("kernel idle scheduling: refused")
"""


@pytest.mark.slow  # a kernel, through nbgrader
def test_a_kernel_starts_under_the_filter_through_nbgrader_and_cannot_lower_its_priority(tmp_path):
    """ZeroMQ sets each of its threads' scheduling policy (the normal one, again) as the kernel starts, and aborts
    if that is refused: a filter refusing every policy change had every kernel die before it answered nbgrader.
    The graded notebook's kernel must start, run under the filter (seccomp mode 2), and be refused idle priority."""
    from autograder.contract import assignments

    name = "01_nudging"
    nb = nbformat.read(REPO / "solutions" / name / f"{name}.ipynb", as_version=4)
    nb.cells.insert(1, nbformat.v4.new_code_cell(KERNEL_SCHEDULING))
    path, page = tmp_path / f"{name}.ipynb", tmp_path / "feedback.html"
    nbformat.write(nb, path)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--json", "--feedback", str(page)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and name in assignments(), done.stdout + done.stderr
    assert all(e["passed"] for e in json.loads(done.stdout)["exercises"]), done.stdout
    shown = page.read_text()
    if sandbox.no_new_processes():
        assert "kernel filter: 2" in shown and "kernel idle scheduling: refused" in shown, shown


# What learner code tries against the machine from inside (a red team's findings): each line prints what got through.
BREAK_OUT = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
found = []
try:  # process 1 is the sandbox's init: writing code into its memory would run it outside the filter
    open("/proc/1/mem", "r+b")
    found.append("init's memory")
except OSError:
    pass
target = os.environ.get("PROBE_FOLDER", "/tmp")
before = os.stat(target).st_mode
os.chmod(target, 0o777)
if os.stat(target).st_mode != before:
    found.append("chmod")
try:
    os.setxattr(target, "user.probe", b"1")
    found.append("xattr")
except OSError:
    pass
if libc.memfd_create(b"probe", 0) >= 0:
    found.append("memfd")
if libc.shmget(0, 1 << 20, 0o1600) >= 0:  # IPC_PRIVATE, IPC_CREAT | 0600
    found.append("System V memory")
if libc.syscall(425, 8, bytes(120)) >= 0:  # io_uring_setup(8 entries): its operations bypass the filter
    found.append("io_uring")
if libc.semget(0, 32000, 0o1600) >= 0:  # 32,000 semaphores: 2 MiB of kernel memory
    found.append("System V semaphores")
if libc.msgget(0, 0o1600) >= 0:
    found.append("System V messages")
with open("/tmp/probe-reserve", "wb") as reserve:  # FALLOC_FL_KEEP_SIZE: disk the file-size limit does not see
    if libc.fallocate(reserve.fileno(), 1, ctypes.c_long(0), ctypes.c_long(1 << 20)) == 0:
        found.append("fallocate")
if libc.syscall(248, b"user", b"probe", b"x", 1, -3) >= 0:  # add_key to the session keyring
    found.append("keyring")
old_limit = (ctypes.c_ulong * 2)()
if libc.prlimit(os.getppid(), 9, None, old_limit) == 0:  # another process's address-space limit
    found.append("another's limits")
if libc.setpriority(0, os.getppid(), 0) == 0:
    found.append("another's priority")
if libc.unshare(0x10000000 | 0x20000) == 0:  # CLONE_NEWUSER | CLONE_NEWNS: every capability again, in there
    found.append("namespace")
# Last, since they slow what follows: a priority below the one it started with, or a policy under which a spinning
# thread is runnable all the time while it hardly runs (its sandbox then never counts as sleeping). The normal policy
# again is what ZeroMQ sets for each of its threads, and its refusal killed every kernel.
normal = ctypes.byref(ctypes.c_int(0))
if libc.sched_setscheduler(0, 0, normal) != 0 or libc.setpriority(0, 0, 0) != 0:  # SCHED_OTHER; nice 0
    found.append("normal priority refused")
if libc.setpriority(0, 0, 19) == 0:
    found.append("its own priority lowered")
for name, policy in (("batch", 3), ("idle", 5)):  # SCHED_BATCH, SCHED_IDLE
    if libc.sched_setscheduler(0, policy, normal) == 0:
        found.append(f"{name} scheduling")
found += sorted(name for name in os.environ if name.startswith("HOST_SECRET"))
print(found)
"""


def test_learner_code_reaches_neither_the_init_nor_memory_or_modes_outside_the_limits(tmp_path, monkeypatch):
    """In the kernel's sandbox and in a check worker's: process 1 (ours, sandbox_init.py) is not dumpable, a mode
    change does nothing (the kernel owns its private host folder), no attribute is set, no memory is held that no
    limit counts, no io_uring runs operations the filter cannot see, no namespace of its own gives capabilities
    back, no System V semaphore or message queue holds kernel memory, no disk is reserved past a file's end, no
    keyring is reached, no other process's limits or priority are touched, no priority is lowered nor a scheduling
    policy other than the normal one set (which is set again freely), and nothing of the caller's environment is
    inside."""
    from autograder.trust import remote

    monkeypatch.setenv("HOST_SECRET_TOKEN", "instructor-secret")
    private = tmp_path / "private"
    private.mkdir(mode=0o500)
    command = sandbox.kernel_command([sys.executable, "-c", f"import os\nos.environ['PROBE_FOLDER'] = {str(private)!r}\n"
                                      + BREAK_OUT], private, str(tmp_path))
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stdout + done.stderr
    assert oct(private.stat().st_mode & 0o777) == "0o500"
    with remote.Zygote() as zygote, remote.Worker(zygote=zygote) as worker:
        worker.run(BREAK_OUT.replace("print(found)", "result = found"), "<cell>")
        assert worker.evaluate("found") == []
    unfiltered = subprocess.run(sandbox.wrap([sys.executable, "-c", BREAK_OUT]), capture_output=True, text=True,
                                timeout=120)
    assert ast.literal_eval(unfiltered.stdout) == ["chmod", "xattr", "memfd", "System V memory", "io_uring",
                                                   "System V semaphores", "System V messages", "fallocate", "keyring",
                                                   "another's limits", "another's priority", "namespace",
                                                   "its own priority lowered", "batch scheduling", "idle scheduling"], \
        unfiltered.stderr
    if os.uname().machine == "x86_64":  # the keyring calls' numbers below are x86-64's
        assert grader_key_found_by(sandbox.wrap([sys.executable, "-c", FIND_THE_GRADERS_KEY])) == [True, False]


# A key in the session keyring, searched for by its description (KEYCTL_SEARCH): what a grader's login session or
# systemd service holds (Kerberos caches, tokens); the search for it, run outside then inside the sandbox.
FIND_THE_GRADERS_KEY = ("import ctypes; libc = ctypes.CDLL(None); libc.syscall.restype = ctypes.c_long\n"
                        "print(libc.syscall(250, 10, -3, b'user', b'grader-secret', 0) > 0)")
HOLD_A_KEY = """
import ctypes, json, subprocess, sys
libc = ctypes.CDLL(None); libc.syscall.restype = ctypes.c_long
libc.syscall(250, 1, None)  # KEYCTL_JOIN_SESSION_KEYRING: a session keyring of its own, with one key
libc.syscall(248, b"user", b"grader-secret", b"token", 5, -3)
for command in ([sys.executable, "-c", sys.argv[1]], json.loads(sys.argv[2])):
    print(subprocess.run(command, capture_output=True, text=True).stdout.strip())
"""


def grader_key_found_by(sandboxed: list[str]) -> list[bool]:
    """[found outside the sandbox, found inside it], from a process whose session keyring holds a key; even with no
    filter, the sandbox's init gives it a fresh, empty session keyring."""
    done = subprocess.run([sys.executable, "-c", HOLD_A_KEY, FIND_THE_GRADERS_KEY, json.dumps(sandboxed)],
                          capture_output=True, text=True, timeout=120)
    return [line == "True" for line in done.stdout.split()]


def test_a_sandbox_ends_whole_with_its_parent_even_when_learner_code_clears_its_own_parent_death_signal(tmp_path):
    marker = f"outlive-{tmp_path.name}"
    code = ("import ctypes, time\nctypes.CDLL(None).prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG: none\n"
            f"print('ready', flush=True)\ntime.sleep(120)  # {marker}\n")
    process = subprocess.Popen(sandbox.kernel_command([sys.executable, "-c", code], tmp_path, str(tmp_path)),
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    process.kill()
    process.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and survivors(marker):
        time.sleep(0.1)
    assert survivors(marker) == []


def survivors(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found
