"""LessBN's BN-removal patterns, as data.

A port of the 16 patterns of MindSpore's graph pass
`less_batch_normalization.cc` (revision ab8485f0, the one that also removes
projection-shortcut BNs), rewritten over Keras layers.

How to read a pattern:

- A pattern is tried at a **root** layer call (one of `ROOT_KINDS`: `Add`,
  ReLU6, `Dense` (MindSpore's MatMul), `Concatenate` (MakeTuple) and
  max pooling). It has one or two **branches**.
- A branch is matched against one input of the root: starting at the layer
  that produced that input, each element must match the layer reached, then
  the walk moves to the producer of that layer's *first* input (MindSpore
  walks input #1). `ZeroPadding` layers are transparent (MindSpore pads
  inside the convolution). A branch ends when its elements are used up.
- Elements are layer kinds (`KINDS`). `"bn-"` is a BatchNormalization that
  is **removed** when the whole pattern matches; `"bn"` must be there and
  stays.
- MindSpore's `[TupleGetItem, BatchNorm]` node pair is one Keras
  `BatchNormalization` layer; a lone TupleGetItem slot (a wildcard in
  MindSpore) is `"any"`.

Deviation from MindSpore, on purpose: MindSpore matches branch 1 to root
input 1 and branch 2 to root input 2. Keras graphs write the operands in
either order (Keras Applications' ResNet computes `Add([shortcut, x])`,
MindSpore's ResNet `x + shortcut`), so here branches may match the root's
inputs in any order. Everything else (which patterns exist, their order,
first full match wins per root, which BNs go) follows the pass.

Example:

```python

from keras_boost.algorithms.less_bn import patterns
[p.name for p in patterns.PATTERNS][:2]
# ['ResidualStructureBase', 'ResidualStructureShortCut']
```
"""

import dataclasses

import keras

__all__ = ["KINDS", "Pattern", "PATTERNS", "REMOVED_BN", "ROOT_KINDS", "TRANSPARENT_CLASSES"]

REMOVED_BN = "bn-"


def _relu_like(layer, max_value):
    if isinstance(layer, keras.layers.ReLU):
        limit = None if layer.max_value is None else float(layer.max_value)
        return (
            limit == max_value
            and float(layer.negative_slope) == 0.0
            and float(layer.threshold) == 0.0
        )
    if isinstance(layer, keras.layers.Activation):
        name = getattr(layer.activation, "__name__", "")
        return name == ("relu" if max_value is None else "relu6")
    return False


def _linear(layer):
    activation = getattr(layer, "activation", None)
    return activation is None or getattr(activation, "__name__", "") == "linear"


_CONV_CLASSES = (
    keras.layers.Conv1D,
    keras.layers.Conv2D,
    keras.layers.Conv3D,
    keras.layers.DepthwiseConv1D,
    keras.layers.DepthwiseConv2D,
    keras.layers.SeparableConv1D,
    keras.layers.SeparableConv2D,
)
_MAX_POOL_CLASSES = (
    keras.layers.MaxPooling1D,
    keras.layers.MaxPooling2D,
    keras.layers.MaxPooling3D,
)
_GLOBAL_AVG_CLASSES = (
    keras.layers.GlobalAveragePooling1D,
    keras.layers.GlobalAveragePooling2D,
    keras.layers.GlobalAveragePooling3D,
)
# Layers the walk steps through without consuming a pattern element.
TRANSPARENT_CLASSES = (
    keras.layers.ZeroPadding1D,
    keras.layers.ZeroPadding2D,
    keras.layers.ZeroPadding3D,
)

# Layer kind -> predicate on a Keras operation. MindSpore primitive in brackets.
KINDS = {
    "bn": lambda op: isinstance(op, keras.layers.BatchNormalization),  # [BatchNorm]
    "conv": lambda op: isinstance(op, _CONV_CLASSES) and _linear(op),  # [Conv2D, any group]
    "relu": lambda op: _relu_like(op, None),  # [ReLU]
    "relu6": lambda op: _relu_like(op, 6.0),  # [ReLU6]
    "add": lambda op: isinstance(op, keras.layers.Add),  # [Add]
    "concat": lambda op: isinstance(op, keras.layers.Concatenate),  # [Concat]
    "maxpool": lambda op: isinstance(op, _MAX_POOL_CLASSES),  # [MaxPool]
    "global_avg": lambda op: isinstance(op, _GLOBAL_AVG_CLASSES),  # [ReduceMean]
    "dense": lambda op: isinstance(op, keras.layers.Dense),  # [MatMul]
    "any": lambda op: True,  # [TupleGetItem wildcard]
}
KINDS[REMOVED_BN] = KINDS["bn"]

# The layer kinds the pass starts from (MindSpore: Add, ReLU6, MatMul,
# MakeTuple, MaxPool).
ROOT_KINDS = ("add", "relu6", "dense", "concat", "maxpool")


@dataclasses.dataclass(frozen=True)
class Pattern:
    """One LessBN pattern: `name`, its `branches` and what it is for.

    Each branch is a tuple of layer kinds (keys of `KINDS`) read from the
    root's input backwards; `"bn-"` marks the BNs the pattern removes.
    """

    name: str
    branches: tuple
    doc: str = ""

    def __post_init__(self):
        if not 1 <= len(self.branches) <= 2:
            raise ValueError(f"Pattern {self.name!r} needs 1 or 2 branches, got {len(self.branches)}.")
        for branch in self.branches:
            unknown = [k for k in branch if k not in KINDS]
            if unknown or not branch:
                raise ValueError(
                    f"Pattern {self.name!r}: unknown layer kinds {unknown} (valid: {sorted(KINDS)})."
                )
        if not any(REMOVED_BN in branch for branch in self.branches):
            raise ValueError(f"Pattern {self.name!r} removes nothing (no {REMOVED_BN!r}).")


_BOTTLENECK = ("bn", "conv", "relu", "bn-", "conv", "relu", "bn-", "conv")  # bn3 kept
_BASIC = ("bn", "conv", "relu", "bn-", "conv")  # bn2 kept, bn1 removed
_PROJECTION = ("bn-", "conv")
_INVERTED = ("bn", "conv", "relu6", "bn", "conv", "relu6", "bn-", "conv")  # expand BN removed
_DENSE_LAYER = ("conv", "relu", "bn", "conv", "relu")  # conv2 <- relu <- bn2 <- conv1 <- relu

# In MindSpore's order; the first pattern that matches a root wins.
PATTERNS = (
    Pattern("ResidualStructureBase", (_BOTTLENECK + ("relu",), _PROJECTION),
            "ResNet bottleneck fed by a ReLU, projection shortcut: bn1, bn2 and the shortcut BN go."),
    Pattern("ResidualStructureShortCut", (_BOTTLENECK + ("relu",), ("relu",)),
            "ResNet bottleneck, identity shortcut: bn1 and bn2 go."),
    Pattern("ResidualStructureFirstStep", (_BOTTLENECK, _PROJECTION),
            "First bottleneck (any input, e.g. after max pooling), projection: bn1, bn2, shortcut BN."),
    Pattern("BasicStructBase", (_BASIC + ("relu",), _PROJECTION),
            "ResNet-18/34 basic block fed by a ReLU, projection shortcut: bn1 and the shortcut BN."),
    Pattern("BasicStructFirstStep", (_BASIC, ("maxpool",)),
            "Basic block right after max pooling, identity shortcut: bn1."),
    Pattern("BasicStructShortCut", (_BASIC + ("relu",), ("relu",)),
            "Basic block, identity shortcut: bn1."),
    Pattern("InvertedResidualShortCut", (("any",), _INVERTED + ("bn",)),
            "MobileNetV2 residual block after a block without residual: the expand BN."),
    Pattern("InvertedResidual", (("bn-", "conv", "add"),),
            "Root ReLU6: the BN of a conv fed by a residual Add (expand BN after a residual block)."),
    Pattern("InvertedResidualShortCut2", (("add",), _INVERTED + ("add",)),
            "MobileNetV2 residual block after a residual block: the expand BN."),
    Pattern("InvertedResidual2", (("global_avg", "relu6", "bn-", "conv"),),
            "Root Dense: the BN of the last conv before global average pooling."),
    Pattern("InvertedResidual3",
            (("bn", "conv", "relu6", "bn-", "conv", "bn", "conv", "relu6", "bn", "conv", "relu6", "bn"),),
            "Root ReLU6 (depthwise): the expand BN of a block fed by a block without residual."),
    Pattern("DenseBlockShortCut", (("concat",), _DENSE_LAYER + ("bn-", "concat")),
            "DenseNet layer fed by a concatenation: its first BN (norm1)."),
    Pattern("DenseBlock", (("conv", "relu", "bn-", "concat"),),
            "Root with a BN-ReLU-Conv fed by a concatenation as input: that BN."),
    Pattern("DenseBlockShortCut2", (_DENSE_LAYER + ("bn-", "concat"), ("concat",)),
            "Pattern DenseBlockShortCut with the operands swapped (same BN)."),
    Pattern("DenseBlockPool", (("conv", "relu", "bn-", "conv", "relu", "bn", "maxpool"), ("concat",)),
            "DenseNet layer fed by max pooling, other operand a concatenation: its second BN (norm2)."),
    Pattern("DenseBlockPool2", (("concat",), ("conv", "relu", "bn-", "conv", "relu", "bn", "maxpool")),
            "Pattern DenseBlockPool with the operands swapped (same BN)."),
)
