"""Notebook 5 checks: realistic slips (text edits of the solution notebook's own code) are rejected with their own
diagnosis, and correct alternatives pass; the numbers the notebook's prose states (the variance left by torch's
default initialisation, float64's underflow threshold) are measured."""
import contextlib
import math
import re

import nbformat
import numpy as np
import pytest

from autograder import check
from autograder.checks.harness.diagnostics import case_seed
from autograder.contract import assignments
from autograder.tools.solutions import solution_namespace
from conftest import rejects

NB = "05_modules_mnist"
EXERCISES = ["module", "linear", "sequential", "cross_entropy", "sgd", "training"]


def notebook(edits=None, extra=""):
    """The solution notebook's namespace, with ``edits`` to its answer cells and ``extra`` code run after them."""
    return solution_namespace(NB, edits, extra)


@pytest.mark.parametrize("exercise", EXERCISES)
def test_solution_passes(exercise):
    check(exercise, notebook())


CORRECT_ALTERNATIVES = {
    "module": '''
def _parameters_iteratively(self):
    found, seen, stack = [], set(), [self]
    while stack:
        module = stack.pop(0)
        for p in module._parameters.values():
            if id(p) not in seen:
                seen.add(id(p))
                found.append(p)
        stack.extend(module._modules.values())
    return found

def _zero_grad_walking_modules(self):
    for p in self._parameters.values():
        p.grad = None
    for module in self._modules.values():
        module.zero_grad()

Module.parameters = _parameters_iteratively
Module.zero_grad = _zero_grad_walking_modules
''',
    "linear": '''
class Linear(Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        bound = in_features ** -0.5
        self.bias = Parameter(np.random.uniform(-bound, bound, out_features)) if bias else None
        self.weight = Parameter(np.random.uniform(-bound, bound, (out_features, in_features)))

    def forward(self, x):
        return linear(x, self.weight, self.bias)
''',
    "sequential": '''
class Sequential(Module):
    def __init__(self, *layers):
        super().__init__()
        self.layers = list(layers)
        for n, layer in enumerate(layers):
            setattr(self, str(n), layer)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
''',
    "cross_entropy": '''
def cross_entropy(logits, labels):
    rows = np.arange(len(labels))
    top = Tensor(logits.array.max(axis=1))
    log_sum = (logits - top.reshape((-1, 1))).exp().sum(dim=1).log() + top
    return log_sum - logits[rows, labels]
''',
    "sgd": '''
class SGD:
    def __init__(self, params, lr):
        self.params, self.lr = list(params), lr

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        for p in self.params:
            if p.grad is not None:
                np.subtract(p.array, self.lr * p.grad.array, out=p.array)
''',
}


@pytest.mark.parametrize("exercise", sorted(CORRECT_ALTERNATIVES))
def test_correct_alternatives_pass(exercise):
    check(exercise, notebook(extra=CORRECT_ALTERNATIVES[exercise]))


@pytest.mark.parametrize("seed", [1, 2])
def test_cross_entropys_correct_alternative_passes_the_random_batches_of_trusted_grades(seed):
    with case_seed(seed):
        check("cross_entropy", notebook(extra=CORRECT_ALTERNATIVES["cross_entropy"]))


SLIPS = [
    ("module", "if isinstance(value, Parameter):", "if isinstance(value, Tensor):", "plain Tensor attribute"),
    ("module", "nested = [p for module in self._modules.values() for p in module.parameters()]", "nested = []",
     "recursively"),
    ("module", "            if id(p) not in seen:\n                seen.add(id(p))\n                found.append(p)",
     "            found.append(p)", "more than once"),
    ("module", "        self._parameters.pop(name, None)  # a name re-assigned to something else is no longer "
               "registered\n", "", "forget a name"),
    ("module", "        for p in self.parameters():\n            p.grad = None",
     "        for p in self._parameters.values():\n            p.grad = None", "left some gradients"),
    ("linear", "np.random.uniform(-k, k, (out_features, in_features))", "np.random.uniform(-k, k, (in_features, out_features))",
     "(out_features, in_features)"),
    ("linear", "Parameter(np.random.uniform(-k, k, (out_features, in_features)))",
     "Parameter(np.random.normal(0, 1, (out_features, in_features)))", "uniform in [-k, k]"),
    ("linear", "Parameter(np.random.uniform(-k, k, (out_features, in_features)))",
     "Parameter(np.zeros((out_features, in_features)))", "uniform in [-k, k]"),
    ("linear", "if bias else None", "", "self.bias = None"),
    ("linear", "return linear(x, self.weight, self.bias)", "return linear(x, self.weight)", "F.linear"),
    ("sequential", "            setattr(self, f\"layer{i}\", layer)", "            self.layers = layers",
     "Register each layer"),
    ("sequential", "for layer in self._modules.values():", "for layer in reversed(self._modules.values()):", "raised"),
    ("sequential", "        return x.relu()", "        return x", ("returned its input unchanged",
         "cause: sequential/relu-returns-input")),
    ("cross_entropy", "shifted = logits - logits.array.max(axis=1, keepdims=True)", "shifted = logits",
     "overflows to inf"),
    ("cross_entropy", "shifted = logits - logits.array.max(axis=1, keepdims=True)", "shifted = logits - logits.array.max()",
     "maximum of the whole batch"),
    ("cross_entropy", "shifted = logits - logits.array.max(axis=1, keepdims=True)",
     "shifted = logits - logits.array.max(axis=1)", "row i's maximum is subtracted from column i"),
    ("cross_entropy", "return shifted.exp().sum(dim=1).log() - shifted[np.arange(len(labels)), labels]",
     "probabilities = shifted.exp() / shifted.exp().sum(dim=1, keepdim=True)\n"
     "    return -(probabilities.log()[np.arange(len(labels)), labels])", ("instead of log(softmax)",
          "cause: cross_entropy/log-of-softmax")),
    ("cross_entropy", "shifted = logits - logits.array.max(axis=1, keepdims=True)\n"
                      "    return shifted.exp().sum(dim=1).log() - shifted[np.arange(len(labels)), labels]",
     "shifted = logits - logits.array.max(axis=0, keepdims=True)\n"
     "    log_probs = shifted - shifted.exp().sum(dim=0, keepdim=True).log()\n"
     "    return -log_probs[np.arange(len(labels)), labels]",
     ("batch axis", "cause: cross_entropy/softmax-over-batch")),
    ("cross_entropy", "    return shifted.exp().sum(dim=1).log() - shifted[np.arange(len(labels)), labels]",
     "    return (shifted.exp().sum(dim=1).log() - shifted[np.arange(len(labels)), labels]).mean()",
     "one loss per example"),
    ("sgd", "p.array -= self.lr * p.grad.array", "p.grad.array -= self.lr * p.grad.array",
     ("went into .grad", "cause: sgd/updates-grad")),
    ("sgd", "p.array -= self.lr * p.grad.array", "p = p - self.lr * p.grad",
     ("rebinding a loop variable", "cause: sgd/rebinds-loop-variable")),
    ("sgd", "p.array -= self.lr * p.grad.array", "p.array += self.lr * p.grad.array", ("moved along the gradient",
         "cause: sgd/steps-up-the-gradient")),
    ("sgd", "p.array -= self.lr * p.grad.array", "p.array -= p.grad.array", ("moved by the whole gradient",
         "cause: sgd/no-learning-rate")),
    ("sgd", "p.array -= self.lr * p.grad.array", "p.array = p.array - self.lr * p.grad.array",
     ("instead of updating its own in place", "cause: sgd/not-in-place")),
    ("sgd", "                if p.grad is not None:\n                    p.array -= self.lr * p.grad.array",
     "                p.array -= self.lr * p.grad.array", "raised AttributeError"),
    ("sgd", "                if p.grad is not None:\n                    p.array -= self.lr * p.grad.array",
     "                p.array -= self.lr * (p.grad.array if p.grad is not None else np.ones_like(p.array))",
     ("took no part and stays put", "cause: sgd/moves-parameter-without-grad")),
    ("training", "        optimizer.zero_grad()\n", "",
     ("held the previous batch's too", "cause: training/no-zero-grad")),
    ("training", "    order = rng.permutation(len(labels))", "    order = np.arange(len(labels))", "stored order"),
    ("training", "        losses.append(loss.item())", "        losses.append(loss)", "plain finite floats"),
    # the loss of each batch, at the parameters before its step (audit 14: any finite floats used to pass)
    ("training", "        losses.append(loss.item())", "        losses.append(float(len(batch)))", ("the batch sizes",
         "cause: training/batch-sizes")),
    ("training", "        losses.append(loss.item())", "        losses.append(loss.item() * len(batch))",
     ("sums of each batch's losses", "cause: training/losses-summed")),
    ("training", "        losses.append(loss.item())",
     "        with no_grad():\n"
     "            losses.append(cross_entropy(model(Tensor(images[batch])), labels[batch]).mean().item())",
     ("after optimizer.step()", "cause: training/losses-after-step")),
    ("training", "        losses.append(loss.item())",
     "        losses.append((loss.item() + losses[-1] * len(losses)) / (len(losses) + 1) if losses else loss.item())",
     ("running mean", "cause: training/running-mean")),
    ("training", "    with no_grad():\n        logits = model(Tensor(images))", "    logits = model(Tensor(images))",
     ("recorded a graph", "cause: training/accuracy-records-graph")),
    ("training", "    return float(np.mean(logits.array.argmax(axis=1) == labels))",
     "    return 100 * float(np.mean(logits.array.argmax(axis=1) == labels))", "fraction"),
    ("training", "    for start in range(0, len(order), batch_size):",
     "    for start in range(0, len(order) - batch_size + 1, batch_size):", "list of 4 losses"),
    ("module", "        nested = [p for module in self._modules.values() for p in module.parameters()]",
     "        nested = []", ("include every sub-module's parameters()", "cause: module/not-recursive")),
    ("module", "            if id(p) not in seen:", "            if True:",
     ("more than once", "cause: module/parameter-listed-twice")),
    ("module", "            self._parameters[name] = value", "            pass",
     ("register Parameters in __setattr__", "cause: module/parameters-not-registered")),
    ("linear", "np.random.uniform(-k, k, out_features)) if bias else None", "np.random.uniform(-k, k, out_features))",
     ("bias=False) should set self.bias = None", "cause: linear/ignores-bias-false")),
    ("linear", "np.random.uniform(-k, k, (out_features, in_features))",
     "np.random.uniform(-k, k, (in_features, out_features))",
     ("(out_features, in_features)", "cause: linear/weight-transposed")),
    ("linear", "        self.weight = Parameter(np.random.uniform(-k, k, (out_features, in_features)))",
     "        object.__setattr__(self, 'weight', Parameter(np.random.uniform(-k, k, (out_features, in_features))))",
     ("should be [weight, bias]", "cause: linear/wrong-parameters")),
    ("sequential", '            setattr(self, f"layer{i}", layer)', '            object.__setattr__(self, f"layer{i}", layer)',
     ("Register each layer as a sub-module", "cause: sequential/layers-not-registered")),
    ("sequential", "            x = layer(x)", "            x = x if isinstance(layer, ReLU) else layer(x)",
     ("feed each layer's output to the next", "cause: sequential/layers-not-chained")),
    ("sgd", "p.array -= self.lr * p.grad.array", "p.array -= self.lr * p.grad.array; p.requires_grad = False",
     ("no longer a leaf that requires grad", "cause: sgd/replaces-parameter")),
    ("training", "        optimizer.step()\n", "        optimizer.step()\n        optimizer.step()\n",
     ("once per batch makes 4", "cause: training/not-one-step-per-batch")),
    ("training", "    order = rng.permutation(len(labels))", "    order = rng.integers(0, len(labels), len(labels))",
     ("every row exactly once per epoch", "cause: training/rows-not-once-per-epoch")),
    ("training", "    for start in range(0, len(order), batch_size):\n        batch = order[start:start + batch_size]",
     "    for start in range(0, len(order), 50):\n        batch = order[start:start + 50]",
     ("take batch_size rows at a time", "cause: training/wrong-batches")),
    ("cross_entropy", "shifted = logits - logits.array.max(axis=1, keepdims=True)", "shifted = logits",
     ("e^1000 overflows to inf", "cause: cross_entropy/no-max-shift")),
    ("cross_entropy", "logits.array.max(axis=1, keepdims=True)", "logits.array.max(axis=1)",
     ("e^999 overflows", "cause: cross_entropy/no-keepdims")),
    ("cross_entropy", "logits.array.max(axis=1, keepdims=True)", "logits.array.max()",
     ("maximum of the whole batch", "cause: cross_entropy/batch-max-shift")),
]


@pytest.mark.parametrize("exercise, right, wrong, phrase", SLIPS)
def test_slips_are_rejected_with_their_diagnosis(exercise, right, wrong, phrase):
    rejects(exercise, notebook({exercise: [(right, wrong)]}), phrase)


def test_training_names_an_earlier_exercise_that_fails_first():
    """A ReLU that cuts the graph (right values, no gradient to the first layer) is named, not left to the accuracy."""
    edits = {"sequential": [("        return x.relu()", "        return Tensor(np.maximum(x.array, 0.0))")]}
    rejects("training", notebook(edits), "from sequential, which fails its own check", "reaches the weights")


def test_training_names_a_loss_whose_gradient_is_not_the_batch_mean():
    edits = {"training": [("labels[batch]).mean()", "labels[batch]).mean() * 0.5")]}
    rejects("training", notebook(edits), "differ from those of the mean cross-entropy")


def test_training_run_must_reach_the_floor(monkeypatch):
    """The last line of defence: the floor is real (here raised above what a correct pipeline reaches)."""
    from autograder.checks import modules_mnist
    monkeypatch.setattr(modules_mnist, "TRAINING_FLOOR", 0.99)
    rejects("training", notebook(), "reached a test accuracy of")


# ------------------------------------------------------------------------------------------------ red-team regressions

TRAIN_EPOCH_OTHER_STYLES = '''
def train_epoch(model, optimizer, images, labels, batch_size, rng):
    images = np.asarray(images)
    shuffled = rng.permutation(len(labels))
    losses = []
    for start in range(0, len(labels), batch_size):
        rows = shuffled[start:start + batch_size]
        x = Tensor(images.take(rows, axis=0))
        loss = cross_entropy(model(x), labels[rows]).sum() * (1.0 / len(rows))
        model.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.array))
    return losses
'''


def test_training_accepts_other_correct_loop_styles():
    check("training", notebook(extra=TRAIN_EPOCH_OTHER_STYLES))


def test_training_accepts_a_progress_bar_and_one_blas_thread():
    """Red team 20: the given cells' tqdm and threadpool_limits in the answer failed the grade alone (the worker
    lacked them, and then tqdm's monitor thread outlived the call)."""
    loop = "    for start in range(0, len(order), batch_size):\n"
    edits = {"training": [("    order = rng.permutation(len(labels))\n",
                           "    threadpool_limits(limits=1)\n    order = rng.permutation(len(labels))\n"),
                          (loop, "    for start in tqdm(range(0, len(order), batch_size), desc='batches', leave=False):\n")],
             "module": [("class Module:\n", "threadpool_limits(limits=1)  # one BLAS thread, as section 5.6 trains\n\n\n"
                                          "class Module:\n")]}
    check("training", notebook(edits))
    check("module", notebook(edits))


@pytest.mark.parametrize("exercise, right, wrong, phrase", [
    ("training", "    order = rng.permutation(len(labels))", "    order = np.random.default_rng(0).permutation(len(labels))",
     ("same batches as the first", "cause: training/not-shuffled")),
    ("training", "    order = rng.permutation(len(labels))", "    order = np.random.permutation(len(labels))",
     ("not np.random", "cause: training/ignores-rng")),
    ("training", "    order = rng.permutation(len(labels))", "    order = np.arange(len(labels))[::-1]",
     ("stored order", "cause: training/not-shuffled")),
    ("training", "        loss = cross_entropy(model(Tensor(images[batch])), labels[batch]).mean()\n",
     "        loss = cross_entropy(model(Tensor(images[batch])), labels[batch]).sum()\n",
     ("not its sum", "cause: training/sum-for-mean")),
    ("training", "        optimizer.zero_grad()\n"
                 "        loss = cross_entropy(model(Tensor(images[batch])), labels[batch]).mean()\n"
                 "        loss.backward()\n",
     "        loss = cross_entropy(model(Tensor(images[batch])), labels[batch]).mean()\n        loss.backward()\n"
     "        optimizer.zero_grad()\n", ("found no gradients", "cause: training/zero-grad-before-step")),
    ("cross_entropy", "shifted = logits - logits.array.max(axis=1, keepdims=True)",
     "shifted = logits - logits.array.mean(axis=1, keepdims=True)",
     ("a mean or a midpoint does not", "cause: cross_entropy/shift-not-row-max")),
    ("sequential", "        return x.relu()", "        return Tensor(np.maximum(x.array, 0.0))", "reaches the weights"),
    ("module", "        for p in self.parameters():\n            p.grad = None",
     "        for p in list(self._parameters.values()) + [q for m in self._modules.values() "
     "for q in m._parameters.values()]:\n            p.grad = None",
     ("left some gradients", "cause: module/zero-grad-misses-parameters")),
    ("module", "        self._modules.pop(name, None)\n", "",
     ("sub-module name re-assigned", "cause: module/keeps-reassigned-name")),
    ("module", "if isinstance(value, Parameter):", "if isinstance(value, Tensor) and value.requires_grad:",
     ("computed Tensor that requires grad", "cause: module/registers-non-parameters")),
    ("module", "        for p in list(self._parameters.values()) + nested:",
     "        for p in nested + list(self._parameters.values()):", ("torch's order", "cause: module/parameter-order")),
    ("linear", "np.random.uniform(-k, k, (out_features, in_features))",
     "np.clip(np.random.normal(0, k / 1.7, (out_features, in_features)), -k, k)",
     ("uniform in [-k, k]", "cause: linear/wrong-init-range")),
    ("linear", "np.random.uniform(-k, k, (out_features, in_features))",
     "np.random.default_rng(0).uniform(-k, k, (out_features, in_features))",
     ("identical weights", "cause: linear/not-global-generator")),
    ("sgd", "        for p in self.params:\n            p.grad = None",
     "        for p in self.params[:-1]:\n            p.grad = None",
     ("clear every parameter's gradient", "cause: module/zero-grad-misses-parameters")),
    # zero_grad must leave None, as the notebook asks and the visible tests assert
    ("module", "        for p in self.parameters():\n            p.grad = None",
     "        for p in self.parameters():\n            p.grad.array[...] = 0.0",
     ("has no gradient yet", "cause: module/zero-grad-writes-zeros")),
    ("module", "        for p in self.parameters():\n            p.grad = None",
     "        for p in self.parameters():\n            p.grad = Tensor(np.zeros(p.shape))",
     ("arrays of zeros", "cause: module/zero-grad-writes-zeros")),
    ("sgd", "        for p in self.params:\n            p.grad = None",
     "        for p in self.params:\n            p.grad.array *= 0",
     ("has no gradient yet", "cause: module/zero-grad-writes-zeros")),
    ("sgd", "        for p in self.params:\n            p.grad = None",
     "        for p in self.params:\n            if p.grad is not None:\n                p.grad.array[...] = 0",
     ("arrays of zeros", "cause: module/zero-grad-writes-zeros")),
])
def test_red_team_findings_are_rejected(exercise, right, wrong, phrase):
    rejects(exercise, notebook({exercise: [(right, wrong)]}), phrase)


# ------------------------------------------------------------------------------------------------ numbers the prose states

def _markdown_cell(heading):
    """The source notebook's markdown cell that contains ``heading`` (the prose a learner reads)."""
    nb = nbformat.read(assignments()[NB], as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "markdown" and heading in c.source)


def test_torchs_default_initialisation_leaves_a_third_of_the_variance_as_section_5_2_says():
    """Weights uniform in ±1/√n have variance 1/(3n), so an output of n inputs has a third of their variance: measured
    on the solution's own Linear(784, 256) with many centred inputs, and compared with the factor the prose of
    section 5.2 states ("... = Var(x)/3")."""
    stated = re.findall(r"Var\(x\)\s*/\s*(\d+)", _markdown_cell("## 5.2"))
    assert stated, "section 5.2 no longer states the output variance as Var(x)/N"
    assert set(stated) == {"3"}, stated
    factor = 1 / int(stated[0])

    n = 784
    Linear = notebook()["Linear"]
    np.random.seed(0)
    weight = np.asarray(Linear(n, 256).weight.array)
    x = np.random.default_rng(1).normal(0.0, 2.0, (4000, n))  # centred inputs of variance 4
    ratio = (x @ weight.T).var() / x.var()  # before the bias, as the prose says
    assert abs(ratio - 1 / 3) < 0.02, ratio
    assert abs(ratio - factor) < 0.02, (ratio, factor)
    assert n * (1 / np.sqrt(n)) ** 2 / 3 == pytest.approx(1 / 3)  # n · k²/3 with k = 1/√n


def test_the_underflow_threshold_in_section_5_3_is_float64s():
    """exp underflows to 0 below about -745.1 (the smallest subnormal is 4.9e-324 = e^-744.4), so a batch-wide shift
    breaks only a row whose maximum is more than about 745 below the batch's: the numbers section 5.3 states."""
    text = _markdown_cell("## 5.3")
    gap = re.search(r"more than about \*\*(\d+)\*\*", text)
    assert gap, "section 5.3 no longer states how far apart rows must be for a batch-wide shift to fail"
    gap = float(gap.group(1))
    assert np.exp(-746.0) == 0.0 and np.exp(-744.0) > 0.0
    assert np.exp(-(gap + 1)) == 0.0 and np.exp(-(gap - 1)) > 0.0

    smallest = np.nextafter(0.0, 1.0)
    assert f"`{smallest:.1e} ≈ e^{{{math.log(smallest):.1f}}}`" in text  # "4.9e-324 ≈ e^{-744.4}"
    cutoff = re.search(r"arguments below\s+about\s+−(\d+\.\d)", text)
    assert cutoff, "section 5.3 no longer states where np.exp returns 0"
    assert np.exp(-float(cutoff.group(1)) + 0.05) > 0.0 and np.exp(-float(cutoff.group(1)) - 0.05) == 0.0

    def batch_shifted_loss(logits):
        shifted = logits - logits.max()  # the slip: one shift for the whole batch
        with np.errstate(divide="ignore"):
            return np.log(np.exp(shifted).sum(axis=1)) - shifted[:, 0]

    assert np.all(np.isfinite(batch_shifted_loss(np.array([[0.0, 1.0], [gap - 2, gap - 1]]))))
    assert not np.all(np.isfinite(batch_shifted_loss(np.array([[0.0, 1.0], [gap + 2, gap + 3]]))))


def test_a_relu_halves_the_mean_square_and_kaimings_variance_makes_up_for_it():
    """Section 5.2's other claims: after a ReLU, centred pre-activations keep half their mean square; weights of
    variance 2/n_in (Kaiming) keep the mean square from layer to layer, torch's default (1/(3n)) divides it by 6."""
    rng = np.random.default_rng(2)
    n, x = 512, rng.normal(0.0, 1.0, (2000, 512))
    assert np.mean(np.maximum(x, 0) ** 2) == pytest.approx(0.5, rel=0.02)
    for variance, factor in ((2 / n, 1.0), (1 / (3 * n), 1 / 6)):
        weight = rng.normal(0.0, np.sqrt(variance), (n, n))
        h = np.maximum(x @ weight.T, 0)
        after = np.maximum(h @ rng.normal(0.0, np.sqrt(variance), (n, n)).T, 0)
        assert np.mean(after ** 2) / np.mean(h ** 2) == pytest.approx(factor, rel=0.1)


def test_training_rejects_an_accuracy_that_knows_the_fixed_models_by_heart():
    """accuracy() answering from a table of the two fixed models' accuracies, keyed by their first weight, passes
    those two; the model the case seed draws is not in the table."""
    from autograder.checks.modules_mnist import ACCURACY_SEEDS, reference_accuracy
    from labtools.datasets import load_mnist

    data, known = load_mnist(verbose=False), {}
    for seed in ACCURACY_SEEDS:
        rng = np.random.default_rng(seed)
        params = [rng.uniform(-0.036, 0.036, (784, 16)), np.zeros(16), rng.uniform(-0.25, 0.25, (16, 10)), np.zeros(10)]
        known[float(params[0][0, 0])] = reference_accuracy(params, data.test_images[:300], data.test_labels[:300])
    by_heart = (f"KNOWN = {known!r}\n"
                "def accuracy(model, images, labels):\n"
                "    return KNOWN[float(model.parameters()[0].array[0, 0])]\n")
    rejects("training", notebook(extra=by_heart), "KeyError")


# ------------------------------------------------------------------------------------------------ answers that know the probes

SORTED_NAMES = '''
def _parameters_by_sorted_name(self):
    found = []
    for name in sorted(self._parameters):
        found.append(self._parameters[name])
    for name in sorted(self._modules):
        found.extend(self._modules[name].parameters())
    return list({id(p): p for p in found}.values())

Module.parameters = _parameters_by_sorted_name
'''
# ReLU after every layer but the last, whatever the ReLU modules say: notebook 2's MLP rule, right exactly where the
# ReLUs sit between the Linear layers, as in the fixed network.
RELU_BETWEEN_LAYERS = '''
def _forward_with_relus_between(self, x):
    layers = [m for m in self._modules.values() if not isinstance(m, ReLU)]
    for n, layer in enumerate(layers):
        x = layer(x)
        x = x.relu() if n < len(layers) - 1 else x
    return x

Sequential.forward = _forward_with_relus_between
'''
KNOWS_THE_PROBES = [
    # names in assignment order that happen to be in alphabetical order too (a, b; first, w, second by their kinds)
    ("module", None, SORTED_NAMES, "torch's order"),
    # k for the fixed Linear(400, 300) only
    ("linear", {"linear": [("k = 1 / np.sqrt(in_features)", "k = 0.05  # 1 / sqrt(400)")]}, "",
     "uniform in [-k, k]"),
    ("sequential", None, RELU_BETWEEN_LAYERS, "in the order given"),
    # the fixed optimizer's lr, not self.lr
    ("sgd", {"sgd": [("p.array -= self.lr * p.grad.array", "p.array -= 0.3 * p.grad.array")]}, "",
     "expected: torch.optim.SGD's"),
    # a second red team's: right on every layer of up to 8 inputs, and on all the drawn small ones before
    ("linear", {"linear": [("return linear(x, self.weight, self.bias)",
                            "return linear(x, self.weight, self.bias if self.weight.shape[1] <= 8 else None)")]}, "",
     "torch"),
    # and an update of each parameter's first 16 entries only, right on the probes' parameters of up to 4 x 4
    ("sgd", {"sgd": [("p.array -= self.lr * p.grad.array",
                      "p.array.reshape(-1)[:16] -= self.lr * p.grad.array.reshape(-1)[:16]")]}, "",
     "expected: torch.optim.SGD's"),
]


@pytest.mark.parametrize("seed", [None, 1, 2], ids=["kernel", "seed 1", "seed 2"])
@pytest.mark.parametrize("exercise, edits, extra, phrase", KNOWS_THE_PROBES,
                         ids=[f"{k[0]}-{n}" for n, k in enumerate(KNOWS_THE_PROBES)])
def test_an_answer_right_only_on_the_fixed_probes_fails_the_drawn_cases(exercise, edits, extra, phrase, seed):
    """Each of these passes every fixed probe (main's checks, which had only those, passed all four); the cases drawn
    from the case seed (names, sizes, layers, lr), in a learner's kernel or under a trusted grade's seed, show it."""
    with contextlib.nullcontext() if seed is None else case_seed(seed):
        rejects(exercise, notebook(edits, extra), phrase)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("exercise", ["module", "linear", "sequential", "sgd"])
def test_correct_alternatives_pass_the_drawn_cases_of_trusted_grades(exercise, seed):
    with case_seed(seed):
        check(exercise, notebook(extra=CORRECT_ALTERNATIVES[exercise]))


@pytest.mark.parametrize("exercise", ["module", "sgd"])
def test_zero_grad_is_checked_on_each_parameters_array_not_on_the_shape_it_reports(exercise):
    """Red team 9: a Parameter.shape property of the learner's own, (8192, 8192), made the grader allocate 6.5 GB for
    the gradients it puts in .grad before calling zero_grad. The check shapes them by each parameter's array."""
    check(exercise, notebook(extra="def _no_shape(self):\n    raise AttributeError('no shape here')\n\n\n"
                                   "Parameter.shape = property(_no_shape)\n"))
