"""Checks for notebook 4, "The tensor engine": recording the graph, topological_sort, backprop, leaf semantics.

The engine's contract (fixed by the notebook's given code): a ``Tensor`` holds ``.array`` (float ndarray),
``.requires_grad``, ``.grad`` (None or a Tensor), ``.recipe`` (None on leaves; else ``.inputs``, ``.backwards`` with
one backward function per input, ``.kwargs``), ``.retains_grad``, and the properties ``.is_leaf`` and ``.parents``.

``topological_sort`` and ``backprop`` are checked on graphs that a reference implementation of the operators records
(:func:`reference_class`), so a slip in the learner's operators cannot hide or fake a backprop bug; the operators
are checked with a reference backward pass (:func:`reference_gradients`); the ``engine`` check then runs random
programs on the learner's whole engine. Every gradient is compared with torch.autograd in float64.

Numbers from Handout #6, "Backprop in Practice": f = log(x) + exp(y)·z at (1, 3, 2) gives (1, 40.1711, 20.0855); w = 2, x = 3,
(w·x − 1)² gives w.grad 30 and x.grad None; x = [2, 3], y = [x0·x1, x0 + x1], seed v = [2, −1] gives [5, 3];
X = arange(6).reshape(2, 3), b = zeros(3), mean(X + b) gives 1/6 and 1/3, then sum(X + b) gives ones and 2s;
w = 2: w² then 3w gives w.grad 4 then 7, and 3 after clearing; y = a·a at a = 3 gives 6; x = 2, h = 3x retained,
loss = ½h² + zero² gives x.grad 18, h.grad 6, zero.grad 0, unused.grad None.
"""
# The checks register in course order: an exercise may build only on those registered before it.
from autograder.checks.tensor_engine import recording, ordering, backprop, predictions  # noqa: F401
