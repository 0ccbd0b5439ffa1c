"""Backend seams: the only modules that import tensorflow, jax or torch.

Each backend module exposes the same small functions that
`keras_boost.model.BoostModel` composes into its one train step:

- `loss_and_grads(model, x, y, sample_weight, trained, optimizer)` (TensorFlow
  and torch); JAX instead has `train_step(model, state, data)`, the one
  stateless composer of the step parts' stateless forms;
- `distributed_logs(model, logs)` and `symbolic_build_batch(model, iterator)`:
  Keras 3.15's multi-worker trainer fixes (identity and None off TensorFlow);
- `all_replicas(flag)`: AND of a boolean over all replicas;
- `apply(fn, args)` / `apply_if(flag, fn, args)`: run `fn(*args)` (only when
  `flag` holds), in a way that is legal for the backend (no autograd on
  torch, a cross-replica cond on `tf.distribute`);
- `assign_where(triples)`: keep or restore variables by a per-variable flag;
- `assign_each(pairs)`: assign each variable its value (in replica context on
  `tf.distribute`, each replica's copy its own value);
- `static_value(x)`: a tensor's Python value when it is known on the host;
- `run_on_replicas(fn, args, variable)`: eager work on every replica;
- `replica_layout()`: replicas in sync and on this worker (1, 1 off TF);
- `worker_role()`: `(is_chief, workers)` of this process (DimReduce's basis
  is computed by the chief and read by the others);
- `global_batch_sum(tensors)` (TensorFlow and torch): DimReduce's loss and
  gradient of the global batch from the per-replica ones (identity on one
  replica);
- `training_batch_norm(x, gamma, beta, epsilon)` (TensorFlow and torch; JAX has
  none, XLA fuses): one training-mode batch-norm kernel, returning the output,
  the batch mean and the biased batch variance (`FusedBatchNormalization`);
- TensorFlow only, for AdaSum and CompressedAllReduce: `in_replica_context()`,
  `halving_rank()`, `pair_exchange`, `block_sum` (AdaSum's halving/doubling
  exchange, in `tensorflow_collectives`),
  `all_gather_stacked`, `all_reduce_sum` and
  `local_gradients(optimizer)` (the wrapped optimizer's own all-reduce
  switched off while it applies).
"""

import importlib

import keras

__all__ = ["current"]


def current():
    """The seam module of the active Keras backend."""
    name = keras.backend.backend()
    if name not in ("tensorflow", "jax", "torch"):
        raise RuntimeError(
            f"keras_boost supports the tensorflow, jax and torch backends, not {name!r}."
        )
    return importlib.import_module(f"keras_boost.backend.{name}_backend")
