"""The MNIST loader: IDX parsing with clear errors, the offline sample split, the download path (offline, faked)."""
import gzip
import hashlib
import io
import struct

import numpy as np
import pytest

from labtools import datasets
from labtools.training import confusion_matrix


def idx_bytes(array: np.ndarray) -> bytes:
    array = np.asarray(array, dtype=np.uint8)
    return b"\x00\x00\x08" + bytes([array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def write_set(folder, stem, images, labels):
    (folder / f"{stem}-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx_bytes(images)))
    (folder / f"{stem}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(labels)))


def test_read_idx_reads_compressed_and_plain_files(tmp_path):
    images = np.arange(2 * 28 * 28).reshape(2, 28, 28) % 256
    (tmp_path / "a.gz").write_bytes(gzip.compress(idx_bytes(images)))
    (tmp_path / "a").write_bytes(idx_bytes(images))
    assert np.array_equal(datasets.read_idx(tmp_path / "a.gz"), images)
    assert np.array_equal(datasets.read_idx(tmp_path / "a"), images)


@pytest.mark.parametrize("damage, phrase", [
    (lambda raw: gzip.compress(raw[:-10]), "truncated"),
    (lambda raw: gzip.compress(raw[:6]), "truncated inside its header"),
    (lambda raw: gzip.compress(b"\x00\x00\x0d\x01" + raw[4:]), "not an IDX file of unsigned bytes"),
    (lambda raw: gzip.compress(raw)[:-30], "cannot be read as gzip"),
    (lambda raw: b"this is not gzip at all", "cannot be read as gzip"),
])
def test_read_idx_names_the_file_and_the_damage(tmp_path, damage, phrase):
    path = tmp_path / "train-labels-idx1-ubyte.gz"
    path.write_bytes(damage(idx_bytes(np.arange(100) % 10)))
    with pytest.raises(ValueError) as info:
        datasets.read_idx(path)
    assert str(path) in str(info.value) and phrase in str(info.value)


def test_full_mnist_reads_the_idx_files_and_scales_pixels(tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(0)
    write_set(tmp_path, "train", rng.integers(0, 256, (30, 28, 28)), np.arange(30) % 10)
    write_set(tmp_path, "t10k", rng.integers(0, 256, (10, 28, 28)), np.arange(10))
    monkeypatch.setattr(datasets, "MNIST_DIR", tmp_path)
    data = datasets.load_mnist(full=True)
    assert data.train_images.shape == (30, 784) and data.test_images.shape == (10, 784)
    assert data.train_images.dtype == np.float64 and 0 <= data.train_images.min() and data.train_images.max() <= 1
    assert data.train_labels.dtype == np.int64 and data.test_labels.tolist() == list(range(10))
    assert "30 training and 10 test images" in capsys.readouterr().out


def test_full_mnist_refuses_images_without_matching_labels(tmp_path, monkeypatch):
    write_set(tmp_path, "train", np.zeros((5, 28, 28)), np.zeros(4))
    write_set(tmp_path, "t10k", np.zeros((2, 28, 28)), np.zeros(2))
    monkeypatch.setattr(datasets, "MNIST_DIR", tmp_path)
    with pytest.raises(ValueError, match="5 images but 4 labels"):
        datasets.load_mnist(full=True, verbose=False)


def test_missing_full_mnist_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "MNIST_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="make data"):
        datasets.load_mnist(full=True)


def test_missing_fashion_mnist_says_how_to_install_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt install dataset-fashion-mnist"):
        datasets.load_fashion_mnist(tmp_path)


def test_offline_sample_is_a_fixed_stratified_split():
    first, second = datasets.load_mnist(verbose=False), datasets.load_mnist(verbose=False)
    assert first.train_images.shape == (4000, 784) and first.test_images.shape == (1000, 784)
    assert np.bincount(first.train_labels).tolist() == [400] * 10 and np.bincount(first.test_labels).tolist() == [100] * 10
    assert np.array_equal(first.train_images, second.train_images) and np.array_equal(first.test_labels, second.test_labels)
    assert first.train_labels[:50].tolist() != sorted(first.train_labels[:50].tolist()), "shuffled, not sorted by label"
    train_rows = {row.tobytes() for row in first.train_images}
    assert not any(row.tobytes() in train_rows for row in first.test_images), "no digit in both sets"
    assert 0.0 <= first.train_images.min() and first.train_images.max() == 1.0


class FakeResponse(io.BytesIO):
    headers = {"Content-Length": "0"}

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def test_download_checks_md5_and_keeps_only_intact_files(tmp_path, monkeypatch):
    payload = b"pretend this is MNIST"
    monkeypatch.setattr(datasets, "MNIST_FILES", {"a.gz": hashlib.md5(payload).hexdigest()})
    served = []
    monkeypatch.setattr(datasets.urllib.request, "urlopen",
                        lambda url, timeout: served.append(url) or FakeResponse(payload if len(served) > 1 else b"junk"))
    datasets.download_mnist(tmp_path)
    assert (tmp_path / "a.gz").read_bytes() == payload and len(served) == 2, "first mirror's bad copy was rejected"
    datasets.download_mnist(tmp_path)
    assert len(served) == 2, "an intact file is not fetched again"


def test_download_without_network_explains_the_offline_route(tmp_path, monkeypatch):
    def offline(url, timeout):
        raise OSError("Name or service not known")
    monkeypatch.setattr(datasets.urllib.request, "urlopen", offline)
    with pytest.raises(RuntimeError, match="5,000-digit sample"):
        datasets.download_mnist(tmp_path)
    assert not list(tmp_path.iterdir()), "no partial file is left behind"


def test_confusion_matrix_counts_true_rows_and_predicted_columns():
    counts = confusion_matrix([0, 0, 1, 2, 2, 2], [0, 1, 1, 2, 2, 0], n_classes=3)
    assert counts.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 2]]
