"""Reference graphs whose edges the check records itself, so that judging an order never trusts the worker.

Under trusted grading the reference node classes live in the learner's process (``autograder.trust.remote.beside``),
where learner code can change them; so a check builds each graph one operation at a time from here and keeps its
own record of every node's inputs. A topological order is then judged against that record: the worker's objects
are only what the learner's code walks.
"""
from __future__ import annotations

from autograder.trust.remote import call_method, repeat
from labtools.graph import inputs_first


class RecordedGraph:
    """Builds nodes of ``Node`` (local or remote) and records, for each, the inputs that count as graph edges.

    Args:
        Node: the reference node class.
        only_requiring_grad: edges lead only to inputs that require grad (the tensor engine's ``.parents``);
            otherwise to every node input (the scalar engine's ``_prev``).
    """

    def __init__(self, Node, only_requiring_grad: bool = False):
        self.Node, self.only_requiring_grad = Node, only_requiring_grad
        self.inputs: dict[int, list] = {}     # id(node) -> the nodes it was computed from (edges)
        self.requires_grad: dict[int, bool] = {}
        self.nodes: list = []                 # every node, kept alive so that ids stay unique

    def _record(self, out, operands, requires_grad: bool):
        nodes = [x for x in operands if id(x) in self.inputs]
        self.inputs[id(out)] = [x for x in nodes if self.requires_grad[id(x)] or not self.only_requiring_grad]
        self.requires_grad[id(out)] = requires_grad
        self.nodes.append(out)
        return out

    def leaf(self, value, **kwargs):
        """Node(value, **kwargs); a tensor leaf requires grad only when asked to, as in torch."""
        return self._record(self.Node(value, **kwargs), [], kwargs.get("requires_grad", not self.only_requiring_grad))

    def _result(self, out, *operands):
        return self._record(out, operands, any(self.requires_grad.get(id(x), False) for x in operands))

    def add(self, a, b):
        return self._result(a + b, a, b)

    def mul(self, a, b):
        return self._result(a * b, a, b)

    def neg(self, a):
        return self._result(-a, a)

    def method(self, a, name: str):
        """a.name(), e.g. a.tanh(), in one request."""
        return self._result(call_method(a, name), a)

    def chain(self, length: int, method: str, start: float = 0.5, **leaf_kwargs):
        """x -> x.method() -> x.method().method() ...: ``length`` operations (e.g. "tanh", "__neg__").

        Built in one request, but recorded link by link here, as if built one operation at a time.
        Returns (x, end).
        """
        x = end = self.leaf(start, **leaf_kwargs)
        for out in repeat(x, method, length):
            end = self._result(out, end)
        return x, end

    def reachable(self, root) -> list:
        """Every node reachable from root along recorded edges, inputs first, root last."""
        return inputs_first(root, lambda node: self.inputs.get(id(node), []))
