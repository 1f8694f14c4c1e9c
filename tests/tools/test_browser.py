"""JupyterLab in a real browser, as learners and instructors use it: Debian's Chromium driven by Playwright.

Every test starts its server the way ``make lab``, ``make pair`` or ``make instructor`` does (autograder.tools.lab.command)
on a copy of the course, and acts through the page: clicks, keys, and JupyterLab's own commands. A failing test
leaves a screenshot of every page it had open in build/browser-artifacts/ (see conftest.py). Without Chromium or
Playwright these tests are skipped, and the run's summary says so in capitals.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from autograder.tools import lab
from conftest import ASSIGNMENTS, REPO

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # the summary hook in conftest.py reports the skip
    sync_playwright = None
BROWSER_MISSING = ("no Chromium on PATH (Debian package `chromium`)" if not CHROMIUM
                   else "no Playwright (pip package `playwright`)" if sync_playwright is None else "")
pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.skipif(bool(BROWSER_MISSING), reason=BROWSER_MISSING)]

ARTIFACTS = REPO / "build" / "browser-artifacts"
# Chromium's flags for this machine: no sandbox as root; no background fetches (the network is closed and
# Chromium would retry them for the whole run).
CHROMIUM_ARGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
SERVER_START_S = 60
KERNEL_S = 60
NB05_BUDGET_S = 120  # notebook 5 from solutions/, run all, as a learner would wait for it (about 10 s measured here)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running JupyterLab: its base URL, token and log file."""

    def __init__(self, base: str, token: str, log: Path):
        self.base, self.token, self.log = base, token, log

    def url(self, path: str) -> str:
        joiner = "&" if "?" in path else "?"
        return f"{self.base}/{path.lstrip('/')}{joiner}token={self.token}"


@contextlib.contextmanager
def jupyterlab(kind: str, course: Path, state: Path):
    """Start the ``kind`` server of autograder.tools.lab on ``course``; Jupyter's own state stays in ``state``."""
    port, token = _free_port(), secrets.token_hex(16)
    lab.prepare(kind, course)
    settings = state / "settings"
    # Every cell in the page (no windowing), so what a test reads is on the page, scrolled to or not.
    tracker = settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True, exist_ok=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    launch = lab.command(kind, course, extra=(
        "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
        "--LabApp.expose_app_in_browser=True", f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={state / 'workspaces'}"))
    log = state / f"{kind}-server.log"
    with open(log, "w") as out:
        process = subprocess.Popen(launch.argv, env=launch.env, cwd=launch.cwd, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    server = Server(f"http://127.0.0.1:{port}", token, log)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            try:
                urllib.request.urlopen(server.url("api/status"), timeout=2)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab ({kind}) did not start:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.3)
        yield server
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A copy of the course folder, so the tests' edits and runs never touch the repository's notebooks."""
    root = tmp_path_factory.mktemp("course")
    for folder in ("notebooks", "solutions", "source", "jupyter-config"):
        shutil.copytree(REPO / folder, root / folder)
    shutil.copy(REPO / "nbgrader_config.py", root)
    # Solved notebooks, where a learner's server can open them (their runs need no other file beside them), in a
    # folder of their own so that releasing an assignment from notebooks/ does not release them.
    (root / "notebooks" / "solved").mkdir()
    for name in ASSIGNMENTS:
        shutil.copy(REPO / "solutions" / name / f"{name}.ipynb", root / "notebooks" / "solved")
    return root


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def pages(browser, request):
    """Opens pages, each in a browser context of its own (a separate person); screenshots them all if the test
    fails."""
    contexts = []

    def new_page():
        context = browser.new_context(viewport={"width": 1300, "height": 1000})
        contexts.append(context)
        return context.new_page()

    yield new_page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for n, context in enumerate(contexts):
            for m, page in enumerate(context.pages):
                page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-{n}-{m}.png"), full_page=True)
    for context in contexts:
        context.close()


@pytest.fixture(scope="module")
def learner_server(course, tmp_path_factory):
    with jupyterlab("learner", course, tmp_path_factory.mktemp("learner-state")) as server:
        yield server


# ------------------------------------------------------------------------------------------ acting in a notebook

NOTEBOOK = "jupyterapp.shell.currentWidget"


def open_notebook(page, server: Server, path: str) -> None:
    """Open ``path`` (relative to the server's root) and wait until its kernel is connected and idle."""
    page.goto(server.url(f"lab/tree/{path}?reset"))
    page.wait_for_function(f"""() => {{
        const kernel = window.jupyterapp && {NOTEBOOK}?.sessionContext?.session?.kernel;
        return kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
    }}""", timeout=KERNEL_S * 1000)


def run(page, command: str, cell: int | None = None, timeout_s: float = 120) -> None:
    """Run a notebook command (e.g. 'notebook:run-cell') with cell ``cell`` active; wait until no cell is running."""
    if cell is not None:
        page.evaluate(f"{NOTEBOOK}.content.activeCellIndex = {cell}")
    page.evaluate(f"jupyterapp.commands.execute('{command}')")
    page.wait_for_timeout(300)  # the kernel's first status message
    page.wait_for_function(f"""() => {{
        const panel = {NOTEBOOK};
        return panel.sessionContext.session.kernel.status === 'idle'
            && !panel.content.widgets.some(c => c.model.type === 'code' && c.model.executionState === 'running');
    }}""", timeout=timeout_s * 1000)


def cell_index(page, grade_id: str | None = None, containing: str | None = None) -> int:
    """The index of the cell with this nbgrader ``grade_id``, or of the first code cell containing ``containing``."""
    index = page.evaluate("""([gradeId, text]) => jupyterapp.shell.currentWidget.content.widgets.findIndex(c =>
        gradeId ? c.model.getMetadata('nbgrader')?.grade_id === gradeId
                : c.model.type === 'code' && c.model.sharedModel.getSource().includes(text))""", [grade_id, containing])
    assert index >= 0, f"no cell {grade_id or containing!r} in the notebook"
    return index


def set_source(page, cell: int, source: str) -> None:
    page.evaluate("([i, s]) => jupyterapp.shell.currentWidget.content.widgets[i].model.sharedModel.setSource(s)",
                  [cell, source])


def output_text(page, cell: int) -> str:
    """What the learner sees below cell ``cell``: the rendered output area's text."""
    return page.locator(".jp-Notebook .jp-Cell").nth(cell).locator(".jp-OutputArea").inner_text()


def outputs(page) -> list[list[dict]]:
    """Every cell's outputs as nbformat JSON (an empty list for markdown cells)."""
    return page.evaluate(f"""() => {NOTEBOOK}.content.widgets.map(c =>
        c.model.type === 'code' ? c.model.outputs.toJSON() : [])""")


def image_ink(page, locator) -> float:
    """The share of an <img>'s pixels that are neither transparent nor white: 0 for a blank picture."""
    return locator.evaluate("""async img => {
        await img.decode();
        const canvas = document.createElement('canvas');
        canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
        const ctx = canvas.getContext('2d');
        ctx.drawImage(img, 0, 0);
        const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
        let ink = 0;
        for (let i = 0; i < data.length; i += 4)
            if (data[i + 3] > 0 && (data[i] < 240 || data[i + 1] < 240 || data[i + 2] < 240)) ink++;
        return ink / (data.length / 4);
    }""")


# ------------------------------------------------------------------------------------------------------ learners

def test_untouched_notebook_names_the_first_stub_and_shows_no_hidden_code(learner_server, pages):
    page = pages()
    open_notebook(page, learner_server, "02_scalar_engine/02_scalar_engine.ipynb")
    run(page, "notebook:run-all-cells")
    errors = [(i, out) for i, cell in enumerate(outputs(page)) for out in cell if out["output_type"] == "error"]
    assert errors, "running an untouched notebook must stop at the first exercise"
    first, error = errors[0]
    assert error["ename"] == "CheckFailure", error
    assert len(errors) == 1, f"run all went on after the first failure: {errors}"
    page_text = page.locator(".jp-Notebook").inner_text()
    for hidden in ("HIDDEN TESTS", "from autograder", "\ncheck(\""):
        assert hidden not in page_text
    shown = output_text(page, first)
    assert "is not written yet: in its cell, replace `raise NotImplementedError()`" in shown
    assert "Traceback" not in shown and "File " not in shown, shown


def test_a_wrong_then_a_right_answer_shows_the_misconception_then_the_pass(learner_server, pages):
    page = pages()
    open_notebook(page, learner_server, "01_nudging/01_nudging.ipynb")
    run(page, "notebook:run-all-cells")
    answer, test = cell_index(page, "central_difference"), cell_index(page, "test_central_difference")
    set_source(page, answer, "def central_difference(f, x, h):\n    return (f(x + h) - f(x)) / h  # forward\n")
    run(page, "notebook:run-cell", answer)
    run(page, "notebook:run-cell", test)
    shown = output_text(page, test)
    assert "this is the forward difference" in shown and "Traceback" not in shown, shown
    set_source(page, answer, "def central_difference(f, x, h):\n    return (f(x + h) - f(x - h)) / (2 * h)\n")
    run(page, "notebook:run-cell", answer)
    run(page, "notebook:run-cell", test)
    shown = output_text(page, test)
    assert "central_difference: all hidden checks passed" in shown and "visible tests passed" in shown
    assert "Error" not in shown and "Failure" not in shown


def move_slider(page, slider, presses: int) -> None:
    handle = slider.locator(".noUi-handle")
    handle.focus()
    for _ in range(presses):
        handle.press("ArrowRight")


def test_h_slider_redraws_its_readout_and_plot(learner_server, pages):
    page = pages()
    open_notebook(page, learner_server, "01_nudging/01_nudging.ipynb")
    run(page, "notebook:run-cell", cell_index(page, containing="import"))
    explorer = cell_index(page, containing="h_explorer()")
    run(page, "notebook:run-cell", explorer)
    cell = page.locator(".jp-Notebook .jp-Cell").nth(explorer)
    picture, readout = cell.locator(".widget-image"), cell.locator(".widget-html")
    picture.wait_for()
    before = (picture.get_attribute("src"), readout.inner_text())
    assert image_ink(page, picture) > 0.01
    move_slider(page, cell.locator(".widget-slider"), 4)
    page.wait_for_function("([img, src]) => img.getAttribute('src') !== src",
                           arg=[picture.element_handle(), before[0]], timeout=20_000)
    assert readout.inner_text() != before[1]
    assert image_ink(page, picture) > 0.01


def test_backward_stepper_steps_and_its_graph_fits_the_column(learner_server, pages):
    page = pages()
    open_notebook(page, learner_server, "solved/02_scalar_engine.ipynb")
    stepper = cell_index(page, containing="backward_stepper(y")
    run(page, "notebook:run-all-cells", timeout_s=180)
    cell = page.locator(".jp-Notebook .jp-Cell").nth(stepper)
    caption = cell.locator(".widget-html").first
    caption.wait_for()
    first = caption.inner_text()
    assert first.startswith("1/")
    slider = cell.locator(".widget-slider")
    assert slider.locator(".widget-readout").inner_text() == "1"
    move_slider(page, slider, 2)
    page.wait_for_function("el => el.innerText.startsWith('3/')", arg=caption.element_handle(), timeout=20_000)
    assert slider.locator(".widget-readout").inner_text() == "3", "the slider and the text count steps differently"
    # Run All may still scroll on to later cells, and JupyterLab stops rendering cells out of view: measure in view.
    # The picture can still be redrawn (its HTML replaced) after the caption shows step 3, so the svg is found,
    # scrolled to and measured inside the page, found afresh after the scroll, never held across a redraw.
    width, column = cell.evaluate("""async cell => {
        cell.querySelector('.widget-html svg').scrollIntoView({block: 'center'});
        await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
        const svg = cell.querySelector('.widget-html svg'), area = cell.querySelector('.jp-OutputArea-output');
        return [svg.getBoundingClientRect().width, area.getBoundingClientRect().width];
    }""")
    assert width <= column + 1, f"the graph is {width:.0f} px wide in a {column:.0f} px column"
    area = cell.locator(".jp-OutputArea-output").first
    scrolls = area.evaluate("el => [...el.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1 && "
                            "['auto', 'scroll'].includes(getComputedStyle(e).overflowX))")
    assert not scrolls, "the stepper's output scrolls sideways"
    assert_pictures_fit(page)


def assert_pictures_fit(page) -> None:
    """Every picture in the notebook's outputs is drawn within its output column (none is cut or scrolls)."""
    too_wide = page.evaluate("""() => [...document.querySelectorAll('.jp-OutputArea-output')].flatMap(area =>
        [...area.querySelectorAll('svg, img')].filter(pic => pic.closest('.jp-OutputArea-output') === area)
            .map(pic => [pic.getBoundingClientRect().width, area.getBoundingClientRect().width])
            .filter(([pic, column]) => pic > column + 1))""")
    assert not too_wide, f"pictures wider than their column (picture, column px): {too_wide}"


def test_notebook_5_solved_runs_to_the_end_with_a_live_progress_bar_and_every_plot(learner_server, pages):
    page = pages()
    open_notebook(page, learner_server, "solved/05_modules_mnist.ipynb")
    run(page, "notebook:clear-all-cell-outputs")
    # Every text the progress bar shows, as the page changes (training is quicker than any polling).
    page.evaluate("""() => {
        window.barStates = new Set();
        new MutationObserver(() => {
            for (const bar of document.querySelectorAll('.jp-OutputArea .widget-hprogress'))
                window.barStates.add(bar.parentElement.innerText);
        }).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true});
    }""")
    start = time.monotonic()
    run(page, "notebook:run-all-cells", timeout_s=NB05_BUDGET_S)
    seen = page.evaluate("[...window.barStates]")
    print(f"notebook 5, run all: {time.monotonic() - start:.0f} s; progress bar states seen: {len(seen)}")
    assert len(seen) >= 3, f"the progress bar did not move while training: {seen}"
    cells = outputs(page)
    assert not [o for cell in cells for o in cell if o["output_type"] == "error"]
    pictures = sum("image/png" in o.get("data", {}) for cell in cells for o in cell)
    shown = page.locator(".jp-OutputArea-output img")
    assert pictures >= 4 and shown.count() == pictures
    for n in range(pictures):
        assert image_ink(page, shown.nth(n)) > 0.005, f"picture {n + 1} of {pictures} is blank"


# ----------------------------------------------------------------------------------------- pair programming (RTC)

@pytest.fixture(scope="module")
def pair_server(course, tmp_path_factory):
    with jupyterlab("pair", course, tmp_path_factory.mktemp("pair-state")) as server:
        yield server


def test_pair_sees_each_others_edits_and_the_h_plot_survives_both_moving_the_slider(pair_server, pages):
    driver, navigator = pages(), pages()
    for page in (driver, navigator):
        open_notebook(page, pair_server, "01_nudging/01_nudging.ipynb")
    # The driver types into a cell; the navigator's copy of the notebook shows it.
    target = cell_index(driver, containing="x, h = 3.0")
    editor = driver.locator(".jp-Notebook .jp-Cell").nth(target).locator(".cm-content")
    editor.click()
    driver.keyboard.press("Control+End")
    typed = time.monotonic()
    driver.keyboard.type("\n# the driver typed this")
    navigator.wait_for_function(f"""() => {NOTEBOOK}.content.widgets[{target}].model.sharedModel.getSource()
        .includes('# the driver typed this')""", timeout=10_000)
    print(f"an edit reached the other browser in {time.monotonic() - typed:.2f} s")
    # One kernel: the driver runs the h slider, both see it, both move it.
    run(driver, "notebook:run-cell", cell_index(driver, containing="import"))
    explorer = cell_index(driver, containing="h_explorer()")
    run(driver, "notebook:run-cell", explorer)
    cells = [page.locator(".jp-Notebook .jp-Cell").nth(explorer) for page in (driver, navigator)]
    navigator.evaluate("() => { jupyterapp.commands.execute('notebook:trust'); }")  # settles when the dialog closes
    navigator.get_by_role("button", name="Trust").click()
    for cell in cells:
        cell.locator(".widget-slider").wait_for(timeout=20_000)
    for _ in range(3):
        for cell, key in zip(cells, ("ArrowRight", "ArrowLeft")):
            handle = cell.locator(".noUi-handle")
            handle.focus()
            handle.press(key)
            handle.press(key)
    driver.wait_for_timeout(3000)  # the last redraws reach both browsers
    for page, cell in zip((driver, navigator), cells):
        assert image_ink(page, cell.locator(".jp-OutputArea img").last) > 0.01, "the h plot came out blank"
    readouts = {cell.locator("pre").last.inner_text() for cell in cells}
    assert len(readouts) == 1, f"the two browsers show different slopes: {readouts}"


# ----------------------------------------------------------------------------------------------- the instructor

def test_instructor_sees_the_five_assignments_in_formgrader_with_working_links(course, tmp_path_factory, pages):
    with jupyterlab("instructor", course, tmp_path_factory.mktemp("instructor-state")) as server:
        page = pages()
        page.goto(server.url(""))  # the instructor's server opens on Formgrader
        rows = page.locator("#main-table tr")
        rows.filter(has_text=ASSIGNMENTS[-1]).wait_for(timeout=30_000)
        assert sorted(rows.locator("td.name").all_inner_texts()) == ASSIGNMENTS
        assert "exchange directory" not in page.locator("body").inner_text().lower()
        folders = [link.split("/tree/", 1)[1] for link in rows.locator("a[href*='/tree/']").evaluate_all(
            "links => links.map(a => a.href)")]
        assert len(folders) == 2 * len(ASSIGNMENTS), folders  # each assignment's source and release folders
        for folder in folders:
            assert not folder.startswith(".."), folder
            listing = page.request.get(server.url(f"api/contents/{folder}"))
            assert listing.ok, f"Formgrader links to {folder}, which the server cannot open ({listing.status})"
            assert page.request.get(server.url(f"tree/{folder}")).ok
        # The committed solutions open trusted: their graphs are drawn, not shown as a Python object's name.
        open_notebook(page, server, "solutions/02_scalar_engine/02_scalar_engine.ipynb")
        notebook = page.locator(".jp-Notebook")
        assert notebook.locator(".jp-RenderedSVG img").count() >= 3
        assert "IPython.core.display.SVG object" not in notebook.inner_text()


def test_release_submit_and_collect_work_on_one_machine(course, learner_server, pages):
    """The instructor releases, the learner submits from the Assignment List, the instructor collects."""
    nbgrader = [str(Path(os.sys.executable).parent / "nbgrader")]
    subprocess.run(nbgrader + ["release_assignment", "01_nudging", "--force"], cwd=course, check=True,
                   capture_output=True)
    page = pages()
    page.goto(learner_server.url("lab?reset"))
    page.wait_for_function("window.jupyterapp && jupyterapp.commands.hasCommand('nbgrader:open-assignment-list')")
    # A learner's server loads none of the instructor's pages.
    assert not page.evaluate("jupyterapp.commands.hasCommand('nbgrader:open-formgrader')")
    assert page.request.get(learner_server.url("formgrader")).status == 404
    page.evaluate("jupyterapp.commands.execute('nbgrader:open-assignment-list')")
    downloaded = page.locator("#fetched_assignments_list")
    downloaded.get_by_text("01_nudging").first.wait_for(timeout=30_000)
    assert "exchange directory" not in page.locator("body").inner_text().lower()
    downloaded.get_by_role("button", name="Submit").click()
    page.locator("#submitted_assignments_list").get_by_text("01_nudging").first.wait_for(timeout=30_000)
    done = subprocess.run(nbgrader + ["collect", "01_nudging"], cwd=course, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert list(course.glob("submitted/*/01_nudging/01_nudging.ipynb")), done.stderr


# ------------------------------------------------------------------------------- what a submission shows in a browser

FIRE = "window.__fired.push"  # every attack below calls it; the page records the calls instead of running anything


def attacking_submission():
    """Notebook 1 as a dishonest learner could hand it in: script in every place a graded notebook is rendered from
    (an answer cell's outputs, their own and an edited course markdown cell, a raw cell, a grade id, the
    notebook's metadata)."""
    import nbformat

    nb = nbformat.read(REPO / "notebooks" / "01_nudging" / "01_nudging.ipynb", as_version=4)
    answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    shown = {"text/html": f"<img src=x onerror=\"{FIRE}('html')\">", "application/javascript": f"{FIRE}('js')",
             "image/svg+xml": f"<svg onload=\"{FIRE}('svg')\"></svg>", "text/markdown": f"<img src=x onerror={FIRE}('md-out')>",
             "image/png": f"x\" onerror=\"{FIRE}('png')"}
    answer.outputs = [nbformat.v4.new_output("display_data", data={kind: value}, metadata={kind: {
        "width": f"1\" onerror=\"{FIRE}('width')"}}) for kind, value in shown.items()]  # one each: each is rendered
    trap = f"<img src=x onerror=\"{FIRE}('md')\"> [open me](javascript:{FIRE}('link'))"
    markdown = next(c for c in nb.cells if c.cell_type == "markdown")
    markdown.source += "\n\n" + trap
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(trap))
    # CommonMark ends a line at a lone carriage return: text after one is a paragraph of its own
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(f"my notes\r\r<img src=x onerror=\"{FIRE}('cr')\">\r"))
    nb.cells.insert(2, nbformat.v4.new_raw_cell(f"<script>{FIRE}('raw')</script>"))
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code")
    test.metadata.nbgrader["grade_id"] = f"x\"><img src=x onerror=\"{FIRE}('id')\">"
    nb.metadata["title"] = f"</title><script>{FIRE}('title')</script>"
    return nb


def rendered(nb, template: str) -> str:
    """The HTML Formgrader ("formgrade") or ``nbgrader generate_feedback`` ("feedback") makes of a notebook."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config

    for cell in nb.cells:  # what nbgrader's GetGrades adds before the feedback is made
        cell.metadata.get("nbgrader", {}).setdefault("score", 0)
    config = Config()
    config.HTMLExporter.template_name = template
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    # the feedback page inlines bootstrap's CSS from here (nbgrader's GenerateFeedback sets the same)
    config.HTMLExporter.extra_template_paths = [str(Path(handlers.template_path).parent / "static" / "node_modules"
                                                    / "bootstrap" / "dist" / "css")]
    resources = {"assignment_id": "01_nudging", "notebook_id": "01_nudging", "submission_id": "s", "index": 0,
                 "total": 1, "base_url": "", "student": "mallory", "last_name": "", "first_name": "",
                 "notebook_path": "x", "nbgrader": {"notebook": "01_nudging", "score": 0, "max_score": 10,
                                                    "late_penalty": 0}}
    return HTMLExporter(config=config).from_notebook_node(nb, resources=resources)[0]


def fired(page, html: str, folder: Path) -> list[str]:
    """What the attacks ran when ``html`` was opened (from a file in ``folder``), and the javascript: links it holds
    (a click runs those)."""
    (folder / "page.html").write_text(html)
    page.add_init_script("window.__fired = []")
    page.goto((folder / "page.html").as_uri(), wait_until="load")
    page.wait_for_timeout(500)  # an image's error fires after load
    links = page.evaluate("[...document.querySelectorAll('[href],[src]')].map(e => e.getAttribute('href') || "
                          "e.getAttribute('src')).filter(u => /^\\s*javascript:/i.test(u))")
    return page.evaluate("window.__fired") + [f"link {link}" for link in links]


def test_nothing_a_submission_holds_runs_in_formgrader_or_the_feedback(pages, tmp_path):
    """An autograded notebook is opened by the instructor in Formgrader, on their own server: the submission's
    HTML, scripts and links must run nothing there (a red team changed every grade from one). Without
    InertLearnerContent, the same notebook does run them: the test can fail."""
    import copy

    from autograder.course.preprocessors import InertLearnerContent

    page = pages()
    attack = attacking_submission()
    control = fired(page, rendered(copy.deepcopy(attack), "formgrade"), tmp_path)
    assert {"html", "md", "cr", "id"} <= set(control) and any(f.startswith("link") for f in control), control
    inert, _ = InertLearnerContent().preprocess(attack, {"nbgrader": {"assignment": "01_nudging"}})
    for template in ("formgrade", "feedback"):
        page = pages()
        assert fired(page, rendered(copy.deepcopy(inert), template), tmp_path) == [], template
        assert "open me" in page.locator("body").inner_text()  # the learner's text is shown, as text
