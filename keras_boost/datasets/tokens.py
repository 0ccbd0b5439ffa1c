"""A generated token-sequence classification task (NumPy only, nothing downloads).

`token_task` makes padded sequences of token ids whose label is the class
of the first of two planted keywords: a task that a small transformer
learns in a few epochs on CPU, but that a bag-of-words model cannot solve
(it sees which two classes are present, not which comes first).
"""

import numpy as np

__all__ = ["token_task"]


def _check_int(name, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low or (
        high is not None and value > high
    ):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"token_task {name} must be an int {bounds}, got {value!r}.")


def token_task(
    seed=0,
    num_train=8000,
    num_test=2000,
    sequence_length=64,
    vocabulary_size=1000,
    num_classes=4,
    keywords_per_class=16,
    min_length=None,
    label_noise=0.05,
):
    """A learnable token-sequence classification task: which keyword comes first.

    Each class owns `keywords_per_class` keyword tokens; every other id
    (except 0) is a noise token. A sequence is `length` noise tokens, drawn
    uniformly, with `length` uniform in `[min_length, sequence_length]`,
    then 0s (padding, at the end) up to `sequence_length`. Two keywords of
    two different classes replace the noise tokens at two distinct random
    positions, and the label is the class of the one that comes first.
    Within a class, keywords are drawn with Zipfian frequencies (the k-th
    most frequent with probability proportional to 1 / k), as words are in
    text: the frequent ones are learned in the first epochs, the rare ones
    later, so test accuracy rises over the epochs rather than in one step.

    What a model must learn:

    - which tokens are keywords, and of which class: a bag-of-words model
      gets that far, and its accuracy stops at 50% (it knows the two
      classes present, not their order);
    - which of the two comes first: attention between the two keywords
      and the positions (the order relation).

    `label_noise` of the labels, in the training and the test split alike,
    are replaced by another class drawn uniformly, so the best test
    accuracy is about `1 - label_noise` (0.95 by default) rather than 1.

    The keyword ids, the sequences and the noisy labels are drawn from one
    `np.random.default_rng(seed)`: the task is the same for the same
    arguments, and another seed makes other keywords and sequences. The
    test split is drawn with the training split (same keywords, same
    distribution), after it.

    Args:
        seed: seed of the generator.
        num_train: number of training sequences.
        num_test: number of test sequences.
        sequence_length: length of every (padded) sequence, >= 2.
        vocabulary_size: token ids are in `[0, vocabulary_size)`; 0 is
            padding. Must leave at least one noise token beside the
            `num_classes * keywords_per_class` keywords.
        num_classes: number of classes, >= 2.
        keywords_per_class: keywords of each class.
        min_length: shortest sequence before padding, in `[2,
            sequence_length]`; default `sequence_length // 2` (at least 2).
            `sequence_length` makes every sequence unpadded.
        label_noise: fraction of labels replaced by another class, in
            `[0, 1)`.

    Returns:
        `(x_train, y_train), (x_test, y_test)`: int32 token ids of shape
        `(n, sequence_length)` and int32 labels in `[0, num_classes)`.

    Example:

    ```python
    (x, y), (x_test, y_test) = boost.datasets.token_task(seed=0)
    x.shape, x.dtype, y.max()   # (8000, 64), dtype('int32'), 3
    ```
    """
    _check_int("num_train", num_train, 1)
    _check_int("num_test", num_test, 1)
    _check_int("sequence_length", sequence_length, 2)
    _check_int("num_classes", num_classes, 2)
    _check_int("keywords_per_class", keywords_per_class, 1)
    keywords = num_classes * keywords_per_class
    _check_int("vocabulary_size", vocabulary_size, keywords + 2)
    if min_length is None:
        min_length = max(2, sequence_length // 2)
    _check_int("min_length", min_length, 2, sequence_length)
    if isinstance(label_noise, bool) or not isinstance(label_noise, (int, float)) or not 0 <= label_noise < 1:
        raise ValueError(f"token_task label_noise must be a fraction in [0, 1), got {label_noise!r}.")

    rng = np.random.default_rng(seed)
    n = num_train + num_test
    rows = np.arange(n)
    # Keyword ids anywhere in the vocabulary (not 1..K): a model cannot
    # tell them by their id.
    ids = rng.permutation(np.arange(1, vocabulary_size))
    keyword_ids = ids[:keywords].reshape(num_classes, keywords_per_class)
    noise_ids = np.sort(ids[keywords:])
    lengths = rng.integers(min_length, sequence_length + 1, size=n)
    x = noise_ids[rng.integers(0, len(noise_ids), size=(n, sequence_length))]
    x[np.arange(sequence_length)[None, :] >= lengths[:, None]] = 0

    first_class = rng.integers(0, num_classes, size=n)
    second_class = (first_class + rng.integers(1, num_classes, size=n)) % num_classes
    # Two distinct positions within each sequence's length.
    a = rng.integers(0, lengths)
    b = rng.integers(0, lengths - 1)
    b = b + (b >= a)
    first_position, second_position = np.minimum(a, b), np.maximum(a, b)
    frequency = 1.0 / np.arange(1, keywords_per_class + 1)
    rank = rng.choice(keywords_per_class, size=(n, 2), p=frequency / frequency.sum())
    x[rows, first_position] = keyword_ids[first_class, rank[:, 0]]
    x[rows, second_position] = keyword_ids[second_class, rank[:, 1]]

    y = first_class
    noisy = rng.random(n) < label_noise
    y[noisy] = (y[noisy] + rng.integers(1, num_classes, size=int(noisy.sum()))) % num_classes
    x, y = x.astype(np.int32), y.astype(np.int32)
    return (x[:num_train], y[:num_train]), (x[num_train:], y[num_train:])
