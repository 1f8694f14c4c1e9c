"""What both engines' checks share about walking a graph (notebook 2's Value, notebook 4's Tensor): the judge of a
topological order, and what a wrong walk does, each said once.

The reference walk itself is ``labtools.graph.inputs_first``; a graph's true edges come from
``autograder.checks.recorded.RecordedGraph``, never from the learner's objects.
"""
from __future__ import annotations

from dataclasses import dataclass

from autograder.diagnostics import CheckFailure

EARLY_NODE = ("a node was processed before all of its consumers had contributed: its rule ran with part of its "
              "gradient, and what arrived later never reached its inputs. A walk from the end that runs each node "
              "when it is first reached does this; walk reversed(topological order), which puts every consumer "
              "before the nodes it uses.")

EVERY_PATH = ("a walk that follows every path runs a shared node once per path, counting its gradient again each "
              "time. Run each node once, in reverse topological order.")

SHARED_IS_NOT_A_CYCLE = ("a node used by several others is reached once along each path, and meeting it again is "
                         "normal: skip it if it is already finished. Only a node that is still in progress (expanded, "
                         "its inputs not all appended yet) closes a cycle; keep that set apart from the visited one.")


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
        raise CheckFailure(ex, f"return a list of {n}s, got {type(order).__name__} ({shown}).")
    ids = [id(x) for x in order]
    if len(ids) != len(set(ids)):
        raise CheckFailure(ex, f"a {n} appears more than once in the order ({shown}): keep a set of visited {n}s, so "
                               "that one reached along several paths is added once.")
    reachable = graph.reachable(end)
    needed = {id(x) for x in reachable}
    if not needed <= set(ids):
        raise CheckFailure(ex, f"{len(needed - set(ids))} of the {len(needed)} {n}s reachable through {words.edges} "
                               f"are missing from the order ({shown}).")
    if set(ids) - needed:
        raise CheckFailure(ex, f"the order holds {len(set(ids) - needed)} item(s) not reachable through "
                               f"{words.edges} ({shown}): follow {words.edges} only, which leaves out plain numbers "
                               f"and {n}s that need no gradient.")
    position = {id(x): i for i, x in enumerate(order)}
    if position[id(end)] != len(order) - 1:
        where = "first" if position[id(end)] == 0 else "not last"
        raise CheckFailure(ex, f"{words.end} comes {where} ({shown}): return inputs first and {words.end} last; "
                               f"{words.walker} walks the list reversed.")
    for x in reachable:
        for child in graph.inputs[id(x)]:
            if position[id(child)] > position[id(x)]:
                raise CheckFailure(ex, f"a {n} comes before one of its {words.inputs} ({shown}): every {n} must come "
                                       f"after all the {n}s it was computed from.")
