"""The report's HTML page (autograder.tools.report): one self-contained file, charts drawn with matplotlib and
embedded as PNG, no script, so it opens from disk, in a mail attachment or on a server that serves files only."""
from __future__ import annotations

import base64
import io

from autograder.tools.class_data import NOT_GRADED, UNKNOWN, ClassReport, is_knock_on

DPI = 96
ROW_INCHES = 0.28  # height of one exercise's bar


def chart(report: ClassReport, assignment: str) -> str:
    """A PNG (base64) of one assignment: per exercise its pass rate, and its failures split by cause (root causes
    solid, knock-on failures hatched)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt

    exercises = report.exercises[assignment]
    causes = sorted({c for e in exercises for c in report.causes(assignment, e)}, key=lambda c: (is_knock_on(c), c))
    colours = dict(zip(causes, plt.get_cmap("tab20").colors * (1 + len(causes) // 20)))
    rows = range(len(exercises))[::-1]  # the first exercise on top
    figure, (rates, counts) = plt.subplots(1, 2, figsize=(11, 1.2 + ROW_INCHES * len(exercises)), sharey=True,
                                           gridspec_kw={"width_ratios": [1, 2]})
    shares = []
    for exercise in exercises:
        passed, total = report.pass_rate(assignment, exercise)
        shares.append(100 * passed / total if total else 0)
    rates.barh(list(rows), shares, color="#4c9a2a")
    rates.set_xlim(0, 100)
    rates.set_xlabel("passed (% of submissions)")
    rates.set_yticks(list(rows), exercises)
    left = [0] * len(exercises)
    for cause in causes:
        widths = [len(report.causes(assignment, e).get(cause, [])) for e in exercises]
        counts.barh(list(rows), widths, left=left, color=colours[cause], label=cause,
                    hatch="//" if is_knock_on(cause) else None, edgecolor="white")
        left = [a + b for a, b in zip(left, widths)]
    counts.set_xlabel("failed submissions, by cause (hatched: knock-on)")
    counts.xaxis.get_major_locator().set_params(integer=True)
    if causes:
        counts.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    figure.suptitle(assignment)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def cell_kind(cause: str | None) -> str:
    """The map's class for one exercise of one submission."""
    if cause is None:
        return "pass"
    if cause == NOT_GRADED:
        return "not-graded"
    return "knock-on" if is_knock_on(cause) else "root"


TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>What the class got wrong: {{ course }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 80em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
td.pass { background: #d9f2d0; } td.root { background: #f6c4c4; } td.knock-on { background: #fbe3c2; }
td.not-graded { background: #ddd; }
table.map td { font-size: 0.8em; }
pre { margin: 0; font-size: 0.8em; white-space: pre-wrap; } mark { background: #ffe066; }
.pair td { width: 50%; }
</style></head><body>
<h1>What the class got wrong</h1>
<p>Course {{ course }}, {{ submissions|length }} submissions of {{ assignments|length }} assignment(s), made
{{ generated }}. Read from the gradebook and the autograded notebooks; nothing here changes a grade.
A <em>root cause</em> is a slip in the exercise itself; a <em>knock-on</em> failure (<code>builds-on:…</code>)
is an exercise that fails because one it builds on does. <code>{{ unknown }}</code>: the diagnosis names no cause.</p>
{% for a in assignments %}
<section class="assignment" id="{{ a.name }}">
<h2>{{ a.name }}</h2>
<img class="chart" alt="pass rate and causes per exercise of {{ a.name }}" src="data:image/png;base64,{{ a.chart }}">
<h3>Causes, and who shares them</h3>
<table class="causes"><tr><th>exercise</th><th>passed</th><th>cause</th><th>kind</th><th>students</th></tr>
{% for e in a.exercises %}{% for cause, students in e.causes.items() %}
<tr><td>{{ e.id }}</td><td>{{ e.passed }}/{{ e.total }}</td><td><code>{{ cause }}</code></td>
<td>{{ kind(cause) }}</td><td>{{ students|join(", ") }}</td></tr>
{% else %}<tr><td>{{ e.id }}</td><td>{{ e.passed }}/{{ e.total }}</td><td colspan="3">no failure</td></tr>
{% endfor %}{% endfor %}
</table>
<h3>Students &times; exercises</h3>
<table class="map"><tr><th>student</th><th>score</th>{% for e in a.exercises %}<th>{{ e.id }}</th>{% endfor %}</tr>
{% for s in a.submissions %}<tr><td>{{ s.student }}</td><td>{{ "%g"|format(s.score) }}/{{ "%g"|format(s.max_score) }}</td>
{% for e in a.exercises %}{% set o = s.exercises.get(e.id) %}
<td class="{{ kind(o.cause if o else none) }}">{{ "&check;"|safe if o and o.cause is none else (o.cause if o else "") }}</td>
{% endfor %}</tr>{% endfor %}
</table>
</section>
{% endfor %}
<h2>Causes that persist from one notebook to the next</h2>
{% if persisting %}<table class="persisting"><tr><th>student</th><th>cause</th><th>assignments</th></tr>
{% for p in persisting %}<tr><td>{{ p.student }}</td><td><code>{{ p.cause }}</code></td>
<td>{{ p.assignments|join(", ") }}</td></tr>{% endfor %}</table>
{% else %}<p>No student shows the same root cause in two assignments.</p>{% endif %}
<h2>Slowest submissions</h2>
{% if slowest %}<table class="slowest"><tr><th>assignment</th><th>student</th><th>grading seconds</th></tr>
{% for s in slowest %}<tr><td>{{ s.assignment }}</td><td>{{ s.student }}</td><td>{{ "%.1f"|format(s.seconds) }}</td></tr>
{% endfor %}</table>
{% else %}<p>No timings: the class run's log (autograde-logs/&lt;assignment&gt;.tsv) has none.</p>{% endif %}
<h2>Submissions that could not be graded</h2>
{% if failures %}<table class="failures"><tr><th>assignment</th><th>student</th><th>reason</th></tr>
{% for s in failures %}<tr><td>{{ s.assignment }}</td><td>{{ s.student }}</td><td>{{ s.reason }}</td></tr>{% endfor %}
</table>{% else %}<p>Every submission was graded.</p>{% endif %}
<h2>Similar submissions</h2>
<p>Pairs whose own answer code (the course's given code and solution left out) is alike: for a person to look at.
Matched runs are marked.</p>
{% for p in similar %}
<h3>{{ p.assignment }}: {{ p.students[0] }} and {{ p.students[1] }}
({{ "%.0f"|format(100 * p.similarity[0]) }}% / {{ "%.0f"|format(100 * p.similarity[1]) }}% shared)</h3>
<table class="pair"><tr><th>{{ p.students[0] }}</th><th>{{ p.students[1] }}</th></tr>
<tr><td><pre>{{ p.matched[0]|safe }}</pre></td><td><pre>{{ p.matched[1]|safe }}</pre></td></tr></table>
{% else %}<p>No pair flagged.</p>{% endfor %}
</body></html>
"""


def page(report: ClassReport, generated: str) -> str:
    """The whole page as HTML text (everything from submissions escaped; the matched code is escaped by
    copydetect before it is marked)."""
    from jinja2 import Environment  # the page's template engine

    assignments = []
    for name, ids in report.exercises.items():
        exercises = [{"id": e, "passed": report.pass_rate(name, e)[0], "total": report.pass_rate(name, e)[1],
                      "causes": report.causes(name, e)} for e in ids]
        assignments.append({"name": name, "chart": chart(report, name), "exercises": exercises,
                            "submissions": report.of(name)})
    template = Environment(autoescape=True).from_string(TEMPLATE)
    return template.render(course=report.course, submissions=report.submissions, assignments=assignments,
                           generated=generated, unknown=UNKNOWN, kind=cell_kind, persisting=report.persisting(),
                           slowest=report.slowest(), failures=report.failures(), similar=report.similar)
