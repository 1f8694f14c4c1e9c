"""`make bench-checks`: how long a learner waits for each test cell, with a right answer and with a wrong one.

Each notebook runs in a fresh kernel as a learner works through it: the given cells (before the first exercise
whole, after it their definitions only, as ``autograder.tools.solutions.solution_namespace`` holds them: no
demonstration or training run is timed), and at each exercise its answer cell with the solution, the test cell,
then the answer cell with a catalogued slip (the first one-cell rejection case of the check tests, as the parity
harness reads them: ``tests/checks/catalogue.py``), the test cell again, and the solution once more, as a learner
who corrects a mistake does. Test cells are the learner's (the hidden block removed): ``run_check`` and the visible
asserts. A cell's time is nbclient's, from the kernel's start of the cell to its reply (wall seconds: what the
learner waits), and the kernel's CPU seconds for it (read by a cell before and after it), which a machine loaded by
other work does not inflate. Each notebook runs REPEATS times, each in a new kernel; the table shows medians.

Targets (issue 24, on a quiet 2-core machine): p95 <= 1 s and max <= 2 s for solutions and wrong answers alike, and
the first test cell of a notebook <= 1.5 s (it pays for importing the checks and torch).
"""
from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass
from datetime import datetime

import nbformat
from nbclient import NotebookClient

from autograder.contract import INTERACTIVE_TAG, REPO, assignments
from autograder.course import KERNEL_ARGS, solution_version
from autograder.course.kernels import LocalKernelManager
from autograder.trust.verdicts import bindings, definitions

REPEATS = 3
TARGETS = {"p95": 1.0, "max": 2.0, "first": 1.5}  # seconds
SLOWEST = 8  # cells listed after the table
CPU_NAME = "_bench_cpu_started"  # the kernel variable that holds process_time() before a timed cell


@dataclass(frozen=True)
class Timed:
    """Which test cell a program cell is: its notebook, exercise and answer (solution or slip)."""
    notebook: str
    exercise: str
    answer: str


def slips() -> dict[str, tuple[str, tuple]]:
    """Exercise id -> (case id, edits) of its first catalogued rejection case that changes its own answer cell
    and nothing else: what a learner types there, runs and then corrects. Read from the check tests."""
    sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "checks")]  # the catalogue lives with the tests
    from catalogue import harvest  # why: from tests/checks, put on the path just above

    found = {}
    for case in harvest().cases:
        recipe = case.recipe
        if not case.passes and not recipe.objects and not recipe.extra and set(recipe.edits) == {case.exercise}:
            found.setdefault(case.exercise, (case.id, tuple(recipe.edits[case.exercise])))
    return found


def program(name: str, wrong: dict) -> tuple[nbformat.NotebookNode, dict[int, Timed]]:
    """The cells a learner runs in notebook ``name`` (see the module's docstring), and which of them to time."""
    nb = solution_version(nbformat.read(assignments()[name], as_version=4))
    cells, timed, seen_answer = [], {}, False
    answers, unbound = {}, set()  # unbound: what definitions() has left out so far (see its docstring)

    def add(source: str, what: Timed | None = None) -> None:
        if what is not None:  # the kernel's CPU seconds for the cell, read by two cells around it (cpu_seconds)
            cells.append(nbformat.v4.new_code_cell(f"{CPU_NAME} = __import__('time').process_time()"))
            timed[len(cells)] = what
        cells.append(nbformat.v4.new_code_cell(source))
        if what is not None:
            cells.append(nbformat.v4.new_code_cell(f"print(__import__('time').process_time() - {CPU_NAME})"))

    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("solution"):
            seen_answer = True
            answers[meta["grade_id"]] = cell.source
            unbound -= bindings(cell.source)
            add(cell.source)
        elif meta.get("grade"):
            exercise = meta["grade_id"].removeprefix("test_")
            add(cell.source, Timed(name, exercise, "solution"))
            if exercise in wrong and exercise in answers:
                slip = answers[exercise]
                for right, changed in wrong[exercise][1]:
                    slip = slip.replace(right, changed)
                add(slip)
                add(cell.source, Timed(name, exercise, "wrong"))
                add(answers[exercise])  # corrected: the cells after it build on the solution
        elif INTERACTIVE_TAG not in cell.metadata.get("tags", []):  # a widget waits for a person
            code = definitions(cell.source, unbound) if seen_answer else cell.source
            if code.strip():
                add(code)
    return nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata), timed


def seconds(cell) -> float | None:
    """A run cell's time, from nbclient's record: the kernel's start of the cell to its reply."""
    timing = cell.metadata.get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not start or not end:
        return None
    return (datetime.fromisoformat(end.replace("Z", "+00:00")) -
            datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()


def cpu_seconds(cell) -> float:
    """What the cell after a timed one printed: the kernel's CPU seconds for the timed cell."""
    return float("".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream"))


def run_once(name: str, wrong: dict) -> tuple[dict[Timed, tuple[float, float]], float, list[str]]:
    """One run of notebook ``name`` in a fresh kernel: each timed cell's (wall, kernel CPU) seconds, the first test
    cell's wall seconds, and what went unexpectedly (a solution that did not pass, a slip that passed, or failed
    other than with the check's diagnosis)."""
    nb, timed = program(name, wrong)
    folder = assignments()[name].parent  # data files and labtools resolve as in the learner's folder
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True, extra_arguments=KERNEL_ARGS,
                   kernel_manager_class=LocalKernelManager,
                   record_timing=True, resources={"metadata": {"path": str(folder)}}).execute()
    found, surprises = {}, []
    for index, what in timed.items():
        cell = nb.cells[index]
        found[what] = (seconds(cell), cpu_seconds(nb.cells[index + 1]))
        failed = [o.ename for o in cell.outputs if o.output_type == "error"]
        if failed != (["CheckFailure"] if what.answer == "wrong" else []):
            shown = next((f"{o.ename}: {o.evalue[:120]}" for o in cell.outputs if o.output_type == "error"), "passed")
            surprises.append(f"{name} {what.exercise} ({what.answer}): {shown}")
    first = found[timed[min(timed)]][0]
    return found, first, surprises


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(share * len(ordered) + 0.5)) - 1))]


def main() -> int:
    wrong = slips()
    medians, firsts, surprises = {}, {}, []
    load = os.getloadavg()
    for name in assignments():
        runs = []
        for _ in range(REPEATS):
            found, first, odd = run_once(name, wrong)
            runs.append((found, first))
            surprises += odd
        for what in runs[0][0]:
            medians[what] = tuple(statistics.median(r[0][what][k] for r in runs) for k in (0, 1))
        firsts[name] = statistics.median(r[1] for r in runs)
        print(f"{name}: {len(runs[0][0])} test cells timed, {REPEATS} runs", flush=True)
    print(table(medians, firsts, wrong))
    print(f"\nload average when the run started: {load[0]:.1f} (1 min), {load[2]:.1f} (15 min), "
          f"{os.cpu_count()} cores")
    verdict = summary(medians, firsts)
    for line in verdict:
        print(line)
    for line in sorted(set(surprises)):
        print("unexpected:", line)
    return 0 if not any(line.endswith("NOT met") for line in verdict) and not surprises else 1


def table(medians: dict[Timed, tuple[float, float]], firsts: dict[str, float], wrong: dict) -> str:
    """Per exercise, the median wall and kernel CPU seconds of its test cell with the solution and with the slip."""
    rows = {}
    for what, value in medians.items():
        rows.setdefault((what.notebook, what.exercise), {})[what.answer] = value
    lines = [f"{'notebook':<22} {'exercise':<24} {'solution s':>10} {'(CPU)':>6} {'wrong s':>8} {'(CPU)':>6}  "
             "wrong answer (check test case)", "-" * 118]
    for (notebook, exercise), values in rows.items():
        right, slip = values["solution"], values.get("wrong")
        case = wrong.get(exercise, ("(no one-cell slip in the check tests)",))[0]
        shown = f"{slip[0]:>8.2f} {slip[1]:>6.2f}" if slip else f"{'-':>8} {'':>6}"
        lines.append(f"{notebook:<22} {exercise:<24} {right[0]:>10.2f} {right[1]:>6.2f} {shown}  {case}")
    lines.append("")
    lines.append("first test cell of each notebook (median wall s): " +
                 ", ".join(f"{n} {s:.2f}" for n, s in firsts.items()))
    slowest = sorted(medians.items(), key=lambda item: -item[1][0])[:SLOWEST]
    lines.append("slowest cells (wall): " + "; ".join(f"{w.exercise} ({w.answer}) {s[0]:.2f} s" for w, s in slowest))
    return "\n".join(lines)


def summary(medians: dict[Timed, tuple[float, float]], firsts: dict[str, float]) -> list[str]:
    """One line per target: the measured wall seconds (and kernel CPU seconds, which a loaded machine does not
    inflate), and whether the wall seconds meet it."""
    lines = []
    for answer in ("solution", "wrong"):
        walls = [v[0] for w, v in medians.items() if w.answer == answer]
        cpus = [v[1] for w, v in medians.items() if w.answer == answer]
        for name, pick in (("p95", lambda values: percentile(values, 0.95)), ("max", max)):
            measured = pick(walls)
            held = "met" if measured <= TARGETS[name] else "NOT met"
            lines.append(f"{answer:>8}: {name} {measured:.2f} s, CPU {pick(cpus):.2f} s "
                         f"(target <= {TARGETS[name]:g} s): {held}")
    worst = max(firsts.values())
    lines.append(f"first test cell: max {worst:.2f} s (target <= {TARGETS['first']:g} s): "
                 f"{'met' if worst <= TARGETS['first'] else 'NOT met'}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
