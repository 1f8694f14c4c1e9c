"""The attack catalogue, on all three grading paths: ``python -m autograder grade``, ``nbgrader autograde`` and the
class run ``python -m autograder autograde``.

Every attack is an answer cell of notebook 1. Most try to get the exercise's points without doing it: reach
something outside its sandbox that holds the solution (a server on loopback, a file anywhere on the host, an
installed or packed library), or fool the grader in its own process. Where the attack works it returns the right
answer, so the score is the measurement: each attacked exercise must earn 0 on every path, and the class run must
grade the honest students exactly as serial ``nbgrader autograde`` does. The others go for the machine (processes,
disks, output, a cell no parser takes): they must be contained, costing classmates nothing.

The three paths run in one network namespace of their own (``unshare --net``), so that the scans below touch
nothing else on the machine: this file re-runs itself there as a script. Notebook 1 has four exercises, so each
attacker carries four attacks, one per exercise.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]
NB = "01_nudging"
SENTINEL_PORT = 47613  # a server on the namespace's loopback that hands the solution to whoever connects


def solution_of(grade_id: str) -> str:
    """The course's solution of one answer cell, nbgrader's markers stripped (what the attacks try to get)."""
    from autograder.course import solution_version
    from autograder.contract import assignments

    nb = solution_version(nbformat.read(assignments()[NB], as_version=4))
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


# ----------------------------------------------------------------------------------------------- the attacks
# Each defines the exercise's function only if the attack succeeded; otherwise the function is left a stub.

REACH_THE_NETWORK = f"""
import socket
def central_difference(f, x, h):
    raise NotImplementedError()
ports = {{{SENTINEL_PORT}}}
for table in ("/proc/net/tcp", "/proc/net/tcp6"):  # and everything listening where this code runs
    try:
        for line in open(table).read().splitlines()[1:]:
            if line.split()[3] == "0A":
                ports.add(int(line.split()[1].rsplit(":", 1)[1], 16))
    except OSError:
        pass
for port in sorted(ports):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as connection:
            connection.sendall(b"central_difference\\n")
            exec(connection.makefile().read())
    except OSError:
        pass
"""

READ_THE_HOST = """
import json, os
def numerical_gradient(f, x, h=1e-5):
    raise NotImplementedError()
def answers_in(path):
    if os.path.islink(path) or not os.path.isfile(path):  # a named pipe would wait for a writer forever
        return []
    try:
        cells = json.load(open(path))["cells"]
        found = ["".join(c["source"]) for c in cells
                 if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "numerical_gradient"]
    except Exception:  # not a notebook after all, or not readable from here
        return []
    return found
candidates = {paths!r}
for top in ("/opt", "/srv", "/var", "/root", "/home", "/work", "/tmp"):
    for folder, dirs, files in os.walk(top):  # the tree in reach, links not followed, 12 folders deep
        dirs[:] = [d for d in dirs if d not in ("site-packages", ".venv", ".git", "node_modules")
                   and folder.count("/") < 12]
        candidates += [os.path.join(folder, name) for name in files if name.endswith(".ipynb")]
solved = [source for path in candidates for source in answers_in(path) if "### BEGIN SOLUTION" in source]
if solved:  # a course notebook, with its solution between nbgrader's markers
    exec(solved[0].replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""))
"""

IMPORT_FROM_ANYWHERE = """
import os, sys
def tanh_network_gradients(x, w1, b1, w2, t):
    raise NotImplementedError()
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_Blocker"]
for top in ("/usr", "/opt", "/root", "/work", "/srv", "/var", "/home"):
    for folder, dirs, files in os.walk(top):  # every package folder and packed wheel in reach, 12 folders deep
        if folder.endswith(("site-packages", "dist-packages")):
            sys.path.append(folder)
        if folder.endswith(("site-packages", "dist-packages")) or folder.count("/") >= 12:
            dirs[:] = []
        sys.path += [os.path.join(folder, name) for name in files if name.startswith("sympy-") and name.endswith(".whl")]
try:
    import sympy
    def tanh_network_gradients(x, w1, b1, w2, t):
        a, b, c = sympy.symbols("a b c")
        loss = (c * sympy.tanh(a * x + b) - t) ** 2
        point = {a: w1, b: b1, c: w2}
        return tuple(float(sympy.diff(loss, v).subs(point)) for v in (a, b, c))
except ImportError:
    pass
"""

KILL_THE_PARENT = """
import os, signal
def log_square_trace(x):
    os.kill(os.getppid(), signal.SIGKILL)
    os.kill(1, signal.SIGKILL)
"""

CLAIM_A_PASS = """
print("numerical_gradient: all hidden checks passed.")
try:  # and for the instructor who opens this in Formgrader, a script with their rights (it could set every grade)
    from IPython.display import HTML, Javascript, display
    display(HTML("<script>fetch('/formgrader/api/grade/1', {method: 'PUT'})</script>"), Javascript("alert(1)"))
except ImportError:  # the check worker has no IPython
    pass
def numerical_gradient(f, x, h=1e-5):
    return [0.0 for _ in x]
"""

EXIT = """
import os
def log_square_trace(x):
    os._exit(0)
"""

FORGE_THE_REPLY = """
import struct, sys, time
def tanh_network_gradients(x, w1, b1, w2, t):
    frame = sys._getframe()
    while frame.f_code.co_name != "answer":  # the worker's own frame that answers the grader's request
        frame = frame.f_back
    connection, message = frame.f_locals["self"], frame.f_locals["message"]
    data = b'{"reply": %d, "ok": {"result": [' % message["id"] + b"[]," * 6_000_000 + b"[]]}}"
    connection.writer.write(struct.pack(">I", len(data)) + data)
    connection.writer.flush()
    time.sleep(60)
"""

# Attacks on the machine rather than the grade: each runs when its cell runs (in the kernel and in the check
# worker), leaves its exercise a stub, and must cost its author nothing more and the classmates nothing at all.
START_PROCESSES = """
import os
started = 0
for _ in range(200):  # a fork bomb's first generation
    try:
        if os.fork() == 0:
            os._exit(0)
        started += 1
    except OSError:
        break
def central_difference(f, x, h):
    raise NotImplementedError()
"""

FILL_THE_DISKS = """
import os, tempfile
block = b"x" * (1 << 20)
for folder in (tempfile.gettempdir(), "/dev/shm", os.getcwd(), os.path.expanduser("~"), "/"):
    try:
        with open(os.path.join(folder, "filler"), "wb") as filler:
            for _ in range(2048):  # 2 GiB, or until the folder is full or read-only
                filler.write(block)
    except OSError:
        pass
def numerical_gradient(f, x, h=1e-5):
    raise NotImplementedError()
"""

FLOOD_THE_OUTPUT = """
import sys
for _ in range(40):  # 40 MB of output, and as much again on stderr
    print("y" * 1_000_000)
    print("z" * 1_000_000, file=sys.stderr)
def tanh_network_gradients(x, w1, b1, w2, t):
    raise NotImplementedError()
"""

NOT_PYTHON = "def log_square_trace(x):\n    return x\0\n"  # a null byte: compile() refuses it outright

MEMORISED = "# a table of slopes, recorded from a grade of this very notebook with the solution in place\n"


def memorised(nb: nbformat.NotebookNode, course: Path) -> nbformat.NotebookNode:
    """``nb`` (central_difference solved) with that answer put back to its stub and, in a cell added below it, a
    table of every slope the trusted grade of ``nb`` asks for, under the seed that grade draws its cases from in
    ``course`` (its grading secret known, as no learner knows it): the strongest table a learner could have. Pasting
    it changes the program, and so the cases."""
    from autograder import check
    from autograder.checks.harness.diagnostics import case_seed
    from autograder.contract import assignments
    from autograder.tools.solutions import solution_namespace
    from autograder.trust import verdicts
    from autograder.trust.secret import course_secret

    seed = verdicts.program_seed(verdicts.program(nb, nbformat.read(assignments()[NB], as_version=4))[0],
                                 course_secret(course))
    namespace, slopes = dict(solution_namespace(NB)), {}

    def recording(f, x, h=1e-5):
        key = (repr(x), repr(h), repr(float(f(x + h))))
        slopes[key] = float(solution(f, x, h))
        return slopes[key]

    solution, namespace["central_difference"] = namespace["central_difference"], recording
    with case_seed(seed):
        check("central_difference", namespace, quiet=True)
    nb = nbformat.from_dict(nb)
    at = next(n for n, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "central_difference")
    nb.cells[at].source = "def central_difference(f, x, h):\n    raise NotImplementedError()\n"
    table = (f"{MEMORISED}SLOPES = {slopes!r}\n\ndef central_difference(f, x, h=1e-5):\n"
             "    return SLOPES[(repr(x), repr(h), repr(float(f(x + h))))]\n")
    exec(table, namespace)
    with case_seed(seed):  # the control: where it was recorded, the table passes (or this attack proves nothing)
        check("central_difference", namespace, quiet=True)
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(table))
    return nb


ATTACKERS = {
    "reaches-out": {"central_difference": REACH_THE_NETWORK, "numerical_gradient": READ_THE_HOST,
                    "tanh_network_gradients": IMPORT_FROM_ANYWHERE, "log_square_trace": KILL_THE_PARENT},
    "fools-the-grader": {"central_difference": MEMORISED, "numerical_gradient": CLAIM_A_PASS,
                         "log_square_trace": EXIT, "tanh_network_gradients": FORGE_THE_REPLY},
    "exhausts": {"central_difference": START_PROCESSES, "numerical_gradient": FILL_THE_DISKS,
                 "tanh_network_gradients": FLOOD_THE_OUTPUT, "log_square_trace": NOT_PYTHON},
}
WHY = {  # what the grade says of each attacked exercise: the attack failed, and learner code is told why
    "reaches-out": {"central_difference": "not written yet", "numerical_gradient": "not written yet",
                    "tanh_network_gradients": "not written yet", "log_square_trace": "got None"},  # killing survived
    "fools-the-grader": {"central_difference": "KeyError", "numerical_gradient": "got list",
                         "log_square_trace": "ended the process", "tanh_network_gradients": "not an answer"},
    "exhausts": {"central_difference": "not written yet", "numerical_gradient": "not written yet",
                 "tanh_network_gradients": "not written yet", "log_square_trace": "null"},
}
# The same attacker's own markdown cell: raw HTML, and a link that runs a script when clicked.
SCRIPT_IN_MARKDOWN = "notes\r\r<img src=x onerror=\"fetch('/formgrader/api/grade/1')\"> [see](javascript:alert(1))"
# ... and its last cell: messages forged on the kernel's own session, which nbformat cannot save (an execution
# count that is a script, an output without its fields), then the kernel's death before the reply that would
# overwrite the count. Once, nbgrader dropped the whole submission for them.
FORGED_MESSAGES = """
kernel = get_ipython().kernel
for kind, content in [("execute_result", {"data": {"text/plain": "x"}, "metadata": {}, "execution_count": "<script>"}),
                      ("display_data", {"data": 5}), ("execute_input", {"code": "", "execution_count": "<b>in</b>"})]:
    kernel.session.send(kernel.iopub_socket, kind, content, parent=kernel.get_parent("shell"), ident=kind.encode())
import os, time
time.sleep(1)
os._exit(0)
"""
HONEST = {"full-marks": 10.0, "untouched": 0.0, "mistake": 8.0}
DEMO_ATTACKER = "attacker"  # make demo's: silences the checks, writes the gradebook, kills its parent (tools/demo.py)


# ------------------------------------------------------------------------------------------------ the course

def planted_places(course: Path) -> list[Path]:
    """Where a host keeps copies of the source notebook (with its solutions) that no submission may read."""
    return [course / "source" / NB / f"{NB}.ipynb", REPO / "source" / NB / f"{NB}.ipynb",
            Path("/opt") / f"planted-{course.name}" / "course.ipynb",
            Path("/srv") / f"planted-{course.name}" / "exchange" / "inbound" / f"{NB}.ipynb",
            Path("/var/tmp") / f"planted-{course.name}" / "backup.ipynb",
            Path.home() / f"planted-{course.name}" / "notes.ipynb"]


def build(course: Path) -> dict[str, nbformat.NotebookNode]:
    """A course folder with the class (attackers and honest students) submitted, and copies of the source
    notebook planted around the host. Returns the class's notebooks by student id."""
    from autograder.course import SCRATCH_COURSE_CONFIG
    from autograder.tools.demo import submissions

    shutil.copytree(REPO / "source" / NB, course / "source" / NB, ignore=shutil.ignore_patterns(".hypothesis"))
    (course / "nbgrader_config.py").write_text(SCRATCH_COURSE_CONFIG)
    nbgrader(course, "generate_assignment", NB)
    for place in planted_places(course)[2:]:
        place.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "source" / NB / f"{NB}.ipynb", place)
    honest = submissions(NB, course)
    everyone = {student: honest[student] for student in [*HONEST, DEMO_ATTACKER]}
    paths = [str(p) for p in planted_places(course)]
    for student, attacks in ATTACKERS.items():
        nb = nbformat.from_dict(honest["full-marks"])
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in attacks and attacks[grade_id] is not MEMORISED:
                cell.source = attacks[grade_id].replace("{paths!r}", repr(paths))
        everyone[student] = memorised(nb, course) if MEMORISED in attacks.values() else nb
        if CLAIM_A_PASS in attacks.values():
            everyone[student].cells.insert(1, nbformat.v4.new_markdown_cell(SCRIPT_IN_MARKDOWN))
            everyone[student].cells.append(nbformat.v4.new_code_cell(FORGED_MESSAGES))
    for student, nb in everyone.items():
        path = course / "submitted" / student / NB / f"{NB}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    return everyone


def unplant(course: Path) -> None:
    for place in planted_places(course)[2:]:
        shutil.rmtree(place.parent if place.parent.name != "inbound" else place.parents[2], ignore_errors=True)


def nbgrader(course: Path, *args) -> str:
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def scores(course: Path) -> dict[str, dict[str, float]]:
    """Each student's points per exercise (nbgrader's test cells, by exercise id), from the gradebook."""
    from autograder.tools.bench_grading import gradebook_cells
    from autograder.contract import exercise_id

    found = {}
    for (student, _, cell, kind), value in gradebook_cells(course, NB).items():
        if kind == "grade":
            found.setdefault(student, {})[exercise_id(cell)] = value[0] or 0.0
    return found


def scripts(course: Path) -> list[str]:
    """What of the autograded notebooks (what Formgrader and the feedback render) could run in a browser: outputs
    of a kind that is not inert, and the learner's markdown shown as markdown (not as literal text)."""
    from autograder.course.preprocessors import INERT_OUTPUTS

    found = []
    for path in sorted(course.glob(f"autograded/*/{NB}/{NB}.ipynb")):
        for n, cell in enumerate(nbformat.read(path, as_version=4).cells):
            kinds = {kind for output in cell.get("outputs", []) for kind in output.get("data", {})}
            found += [f"{path.parts[-3]} cell {n}: {kind}" for kind in sorted(kinds - set(INERT_OUTPUTS))]
            if cell.get("execution_count") is not None and type(cell.execution_count) is not int:
                found.append(f"{path.parts[-3]} cell {n}: an execution count of the learner's")
            if cell.cell_type == "markdown" and "<img" in cell.source:  # literal text holds no "<" of theirs
                found.append(f"{path.parts[-3]} cell {n}: the learner's markdown as markdown")
    return found


# ------------------------------------------------------------------------------------------------ the paths

def serve_the_solution(stop: threading.Event, reached: list) -> None:
    """The sentinel: whoever connects gets the solution of the exercise it names (and is noted)."""
    server = socket.create_server(("127.0.0.1", SENTINEL_PORT))
    server.settimeout(0.2)
    while not stop.is_set():
        try:
            connection, _ = server.accept()
        except OSError:
            continue
        with connection:
            reached.append("connected")
            connection.settimeout(2)
            name = connection.makefile().readline().strip()
            connection.sendall(solution_of(name).encode())
    server.close()


def without_the_sandbox(course: Path) -> dict[str, bool]:
    """Whether each attack that reaches out gets its exercise's points when nothing stops it: run here, in this
    process, with the host's files, packages and loopback in reach. An attack that fails here proves nothing."""
    from autograder import CheckFailure, check
    from autograder.tools.solutions import solution_namespace

    paths = [str(p) for p in planted_places(course)]
    found = {}
    for exercise, attack in ATTACKERS["reaches-out"].items():
        if attack is KILL_THE_PARENT:
            continue
        namespace = dict(solution_namespace(NB))
        exec(attack.replace("{paths!r}", repr(paths)), namespace)
        try:
            check(exercise, namespace, quiet=True)
            found[exercise] = True
        except CheckFailure:
            found[exercise] = False
    return found


def all_paths(work: Path) -> dict:
    """Run the class through the three paths (here, inside the test's network namespace); what each gave."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    stop, reached = threading.Event(), []
    sentinel = threading.Thread(target=serve_the_solution, args=(stop, reached), daemon=True)
    sentinel.start()
    serial, parallel = work / "serial", work / "parallel"
    try:
        everyone = build(serial)
        shutil.copytree(serial, parallel)
        controls = without_the_sandbox(serial)
        reached.clear()  # the controls' own visit
        started, seconds = time.monotonic(), {}
        one_by_one = {}
        for student in ATTACKERS:
            done = subprocess.run([sys.executable, "-m", "autograder", "grade", "--json",
                                   str(serial / "submitted" / student / NB / f"{NB}.ipynb")], cwd=REPO,
                                  capture_output=True, text=True, timeout=900)
            one_by_one[student] = {e["id"]: [e["score"], e["message"]] for e in json.loads(done.stdout)["exercises"]}
        seconds["grade"], started = time.monotonic() - started, time.monotonic()
        nbgrader(serial, "autograde", NB)
        seconds["nbgrader"], started = time.monotonic() - started, time.monotonic()
        run = subprocess.run([sys.executable, "-m", "autograder", "autograde", NB, "--workers", "2"], cwd=parallel,
                             capture_output=True, text=True, timeout=1200)
        seconds["class run"] = time.monotonic() - started
        from autograder.tools.bench_grading import differences, gradebook_cells

        return {"grade": one_by_one, "nbgrader": scores(serial), "class run": scores(parallel),
                "class run output": run.stdout + run.stderr, "class run code": run.returncode,
                "differences": differences(gradebook_cells(serial, NB), gradebook_cells(parallel, NB)),
                "reached": reached, "students": sorted(everyone), "seconds": seconds, "controls": controls,
                "scripts": scripts(serial) + scripts(parallel),
                "fillers": [str(p) for p in [*work.rglob("filler"), Path(tempfile.gettempdir(), "filler"),
                                             Path.home() / "filler"] if p.exists()]}
    finally:
        stop.set()
        unplant(serial)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root's unshare --net")
def test_every_attack_earns_nothing_and_harms_nobody_on_every_path(tmp_path):
    from conftest import NO_SANDBOX, SANDBOX_SKIP  # here, not at the top: this file also runs as a script

    if NO_SANDBOX:
        pytest.skip(f"{SANDBOX_SKIP}{NO_SANDBOX}")
    done = subprocess.run(["unshare", "--net", sys.executable, __file__, str(tmp_path)], capture_output=True,
                          text=True, timeout=2400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads((tmp_path / "found.json").read_text())
    assert found["controls"] == dict.fromkeys(["central_difference", "numerical_gradient", "tanh_network_gradients"],
                                              True), "an attack that does not work even unsandboxed proves nothing"
    assert found["reached"] == [], "learner code reached the sentinel on loopback"
    assert found["fillers"] == [], "learner code wrote outside its sandbox's own folders"
    assert found["scripts"] == [], "a graded notebook holds what would run in the instructor's browser"
    assert found["class run code"] == 0, found["class run output"]
    for student, exercises in found["grade"].items():  # each for its own reason, as the grade tells the learner
        for exercise, (score, message) in exercises.items():
            assert score == 0 and WHY[student][exercise] in message, (student, exercise, score, message)
    for path in ("nbgrader", "class run"):
        for student in [*ATTACKERS, DEMO_ATTACKER]:
            earned = {e: s for e, s in found[path][student].items() if s}
            assert not earned, f"{student} earned points under {path}: {earned}"
    for path in ("nbgrader", "class run"):
        assert {s: sum(found[path][s].values()) for s in HONEST} == HONEST, path
    assert not found["differences"], found["differences"]


if __name__ == "__main__":  # inside the test's own network namespace
    work = Path(sys.argv[1])
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        os.environ[var] = tempfile.mkdtemp(prefix=var.lower(), dir=work)
    (work / "found.json").write_text(json.dumps(all_paths(work)))
