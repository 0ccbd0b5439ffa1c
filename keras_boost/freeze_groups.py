"""Freezing groups: a model's trainable variables cut into suffix groups.

A block starts at a layer with a kernel (Conv, Dense, Embedding, ...); the
layers after it without one (normalization, bias-only layers) join it. Group
k holds every block from k * stride to the end, so freezing group k's
complement freezes a prefix of the network.
"""

import warnings

from keras_boost.errors import NoEffectWarning
from keras_boost.ops import freeze_schedule

# Variables that open a block: the weight matrix of a conv/dense/embedding
# layer. Biases and normalization parameters join the block before them.
BLOCK_STARTERS = ("kernel", "depthwise_kernel", "pointwise_kernel", "embeddings")


def _starts_block(layer_variables):
    return any(v.name in BLOCK_STARTERS for v in layer_variables)


def variable_blocks(variables):
    """Blocks from a variable list in layer order (no model at hand).

    A kernel-like variable opens a block; everything else joins the open one.
    """
    blocks = []
    for v in variables:
        if v.name in BLOCK_STARTERS or not blocks:
            blocks.append([v])
        else:
            blocks[-1].append(v)
    return blocks


def model_blocks(model):
    """The model's trainable variables as blocks, by layer structure.

    A layer with a kernel (Conv, Dense, Embedding, ...) opens a block; the
    layers after it without one (BatchNormalization, LayerNormalization, a
    bias-only layer) join it. Every trainable variable lands in exactly one
    block; variables no layer walk reaches join the last block (always
    trained).
    """
    trainable = {id(v) for v in model.trainable_variables}
    seen, blocks = set(), []
    # Depth-first in tracking order: graph order for functional models,
    # attribute order inside subclassed ones.
    for layer in model._flatten_layers(include_self=True, recursive=True):
        fresh = [
            v for v in layer._trainable_variables if id(v) in trainable and id(v) not in seen
        ]
        if not fresh:
            continue
        seen.update(id(v) for v in fresh)
        if _starts_block(fresh) or not blocks:
            blocks.append(fresh)
        else:
            blocks[-1].extend(fresh)
    rest = [v for v in model.trainable_variables if id(v) not in seen]
    if rest:
        if blocks:
            blocks[-1].extend(rest)
        else:
            blocks.append(rest)
    return blocks


def groups_from_blocks(blocks, n, where="model"):
    """Suffix groups; warns (NoEffectWarning) when there are fewer blocks than groups."""
    if len(blocks) < n:
        warnings.warn(
            f"Gradient freezing: the {where} has {len(blocks)} block(s) but "
            f"param_groups={n}, so every group is the whole network and nothing "
            f"is ever frozen. Use param_groups <= {len(blocks)}.",
            NoEffectWarning,
            stacklevel=3,
        )
    return freeze_schedule.suffix_groups(blocks, n)
