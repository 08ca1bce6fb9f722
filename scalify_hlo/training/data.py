"""Datasets for the training examples: MNIST (from ``../shared``), scikit-learn's digits (the
embedded default: it ships inside scikit-learn, so a fresh machine has it) and Tiny
Shakespeare, as numpy arrays with fixed train/test splits so every mode sees the same data."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scalify_hlo.errors import ScalifyError

# Where the repository's shared data lives when it is checked out beside ``../shared``.
SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@dataclass(frozen=True)
class ImageData:
    """Flattened images in [0, 1] and integer labels."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def features(self) -> int:
        return int(self.x_train.shape[1])


@dataclass(frozen=True)
class TextData:
    """A character-level corpus: token ids and the vocabulary."""

    name: str
    train: np.ndarray
    val: np.ndarray
    vocab: tuple[str, ...]


def _read_idx(path: Path, offset: int) -> np.ndarray:
    try:
        with gzip.open(path) as f:
            return np.frombuffer(f.read(), np.uint8, offset=offset)
    except (OSError, EOFError) as exc:
        raise ScalifyError(f"{path}: cannot read MNIST data ({exc})") from None


def load_mnist(directory: Path, n_train: int = 8000) -> ImageData:
    """The 10,000 MNIST test-set images in ``directory`` (idx files, gzipped): the first
    ``n_train`` for training, the rest for testing."""
    images = _read_idx(directory / "t10k-images-idx3-ubyte.gz", 16)
    labels = _read_idx(directory / "t10k-labels-idx1-ubyte.gz", 8)
    if images.size != labels.size * 784:
        raise ScalifyError(f"{directory}: {images.size} pixels for {labels.size} labels")
    x = images.reshape(-1, 784).astype(np.float32) / 255.0
    y = labels.astype(np.int32)
    return ImageData("mnist", x[:n_train], y[:n_train], x[n_train:], y[n_train:])


def load_digits(test_fraction: float = 0.2, seed: int = 0) -> ImageData:
    """scikit-learn's bundled 8x8 digits (1,797 images), shuffled once with a fixed seed."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError:
        raise ScalifyError("the digits dataset needs scikit-learn: pip install "
                           "'scalify-hlo[demo]'") from None
    bunch = sklearn_digits()
    x = (bunch.data / 16.0).astype(np.float32)
    y = bunch.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return ImageData("digits", x[train], y[train], x[test], y[test])


def load_images(source: str | None = None) -> ImageData:
    """``digits``, ``mnist`` (``../shared/data/mnist``), a directory of MNIST idx files, or
    ``None``: MNIST when ``../shared`` has it, else digits."""
    if source == "digits":
        return load_digits()
    if source is None:
        mnist = SHARED_DATA / "mnist"
        return load_mnist(mnist) if mnist.is_dir() else load_digits()
    directory = SHARED_DATA / "mnist" if source == "mnist" else Path(source)
    if not directory.is_dir():
        raise ScalifyError(f"{directory}: no such directory (MNIST idx files expected)")
    return load_mnist(directory)


def load_text(path: Path | None = None, val_fraction: float = 0.1) -> TextData:
    """A text file as character ids, split into the first 90% and the last 10%."""
    path = path or SHARED_DATA / "tinyshakespeare.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScalifyError(f"{path}: cannot read the text corpus ({exc})") from None
    if len(text) < 1000:
        raise ScalifyError(f"{path}: {len(text)} characters is too short to train on")
    vocab = tuple(sorted(set(text)))
    index = {c: i for i, c in enumerate(vocab)}
    ids = np.fromiter((index[c] for c in text), np.int32, len(text))
    split = int(len(ids) * (1 - val_fraction))
    return TextData(path.stem, ids[:split], ids[split:], vocab)
