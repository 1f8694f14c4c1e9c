"""Drawing a scalar computation graph, and stepping through its backward pass one node at a time.

Works on any micrograd-style node: ``.data``, ``.grad``, ``._prev`` (the inputs) and ``._op`` (the operation that
made it: '+', '*', '**k', 'exp', 'log', 'tanh', 'ReLU'). Rendering uses Graphviz's ``dot`` when the system has it,
else the ``graphviz-pure`` program that pip installs with this course, so graphs show on a machine without root.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import graphviz
import numpy as np

from labtools.widgets import unattended


def inputs_first(end, inputs_of) -> list:
    """Every node reachable from ``end`` through ``inputs_of(node)``, each once, inputs before the nodes computed from
    them, ``end`` last: a topological order. Iterative depth-first post-order, so graphs deeper than Python's
    recursion limit work; nodes are told apart by identity (``id``), whatever their ``__eq__``.

    The one walk of the course's code: graph drawing here, and the grader's reference orders and gradients.
    """
    order, seen, stack = [], set(), [(end, False)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
        elif id(node) not in seen:  # marked on expansion, so every input is appended before its consumer
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in inputs_of(node) if id(child) not in seen)
    return order


def nodes_and_edges(root):
    """Every node reachable from ``root`` (inputs first, root last) and the (input, output) edges, without recursion."""
    order = inputs_first(root, _inputs)
    edges = [(child, node) for node in order for child in _inputs(node)]
    return order, edges


def _inputs(node):
    """A node's inputs in a reproducible order: ``_prev`` is a set, whose order changes from run to run."""
    return sorted(node._prev, key=lambda child: (child._op, child.data))


def to_dot(root, grads: dict | None = None, highlight=None, names: dict | None = None) -> graphviz.Digraph:
    """The graph as a Graphviz diagram: one box per value (name, data, grad), one circle per operation.

    Args:
        grads: show these gradients (keyed by id(node)) instead of each node's ``.grad``.
        highlight: a node to fill in colour (the one the backward pass is at).
        names: display names keyed by id(node), e.g. {id(x): "x"}.
    """
    names = names or {}
    order, edges = nodes_and_edges(root)
    key = {id(node): f"n{i}" for i, node in enumerate(order)}  # stable ids: the same graph draws the same SVG
    dot = graphviz.Digraph(graph_attr={"rankdir": "LR"}, node_attr={"fontname": "Helvetica", "fontsize": "11"})
    for node in order:
        grad = grads.get(id(node), 0.0) if grads is not None else node.grad
        name = names.get(id(node), "")
        fill = {"style": "filled", "fillcolor": "#ffd966"} if node is highlight else {}
        dot.node(key[id(node)], f"{{ {name} | data {node.data:.4f} | grad {grad:.4f} }}".replace("{  |", "{"),
                 shape="record", **fill)
        if node._op:
            dot.node(key[id(node)] + "op", node._op, shape="circle")
            dot.edge(key[id(node)] + "op", key[id(node)])
    for child, node in edges:
        dot.edge(key[id(child)], key[id(node)] + "op")
    return dot


def render_svg(dot: graphviz.Digraph) -> str:
    """SVG text of a diagram, from the system's ``dot`` or else pip's ``graphviz-pure``.

    Raises:
        RuntimeError: neither program is installed (install the course requirements, or Debian's graphviz).
    """
    program = shutil.which("dot") or shutil.which("graphviz-pure") or _beside_python("graphviz-pure")
    if program is None:
        raise RuntimeError("no Graphviz renderer: run `make setup` (installs graphviz-pure) or `apt install graphviz`")
    done = subprocess.run([program, "-Tsvg"], input=dot.source, capture_output=True, text=True, check=True)
    return done.stdout


# About 850 px: JupyterLab's notebook column in a 1300 px window with the file browser open. Graphviz sizes in pt.
COLUMN_PT = 640


def render_for_column(dot: graphviz.Digraph) -> str:
    """SVG text of a diagram laid out for a notebook column: a left-to-right graph too wide for the column is laid
    out top to bottom instead (still readable; a 2,500 px wide graph scaled down is not), and the picture may
    shrink to its container's width (JupyterLab and HTML widgets otherwise draw it at Graphviz's own size, cut off
    or in a sideways scroll)."""
    svg = render_svg(dot)
    if _size_pt(svg)[0] > COLUMN_PT and dot.graph_attr.get("rankdir") == "LR":
        dot = dot.copy()
        dot.graph_attr["rankdir"] = "TB"
        svg = render_svg(dot)
    width, height = _size_pt(svg)
    if width > COLUMN_PT:  # still too wide: scale it (JupyterLab shows an SVG output as an <img> of its own size)
        svg = re.sub(r'(<svg[^>]*?)\bwidth="[\d.]+pt" height="[\d.]+pt"',
                     rf'\1width="{COLUMN_PT}pt" height="{height * COLUMN_PT / width:.0f}pt"', svg, count=1)
    return svg.replace("<svg ", '<svg style="max-width: 100%; height: auto" ', 1)


def _size_pt(svg: str) -> tuple[float, float]:
    """Width and height of Graphviz's SVG, in pt; (0, 0) when it does not say."""
    found = re.search(r'<svg[^>]*?\bwidth="([\d.]+)pt" height="([\d.]+)pt"', svg)
    return (float(found.group(1)), float(found.group(2))) if found else (0.0, 0.0)


def _beside_python(name: str) -> str | None:
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else None


def draw(root, names: dict | None = None):
    """Display-ready picture of the graph ending at ``root`` (data and grad on every node)."""
    from IPython.display import SVG
    return SVG(render_for_column(to_dot(root, names=names)))


# Local derivative of an operation's output with respect to one input: rule(out, this input, the other input).
LOCAL_RULES = {
    "+": ("1", lambda out, x, other: 1.0),
    "*": ("the other input", lambda out, x, other: other.data),
    "exp": ("e^x = out", lambda out, x, other: out.data),
    "log": ("1/x", lambda out, x, other: 1.0 / x.data),
    "tanh": ("1 - out²", lambda out, x, other: 1.0 - out.data ** 2),
    "ReLU": ("1 if out > 0 else 0", lambda out, x, other: float(out.data > 0)),
}


def _local(node, child, other):
    if node._op.startswith("**"):
        k = float(node._op[2:])
        return f"{k:g}·x^{k - 1:g}", k * child.data ** (k - 1)
    text, rule = LOCAL_RULES.get(node._op, LOCAL_RULES.get(node._op.lower(), ("?", None)))
    return text, None if rule is None else rule(node, child, other)


def edges_in(node):
    """A node's input edges with multiplicity: ``x * x`` stores one input in ``_prev`` but has two edges."""
    inputs = _inputs(node)
    binary = node._op in ("+", "*")
    if binary and len(inputs) == 1:
        return [(inputs[0], inputs[0]), (inputs[0], inputs[0])]
    if binary and len(inputs) == 2:
        return [(inputs[0], inputs[1]), (inputs[1], inputs[0])]
    return [(child, child) for child in inputs]


def backward_steps(root) -> list[dict]:
    """A reference backward pass, recorded edge by edge without touching any node's ``.grad``.

    Each step: the node being processed, one input edge, grad_out, the local derivative, the contribution and the
    input's running total, plus a snapshot of every gradient so far.
    """
    order, _ = nodes_and_edges(root)
    grads = {id(node): 0.0 for node in order}
    grads[id(root)] = 1.0
    steps = [{"node": root, "text": "seed: d(out)/d(out) = 1", "grads": dict(grads)}]
    for node in reversed(order):
        for child, other in edges_in(node):
            rule, local = _local(node, child, other)
            if local is None:
                continue
            contribution = grads[id(node)] * local
            grads[id(child)] += contribution
            steps.append({"node": node, "grads": dict(grads),
                          "text": f"through '{node._op}': grad_out {grads[id(node)]:.4f} × local ({rule}) {local:.4f} "
                                  f"= {contribution:.4f} → input total {grads[id(child)]:.4f}"})
    return steps


def backward_stepper(root, names: dict | None = None):
    """An ipywidgets player that walks the backward pass edge by edge on the drawn graph.

    The highlighted node is the one sending gradient to its inputs; the text shows grad_out × local = contribution
    and the running sum at the receiving input (shared nodes collect several contributions). None while nbgrader
    runs the notebook (labtools.widgets).
    """
    if unattended("The backward stepper"):
        return None
    import ipywidgets as widgets

    steps = backward_steps(root)
    # Steps count from 1 on the slider and in the text alike.
    slider = widgets.IntSlider(value=1, min=1, max=len(steps), description="step")
    play = widgets.Play(value=1, min=1, max=len(steps), interval=1500)
    widgets.jslink((play, "value"), (slider, "value"))
    text = widgets.HTML()
    picture = widgets.HTML()

    def show(change=None):
        step = steps[slider.value - 1]
        text.value = f"<b>{slider.value}/{len(steps)}</b> &nbsp; {step['text']}"
        picture.value = render_for_column(to_dot(root, grads=step["grads"], highlight=step["node"], names=names))

    slider.observe(show, names="value")
    show()
    return widgets.VBox([widgets.HBox([play, slider]), text, picture])


# ------------------------------------------------------------------------------------------------ tensor graphs

TENSOR_STYLES = {  # (is_leaf, requires_grad) -> how the node looks, and the legend text
    (True, True): ({"style": "filled", "fillcolor": "#c6efce"}, "leaf, requires_grad"),
    (True, False): ({"style": "dashed", "color": "#808080", "fontcolor": "#606060"}, "leaf, no grad (data)"),
    (False, True): ({"style": "filled,rounded", "fillcolor": "#dde8f8"}, "non-leaf (made by an op)"),
    (False, False): ({"style": "dashed,rounded", "color": "#808080"}, "non-leaf, no grad"),
}


def tensor_to_dot(end, names: dict | None = None) -> graphviz.Digraph:
    """A tensor graph as a Graphviz diagram: one box per tensor, one ellipse per recorded operation.

    Works on any tensor with ``.array``, ``.requires_grad``, ``.grad`` and ``.recipe`` (None, or ``.inputs`` and
    ``.backwards``). Boxes are styled by kind (see TENSOR_STYLES); plain-number inputs show as bare text.

    Args:
        names: display names keyed by id(tensor), e.g. {id(x): "x"}.
    """
    names = names or {}
    order = _tensor_order(end)
    key = {id(t): f"t{i}" for i, t in enumerate(order)}
    dot = graphviz.Digraph(graph_attr={"rankdir": "LR"}, node_attr={"fontname": "Helvetica", "fontsize": "11"})
    for t in order:
        style, kind = TENSOR_STYLES[(t.recipe is None, bool(t.requires_grad))]
        grad = "" if t.grad is None else f"\ngrad {_short(t.grad.array)}"
        label = f"{names.get(id(t), '')}  shape {tuple(t.array.shape)}\n{kind}\n{_short(t.array)}{grad}".strip()
        dot.node(key[id(t)], label, shape="box", **style)
        if t.recipe is None:
            continue
        dot.node(key[id(t)] + "op", _op_name(t.recipe), shape="ellipse")
        dot.edge(key[id(t)] + "op", key[id(t)])
        for n, x in enumerate(t.recipe.inputs):
            if hasattr(x, "array"):
                dot.edge(key[id(x)], key[id(t)] + "op")
            else:
                dot.node(f"{key[id(t)]}c{n}", repr(x), shape="plaintext")
                dot.edge(f"{key[id(t)]}c{n}", key[id(t)] + "op")
    return dot


def draw_tensors(end, names: dict | None = None):
    """Display-ready picture of the tensor graph ending at ``end``."""
    from IPython.display import SVG
    return SVG(render_for_column(tensor_to_dot(end, names=names)))


def _tensor_order(end):
    """Every tensor reachable through recorded inputs, data included, inputs first; iterative, so deep graphs draw."""
    return inputs_first(end, lambda t: [] if t.recipe is None else
                        [x for x in reversed(t.recipe.inputs) if hasattr(x, "array")])


def _op_name(recipe) -> str:
    """'multiply' from multiply_back0: the backward functions are named after the forward operation."""
    name = getattr(recipe.backwards[0], "__name__", "op") if recipe.backwards else "op"
    return name.split("_back")[0] if "_back" in name else name


def _short(array) -> str:
    return np.array2string(np.asarray(array), precision=3, suppress_small=True, threshold=6, edgeitems=2)
