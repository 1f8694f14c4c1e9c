"""Pictures for training a classifier: sample images, the loss and accuracy history, a confusion matrix, mistakes."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def show_images(images, labels, predicted=None, classes=None, columns: int = 10, title: str = ""):
    """A grid of 28×28 images, each captioned with its label (and, if given, the prediction: red when wrong).

    Args:
        images: array of shape (N, 784) with values in [0, 1].
        labels: int array of shape (N,).
        predicted: optional int array of shape (N,).
        classes: a name per class index; defaults to the index itself.
    """
    count = len(images)
    rows = max(1, -(-count // columns))
    figure, axes = plt.subplots(rows, columns, figsize=(1.1 * columns, 1.3 * rows), squeeze=False)
    for k, ax in enumerate(axes.flat):
        ax.axis("off")
        if k >= count:
            continue
        ax.imshow(np.asarray(images[k]).reshape(28, 28), cmap="gray_r", vmin=0, vmax=1)
        name = (lambda c: classes[c] if classes else str(c))
        if predicted is None:
            ax.set_title(name(int(labels[k])), fontsize=9)
        else:
            wrong = int(predicted[k]) != int(labels[k])
            ax.set_title(f"{name(int(predicted[k]))} (true {name(int(labels[k]))})" if wrong else name(int(labels[k])),
                         fontsize=8, color="crimson" if wrong else "black")
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    return figure


def plot_history(batch_losses, epoch_accuracies, batches_per_epoch: int):
    """Training loss per batch (with a running mean) and test accuracy after each epoch, side by side."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
    losses = np.asarray(batch_losses, dtype=float)
    steps = np.arange(1, len(losses) + 1) / batches_per_epoch
    left.plot(steps, losses, color="#9ab", linewidth=0.6, label="batch")
    window = max(1, batches_per_epoch // 2)
    if len(losses) >= window:
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        left.plot(steps[window - 1:], smooth, color="#135", label=f"mean of {window} batches")
    left.set(xlabel="epoch", ylabel="cross-entropy loss", yscale="log", title="training loss")
    left.legend()
    right.plot(np.arange(1, len(epoch_accuracies) + 1), 100 * np.asarray(epoch_accuracies), "o-")
    right.set(xlabel="epoch", ylabel="test accuracy (%)", title="test accuracy after each epoch")
    right.grid(alpha=0.3)
    figure.tight_layout()
    return figure


def confusion_matrix(labels, predicted, n_classes: int = 10) -> np.ndarray:
    """Counts of (true class, predicted class) pairs: int array of shape (n_classes, n_classes), rows = true."""
    counts = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(counts, (np.asarray(labels), np.asarray(predicted)), 1)
    return counts


def plot_confusion(labels, predicted, classes):
    """The confusion matrix as a heat map with counts, rows = true class, columns = predicted class."""
    counts = confusion_matrix(labels, predicted, len(classes))
    figure, ax = plt.subplots(figsize=(5.2, 4.6))
    ax.imshow(counts, cmap="Blues")
    ticks = range(len(classes))
    ax.set(xticks=ticks, yticks=ticks, xticklabels=classes, yticklabels=classes, xlabel="predicted", ylabel="true",
           title=f"confusion matrix ({np.trace(counts)} of {counts.sum()} right)")
    for (i, j), n in np.ndenumerate(counts):
        if n:
            ax.text(j, i, str(n), ha="center", va="center", fontsize=7,
                    color="white" if n > counts.max() / 2 else "black")
    figure.tight_layout()
    return figure
