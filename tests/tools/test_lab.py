"""The three JupyterLab servers (autograder.tools.lab) and the settings they read, without starting a browser (fast).

What the servers do in a browser is in test_browser.py."""
import json
import os
import sys
from pathlib import Path

import pytest
from traitlets.config.loader import PyFileConfigLoader

from autograder.tools import lab
from conftest import REPO

LEARNER_CONFIG = REPO / "jupyter-config" / "learner"


def flag(launch, name):
    """The value of ``--name=value`` in a launch's argv, or None."""
    values = [arg.split("=", 1)[1] for arg in launch.argv if arg.startswith(f"--{name}=")]
    return values[-1] if values else None


@pytest.mark.parametrize("kind", lab.KINDS)
def test_every_server_starts_from_the_course_folder_for_root_and_others(kind):
    launch = lab.command(kind, REPO)
    assert launch.cwd == REPO  # where nbgrader's extensions look for nbgrader_config.py
    assert ("--allow-root" in launch.argv) == (os.geteuid() == 0)
    assert launch.env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)


def test_learners_get_notebooks_and_no_instructor_pages_and_pairs_get_collaboration():
    learner, pair, instructor = (lab.command(kind, REPO) for kind in ("learner", "pair", "instructor"))
    for launch in (learner, pair):
        assert flag(launch, "ServerApp.root_dir") == str(REPO / "notebooks")
        assert launch.env["JUPYTER_CONFIG_PATH"].split(os.pathsep)[0] == str(LEARNER_CONFIG)
    assert flag(learner, "YDocExtension.disable_rtc") == "True" and flag(pair, "YDocExtension.disable_rtc") is None
    assert not flag(pair, "SQLiteYStore.db_path").startswith(str(REPO / "notebooks"))
    assert flag(instructor, "ServerApp.root_dir") == str(REPO)
    assert "JUPYTER_CONFIG_PATH" not in instructor.env or str(LEARNER_CONFIG) not in instructor.env["JUPYTER_CONFIG_PATH"]
    assert lab.command("learner", REPO, extra=("--no-browser",)).argv[-1] == "--no-browser"
    with pytest.raises(ValueError, match="unknown kind of JupyterLab 'teacher'"):
        lab.command("teacher")


def test_learner_settings_turn_off_every_instructor_extension():
    server = json.loads((LEARNER_CONFIG / "jupyter_server_config.json").read_text())["ServerApp"]["jpserver_extensions"]
    assert server == {"nbgrader.server_extensions.formgrader": False, "nbgrader.server_extensions.course_list": False}
    page = json.loads((LEARNER_CONFIG / "labconfig" / "page_config.json").read_text())["disabledExtensions"]
    for plugin in ("formgrader", "course-list", "create-assignment"):
        assert page[f"@jupyter/nbgrader:{plugin}"] is True


def test_learner_and_instructor_share_one_exchange_and_course_id():
    learner = PyFileConfigLoader("nbgrader_config.py", path=str(LEARNER_CONFIG)).load_config()
    instructor = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    assert learner.Exchange.root == instructor.Exchange.root == str(REPO / "exchange")
    assert learner.CourseDirectory.course_id == instructor.CourseDirectory.course_id
    assert learner.Exchange.assignment_dir == str(REPO / "notebooks")  # where a learner's copies already are
    assert (REPO / "exchange").is_dir() and (REPO / "exchange").stat().st_mode & 0o777 == 0o777


def test_course_widgets_draw_without_pyplots_shared_figure(monkeypatch):
    """Two people on one kernel ask for redraws that interleave; pyplot's current figure is shared by all of them
    (a blank h plot was seen in 5 of 6 two-browser runs), so no widget may draw through it."""
    import matplotlib.pyplot as plt

    from labtools import h_explorer
    from labtools.graph import backward_stepper

    class Node:  # the smallest graph the stepper draws: y = x + x
        def __init__(self, data, children=(), op=""):
            self.data, self.grad, self._prev, self._op = data, 0.0, set(children), op

    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    plt.close("all")
    explorer = h_explorer()
    slider, readout, picture = explorer.children
    slider.value = 1e-8
    assert bytes(picture.value).startswith(b"\x89PNG") and "1.15e-08" in readout.value
    x = Node(2.0)
    stepper = backward_stepper(Node(4.0, (x, x), "+"))
    assert "<svg" in stepper.children[-1].value
    assert plt.get_fignums() == []


def test_run_check_in_a_release_without_the_checks_says_so_and_lets_the_visible_tests_run(monkeypatch, capsys):
    from labtools import run_check

    monkeypatch.setitem(sys.modules, "autograder", None)  # as if autograder/ had not been handed out
    run_check("central_difference", {"central_difference": lambda f, x, h: 0.0})  # wrong; nothing here can tell
    assert "checks are not installed here" in capsys.readouterr().out


def test_graphs_are_laid_out_for_the_notebook_column():
    """A wide left-to-right graph is laid out top to bottom; one still too wide is scaled to the column."""
    import graphviz

    from labtools.graph import COLUMN_PT, _size_pt, render_for_column, render_svg

    chain = graphviz.Digraph(graph_attr={"rankdir": "LR"})
    for i in range(30):
        chain.edge(f"n{i}", f"n{i + 1}")
    assert _size_pt(render_svg(chain))[0] > COLUMN_PT
    width, height = _size_pt(render_for_column(chain))
    assert width <= COLUMN_PT and height > width  # now a column, not a row
    fan = graphviz.Digraph(graph_attr={"rankdir": "TB"})
    for i in range(40):
        fan.edge("root", f"leaf_{i}")
    before = _size_pt(render_svg(fan))
    after = _size_pt(render_for_column(fan))
    assert before[0] > COLUMN_PT and after[0] == COLUMN_PT
    assert abs(after[1] / after[0] - before[1] / before[0]) < 0.01  # proportions kept
