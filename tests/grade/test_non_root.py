"""An instructor without root: `python -m autograder grade` run as a throw-away user (a uid no account has, so
nothing on the machine changes), with bubblewrap's unprivileged user namespaces and no cgroup of its own."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import REPO, solution_notebook

THROWAWAY_UID = 54_321  # above any account a distribution makes (they stop at 60000 for system users)
# Run as root in a private mount namespace: what the throw-away user needs of root's own folders (a Python
# installed under /root, mode 0700, as pyenv installs it for root) is bound back at the same path over a tmpfs, so
# every path the grader was given still holds; then the user's process replaces the shell.
RUN_AS = """set -e
for blocked in $BLOCKED; do
    keep=$(mktemp -d)
    mount --bind "$blocked" "$keep"
    mount -t tmpfs -o mode=755 tmpfs "$(dirname "$blocked")"
    mkdir -p "$blocked"
    mount --bind "$keep" "$blocked"
done
exec setpriv --reuid=$TO_UID --regid=$TO_UID --clear-groups "$@"
"""


@pytest.fixture
def home():
    """The throw-away user's home: in /tmp itself, since pytest's own temp folders are root's alone (0700)."""
    folder = Path(tempfile.mkdtemp(prefix="bfs-non-root-"))
    os.chown(folder, THROWAWAY_UID, THROWAWAY_UID)
    yield folder
    shutil.rmtree(folder)


def unreachable_by_others(path: Path) -> Path | None:
    """The top folder of ``path`` below the first ancestor other users cannot enter (``/root/.pyenv`` for
    ``/root/.pyenv/versions/...`` when /root is 0700), or None when every ancestor lets them through."""
    for ancestor in reversed(path.parents[:-1]):  # from the top down, / excluded
        if not os.stat(ancestor).st_mode & 0o001:
            return ancestor / path.relative_to(ancestor).parts[0]
    return None


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("setpriv")),
                    reason="starts a throw-away user: needs root, unshare and setpriv (util-linux)")
def test_a_user_without_root_grades_a_notebook(home):
    notebook = home / "01_nudging.ipynb"  # theirs: a copy in their own folder
    shutil.copy(solution_notebook("01_nudging"), notebook)
    os.chown(notebook, THROWAWAY_UID, THROWAWAY_UID)
    interpreter = Path(os.path.realpath(sys.executable))
    blocked = {found for found in map(unreachable_by_others, (interpreter, REPO.resolve())) if found}
    if any(part.parent == Path("/") for part in blocked):
        pytest.skip(f"other users cannot reach {sorted(map(str, blocked))}, and hiding a top-level folder is too much")
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(home),
           "TMPDIR": str(home), "PYTHONPATH": str(REPO), "LANG": "C.UTF-8",
           **{name: str(home / name.lower()) for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
                                                           "JUPYTER_RUNTIME_DIR", "IPYTHONDIR")}}

    def as_user(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", RUN_AS, "run-as",
                               "env", "-i", *(f"{name}={value}" for name, value in env.items()), *argv],
                              env={**os.environ, "BLOCKED": " ".join(map(str, sorted(blocked))),
                                   "TO_UID": str(THROWAWAY_UID)},
                              cwd=home, capture_output=True, text=True, timeout=900)

    # `grade` keys its cases with the course's grading secret, which is the course owner's (mode 0600): here the
    # throw-away user stands for that owner, so it holds the secret for the run.
    from autograder.trust import secret

    key = REPO / secret.FILE
    secret.course_secret(REPO)  # made now if this checkout has none yet
    owner = key.stat()
    os.chown(key, THROWAWAY_UID, owner.st_gid)
    try:
        done = as_user(sys.executable, "-m", "autograder", "grade", "--json", str(notebook))
    finally:
        os.chown(key, owner.st_uid, owner.st_gid)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert '"score": 10.0' in done.stdout
    assert not any(path.stat().st_uid != THROWAWAY_UID for path in home.rglob("*"))  # it wrote as that user only
    probe = as_user(sys.executable, "-c", "from autograder.trust import sandbox; print(sandbox.unusable())")
    if probe.stdout.strip() == "None":  # bubblewrap works for that user here: then grading used it
        assert "WITHOUT a sandbox" not in done.stderr, done.stderr
