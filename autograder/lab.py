"""JupyterLab for the course's three kinds of user (``make lab``, ``make pair``, ``make instructor``).

- learner: the server's root is ``notebooks/``; nbgrader's instructor extensions (Formgrader, Course List, Create
  Assignment) are not loaded (``jupyter-config/learner/``), and real-time collaboration is off.
- pair: the learner's server with real-time collaboration (the ``jupyter-collaboration`` package): driver and
  navigator open the same URL in two browsers and share one kernel.
- instructor: the server's root is the course folder, so Formgrader's links to ``source/`` and ``submitted/`` stay
  inside it; the server opens on Formgrader.

The browser tests start their servers through :func:`command` too, so they test what these targets run.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from autograder.course import REPO

KINDS = ("learner", "pair", "instructor")


@dataclass
class Launch:
    """How to start one JupyterLab server: the process's argv, environment and working folder."""
    argv: list[str]
    env: dict[str, str]
    cwd: Path


def command(kind: str, course: Path = REPO, extra: tuple[str, ...] = ()) -> Launch:
    """How to start JupyterLab for ``kind`` (one of KINDS) on the course folder ``course``.

    The working folder is the course folder: nbgrader's server extensions read ``nbgrader_config.py`` there and take
    it as the course's root. ``extra`` is appended to the argv (e.g. ``--no-browser``, ``--ServerApp.port=8899``).

    Raises:
        ValueError: an unknown kind.
    """
    from jupyter_core.paths import jupyter_data_dir

    if kind not in KINDS:
        raise ValueError(f"unknown kind of JupyterLab {kind!r}; one of {', '.join(KINDS)}")
    argv = [sys.executable, "-m", "jupyterlab"]
    if os.geteuid() == 0:  # JupyterLab refuses root without it; the course's own machines run as root
        argv.append("--allow-root")
    env = dict(os.environ)
    # nbgrader's Formgrader runs `alembic` and kernels run `python`: both this environment's.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if kind == "instructor":
        argv += [f"--ServerApp.root_dir={course}", "--LabApp.default_url=/formgrader"]
    else:
        learner_config = str(course / "jupyter-config" / "learner")
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(filter(None, [learner_config, env.get("JUPYTER_CONFIG_PATH")]))
        argv.append(f"--ServerApp.root_dir={course / 'notebooks'}")
    if kind == "pair":
        # The shared documents' history: beside Jupyter's other state, not in the learners' notebooks folder.
        argv.append(f"--SQLiteYStore.db_path={Path(jupyter_data_dir()) / 'ystore.db'}")
    else:
        argv.append("--YDocExtension.disable_rtc=True")
    return Launch(argv + list(extra), env, course)


def main(kind: str, extra: list[str]) -> int:
    """Replace this process with JupyterLab, so Ctrl-C and the exit status are JupyterLab's own."""
    launch = command(kind, extra=tuple(extra))
    if kind == "pair":
        print("Pair programming: driver and navigator both open the URL printed below (with its token); each sees "
              "the other's edits and outputs and both run one kernel.", file=sys.stderr, flush=True)
    os.chdir(launch.cwd)
    os.execve(launch.argv[0], launch.argv, launch.env)
