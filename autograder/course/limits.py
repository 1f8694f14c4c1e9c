"""How much one submission may cost nbgrader's execute stage: the kernel's whole run, which no cell resets, the
notebook's size, and the outputs its run may leave (enforced by autograder.course.preprocessors.ContainedExecute,
and by ``python -m autograder grade`` when it reads a file). It imports only autograder.grade.submission, a leaf."""
from __future__ import annotations

import os

from autograder.grade.submission import MAX_FILE_BYTES

# The whole notebook's run, which no cell resets: CPU seconds of the kernel's sandbox (a solution's kernel uses
# 3-10 s), and as many seconds of its cells' time when the sandbox was not even runnable (neither computing nor
# waiting for a CPU: it sleeps or waits), which no load brings on (autograder.trust.cputime.Runnable).
NOTEBOOK_CPU_S = float(os.environ.get("BACKPROP_NOTEBOOK_CPU_S", "300"))
NOTEBOOK_IDLE_S = NOTEBOOK_CPU_S
# On the wall clock, for a cell and for the whole run, this many times its limits: only a machine too loaded to grade
# gets there (1/30 of a core; at load 19 on 2 cores a sandbox gets about 1/10), and the reason says grading failed.
OVERLOAD_FACTOR = 30
NOTEBOOK_WALL_S = OVERLOAD_FACTOR * NOTEBOOK_CPU_S
# What a submission may be: the course's notebooks have at most 75 cells and 0.3 MiB with their outputs. A file past
# MAX_FILE_BYTES is refused before it is read (autograder.grade.submission.read_file); this is the same bound on a
# notebook nbgrader has read already (its JSON).
MAX_NOTEBOOK_BYTES = MAX_FILE_BYTES
MAX_CELLS = 1000
# What the kernel's run may leave in the outputs (a plot is about 50 KiB), per cell and for the whole notebook.
MAX_CELL_OUTPUT_BYTES = 2 << 20
MAX_OUTPUT_BYTES = 16 << 20
# What each output other than printed text counts against those caps at least: recording a notebook costs by the
# output, not by the byte (27,000 one-number displays, 5.9 MB, took a class run's recording process 19 CPU s, a
# whole class's worth: red team 7). A cell keeps up to 512 such outputs, a notebook 4,096. Printed text is one
# output per stream, however many times it is written to.
OUTPUT_CHARGE_BYTES = 4 << 10
# Output the grading process receives from one run before it stops the kernel: past the caps every message is
# dropped, but reading and decoding it still costs the grading process CPU (a cell can send 12 MiB in a fraction of
# a second, for as long as it runs).
FLOOD_BYTES = 2 * MAX_OUTPUT_BYTES


def oversized(size_bytes: int, cells: int) -> str | None:
    """Why a submission of ``size_bytes`` (its file, or its JSON) with ``cells`` cells is not graded, or None."""
    if size_bytes > MAX_NOTEBOOK_BYTES:
        return (f"the notebook is {size_bytes / (1 << 20):.1f} MiB, more than the {MAX_NOTEBOOK_BYTES >> 20} MiB a "
                "submission may be: clear its outputs (Edit > Clear Outputs of All Cells), save, and submit again")
    if cells > MAX_CELLS:
        return f"the notebook has {cells} cells, more than the {MAX_CELLS} a submission may have"
    return None
