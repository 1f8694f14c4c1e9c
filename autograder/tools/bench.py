"""`make bench`: one training epoch of notebook 5's MLP, on the course engine, in plain numpy and in torch.

The same network (784-128-10, ReLU, cross-entropy, plain SGD, batch 64, float64, 60,000 rows) is trained one epoch
at a time by:
  (a) the reference solution of notebook 5 on the notebook-4 engine, run exactly as a learner's kernel runs it;
  (b) hand-written numpy forward and backward passes (the floor for any numpy engine);
  (c) torch on the CPU (nn.Sequential, F.cross_entropy, optim.SGD).
Each is timed REPEATS times, interleaved so machine noise hits all three alike, under 1 and under 2 BLAS threads
(threadpoolctl for numpy, torch.set_num_threads for torch); the table shows medians and the ratios
engine/numpy (target <= 1.3) and engine/torch (target <= 1.0). Data: Fashion-MNIST's training set where Debian's
dataset-fashion-mnist is installed, else uniform random pixels and labels of the same shape.
"""
from __future__ import annotations

import time

import numpy as np

from autograder.tools.solutions import solution_namespace
from labtools.datasets import load_fashion_mnist

REPEATS = 5
ROWS, BATCH, HIDDEN, LR = 60_000, 64, 128, 0.05
TARGETS = {"engine/numpy": 1.3, "engine/torch": 1.0}


def load_data():
    try:
        data = load_fashion_mnist(verbose=False)
        return data.train_images[:ROWS], data.train_labels[:ROWS], str(data)
    except FileNotFoundError:
        rng = np.random.default_rng(0)
        return rng.random((ROWS, 784)), rng.integers(0, 10, ROWS), f"random data, {ROWS:,} rows of 784 pixels"


def engine_epoch(images, labels):
    """One epoch with the notebook-5 reference solution, exactly as its training cell calls it."""
    ns = solution_namespace("05_modules_mnist")
    np.random.seed(0)
    model = ns["Sequential"](ns["Linear"](784, HIDDEN), ns["ReLU"](), ns["Linear"](HIDDEN, 10))
    optimizer = ns["SGD"](model.parameters(), lr=LR)
    return lambda: ns["train_epoch"](model, optimizer, images, labels, BATCH, np.random.default_rng(0))


def numpy_epoch(images, labels):
    """The same epoch with forward and backward written out by hand in numpy."""
    rng = np.random.default_rng(0)
    k1, k2 = 1 / np.sqrt(784), 1 / np.sqrt(HIDDEN)
    w1, b1 = rng.uniform(-k1, k1, (HIDDEN, 784)), rng.uniform(-k1, k1, HIDDEN)
    w2, b2 = rng.uniform(-k2, k2, (10, HIDDEN)), rng.uniform(-k2, k2, 10)

    def epoch():
        losses = []
        order = np.random.default_rng(0).permutation(len(labels))
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            x, y = images[batch], labels[batch]
            rows = np.arange(len(y))
            z = x @ w1.T + b1
            h = np.maximum(z, 0.0)
            logits = h @ w2.T + b2
            shifted = logits - logits.max(axis=1, keepdims=True)
            exps = np.exp(shifted)
            total = exps.sum(axis=1)
            losses.append(float(np.mean(np.log(total) - shifted[rows, y])))
            grad = exps / total[:, None]
            grad[rows, y] -= 1.0
            grad /= len(y)
            grad_h = grad @ w2
            grad_z = grad_h * (z > 0)
            for p, g in ((w2, grad.T @ h), (b2, grad.sum(axis=0)), (w1, grad_z.T @ x), (b1, grad_z.sum(axis=0))):
                p -= LR * g
        return losses
    return epoch


def torch_epoch(images, labels):
    """The same epoch in torch, float64 like the others."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 10)).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    x_all, y_all = torch.from_numpy(images), torch.from_numpy(labels)

    def epoch():
        losses = []
        order = torch.from_numpy(np.random.default_rng(0).permutation(len(labels)))
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x_all[batch]), y_all[batch])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses
    return epoch


def measure(threads: int, images, labels) -> dict[str, float]:
    """Median seconds per epoch of each variant under ``threads`` BLAS threads."""
    import torch
    from threadpoolctl import threadpool_limits
    from tqdm.auto import tqdm

    variants = {"engine": engine_epoch(images, labels), "numpy": numpy_epoch(images, labels),
                "torch": torch_epoch(images, labels)}
    times = {name: [] for name in variants}
    torch.set_num_threads(threads)
    with threadpool_limits(limits=threads):
        for _ in tqdm(range(REPEATS), desc=f"{threads} thread{'s' * (threads > 1)}", unit="round", leave=False):
            for name, run in variants.items():
                started = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - started)
    return {name: float(np.median(values)) for name, values in times.items()}


def main() -> int:
    from threadpoolctl import threadpool_info

    images, labels, source = load_data()
    blas = ", ".join(sorted({f"{pool['internal_api']} {pool['version']}" for pool in threadpool_info()}))
    print(f"One epoch of 784-{HIDDEN}-10, batch {BATCH}, SGD, float64, on {source}.")
    print(f"BLAS: {blas}. Median of {REPEATS} interleaved runs per cell.\n")
    results = {threads: measure(threads, images, labels) for threads in (1, 2)}
    print(f"{'threads':>8}{'engine s':>10}{'numpy s':>10}{'torch s':>10}{'engine/numpy':>14}{'engine/torch':>14}")
    for threads, t in results.items():
        print(f"{threads:>8}{t['engine']:>10.2f}{t['numpy']:>10.2f}{t['torch']:>10.2f}"
              f"{t['engine'] / t['numpy']:>14.2f}{t['engine'] / t['torch']:>14.2f}")
    best = min(results, key=lambda threads: results[threads]["engine"])
    t = results[best]
    print(f"\nThe engine is fastest with {best} BLAS thread{'s' * (best > 1)}: the setting notebook 5 uses.")
    for name, target in TARGETS.items():
        mine, theirs = name.split("/")
        ratio = t[mine] / t[theirs]
        print(f"  {name} = {ratio:.2f} (target <= {target}): {'met' if ratio <= target else 'MISSED'}")
    fastest_torch = min(results[threads]["torch"] for threads in results)
    print(f"  against torch at its own best thread setting: engine/torch = {t['engine'] / fastest_torch:.2f}")
    return 0
