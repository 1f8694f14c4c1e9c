"""Two pieces of code next to each other (notebook 2: your Value and micrograd's), and imports that may be missing."""
from __future__ import annotations

import html
import importlib
import inspect
import linecache
import re

# Two columns and the gap between them fit JupyterLab's notebook column (about 970 px in a 1300 px window with the
# file browser closed); a longer line scrolls inside its own column instead of widening the page.
COLUMN_PX = 970
FONT_PX = 11


def optional_import(name: str):
    """The module ``name``, or None after printing a note when it cannot be imported.

    For libraries a section only compares with (micrograd in notebook 2): a learner who installed without them, and
    grading, which hides every autodiff library, see a note instead of an error.
    """
    try:
        return importlib.import_module(name)
    except ImportError as error:
        advice = ""
        if isinstance(error, ModuleNotFoundError):
            advice = f" `pip install -r requirements.txt` installs {name.split('.')[0]} in the version the course pins."
        print(f"({name} cannot be imported here, so this part has nothing to show: {error}.{advice})")
        return None


def source_of(obj) -> str:
    """The source code of a function or class, as ``inspect.getsource`` gives it, with two additions for classes.

    A class defined in a notebook cell has no file, so its source is found in the cell's text through one of its
    methods. Functions attached to a class after its definition (``Value.backward = backward``) are listed after it,
    as the class really has them.

    Raises:
        OSError, TypeError: no source can be found (a built-in, or code typed at a plain Python prompt).
    """
    if not inspect.isclass(obj):
        return inspect.getsource(obj)
    try:
        text = inspect.getsource(obj)
    except (OSError, TypeError):
        text = _class_source_from_cell(obj)
    attached = [f for f in vars(obj).values()
                if inspect.isfunction(f) and not f.__qualname__.startswith(obj.__qualname__ + ".")]
    if attached:
        text += f"\n\n# defined outside the class body and attached to {obj.__name__} afterwards:\n"
        text += "\n".join(inspect.getsource(f) for f in attached)
    return text


def _class_source_from_cell(cls) -> str:
    methods = [f for f in vars(cls).values()
               if inspect.isfunction(f) and f.__qualname__.startswith(cls.__qualname__ + ".")]
    for method in methods:
        lines = linecache.getlines(method.__code__.co_filename)
        heads = [i for i, line in enumerate(lines[:method.__code__.co_firstlineno])
                 if re.match(rf"\s*class\s+{cls.__name__}\b", line)]
        if heads:
            return "".join(inspect.getblock(lines[heads[-1]:]))
    raise OSError(f"could not find the source of class {cls.__name__}")


def side_by_side(left, right, titles=("left", "right")):
    """Show the source of two objects in two columns (monospace, highlighted), to read one against the other.

    Args:
        left, right: functions or classes, or an importable dotted name ("micrograd.engine.Value") that is imported
            here, so that a missing library gives a note instead of an error.
        titles: a caption for each column.

    Returns:
        An IPython HTML object (displayed when it is a cell's last value), or None after printing a note when a
        named object cannot be imported.

    Raises:
        OSError, TypeError: an object has no source to show (see ``source_of``).
    """
    from IPython.display import HTML
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    objects = []
    for obj in (left, right):
        if isinstance(obj, str):
            module_name, _, attribute = obj.rpartition(".")
            module = optional_import(module_name)
            if module is None:
                return None
            obj = getattr(module, attribute)
        objects.append(obj)
    formatter = HtmlFormatter(noclasses=True, nowrap=True, style="default")
    columns = []
    for obj, title in zip(objects, titles):
        code = highlight(source_of(obj), PythonLexer(), formatter)
        columns.append(
            f'<div style="flex:1 1 0;min-width:0">'
            f'<div style="font-weight:bold;margin:0 0 4px 0">{html.escape(title)}</div>'
            f'<pre style="font-family:var(--jp-code-font-family,monospace);font-size:{FONT_PX}px;'
            'line-height:1.35;margin:0;padding:6px;background:#f7f7f7;'
            f'border:1px solid #ddd;overflow:auto;max-height:55em">{code}</pre></div>')
    return HTML(f'<div style="display:flex;gap:10px;max-width:{COLUMN_PX}px">{"".join(columns)}</div>')
