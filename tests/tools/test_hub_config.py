"""`make hub`'s settings without starting anything: what JupyterHub is told, per account, and where the accounts
cannot reach Python (the browser test, tests/tools/test_hub.py, runs the hub itself)."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from traitlets.config import Config

from autograder.tools import hub as hubs

HUB = hubs.Hub(state=Path("/srv/state"), exchange=Path("/srv/exchange"), instructor="teach", students=("ann", "bob"),
               ip="0.0.0.0", port=9000, server_args=("--debug",))


def test_the_settings_travel_to_jupyterhubs_config_unchanged():
    assert hubs.Hub.from_env(HUB.to_env()) == HUB


def spawned(c: Config, user: str, home: str) -> SimpleNamespace:
    """A spawner for ``user`` after the hub's pre-spawn hook, as JupyterHub would run it."""
    spawner = SimpleNamespace(user=SimpleNamespace(name=user), cmd=list(c.Spawner.cmd),
                              environment=dict(c.Spawner.environment))
    c.Spawner.pre_spawn_hook(spawner)
    return spawner


def test_only_the_public_address_leaves_loopback_and_the_accounts_log_in_with_their_own_passwords(monkeypatch):
    c = Config()
    hubs.configure(c, HUB)
    assert c.JupyterHub.bind_url == "http://0.0.0.0:9000"
    assert (c.JupyterHub.hub_ip, c.JupyterHub.hub_port) == ("127.0.0.1", 9001)
    assert c.ConfigurableHTTPProxy.api_url == "http://127.0.0.1:9002"
    assert c.JupyterHub.authenticator_class == "pam" and c.Authenticator.allowed_users == {"teach", "ann", "bob"}
    assert c.Spawner.args == ["--debug"]


def test_the_instructor_works_in_the_course_on_the_shared_exchange_and_students_get_the_learners_settings(monkeypatch):
    monkeypatch.setattr(hubs.Hub, "course", lambda self: Path("/home/teach/course"))
    c = Config()
    hubs.configure(c, HUB)
    teacher = spawned(c, "teach", "/home/teach")
    assert teacher.cmd[:3] == ["/bin/sh", "-c", 'cd "$HOME/course" && exec "$@"'] and teacher.cmd[-1].endswith(
        "jupyterhub-singleuser")
    assert teacher.environment[hubs.EXCHANGE_ENV] == "/srv/exchange"
    assert teacher.environment["PYTHONPATH"] == "/home/teach/course"
    student = spawned(c, "ann", "/home/ann")
    assert student.cmd == list(c.Spawner.cmd)  # their home is their server's folder, where fetched work lands
    assert student.environment["JUPYTER_CONFIG_PATH"] == "/srv/state/learner"
    assert hubs.EXCHANGE_ENV not in student.environment


@pytest.fixture
def open_root():
    """A folder everyone may enter, in the temporary folder itself (pytest's own are closed, 0700)."""
    root = Path(tempfile.mkdtemp(prefix="bfs-open-"))
    root.chmod(0o755)
    if any(not folder.stat().st_mode & 0o001 for folder in root.parents if folder != Path("/")):
        pytest.skip(f"{root.parent} is closed to others here")
    yield root
    shutil.rmtree(root)


def test_below_a_closed_folder_the_top_folder_is_named_as_the_one_to_bind_back(open_root):
    """As /root/.pyenv for a pyenv Python when /root is 0700: the hub binds it back over a tmpfs on /root."""
    closed = open_root / "closed"
    (closed / "python" / "bin").mkdir(parents=True)
    closed.chmod(0o700)
    assert hubs.unreachable(closed / "python" / "bin") == closed / "python"


def test_an_open_path_needs_no_mount_namespace(open_root):
    (open_root / "python" / "bin").mkdir(parents=True)
    assert hubs.unreachable(open_root / "python" / "bin") is None
