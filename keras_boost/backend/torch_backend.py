"""PyTorch seams: autograd restricted to the trained variables; the fused batch norm."""

import torch
from keras import ops
from keras import tree

from keras_boost import keras_private

__all__ = [
    "all_replicas",
    "apply",
    "apply_if",
    "assign_each",
    "assign_where",
    "distributed_logs",
    "forward_without_grad",
    "training_batch_norm",
    "global_batch_sum",
    "loss_and_grads",
    "replica_layout",
    "run_on_replicas",
    "static_value",
    "symbolic_build_batch",
    "worker_role",
]


def loss_and_grads(model, x, y, sample_weight, trained, optimizer):
    """Forward, loss, `optimizer.scale_loss`, gradients of `trained` only."""
    y_pred = model(x, **keras_private.training_kwargs(model, True))
    loss = keras_private.compute_loss(model, x, y, y_pred, sample_weight)
    keras_private.loss_tracker(model).update_state(
        loss, sample_weight=next(i for i in tree.flatten(x) if i is not None).shape[0]
    )
    if not trained:  # a model that trains nothing (autograd.grad refuses no inputs)
        return y_pred, []
    scaled = optimizer.scale_loss(loss)
    # autograd.grad (not backward) only runs the graph that leads to `trained`.
    grads = torch.autograd.grad(
        scaled, [v.value for v in trained], allow_unused=True
    )
    return y_pred, list(grads)


def forward_without_grad(model, x):
    """`model(x)` in inference mode, recording no autograd graph."""
    with torch.no_grad():
        return model(x, **keras_private.training_kwargs(model, False))


def all_replicas(flag):
    # Keras 3.15's torch `fit` is single-process (no DDP), so one replica.
    return flag


def apply_if(flag, fn, args):
    if bool(flag):
        with torch.no_grad():
            fn(*args)


def apply(fn, args):
    with torch.no_grad():
        return fn(*args)


def assign_each(pairs):
    """Assigns each `(variable, value)` (outside autograd)."""
    with torch.no_grad():
        for variable, value in pairs:
            variable.assign(value)


def assign_where(triples):
    with torch.no_grad():
        for variable, keep_new, old in triples:
            variable.assign(ops.where(keep_new, variable.value, old))


def run_on_replicas(fn, args, variable):
    return apply(fn, args)


def static_value(x):
    """The Python value of a tensor known on the host (torch is eager)."""
    return int(x)


def replica_layout():
    """`(replicas in sync, replicas on this worker)`: Keras' fit on this
    backend steps one program; AdaSum sees a single replica."""
    return 1, 1


def global_batch_sum(tensors):
    """DimReduce's global-batch loss and gradient: this process's own (one
    replica)."""
    return list(tensors)


def worker_role():
    """`(is_chief, workers)`: Keras' fit on this backend is one process."""
    return True, 1


def training_batch_norm(x, gamma, beta, epsilon):
    """Training-mode batch norm of a channels-last 4-D float32 `x` in one
    `torch.nn.functional.batch_norm` call (one kernel forward and backward).

    Returns `(y, batch mean, biased batch variance)`. The statistics come
    out of the same kernel: running buffers with momentum 1 receive the
    batch's mean and its unbiased variance, which Keras' moving statistics
    do not use.
    """
    channels = x.shape[-1]
    mean = torch.zeros(channels, dtype=x.dtype, device=x.device)
    unbiased = torch.ones(channels, dtype=x.dtype, device=x.device)
    # NHWC seen as NCHW is PyTorch's channels_last layout: no copy.
    y = torch.nn.functional.batch_norm(
        x.permute(0, 3, 1, 2), mean, unbiased, gamma, beta, training=True, momentum=1.0, eps=epsilon
    ).permute(0, 2, 3, 1)
    count = x.numel() // channels
    return y, mean, unbiased * ((count - 1) / max(count, 1))


def distributed_logs(model, logs):
    """`logs` as they are: Keras' fit on this backend steps one program."""
    return logs


def symbolic_build_batch(model, iterator):
    """None: Keras' own build before `fit`."""
    return None
