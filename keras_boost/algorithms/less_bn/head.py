"""The head `fn_flag` replaces: which Dense is a classification head, and its initial scale."""

import keras

from keras_boost.algorithms.less_bn.graph_view import LayerGraph
from keras_boost.algorithms.less_bn.normalized_dense import matched_scale

__all__ = ["find_heads", "head_scale", "swap_text"]

_CLASSIFICATION_LOSSES = (
    keras.losses.CategoricalCrossentropy,
    keras.losses.SparseCategoricalCrossentropy,
    keras.losses.BinaryCrossentropy,
    keras.losses.CategoricalFocalCrossentropy,
    keras.losses.BinaryFocalCrossentropy,
)
_CLASSIFICATION_LOSS_FUNCTIONS = (
    keras.losses.categorical_crossentropy,
    keras.losses.sparse_categorical_crossentropy,
    keras.losses.binary_crossentropy,
    keras.losses.categorical_focal_crossentropy,
    keras.losses.binary_focal_crossentropy,
)


def _is_classification_loss(loss):
    """Whether `loss` (as given to `compile`) is of Keras' crossentropy family."""
    if isinstance(loss, str):
        try:
            loss = keras.losses.get(loss)
        except ValueError:
            return False
    return isinstance(loss, _CLASSIFICATION_LOSSES) or any(loss is f for f in _CLASSIFICATION_LOSS_FUNCTIONS)


def _output_loss(model, index):
    """The loss `model` was compiled with for its output `index`, or None."""
    loss = getattr(model, "loss", None) if model.compiled else None
    if isinstance(loss, dict):
        names = getattr(model, "output_names", None) or []
        return loss.get(names[index]) if index < len(names) else None
    if isinstance(loss, (list, tuple)):
        return loss[index] if index < len(loss) else None
    return loss


def _activation_name(layer):
    activation = keras.activations.serialize(layer.activation)
    return activation if isinstance(activation, str) else getattr(
        layer.activation, "__name__", repr(layer.activation))


def _loss_name(loss):
    return loss if isinstance(loss, str) else getattr(loss, "name", None) or getattr(
        loss, "__name__", type(loss).__name__)


def _judge_head(model, graph, index, dense):
    """`(swap, note)` for the Dense producing output `index`: whether it is a
    classification head `fn_flag` replaces, and a note for the report."""
    name = repr(dense.name)
    if type(dense) is not keras.layers.Dense:
        return False, f"fn_flag: {name} is a Dense subclass; no head replaced."
    calls = sum(1 for _, layer in graph.items() if layer is dense)
    if calls != 1:
        return False, f"fn_flag: the Dense {name} is called {calls} times; no head replaced."
    if not dense.trainable:
        return False, f"fn_flag: the head Dense {name} is frozen (trainable=False); it is kept."
    if not any(dense.activation is a for a in (keras.activations.softmax, keras.activations.linear)):
        return False, (
            f"fn_flag: the head Dense {name} has the activation {_activation_name(dense)!r}; "
            "NormalizedDense replaces only a head with no (linear) or a softmax activation, "
            f"because scaled cosine logits would change what a {_activation_name(dense)} output "
            "means. The Dense is kept."
        )
    if dense.units < 2:
        return False, (f"fn_flag: the head Dense {name} has 1 unit, not the >= 2 classes of a "
                       "classification head; it is kept.")
    if dense.activation is keras.activations.softmax:
        return True, None
    loss = _output_loss(model, index)
    if loss is not None:
        if _is_classification_loss(loss):
            return True, None
        return False, (
            f"fn_flag: the linear head Dense {name} is trained with {_loss_name(loss)!r}, not a "
            "classification (crossentropy) loss: it is taken for a regression output and kept."
        )
    if len(model.outputs) == 1:
        return True, (
            f"fn_flag: the linear head Dense {name} was taken for classification logits (the "
            "model is not compiled, so no loss says otherwise). If it is a regression output, "
            "compile the model with its loss before the surgery, or set fn_flag to false."
        )
    return False, (
        f"fn_flag: the linear head Dense {name} of this multi-output model has no "
        "classification loss (compile the model with a crossentropy loss for it to swap it); "
        "it is taken for a regression output and kept."
    )


def find_heads(model):
    """The Dense heads `fn_flag` replaces, and the notes on the others."""
    graph = LayerGraph(model)
    heads, notes = [], []
    for index, operation in enumerate(graph.output_operations()):
        if isinstance(operation, keras.layers.Dense):
            swap, note = _judge_head(model, graph, index, operation)
            if swap and operation not in heads:
                heads.append(operation)
            if note:
                notes.append(note)
    if heads or notes:
        return heads, notes
    dense = [l for l in model.layers if isinstance(l, keras.layers.Dense)]
    if not dense:
        return [], ["fn_flag: the model has no Dense layer; no head replaced."]
    return [], [
        f"fn_flag: the last Dense {dense[-1].name!r} does not produce a model output (other "
        "layers follow it); no head replaced. Put the Dense last (fold a following activation "
        "into it) to get a NormalizedDense head."
    ]


def head_scale(dense):
    """The initial scale LessBN gives the `NormalizedDense` replacing `dense`.

    `matched_scale(dense.kernel)` (`keras_boost.algorithms.less_bn.normalized_dense`):
    the scale at which the new head's logits have the Dense's spread on
    isotropic inputs, `sqrt(d * mean_j ||w_j||**2)` (about 10.5 for a
    Glorot-initialized 64 -> 10 head). MindSpore starts at 1, which keeps
    every logit in [-1, 1] and stalls the first epochs; the measurement
    behind the rule is in docs/methods/less_bn.md.

    Example:

    ```python
    from keras_boost.algorithms.less_bn import head_scale
    dense = keras.layers.Dense(10); dense.build((None, 64))
    head_scale(dense)   # about 10.5
    ```
    """
    return matched_scale(dense.kernel)


def swap_text(dense, scale):
    """The report's line for one head swap: what was kept, what dropped."""
    kept = ["kernel"] + [
        n for n in ("kernel_regularizer", "kernel_constraint", "activity_regularizer")
        if getattr(dense, n) is not None
    ]
    dropped = ["bias"] + [n for n in ("bias_regularizer", "bias_constraint") if getattr(dense, n) is not None]
    dropped = ", ".join(dropped) + " dropped" if dense.use_bias else "no bias to drop"
    return (
        f"Dense {dense.name!r} -> NormalizedDense ({', '.join(kept)} and dtype policy "
        f"{dense.dtype_policy.name!r} kept; {dropped}; initial scale {scale:.3g} = "
        "matched_scale(kernel))"
    )
