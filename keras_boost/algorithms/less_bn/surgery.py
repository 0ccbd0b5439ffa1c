"""`LessBN`: remove the BatchNormalization layers MindSpore's LessBN pass removes.

One matcher (`find_less_bn`) walks a model's graph from every root layer call
and tries the patterns of `keras_boost.algorithms.less_bn.patterns` in order; the BNs
of the first full match go. `LessBN` then rebuilds the model without them
(`keras_boost.graph.rebuild`: Functional graphs with their operations,
masks, shared layers and nested models, or Sequential ones). Every other
layer is a fresh copy carrying the original's weights and trainable flags,
so the input model is never mutated and training the new model never
touches it. A layer that cannot be copied raises a `TypeError` naming it,
before anything is returned. When nothing is removed and no head is
swapped, no copy is made: the model itself is returned.

Differences from MindSpore, on purpose:

- the BNs are removed from the model (MindSpore keeps their parameters,
  frozen at their initial values); the rest of the math is the same: BN(x)
  becomes x;
- a BN layer shared by several calls goes only if every one of its calls
  matched;
- a BN that is frozen (`trainable=False`, on itself or on a model enclosing
  it) or was trained (its moving statistics left Keras' initial 0 and 1) is
  kept unless `remove_pretrained_bn=True`: it belongs to a pretrained part
  the user did not ask to rewrite;
- nested Functional/Sequential sub-models are matched on their own graphs
  (a pattern does not cross a sub-model boundary);
- `fn_flag` swaps only classification heads (a Dense producing a model
  output with softmax, or linear logits trained with a crossentropy loss),
  and starts the head's scale at `head_scale(dense)` instead of
  MindSpore's 1 (measured: docs/methods/less_bn.md).
"""

import dataclasses
import warnings

from keras_boost.algorithms.less_bn.dry_run import patterns_without
from keras_boost.algorithms.less_bn.dry_run import plan_removal
from keras_boost.algorithms.less_bn.dry_run import why_nothing_removed
from keras_boost.algorithms.less_bn.head import find_heads
from keras_boost.algorithms.less_bn.head import head_scale
from keras_boost.algorithms.less_bn.head import swap_text
from keras_boost.algorithms.less_bn.normalized_dense import NormalizedDense
from keras_boost.algorithms.less_bn.report import REPORT_ATTR
from keras_boost.errors import NoEffectWarning
from keras_boost.graph import rebuild

__all__ = ["LessBN", "less_bn_for_config"]


_SWITCH_OFF = '{"boost": {"mode": "manual", "less_bn": false}}'
_HEAD_NEEDS_REMOVAL = (
    "fn_flag: no head replaced, because no BatchNormalization is removed: the NormalizedDense "
    "head compensates for removed BNs, and alone it slowed early training (ResNet50V2: 1.3-4.7x "
    "plain's loss; docs/methods/less_bn.md). boost.LessBN(model, fn_flag=True) swaps it anyway."
)


def LessBN(model, fn_flag=False, remove_pretrained_bn=False, exclude_patterns=()):  # noqa: N802 (MindSpore's name)
    """Returns a copy of `model` without the BNs MindSpore's LessBN removes.

    The patterns (`keras_boost.algorithms.less_bn.patterns`) are MindSpore's: in ResNet
    bottlenecks bn1, bn2 and the projection-shortcut BN go (bn3 and the stem
    stay: 36 of the 53 BNs of ResNet-50); in ResNet-18/34 basic blocks bn1
    and the shortcut BN; in MobileNetV2 the expand-conv BNs and the BN of the
    last conv before global pooling; in DenseNet the first BN of each dense
    layer fed by a concatenation. A removed BN becomes the identity; every
    other layer and operation of the graph is copied with its weights and
    trainable flags (the input model is not changed).

    A BN that is frozen (`trainable=False`, on itself or on a model enclosing
    it, as in a transfer-learning base) or was trained (its moving statistics
    are no longer Keras' initial mean 0 and variance 1) stays, with a note in
    the report, unless `remove_pretrained_bn=True`.

    With `fn_flag=True` every classification head is replaced by
    `keras_boost.layers.NormalizedDense`: a trainable `Dense` that produces a
    model output, is called once, has >= 2 units and a softmax activation, or
    no (linear) activation with a crossentropy loss for that output in the
    model's compile config (a single-output model that is not compiled counts
    as logits, with a note). It is initialized from the Dense's kernel,
    `kernel_regularizer`, `kernel_constraint`, `activity_regularizer` and
    dtype policy (the bias and its regularizer are dropped) with the initial
    scale `head_scale(dense)` (the replaced Dense's logit spread; MindSpore's
    1 stalls the first epochs). Any other Dense output (a regression output,
    a sigmoid, ReLU, tanh... head) is kept, with a note in the report; a
    `keras_boost.NoEffectWarning` when no head at all is replaced.

    A model where nothing is removed (and no head is replaced) gets a
    `NoEffectWarning` and is returned as is. A head swap alone (no BN
    removed) is applied, with a `NoEffectWarning` saying so (AutoBoost does
    not swap a head alone). What was removed and kept is in the returned
    model's `less_bn_report` (a `LessBNReport`; print it).

    Args:
        model: a built Functional or Sequential `keras.Model` (subclassed
            models raise `TypeError`: they have no layer graph).
        fn_flag: also replace the classification heads by `NormalizedDense`.
        remove_pretrained_bn: also remove the frozen and trained BNs that a
            pattern matches.
        exclude_patterns: names of patterns not to apply (see
            `keras_boost.algorithms.less_bn.patterns.PATTERNS`), e.g.
            `["InvertedResidual2"]` keeps MobileNetV2's last BN (`Conv_1_bn`).

    Returns:
        The new `keras.Model` (compiled from the original's compile config if
        the original was compiled).

    Raises:
        TypeError: a subclassed model; a bad `fn_flag`,
            `remove_pretrained_bn` or `exclude_patterns`; a layer that
            cannot be re-created from its config (the error names it and
            says how to fix it; the input model is unchanged).
        ValueError: an unknown pattern name in `exclude_patterns`.

    Example:

    ```python
    import keras_boost as boost
    model = keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), classes=10)
    lean = boost.LessBN(model, fn_flag=True)
    print(lean.less_bn_report)   # removed 36 of 53 BatchNormalization layers ...
    lean.compile(optimizer=boost.GradientCentralization(keras.optimizers.SGD(0.1), model=lean),
                 loss="sparse_categorical_crossentropy")
    ```
    """
    return _less_bn(model, fn_flag, remove_pretrained_bn, exclude_patterns, swap_head_alone=True)


def less_bn_for_config(model, section):
    """`LessBN` as `AutoBoost` applies it, from a resolved `less_bn` config section.

    The same surgery, except that the head is swapped only where LessBN
    removes BNs: the normalized head compensates for the removed BNs, and
    alone it slows early training (measured in docs/methods/less_bn.md).

    Example:

    ```python
    from keras_boost.algorithms.less_bn import less_bn_for_config
    new = less_bn_for_config(model, boost.AutoBoost("O1").config["less_bn"])
    ```
    """
    return _less_bn(model, section["fn_flag"], section["remove_pretrained_bn"], section["exclude_patterns"],
                    swap_head_alone=False)


def _less_bn(model, fn_flag, remove_pretrained_bn, exclude_patterns, swap_head_alone):
    for name, value in (("fn_flag", fn_flag), ("remove_pretrained_bn", remove_pretrained_bn)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}.")
    report, removed = plan_removal(model, patterns_without(exclude_patterns),
                                    remove_pretrained_bn=remove_pretrained_bn)
    heads, head_notes = [], []
    if fn_flag and (removed or swap_head_alone):
        heads, head_notes = find_heads(model)
    elif fn_flag:
        head_notes = [_HEAD_NEEDS_REMOVAL]
    notes = list(report.notes) + head_notes
    if not removed and not heads:
        warnings.warn(
            f"LessBN found nothing to remove in {model.name!r}: {why_nothing_removed(report)}. The "
            "model is returned unchanged." + "".join(f" Note: {n}" for n in notes),
            NoEffectWarning,
            stacklevel=3,
        )
        return model
    if fn_flag and not heads:
        warnings.warn(f"LessBN on {model.name!r}: no head replaced. " + " ".join(head_notes),
                      NoEffectWarning, stacklevel=3)
    # Everything below works on copies: an error leaves `model` as it was.
    scales = {id(dense): head_scale(dense) for dense in heads}
    replacements = {
        id(dense): NormalizedDense.from_dense(dense, initial_scale=scales[id(dense)]) for dense in heads
    }
    new = rebuild(model, "LessBN", removed, replacements, switch_off=_SWITCH_OFF)
    head_text = "; ".join(swap_text(dense, scales[id(dense)]) for dense in heads) or None
    if not removed:
        notes.append("no BatchNormalization removed; only the head was replaced.")
        warnings.warn(
            f"LessBN on {model.name!r}: {why_nothing_removed(report)}, so none was removed; only the "
            f"head changed ({head_text}).",
            NoEffectWarning,
            stacklevel=3,
        )
    setattr(new, REPORT_ATTR, dataclasses.replace(report, head=head_text, notes=tuple(notes)))
    return new
