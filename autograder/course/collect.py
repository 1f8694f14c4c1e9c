"""``nbgrader collect``, reading each submission in the exchange as data.

The exchange is world-writable and a learner owns their submission's folder in it, while collect runs with the
instructor's rights. nbgrader's own copy (shutil.copytree) follows links: a submission holding a link to the course's
source notebook would be collected as that notebook, solutions and all, and a named pipe fails the copy, which stops
the collect of every student after it. ``configure`` (autograder.course) makes :class:`CollectAsData` nbgrader's
collect, for ``nbgrader collect`` and Formgrader's Collect button alike.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect

from autograder.grade.submission import UnsafeSubmissionError, read_tree


class CollectAsData(ExchangeCollect):
    """nbgrader's collect, except that each submission is read by read_tree (no link followed, no special file
    opened, sizes capped) and nbgrader copies what was read, not the exchange's folder.

    A refused submission is not collected, and an earlier copy of it stays in submitted/ (it is refused before
    ``--update`` would remove that copy); the log names the learner and the reason. The others are collected, then
    the command fails, so that the refusals are not missed.
    """

    def init_src(self):
        super().init_src()
        self.refused = []
        self.src_records = [record for record in self.src_records
                            if self._read(str(Path(self.inbound_path) / record["filename"])) is not None]

    def do_copy(self, src, dest, log=None):
        files = self._read(src)  # again: what is copied is what is read now, whatever the learner changed since
        if files is None:
            return
        with tempfile.TemporaryDirectory(prefix="collect-") as copy:
            for relative, content in files.items():
                (Path(copy) / relative).parent.mkdir(parents=True, exist_ok=True)
                (Path(copy) / relative).write_bytes(content)
            super().do_copy(copy, dest, log)  # nbgrader's copy: its include, size and group-sharing rules still apply

    def copy_files(self):
        super().copy_files()
        if self.refused:
            self.fail(f"not collected, each for the reason logged above: {', '.join(sorted(self.refused))}")

    def _read(self, src: str) -> dict[str, bytes] | None:
        """The submission's files, or None (logged, and its learner listed in ``refused``) when it is refused."""
        try:
            return read_tree(Path(src), self.coursedir.ignore)
        except UnsafeSubmissionError as refused:
            student = self._path_to_record(src)["username"]
            self.log.error("Not collecting %s's submission %s: %s", student, src, refused)
            self.refused.append(student)
            return None
