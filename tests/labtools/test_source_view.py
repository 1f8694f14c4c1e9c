"""labtools.side_by_side and optional_import (notebook 2's "Your Value next to micrograd's"), without a kernel (fast)."""
import html
import re
import sys

import pytest

from labtools import optional_import, side_by_side
from labtools.source_view import COLUMN_PX, source_of

CELL = '''
class Value:
    """A cell's class: no file to read it from."""

    def __init__(self, data):
        self.data = data

    def __repr__(self):
        return f"Value({self.data})"


def backward(self):
    return "attached"


Value.backward = backward
'''


def notebook_class():
    """A class defined as a notebook cell defines it: its code lives only in linecache, under the cell's name."""
    import linecache

    name = "<ipython-input-1-side-by-side>"
    linecache.cache[name] = (len(CELL), None, CELL.splitlines(keepends=True), name)
    namespace = {"__name__": "__main__"}
    exec(compile(CELL, name, "exec"), namespace)
    return namespace["Value"]


def text_of(rendered):
    return html.unescape(re.sub(r"<[^>]+>", "", rendered.data))


def test_both_sources_are_shown_in_two_columns_that_fit_the_notebook():
    pytest.importorskip("micrograd")
    from micrograd.engine import Value as Micrograd

    Value = notebook_class()
    rendered = side_by_side(Value, "micrograd.engine.Value", titles=("your Value", "micrograd 0.1.0"))
    text = text_of(rendered)
    assert "your Value" in text and "micrograd 0.1.0" in text
    assert '"""A cell\'s class: no file to read it from."""' in text  # found in the cell, not in a file
    assert "def backward(self):" in text and "attached to Value afterwards" in text
    assert "build_topo" in text and "stores a single scalar value and its gradient" in text  # micrograd's own code
    assert text.count("class Value") == 2
    assert rendered.data.count("<pre") == 2 and f"max-width:{COLUMN_PX}px" in rendered.data
    assert rendered.data.count("monospace") == 2
    assert source_of(Micrograd).startswith("class Value:")


def test_objects_can_be_passed_directly():
    Value = notebook_class()
    rendered = side_by_side(Value.__repr__, source_of, titles=("a", "b"))
    text = text_of(rendered)
    assert 'return f"Value({self.data})"' in text and "def source_of(obj)" in text


def test_without_micrograd_a_note_is_printed_instead_of_an_error(monkeypatch, capsys):
    for name in ("micrograd", "micrograd.engine", "micrograd.nn"):
        monkeypatch.setitem(sys.modules, name, None)  # as if micrograd were not installed (or hidden by grading)
    assert side_by_side(notebook_class(), "micrograd.engine.Value", titles=("yours", "micrograd")) is None
    note = capsys.readouterr().out
    assert "micrograd.engine cannot be imported here" in note and "pip install -r requirements.txt" in note
    assert optional_import("micrograd.nn") is None
    assert "micrograd.nn cannot be imported here" in capsys.readouterr().out
    assert optional_import("math").sqrt(4) == 2


def test_a_library_hidden_by_grading_gets_its_reason_and_no_install_advice(monkeypatch, capsys, tmp_path):
    hidden = tmp_path / "micrograd"
    hidden.mkdir()
    # what the check worker's import blocker says (autograder/trust/worker.py)
    (hidden / "__init__.py").write_text('raise ImportError("micrograd cannot be imported while your code is graded")')
    for name in ("micrograd", "micrograd.engine", "micrograd.nn"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert side_by_side(source_of, "micrograd.engine.Value") is None
    note = capsys.readouterr().out
    assert "cannot be imported while your code is graded" in note and "pip install" not in note
