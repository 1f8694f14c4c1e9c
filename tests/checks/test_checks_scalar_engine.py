"""Notebook 2 checks: a wrong implementation per misconception probe is rejected with that probe's message, and
correct alternatives (Kahn's algorithm, a Value with its own rules for - and /, an MLP without Layer) pass.

Wrong implementations are small text edits of the solution notebook's own code, the way a learner's slip looks;
genuinely different implementations (other walks, another Value, another network) are extra code.
"""
import contextlib

import numpy as np
import pytest

from autograder import check
from autograder.checks.harness.diagnostics import case_seed
from autograder.tools.solutions import solution_namespace
from conftest import rejects

NB = "02_scalar_engine"


def engine(edits=None, extra=""):
    return solution_namespace(NB, edits, extra)


def edited(exercise_id, *pairs):
    """The solution with (right, wrong) text edits in the answer cell of ``exercise_id``."""
    return engine({exercise_id: list(pairs)})


@pytest.mark.parametrize("exercise", ["value_node", "topological_order", "backward", "derived_operators",
                                      "nonlinearities", "mlp"])
def test_solution_passes(exercise):
    check(exercise, engine())


# ------------------------------------------------------------------------------------------- topological_order

KAHN = '''
from collections import deque

def topological_order(root):
    """Kahn's algorithm: count each node's consumers, emit a node once all of them are emitted, then reverse."""
    consumers, seen, todo = {}, {root}, [root]
    while todo:
        node = todo.pop()
        for child in node._prev:
            consumers[child] = consumers.get(child, 0) + 1
            if child not in seen:
                seen.add(child)
                todo.append(child)
    ready, emitted = deque([root]), []
    while ready:
        node = ready.popleft()
        emitted.append(node)
        for child in node._prev:
            consumers[child] -= 1
            if consumers[child] == 0:
                ready.append(child)
    return emitted[::-1]
'''

RECURSIVE = '''
def topological_order(root):
    order, visited = [], set()

    def visit(node):
        if node not in visited:
            visited.add(node)
            for child in node._prev:
                visit(child)
            order.append(node)
    visit(root)
    return order
'''

RAISES_THE_LIMIT = RECURSIVE.replace("    order, visited = [], set()\n",
                                     "    import sys\n    sys.setrecursionlimit(100_000)\n    order, visited = [], set()\n")

BY_PATHS = '''
def topological_order(root):
    """Reverse pre-order over every path, deduplicated at the end: exponential on stacked diamonds."""
    seen, stack = [], [root]
    while stack:
        node = stack.pop()
        seen.append(node)
        stack.extend(node._prev)
    order, kept = [], set()
    for node in reversed(seen):
        if node not in kept:
            kept.add(node)
            order.append(node)
    return order
'''

EXPAND = '''        elif node not in visited:
            # Mark a node when it is expanded, not when it is pushed: a node pushed earlier by another consumer
            # must still be appended before this one.
            visited.add(node)
            stack.append((node, True))  # come back to it after its inputs
            stack.extend((child, False) for child in node._prev if child not in visited)
'''
# Inputs in order of their data, not of the set: the probe this slip fails first must not depend on ids (the parity
# test compares headlines, probe included, across processes).
MARK_ON_PUSH = '''        else:
            stack.append((node, True))
            for child in sorted(node._prev, key=lambda c: c.data):
                if child not in visited:
                    visited.add(child)
                    stack.append((child, False))
'''


def test_topological_order_accepts_kahns_algorithm():
    check("topological_order", engine(extra=KAHN))


@pytest.mark.parametrize("pairs, phrases", [
    ([("        elif node not in visited:\n", "        else:\n")], ["more than once", "cause: walk/node-twice"]),
    ([("    return order\n", "    return order[::-1]\n")], ["root comes first", "cause: walk/end-not-last"]),
    ([(EXPAND, MARK_ON_PUSH), ("order, visited = [], set()", "order, visited = [], {root}")],
     ["comes before one of its inputs", "cause: walk/node-before-its-inputs"]),
    ([("    return order\n", "    return order[1:]\n")], ["reachable", "cause: walk/nodes-missing"]),
    ([("    return order\n", "    return tuple(order)\n")], ["return a list", "got tuple"]),  # audit 14: the page says list
    ([("    return order\n", "    return order if root._prev else []\n")], ["single leaf"]),
])
def test_topological_order_rejects(pairs, phrases):
    rejects("topological_order", edited("topological_order", *pairs), *phrases)


@pytest.mark.parametrize("extra, phrases", [
    (RECURSIVE, ["RecursionError", "stack", "cause: recursion"]),
    (RAISES_THE_LIMIT, ["recursion limit"]),
])
def test_topological_order_rejects_recursive_walks(extra, phrases):
    rejects("topological_order", engine(extra=extra), *phrases)


def test_endless_walk_is_stopped_with_a_diagnosis(monkeypatch):
    from autograder.checks.harness import diagnostics
    monkeypatch.setattr(diagnostics, "CALL_TIMEOUT_S", 1)
    rejects("topological_order", engine(extra=BY_PATHS), ("did not finish", "cause: timeout"))


# ------------------------------------------------------------------------------------------- backward

BACKWARD_KAHN = KAHN + '''
def backward(self):
    self.grad = 1.0
    for node in reversed(topological_order(self)):
        node._backward()

Value.backward = backward
'''

PER_PATH = '''
def backward(self):
    """Follows every path from the output: shared nodes run once per path."""
    self.grad = 1.0
    stack = [self]
    while stack:
        node = stack.pop()
        node._backward()
        stack.extend(node._prev)

Value.backward = backward
'''

FIRST_REACHED = '''
def backward(self):
    """Runs each node's rule when a depth-first walk from the output first reaches it, and skips it after."""
    self.grad = 1.0
    visited, stack = set(), [self]
    while stack:
        node = stack.pop()
        if node not in visited:
            visited.add(node)
            node._backward()
            stack.extend(node._prev)

Value.backward = backward
'''

BREADTH_FIRST = '''
def backward(self):
    """Runs each node's rule in breadth-first order from the output, once: a red team's wrong answer, which passed
    while every probe's shared node lay at one distance from the output."""
    from collections import deque
    self.grad = 1.0
    seen, queue = {self}, deque([self])
    while queue:
        node = queue.popleft()
        node._backward()
        for child in node._prev:
            if child not in seen:
                seen.add(child)
                queue.append(child)

Value.backward = backward
'''

OWN_RECURSIVE_ORDER = RECURSIVE.replace("def topological_order(", "def my_order(") + '''
def backward(self):
    self.grad = 1.0
    for node in reversed(my_order(self)):
        node._backward()

Value.backward = backward
'''

SEED = "    self.grad = 1.0\n"


def test_backward_accepts_kahns_order():
    check("backward", engine(extra=BACKWARD_KAHN))


# Red team 20: the given cells' tqdm and plt, used in an answer cell, failed the grade alone (the worker lacked them).
@pytest.mark.parametrize("exercise, right, wrong", [
    ("backward", "    for node in reversed(order):",
     "    for node in tqdm(reversed(order), total=len(order), disable=len(order) < 10_000):"),
    ("value_node", "class Value:\n", "plt.rcParams['figure.figsize'] = (6, 4)  # smaller graphs\n\n\nclass Value:\n"),
    # red teams 21 and 22: a class of the given cells' tqdm, the notebook's own bar and more BLAS threads, before the
    # answer
    ("value_node", "class Value:\n",
     "from threadpoolctl import threadpool_limits\nfrom tqdm.notebook import tqdm as notebook_bar\n\n\n"
     "class Quiet(tqdm):\n    def __init__(self, *args, **kwargs):\n        tqdm.__init__(self, *args, disable=True, **kwargs)\n"
     "\n\nQuiet(total=1).close()\n\n\n"
     "with threadpool_limits(limits=2):\n    _ = sum(notebook_bar(range(3), disable=True))\n\n\n"
     "class Value:\n"),
])
def test_answers_using_the_given_cells_progress_bar_and_plots_pass(exercise, right, wrong):
    check(exercise, edited(exercise, (right, wrong)))


@pytest.mark.parametrize("pairs, phrases", [
    ([("for node in reversed(order):", "for node in order:")], ["processed before all of its consumers"]),
    ([(SEED, "")], ["seeded with 1", "cause: backward/no-seed"]),
    ([(SEED, ""), ("        node._backward()\n", "        node._backward()\n    self.grad = 1.0\n")], ["seeded with 1"]),
    ([(SEED, "    for node in order:\n        node.grad = 0.0\n    self.grad = 1.0\n")],
     ["accumulates", "cause: backward/resets-gradients"]),
])
def test_backward_rejects(pairs, phrases):
    rejects("backward", edited("backward", *pairs), *phrases)


@pytest.mark.parametrize("extra, phrases", [
    (PER_PATH, ["ran 2 times", "once per path", "cause: backward/follows-every-path"]),
    (FIRST_REACHED, ["the share of one product only",
         "cause: backward/node-before-its-consumers", "processed before all of its consumers"]),
    (BREADTH_FIRST, ["y = 3*tanh(b) + b", "processed before all of its consumers"]),
    (OWN_RECURSIVE_ORDER, ["RecursionError"]),
])
def test_backward_rejects_other_walks(extra, phrases):
    rejects("backward", engine(extra=extra), *phrases)


def test_backward_names_a_broken_topological_order():
    rejects("backward", engine(extra=RECURSIVE), "from topological_order", "RecursionError")


# ------------------------------------------------------------------------------------------- Value

DIRECT_RULES = '''
def __sub__(self, other):
    other = other if isinstance(other, Value) else Value(other)
    out = Value(self.data - other.data, (self, other), "-")

    def _backward():
        self.grad += out.grad
        other.grad -= out.grad
    out._backward = _backward
    return out


def __truediv__(self, other):
    other = other if isinstance(other, Value) else Value(other)
    out = Value(self.data / other.data, (self, other), "/")

    def _backward():
        self.grad += out.grad / other.data
        other.grad += -self.data / other.data ** 2 * out.grad
    out._backward = _backward
    return out


Value.__sub__ = __sub__
Value.__truediv__ = __truediv__
Value.__rsub__ = lambda self, other: Value(other) - self
Value.__rtruediv__ = lambda self, other: Value(other) / self
Value.__neg__ = lambda self: Value(0.0) - self
'''


@pytest.mark.parametrize("exercise_id", ["value_node", "derived_operators", "nonlinearities", "mlp"])
def test_value_with_its_own_rules_for_minus_and_divide_passes(exercise_id):
    check(exercise_id, engine(extra=DIRECT_RULES))


ADD_RULE = '''            self.grad += out.grad   # local derivative of a + b with respect to a is 1
            other.grad += out.grad  # ... and with respect to b too
'''
MUL_RULE = '''            self.grad += other.data * out.grad  # local derivative with respect to self is the other input
            other.grad += self.data * out.grad
'''
WRAP_FOR_MUL = '''        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), "*")
'''


@pytest.mark.parametrize("pairs, phrases", [
    ([(ADD_RULE, ADD_RULE.replace("+=", "=")), (MUL_RULE, MUL_RULE.replace("+=", "="))], ["shared node", "+=",
         "cause: value_node/overwrites-shared"]),
    ([('out = Value(self.data * other.data, (self, other), "*")', 'out = Value(self.data * other.data, (), "*")')],
     ["_prev", "cause: value_node/inputs-not-recorded"]),
    ([(ADD_RULE, ADD_RULE + "            out.grad = 0.0  # torch-style freeing\n")],
     ["leave out.grad alone", "cause: value_node/changes-out-grad"]),
    ([(WRAP_FOR_MUL, "        if not isinstance(other, Value):\n            return Value(self.data * other)\n"
                     '        out = Value(self.data * other.data, (self, other), "*")\n')], ["Wrap the number",
                          "cause: value_node/number-disconnects"]),
    ([(MUL_RULE, "            self.grad += out.grad\n            other.grad += out.grad\n")],
     ["multiply sends", "cause: value_node/upstream-unscaled"]),
    ([(MUL_RULE, "            self.grad += self.data * out.grad\n            other.grad += other.data * out.grad\n")],
     ["gradients are swapped", "cause: value_node/gradients-swapped"]),
    ([("        self.grad = 0.0\n", "        self.grad = 1.0\n")],
     ["should start at 0.0", "cause: value_node/grad-not-zero"]),
    # audit 14: the page names the operations
    ([('(self, other), "+")', "(self, other))")], ["_op ''", "'+'"]),
    ([('(self, other), "*")', '(self, other), "mul")')], ["_op 'mul'", "'*'", "cause: value_node/op-name"]),
])
def test_value_node_rejects(pairs, phrases):
    rejects("value_node", edited("value_node", *pairs), *phrases)


@pytest.mark.parametrize("pairs, phrases", [
    ([("return other + (-self)", "return self + (-other)")], ["self is the right operand",
         "cause: derived_operators/operands-swapped"]),
    ([("return other * self ** -1", "return self * other ** -1")], ["in __rtruediv__, self is the right operand"]),
    ([("self.grad += k * self.data ** (k - 1) * out.grad", "self.grad += k * self.data ** k * out.grad")],
     ["x ** 3", "cause: derived_operators/power-rule"]),
    ([("return self * -1", "return self * 1")], ["the sign was lost", "cause: derived_operators/negation-lost"]),
    ([("def __radd__(self, other):  # other + self\n    return self + other",
       "def __radd__(self, other):  # other + self\n    return Value(self.data) if other == 0 else self + other")],
     ["sum() starts from 0", "cause: derived_operators/disconnected"]),
    ([('f"**{k}"', '"pow"')], ["_op 'pow'", "'**2'"]),  # audit 14: the page names it f"**{k}"
    ([('f"**{k}"', 'f"**{float(k)}"')], ["'**2'"]),
])
def test_derived_operators_reject(pairs, phrases):
    rejects("derived_operators", edited("derived_operators", *pairs), *phrases)


TANH_FORWARD = 'out = Value(math.tanh(self.data), (self,), "tanh")'


@pytest.mark.parametrize("pairs, phrases", [
    ([("self.grad += out.data * out.grad", "self.grad += self.data * out.grad")], ["its output", "not its input",
         "cause: nonlinearities/exp-input-for-output"]),
    ([(TANH_FORWARD, "e = math.exp(2 * self.data)\n    out = Value((e - 1) / (e + 1), (self,), \"tanh\")")],
     ["overflows", "cause: nonlinearities/tanh-overflows"]),
    ([("self.grad += (out.data > 0) * out.grad", "self.grad += (self.data >= 0) * out.grad")],
     ["exactly 0", "cause: nonlinearities/relu-passes-at-zero"]),
    ([("self.grad += (out.data > 0) * out.grad", "self.grad += out.grad")],
     ["only where the output is positive", "cause: nonlinearities/relu-passes-negative"]),
    ([("self.grad += (1 - out.data ** 2) * out.grad", "self.grad += (1 - self.data ** 2) * out.grad")], ["1 - x²",
         "cause: nonlinearities/tanh-input-for-output"]),
    ([("self.grad += out.grad / self.data", "self.grad += math.log(self.data) * out.grad")], ["not log(x)",
         "cause: nonlinearities/log-derivative-is-log"]),
    # audit 14: the page's table names each operation
    ([('(self,), "ReLU")', '(self,), "relu")')], ["_op 'relu'", "'ReLU'"]),
    ([('(self,), "exp")', '(self,), "e^x")')], ["'exp'"]),
    ([('(self,), "log")', '(self,), "ln")')], ["'log'"]),
    ([('(self,), "tanh")', '(self,), "th")')], ["'tanh'"]),
])
def test_nonlinearities_reject(pairs, phrases):
    rejects("nonlinearities", edited("nonlinearities", *pairs), *phrases)


@pytest.mark.parametrize("pairs", [
    [("self.grad += out.data * out.grad", "self.grad += math.exp(self.data) * out.grad")],
    [("out = Value(self.data if self.data > 0 else 0.0, (self,), \"ReLU\")",
      "out = Value(max(self.data, 0.0), (self,), \"ReLU\")"),
     ("self.grad += (out.data > 0) * out.grad", "self.grad += out.grad if self.data > 0 else 0.0")],
], ids=["exp rule from the input", "relu with max"])
def test_nonlinearities_accept_other_spellings(pairs):
    check("nonlinearities", edited("nonlinearities", *pairs))


@pytest.mark.parametrize("exercise_id", ["derived_operators", "nonlinearities"])
def test_later_exercises_name_a_broken_value_node(exercise_id):
    namespace = edited("value_node", (ADD_RULE, ADD_RULE.replace("+=", "=")), (MUL_RULE, MUL_RULE.replace("+=", "=")))
    rejects(exercise_id, namespace, "from value_node, which fails its own check", "shared node")


@pytest.mark.parametrize("exercise_id", ["derived_operators", "nonlinearities", "mlp"])
def test_later_exercises_name_a_broken_backward_instead_of_a_knock_on_symptom(exercise_id):
    """One wrong backward used to cost derived_operators, nonlinearities and mlp too, with messages such as
    "5 - x must stay connected to x"; now each names backward as the cause."""
    rejects(exercise_id, engine(extra=PER_PATH), "runs your code from backward, which fails its own check",
            "once per path")


# ------------------------------------------------------------------------------------------- mlp

LAYERLESS = '''
class MLP(Module):
    """No Layer class: each layer is a plain list of the solution's Neurons."""

    def __init__(self, n_inputs, sizes):
        dims = [n_inputs] + list(sizes)
        self.layers = [[Neuron(dims[i], nonlinear=i < len(sizes) - 1) for _ in range(dims[i + 1])]
                       for i in range(len(sizes))]

    def __call__(self, x):
        for layer in self.layers:
            x = [neuron(x) for neuron in layer]
        return x[0] if len(x) == 1 else x

    def parameters(self):
        return [p for layer in self.layers for neuron in layer for p in neuron.parameters()]
'''

DRAW = "self.w = [Value(random.uniform(-1, 1)) for _ in range(n_inputs)]"
NEURON_SIGNATURE = "def __init__(self, n_inputs, nonlinear=True):"


@pytest.mark.parametrize("pairs, extra", [
    ([], LAYERLESS),
    ([(DRAW, "self.w = [Value(2 * random.random() - 1) for _ in range(n_inputs)]")], ""),  # the same draws
    ([("act = sum((wi * xi for wi, xi in zip(self.w, x)), self.b)",
       "act = sum(wi * xi for wi, xi in zip(self.w, x)) + self.b")], ""),  # the sum may start from 0
], ids=["without Layer", "2·random() - 1", "sum from 0"])
def test_mlp_accepts_correct_alternatives(pairs, extra):
    check("mlp", engine({"mlp": pairs}, extra))


@pytest.mark.parametrize("pairs, phrases", [
    ([("return act.relu() if self.nonlinear else act", "return act.tanh() if self.nonlinear else act")],
     ["ReLU on every layer except the last"]),
    ([("nonlinear=i != len(layer_sizes) - 1", "nonlinear=True")], ["ReLU on every layer except the last"]),
    ([("return self.w + [self.b]", "return [self.b] + self.w")], ["weights then its bias"]),
    ([("class MLP(Module):\n", "class MLP(Module):\n    def zero_grad(self):\n        pass\n\n")],
     ["zero_grad", "cause: mlp/zero-grad-incomplete"]),
    ([("return outs[0] if len(outs) == 1 else outs", "return outs")],
     ["returned a list of one", "cause: mlp/single-output-in-list"]),
    ([("return [p for layer in self.layers for p in layer.parameters()]",
       "return [p for layer in self.layers for p in layer.parameters()][:-1]")],
     ["distinct parameters", "cause: mlp/parameters-missing"]),
    # audit 14: the conventions the page says the grader relies on
    ([("self.b = Value(0.0)", "self.b = Value(random.uniform(-1, 1))")],
     ["bias should be Value(0.0)", "cause: mlp/bias-not-zero"]),
    ([(DRAW, "self.w = [Value(float(np.random.uniform(-1, 1))) for _ in range(n_inputs)]")],
     ["random.uniform(-1, 1)", "not numpy's"]),
    ([(DRAW, "self.w = [Value(0.5) for _ in range(n_inputs)]")],
     ["random.uniform(-1, 1)", "cause: mlp/weights-not-random-uniform"]),
    ([(DRAW, "self.w = [Value(random.uniform(-1, 1)) for _ in range(n_inputs)][::-1]")], ["construction order"]),
    ([("return self.w + [self.b]", "return [Value(p.data) for p in self.w + [self.b]]")],
     ["different objects", "cause: mlp/parameters-not-the-models"]),
    ([(NEURON_SIGNATURE, "def __init__(self, n_inputs, nonlinear=False):")],
     ["Neuron(n_inputs, nonlinear=True)", "cause: mlp/nonlinear-default"]),
])
def test_mlp_rejects(pairs, phrases):
    rejects("mlp", edited("mlp", *pairs), *phrases)


def test_op_names_are_read_from_the_learners_object_under_trusted_grading():
    """A Remote has an `_op` method of its own: the check must ask the learner's object, not the proxy."""
    from autograder import CheckFailure
    from autograder.trust import remote
    from autograder.checks.scalar_engine import _check_op_name

    with remote.Worker() as worker:
        worker.run("class V:\n    def __init__(self, op):\n        self._op = op\n", "<cell>")
        V = worker.evaluate("V")
        _check_op_name("value_node", V("+"), "+", "V('+')")
        with pytest.raises(CheckFailure, match="has _op 'add'"):
            _check_op_name("value_node", V("add"), "+", "V('add')")


def test_central_differences_run_the_program_that_was_graded():
    """v2 = v0 / (v0 + v0) at v0 = 0.1 divides by 0.2, the edge of the programs' safe range: nudged down by h, an
    oracle that decided each step again swapped the division for a scaling and reported a slope of 349999 (a
    spurious failure). A program is resolved once, and every replay runs its lines."""
    from autograder.checks.harness.random_programs import VALUE, Step, make_program
    from autograder.checks.scalar_engine import compare_program

    program = make_program(VALUE, [(np.asarray(0.1), True)], [Step("+", 0, 0, 0), Step("/", 0, 1, 0)], None)
    assert program.lines == [("+", 0, 0, None), ("/", 0, 1, None)]
    compare_program("nonlinearities", engine()["Value"], program, with_differences=True)


# ------------------------------------------------------------------------------------------- answers that know the probes

# A Value whose rules are a table of the fixed probes' gradients (per input, keyed by operation, data and upstream
# gradient), and 0 for anything else: its data are right everywhere.
PROBE_TABLE = '''
KNOWN = {("+", 2.0, -3.0, 5.0): (5.0, 5.0), ("*", 2.0, -3.0, 5.0): (-15.0, 10.0), ("*", 3.0, 3.0, 1.0): (3.0, 3.0),
         ("+", 3.0, 3.0, 1.0): (1.0, 1.0), ("+", 2.0, 1, 1.0): (1.0, 1.0), ("*", 2.0, 3, 1.0): (3.0, 2.0)}


def _from_the_table(op):
    def apply(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data if op == "+" else self.data * other.data, (self, other), op)

        def _backward():
            first, second = KNOWN.get((op, self.data, other.data, out.grad), (0.0, 0.0))
            self.grad += first
            other.grad += second
        out._backward = _backward
        return out
    return apply


Value.__add__, Value.__mul__ = _from_the_table("+"), _from_the_table("*")
'''
# ReLU on the hidden layers of the two fixed architectures only: any other network is linear.
KNOWN_ARCHITECTURES = '''
_known = {(3, (4, 4, 1)), (2, (3, 2))}


class MLP(MLP):
    def __init__(self, n_inputs, layer_sizes):
        super().__init__(n_inputs, layer_sizes)
        if (n_inputs, tuple(layer_sizes)) not in _known:
            for layer in self.layers:
                for neuron in layer.neurons:
                    neuron.nonlinear = False
'''


@pytest.mark.parametrize("exercise, extra, phrase", [("value_node", PROBE_TABLE, ("add passes the upstream gradient",
     "cause: value_node/no-gradient")),
                                                     ("mlp", KNOWN_ARCHITECTURES, "ReLU on every layer")],
                         ids=["value_node", "mlp"])
@pytest.mark.parametrize("seed", [None, 1, 2], ids=["kernel", "seed 1", "seed 2"])
def test_an_answer_right_only_on_the_fixed_probes_fails_the_drawn_cases(exercise, extra, phrase, seed):
    """Both pass every fixed probe (main's checks, which had only those, passed them); the numbers and networks drawn
    from the case seed, in a learner's kernel or under a trusted grade's seed, show them."""
    with contextlib.nullcontext() if seed is None else case_seed(seed):
        rejects(exercise, engine(extra=extra), phrase)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("exercise, extra", [("value_node", DIRECT_RULES), ("mlp", LAYERLESS)], ids=["value_node", "mlp"])
def test_correct_alternatives_pass_the_drawn_cases_of_trusted_grades(exercise, extra, seed):
    with case_seed(seed):
        check(exercise, engine(extra=extra))


# The solution's backward on graphs that have a leaf of the fixed probes (2.0, 0.5), and on any other graph only the
# output's own rule.
BACKWARD_KNOWING_THE_PROBES = '''
def backward(self):
    order = topological_order(self)
    self.grad = 1.0
    if not any(not node._prev and node.data in (2.0, 0.5) for node in order):
        order = [self]
    for node in reversed(order):
        node._backward()


Value.backward = backward
'''


@pytest.mark.parametrize("seed", [None, 1, 2], ids=["kernel", "seed 1", "seed 2"])
def test_backward_rejects_a_walk_right_only_on_the_fixed_graphs(seed):
    with contextlib.nullcontext() if seed is None else case_seed(seed):
        rejects("backward", engine(extra=BACKWARD_KNOWING_THE_PROBES), "reverse topological order")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_backward_accepts_kahns_order_under_trusted_grades_seeds(seed):
    with case_seed(seed):
        check("backward", engine(extra=BACKWARD_KAHN))
