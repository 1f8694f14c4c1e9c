"""Notebook 4, ``backprop`` and ``jacobian``: the backward pass probed for each known mistake (seed, shared nodes,
leaf semantics, explicit seeds, accumulation, walks), then random programs compared with torch.autograd."""
from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, strategies as st

from autograder.checks import causes
from autograder.checks.registry import exercise
from autograder.checks.reference import engine as reference_engine
from autograder.checks.harness.graph_walks import EARLY_NODE, EVERY_PATH
from autograder.checks.harness.random_programs import TENSOR, programs, torch_run
from autograder.checks.harness.recorded import RecordedGraph
from autograder.checks.tensor_engine.ordering import CHAIN_LENGTH, check_deep
from autograder.checks.tensor_engine.programs import GRAD_ON_NON_LEAF, compare_leaf_grads, grad_array, run_both
from autograder.checks.harness.diagnostics import (RANDOM_CASES, CheckFailure, Probe, Slip, call_learner, close, described,
                                                   fmt, quoted,
                                                   run_probes, wrong_value)
from autograder.trust.remote import beside


SCALAR_ONLY = "grad can be implicitly created only for scalar outputs"  # torch's RuntimeError texts
NO_GRAD_FN = "element 0 of tensors does not require grad and does not have a grad_fn"


# ------------------------------------------------------------------------------------------------ backprop

@exercise("backprop", builds_on=("topological_sort",))
def check_backprop(backprop, Tensor) -> None:
    ex = "backprop"
    kit = beside(Tensor, reference_engine)
    Node = kit.reference_class(Tensor)

    def run(end, end_grad=None, shown=""):
        return call_learner(ex, backprop, end, end_grad, shown_input=shown)

    def grad(node, what):
        if node.grad is None:
            return None
        return grad_array(ex, Tensor, node.grad, what)

    _probe_seed_numbers(ex, run, grad, Node)
    _probe_shared_and_order(ex, run, grad, Node)
    _probe_data_leaf(ex, run, grad, Node)
    _probe_leaf_semantics(ex, run, grad, Node)
    _probe_explicit_seeds(ex, run, grad, Node)
    _probe_accumulation(ex, run, grad, Node)
    _probe_paths(ex, run, grad, Node)
    _probe_pending_and_end(ex, run, grad, Node)
    _probe_nothing_requires_grad(ex, run, Node)
    x, end, _ = check_deep(ex, RecordedGraph(Node, only_requiring_grad=True), lambda end, shown: run(end, None, shown))
    if grad(x, "x.grad") is None or grad(x, "x.grad") != 1.0:  # an even number of negations
        raise CheckFailure(ex, f"a chain of {CHAIN_LENGTH} negations: expected x.grad = 1, received {described(x.grad)}.")

    @RANDOM_CASES
    @given(programs(TENSOR, max_steps=40))
    def random_case(program):
        leaves = [Node(v.copy(), requires_grad=rg) for v, rg in program.leaves]
        values = program.replay(leaves)
        run(values[-1], None if program.seed is None else Node(program.seed.copy()), program.listing)
        compare_leaf_grads(ex, Tensor, leaves, values, torch_run(program)[1], program.listing)

    random_case()


def _probe_seed_numbers(ex, run, grad, Node):
    x, y, z = (Node(np.array([v]), requires_grad=True) for v in (1.0, 3.0, 2.0))
    shown = "f = x.log() + y.exp() * z at x, y, z = [1.], [3.], [2.]"
    run(x.log() + y.exp() * z, None, shown)
    got = [grad(t, name + ".grad") for t, name in ((x, "x"), (y, "y"), (z, "z"))]
    if all(g is None or not np.any(g) for g in got):
        raise CheckFailure(ex, f"{shown}: no gradient reached the leaves. Seed the end node's gradient with ones "
                               "(df/df = 1), since every backward function multiplies by it, and walk "
                               "reversed(topological_sort(end_node)), so the end node is processed first.",
                           cause_id=NO_SEED)
    want = [np.array([1.0]), np.array([3 * 0 + 2 * math.exp(3.0)]), np.array([math.exp(3.0)])]
    if not all(close(g, w) for g, w in zip(got, want)):
        raise CheckFailure(ex, f"{shown}: expected x.grad, y.grad, z.grad = [1.], [40.1711], [20.0855] (torch agrees), "
                               f"received {', '.join(fmt(g) for g in got)}.")


def _probe_data_leaf(ex, run, grad, Node):
    w, data = Node(np.array([2.0]), requires_grad=True), Node(np.array([3.0]))
    d = w * data - 1.0
    shown = "w = [2.] (requires grad), x = [3.] (data), loss = (w*x - 1) * (w*x - 1)"
    run(d * d, None, shown)
    if grad(data, "x.grad") is not None:
        raise CheckFailure(ex, f"{shown}: x has requires_grad=False, so x.grad must stay None (torch: data gets no "
                               "gradient). Store gradients only on leaves that require grad.", cause_id=causes.MISMATCH)
    if not close(grad(w, "w.grad"), [30.0]):
        raise CheckFailure(ex, f"{shown}: expected w.grad = [30.] (2(wx - 1)x = 2·5·3), received {described(w.grad)}.")


def _grad_after(run, grad, build, shown):
    """Build a fresh graph, backprop from its end, and read the leaf's gradient (None when none arrived)."""
    leaf, end = build()
    run(end, None, shown)
    return grad(leaf, "the leaf's .grad")


OVERWRITES = causes.declare("backprop/overwrites-instead-of-accumulating", "a second gradient arriving at a node "
                            "replaced the first instead of adding to it")
EARLY = causes.declare("backprop/node-before-its-consumers", "a node's backward function ran before every consumer's "
                       "share had arrived (not a topological order)")
IGNORES_SEED = causes.declare("backprop/ignores-end-grad", "end_grad, the seed, ignored: the walk started from ones")
SEED_TWICE = causes.declare("backprop/end-grad-twice", "end_grad, the seed, applied twice")
NO_SEED = causes.declare("backprop/no-seed", "the end node's gradient not seeded with ones, so nothing reaches the "
                         "leaves")
ONES_FOR_NON_SCALAR = causes.declare("backprop/seeds-non-scalar-with-ones", "a non-scalar output without end_grad "
                                     "seeded with ones instead of refused with RuntimeError")
SEED_SHAPE = causes.declare("backprop/end-grad-shape-unchecked", "an end_grad of another shape than the end node's "
                            "accepted (broadcast or reshaped) instead of refused with RuntimeError")
RESETS_LEAF = causes.declare("backprop/resets-leaf-grad", "each call replacing a leaf's .grad instead of adding to "
                             "it, as torch does across calls")
IN_PLACE = causes.declare("backprop/accumulates-in-place", "gradients added with += into an array that another "
                          "gradient or end_grad shares")
END_LEAF = causes.declare("backprop/end-leaf-not-seeded", "backprop from a leaf not storing end_grad in its .grad")
NOTHING_REQUIRES_GRAD = causes.declare("backprop/differentiates-without-grad", "a graph where nothing requires grad "
                                       "differentiated quietly instead of refused with RuntimeError")


def _probe_shared_and_order(ex, run, grad, Node):
    def square():
        a = Node(3.0, requires_grad=True)
        return a, a * a

    def reused():
        x = Node(2.0, requires_grad=True)
        a = x * x
        return x, a + a * 3.0

    overwritten = ("a is both inputs of the multiply, so two gradients arrive at it: add them (pending = pending + "
                   "contribution, a new array), do not let the second overwrite the first.")
    early = f"a feeds y and a * 3, and {EARLY_NODE}"
    run_probes(ex, [
        Probe("a = 3; y = a * a; a.grad", lambda: _grad_after(run, grad, square, "a = 3; y = a * a"), 6.0,
              slips=(Slip(3.0, overwritten, OVERWRITES),)),
        Probe("x = 2; a = x * x; y = a + a * 3; x.grad",
              lambda: _grad_after(run, grad, reused, "x = 2; a = x * x; y = a + a * 3"), 16.0,
              slips=(Slip(4.0, early, EARLY), Slip(12.0, early, EARLY))),  # a's rule ran after one of its two
    ])


def _probe_leaf_semantics(ex, run, grad, Node):
    x, unused, zero = (Node(v, requires_grad=True) for v in (2.0, 7.0, 0.0))
    h = 3.0 * x
    h.retain_grad()
    half = 0.5 * h
    shown = "x = 2; h = 3 * x; h.retain_grad(); loss = 0.5 * h * h + zero * zero"
    run(half * h + zero * zero, None, shown)
    expected = {"x": (x, 18.0), "h": (h, 6.0), "zero": (zero, 0.0)}
    for name, (node, value) in expected.items():
        got = grad(node, f"{name}.grad")
        if got is None:
            why = {"h": "h.retain_grad() was called, so h keeps its gradient like a leaf (check node.retains_grad)",
                   "zero": "zero took part in the loss, so it gets a gradient; that it is 0 does not make it None",
                   "x": "x is a leaf that requires grad"}[name]
            raise CheckFailure(ex, f"{shown}: {name}.grad is None; {why}. Expected {value}.",
                               cause_id=causes.MISMATCH)
        if not close(got, value):
            raise CheckFailure(ex, f"{shown}: expected {name}.grad = {value}, received {fmt(got)}.")
    if unused.grad is not None:
        raise CheckFailure(ex, f"{shown}: unused.grad should stay None (it took no part), received {unused.grad!r}.",
                           cause_id=causes.MISMATCH)
    if half.grad is not None:
        raise CheckFailure(ex, f"{shown}: 0.5 * h is not a leaf and did not retain_grad(), yet its .grad was set. Like "
                               "torch, keep gradients on leaves only (and on non-leaves that asked to retain them).",
                           cause_id=GRAD_ON_NON_LEAF)


def _probe_explicit_seeds(ex, run, grad, Node):
    x = Node(np.array([2.0, 3.0]), requires_grad=True)
    y = x[0] * x[1] * Node(np.array([1.0, 0.0])) + (x[0] + x[1]) * Node(np.array([0.0, 1.0]))
    shown = "x = [2., 3.]; y = [x0·x1, x0 + x1]; backprop(y)"
    try:
        run(y, None, shown)
    except CheckFailure as failure:
        if not isinstance(failure.cause, RuntimeError):
            raise CheckFailure(ex, f"{shown} should raise RuntimeError('{SCALAR_ONLY}'), as torch does; your code "
                                   f"raised {type(failure.cause).__name__}: {quoted(failure.cause)}",
                               cause_id=ONES_FOR_NON_SCALAR) from None
    else:
        raise CheckFailure(ex, f"{shown} should raise RuntimeError('{SCALAR_ONLY}'), as torch does: without end_grad, "
                               "the seed 1 only makes sense for a one-element output. Seeding with ones silently "
                               "differentiates y.sum() instead.", cause_id=ONES_FOR_NON_SCALAR)
    shown = "x = [2., 3.]; y = [x0·x1, x0 + x1]; backprop(y, end_grad=Tensor([2., -1.]))"
    x.grad = None
    run(y, Node(np.array([2.0, -1.0])), shown)
    got = grad(x, "x.grad")
    slips = (Slip(np.array([4.0, 3.0]), "end_grad was ignored: this is the gradient for the seed [1, 1]. Start the "
                                        "walk from end_grad.", IGNORES_SEED),
             Slip(np.array([13.0, 9.0]), "end_grad was applied twice (the gradient for the seed [4, 1] = v·v): seed "
                                         "the end node with end_grad once and let the walk carry it.", SEED_TWICE))
    if not close(got, np.array([5.0, 3.0])):
        raise wrong_value(ex, shown, np.array([5.0, 3.0]), got, slips,
                          said="expected x.grad (Jᵀv with J = [[3, 2], [1, 1]])")

    a = Node(3.0, requires_grad=True)
    run(a * a, Node(2.0), "a = 3; backprop(a * a, end_grad=Tensor(2.))")
    if not close(grad(a, "a.grad"), 12.0):
        raise CheckFailure(ex, f"a = 3; backprop(a * a, end_grad=Tensor(2.)): expected a.grad = 12 (2 · 2a), "
                               f"received {fmt(grad(a, 'a.grad'))}. A scalar output with an explicit end_grad uses it.",
                           cause_id=IGNORES_SEED if close(grad(a, "a.grad"), 6.0) else causes.MISMATCH)
    for seed in (np.array(1.0), np.array([[1.0, 1.0]])):  # one numpy would broadcast, one of the right size
        shown = f"backprop(y of shape (2,), end_grad of shape {seed.shape})"
        try:
            run(Node(np.array([1.0, 2.0]), requires_grad=True) * 2.0, Node(seed), shown)
        except CheckFailure as failure:
            if failure.cause is None:
                raise
            if not isinstance(failure.cause, RuntimeError) or isinstance(failure.cause, RecursionError):
                raise CheckFailure(ex, f"{shown} raised "
                                       f"{getattr(failure.cause, 'type_name', type(failure.cause).__name__)}: "
                                       f"{quoted(failure.cause)}; raise RuntimeError, as the exercise asks and torch does "
                                       "('Mismatch in shape').", cause_id=SEED_SHAPE) from None
        else:
            raise CheckFailure(ex, f"{shown} should raise (torch: RuntimeError 'Mismatch in shape'): end_grad must "
                                   "have exactly the end node's shape; numpy would broadcast or reshape it silently.",
                               cause_id=SEED_SHAPE)


def _probe_accumulation(ex, run, grad, Node):
    w = Node(2.0, requires_grad=True)
    run(w * w, None, "w = 2; backprop(w * w)")
    first = grad(w, "w.grad")
    run(3.0 * w, None, "then backprop(3 * w) without clearing")
    second = grad(w, "w.grad")
    if close(first, 4.0) and close(second, 3.0):
        raise CheckFailure(ex, "w = 2: backprop(w * w) then backprop(3 * w) should leave w.grad = 4 + 3 = 7, as torch "
                               "does (which is why training loops call zero_grad()); the second call overwrote "
                               "it with 3.", cause_id=RESETS_LEAF)
    if not (close(first, 4.0) and close(second, 7.0)):
        raise CheckFailure(ex, f"w = 2: backprop(w * w) then backprop(3 * w): expected w.grad 4 then 7, received "
                               f"{fmt(first)} then {fmt(second)}.")
    w.grad = None
    run(3.0 * w, None, "w.grad = None; backprop(3 * w)")
    if not close(grad(w, "w.grad"), 3.0):
        raise CheckFailure(ex, f"after w.grad = None, backprop(3 * w) should give w.grad = 3, received {described(w.grad)}.")

    a, b = Node(np.array([1.0, 2.0]), requires_grad=True), Node(np.array([3.0, 4.0]), requires_grad=True)
    seed = Node(np.array([1.0, -1.0]))
    run(a + b, seed, "backprop(a + b, end_grad=Tensor([1., -1.]))")
    run((a * 3.0).sum(), None, "then backprop((a * 3).sum())")
    if not np.array_equal(seed.array, [1.0, -1.0]) or not close(grad(b, "b.grad"), np.array([1.0, -1.0])):
        raise CheckFailure(ex, "after backprop(a + b, end_grad=Tensor([1., -1.])) and backprop((a * 3).sum()), b.grad "
                               f"or end_grad changed (b.grad = {described(b.grad)}, end_grad = {described(seed)}). "
                               "add_back passes its gradient through, so a.grad, b.grad and end_grad can share one "
                               "array: accumulate with a new array (old + new), never in place (+= on an array).",
                           cause_id=IN_PLACE)
    if not close(grad(a, "a.grad"), np.array([4.0, 2.0])):
        raise CheckFailure(ex, f"after backprop(a + b, end_grad=Tensor([1., -1.])) and backprop((a * 3).sum()), "
                               f"expected a.grad = [4., 2.], received {described(a.grad)}.")


def _probe_pending_and_end(ex, run, grad, Node):
    x = Node(1.0, requires_grad=True)
    p = 3.0 * x
    shown = "x = 1; p = 3x; y = (x + p) + 2p"
    run((x + p) + p * 2.0, None, shown)
    if not close(grad(x, "x.grad"), 10.0):
        raise CheckFailure(ex, f"{shown}: expected x.grad = 10, received {fmt(grad(x, 'x.grad'))}. add_back passes its "
                               "array through, so two pending gradients can be one array: add them into a new array "
                               "(pending = pending + contribution), never with += in place.", cause_id=IN_PLACE)
    w = Node(np.array([2.0, 3.0]), requires_grad=True)
    run(w, Node(np.array([1.0, -1.0])), "backprop(w, end_grad=Tensor([1., -1.])) on a leaf w")
    if not close(grad(w, "w.grad"), np.array([1.0, -1.0])):
        raise CheckFailure(ex, "backprop on a leaf that requires grad should store end_grad in its .grad (torch: "
                               f"w.backward(v) gives w.grad = v); received {described(w.grad)}.", cause_id=END_LEAF)
    h = Node(2.0, requires_grad=True) * 3.0
    h.retain_grad()
    run(h * h, None, "h = 3w; h.retain_grad(); backprop(h * h)")
    run(2.0 * h, None, "then backprop(2 * h)")
    run(h, None, "then backprop(h)")
    if not close(grad(h, "h.grad"), 12.0 + 2.0 + 1.0):
        raise CheckFailure(ex, "a retained non-leaf accumulates like a leaf, and the end node itself gets its seed: "
                               "h = 6 with retain_grad(), backprop(h * h), backprop(2 * h), backprop(h) gives h.grad = "
                               f"12 + 2 + 1 = 15 in torch; received {described(h.grad)}.", cause_id=causes.MISMATCH)


def _probe_nothing_requires_grad(ex, run, Node):
    """torch refuses to differentiate an output that does not require grad; a silent return hides a forgotten
    requires_grad=True."""
    for end, shown in ((Node(np.array([2.0])) * 3.0, "x = [2.] (data); backprop(3 * x)"),
                       (Node(np.array([2.0])), "backprop(x) on a data leaf x = [2.]")):
        try:
            run(end, None, shown)
        except CheckFailure as failure:
            if isinstance(failure.cause, RuntimeError) and not isinstance(failure.cause, RecursionError):
                continue
            raise CheckFailure(ex, f"{shown} should raise RuntimeError('{NO_GRAD_FN}'), as torch does; your code "
                                   f"raised {type(failure.cause).__name__}: {quoted(failure.cause)}",
                               cause_id=NOTHING_REQUIRES_GRAD) from None
        raise CheckFailure(ex, f"{shown} returned quietly, but nothing in that graph requires grad, so there is "
                               f"nothing to differentiate: raise RuntimeError('{NO_GRAD_FN}'), as torch does, so a "
                               "forgotten requires_grad=True is noticed.", cause_id=NOTHING_REQUIRES_GRAD)


def _probe_paths(ex, run, grad, Node):
    x = Node(0.5, requires_grad=True)
    a = x.exp()
    run(a * -2.0 + a * -3.0, None, "a = x.exp(); y = -2a - 3a")
    if a.backward_calls > 1:
        raise CheckFailure(ex, f"a's backward function ran {a.backward_calls} times in one pass (a = x.exp() feeds two "
                               f"products): {EVERY_PATH}", cause_id=causes.MISMATCH)
    share_only = f"x.grad is the share of one product only: {EARLY_NODE}"  # a ran after one of its two consumers
    run_probes(ex, [Probe("a = x.exp(); y = -2a - 3a at x = 0.5; x.grad", lambda: grad(x, "x.grad"),
                          -5 * math.exp(0.5),
                          slips=tuple(Slip(-share * math.exp(0.5), share_only, EARLY) for share in (2, 3)))])


# ------------------------------------------------------------------------------------------------ jacobian

# (shown, f(x, constant) with torch's tensor API, x): constant() makes a data tensor of the engine under test; x is
# the worked point, and its length the function's number of inputs at random points.
JACOBIAN_CASES = [
    ("f(x) = [x0·x1, x0 + x1]",
     lambda x, c: x[0] * x[1] * c([1.0, 0.0]) + (x[0] + x[1]) * c([0.0, 1.0]), [2.0, 3.0]),
    ("f(x) = (x·x)[[0, 2]] - exp(x1)", lambda x, c: (x * x)[[0, 2]] - x[1].exp(), [0.5, -1.0, 2.0]),
    ("f(x)_j = x_j · sum(x)", lambda x, c: (x.reshape((3, 1)) * x).sum(dim=0), [1.0, 2.0, -0.5]),
    ("f(x) = [sum(x·x)]", lambda x, c: (x * x).sum().reshape((1,)), [1.0, -2.0, 3.0, 0.5]),
    ("f(x) = relu(W @ x) / 2",
     lambda x, c: (c([[1.0, -2.0, 0.5], [0.3, 1.0, -1.0]]) @ x).relu() / 2.0, [1.0, 0.5, -1.0]),
]


FORWARD_MODE = causes.declare("jacobian/one-pass-per-input", "f evaluated once per input (forward mode, or finite "
                              "differences) where reverse mode needs one pass per output")
TRANSPOSED = causes.declare("jacobian/transposed", "the Jacobian's transpose: one row per input instead of per output")
NOT_CLEARED = causes.declare("jacobian/grad-not-cleared", "x.grad not cleared between passes, so each row holds the "
                             "rows before it")


@exercise("jacobian", builds_on=("operators", "backprop"))
def check_jacobian(jacobian, Tensor) -> None:
    """``jacobian`` against torch on the worked functions, at their stated points then at random ones, then random
    programs through the learner's whole engine (operators, apply_op and backprop, reached through Tensor.backward)."""
    ex = "jacobian"
    calls = []

    def sum_of_squares(t):
        calls.append(1)
        return (t * t).sum().reshape((1,))

    got = call_learner(ex, jacobian, sum_of_squares, np.linspace(-1, 1, 50), shown_input="f(x) = [sum(x·x)], 50 inputs")
    if len(calls) > 2:
        raise CheckFailure(ex, f"jacobian called f {len(calls)} times for an f with 50 inputs and 1 output: reverse "
                               "mode needs one pass per output (seed e_i), not one evaluation per input (that is "
                               "forward mode, or finite differences).", cause_id=FORWARD_MODE)
    if not isinstance(got, np.ndarray) or got.dtype != np.float64:
        raise CheckFailure(ex, f"jacobian should return a float64 ndarray, got {type(got).__name__} "
                               f"{getattr(got, 'dtype', '')}.",
                           cause_id=causes.WRONG_DTYPE if isinstance(got, np.ndarray) else causes.WRONG_TYPE)
    for shown, f, x in JACOBIAN_CASES:
        _judge_jacobian(ex, jacobian, Tensor, f"{shown} at x = {fmt(np.array(x))}", f, np.array(x))

    @RANDOM_CASES
    @given(st.sampled_from(JACOBIAN_CASES), st.integers(0, 2 ** 16))
    def random_case(case, seed):
        shown, f, x = case
        x = np.random.default_rng(seed).uniform(-2, 2, size=len(x))
        _judge_jacobian(ex, jacobian, Tensor, f"{shown} at x = {fmt(x)}", f, x)

    random_case()
    _check_whole_engine(ex, Tensor)


def _judge_jacobian(ex, jacobian, Tensor, shown, f, x):
    """The learner's ``jacobian(f, x)`` against torch's, for one of JACOBIAN_CASES' functions ``f`` at ``x`` (a
    float64 vector of its length); ``shown`` names both in messages.

    Raises:
        CheckFailure: not an array, the transpose of the Jacobian, rows accumulated across passes, or wrong values.
    """
    want = torch.autograd.functional.jacobian(lambda t: f(t, lambda v: torch.tensor(v, dtype=torch.float64)),
                                              torch.tensor(x, dtype=torch.float64)).numpy()
    got = call_learner(ex, jacobian, lambda t: f(t, Tensor), x.copy(), shown_input=shown)
    got = np.asarray(got, dtype=np.float64) if isinstance(got, (np.ndarray, list)) else got
    if not isinstance(got, np.ndarray):
        raise CheckFailure(ex, f"{shown}: return an ndarray of shape (m, n), got {type(got).__name__}.",
                           cause_id=causes.WRONG_TYPE)
    if close(got, want):
        return
    if close(got.T, want):
        raise CheckFailure(ex, f"{shown}: rows and columns are swapped. Expected shape {want.shape}, one row per "
                               "output: row i is the gradient of output i, from the pass seeded with e_i.",
                           cause_id=TRANSPOSED)
    if close(got, np.cumsum(want, axis=0)):
        raise CheckFailure(ex, f"{shown}: each row is the sum of all rows so far: x.grad accumulates across "
                               "passes, so clear it (x.grad = None) before each one.", cause_id=NOT_CLEARED)
    raise CheckFailure(ex, f"{shown}: expected\n{fmt(want)}\nreceived\n{fmt(got)}")


def _check_whole_engine(ex, Tensor):
    whole = "your engine as a whole (operators, apply_op and backprop together)"
    X = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    b = Tensor(np.zeros(3), requires_grad=True)
    call_learner(ex, lambda: (X + b).mean().backward(), shown_input="(X + b).mean().backward()")
    _expect_grads(ex, Tensor, [("X", X, np.full((2, 3), 1 / 6)), ("b", b, np.full(3, 1 / 3))],
                  f"{whole}, X = arange(6).reshape(2, 3), b = zeros(3): (X + b).mean().backward()",
                  "the mean has six inputs, so each X element gets 1/6; b is broadcast over 2 rows, so 2/6 = 1/3.")
    X.grad = b.grad = None
    call_learner(ex, lambda: (X + b).sum().backward(), shown_input="(X + b).sum().backward()")
    _expect_grads(ex, Tensor, [("X", X, np.ones((2, 3))), ("b", b, np.full(3, 2.0))],
                  f"{whole}, after clearing: (X + b).sum().backward()",
                  "a sum passes 1 to each X element; b collects 2 rows.")

    @RANDOM_CASES
    @given(programs(TENSOR, max_steps=40))
    def random_case(program):
        leaves, values, want_out, want_grads = run_both(ex, Tensor, program)
        if not close(values[-1].array, want_out):
            raise CheckFailure(ex, f"{whole} computes a different result from torch for the program\n"
                                   f"  {program.listing}", input=program.listing)
        seed = None if program.seed is None else Tensor(program.seed.copy())
        call_learner(ex, values[-1].backward, seed, shown_input=program.listing)
        try:
            compare_leaf_grads(ex, Tensor, leaves, values, want_grads, program.listing)
        except CheckFailure as failure:
            raise failure.wrapped(whole, ": ") from None

    random_case()


def _expect_grads(ex, Tensor, expected, shown, why):
    for name, node, want in expected:
        got = None if node.grad is None else grad_array(ex, Tensor, node.grad, f"{name}.grad")
        if not close(got, want):
            raise CheckFailure(ex, f"{shown}: expected {name}.grad = {fmt(want)}, received {fmt(got)}: {why}")
