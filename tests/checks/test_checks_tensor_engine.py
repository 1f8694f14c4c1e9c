"""Notebook 4 checks: each probe rejects a realistic wrong implementation with its own message, and correct
alternatives pass (a class-based no_grad, Kahn's algorithm, a backprop keyed by tensor, a Jacobian that recomputes f).

Wrong implementations are small text edits of the solution notebook's own code, the way a learner's slip looks.
"""
import contextlib
import re

import nbformat
import pytest
import torch

from autograder import CheckFailure, check
from autograder.checks.harness.diagnostics import case_seed
from autograder.contract import assignments
from autograder.tools.solutions import solution_namespace
from conftest import learner, rejects

NB = "04_tensor_engine"


def engine(edits=None, extra=""):
    return solution_namespace(NB, edits, extra)


@pytest.mark.parametrize("exercise", ["apply_op", "operators", "topological_sort", "backprop", "jacobian"])
def test_solution_passes(exercise):
    check(exercise, engine())


# ------------------------------------------------------------------------------------------------ apply_op

NO_GRAD_AS_CLASS = '''
class no_grad:
    def __enter__(self):
        self.previous, GradMode.enabled = GradMode.enabled, False
    def __exit__(self, *exc_info):
        GradMode.enabled = self.previous
'''


PRIVATE_SWITCH = '''
_recording = [True]

class no_grad:
    def __enter__(self):
        self.previous, _recording[0] = _recording[0], False
    def __exit__(self, *exc_info):
        _recording[0] = self.previous
'''


def test_apply_op_and_no_grad_must_share_gradmode_as_the_switch():
    """A pair that agrees on a flag of its own passes every with-block probe; the notebook asks for GradMode.enabled,
    which other code (notebook 5's checkpointing) also sets."""
    ns = engine({"apply_op": [("    if GradMode.enabled and", "    if _recording[0] and")]}, extra=PRIVATE_SWITCH)
    rejects("apply_op", ns, ("GradMode.enabled should be False inside", "cause: apply_op/grad-mode-not-read"))


def test_apply_op_accepts_a_class_based_no_grad():
    check("apply_op", engine(extra=NO_GRAD_AS_CLASS))


@pytest.mark.parametrize("right, wrong, phrase", [
    ("arrays = [x.array if isinstance(x, Tensor) else x for x in inputs]", "arrays = list(inputs)",
     ("forward received a Tensor", "cause: apply_op/forward-given-tensors")),
    ("if GradMode.enabled and any(isinstance(x, Tensor) and x.requires_grad for x in inputs):", "if GradMode.enabled:",
     ("no input requires grad", "cause: apply_op/records-data")),
    ("if GradMode.enabled and any(", "if any(", ("inside `with no_grad():`", "cause: no_grad/records-inside")),
    ("Recipe(inputs=inputs,", "Recipe(inputs=tuple(arrays),",
     ("the inputs themselves", "cause: apply_op/inputs-not-kept")),
    # Recipe declares tuples, and the visible test compares with tuples (an audit found lists graded as right)
    ("Recipe(inputs=inputs, backwards=tuple(backwards)", "Recipe(inputs=list(inputs), backwards=list(backwards)",
     ("should be tuples", "cause: apply_op/recipe-fields")),
    ("out = Tensor(forward(*arrays, **kwargs))", "out = Tensor(forward(*arrays))",
     ("did not receive the keyword arguments", "cause: apply_op/kwargs-not-passed")),
    ("        GradMode.enabled = previous\n", "        GradMode.enabled = True\n",
     ("restore the mode that was on before", "cause: no_grad/mode-not-restored")),
    ("    try:\n        yield\n    finally:\n        GradMode.enabled = previous",
     "    yield\n    GradMode.enabled = previous",
     ("an exception inside `with no_grad():`", "cause: no_grad/mode-not-restored")),
])
def test_apply_op_rejects(right, wrong, phrase):
    rejects("apply_op", engine({"apply_op": [(right, wrong)]}), phrase)


def test_apply_op_stub_is_not_implemented():
    ns = engine({"apply_op": [("    arrays = [x.array", "    raise NotImplementedError()\n    arrays = [x.array")]})
    rejects("apply_op", ns, "`apply_op` is not written yet")


# ------------------------------------------------------------------------------------------------ operators

def test_operators_accept_other_spellings():
    extra = '''
def relu(x):
    return apply_op(lambda a: np.where(a > 0, a, 0.0), (relu_back,), x)

def getitem_back(grad_out, out, x, index):
    grad = np.zeros(np.shape(x))
    np.add.at(grad, index, grad_out)
    return grad

Tensor.relu = relu
Tensor.__rsub__ = lambda self, other: negative(self) + other
'''
    check("operators", engine(extra=extra))


@pytest.mark.parametrize("right, wrong, phrase", [
    ("Tensor.__rsub__ = lambda self, other: subtract(other, self)", "Tensor.__rsub__ = lambda self, other: subtract(self, other)",
     "not x - 2"),
    ("Tensor.__rtruediv__ = lambda self, other: divide(other, self)", "Tensor.__rtruediv__ = divide", "not b / 1"),
    ("    np.add.at(grad, index, grad_out)", "    grad[index] += grad_out", "np.add.at"),
    ("np.sum(a, axis=dim, keepdims=keepdim)", "np.sum(a, axis=dim)", "keeps axis 0 as size 1"),
    ("(subtract_back0, subtract_back1)", "(subtract_back1, subtract_back0)",
     ("recorded backward functions give", "cause: operators/backwards-out-of-order")),
    ("(mean_back,)", "(sum_back,)", "recorded backward functions give"),
    ("return apply_op(np.exp, (exp_back,), x)", "return Tensor(np.exp(x.array), requires_grad=x.requires_grad)",
     ("was not recorded", "cause: operators/not-recorded")),
])
def test_operators_reject(right, wrong, phrase):
    rejects("operators", engine({"operators": [(right, wrong)]}), phrase)


# ------------------------------------------------------------------------------------------------ topological_sort

KAHN = '''
from collections import deque

def topological_sort(end_node):
    consumers, seen, todo = {id(end_node): 0}, {id(end_node): end_node}, [end_node]
    while todo:
        for parent in todo.pop().parents:
            consumers[id(parent)] = consumers.get(id(parent), 0) + 1
            if id(parent) not in seen:
                seen[id(parent)] = parent
                todo.append(parent)
    ready, emitted = deque([end_node]), []
    while ready:
        node = ready.popleft()
        emitted.append(node)
        for parent in node.parents:
            consumers[id(parent)] -= 1
            if consumers[id(parent)] == 0:
                ready.append(parent)
    if len(emitted) != len(seen):
        raise ValueError("cycle")
    return emitted[::-1]
'''

RECURSIVE = '''
def topological_sort(end_node):
    order, visited = [], set()
    def visit(node):
        if id(node) not in visited:
            visited.add(id(node))
            for parent in node.parents:
                visit(parent)
            order.append(node)
    visit(end_node)
    return order
'''

MARK_ON_PUSH = '''
def topological_sort(end_node):
    order, visited, stack = [], {id(end_node)}, [(end_node, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        stack.append((node, True))
        for parent in node.parents:
            if id(parent) not in visited:
                visited.add(id(parent))
                stack.append((parent, False))
    return order
'''

NO_CYCLE_CHECK = '''
def topological_sort(end_node):
    order, visited, stack = [], set(), [(end_node, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
        elif id(node) not in visited:
            visited.add(id(node))
            stack.append((node, True))
            stack.extend((parent, False) for parent in node.parents)
    return order
'''


VISITED_MEANS_CYCLE = NO_CYCLE_CHECK.replace(
    "        elif id(node) not in visited:",
    "        elif id(node) in visited:\n            raise ValueError('the graph has a cycle')\n        else:")


def test_topological_sort_accepts_kahns_algorithm():
    check("topological_sort", engine(extra=KAHN))


def test_topological_sort_may_return_a_tuple_which_backprop_walks_as_a_list():
    as_tuple = engine({"topological_sort": [("    return order\n", "    return tuple(order)\n")]})
    check("topological_sort", as_tuple)
    check("backprop", as_tuple)


def test_topological_sort_must_return_a_sequence_not_an_iterator():
    rejects("topological_sort", engine({"topological_sort": [("    return order\n", "    return iter(order)\n")]}),
            "return a list of tensors, got list_iterator")


@pytest.mark.parametrize("code, phrase", [
    (RECURSIVE, "RecursionError"),
    (MARK_ON_PUSH, "before one of its parents"),
    (NO_CYCLE_CHECK, "a graph with a cycle"),
    (NO_CYCLE_CHECK.replace("return order", "return order[::-1]"), "end node comes first"),
    (NO_CYCLE_CHECK.replace("elif id(node) not in visited:", "else:"), ("more than once", "cause: walk/node-twice")),
    (VISITED_MEANS_CYCLE, ("That graph has no cycle: a node used by several others is reached once along each path",
                           "cause: topological_sort/shared-node-as-cycle")),
    (KAHN.replace('raise ValueError("cycle")', 'raise RuntimeError("cycle")'),
     ("Raise a ValueError", "cause: topological_sort/cycle-not-detected")),
])
def test_topological_sort_rejects(code, phrase):
    rejects("topological_sort", engine(extra=code), phrase)


# ------------------------------------------------------------------------------------------------ backprop

KEYED_BY_TENSOR = '''
def backprop(end_node, end_grad=None):
    if not end_node.requires_grad:
        raise RuntimeError("nothing to differentiate")
    if end_grad is None:
        if end_node.array.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        end_grad = Tensor(np.ones(end_node.shape))
    if end_grad.shape != end_node.shape:
        raise RuntimeError("end_grad must have the shape of end_node")
    pending = {end_node: end_grad.array}          # Tensor has no __eq__, so it hashes by identity
    for node in reversed(topological_sort(end_node)):
        grad = pending.pop(node, None)
        if grad is None:
            continue
        if node.requires_grad and (node.is_leaf or node.retains_grad):
            node.grad = Tensor(grad) if node.grad is None else Tensor(node.grad.array + grad)
        for i, parent in enumerate(node.recipe.inputs if node.recipe else ()):
            if isinstance(parent, Tensor) and parent.requires_grad:
                arrays = [t.array if isinstance(t, Tensor) else t for t in node.recipe.inputs]
                part = node.recipe.backwards[i](grad, node.array, *arrays, **node.recipe.kwargs)
                pending[parent] = pending[parent] + part if parent in pending else part
'''

BREADTH_FIRST = '''
from collections import deque

def topological_sort(end_node):
    order, seen, queue = [], {id(end_node)}, deque([end_node])
    while queue:
        node = queue.popleft()
        order.append(node)
        for parent in node.parents:
            if id(parent) not in seen:
                seen.add(id(parent))
                queue.append(parent)
    return order[::-1]
'''

FOLLOW_PATHS = '''
def backprop(end_node, end_grad=None):
    if end_grad is None:
        if end_node.array.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        end_grad = Tensor(np.ones(end_node.shape))
    if end_grad.shape != end_node.shape:
        raise RuntimeError("Mismatch in shape")
    stack = [(end_node, np.array(end_grad.array, dtype=float))]
    while stack:
        node, grad = stack.pop()
        if (node.is_leaf and node.requires_grad) or node.retains_grad:
            node.grad = Tensor(grad if node.grad is None else node.grad.array + grad)
        if node.is_leaf:
            continue
        arrays = [x.array if isinstance(x, Tensor) else x for x in node.recipe.inputs]
        for x, back in zip(node.recipe.inputs, node.recipe.backwards):
            if isinstance(x, Tensor) and x.requires_grad:
                stack.append((x, back(grad, node.array, *arrays, **node.recipe.kwargs)))
'''


@pytest.mark.parametrize("extra", [KEYED_BY_TENSOR, KAHN], ids=["keyed-by-tensor", "with-kahn-sort"])
def test_backprop_accepts_alternatives(extra):
    check("backprop", engine(extra=extra))


@pytest.mark.parametrize("right, wrong, phrase", [
    ("grads[id(x)] = grads[id(x)] + contribution if id(x) in grads else contribution",
     "grads[id(x)] = contribution", ("do not let the second overwrite the first",
          "cause: backprop/overwrites-instead-of-accumulating")),
    ("for node in reversed(topological_sort(end_node)):", "for node in topological_sort(end_node):",
     ("no gradient reached the leaves", "cause: backprop/no-seed")),
    ("        if end_node.array.size != 1:", "        if False:",
     ("should raise RuntimeError", "cause: backprop/seeds-non-scalar-with-ones")),
    ("        seed = np.array(end_grad.array, dtype=np.float64)\n", "        seed = np.ones(end_node.shape)\n",
     ("end_grad was ignored", "cause: backprop/ignores-end-grad")),
    ("    grads = {id(end_node): seed}", "    grads = {id(end_node): seed * seed}", ("applied twice",
         "cause: backprop/end-grad-twice")),
    ("if (node.is_leaf and node.requires_grad) or node.retains_grad:", "if True:",
     ("not a leaf", "cause: backprop/grad-on-non-leaf")),
    ("if (node.is_leaf and node.requires_grad) or node.retains_grad:", "if node.is_leaf and node.requires_grad:",
     "h.retain_grad() was called"),
    ("node.grad = Tensor(grad if node.grad is None else node.grad.array + grad)", "node.grad = Tensor(grad)",
     ("overwrote it with 3", "cause: backprop/resets-leaf-grad")),
    ("node.grad = Tensor(grad if node.grad is None else node.grad.array + grad)",
     "if node.grad is None:\n                node.grad = Tensor(grad)\n"
     "            else:\n                node.grad.array += grad",
     ("never in place", "cause: backprop/accumulates-in-place")),
    ("        if seed.shape != end_node.shape:\n", "        if False:\n",
     ("Mismatch in shape", "cause: backprop/end-grad-shape-unchecked")),
    ("            raise RuntimeError(f\"Mismatch in shape", "            raise ValueError(f\"Mismatch in shape",
     ("raise RuntimeError, as the exercise asks", "cause: backprop/end-grad-shape-unchecked")),
    ("    if not end_node.requires_grad:\n", "    if False:\n",
     ("nothing in that graph requires grad", "cause: backprop/differentiates-without-grad")),
])
def test_backprop_rejects(right, wrong, phrase):
    rejects("backprop", engine({"backprop": [(right, wrong)]}), phrase)


def test_a_walk_over_data_tensors_is_named_at_topological_sort():
    """A walk over every input tensor, data included, that stores a gradient on every leaf it reaches: the order
    already holds tensors .parents leaves out, so topological_sort is named as the cause."""
    ns = engine({"topological_sort": [("for parent in node.parents)",
                                       "for parent in (node.recipe.inputs if node.recipe else ()) "
                                       "if isinstance(parent, Tensor))")],
                 "backprop": [("if isinstance(x, Tensor) and x.requires_grad:", "if isinstance(x, Tensor):"),
                              ("if (node.is_leaf and node.requires_grad) or", "if node.is_leaf or")]})
    rejects("topological_sort", ns, "not reachable through .parents")
    rejects("backprop", ns, "Fix topological_sort first", "not reachable through .parents")


FIRST_REACHED = FOLLOW_PATHS.replace(  # a visited set: each node's rule runs when the walk first reaches it
    "    stack = [", "    done = set()\n    stack = [").replace(
    "        if node.is_leaf:\n            continue\n",
    "        if node.is_leaf or id(node) in done:\n            continue\n        done.add(id(node))\n")


@pytest.mark.parametrize("code, phrase", [
    (FIRST_REACHED, ("processed before all of its consumers", "cause: backprop/node-before-its-consumers")),
    (BREADTH_FIRST, "Fix topological_sort first: a tensor comes before one of its parents"),
    (RECURSIVE, "Fix topological_sort first"),
    (FOLLOW_PATHS, "once per path"),
])
def test_backprop_rejects_broken_walks(code, phrase):
    rejects("backprop", engine(extra=code), phrase)


# ------------------------------------------------------------------------------------------------ jacobian

RECOMPUTING = '''
def jacobian(f, x):
    x = np.asarray(x, dtype=float)
    rows = []
    for i in range(f(Tensor(x)).array.size):
        leaf = Tensor(x.copy(), requires_grad=True)
        out = f(leaf)
        (out * Tensor(np.eye(out.array.size)[i])).sum().backward()
        rows.append(leaf.grad.array)
    return np.stack(rows)
'''


@pytest.mark.parametrize("seed", [None, 1, 2], ids=["kernel", "seed 1", "seed 2"])
def test_jacobian_accepts_recomputing_f_per_row(seed):
    """Under the kernel's derandomized cases and under trusted grades' case seeds (its random points)."""
    with contextlib.nullcontext() if seed is None else case_seed(seed):
        check("jacobian", engine(extra=RECOMPUTING))


@pytest.mark.parametrize("right, wrong, phrase", [
    ("        x.grad = None\n", "", ("clear it", "cause: jacobian/grad-not-cleared")),
    ("return np.array(rows).reshape(y.array.size, x.array.size)",
     "return np.array(rows).reshape(y.array.size, x.array.size).T",
     ("rows and columns are swapped", "cause: jacobian/transposed")),
])
def test_jacobian_rejects(right, wrong, phrase):
    rejects("jacobian", engine({"jacobian": [(right, wrong)]}), phrase)


def test_jacobian_names_an_earlier_exercise_that_fails_first():
    ns = engine({"operators": [("Tensor.__rtruediv__ = lambda self, other: divide(other, self)",
                                "Tensor.__rtruediv__ = lambda self, other: divide(self, other)")]})
    rejects("jacobian", ns, "from operators, which fails its own check", "inputs swapped")


def test_whole_engine_programs_catch_what_they_run():
    """The random-program phase on its own: an engine whose backward halves every seed fails it."""
    from autograder.checks.tensor_engine.backprop import _check_whole_engine
    ns = engine(extra="Tensor.backward = lambda self, end_grad=None: backprop(self, None if end_grad is None else "
                      "Tensor(end_grad.array * 0.5))")
    with pytest.raises(CheckFailure, match="your engine as a whole"):
        _check_whole_engine("jacobian", ns["Tensor"])


# ------------------------------------------------------------------------------------------------ predictions

DETACH_CLONE = {"original": 5, "snapshot": 2, "original_grad": 3, "isolated_grad": 10}


@pytest.mark.parametrize("exercise, right, wrong, phrase", [
    ("predict_leaf_grads", {"x": 18, "h": 6, "zero": 0, "unused": None},
     {"x": 18, "h": None, "zero": 0, "unused": None}, ("retain_grad", "cause: predict_leaf_grads/retain-grad")),
    ("predict_leaf_grads", {"x": 18.0, "h": 6.0, "zero": 0.0, "unused": None},
     {"x": 18, "h": 6, "zero": None, "unused": None},
     ("None means no gradient arrived", "cause: predict_leaf_grads/zero-is-not-none")),
    ("predict_leaf_grads", {"x": 18, "h": 6, "zero": 0, "unused": None},
     {"x": 6, "h": 6, "zero": 0, "unused": 0}, ("6 · 3", "cause: predict_leaf_grads/leaf-gradient")),
    ("predict_leaf_grads", {"x": 18, "h": 6, "zero": 0, "unused": None},
     {"x": 18, "h": 6, "zero": 0, "unused": 0},
     ("unused never took part", "cause: predict_leaf_grads/unused-leaf-gets-none")),
    ("predict_detach_clone", DETACH_CLONE, {**DETACH_CLONE, "original": 2},
     ("shares the same storage", "cause: predict_detach_clone/detach-shares-storage")),
    ("predict_detach_clone", {k: float(v) for k, v in DETACH_CLONE.items()}, {**DETACH_CLONE, "snapshot": 5},
     ("copies the storage", "cause: predict_detach_clone/clone-copies")),
    # the old given Tensor's clone(), a new leaf cut off from the graph, taught exactly this wrong answer
    ("predict_detach_clone", DETACH_CLONE, {**DETACH_CLONE, "original_grad": None},
     ("CloneBackward0", "cause: predict_detach_clone/clone-stays-in-graph")),
    ("predict_detach_clone", DETACH_CLONE, {**DETACH_CLONE, "original_grad": 13}, "none of it reaches original"),
    ("predict_detach_clone", DETACH_CLONE, {**DETACH_CLONE, "isolated_grad": 4},
     ("copied after the in-place add", "cause: predict_detach_clone/detached-leaf")),
    ("predict_accumulation", [4, 7, 3], [4, 3, 3], ("adds to .grad", "cause: predict_accumulation/grad-accumulates")),
    ("predict_accumulation", (4.0, 7.0, 3.0), [4, 7, 7], ("starts again", "cause: predict_accumulation/none-restarts")),
])
def test_predictions(exercise, right, wrong, phrase):
    check(exercise, learner(exercise, right))
    rejects(exercise, learner(exercise, wrong), phrase)


@pytest.mark.parametrize("exercise, untouched", [
    ("predict_leaf_grads", {"x": ..., "h": ..., "zero": ..., "unused": ...}),
    ("predict_detach_clone", {**DETACH_CLONE, "snapshot": ...}),
    ("predict_accumulation", [..., ..., ...]),
])
def test_unanswered_predictions_say_so(exercise, untouched):
    rejects(exercise, learner(exercise, untouched), "not answered yet", "cause: stub")


def test_predictions_refuse_text_and_booleans():
    rejects("predict_accumulation", learner("predict_accumulation", ["4", "7", "3"]), "print 1")
    rejects("predict_leaf_grads", learner("predict_leaf_grads", {"x": True, "h": 6, "zero": 0, "unused": None}), "x:")


# ------------------------------------------------------------------------------------------------ red-team regressions

RECURSIVE_RESTORING_LIMIT = RECURSIVE.replace(
    "    visit(end_node)\n",
    "    import sys\n    old = sys.getrecursionlimit()\n    sys.setrecursionlimit(100_000)\n    try:\n"
    "        visit(end_node)\n    finally:\n        sys.setrecursionlimit(old)\n")

CYCLE_ONLY_AT_END = NO_CYCLE_CHECK.replace(
    "            stack.extend((parent, False) for parent in node.parents)",
    "            if any(parent is end_node for parent in node.parents):\n"
    "                raise ValueError('cycle')\n"
    "            stack.extend((parent, False) for parent in node.parents)")

NO_GRAD_SWALLOWING = NO_GRAD_AS_CLASS.replace("GradMode.enabled = self.previous",
                                              "GradMode.enabled = self.previous\n        return True")

FINITE_DIFFERENCES = '''
def jacobian(f, x):
    x = np.asarray(x, dtype=float)
    columns = []
    for j in range(x.size):
        h = np.zeros_like(x)
        h[j] = 1e-5
        columns.append((f(Tensor(x + h)).array - f(Tensor(x - h)).array) / 2e-5)
    return np.stack(columns, axis=1)
'''


@pytest.mark.parametrize("exercise, edits, extra, phrase", [
    ("backprop", {"backprop": [("grads[id(x)] = grads[id(x)] + contribution if id(x) in grads else contribution",
                                "if id(x) in grads:\n                    grads[id(x)] += contribution\n"
                                "                else:\n                    grads[id(x)] = contribution")]}, "",
     ("never with += in place", "cause: backprop/accumulates-in-place")),
    ("backprop", {"backprop": [("if (node.is_leaf and node.requires_grad) or node.retains_grad:",
                                "if node is not end_node and ((node.is_leaf and node.requires_grad) or "
                                "node.retains_grad):")]}, "",
                                ("store end_grad in its .grad", "cause: backprop/end-leaf-not-seeded")),
    ("backprop", {"backprop": [("node.grad = Tensor(grad if node.grad is None else node.grad.array + grad)",
                                "node.grad = Tensor((grad if node.grad is None else node.grad.array + grad)"
                                ".astype(np.float32))")]}, "", "float32"),
    ("backprop", {"backprop": [("node.grad = Tensor(grad if node.grad is None else node.grad.array + grad)",
                                "node.grad = Tensor(grad if node.grad is None else node.grad.array + grad, "
                                "requires_grad=True)")]}, "",
                                ("a gradient is data", "cause: backprop/grad-requires-grad")),
    ("backprop", None, RECURSIVE_RESTORING_LIMIT, "raised Python's recursion limit"),
    ("topological_sort", None, RECURSIVE_RESTORING_LIMIT, ("raised Python's recursion limit", "cause: recursion")),
    ("topological_sort", None, CYCLE_ONLY_AT_END, "does not pass through the end node"),
    ("apply_op", None, NO_GRAD_SWALLOWING, ("was swallowed", "cause: no_grad/swallows-exceptions")),
    ("operators", {"operators": [("np.mean(a, axis=dim, keepdims=keepdim)", "np.mean(a, axis=dim)")]}, "",
     "keeps axis 1 as size 1"),
    ("jacobian", None, FINITE_DIFFERENCES, ("one pass per output", "cause: jacobian/one-pass-per-input")),
])
def test_red_team_findings_are_rejected(exercise, edits, extra, phrase):
    rejects(exercise, engine(edits, extra), phrase)


# ------------------------------------------------------------------------------------------------ the drawn example

NUMBER = r"(-?\d+(?:\.\d+)?)"
STATED_GRADIENTS = re.compile(rf"`x\.grad` = {NUMBER}, `y\.grad` = {NUMBER} and `z\.grad` = {NUMBER}")


def test_the_drawn_graphs_prose_states_the_gradients_torch_computes():
    """Section 4.2 draws f = log(x) + exp(y)·z·d and its prose states the gradients. The stated numbers, torch's
    float64 gradients of the drawn f, our engine's run of every cell that draws f, and the torch values that cell
    prints must all agree, so that prose, picture and numbers cannot drift apart again."""
    nb = nbformat.read(assignments()[NB], as_version=4)
    stated = [[float(g) for g in found] for cell in nb.cells if cell.cell_type == "markdown"
              for found in STATED_GRADIENTS.findall(cell.source)]
    assert len(stated) == 1, f"the prose should state the drawn graph's gradients once, found {stated}"
    drawn = [cell.source for cell in nb.cells if cell.cell_type == "code" and "draw_tensors(f" in cell.source]
    assert len(drawn) >= 2, "the graph of f is drawn before and after backward"
    for source in drawn:
        ns = engine()
        ns["draw_tensors"] = ns["display"] = lambda *args, **kwargs: None
        exec(compile(source, "<drawn graph>", "exec"), ns)
        x, y, z, f = ns["x"], ns["y"], ns["z"], ns["f"]
        if x.grad is None:
            f.backward()
        factor = torch.tensor(ns["d"].array if "d" in ns else 1.0, dtype=torch.float64)
        tx, ty, tz = (torch.tensor(t.array, dtype=torch.float64, requires_grad=True) for t in (x, y, z))
        (torch.log(tx) + torch.exp(ty) * tz * factor).sum().backward()
        by_torch = [t.grad.item() for t in (tx, ty, tz)]
        assert stated[0] == pytest.approx(by_torch, abs=5e-5), f"the prose states {stated[0]}, torch gives {by_torch}"
        assert [t.grad.item() for t in (x, y, z)] == pytest.approx(by_torch, rel=1e-12)
        if "tx" in ns:  # the cell's own torch comparison computes the same f
            assert [ns[name].grad.item() for name in ("tx", "ty", "tz")] == pytest.approx(by_torch, rel=1e-12)


# ------------------------------------------------------------------------------------------------ answers that know the probes

@pytest.mark.parametrize("seed", [None, 1, 2], ids=["kernel", "seed 1", "seed 2"])
def test_apply_op_rejects_recording_by_the_first_tensor_alone(seed):
    """Deciding by the first Tensor input's requires_grad passes every fixed probe (x first, or y with a number);
    a drawn call where a later Tensor requires grad and the first does not shows it."""
    ns = engine({"apply_op": [("any(isinstance(x, Tensor) and x.requires_grad for x in inputs)",
                               "next(x for x in inputs if isinstance(x, Tensor)).requires_grad")]})
    with contextlib.nullcontext() if seed is None else case_seed(seed):
        rejects("apply_op", ns, ("wherever it stands", "cause: apply_op/not-recorded"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_apply_op_accepts_a_class_based_no_grad_under_trusted_grades_seeds(seed):
    with case_seed(seed):
        check("apply_op", engine(extra=NO_GRAD_AS_CLASS))
