"""Notebook 2 checks: a wrong implementation per misconception probe is rejected with that probe's message, and
correct alternatives (subtraction built from add and negate, or implemented directly; DFS or Kahn ordering) pass.
"""
import math
import random
from collections import deque

import pytest

from autograder import check
from conftest import learner, rejects


# ------------------------------------------------------------------------------------------- ordering and backward

def order_by_stack(root):
    order, visited, stack = [], set(), [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
        elif node not in visited:
            visited.add(node)
            stack.append((node, True))
            stack.extend((child, False) for child in node._prev if child not in visited)
    return order


def order_by_kahn(root):
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


def order_recursive(root):
    order, visited = [], set()

    def visit(node):
        if node not in visited:
            visited.add(node)
            for child in node._prev:
                visit(child)
            order.append(node)
    visit(root)
    return order


def order_without_visited(root):
    order, stack = [], [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in node._prev)
    return order


def order_marked_on_push(root):
    """The classic slip: marking a node visited when pushed lets a consumer be appended before it."""
    order, visited, stack = [], {root}, [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        stack.append((node, True))
        for child in node._prev:
            if child not in visited:
                visited.add(child)
                stack.append((child, False))
    return order


@pytest.mark.parametrize("answer", [order_by_stack, order_by_kahn])
def test_topological_order_accepts_correct_alternatives(answer):
    check("topological_order", learner("topological_order", answer))


@pytest.mark.parametrize("answer, phrases", [
    (order_recursive, ["RecursionError", "stack"]),
    (order_without_visited, ["more than once"]),
    (lambda root: order_by_stack(root)[::-1], ["root comes first"]),
    (order_marked_on_push, ["comes before one of its inputs"]),
    (lambda root: order_by_stack(root)[1:], ["reachable"]),
])
def test_topological_order_rejects_wrong_implementations(answer, phrases):
    rejects("topological_order", learner("topological_order", answer), *phrases)


def backward_reference(self):
    order = order_by_stack(self)
    self.grad = 1.0
    for node in reversed(order):
        node._backward()


def backward_kahn(self):
    self.grad = 1.0
    for node in reversed(order_by_kahn(self)):
        node._backward()


def backward_per_path(self):
    """Recursive walk that follows every path: shared nodes run once per path."""
    self.grad = 1.0
    stack = [self]
    while stack:
        node = stack.pop()
        node._backward()
        stack.extend(node._prev)


def backward_forward_order(self):
    self.grad = 1.0
    for node in order_by_stack(self):
        node._backward()


def backward_without_seed(self):
    for node in reversed(order_by_stack(self)):
        node._backward()


def backward_that_clears(self):
    order = order_by_stack(self)
    for node in order:
        node.grad = 0.0
    self.grad = 1.0
    for node in reversed(order):
        node._backward()


def backward_first_reached(self):
    """Runs each node's rule when a depth-first walk from the output first reaches it, and skips it after."""
    self.grad = 1.0
    visited, stack = set(), [self]
    while stack:
        node = stack.pop()
        if node not in visited:
            visited.add(node)
            node._backward()
            stack.extend(node._prev)


def backward_recursive(self):
    self.grad = 1.0
    for node in reversed(order_recursive(self)):
        node._backward()


@pytest.mark.parametrize("answer", [backward_reference, backward_kahn])
def test_backward_accepts_correct_alternatives(answer):
    check("backward", learner("backward", answer))


@pytest.mark.parametrize("answer, phrases", [
    (backward_per_path, ["ran 2 times", "once per path"]),
    (backward_forward_order, ["processed before all of its consumers"]),
    (backward_first_reached, ["the share of one product only", "processed before all of its consumers"]),
    (backward_without_seed, ["seeded with 1"]),
    (backward_that_clears, ["accumulates"]),
    (backward_recursive, ["RecursionError"]),
])
def test_backward_rejects_wrong_implementations(answer, phrases):
    rejects("backward", learner("backward", answer), *phrases)


# ------------------------------------------------------------------------------------------- Value variants

def make_value(slip=None, direct=False):
    """A micrograd-style Value; `slip` plants one known mistake, `direct` gives - and / their own local rules."""

    class Value:
        def __init__(self, data, _children=(), _op=""):
            self.data = data
            self.grad = 0.0
            self._backward = lambda: None
            self._prev = set(_children)
            self._op = _op

        def _unary(self, data, op, local):
            out = Value(data, (self,), op)

            def _backward():
                self.grad += local(out) * out.grad
            out._backward = _backward
            return out

        def __add__(self, other):
            other = other if isinstance(other, Value) else Value(other)
            out = Value(self.data + other.data, (self, other), "+")

            def _backward():
                if slip == "overwrite":
                    self.grad = out.grad
                    other.grad = out.grad
                else:
                    self.grad += out.grad
                    other.grad += out.grad
            out._backward = _backward
            return out

        def __mul__(self, other):
            other = other if isinstance(other, Value) else Value(other)
            out = Value(self.data * other.data, (self, other), "*")

            def _backward():
                if slip == "overwrite":
                    self.grad = other.data * out.grad
                    other.grad = self.data * out.grad
                else:
                    self.grad += other.data * out.grad
                    other.grad += self.data * out.grad
            out._backward = _backward
            return out

        def __pow__(self, k):
            return self._unary(self.data ** k, f"**{k}", lambda out: k * self.data ** (k - 1))

        def __neg__(self):
            return self * -1

        def __radd__(self, other):
            return self + other

        def __rmul__(self, other):
            return self * other

        def __sub__(self, other):
            if not direct:
                return self + (-other)
            other = other if isinstance(other, Value) else Value(other)
            out = Value(self.data - other.data, (self, other), "-")

            def _backward():
                self.grad += out.grad
                other.grad -= out.grad
            out._backward = _backward
            return out

        def __rsub__(self, other):
            if slip == "swapped reflection":
                return self - other
            return Value(other) - self if direct else other + (-self)

        def __truediv__(self, other):
            if not direct:
                return self * other ** -1
            other = other if isinstance(other, Value) else Value(other)
            out = Value(self.data / other.data, (self, other), "/")

            def _backward():
                self.grad += out.grad / other.data
                other.grad += -self.data / other.data ** 2 * out.grad
            out._backward = _backward
            return out

        def __rtruediv__(self, other):
            if slip == "swapped reflection":
                return self / other
            return Value(other) / self if direct else other * self ** -1

        def exp(self):
            return self._unary(math.exp(self.data), "exp",
                               lambda out: self.data if slip == "exp uses input" else out.data)

        def log(self):
            return self._unary(math.log(self.data), "log", lambda out: 1 / self.data)

        def tanh(self):
            if slip == "tanh via exp":
                e = math.exp(2 * self.data)
                t = (e - 1) / (e + 1)
            else:
                t = math.tanh(self.data)
            return self._unary(t, "tanh", lambda out: 1 - out.data ** 2)

        def relu(self):
            return self._unary(max(self.data, 0.0), "ReLU", lambda out: float(out.data > 0))

        def backward(self):
            backward_reference(self)

    return Value


@pytest.mark.parametrize("exercise_id", ["value_node", "derived_operators", "nonlinearities"])
@pytest.mark.parametrize("direct", [False, True], ids=["built from add and negate", "own local rules"])
def test_value_exercises_accept_correct_alternatives(exercise_id, direct):
    check(exercise_id, learner(exercise_id, make_value(direct=direct)))


@pytest.mark.parametrize("exercise_id, slip, phrases", [
    ("value_node", "overwrite", ["shared node", "+="]),
    ("derived_operators", "swapped reflection", ["self is the right operand"]),
    ("nonlinearities", "exp uses input", ["its output", "not its input"]),
    ("nonlinearities", "tanh via exp", ["overflows"]),
])
def test_value_exercises_reject_each_misconception(exercise_id, slip, phrases):
    rejects(exercise_id, learner(exercise_id, make_value(slip)), *phrases)


def test_value_node_rejects_a_graph_without_edges():
    class Forgetful(make_value()):
        def __mul__(self, other):
            out = super().__mul__(other)
            out._prev = set()
            return out
    rejects("value_node", learner("value_node", Forgetful), "_prev")


def test_derived_operators_reject_a_wrong_power_rule():
    class WrongPower(make_value()):
        def __pow__(self, k):
            return self._unary(self.data ** k, f"**{k}", lambda out: k * self.data ** k)
    rejects("derived_operators", learner("derived_operators", WrongPower), "x ** 3")


# ------------------------------------------------------------------------------------------- mlp

Value = make_value()


class Module:
    def zero_grad(self):
        for p in self.parameters():
            p.grad = 0.0


def make_mlp(hidden_activation="relu", bias_first=False, keeps_grads=False):
    class Neuron(Module):
        def __init__(self, n_inputs, nonlinear=True):
            self.w = [Value(random.uniform(-1, 1)) for _ in range(n_inputs)]
            self.b = Value(0.0)
            self.nonlinear = nonlinear

        def __call__(self, x):
            total = self.b
            for wi, xi in zip(self.w, x):
                total = total + wi * xi
            return getattr(total, hidden_activation)() if self.nonlinear else total

        def parameters(self):
            return [self.b] + self.w if bias_first else self.w + [self.b]

    class MLP(Module):
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

        def zero_grad(self):
            if not keeps_grads:
                super().zero_grad()

    return MLP


def test_mlp_accepts_a_layerless_alternative():
    check("mlp", learner("mlp", make_mlp()))


@pytest.mark.parametrize("answer, phrases", [
    (make_mlp(hidden_activation="tanh"), ["ReLU on every layer except the last"]),
    (make_mlp(bias_first=True), ["weights then its bias"]),
    (make_mlp(keeps_grads=True), ["zero_grad"]),
])
def test_mlp_rejects_wrong_implementations(answer, phrases):
    rejects("mlp", learner("mlp", answer), *phrases)


@pytest.mark.parametrize("exercise_id", ["derived_operators", "nonlinearities", "mlp"])
def test_later_exercises_name_a_broken_backward_instead_of_a_knock_on_symptom(exercise_id):
    """One wrong backward used to cost derived_operators, nonlinearities and mlp too, with messages such as
    "5 - x must stay connected to x"; now each names backward as the cause."""
    answer = {"mlp": make_mlp()}.get(exercise_id, make_value())
    namespace = {**learner(exercise_id, answer), "backward": backward_per_path}
    rejects(exercise_id, namespace, "runs your code from backward, which fails its own check", "once per path")


def test_backward_names_a_broken_topological_order():
    namespace = {**learner("backward", backward_reference), "topological_order": order_recursive}
    rejects("backward", namespace, "from topological_order", "RecursionError")


@pytest.mark.parametrize("exercise_id", ["derived_operators", "nonlinearities"])
def test_later_exercises_name_a_broken_value_node(exercise_id):
    rejects(exercise_id, learner(exercise_id, make_value("overwrite")), "from value_node, which fails its own check", "shared node")


# ------------------------------------------------------------------------------------------- found by red-teaming

class RectifierAtZero(make_value()):
    def relu(self):
        return self._unary(max(self.data, 0.0), "ReLU", lambda out: float(self.data >= 0))


class DetachedReflection(make_value()):
    def __radd__(self, other):
        return Value(self.data) if other == 0 else self + other


class ClearsUpstream(make_value()):
    def __add__(self, other):
        out = super().__add__(other)
        rule = out._backward

        def _backward():
            rule()
            out.grad = 0.0  # PyTorch-style freeing, but micrograd accumulates on every node
        out._backward = _backward
        return out


class DetachedNumberProduct(make_value()):
    def __mul__(self, other):
        if not hasattr(other, "data"):
            return type(self)(self.data * other)
        return super().__mul__(other)


@pytest.mark.parametrize("exercise_id, answer, phrases", [
    ("nonlinearities", RectifierAtZero, ["exactly 0"]),
    ("derived_operators", DetachedReflection, ["sum() starts from 0"]),
    ("value_node", ClearsUpstream, ["leave out.grad alone"]),
    ("value_node", DetachedNumberProduct, ["Wrap the number"]),
])
def test_value_exercises_reject_red_team_answers(exercise_id, answer, phrases):
    rejects(exercise_id, learner(exercise_id, answer), *phrases)


def order_with_raised_limit(root):
    import sys
    sys.setrecursionlimit(100_000)
    return order_recursive(root)


def order_by_paths(root):
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


@pytest.mark.parametrize("answer, phrases", [
    (order_with_raised_limit, ["recursion limit"]),
    (lambda root: [] if not root._prev else order_by_stack(root), ["single leaf"]),
])
def test_topological_order_rejects_red_team_answers(answer, phrases):
    rejects("topological_order", learner("topological_order", answer), *phrases)


def test_endless_walk_is_stopped_with_a_diagnosis(monkeypatch):
    from autograder import diagnostics
    monkeypatch.setattr(diagnostics, "CALL_TIMEOUT_S", 1)
    rejects("topological_order", learner("topological_order", order_by_paths), "did not finish")


def test_backward_with_the_seed_after_the_walk_is_named():
    def seeds_late(self):
        for node in reversed(order_by_stack(self)):
            node._backward()
        self.grad = 1.0
    rejects("backward", learner("backward", seeds_late), "seeded with 1")


def test_mlp_whose_one_neuron_output_is_a_list_is_rejected():
    """The notebook's visible test and training loop need the Value itself (an audit found lists graded as right)."""
    class ListOfOne(make_mlp()):
        def __call__(self, x):
            out = super().__call__(x)
            return out if isinstance(out, list) else [out]
    rejects("mlp", learner("mlp", ListOfOne), "returned a list of one")


def test_mlp_with_relu_on_the_output_layer_is_rejected():
    class AlwaysRelu(make_mlp()):
        def __init__(self, n_inputs, sizes):
            super().__init__(n_inputs, sizes)
            for layer in self.layers:
                for neuron in layer:
                    neuron.nonlinear = True
    rejects("mlp", learner("mlp", AlwaysRelu), "ReLU on every layer except the last")


def test_mlp_with_constant_weights_is_rejected():
    class Constant(make_mlp()):
        def __init__(self, n_inputs, sizes):
            super().__init__(n_inputs, sizes)
            for p in self.parameters():
                p.data = 0.5
    rejects("mlp", learner("mlp", Constant), "bias should be Value(0.0)")
