"""PyTorch seams: autograd restricted to the trained variables."""

import torch
from keras import ops
from keras import tree


def scaled_loss_and_grads(model, x, y, sample_weight, trained, optimizer, scale):
    y_pred = model(x, training=True) if model._call_has_training_arg else model(x)
    loss = model._compute_loss(
        x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True
    )
    model._loss_tracker.update_state(
        loss, sample_weight=next(i for i in tree.flatten(x) if i is not None).shape[0]
    )
    scaled = optimizer.scale_loss(loss)
    if scale is not None:
        scaled = scaled * ops.cast(scale, scaled.dtype)
    # autograd.grad (not backward) only runs the graph that leads to `trained`.
    grads = torch.autograd.grad(
        scaled, [v.value for v in trained], allow_unused=True
    )
    return loss, y_pred, list(grads)


def all_replicas(flag):
    # Keras 3.15's torch `fit` is single-process (no DDP), so one replica.
    return flag


def apply_if(flag, fn, args):
    if bool(flag):
        with torch.no_grad():
            fn(*args)


def apply(fn, args):
    with torch.no_grad():
        fn(*args)


def switch(index, branches, args):
    with torch.no_grad():
        branches[int(index)](*args)
