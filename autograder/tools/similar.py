"""Pairs of submissions whose answer cells are unusually alike, found with copydetect (a winnowing detector in the
style of MOSS: Schleimer, Wilkerson and Aiken, "Winnowing: local algorithms for document fingerprinting", 2003).

Only what a learner wrote counts: the course's own code in each answer cell (the given lines and the stub a learner
starts from, and the solution itself) is boilerplate, removed from every fingerprint before two submissions are
compared. So a class that hands in the solution, or the same catalogued slip of it, shares nothing; two learners who
wrote the same code of their own share a lot. A flag is for a person to look at: it never changes a grade.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from itertools import combinations

# copydetect's own default noise threshold: a shared run shorter than this many filtered characters is not counted.
K = 25
# A pair is flagged when each side's own code (boilerplate removed) is at least this share shared with the other,
# and the shared code is at least MIN_SHARED filtered characters long (a few lines, not one common idiom). Stricter
# than copydetect's display threshold of 0.33, which is meant for whole files that still hold the course's code.
MIN_SIMILARITY = 0.5
MIN_SHARED = 120
CONTEXT_LINES = 2  # lines shown around each matched run, side by side


@dataclass
class Pair:
    """Two submissions of one assignment whose own answer code is alike."""
    assignment: str
    students: tuple[str, str]
    similarity: tuple[float, float]   # share of each side's own code found in the other, 0..1
    shared: int                       # filtered characters in matched runs (copydetect's token overlap)
    matched: tuple[str, str]          # each side's answer code as HTML, matched runs in <mark>, the rest cut short


def answer_code(nb, course_nb) -> str:
    """The learner's answer cells of ``nb``, in the course's order, as one Python text.

    Cells are found by the grade ids of the course notebook ``course_nb``; a cell the submission lacks is empty.
    """
    from autograder.contract import nbgrader_meta  # a leaf module: nothing heavier than the standard library

    mine = {nbgrader_meta(c).get("grade_id"): c.source for c in nb.cells if c.cell_type == "code"}
    return "\n\n".join(f"# {grade_id}\n{mine.get(grade_id, '')}" for grade_id in answer_ids(course_nb))


def answer_ids(course_nb) -> list[str]:
    from autograder.contract import nbgrader_meta  # a leaf module: nothing heavier than the standard library

    return [nbgrader_meta(c)["grade_id"] for c in course_nb.cells
            if c.cell_type == "code" and nbgrader_meta(c).get("solution")]


def course_code(course_nb) -> list[str]:
    """The course's own text of the answer cells: each source cell (given code, solution and its markers), the
    learner's copy (the solution replaced by a stub) and bare stubs, alone and in sequence as answer_code joins them
    (so the runs that span two cells are the course's too)."""
    from nbgrader.preprocessors import ClearSolutions  # nbgrader's own rule for what a learner is handed

    import nbformat

    from autograder.course import solution_version  # the course's rule for its solution notebook

    released, _ = ClearSolutions().preprocess(nbformat.from_dict(course_nb), {})
    # Each answer cell a bare stub, given code and all replaced: what a learner who cleared the cells hands in.
    bare, _ = ClearSolutions().preprocess(solution_version(course_nb), {})
    versions = (course_nb, solution_version(course_nb), released, bare)
    ids = set(answer_ids(course_nb))
    cells = [c.source for nb in versions for c in nb.cells
             if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get("grade_id") in ids]
    return cells + [answer_code(nb, course_nb) for nb in versions]


def fingerprint(code: str, boilerplate: set | None = None):
    """copydetect's fingerprint of ``code``, every k-gram whose hash is in ``boilerplate`` left out."""
    from copydetect import CodeFingerprint  # loaded by the report only
    from copydetect.utils import get_token_coverage

    # win_size=1 keeps every k-gram: answer cells are short, so exact overlap costs nothing.
    found = CodeFingerprint("answers.py", K, 1, fp=io.StringIO(code))
    if boilerplate:
        # Removed here rather than by copydetect's own boilerplate argument: that one matches hashes with
        # numpy.intersect1d(assume_unique=True), and a document's k-gram hashes repeat (code repeats itself), so it
        # leaves some of the course's code in.
        found.hash_idx = {h: where for h, where in found.hash_idx.items() if h not in boilerplate}
        found.hashes = set(found.hash_idx)
        found.token_coverage = get_token_coverage(found.hash_idx, K, len(found.filtered_code))
    return found


def similar_pairs(assignment: str, answers: dict[str, str], course: list[str]) -> list[Pair]:
    """Every pair of ``answers`` (student -> answer_code) whose own code is alike, most alike first.

    ``course`` is the course's own code (course_code), removed from every fingerprint first.
    """
    from copydetect import compare_files  # loaded by the report only

    boilerplate = {h for text in course for h in fingerprint(text).hashes}
    prints = {student: fingerprint(code, boilerplate) for student, code in sorted(answers.items())}
    found = []
    for a, b in combinations(prints, 2):
        shared, similarity, slices = compare_files(prints[a], prints[b])
        if shared >= MIN_SHARED and min(similarity) >= MIN_SIMILARITY:
            found.append(Pair(assignment, (a, b), (float(similarity[0]), float(similarity[1])), int(shared),
                              (marked(prints[a].raw_code, slices[0]), marked(prints[b].raw_code, slices[1]))))
    return sorted(found, key=lambda p: -min(p.similarity))


def marked(code: str, slices) -> str:
    from copydetect.utils import highlight_overlap  # loaded by the report only

    shown, _ = highlight_overlap(code, slices, "<mark>", "</mark>", truncate=CONTEXT_LINES, escape_html=True)
    return shown
