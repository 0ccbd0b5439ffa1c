"""Gradient-norm statistics for the gradient noise scale, in `keras.ops`.

`GradientAccumulation` measures, per window of k micro-batches, the two
inputs of `keras_boost.algorithms.batch_size.simple_noise_scale` (McCandlish
et al. 2018, appendix A): the mean over the micro-batches of the squared
global norm of each micro-batch gradient (batch b) and the squared global norm
of the window's mean gradient (batch k * b). The math is here; the state and
when it updates are the optimizer's.
"""

from keras import ops

__all__ = ["squared_global_norm", "window_gradient_norms"]


def squared_global_norm(tensors):
    """`sum_i sum(t_i ** 2)` over `tensors` (None entries skipped), in float32.

    The tensors are cast to float32 before squaring, so float16 / bfloat16
    gradients neither overflow nor lose the sum. Sparse gradients (TF
    `IndexedSlices`) are densified first, so repeated indices add up as in the
    dense gradient.

    Example:

    ```python
    squared_global_norm([np.array([3.0, 4.0]), None, np.array([[1.0]])])  # 26.0
    ```
    """
    total = ops.zeros((), dtype="float32")
    for tensor in tensors:
        if tensor is not None:
            tensor = ops.cast(ops.convert_to_tensor(tensor), "float32")
            total = total + ops.sum(ops.square(tensor))
    return total


def window_gradient_norms(sq_norm_sum, measured, steps, mean_gradients):
    """The two squared norms of a completed window, and whether they are valid.

    Args:
        sq_norm_sum: the sum over the window's micro-batches of each
            micro-batch gradient's squared global norm (float32 scalar).
        measured: how many micro-batches entered `sq_norm_sum`.
        steps: how many micro-batches the window holds (its divisor).
        mean_gradients: the window's mean gradient (a list of tensors).

    Returns:
        `(sq_norm_small, sq_norm_big, valid)`: `sq_norm_sum / steps`,
        `squared_global_norm(mean_gradients)`, and a boolean scalar that is
        true when every micro-batch of the window was measured and the window
        holds at least 2 (with one micro-batch there is no second batch size).

    Example:

    ```python
    # Two micro-batch gradients [1, 0] and [0, 1]: mean [0.5, 0.5].
    window_gradient_norms(2.0, 2, 2, [np.array([0.5, 0.5])])  # (1.0, 0.5, True)
    ```
    """
    steps = ops.cast(steps, "int32")
    measured = ops.cast(measured, "int32")
    divisor = ops.cast(ops.maximum(steps, 1), "float32")
    small = ops.cast(sq_norm_sum, "float32") / divisor
    big = squared_global_norm(mean_gradients)
    valid = ops.logical_and(ops.equal(measured, steps), ops.greater_equal(steps, 2))
    return small, big, valid
