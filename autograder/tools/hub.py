"""``make hub``: a JupyterHub on this machine for one instructor and two students, each a real Unix account, sharing
nbgrader's exchange.

What it sets up (as root: it creates accounts), following nbgrader's multi-user guidance
(https://nbgrader.readthedocs.io/en/stable/configuration/jupyterhub_config.html):

- the accounts, with a random password each (printed, and kept in ``<state>/passwords``, mode 0600), their homes
  closed to the others (0700), so no student reads another's fetched or edited notebooks;
- the exchange, nbgrader's default ``/srv/nbgrader/exchange``: world-writable as nbgrader asks, with the sticky bit
  as well, so that no student can rename or remove the course's folder there, which the instructor owns. nbgrader
  makes the rest: ``inbound/`` writable but not listable by students (a submission's folder carries a random suffix),
  feedback in folders named by the submitted notebook's hash;
- the instructor's course: a clone of this checkout in their home (``~/course``), sharing its virtual
  environment, where Formgrader and ``make autograde`` run. Its ``nbgrader_config.py`` reads the exchange from
  BACKPROP_EXCHANGE, which the hub sets for the instructor's server;
- the students' settings (``<state>/learner``): this checkout's learner settings (no instructor extensions), and
  an nbgrader configuration that fetches into the student's home and submits to the shared exchange.

The hub itself listens on loopback only unless told otherwise; its proxy is ``configurable-http-proxy`` from npm,
pinned in package.json and installed by ``make setup``'s ``npm ci``. ``make hub-remove`` removes the accounts this
created, their homes, the course's exchange folder and the state folder.
"""
from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder.contract import COURSE_ID, REPO

EXCHANGE_ENV = "BACKPROP_EXCHANGE"  # read by nbgrader_config.py: where the instructor releases and collects
SETTINGS_ENV = "BACKPROP_HUB"  # the Hub settings, as JSON, for jupyter-config/hub/jupyterhub_config.py
HUB_CONFIG = REPO / "jupyter-config" / "hub" / "jupyterhub_config.py"
# The learner's server settings, without the instructor's extensions; its nbgrader_config.py is the hub's own.
LEARNER_SETTINGS = REPO / "jupyter-config" / "learner"
PROXY = REPO / "node_modules" / ".bin" / "configurable-http-proxy"
# Run by root in a private mount namespace when the interpreter lies below a folder the accounts cannot enter (a
# pyenv Python under /root, mode 0700): each such folder is bound back at its path over a tmpfs on its parent, so
# every path stays the same, the accounts can start Python, and nothing else of that parent is there.
REACH_INTERPRETER = """set -e
for blocked in $BLOCKED; do
    keep=$(mktemp -d)
    mount --bind "$blocked" "$keep"
    mount -t tmpfs -o mode=755 tmpfs "$(dirname "$blocked")"
    mkdir -p "$blocked"
    mount --bind "$keep" "$blocked"
    umount "$keep"
    rmdir "$keep"
done
exec "$@"
"""


@dataclass(frozen=True)
class Hub:
    """One hub: where it keeps its state, the exchange, its accounts and its address.

    ``port`` is the public one (the proxy's); the hub's own API listens on ``port + 1`` and the proxy's API on
    ``port + 2``, all on 127.0.0.1 except the public address ``ip``.
    """
    state: Path = Path("/srv/backprop-hub")
    exchange: Path = Path("/srv/nbgrader/exchange")  # nbgrader's default Exchange.root
    instructor: str = "bfs-instructor"
    students: tuple[str, ...] = ("bfs-ann", "bfs-bob")
    ip: str = "127.0.0.1"
    port: int = 8000
    venv: Path = field(default_factory=lambda: Path(sys.prefix))
    server_args: tuple[str, ...] = ()  # more options for every user's server (the browser test's)

    @property
    def users(self) -> tuple[str, ...]:
        return (self.instructor, *self.students)

    @property
    def url(self) -> str:
        return f"http://{self.ip}:{self.port}"

    def course(self) -> Path:
        """The instructor's course folder, a clone of this checkout."""
        return Path(pwd.getpwnam(self.instructor).pw_dir) / "course"

    def to_env(self) -> str:
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_env(cls, text: str) -> Hub:
        raw = json.loads(text)
        return cls(**{**raw, "state": Path(raw["state"]), "exchange": Path(raw["exchange"]),
                      "students": tuple(raw["students"]), "venv": Path(raw["venv"]),
                      "server_args": tuple(raw["server_args"])})


class HubError(Exception):
    """The hub cannot be set up here; the message says why and what to do."""


def unavailable() -> str:
    """Why this machine cannot make the hub's accounts or run its proxy, in a sentence, or "" when it can."""
    if os.geteuid() != 0:
        return "making the hub's Unix accounts needs root (run `sudo make hub`)"
    missing = [tool for tool in ("useradd", "userdel", "chpasswd", "runuser", "git") if not shutil.which(tool)]
    if missing:
        return f"{', '.join(missing)} not on PATH (Debian packages passwd, util-linux, git)"
    if not PROXY.exists():
        return f"no {PROXY.relative_to(REPO)} (`npm ci` installs configurable-http-proxy; Debian package npm)"
    return ""


def create(hub: Hub) -> dict[str, str]:
    """Make the accounts, the exchange, the instructor's course and the students' settings; return each new
    account's password. An account that exists already is left as it is (and gets no password here).

    Raises:
        HubError: see unavailable(), or a step failed (its command's own message).
    """
    why = unavailable()
    if why:
        raise HubError(why)
    hub.state.mkdir(parents=True, exist_ok=True)
    hub.state.chmod(0o755)  # the students' servers read their settings here
    hub.exchange.mkdir(parents=True, exist_ok=True)
    for folder in (hub.exchange, hub.state):  # every account must reach both; their parents are not ours to open
        closed = unreachable(folder)
        if closed:
            raise HubError(f"the accounts cannot enter {closed.parent}, so not {folder}: choose a folder they reach")
    passwords = {user: _account(hub, user) for user in hub.users}
    passwords = {user: word for user, word in passwords.items() if word}
    # nbgrader's release checks that the exchange's permission bits are 0o777 and leaves them be when they are; the
    # sticky bit on top keeps students from renaming or removing what they do not own there.
    hub.exchange.chmod(0o1777)
    _course(hub)
    _learner_settings(hub)
    if passwords:
        file = hub.state / "passwords"
        file.touch(mode=0o600)
        file.write_text(file.read_text() + "".join(f"{user} {word}\n" for user, word in passwords.items()))
    return passwords


def _run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise HubError(f"`{' '.join(argv)}` failed: {(done.stderr or done.stdout).strip()}")
    return done


def _account(hub: Hub, user: str) -> str:
    """Create ``user`` with a closed home and a random password (returned), noted in the state folder as the hub's
    to remove; "" for an account that existed already."""
    try:
        pwd.getpwnam(user)
        return ""
    except KeyError:
        pass
    _run(["useradd", "--create-home", "--shell", "/bin/bash", user])
    with open(hub.state / "accounts", "a") as made:
        made.write(user + "\n")
    Path(pwd.getpwnam(user).pw_dir).chmod(0o700)
    password = secrets.token_urlsafe(12)
    _run(["chpasswd"], input=f"{user}:{password}\n")
    return password


def _course(hub: Hub) -> None:
    """Clone this checkout's committed tree into the instructor's home (once), owned by them, with this checkout's
    virtual environment."""
    course = hub.course()
    if course.exists():
        return
    owner = pwd.getpwnam(hub.instructor)
    _run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(course)])
    (course / ".venv").symlink_to(hub.venv)
    # make's rule that installs the venv compares the pins with its stamp. A fresh clone's files are newer than the
    # stamp, but they are the pins this venv was installed from (`make hub` needs the stamp, which it makes first
    # if the checkout's are newer): so they get the stamp's time, and the instructor's `make` installs nothing.
    stamp = hub.venv / ".installed"
    for pins in ("requirements.txt", "pyproject.toml", "package-lock.json"):
        if stamp.exists() and (course / pins).read_bytes() == (REPO / pins).read_bytes():
            os.utime(course / pins, ns=(stamp.stat().st_mtime_ns,) * 2)  # a float time can round past the stamp's
    _run(["chown", "-R", f"{owner.pw_uid}:{owner.pw_gid}", str(course)])


def _learner_settings(hub: Hub) -> None:
    """The students' Jupyter settings: the learner's server and lab settings of this checkout, and an nbgrader
    configuration of the hub's."""
    settings = hub.state / "learner"
    if settings.exists():
        shutil.rmtree(settings)
    shutil.copytree(LEARNER_SETTINGS, settings, ignore=shutil.ignore_patterns("nbgrader_config.py"))
    (settings / "nbgrader_config.py").write_text(
        "# The hub's students' nbgrader settings (written by `make hub`, autograder/tools/hub.py): fetch into the\n"
        "# student's home, the server's working folder, and submit to the shared exchange.\n"
        "c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.Exchange.root = {str(hub.exchange)!r}\n")
    for path in [settings, *settings.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def configure(c, hub: Hub) -> None:
    """Apply the hub's settings to JupyterHub's traitlets config ``c`` (jupyter-config/hub/jupyterhub_config.py)."""
    c.JupyterHub.bind_url = hub.url
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = hub.port + 1
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{hub.port + 2}"
    c.ConfigurableHTTPProxy.command = [str(PROXY)]
    c.JupyterHub.db_url = f"sqlite:///{hub.state / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(hub.state / "jupyterhub_cookie_secret")
    c.JupyterHub.authenticator_class = "pam"  # the accounts' own passwords
    c.Authenticator.allowed_users = set(hub.users)
    c.Spawner.default_url = "/lab"
    c.Spawner.cmd = [str(hub.venv / "bin" / "jupyterhub-singleuser")]
    c.Spawner.args = list(hub.server_args)
    # Kernels run `python` and nbgrader runs `alembic`: this environment's. The kernels import labtools and the
    # course's checks from this checkout, as a learner's own `make lab` does.
    c.Spawner.environment = {"PATH": os.pathsep.join([str(hub.venv / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]),
                             "PYTHONPATH": str(REPO)}
    c.Spawner.http_timeout = 120  # a server's first start on a loaded 2-core machine
    c.Spawner.start_timeout = 120

    def per_user(spawner) -> None:
        if spawner.user.name == hub.instructor:
            # Formgrader takes the server's working folder for the course, so the server starts in ~/course, and
            # imports the course's code from there, as `make autograde` in that folder does.
            spawner.cmd = ["/bin/sh", "-c", 'cd "$HOME/course" && exec "$@"', "sh", *spawner.cmd]
            spawner.environment = {**spawner.environment, EXCHANGE_ENV: str(hub.exchange),
                                   "PYTHONPATH": str(hub.course())}
        else:
            spawner.environment = {**spawner.environment, "JUPYTER_CONFIG_PATH": str(hub.state / "learner")}

    c.Spawner.pre_spawn_hook = per_user


def unreachable(path: Path) -> Path | None:
    """The top folder of ``path`` below the first ancestor other users cannot enter (``/root/.pyenv`` for
    ``/root/.pyenv/versions/...`` when /root is 0700), or None when every ancestor lets them through."""
    for ancestor in reversed(path.parents[:-1]):  # from the top down, / excluded
        if not os.stat(ancestor).st_mode & 0o001:
            return ancestor / path.relative_to(ancestor).parts[0]
    return None


def command(hub: Hub) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that start the hub (in the foreground), run from ``hub.state``: in a private mount
    namespace (REACH_INTERPRETER) where the accounts could not reach the interpreter otherwise.

    Raises:
        HubError: the interpreter is inside a top-level folder the accounts cannot enter (hiding all of it is too
            much): install Python where others may run it.
    """
    env = {**os.environ, SETTINGS_ENV: hub.to_env(),
           "PATH": os.pathsep.join([str(hub.venv / "bin"), os.environ.get("PATH", "")]),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    argv = [str(hub.venv / "bin" / "jupyterhub"), "-f", str(HUB_CONFIG)]
    interpreter = Path(os.path.realpath(hub.venv / "bin" / "python"))
    blocked = {found for found in (unreachable(interpreter), unreachable(hub.venv.resolve())) if found}
    if not blocked:
        return argv, env
    if any(folder.parent == Path("/") for folder in blocked):
        raise HubError(f"the accounts cannot reach {', '.join(sorted(map(str, blocked)))}, where this environment's "
                       "Python is: install Python where other users may run it")
    env["BLOCKED"] = " ".join(sorted(map(str, blocked)))
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", REACH_INTERPRETER, "hub", *argv], env


def remove(hub: Hub) -> list[str]:
    """Remove what create() made: the accounts it created (with their homes), the course's exchange folder and the
    state folder. Returns what was removed, one line each, and a line starting "NOT removed" for an account that
    could not be."""
    removed = []
    made = hub.state / "accounts"
    for user in (made.read_text().split() if made.exists() else []):
        _end_processes_of(user)
        done = subprocess.run(["userdel", "--remove", user], capture_output=True, text=True)
        if done.returncode in (0, 6, 12):  # 6: no such user (any more); 12: its home or mail spool was not there
            removed.append(f"account {user} and its home")
        else:  # 8: a process of the account still runs (its server: stop the hub first)
            removed.append(f"NOT removed: account {user}: {done.stderr.strip()}")
    course = hub.exchange / COURSE_ID
    if course.exists():
        shutil.rmtree(course)
        removed.append(str(course))
    if hub.state.exists():
        shutil.rmtree(hub.state)
        removed.append(str(hub.state))
    return removed


def _end_processes_of(user: str, grace_s: float = 10) -> None:
    """End every process an account of the hub's still runs (a server the hub left behind as it stopped):
    SIGTERM, then SIGKILL after ``grace_s`` seconds. The account exists for the hub alone."""
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        return
    pids = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and _uid_of(entry) == uid]
    for signal_number in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal_number)
        deadline = time.monotonic() + grace_s
        while (pids := [pid for pid in pids if Path(f"/proc/{pid}").exists()]) and time.monotonic() < deadline:
            time.sleep(0.2)


def _uid_of(process: Path) -> int | None:
    """The real uid of a /proc/<pid> entry, or None for a process that has ended."""
    try:
        return process.stat().st_uid
    except FileNotFoundError:
        return None


def main(action: str) -> int:
    """``make hub`` (action "start": set up, then run the hub until Ctrl-C) and ``make hub-remove`` ("remove")."""
    hub = Hub(ip=os.environ.get("HUB_IP", Hub.ip), port=int(os.environ.get("HUB_PORT", Hub.port)))
    if action == "remove":
        for line in remove(hub):
            print(f"removed {line}")
        return 0
    try:
        passwords = create(hub)
    except HubError as error:
        print(f"make hub: {error}", file=sys.stderr)
        return 2
    print(f"JupyterHub at {hub.url}: instructor {hub.instructor}, students {', '.join(hub.students)}.")
    for user, word in passwords.items():
        print(f"  {user}: password {word}")
    print(f"Passwords are kept in {hub.state / 'passwords'} (root only). The instructor's course is {hub.course()};"
          f" the exchange is {hub.exchange}. Ctrl-C stops the hub; `make hub-remove` removes all of it.", flush=True)
    try:
        argv, env = command(hub)
    except HubError as error:
        print(f"make hub: {error}", file=sys.stderr)
        return 2
    os.chdir(hub.state)
    os.execvpe(argv[0], argv, env)  # `unshare` is found on PATH
