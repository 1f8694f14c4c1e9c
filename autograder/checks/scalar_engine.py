"""Checks for notebook 2, "A scalar engine": a micrograd-compatible ``Value`` built in five steps, and a tiny MLP.

Learner graphs are compared with the same program run on torch float64 tensors (data and every leaf's grad,
relative 1e-9) and, for a sample, with central differences. Worked numbers come from the course seeds:
y = a·a at a = 3 has a.grad 6; exp at 2 has slope e² = 7.389; x = 2, a = x·x, y = a·a gives a.grad 8 and
x.grad 32, then 16 and 96 after a second backward() without clearing (micrograd's behaviour).
"""
from __future__ import annotations

import math
import random

import numpy as np
import torch
from hypothesis import given, strategies as st

from autograder.checks import causes
from autograder.checks.registry import exercise
from autograder.checks.reference import nodes as reference_nodes
from autograder.checks.harness.graph_walks import EARLY_NODE, EVERY_PATH, SCALAR, check_order, check_shared_inputs
from autograder.checks.harness.random_programs import NONLINEAR, VALUE, Program, programs, torch_run
from autograder.checks.harness.diagnostics import (AGAINST_DIFFERENCES, AGAINST_TORCH, RANDOM_CASES, SAME_ARITHMETIC,
                                    CheckFailure, Probe, Slip, as_float, call_learner, call_on_deep_graph, case_rng,
                                    close, fmt, run_probes)
from autograder.checks.harness.oracles import central_differences
from autograder.checks.harness.recorded import RecordedGraph
from autograder.trust.remote import Remote, beside

CHAIN_LENGTH = 10_000  # deeper than Python's default recursion limit (1,000)
SHORT = 8  # steps in a random program: enough to reuse values, short enough to read in a diagnosis


# ------------------------------------------------------------------------------------------------ random programs

def compare_program(ex, Value, program: Program, with_differences=False):
    """Run a program on the learner's Value and on torch (and, if asked, by central differences); raise
    CheckFailure naming the program on a mismatch."""
    listing = program.listing
    values = call_learner(ex, lambda: program.replay([Value(float(v)) for v, _ in program.leaves]), shown_input=listing)
    out = values[-1]
    expected_data, expected_grads = torch_run(program)
    got = as_float(ex, out.data, "the output's .data")
    if not close(got, float(expected_data), AGAINST_TORCH):
        raise CheckFailure(ex, f"forward value differs from torch for the program\n  {listing}\n"
                               f"expected {fmt(expected_data)}, received {fmt(got)}.", input=listing)
    call_learner(ex, out.backward, shown_input=listing)
    grads = [as_float(ex, leaf.grad, "a leaf's .grad") for leaf in values[:len(program.leaves)]]
    for i, (g, e) in enumerate(zip(grads, expected_grads)):
        e = 0.0 if e is None else float(e)  # a leaf the output does not use keeps the gradient it started with
        if not close(g, e, AGAINST_TORCH):
            raise CheckFailure(ex, f"gradient of v{i} differs from torch.autograd for the program\n  {listing}\n"
                                   f"expected {fmt(e)}, received {fmt(g)} (output = v{len(values) - 1}).",
                               input=listing)
    if with_differences:
        numeric = central_differences(
            lambda *xs: float(program.replay([torch.tensor(float(x), dtype=torch.float64) for x in xs])[-1]),
            *[float(v) for v, _ in program.leaves])
        for i, (g, n) in enumerate(zip(grads, numeric)):
            if not close(g, float(n), AGAINST_DIFFERENCES):
                raise CheckFailure(ex, f"gradient of v{i} differs from central differences for\n  {listing}\n"
                                       f"expected about {fmt(float(n))}, received {fmt(g)}.", input=listing)


# ------------------------------------------------------------------------------------------------ value_node

NO_GRADIENT = causes.declare("value_node/no-gradient", "out's rule gave its inputs no gradient")
UNSCALED = causes.declare("value_node/upstream-unscaled", "a product's rule passing the upstream gradient on without "
                          "multiplying by the other input")
SWAPPED = causes.declare("value_node/gradients-swapped", "each input of a product given the other's gradient")
OVERWRITES = causes.declare("value_node/overwrites-shared", "a shared input's gradient overwritten (=) where the "
                            "edges add up (+=)")
GRAD_NOT_ZERO = causes.declare("value_node/grad-not-zero", "a new Value's .grad not starting at 0.0")
NO_EDGES = causes.declare("value_node/inputs-not-recorded", "an operation's result not recording its inputs in "
                          "._prev, the graph's edges")
CHANGES_OUT_GRAD = causes.declare("value_node/changes-out-grad", "a rule that writes into out.grad instead of only "
                                  "adding to its inputs' gradients")
OP_NAME = causes.declare("value_node/op-name", "an operation's node built without the _op name the page gives it")
NUMBER_DISCONNECTS = causes.declare("value_node/number-disconnects", "an operation with a plain number leaves the "
                                    "Value without a gradient")


@exercise("value_node")
def check_value_node(Value) -> None:
    ex = "value_node"
    _check_new_value(ex, Value, 2.0)
    for op in "+*":
        _check_two_values(ex, Value, op, 2.0, -3.0, 5.0)
    # Shared nodes: y = a·a and y = a + a at a = 3. Both edges land on a, so a.grad = 3 + 3 = 6, and 1 + 1 = 2.
    for op in "*+":
        _check_shared_input(ex, Value, op, 3.0, 1.0)
    # Plain numbers are wrapped in a Value, and the result is still connected to the graph.
    for op, number in (("+", 1), ("*", 3)):
        _check_plain_number(ex, Value, op, 2.0, number)
    # Then the same on numbers drawn from the case seed: a Value whose rules know the probes' numbers (a table of
    # their gradients) does not know these. Four decimals, so that a diagnosis shows them whole; an upstream gradient
    # at least 0.5 away from 0, which would make every gradient 0.
    drawn = case_rng(ex)
    a, b, c = (round(float(v), 4) for v in drawn.uniform(-5, 5, 3))
    upstream = round(float(drawn.choice([-1, 1]) * drawn.uniform(0.5, 5)), 4)
    number = int(drawn.choice([-1, 1]) * drawn.integers(2, 10))
    _check_new_value(ex, Value, a)
    for op in "+*":
        _check_two_values(ex, Value, op, a, b, upstream)
    for op in "*+":
        _check_shared_input(ex, Value, op, c, upstream)
        _check_plain_number(ex, Value, op, a, number)


def _check_new_value(ex, Value, data):
    v = call_learner(ex, Value, data, shown_input=f"Value({data})")
    if as_float(ex, getattr(v, "data", None), f"Value({data}).data") != data:
        raise CheckFailure(ex, f"Value({data}).data should be {data}, got {getattr(v, 'data', None)!r}")
    if getattr(v, "grad", None) != 0:
        raise CheckFailure(ex, f"a new Value's .grad should start at 0.0, got {getattr(v, 'grad', None)!r}",
                           cause_id=GRAD_NOT_ZERO)


def _check_two_values(ex, Value, op, a, b, upstream):
    """Value(a) op Value(b): its data, its edges, its _op, and its rule run with out.grad = upstream."""
    expected, grads = (a + b, (1.0, 1.0)) if op == "+" else (a * b, (b, a))
    x, y = Value(a), Value(b)
    out = call_learner(ex, (lambda p, q: p + q) if op == "+" else (lambda p, q: p * q), x, y,
                       shown_input=f"Value({a}) {op} Value({b})")
    if as_float(ex, out.data, "the result's .data") != expected:
        raise CheckFailure(ex, f"Value({a}) {op} Value({b}) should have data {expected}, got {out.data!r}")
    if set(getattr(out, "_prev", ())) != {x, y}:
        raise CheckFailure(ex, f"the result of {op} must record both inputs in ._prev (the graph's edges)",
                           cause_id=NO_EDGES)
    _check_op_name(ex, out, op, f"Value({a}) {op} Value({b})")
    out.grad = upstream
    rule = ("add passes the upstream gradient through unchanged to both inputs" if op == "+" else
            "multiply sends each input upstream × the other input's data")
    shown = f"out = Value({a}) {op} Value({b}); out.grad = {upstream:g}; out._backward(); (x.grad, y.grad)"
    swapped = (upstream * grads[1], upstream * grads[0])  # each input given the other's gradient
    slips = (Slip((0.0, 0.0), f"the rule gave the inputs no gradient: {rule}.", NO_GRADIENT),
             *((Slip((upstream, upstream), f"the upstream gradient was passed on unscaled: {rule}.", UNSCALED),
                Slip(swapped, f"the two inputs' gradients are swapped: {rule}.", SWAPPED)) if op == "*" else ()))
    run_probes(ex, [Probe(shown, lambda: _backward_then(ex, out, x, y), (upstream * grads[0], upstream * grads[1]),
                          slips, tolerance=SAME_ARITHMETIC)])


def _check_shared_input(ex, Value, op, data, upstream):
    """y = a op a: both edges land on a, so its rule must add twice into a.grad."""
    if op == "*":
        want, slips = 2 * data * upstream, (Slip(data * upstream, (
            "a is a shared node: it is both inputs of the multiply, and the second edge overwrote the first. "
            "Accumulate with +="), OVERWRITES),)
    else:
        want, slips = 2 * upstream, (Slip(upstream, "y = a + a gives one gradient per edge, and the second overwrote "
                                                    "the first: accumulate with +=.", OVERWRITES),)
    a = Value(data)
    y = call_learner(ex, (lambda p: p * p) if op == "*" else (lambda p: p + p), a, shown_input=f"a {op} a")
    y.grad = upstream
    run_probes(ex, [Probe(f"a = Value({data}); y = a {op} a; y.grad = {upstream:g}; y._backward(); a.grad",
                          lambda: _backward_then(ex, y, a), want, slips, tolerance=SAME_ARITHMETIC)])
    if y.grad != upstream:
        raise CheckFailure(ex, f"y._backward() for y = a {op} a changed y.grad to {y.grad!r}: a rule reads "
                               "out.grad and adds to its inputs; it must leave out.grad alone (micrograd's "
                               "gradients accumulate on every node).", cause_id=CHANGES_OUT_GRAD)


def _check_plain_number(ex, Value, op, data, number):
    """Value(data) op number: the number is wrapped in a Value, and the result stays connected to the Value."""
    expr = f"Value({data}) {op} {number}"
    want, slope = (data + number, 1.0) if op == "+" else (data * number, float(number))
    v = Value(data)
    out = call_learner(ex, (lambda p: p + number) if op == "+" else (lambda p: p * number), v, shown_input=expr)
    run_probes(ex, [
        Probe(f"({expr}).data", lambda: as_float(ex, getattr(out, "data", out), expr), want,
              tolerance=SAME_ARITHMETIC),
        Probe(f"out = {expr}; out.grad = 1; out._backward(); the Value's grad",
              lambda: _backward_then(ex, out, v, seed=1.0), slope,
              (Slip(0.0, "the Value must receive its slope from out's rule. Wrap the number and build the node "
                         "exactly as for two Values.", NUMBER_DISCONNECTS),), tolerance=SAME_ARITHMETIC),
    ])


def _check_op_name(ex, out, name, shown):
    """The page names each operation's ``_op``; the graph drawings label nodes with it."""
    try:  # a Remote has an _op method of its own: ask the learner's object, not the proxy
        got = Remote.__getattr__(out, "_op") if isinstance(out, Remote) else getattr(out, "_op", None)
    except AttributeError:
        got = None
    if got != name:
        raise CheckFailure(ex, f"{shown} has _op {got!r}; the page names this operation {name!r}, and the graph "
                               f"drawings label its node with it: build the output as Value(..., ..., {name!r}).",
                           cause_id=OP_NAME)


def _backward_then(ex, out, *inputs, seed=None):
    """Run out's own rule (after setting out.grad = seed, when given) and return the inputs' gradients."""
    if seed is not None:
        out.grad = seed
    out._backward()
    grads = [as_float(ex, node.grad, "an input's .grad") for node in inputs]
    return grads[0] if len(grads) == 1 else tuple(grads)


# ------------------------------------------------------------------------------------------------ topological_order

@exercise("topological_order")
def check_topological_order(topological_order) -> None:
    ex = "topological_order"
    g = RecordedGraph(beside(topological_order, reference_nodes).RefNode)

    def judge(root, shown, deep=False):
        call = call_on_deep_graph if deep else call_learner
        check_order(ex, g, call(ex, topological_order, root, shown_input=shown), root, shown, SCALAR)

    judge(g.leaf(1.0), "a single leaf")
    x = g.leaf(2.0)
    a = g.mul(x, x)
    judge(g.add(g.mul(a, x), a), "y = (x*x)*x + x*x")  # x reached along three paths, a along two

    check_shared_inputs(judge, g, g.leaf, SCALAR)
    _, end = g.chain(CHAIN_LENGTH, "tanh")
    judge(end, f"a chain of {CHAIN_LENGTH} tanh nodes", deep=True)


# ------------------------------------------------------------------------------------------------ backward

NO_SEED = causes.declare("backward/no-seed", "the output's gradient not seeded with 1 before the walk")
RESETS = causes.declare("backward/resets-gradients", "backward() resetting the other nodes' gradients instead of "
                        "letting them accumulate across calls")
EVERY_PATH_CAUSE = causes.declare("backward/follows-every-path", "a shared node's rule run once per path instead of "
                                  "once, in reverse topological order")
EARLY = causes.declare("backward/node-before-its-consumers", "a node's rule ran before every path's share of "
                       "its gradient had arrived (not a topological order)")


@exercise("backward", builds_on=("topological_order",))
def check_backward(backward) -> None:
    ex = "backward"
    kit = beside(backward, reference_nodes)
    Node = kit.carrying_backward(backward)

    # Seed 002: x = 2, a = x·x, y = a·a.
    x = Node(2.0)
    a = x * x
    y = a * a
    call_learner(ex, y.backward, shown_input="x = 2; a = x*x; y = a*a; y.backward()")
    if x.grad == 0 and a.grad == 0:
        raise CheckFailure(ex, "no gradient reached a or x: the output's gradient must be seeded with 1 (dy/dy = 1) "
                               "before walking the graph, since every rule multiplies by it.", cause_id=NO_SEED)
    if (a.grad, x.grad) != (8.0, 32.0):
        early = (a.grad, x.grad) == (8.0, 0.0) or x.grad < 32.0
        why = f"x's gradient is incomplete: {EARLY_NODE}" if early else "expected a.grad = 8 and x.grad = 32."
        raise CheckFailure(ex, f"{why}\nx = 2; a = x*x; y = a*a; y.backward(): received a.grad = {a.grad}, "
                               f"x.grad = {x.grad}.", cause_id=EARLY if early else causes.MISMATCH)
    call_learner(ex, y.backward, shown_input="a second y.backward() without clearing")
    if (a.grad, x.grad) != (16.0, 96.0):
        raise CheckFailure(ex, "after a second y.backward() without clearing, micrograd gives a.grad = 16 and "
                               f"x.grad = 96 (every node accumulates); received {a.grad} and {x.grad}. backward() "
                               "should set only the output's grad to 1 and leave the others to accumulate with +=.",
                           cause_id=RESETS)

    # Two paths from a to the output: a walk that follows paths runs a's rule twice and doubles x's gradient.
    x = Node(0.5)
    a = x.tanh()
    y = a * Node(-2.0) + a * Node(-3.0)  # negative gradients too: nothing may be skipped for its sign
    call_learner(ex, y.backward, shown_input="a = tanh(x); y = -2a - 3a; y.backward()")
    if a.backward_calls > 1:
        raise CheckFailure(ex, f"a node's _backward ran {a.backward_calls} times in one pass (a = tanh(x) feeds two "
                               f"products): {EVERY_PATH}", cause_id=EVERY_PATH_CAUSE)
    expected = -5 * (1 - math.tanh(0.5) ** 2)
    one_product = f"x.grad is the share of one product only: {EARLY_NODE}"
    run_probes(ex, [Probe("a = tanh(x); y = -2a - 3a at x = 0.5: x.grad", lambda: as_float(ex, x.grad, "x.grad"),
                          expected, slips=(Slip(expected * 2 / 5, one_product, EARLY),
                                           Slip(expected * 3 / 5, one_product, EARLY)))])

    # Paths of different lengths: b reaches y directly and through tanh. An order that is not topological (breadth
    # first from y, say) runs b's rule before the longer path's share has arrived.
    x = Node(0.5)
    b = x * x
    y = Node(3.0) * b.tanh() + b
    call_learner(ex, y.backward, shown_input="b = x*x; y = 3*tanh(b) + b; y.backward()")
    expected = (3 * (1 - math.tanh(0.25) ** 2) + 1) * 2 * 0.5
    run_probes(ex, [Probe("b = x*x; y = 3*tanh(b) + b at x = 0.5: x.grad", lambda: as_float(ex, x.grad, "x.grad"),
                          expected, slips=(Slip(2 * 0.5, f"only b's direct path to y reached x: {EARLY_NODE}",
                                                EARLY),))])

    # Deep graph: no recursion anywhere in the pass.
    chain_x, end = RecordedGraph(Node).chain(CHAIN_LENGTH, "tanh")
    call_on_deep_graph(ex, end.backward, shown_input=f"a chain of {CHAIN_LENGTH} tanh nodes")
    expected = 1.0
    value = 0.5
    for _ in range(CHAIN_LENGTH):
        value = math.tanh(value)
        expected *= 1 - value ** 2
    run_probes(ex, [Probe(f"a chain of {CHAIN_LENGTH} tanh nodes: x.grad", lambda: as_float(ex, chain_x.grad, "x.grad"),
                          expected)])
    _check_drawn_graph(ex, Node, case_rng(ex))


def _check_drawn_graph(ex, Node, drawn):
    """backward() on a graph drawn from the case seed (three leaves, 6 to 12 operations +, * and tanh on any earlier
    nodes), each leaf's gradient against torch.autograd's: a backward that knows the fixed graphs does not know it."""
    leaves = [round(float(v), 3) for v in drawn.uniform(-1.5, 1.5, 3)]
    nodes = [Node(v) for v in leaves]
    mirror = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in leaves]
    lines = []
    for _ in range(int(drawn.integers(6, 13))):
        i, j = (int(k) for k in drawn.integers(len(nodes), size=2))
        op = str(drawn.choice(["+", "*", "tanh"]))
        if op == "*" and abs(float(mirror[i] * mirror[j])) > 10:
            op = "tanh"  # products of products grow like x^(2^n): keep the numbers readable
        if op == "tanh":
            nodes.append(nodes[i].tanh())
            mirror.append(torch.tanh(mirror[i]))
            lines.append(f"v{len(lines) + 3} = v{i}.tanh()")
        else:
            nodes.append(nodes[i] + nodes[j] if op == "+" else nodes[i] * nodes[j])
            mirror.append(mirror[i] + mirror[j] if op == "+" else mirror[i] * mirror[j])
            lines.append(f"v{len(lines) + 3} = v{i} {op} v{j}")
    shown = f"v0, v1, v2 = {leaves}; {'; '.join(lines)}; v{len(nodes) - 1}.backward()"
    call_learner(ex, nodes[-1].backward, shown_input=shown)
    mirror[-1].backward()
    for i, (node, twin) in enumerate(zip(nodes[:3], mirror)):
        want, got = 0.0 if twin.grad is None else float(twin.grad), as_float(ex, node.grad, f"v{i}.grad")
        if not close(got, want, AGAINST_TORCH):
            raise CheckFailure(ex, f"{shown}: v{i}.grad should be {fmt(want)} (torch.autograd), received {fmt(got)}. "
                                   "Seed the output's grad with 1, then run each node's _backward once, output first "
                                   "and every node before its inputs (reverse topological order).", input=shown)


# ------------------------------------------------------------------------------------------------ derived_operators

REFLECTED = causes.declare("derived_operators/operands-swapped", "a reflected operator (5 - v, 1 / v) computed with "
                           "its operands the other way round")
NEG_SIGN = causes.declare("derived_operators/negation-lost", "-v with the sign of v.data kept")
POWER_RULE = causes.declare("derived_operators/power-rule", "x**k's local derivative not k·x**(k-1)")
DISCONNECTED = causes.declare("derived_operators/disconnected", "an operation with a plain number not connected to "
                              "the Value it was given, so no gradient reaches it")


@exercise("derived_operators", builds_on=("value_node", "backward"))
def check_derived_operators(Value) -> None:
    ex = "derived_operators"
    def data_of(make, shown):
        return lambda: as_float(ex, getattr(make(), "data", None), f"({shown}).data")

    def slope_of(fn, x0):
        def call():
            x = Value(x0)
            fn(x).backward()
            return as_float(ex, x.grad, "x.grad")
        return call

    run_probes(ex, [Probe(f"({shown}).data", data_of(make, shown), want, slips, tolerance=SAME_ARITHMETIC)
                    for shown, make, want, *slips in [
        ("-Value(2.0)", lambda: -Value(2.0), -2.0, Slip(2.0, "-v must be -(v.data): the sign was lost.", NEG_SIGN)),
        ("5 - Value(2.0)", lambda: 5 - Value(2.0), 3.0,
         Slip(-3.0, "5 - v must be 5 - v.data = 3, not v - 5: in __rsub__, self is the right operand.", REFLECTED)),
        ("1 / Value(4.0)", lambda: 1 / Value(4.0), 0.25,
         Slip(4.0, "1 / v must be 1 / v.data = 0.25, not v / 1: in __rtruediv__, self is the right operand.",
              REFLECTED)),
        ("3 + Value(2.0)", lambda: 3 + Value(2.0), 5.0),
        ("2 * Value(2.5)", lambda: 2 * Value(2.5), 5.0),
        ("Value(7.0) - 2", lambda: Value(7.0) - 2, 5.0, Slip(-5.0, "v - 2 is v.data - 2: the operands were swapped.",
                                                             REFLECTED)),
        ("Value(3.0) / 2", lambda: Value(3.0) / 2, 1.5, Slip(2 / 3, "v / 2 is v.data / 2: the operands were swapped.",
                                                             REFLECTED)),
        ("Value(3.0) ** 2", lambda: Value(3.0) ** 2, 9.0),
    ]])

    for k in (2, 0.5, -1):
        shown = f"Value(3.0) ** {k}"
        _check_op_name(ex, call_learner(ex, lambda: Value(3.0) ** k, shown_input=shown), f"**{k}", shown)

    run_probes(ex, [Probe(f"x.grad for {shown}", slope_of(fn, x0), want, slips, tolerance=SAME_ARITHMETIC)
                    for shown, fn, x0, want, *slips in [
        ("x ** 3 at x = 2", lambda x: x ** 3, 2.0, 12.0,
         Slip(24.0, "the local derivative of x**k is k·x**(k-1) = 12: the exponent drops by one.", POWER_RULE),
         Slip(4.0, "the local derivative of x**k is k·x**(k-1) = 12: the factor k is missing.", POWER_RULE)),
        ("x ** 2 at x = 0", lambda x: x ** 2, 0.0, 0.0),
        ("5 - x at x = 2", lambda x: 5 - x, 2.0, -1.0,
         Slip(0.0, "5 - x must stay connected to x: d(5 - x)/dx = -1.", DISCONNECTED),
         Slip(1.0, "d(5 - x)/dx = -1: in __rsub__, self is the right operand, so its gradient is negated.",
              REFLECTED)),
        ("1 / x at x = 4", lambda x: 1 / x, 4.0, -1 / 16,
         Slip(0.0, "1 / x must stay connected to x: d(1/x)/dx = -1/x².", DISCONNECTED)),
        ("sum([x, x]) at x = 2", lambda x: sum([x, x]), 2.0, 2.0,
         Slip(1.0, "sum() starts from 0, so 0 + x calls __radd__: it must stay connected to x.", DISCONNECTED)),
        ("0 * x + 1 * x at x = 2", lambda x: 0 * x + 1 * x, 2.0, 1.0,
         Slip(0.0, "__rmul__ must stay connected for every number.", DISCONNECTED)),
    ]])

    @RANDOM_CASES
    @given(programs(VALUE, SHORT, ops=[op for op in VALUE.ops if op not in NONLINEAR]))
    def random_case(program):
        compare_program(ex, Value, program)

    random_case()


# ------------------------------------------------------------------------------------------------ nonlinearities

OP_NAMES = {"exp": "exp", "log": "log", "tanh": "tanh", "relu": "ReLU"}  # the page's table


EXP_INPUT = causes.declare("nonlinearities/exp-input-for-output", "x where exp's output e^x belongs")
LOG_OUTPUT = causes.declare("nonlinearities/log-derivative-is-log", "log(x) where 1/x belongs")
TANH_INPUT = causes.declare("nonlinearities/tanh-input-for-output", "1 - x² where 1 - tanh(x)² belongs")
RELU_NEGATIVE = causes.declare("nonlinearities/relu-passes-negative", "relu passing gradient where x < 0")
RELU_ZERO = causes.declare("nonlinearities/relu-passes-at-zero", "relu passing gradient at exactly 0 (>= 0)")
OVERFLOW = causes.declare("nonlinearities/tanh-overflows", "tanh through exp(2x), which overflows at large inputs")


@exercise("nonlinearities", builds_on=("value_node", "backward"))
def check_nonlinearities(Value) -> None:
    ex = "nonlinearities"
    cases = [
        ("exp", 2.0, math.exp(2.0), math.exp(2.0),
         (Slip(2.0, "exp's local derivative is its output e^x (here 7.389), not its input x.", EXP_INPUT),)),
        ("log", 2.0, math.log(2.0), 0.5,
         (Slip(math.log(2.0), "log's local derivative is 1/x, not log(x).", LOG_OUTPUT),)),
        ("tanh", 0.5, math.tanh(0.5), 1 - math.tanh(0.5) ** 2,
         (Slip(1 - 0.25, "tanh's local derivative is 1 - tanh(x)², using the output; 1 - x² uses the input.",
               TANH_INPUT),)),
        ("relu", -1.5, 0.0, 0.0,
         (Slip(1.0, "relu passes gradient only where the output is positive: at x = -1.5 it is 0.", RELU_NEGATIVE),)),
        ("relu", 2.0, 2.0, 1.0, ()),
        ("relu", 0.0, 0.0, 0.0,
         (Slip(1.0, "relu's gradient at exactly 0 is 0 (as in torch): use out.data > 0, not >= 0.", RELU_ZERO),)),
        ("log", 0.01, math.log(0.01), 100.0, ()),
        ("exp", 10.0, math.exp(10.0), math.exp(10.0), ()),
        ("tanh", 1000.0, 1.0, 0.0, ()),
        ("tanh", -1000.0, -1.0, 0.0, ()),
    ]
    overflow = "A formula through exp(2x) overflows at large inputs; math.tanh does not."
    for op, x0, want_data, want_grad, slips in cases:
        shown = f"Value({x0}).{op}()"
        made = {}

        def forward(op=op, x0=x0):
            made["x"] = Value(x0)
            made["out"] = getattr(made["x"], op)()
            return as_float(ex, getattr(made["out"], "data", None), f"{shown}.data")

        def gradient():
            made["out"].backward()
            return as_float(ex, made["x"].grad, "x.grad")

        try:
            run_probes(ex, [
                Probe(shown, forward, want_data, (Slip(np.nan, overflow, OVERFLOW),) if op == "tanh" else (),
                      tolerance=SAME_ARITHMETIC),
                Probe(f"{shown}.backward(): x.grad", gradient, want_grad, slips),
            ])
        except CheckFailure as failure:
            if isinstance(failure.cause, OverflowError):
                raise CheckFailure(ex, f"{shown} raised OverflowError. {overflow}", cause_id=OVERFLOW) from None
            raise
        _check_op_name(ex, made["out"], OP_NAMES[op], shown)

    @RANDOM_CASES
    @given(programs(VALUE, SHORT), st.booleans())
    def random_case(program, with_differences):
        compare_program(ex, Value, program, with_differences=with_differences)

    random_case()


# ------------------------------------------------------------------------------------------------ mlp

@exercise("mlp", builds_on=("nonlinearities",))
def check_mlp(MLP, Neuron) -> None:
    ex = "mlp"
    kit = beside(MLP, reference_nodes)  # the learner draws weights with random.uniform: reseeded where it runs
    for seed, (n_in, sizes) in enumerate(((3, [4, 4, 1]), (2, [3, 2]))):  # one output (a Value) and two (a list)
        count = _parameter_count(n_in, sizes)
        points = [[0.5, -1.0, 2.0][:n_in], [-2.0, 1.5, 0.3][:n_in], [1.0, 1.0, -1.0][:n_in]]
        check_architecture(ex, kit, MLP, n_in, sizes, seed, np.random.default_rng(count).uniform(-1, 1, count), points)
    check_neuron_default(ex, Neuron)
    # Then networks drawn from the case seed (1 to 4 inputs, 1 or 2 hidden layers of 2 to 4 neurons, since a layer of
    # one returns a Value, not a list, and an output layer of 1 to 4; the seed they are built after, the weights the
    # check sets, the points): an MLP that knows the two fixed ones does not know these.
    drawn = case_rng(ex)
    for _ in range(DRAWN_NETWORKS):
        hidden = [int(n) for n in drawn.integers(2, 5, size=drawn.integers(1, 3))]
        n_in, sizes = int(drawn.integers(1, 5)), hidden + [int(drawn.integers(1, 5))]
        points = [[round(float(v), 3) for v in drawn.uniform(-2, 2, n_in)] for _ in range(3)]
        check_architecture(ex, kit, MLP, n_in, sizes, int(drawn.integers(2 ** 31)),
                           drawn.uniform(-1, 1, _parameter_count(n_in, sizes)), points)


DRAWN_NETWORKS = 2


def _parameter_count(n_in, sizes):
    """Weights and a bias per neuron, over every layer."""
    return sum((a + 1) * b for a, b in zip([n_in] + sizes, sizes))


PARAMETER_COUNT = causes.declare("mlp/parameters-missing", "parameters() not listing every weight and bias once")
PARAMETERS_REBUILT = causes.declare("mlp/parameters-not-the-models", "parameters() returning new Values (or a new "
                                    "order) on each call, not the model's own")
SINGLE_IN_LIST = causes.declare("mlp/single-output-in-list", "a layer of one neuron returning a list, not the Value")
ZERO_GRAD_INCOMPLETE = causes.declare("mlp/zero-grad-incomplete", "zero_grad() leaving some gradients non-zero")
BIAS_NOT_ZERO = causes.declare("mlp/bias-not-zero", "a new neuron's bias not Value(0.0)")
WEIGHT_DRAWS = causes.declare("mlp/weights-not-random-uniform", "weights not the next random.uniform(-1, 1) draws, in "
                              "construction order")
NONLINEAR_DEFAULT = causes.declare("mlp/nonlinear-default", "Neuron(n) without `nonlinear` not applying ReLU, as "
                                   "the signature's default nonlinear=True says")


def check_architecture(ex, kit, MLP, n_in, sizes, seed, data, points):
    """MLP(n_in, sizes) built right after random.seed(seed): its parameters, then its outputs and gradients against
    torch at each of ``points`` (lists of n_in floats) with its parameters set to ``data`` (float64, one per
    parameter, in micrograd's order), then its initial parameters."""
    shown = f"MLP({n_in}, {sizes})"
    kit.seed(seed)
    model = call_learner(ex, MLP, n_in, sizes, shown_input=shown)
    params = call_learner(ex, model.parameters, shown_input=f"{shown}.parameters()")
    count = _parameter_count(n_in, sizes)
    again = call_learner(ex, model.parameters, shown_input=f"{shown}.parameters() called twice")
    if len(params) != count or len({id(p) for p in params}) != count:
        raise CheckFailure(ex, f"{shown} has {count} distinct parameters (weights and a bias per neuron); parameters() "
                               f"returned {len(params)} ({len({id(p) for p in params})} distinct).",
                           cause_id=PARAMETER_COUNT)
    if [id(p) for p in again] != [id(p) for p in params]:
        raise CheckFailure(ex, "parameters() returned different objects (or a different list) on a second call: it "
                               "must list the model's own Values, the same ones every time.",
                           cause_id=PARAMETERS_REBUILT)
    initial = np.array([as_float(ex, p.data, "a parameter's data") for p in params])
    # Judge the network with weights of our choosing, both signs everywhere: the learner's own could be picked so
    # that no ReLU ever sees a negative input (biases of 50, say), which would hide a missing ReLU.
    for p, value in zip(params, data):
        p.data = float(value)
    flat = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    for inputs in points:
        out = call_learner(ex, model, inputs, shown_input=f"model({inputs})")
        if sizes[-1] == 1 and isinstance(out, (list, tuple)):
            raise CheckFailure(ex, f"{shown}: model({inputs}) returned a {type(out).__name__} of one; a layer of one "
                                   "neuron returns that neuron's Value itself (the training loop computes with it).",
                               cause_id=SINGLE_IN_LIST)
        outs = out if isinstance(out, list) else [out]
        expected = _torch_mlp(flat, inputs, n_in, sizes)
        got = np.array([as_float(ex, o.data, "an output's data") for o in outs])
        if not close(got, expected.detach().numpy(), AGAINST_TORCH):
            raise CheckFailure(ex, f"{shown}: model({inputs}) = {fmt(got)}, but the same weights in torch give "
                                   f"{fmt(expected.detach().numpy())}. Expected: each neuron computes sum(w·x) + b, "
                                   "ReLU on every layer except the last, and parameters() lists each neuron's weights "
                                   "then its bias, layer by layer; a layer of one neuron returns a Value, else a list.")
        call_learner(ex, model.zero_grad, shown_input="model.zero_grad()")
        if any(p.grad != 0 for p in params):
            raise CheckFailure(ex, "zero_grad() must set every parameter's grad back to 0.",
                               cause_id=ZERO_GRAD_INCOMPLETE)
        loss = sum(outs[1:], outs[0])
        call_learner(ex, loss.backward, shown_input=f"sum(model({inputs})).backward()")
        (want,) = torch.autograd.grad(expected.sum(), flat)
        grads = np.array([as_float(ex, p.grad, "a parameter's grad") for p in params])
        if not close(grads, want.numpy(), AGAINST_TORCH):
            raise CheckFailure(ex, f"{shown}: parameter gradients differ from torch: expected {fmt(want.numpy())}, "
                                   f"received {fmt(grads)}")
    call_learner(ex, model.zero_grad, shown_input="model.zero_grad()")
    if not np.array_equal([p.data for p in params], data):
        raise CheckFailure(ex, "zero_grad() changed parameter values: it clears .grad only.")
    check_initial_parameters(ex, shown, initial, n_in, sizes, seed)


def check_initial_parameters(ex, shown, initial, n_in, sizes, seed):
    """The page's conventions for a new network (micrograd's): each bias Value(0.0), each weight the next
    random.uniform(-1, 1) draw, in construction order. The order of parameters() is judged before this."""
    bias = np.array([_is_bias(k, n_in, sizes) for k in range(len(initial))])
    if np.any(initial[bias] != 0.0):
        raise CheckFailure(ex, f"{shown}: right after construction every bias should be Value(0.0), as the page "
                               f"states; the biases were {fmt(initial[bias])}.", cause_id=BIAS_NOT_ZERO)
    draws = random.Random(seed)  # the sequence random.uniform gives after random.seed(seed)
    expected = np.array([draws.uniform(-1, 1) for _ in range(int(np.sum(~bias)))])
    if not close(initial[~bias], expected, SAME_ARITHMETIC):
        raise CheckFailure(ex, f"{shown} built right after random.seed({seed}): its weights should be the next draws "
                               "of random.uniform(-1, 1), one per weight in construction order (each neuron's weights, "
                               f"neuron by neuron, layer by layer). Expected {fmt(expected[:4])} first, received "
                               f"{fmt(initial[~bias][:4])}. Draw with Python's random module (not numpy's), and "
                               "nothing else from it while building.", cause_id=WEIGHT_DRAWS)


def check_neuron_default(ex, Neuron):
    """The page's signature Neuron(n_inputs, nonlinear=True): a neuron built without `nonlinear` applies ReLU."""
    shown = "Neuron(2) with weights [1, 1] and bias 0, at x = [-1, -2]"
    neuron = call_learner(ex, Neuron, 2, shown_input="Neuron(2)")
    params = call_learner(ex, neuron.parameters, shown_input="Neuron(2).parameters()")
    if len(params) != 3:
        raise CheckFailure(ex, "Neuron(2).parameters() should list its 2 weights and its bias, "
                               f"got {len(params)} values.", cause_id=PARAMETER_COUNT)
    for p, value in zip(params, (1.0, 1.0, 0.0)):
        p.data = value
    out = call_learner(ex, neuron, [-1.0, -2.0], shown_input=shown)
    got = as_float(ex, getattr(out, "data", None), "the neuron's output data")
    if got != 0.0:
        raise CheckFailure(ex, f"{shown} gave {fmt(got)}, expected 0: the page's signature is Neuron(n_inputs, "
                               "nonlinear=True), so a neuron built without `nonlinear` applies ReLU to -3.",
                           cause_id=NONLINEAR_DEFAULT)


def _is_bias(k, n_in, sizes):
    """Whether flat parameter k is a bias, given each neuron lists its weights then its bias."""
    for fan_in, width in zip([n_in] + sizes, sizes):
        block = (fan_in + 1) * width
        if k < block:
            return k % (fan_in + 1) == fan_in
        k -= block
    raise IndexError(k)


def _torch_mlp(flat, inputs, n_in, sizes):
    """The same network in torch, reading weights from the flat parameter vector in micrograd's order."""
    h, start = torch.tensor(inputs, dtype=torch.float64), 0
    for layer, (fan_in, width) in enumerate(zip([n_in] + sizes, sizes)):
        block = flat[start:start + width * (fan_in + 1)].reshape(width, fan_in + 1)
        start += width * (fan_in + 1)
        h = block[:, :fan_in] @ h + block[:, fan_in]
        h = torch.relu(h) if layer < len(sizes) - 1 else h
    return h
