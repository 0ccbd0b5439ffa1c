"""Freezing groups: a model's trainable variables cut into suffix groups.

A block starts at a layer with a kernel (Conv, Dense, Embedding, ...); the
layers after it without one (normalization, bias-only layers) join it. Group
k holds every block from k * stride to the end, so freezing group k's
complement freezes a prefix of the network. MindSpore's stride is
`blocks // param_groups`, at least one block per group once there are
enough blocks; at the level's default `param_groups` keras_boost keeps that
"at least one block per group" on small models too (`group_count`).
"""

import warnings

from keras_boost import keras_private
from keras_boost.errors import NoEffectWarning
from keras_boost.algorithms.freezing import schedule as freeze_schedule

__all__ = ["BLOCK_STARTERS", "group_count", "groups_from_blocks", "model_blocks", "variable_blocks"]

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


def _depth_first(layer, seen=None):
    """`layer` and its sublayers, depth-first, each child in tracking order:
    graph order for functional models, attribute order inside subclassed
    ones. (Keras' own recursive walk lists a nested model's layers
    output-first, which would put the top of a nested base first.)"""
    seen = set() if seen is None else seen
    if id(layer) in seen:
        return
    seen.add(id(layer))
    yield layer
    for child in keras_private.flatten_layers(layer, include_self=False, recursive=False):
        yield from _depth_first(child, seen)


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
    for layer in _depth_first(model):
        fresh = [
            v for v in keras_private.layer_own_variables(layer, non_trainable=False)
            if id(v) in trainable and id(v) not in seen
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


def group_count(blocks, n, fit):
    """How many groups `n` requested groups make on `blocks`.

    With `fit` (the level's default, where the user did not choose
    `param_groups`), at most one group per block: a 3-block model gets 3
    groups, not 10 identical ones. Without it, MindSpore's `n` as is.
    """
    return max(1, min(n, len(blocks))) if fit else n


def groups_from_blocks(blocks, n, where="model", fit=False):
    """Suffix groups (see `group_count` for `fit`).

    Without `fit`, warns (NoEffectWarning) when there are fewer blocks than
    groups: every group is then the whole network (MindSpore's behaviour).
    """
    if not fit and len(blocks) < n:
        what = f"{len(blocks)} block(s)" if blocks else "no trainable variable"
        warnings.warn(
            f"Gradient freezing: the {where} has {what} but "
            f"param_groups={n}, so every group is the whole network and nothing "
            f"is ever frozen. Use param_groups <= {max(1, len(blocks))}, or leave "
            "param_groups out to get one group per block.",
            NoEffectWarning,
            stacklevel=3,
        )
    return freeze_schedule.suffix_groups(blocks, group_count(blocks, n, fit))
