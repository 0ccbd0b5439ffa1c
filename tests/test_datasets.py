import numpy as np
import pytest

from keras_boost import datasets


def test_mnist_sample_split():
    (x, y), (xt, yt) = datasets.load_mnist_sample()
    assert x.shape == (4000, 28, 28, 1) and xt.shape == (1000, 28, 28, 1)
    assert x.dtype == np.float32 and 0.0 <= x.min() and x.max() <= 1.0 and x.max() > 0.9
    assert np.bincount(yt).tolist() == [100] * 10  # stratified
    assert np.bincount(y).tolist() == [400] * 10


def test_mnist_sample_is_deterministic_per_seed_and_disjoint():
    (x1, y1), (xt1, _) = datasets.load_mnist_sample(seed=3, normalize=False)
    (x2, y2), _ = datasets.load_mnist_sample(seed=3, normalize=False)
    (x3, _), _ = datasets.load_mnist_sample(seed=4, normalize=False)
    assert np.array_equal(x1, x2) and np.array_equal(y1, y2)
    assert not np.array_equal(x1, x3)
    assert x1.dtype == np.uint8 and x1.shape == (4000, 28, 28)
    train_rows = {r.tobytes() for r in x1}
    assert not any(r.tobytes() in train_rows for r in xt1[:50])


def test_mnist_sample_bad_fraction():
    with pytest.raises(ValueError, match=r"test_fraction must be in \[0, 1\)"):
        datasets.load_mnist_sample(test_fraction=1.0)
