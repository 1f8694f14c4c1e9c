"""Notebook 4, ``topological_sort``: orders of recorded graphs (shared inputs, diamonds, 2^40 paths, a chain deeper
than the recursion limit, random graphs) judged by graph_walks.check_order, and cycles refused with ValueError."""
from __future__ import annotations

from autograder.checks import causes
from autograder.checks.registry import exercise
from autograder.checks.reference import engine as reference_engine
from autograder.checks.harness.graph_walks import SHARED_IS_NOT_A_CYCLE, TENSOR, check_order, check_shared_inputs
from autograder.checks.harness.recorded import RecordedGraph
from autograder.checks.harness.diagnostics import CheckFailure, call_learner, call_on_deep_graph, quoted
from autograder.trust.remote import beside


CHAIN_LENGTH = 10_000  # deeper than Python's default recursion limit (1,000)
SHARED_AS_CYCLE = causes.declare("topological_sort/shared-node-as-cycle", "a node reached again along another path "
                                 "taken for a cycle (one visited set where an in-progress set is needed)")
CYCLE_MISSED = causes.declare("topological_sort/cycle-not-detected", "a graph with a cycle not refused with "
                              "ValueError")


# ------------------------------------------------------------------------------------------------ topological_sort

@exercise("topological_sort")
def check_topological_sort(topological_sort, Tensor) -> None:
    ex = "topological_sort"
    kit = beside(Tensor, reference_engine)
    Node = kit.reference_class(Tensor)
    g = RecordedGraph(Node, only_requiring_grad=True)

    def sort(end, shown):
        try:
            order = call_learner(ex, topological_sort, end, shown_input=shown)
        except CheckFailure as failure:
            if isinstance(failure.cause, ValueError):
                raise CheckFailure(ex, f"{failure.told}\nThat graph has no cycle: {SHARED_IS_NOT_A_CYCLE}",
                                   cause_id=SHARED_AS_CYCLE) from None
            raise
        # backprop only walks the order reversed, which a tuple serves as well as a list: the exercise accepts both
        check_order(ex, g, list(order) if isinstance(order, tuple) else order, end, shown, TENSOR)

    sort(g.leaf(1.0, requires_grad=True), "a single leaf")
    x = g.leaf(2.0, requires_grad=True)
    a = g.mul(x, x)
    sort(g.add(g.mul(a, x), g.mul(a, g.leaf(3.0))), "a = x*x; y = a*x + a*3 (x reached along three paths)")
    check_shared_inputs(sort, g, lambda value: g.leaf(value, requires_grad=True), TENSOR, ops="+*n")
    check_deep(ex, g, lambda end, shown: sort(end, shown))
    _check_cycle(ex, kit, topological_sort, Node)


def check_deep(ex, graph, run):
    """Run ``run(end, shown)`` on a chain of CHAIN_LENGTH negations; returns (leaf, end, run's result)."""
    x, end = graph.chain(CHAIN_LENGTH, "__neg__", requires_grad=True)
    shown = f"a chain of {CHAIN_LENGTH} operations"
    return x, end, call_on_deep_graph(ex, run, end, shown, shown_input=shown)


def _check_cycle(ex, kit, topological_sort, Node):
    a = Node(1.0, requires_grad=True)
    b = -a
    c = b * 2.0
    kit.make_cycle(a, b, c)  # a now depends on itself: a -> b -> c -> a
    _expect_cycle_error(ex, topological_sort, c, "a graph with a cycle a -> b -> c -> a")
    a = Node(1.0, requires_grad=True)
    b = -a
    kit.make_cycle(a, b)
    _expect_cycle_error(ex, topological_sort, (b * 2.0) + Node(1.0, requires_grad=True),
                        "a graph whose cycle a -> b -> a does not pass through the end node")


def _expect_cycle_error(ex, topological_sort, c, shown):
    try:
        call_learner(ex, topological_sort, c, shown_input=shown)
    except CheckFailure as failure:
        cause = failure.cause
        if isinstance(cause, ValueError):
            return
        if isinstance(cause, RecursionError):
            raise CheckFailure(ex, f"RecursionError on {shown}: "
                                   "detect the cycle and raise ValueError instead.", cause_id=CYCLE_MISSED) from None
        if cause is not None:
            raise CheckFailure(ex, f"on {shown} your code raised {getattr(cause, 'type_name', type(cause).__name__)}: "
                                   f"{quoted(cause)}. Raise a ValueError that says the graph has a cycle, as the exercise "
                                   "asks.", cause_id=CYCLE_MISSED) from None
        raise
    raise CheckFailure(ex, f"{shown} returned an order, but none exists: a tensor met again while its own parents are "
                           "still being visited closes a cycle. Raise ValueError.", cause_id=CYCLE_MISSED)
