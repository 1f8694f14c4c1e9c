"""`make hub`'s JupyterHub, driven in a browser through a whole assignment: real Unix accounts for an instructor and
two students, nbgrader's shared exchange, Formgrader, the Assignment List, and `make autograde` (sandboxed, trusted).

The hub is the one `make hub` starts (autograder.tools.hub), with accounts of this run's own names, its state and
exchange in a fresh folder, listening on loopback only. Where the machine cannot make accounts (not root, no
useradd) or has no proxy (`npm ci` not run), the test is skipped and the run's last lines say so in capitals.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from autograder.contract import COURSE_ID
from autograder.tools import hub as hubs
from conftest import solution_notebook
from test_browser import ARTIFACTS, BROWSER_MISSING, CHROMIUM, CHROMIUM_ARGS, sync_playwright

HUB_SKIP = "cannot run the hub here: "
WHY_NOT = hubs.unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.browser,
              pytest.mark.skipif(bool(BROWSER_MISSING), reason=BROWSER_MISSING),
              pytest.mark.skipif(bool(WHY_NOT), reason=f"{HUB_SKIP}{WHY_NOT}")]
ASSIGNMENT = "01_nudging"
START_S = 60
SPAWN_S = 180  # a user's first server: JupyterLab, nbgrader's extensions and Formgrader on a loaded 2-core machine
GRADE_S = 600
# What the second student gets wrong: notebook 1's forward difference where a central one is asked for.
FORWARD = "def central_difference(f, x, h):\n    return (f(x + h) - f(x)) / h\n"
# And what a submission's code would look at, if it could: the exchange, the other student's home, and the course's
# secret, gradebook, sources and submissions. (The path to its own folder exists there, empty but for that folder.)
PROBE = "import os\nprint('seen:', [p for p in {paths!r} if os.path.exists(p)])\n"


def _free_ports() -> int:
    """A port p with p, p + 1 and p + 2 free on loopback (the proxy, the hub's API, the proxy's API)."""
    for _ in range(50):
        base = 20_000 + secrets.randbelow(30_000)
        try:
            with socket.socket() as a, socket.socket() as b, socket.socket() as c:
                for n, s in enumerate((a, b, c)):
                    s.bind(("127.0.0.1", base + n))
            return base
        except OSError:
            continue
    raise RuntimeError("no three free ports in a row on loopback")


@pytest.fixture(scope="module")
def running():
    """The hub, started as `make hub` starts it, and the accounts' passwords; everything removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="bfs-hub-"))  # in /tmp itself: pytest's folders are root's alone (0700)
    root.chmod(0o755)
    tag = secrets.token_hex(3)
    hub = hubs.Hub(state=root / "state", exchange=root / "exchange", instructor=f"bfsi{tag}",
                   students=(f"bfsa{tag}", f"bfsb{tag}"), port=_free_ports(),
                   server_args=("--LabApp.expose_app_in_browser=True",))
    process = None
    try:
        passwords = hubs.create(hub)
        argv, env = hubs.command(hub)
        log = open(root / "hub.log", "w")
        process = subprocess.Popen(argv, env=env, cwd=hub.state, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        deadline = time.monotonic() + START_S
        while True:
            try:
                urllib.request.urlopen(f"{hub.url}/hub/api", timeout=2)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the hub did not start:\n{(root / 'hub.log').read_text()[-3000:]}") from None
                time.sleep(0.5)
        yield hub, passwords, process
    finally:
        if process is not None:
            os.killpg(process.pid, signal.SIGTERM)  # the hub stops every user's server as it goes
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        if (root / "hub.log").exists():
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(root / "hub.log", ARTIFACTS / "hub.log")
        left = hubs.remove(hub)
        shutil.rmtree(root, ignore_errors=True)
        assert not [line for line in left if line.startswith("NOT removed")], left


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def log_in(browser, hub, user: str, password: str):
    """A page of ``user``'s own browser, logged in, on their JupyterLab."""
    page = browser.new_context(viewport={"width": 1300, "height": 1000}).new_page()
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(f"**/user/{user}/lab**", timeout=SPAWN_S * 1000)
    page.wait_for_function("window.jupyterapp && jupyterapp.commands.hasCommand('nbgrader:open-assignment-list')",
                           timeout=SPAWN_S * 1000)
    return page


def formgrader(page, hub, action: str, outcome: str = "success-modal") -> str:
    """Press ``action``'s button (the cell's class: assign, release, collect, generate-feedback, release-feedback)
    in Formgrader's row of the assignment, wait for its dialog, which must be ``outcome``, and return its text."""
    page.goto(f"{hub.url}/user/{hub.instructor}/formgrader")
    button = page.locator("tr", has_text=ASSIGNMENT).locator(f"td.{action} a")
    button.wait_for(timeout=60_000)
    button.click()
    dialog = page.locator("#success-modal, #error-modal")
    dialog.wait_for(timeout=GRADE_S * 1000)
    assert dialog.get_attribute("id") == outcome, dialog.inner_text()
    return dialog.inner_text()


def assignment_list(page):
    page.evaluate("jupyterapp.commands.execute('nbgrader:open-assignment-list')")
    return page


def save_notebook(page, path: str, nb) -> None:
    """Write ``nb`` to ``path`` through the user's own server, as saving it in JupyterLab does."""
    page.evaluate("([path, content]) => jupyterapp.serviceManager.contents.save(path, "
                  "{type: 'notebook', format: 'json', content})", [path, json.loads(nbformat.writes(nb))])


def as_user(process, user: str, script: str) -> subprocess.CompletedProcess:
    """Run ``script`` (sh) as ``user`` in a login shell, in the hub's mount namespace (where Python is reachable)."""
    return subprocess.run(["nsenter", "--target", str(process.pid), "--mount", "runuser", "--login", user, "-c",
                           script], capture_output=True, text=True, timeout=GRADE_S)


def test_a_class_on_the_hub_from_release_to_feedback(running, browser):
    hub, passwords, process = running
    ann, bob = hub.students
    outbound = hub.exchange / COURSE_ID / "outbound" / ASSIGNMENT
    teacher = log_in(browser, hub, hub.instructor, passwords[hub.instructor])
    formgrader(teacher, hub, "assign")
    formgrader(teacher, hub, "release")
    assert (outbound / f"{ASSIGNMENT}.ipynb").is_file()

    solved = nbformat.read(solution_notebook(ASSIGNMENT), as_version=4)
    mistaken = nbformat.read(solution_notebook(ASSIGNMENT), as_version=4)
    [answer] = [c for c in mistaken.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "central_difference"]
    answer.source = FORWARD
    others = [str(hub.exchange), str(Path(f"~{ann}").expanduser()),
              *(str(hub.course() / name) for name in ("grading-secret", "gradebook.db", "source", "submitted"))]
    mistaken.cells.append(nbformat.v4.new_code_cell(PROBE.format(paths=others)))
    students = {}
    for student, nb in ((ann, solved), (bob, mistaken)):
        page = assignment_list(log_in(browser, hub, student, passwords[student]))
        released = page.locator("#released_assignments_list")
        released.get_by_text(ASSIGNMENT).first.wait_for(timeout=60_000)
        released.get_by_role("button", name="Fetch").click()
        fetched = page.locator("#fetched_assignments_list")
        fetched.get_by_text(ASSIGNMENT).first.wait_for(timeout=60_000)
        save_notebook(page, f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb", nb)
        fetched.get_by_role("button", name="Submit").click()
        page.locator("#submitted_assignments_list").get_by_text(ASSIGNMENT).first.wait_for(timeout=60_000)
        students[student] = page

    formgrader(teacher, hub, "collect")
    graded = as_user(process, hub.instructor, f"cd course && make autograde ASSIGNMENT={ASSIGNMENT} WORKERS=1")
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    assert "WITHOUT a sandbox" not in graded.stdout + graded.stderr
    formgrader(teacher, hub, "generate-feedback")
    formgrader(teacher, hub, "release-feedback")

    feedback = {}
    for student, page in students.items():
        page.reload()
        page.wait_for_function("window.jupyterapp && jupyterapp.commands.hasCommand('nbgrader:open-assignment-list')")
        submitted = assignment_list(page).locator("#submitted_assignments_list")
        submitted.get_by_role("button", name="Fetch Feedback").click()
        submitted.get_by_text("(view feedback)").first.wait_for(timeout=60_000)
        [page_file] = Path(f"~{student}").expanduser().glob(f"{ASSIGNMENT}/feedback/*/{ASSIGNMENT}.html")
        relative = page_file.relative_to(Path(f"~{student}").expanduser())
        response = page.request.get(f"{hub.url}/user/{student}/files/{relative}")  # with the student's login
        assert response.ok, response.status
        feedback[student] = response.text()
    score = {student: re.search(r"\(Score: ([\d.]+) / ([\d.]+)\)", text).groups() for student, text in feedback.items()}
    assert score[ann][0] == score[ann][1], score
    assert float(score[bob][0]) < float(score[bob][1]) and "forward difference" in feedback[bob], score
    assert "seen: []" in feedback[bob], feedback[bob][-3000:]  # neither the exchange nor a home, while graded

    # Each reads their own feedback and nothing of the other's: not their home, not the listings of the exchange's
    # submissions or feedback (nbgrader names each with a random suffix or a hash), not the instructor's course.
    private = [Path(f"~{bob}").expanduser() / ASSIGNMENT, hub.exchange / COURSE_ID / "inbound",
               hub.exchange / COURSE_ID / "feedback", hub.course() / "submitted"]
    assert all(path.is_dir() for path in private)
    peek = as_user(process, ann, "".join(f"ls '{path}' >/dev/null 2>&1 && echo 'read {path}'; " for path in private)
                   + "true")
    assert peek.returncode == 0 and peek.stdout == "", peek.stdout + peek.stderr

    # A student who writes into the exchange by hand, a later "submission" whose notebook is a link to the course's
    # grading secret: the instructor's collect reads it as data, refuses it and copies nothing of what it points at.
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")  # later than bob's Submit, not ahead
    planted = hub.exchange / COURSE_ID / "inbound" / f"{bob}+{ASSIGNMENT}+{now}+planted"
    done = as_user(process, bob, f"mkdir '{planted}' && ln -s '{hub.course() / 'grading-secret'}' "
                                 f"'{planted / (ASSIGNMENT + '.ipynb')}'")
    assert done.returncode == 0, done.stderr
    refusal = formgrader(teacher, hub, "collect", outcome="error-modal")
    assert bob in refusal and "link" in refusal, refusal
    secret = (hub.course() / "grading-secret").read_text().strip()
    assert not [path for path in (hub.course() / "submitted").rglob("*")
                if path.is_file() and secret in path.read_text(errors="replace")]
