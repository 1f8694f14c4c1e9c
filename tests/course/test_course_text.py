"""What the course's prose states about numbers and about torch, checked against the numbers and against torch 2.13
(issue 28): each test reads the sentence from the source notebook, computes the fact, and shows one wrong version of
it failing, so that text and behaviour cannot drift apart. No kernel starts."""
import ast
import contextlib
import inspect
import io
import math
import re
import sys
from collections import Counter

import nbformat
import numpy as np
import pytest
import torch

from autograder.contract import assignments
from autograder.course import solution_version
from autograder.tools.solutions import solution_namespace
from conftest import REPO

ENGINES = ["04_tensor_engine", "05_modules_mnist"]  # notebook 5 carries notebook 4's engine


def source_nb(name):
    return nbformat.read(assignments()[name], as_version=4)


def flat(text):
    """Text with every run of whitespace (line breaks included) as one space: prose is wrapped anywhere."""
    return " ".join(text.split())


def markdown(name, phrase):
    """The one markdown cell of notebook ``name`` that contains ``phrase``, flattened."""
    [text] = [c.source for c in source_nb(name).cells if c.cell_type == "markdown" and phrase in c.source]
    return flat(text)


def code_cell(name, cell_id):
    [text] = [c.source for c in source_nb(name).cells if c.get("id") == cell_id]
    return text


def numbers(text):
    """'[0, 0.5, -1]' -> [0.0, 0.5, -1.0], reading the typographic minus too."""
    return [float(n) for n in text.replace("−", "-").strip("[]").split(",")]


# ------------------------------------------------------------------------------------------------ clone, as torch's

def storage(t):
    """The array behind a course Tensor (.array) or a torch tensor (.data)."""
    return t.array if hasattr(t, "array") else t.data


def clone_story(Tensor, no_grad):
    """What clone() does, told by the observable facts; the same questions asked of torch give torch's story."""
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = a.clone()
    (3.0 * b).sum().backward()
    story = {"grad reaches the original": None if a.grad is None else np.asarray(storage(a.grad)).tolist(),
             "clone is a leaf": b.is_leaf, "clone requires grad": b.requires_grad}
    storage(a)[0] = 9.0  # in place, after the pass
    story["the copy has its own array"] = bool(storage(b)[0] == 1.0)
    with no_grad():
        c = a.clone()
    story["under no_grad: a leaf without grad"] = (c.is_leaf, c.requires_grad)
    d = Tensor([1.0]).clone()
    story["clone of data: a leaf without grad"] = (d.is_leaf, d.requires_grad)
    return story


def torch_tensor(array, requires_grad=False):
    return torch.tensor(array, dtype=torch.float64, requires_grad=requires_grad)


LEAF_CLONE = "Tensor.clone = lambda self: Tensor(self.array.copy(), requires_grad=self.requires_grad)"  # the old one
CLONE_BY_MULTIPLY = "Tensor.clone = lambda self: 1.0 * self"  # another correct way: recorded, gradient 1, a new array


@pytest.mark.parametrize("name", ENGINES)
def test_the_given_tensors_clone_records_like_torchs(name):
    """torch: b = a.clone() is a non-leaf (CloneBackward0) and (3*b).sum().backward() leaves a.grad = [3, 3]."""
    by_torch = clone_story(torch_tensor, torch.no_grad)
    assert by_torch["grad reaches the original"] == [3.0, 3.0] and not by_torch["clone is a leaf"]
    for extra in ("", CLONE_BY_MULTIPLY):
        ns = solution_namespace(name, extra=extra)
        assert clone_story(ns["Tensor"], ns["no_grad"]) == by_torch, extra
    old = solution_namespace(name, extra=LEAF_CLONE)
    assert clone_story(old["Tensor"], old["no_grad"])["grad reaches the original"] is None


def test_section_4_1_names_torchs_grad_fns():
    text = markdown("04_tensor_engine", "## 4.1")
    w = torch.tensor([2.0], requires_grad=True)
    assert f"`<{(w * torch.tensor([3.0])).grad_fn.name()} ...>`" in text  # <MulBackward0 ...>
    assert f"`{w.clone().grad_fn.name()}`" in text  # CloneBackward0
    assert "detach().clone()" in text and "requires_grad_()" in text


def test_exercise_6s_own_cell_shows_the_engine_agreeing_with_torch():
    """The cell after Exercise 6's test runs the experiment in torch, then in the engine: both print the same."""
    ns = solution_namespace("04_tensor_engine")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code_cell("04_tensor_engine", "c33"), "<exercise 6 experiment>", "exec"), ns)
    by_torch, ours = (ast.literal_eval(re.search(r"\{.*?\}", line).group()) for line in printed.getvalue().splitlines())
    assert by_torch == ours == {"original": 5.0, "snapshot": 2.0, "original_grad": 3.0, "isolated_grad": 10.0}
    assert "CloneBackward0" in printed.getvalue() and "clone_back" in printed.getvalue()


# ------------------------------------------------------------------------------------------------ unbroadcast's copies

OLD_COPY = '''
def unbroadcast(broadcasted, original):
    broadcasted = np.asarray(broadcasted)
    shape = np.shape(original)
    extra = broadcasted.ndim - len(shape)
    result = broadcasted.sum(axis=tuple(range(extra))) if extra > 0 else broadcasted
    stretched = tuple(i for i, size in enumerate(shape) if size == 1 and result.shape[i] != 1)
    if stretched:
        result = result.sum(axis=stretched, keepdims=True)
    return np.asarray(result, dtype=np.float64)
'''


def body(source, function="unbroadcast"):
    """The statements of ``function`` in ``source`` without its docstring, as an AST dump (comments drop out)."""
    [node] = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == function]
    statements = node.body[1:] if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
        else node.body
    return [ast.dump(s) for s in statements]


@pytest.mark.parametrize("name", ENGINES)
def test_the_unbroadcast_copies_keep_notebook_3s_final_shape_assert(name):
    """Notebook 3 insists on the assert (a wrong shape fails where it is made); the given copies are its solution."""
    [solution] = [c.source for c in solution_version(source_nb("03_backward_functions")).cells
                  if c.metadata.get("nbgrader", {}).get("grade_id") == "unbroadcast"]
    [given] = [c.source for c in source_nb(name).cells if c.cell_type == "code" and "def unbroadcast" in c.source]
    assert body(given) == body(solution)
    assert body(OLD_COPY) != body(solution)
    unbroadcast = solution_namespace(name)["unbroadcast"]
    with pytest.raises(AssertionError, match=r"expected \(2,\)"):
        unbroadcast(np.ones((2, 3)), np.zeros(2))  # (2,) does not broadcast to (2, 3)
    old = {"np": np}
    exec(OLD_COPY, old)
    assert old["unbroadcast"](np.ones((2, 3)), np.zeros(2)).shape == (3,)  # silently wrong, found three ops later


# ------------------------------------------------------------------------------------------------ kinks (notebook 3)

def test_clamp_max_pool2d_and_maximum_then_minimum_route_gradients_as_exercise_17_says():
    text = markdown("03_backward_functions", "torch.clamp")
    at = numbers(re.search(r"at `x = (\[[^]]*\])`", text).group(1))
    stated_clamp = numbers(re.search(r"`clamp\(x, 0, 1\)` gives the gradient `(\[[^]]*\])`", text).group(1))
    stated_two_step = numbers(re.search(r"maximum-then-minimum `(\[[^]]*\])`", text).group(1))

    x = torch_tensor(at, requires_grad=True)
    torch.clamp(x, 0, 1).sum().backward()
    assert x.grad.tolist() == stated_clamp == [0, 1, 1, 1, 0]
    x.grad = None
    torch.minimum(torch.maximum(x, torch_tensor(0.0)), torch_tensor(1.0)).sum().backward()
    assert x.grad.tolist() == stated_two_step == [0, 0.5, 1, 0.5, 0]
    assert stated_clamp != stated_two_step  # the two do not "route gradient the same way"

    window = torch.ones(1, 1, 2, 2, requires_grad=True)  # four tied maxima in one window
    torch.nn.functional.max_pool2d(window, 2).sum().backward()
    assert sorted(window.grad.flatten().tolist()) == [0, 0, 0, 1], "the whole gradient goes to one element"
    assert "max_pool2d" in text and "whole gradient" in text


def is_subgradient_of_max_at_a_tie(share_x):
    """(share_x, 1 - share_x) is a subgradient of max(x, y) at x == y when max(x + dx, y + dy) - max(x, y) never falls
    below share_x·dx + (1 - share_x)·dy (the definition of a subgradient of a convex function)."""
    steps = np.linspace(-2.0, 2.0, 41)
    dx, dy = np.meshgrid(steps, steps)
    return bool(np.all(np.maximum(dx, dy) >= share_x * dx + (1 - share_x) * dy - 1e-12))


def test_a_split_at_a_tie_is_a_subgradient_only_when_neither_part_is_negative():
    answer = markdown("03_backward_functions", "**Question 4.**")
    assert "neither is negative" in answer
    first, second = numbers(",".join(re.search(r"A split such as (\S+) and (\S+) adds up to one", answer).groups()))
    assert first + second == 1.0 and not is_subgradient_of_max_at_a_tie(first)
    for share in (0.0, 0.25, 0.5, 1.0):
        assert is_subgradient_of_max_at_a_tie(share), share
    for share in (-0.5, 1.5, 1.01):
        assert not is_subgradient_of_max_at_a_tie(share), share

    x, y = torch_tensor(2.0, requires_grad=True), torch_tensor(2.0, requires_grad=True)
    torch.maximum(x, y).backward()
    assert (x.grad.item(), y.grad.item()) == (0.5, 0.5), "torch's even split, the answer's 'half each'"


# ------------------------------------------------------------------------------------------------ notebook 2

def test_exp_2x_overflows_where_section_2_7_says():
    text = markdown("02_scalar_engine", "## 2.7")
    stated = float(re.search(r"overflows from `x ≈ (\d+\.\d)`", text).group(1))
    log_max = float(re.search(r"half of (\d+\.\d\d), the log of the largest float64", text).group(1))
    assert log_max == round(math.log(sys.float_info.max), 2)
    assert stated == round(math.log(sys.float_info.max) / 2, 1) == 354.9

    def tanh_through_exp(x):
        return (math.exp(2 * x) - 1) / (math.exp(2 * x) + 1)

    assert tanh_through_exp(stated - 0.05) == 1.0
    with pytest.raises(OverflowError):
        tanh_through_exp(stated)
    with pytest.raises(OverflowError):
        tanh_through_exp(400 - 45)  # the old "around 400" was 45 too late
    assert math.tanh(1000.0) == 1.0


def test_micrograds_neuron_keyword_is_nonlin_and_the_pages_own_is_nonlinear():
    import micrograd.nn  # in requirements.txt, as section 2.9 says

    micrograds = inspect.signature(micrograd.nn.Neuron.__init__).parameters
    assert "nonlin" in micrograds and "nonlinear" not in micrograds
    assert "nonlin=i!=len(nouts)-1" in inspect.getsource(micrograd.nn.MLP.__init__)  # every layer but the last
    for phrase in ("## 2.8", "**What differs.**"):
        text = markdown("02_scalar_engine", phrase)
        assert "`Neuron(nin, nonlin=True)`" in text and "`nonlinear" in text, phrase
    assert "(they are micrograd's)" not in markdown("02_scalar_engine", "## 2.8")
    [mlp] = [c.source for c in solution_version(source_nb("02_scalar_engine")).cells
             if c.metadata.get("nbgrader", {}).get("grade_id") == "mlp"]
    assert "def __init__(self, n_inputs, nonlinear=True):" in mlp  # the name the mlp check builds Neurons with


# ------------------------------------------------------------------------------------------------ notebook 5

WORDS = {"two": 2, "three": 3, "four": 4, "five": 5}


def matrix_products_per_pass(every):
    """How many times a 16-layer Linear + ReLU stack on notebook 5's engine calls linear, linear_back0 and
    linear_back1 in one forward and backward pass of section 5.7's own forward_backward."""
    from labtools import checkpoint

    ns = solution_namespace("05_modules_mnist")
    ns.update(WIDTH=4, checkpoint=checkpoint,
              engine={"Tensor": ns["Tensor"], "apply_op": ns["apply_op"], "no_grad": ns["no_grad"]})
    calls = Counter()
    for name in ("linear", "linear_back0", "linear_back1"):
        def counted(*args, _inner=ns[name], _name=name, **kwargs):
            calls[_name] += 1
            return _inner(*args, **kwargs)
        ns[name] = counted
    np.random.seed(0)
    ns["forward_backward"](ns["deep_stack"](16), ns["Tensor"](np.ones((3, 4))), every=every)
    return sum(calls.values()) / 16


def test_section_5_7_predicts_the_checkpointing_time_by_a_count_not_by_our_timings():
    text = markdown("05_modules_mnist", "Read the pictures against the formulas")
    assert not re.search(r"\d+ ms against \d+ ms", text), "a timing of one machine, with no output to back it"
    plain = WORDS[re.search(r"a plain pass makes (\w+) per layer", text).group(1)]
    checkpointed = WORDS[re.search(r"a checkpointed pass (\w+) \(the forward twice\)", text).group(1)]
    assert "a third longer" in text and checkpointed / plain == pytest.approx(4 / 3)
    measured_plain, measured_checkpointed = matrix_products_per_pass(None), matrix_products_per_pass(4)
    assert round(measured_plain) == plain and round(measured_checkpointed) == checkpointed  # the first input needs none
    assert measured_checkpointed / measured_plain == pytest.approx(4 / 3, abs=0.02)


def test_optimizer_state_is_torchs_as_section_5_7_says():
    text = markdown("05_modules_mnist", "optimizer's state")
    weight = torch.nn.Parameter(torch.ones(3, 2))
    weight.grad = torch.ones(3, 2)
    states = {}
    for label, optimizer in (("plain", torch.optim.SGD([weight], lr=0.1)),
                             ("momentum", torch.optim.SGD([weight], lr=0.1, momentum=0.9)),
                             ("adam", torch.optim.Adam([weight]))):
        optimizer.step()
        states[label] = {k for k, v in optimizer.state[weight].items() if torch.is_tensor(v) and v.shape == weight.shape}
    assert states == {"plain": set(), "momentum": {"momentum_buffer"}, "adam": {"exp_avg", "exp_avg_sq"}}
    for name in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
        assert f"`{name}`" in text
    copies = 1 + 1 + len(states["adam"])  # the parameters, their gradients, Adam's two arrays
    assert "about four copies" in text
    assert copies == WORDS["four"]


def test_model_eval_and_no_grad_do_what_section_5_5_says():
    text = markdown("05_modules_mnist", "**`model.eval()` is not `no_grad()`.**")
    assert "is still recorded" in text
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    x = torch.ones(64, 4)
    model.eval()
    assert not any(m.training for m in model.modules()), "eval() sets every sub-module's training flag to False"
    out = model(x)
    assert out.grad_fn is not None, "eval() alone still records"
    assert torch.equal(out, model[0](x)), "in eval mode dropout drops nothing"
    model.train()
    with torch.no_grad():
        out = model(x)
    assert out.grad_fn is None and all(m.training for m in model.modules()), "no_grad() records nothing, flags untouched"
    assert (out == 0).any(), "in training mode dropout drops units"


# ------------------------------------------------------------------------------------------------ readings, and the split

READINGS = {  # the handouts' readings, and the well-known ones the review asked for
    "Olah": "Calculus on Computational Graphs: Backpropagation",
    "3Blue1Brown": "What is backpropagation really doing?",
    "Karpathy": "Yes you should understand backprop",
    "PyTorch's tutorial": "A Gentle Introduction to `torch.autograd`",
    "Rumelhart, Hinton and Williams 1986": "Learning representations by back-propagating errors",
}


def further_reading(name):
    return markdown(name, "## Further reading")


def test_every_handout_reading_is_in_a_further_reading_list():
    lists = {name: further_reading(name) for name in assignments()}
    for who, title in READINGS.items():
        assert any(title in text for text in lists.values()), f"{who}: '{title}' is in no further-reading list"
    assert "(1986)" in next(text for text in lists.values() if READINGS["Rumelhart, Hinton and Williams 1986"] in text)


def test_the_readme_and_the_notebooks_map_the_handouts_core_and_stretch_alike():
    wording = '"ARENA 0.4 sections 1 and 2"'
    readme = (REPO / "README.md").read_text()
    split = flat(readme[readme.index("**Core and stretch, two ways.**"):readme.index("## Set up")])
    assert wording in split and "notebook 3 and notebook 4" in split and "MNIST, is notebook 5" in split
    openings = {name: flat(source_nb(name).cells[0].source) for name in assignments()}
    assert wording in openings["03_backward_functions"] and "which are this notebook" in openings["03_backward_functions"]
    assert wording in openings["04_tensor_engine"] and "this notebook is section 2" in openings["04_tensor_engine"]
    assert "the module library and MNIST, the stretch" in openings["05_modules_mnist"]


# ------------------------------------------------------------------------------------------------ what a check builds on

EXERCISE_HEADING = re.compile(r"^### Exercise (\d+) — ", re.M)


def exercise_texts(name) -> dict[str, tuple[int, str]]:
    """Exercise id -> (its number, its text): the markdown from its heading down to its answer cell, flattened."""
    found, number, text = {}, None, []
    for cell in source_nb(name).cells:
        if cell.cell_type == "markdown":
            heading = EXERCISE_HEADING.search(cell.source)
            if heading:
                number, text = int(heading.group(1)), []
            text.append(cell.source)
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and number is not None:
            found[meta["grade_id"]] = (number, flat("\n".join(text)))
    return found


def builds_on_stated(text: str) -> set[int]:
    """The exercise numbers a text's "Builds on" sentence names (none without one)."""
    sentence = re.search(r"\*\*Builds on\*\* exercises? (.*?):", text)
    return {int(n) for n in re.findall(r"(?:^|, | and )(\d+) \(", sentence.group(1))} if sentence else set()


def test_every_exercise_says_which_exercises_its_check_runs_first(assignment):
    """The registry's builds_on is what the check demands: the text says exactly that, no more and no less."""
    from autograder.checks import has_check, prerequisites

    texts = exercise_texts(assignment)
    for exercise, (number, text) in texts.items():
        if has_check(exercise):
            wanted = {texts[earlier][0] for earlier in prerequisites(exercise)}
            assert builds_on_stated(text) == wanted, f"{assignment} exercise {number} ({exercise}): {text[:300]}"


def test_the_builds_on_reader_tells_a_missing_or_extra_exercise():
    stated = flat("**Builds on** exercises 2 (`log_back`) and 3 (`multiply_back0` and `multiply_back1`): ...")
    assert builds_on_stated(stated) == {2, 3}
    assert builds_on_stated("**Builds on** exercise 1 (`unbroadcast`): its check runs first") == {1}
    assert builds_on_stated("Call `unbroadcast` from exercise 1.") == set()  # mentioned, not stated as a demand


def test_topological_sort_says_it_may_return_a_list_or_a_tuple_as_its_check_accepts():
    text = exercise_texts("04_tensor_engine")["topological_sort"][1]
    assert "as a list (a tuple does as well" in text
