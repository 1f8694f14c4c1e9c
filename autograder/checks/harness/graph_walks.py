"""What both engines' checks share about walking a graph (notebook 2's Value, notebook 4's Tensor): the judge of a
topological order, the graphs with shared nodes it is tried on, and what a wrong walk does, each said once.

The reference walk itself is ``labtools.graph.inputs_first``; a graph's true edges come from
``autograder.checks.harness.recorded.RecordedGraph``, never from the learner's objects.
"""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, strategies as st

from autograder.checks import causes
from autograder.checks.harness.diagnostics import RANDOM_CASES, CheckFailure

EARLY_NODE = ("a node was processed before all of its consumers had contributed: its rule ran with part of its "
              "gradient, and what arrived later never reached its inputs. A walk from the end that runs each node "
              "when it is first reached does this; walk reversed(topological order), which puts every consumer "
              "before the nodes it uses.")

EVERY_PATH = ("a walk that follows every path runs a shared node once per path, counting its gradient again each "
              "time. Run each node once, in reverse topological order.")

SHARED_IS_NOT_A_CYCLE = ("a node used by several others is reached once along each path, and meeting it again is "
                         "normal: skip it if it is already finished. Only a node that is still in progress (expanded, "
                         "its inputs not all appended yet) closes a cycle; keep that set apart from the visited one.")


# The slips of a topological order, in either engine (notebook 2's topological_order, notebook 4's topological_sort).
NODE_TWICE = causes.declare("walk/node-twice", "a node reached along several paths added once per path (no visited "
                            "set)")
NODES_MISSING = causes.declare("walk/nodes-missing", "nodes reachable through the graph's edges left out of the order")
END_NOT_LAST = causes.declare("walk/end-not-last", "the end node not last: the order reversed, or not ending at it")
BEFORE_INPUTS = causes.declare("walk/node-before-its-inputs", "a node placed before one it was computed from (not a "
                               "topological order)")


@dataclass(frozen=True)
class Words:
    """How an engine's exercise names things, so one judge speaks each notebook's language."""
    node: str    # what the graph is made of
    inputs: str  # what a node was computed from
    edges: str   # the attribute that leads to them
    end: str     # the node the order is asked for
    walker: str  # what walks the order reversed


SCALAR = Words("node", "inputs", "._prev", "the root", "backward()")
TENSOR = Words("tensor", "parents", ".parents", "the end node", "backprop")


def check_order(ex: str, graph, order, end, shown: str, words: Words) -> None:
    """Judge a learner's topological order of the graph ending at ``end`` against the recorded edges of ``graph``
    (a RecordedGraph): a list of every reachable node, each once and nothing else, every node after its inputs,
    ``end`` last.

    Raises:
        CheckFailure: naming the first rule the order breaks.
    """
    n = words.node
    if not isinstance(order, list):
        raise CheckFailure(ex, f"return a list of {n}s, got {type(order).__name__} ({shown}).",
                           cause_id=causes.WRONG_TYPE)
    ids = [id(x) for x in order]
    if len(ids) != len(set(ids)):
        raise CheckFailure(ex, f"a {n} appears more than once in the order ({shown}): keep a set of visited {n}s, so "
                               "that one reached along several paths is added once.", cause_id=NODE_TWICE)
    reachable = graph.reachable(end)
    needed = {id(x) for x in reachable}
    if not needed <= set(ids):
        raise CheckFailure(ex, f"{len(needed - set(ids))} of the {len(needed)} {n}s reachable through {words.edges} "
                               f"are missing from the order ({shown}).", cause_id=NODES_MISSING)
    if set(ids) - needed:
        raise CheckFailure(ex, f"the order holds {len(set(ids) - needed)} item(s) not reachable through "
                               f"{words.edges} ({shown}): follow {words.edges} only, which leaves out plain numbers "
                               f"and {n}s that need no gradient.", cause_id=causes.MISMATCH)
    position = {id(x): i for i, x in enumerate(order)}
    if position[id(end)] != len(order) - 1:
        where = "first" if position[id(end)] == 0 else "not last"
        raise CheckFailure(ex, f"{words.end} comes {where} ({shown}): return inputs first and {words.end} last; "
                               f"{words.walker} walks the list reversed.", cause_id=END_NOT_LAST)
    for x in reachable:
        for child in graph.inputs[id(x)]:
            if position[id(child)] > position[id(x)]:
                raise CheckFailure(ex, f"a {n} comes before one of its {words.inputs} ({shown}): every {n} must come "
                                       f"after all the {n}s it was computed from.", cause_id=BEFORE_INPUTS)


def check_shared_inputs(judge, graph, leaf, words: Words, ops: str = "+*") -> None:
    """Try an order on the graphs where walks go wrong: nodes reached along many paths. ``judge(end, shown)`` raises
    CheckFailure on a wrong order of the graph ending at ``end``.

    Args:
        graph: the RecordedGraph that builds the nodes.
        leaf: makes a leaf that needs a gradient from a number.
        words: the engine's words, for naming a random graph.
        ops: what random graphs may do, a string of '+', '*' and 'n' (negation), as far as the engine offers it.
    """
    total = leaf(0.0)  # marking on push instead of on expansion gets about half of these diamonds wrong
    for i in range(20):
        d = leaf(float(i))
        total = graph.add(total, graph.add(d, graph.mul(d, leaf(2.0))))
    judge(total, "a sum of 20 diamonds d + d·k")

    layered = leaf(1.0)
    for _ in range(40):  # 2^40 paths from the end to the first leaf: a walk that follows paths never ends
        layered = graph.add(graph.mul(layered, leaf(2.0)), graph.mul(layered, leaf(3.0)))
    judge(layered, "40 stacked diamonds (2^40 paths)")

    data = graph.leaf(3.0)  # a tensor engine's data leaf (requires_grad=False); the scalar engine's plain leaf

    @RANDOM_CASES
    @given(st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(0, 10 ** 6), st.sampled_from(ops)),
                    min_size=1, max_size=25))
    def random_graph(recipe):
        nodes = [leaf(1.0), leaf(2.0), data]
        for i, j, op in recipe:
            p, q = nodes[i % len(nodes)], nodes[j % len(nodes)]
            nodes.append(graph.add(p, q) if op == "+" else graph.mul(p, q) if op == "*" else graph.neg(p))
        end = next(node for node in reversed(nodes) if graph.requires_grad[id(node)])
        judge(end, f"a random graph of {len(nodes)} {words.node}s with shared inputs")

    random_graph()
