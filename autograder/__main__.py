"""Command line: ``python -m autograder {grade,autograde,report,progress,release,solutions,demo,bench,bench-grading,
bench-checks,lab,hub}``.

Exit codes of ``grade``: 0 full marks, 1 points missing, 2 the notebook cannot be graded, or the course's grading
secret cannot be read (reason on stderr, and with ``--json`` in the printed object's "error", its scores null).
Exit codes of ``autograde``: 0 every submission graded (or already graded), 1 some failed (each with its reason in
the log) or the cluster was lost, 2 the run cannot start (one reason on stderr), 128 + the signal's number when a
stop signal ended it (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP; a re-run resumes).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from autograder.contract import assignments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    grade = commands.add_parser("grade", help="grade one learner notebook against the hidden tests")
    grade.add_argument("notebook", type=Path)
    grade.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    grade.add_argument("--feedback", type=Path, metavar="HTML", help="also write nbgrader's feedback page here")
    autograde = commands.add_parser("autograde", help="grade every submission of an assignment in parallel on Dask, "
                                                      "into nbgrader's gradebook")
    autograde.add_argument("assignment", nargs="+", help="one or more assignments, graded on one cluster")
    autograde.add_argument("--course", type=Path, default=Path("."), help="the course folder (default: here)")
    autograde.add_argument("--student", action="append", default=[], metavar="ID", help="grade only this student "
                           "(repeatable)")
    autograde.add_argument("--force", action="store_true", help="grade again what is already graded")
    autograde.add_argument("--workers", type=int, metavar="N", help="local Dask workers (default: one per core)")
    autograde.add_argument("--scheduler", metavar="ADDRESS", help="use a running Dask scheduler, e.g. tcp://host:8786")
    autograde.add_argument("--timeout", type=float, metavar="SECONDS", help="CPU seconds one submission's grading "
                           "may use (nbgrader, its kernel and checks; past it the submission fails); past 4 times as "
                           "many wall seconds plus the 1200 s its sandboxes may sleep, the machine is at fault, a "
                           "frozen worker's included: graded again next run (default: 1800)")
    autograde.add_argument("--without-sandbox", action="store_true", help="grade even where bubblewrap cannot "
                           "sandbox learner code (it could then read the course folder); refused otherwise")
    for command, what in (("release", "regenerate notebooks/ from source/"),
                          ("solutions", "regenerate and execute solutions/ from source/")):
        build_one = commands.add_parser(command, help=what)
        build_one.add_argument("names", nargs="*", metavar="ASSIGNMENT", help="only these (default: every one); "
                               "a notebook's path names its assignment too")
    report = commands.add_parser("report", help="what the class got wrong: one HTML page (and CSV/JSON) from the "
                                                "gradebook and the autograded notebooks; grades unchanged")
    report.add_argument("assignment", nargs="*", help="default: every assignment with submissions")
    report.add_argument("--course", type=Path, default=Path("."), help="the course folder (default: here)")
    report.add_argument("--out", type=Path, metavar="FOLDER", help="where to write (default: "
                        "<course>/autograde-logs/report)")
    commands.add_parser("progress", help="a self-study learner's five notebooks: each exercise done or not, with "
                                         "the cause of each open one")
    commands.add_parser("demo", help="rebuild everything and grade a demo class with nbgrader")
    commands.add_parser("bench", help="time one MNIST-sized epoch: course engine vs numpy vs torch")
    commands.add_parser("bench-grading", help="grade a synthetic class serially with nbgrader and in parallel; "
                                              "print the speed-up")
    commands.add_parser("bench-checks", help="time every test cell in a kernel, with the solution and a wrong answer")
    lab = commands.add_parser("lab", help="start JupyterLab for a learner, a pair or an instructor; arguments "
                                          "after the kind go to JupyterLab")
    lab.add_argument("kind", choices=("learner", "pair", "instructor"))
    hub = commands.add_parser("hub", help="set up and start a JupyterHub for an instructor and two students "
                                          "(as root), or remove it")
    hub.add_argument("action", choices=("start", "remove"), nargs="?", default="start")
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "lab":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    # nbgrader shells out to `alembic` and Jupyter to `python`: both must come from this interpreter's environment.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])

    if args.command == "grade":
        return run_grade(args.notebook, args.json, args.feedback)
    if args.command == "autograde":
        return run_autograde(args)
    if args.command == "lab":
        from autograder.tools.lab import main as lab  # each command loads only its own code
        return lab(args.kind, rest)
    if args.command == "hub":
        from autograder.tools.hub import main as hub  # each command loads only its own code
        return hub(args.action)
    if args.command == "bench-grading":
        from autograder.tools.bench_grading import main as bench_grading  # each command loads only its own code
        return bench_grading()
    if args.command == "report":
        from autograder.tools.report import run as report  # each command loads only its own code
        return report(args.course, args.assignment, args.out)
    if args.command == "progress":
        from autograder.tools.progress import main as progress  # each command loads only its own code
        return progress()
    if args.command == "demo":
        from autograder.tools.demo import main as demo  # each command loads only its own code
        return demo()
    if args.command == "bench":
        from autograder.tools.bench import main as bench  # each command loads only its own code
        return bench()
    if args.command == "bench-checks":
        from autograder.tools.bench_checks import main as bench_checks  # each command loads only its own code
        return bench_checks()
    from autograder.course import build  # release, solutions: nbgrader loads only for them

    names = [Path(name).stem for name in args.names]
    unknown = [name for name in names if name not in assignments()]
    if unknown:
        parser.error(f"no assignment {', '.join(unknown)}; the course has {', '.join(assignments())}")
    for path in getattr(build, args.command)(names=names or None):
        print(path)
    return 0


def run_grade(notebook: Path, as_json: bool, feedback: Path | None) -> int:
    # Only what grading one notebook needs (nbgrader and torch load later, once the file is known to be gradable).
    from autograder.grade.notebook import UnusableNotebook, grade
    from autograder.trust import sandbox
    from autograder.trust.secret import GradingSecretError

    def announce(assignment: str) -> None:
        if not as_json:
            print(f"Grading {notebook} ({assignment}) against the hidden tests, about 20 s...", file=sys.stderr,
                  flush=True)

    if sandbox.refusal():  # a self-study learner grades their own notebook: allowed, with the warning
        os.environ[sandbox.WITHOUT_SANDBOX_ENV] = "1"
    try:
        report = grade(notebook, feedback, on_start=announce)
    except (UnusableNotebook, GradingSecretError) as reason:
        print(f"cannot grade: {reason}", file=sys.stderr)
        if as_json:  # a machine gets its one object too: no score, and why
            print(json.dumps({"notebook": str(notebook), "error": str(reason), "score": None, "max_score": None,
                              "exercises": []}, indent=2))
        return 2
    print(report.to_json() if as_json else report.to_table())
    if feedback and not as_json:
        print(f"\nfeedback page: {feedback}")
    return 0 if report.score >= report.max_score else 1


def run_autograde(args) -> int:
    try:
        return _autograde(args)
    except KeyboardInterrupt:  # a Ctrl-C while the command starts (imports), or a second one outside nbgrader
        print("stopped at once; a record cut short is removed by the next run, which grades it again",
              file=sys.stderr)
        return 130


def _autograde(args) -> int:
    # The sandbox, for this command only: a machine that cannot sandbox is refused before Dask and nbgrader load.
    from autograder.trust import sandbox

    if sandbox.refusal() and not args.without_sandbox:
        print(f"cannot grade: {sandbox.refusal()}", file=sys.stderr)
        return 2
    if args.without_sandbox:
        os.environ[sandbox.WITHOUT_SANDBOX_ENV] = "1"  # for the grading workers, which inherit it
    if sandbox.warning():
        print(sandbox.warning(), file=sys.stderr)
    # The class run, once it may start.
    from autograder.grade.class_run import ClassGradingError, StopRequest, grade_class
    from autograder.grade.submission import TIMEOUT_S

    stop = StopRequest()
    try:
        rows = grade_class(args.course, args.assignment, students=args.student, force=args.force,
                           workers=args.workers, scheduler=args.scheduler,
                           timeout_s=TIMEOUT_S if args.timeout is None else args.timeout, stop=stop)
    except ClassGradingError as reason:
        print(f"cannot grade: {reason}", file=sys.stderr)
        return 2
    if stop.requested:
        return stop.exit_code
    print(f"What the class got wrong: make report ASSIGNMENT='{' '.join(args.assignment)}' (that is, python -m "
          f"autograder report {' '.join(args.assignment)} --course {args.course})", file=sys.stderr)
    return 1 if any(row.status == "failed" for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
