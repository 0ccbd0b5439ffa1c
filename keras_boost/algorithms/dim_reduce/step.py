"""DimReduce's step part: stage 2 replaces the whole update.

Gradient, subspace BFGS with the line search on this batch, residual
momentum; the trial forward passes leave the forward pass's state (BN
statistics) as the step's own forward pass set it.
"""

import contextlib
import os

import keras

from keras_boost import backend as kb_backend
from keras_boost import keras_private
from keras_boost.algorithms.dim_reduce.subspace import flatten
from keras_boost.algorithms.dim_reduce.subspace import unflatten
from keras_boost.algorithms.status import AlgorithmStatus
from keras_boost.algorithms.step_part import StepPart

__all__ = ["dim_reduce_status", "DimReduceStep"]


class DimReduceStep(StepPart):
    """The `StepPart` of the chain's `DimReduce`; logs `line_search_accepted`.

    Under tf.distribute every replica runs the step on its share of the
    global batch: the gradient, the loss and each trial loss are the global
    batch's (`seam.global_batch_sum`), so every replica takes the same step
    on its copy of the (mirrored) weights and state.

    Example:

    ```python
    part = DimReduceStep(find_in_chain(model.optimizer, DimReduce))
    part.owns_update  # True: optimizer.apply is not called
    ```
    """

    label = "DimReduce"

    owns_update = True

    def __init__(self, dim_reduce):
        self.dim_reduce = dim_reduce

    def apply(self, step):
        model, seam, dim_reduce = step.model, step.seam, self.dim_reduce
        x, y, sample_weight, variables = step.x, step.y, step.sample_weight, step.trained

        def loss_of(y_pred):
            return keras_private.compute_loss(model, x, y, y_pred, sample_weight)

        def update():
            loss, gradient = seam.global_batch_sum([loss_of(step.y_pred), flatten(step.grads)])
            forward_state = list(model.non_trainable_variables)
            saved = [keras.ops.copy(v.value) for v in forward_state]

            def trial_loss(flat):
                for variable, value in zip(variables, unflatten(flat, variables)):
                    variable.assign(value)
                trial = model(x, **keras_private.training_kwargs(model, True))
                value = loss_of(trial)
                for variable, old in zip(forward_state, saved):
                    variable.assign(old)
                return seam.global_batch_sum([value])[0]

            state = [v.value for v in dim_reduce.state_variables()]
            new_weights, new_state, accepted = dim_reduce.step(
                dim_reduce.basis.value, state, flatten([v.value for v in variables]), gradient, loss, trial_loss
            )
            for variable, value in zip(variables, unflatten(new_weights, variables)):
                variable.assign(value)
            for variable, value in zip(dim_reduce.state_variables(), new_state):
                variable.assign(value)
            dim_reduce.accepted_steps.assign_add(keras.ops.cast(accepted, "int32"))
            dim_reduce.iterations.assign_add(1)
            return accepted

        return {"line_search_accepted": keras.ops.cast(seam.apply(update, ()), "float32")}

    def stateless_apply(self, step):
        dim_reduce, variables = self.dim_reduce, step.model.trainable_variables
        new_weights, new_state, accepted = dim_reduce.step(
            step.value(dim_reduce.basis), [step.value(v) for v in dim_reduce.state_variables()],
            flatten(step.trainable), flatten(step.grads), step.loss,
            lambda flat: step.trial_loss(unflatten(flat, variables)),
        )
        for variable, value in zip(dim_reduce.state_variables(), new_state):
            step.assign(variable, value)
        accepted_steps, iterations = dim_reduce.accepted_steps, dim_reduce.iterations
        step.assign(accepted_steps, step.value(accepted_steps) + keras.ops.cast(accepted, "int32"))
        step.assign(iterations, step.value(iterations) + 1)
        step.trainable = unflatten(new_weights, variables)
        return {"line_search_accepted": keras.ops.cast(accepted, "float32")}


def dim_reduce_status(model):
    """Whether DimReduce (stage 2) acts for `model` (`BoostModel.check_dim_reduce_enable`)."""
    config = model.boost_config
    if not config["boost"]["dim_reduce"]:
        return AlgorithmStatus(False, f"dim_reduce is off in this model's config (level {model.boost_level!r})")
    settings = config["dim_reduce"]
    path, directory = settings["pca_mat_path"], settings["weight_load_dir"]
    tf_backend = keras.backend.backend() == "tensorflow"
    with model.distribute_strategy.scope() if tf_backend else contextlib.nullcontext():
        chief, workers = kb_backend.current().worker_role()
    if workers > 1 and not path:
        return AlgorithmStatus(False, (
            f"{workers} workers share the basis through pca_mat_path, which is not set; set it "
            "to a path every worker reads (the chief writes it)"
        ))
    replicas = model.distribute_strategy.num_replicas_in_sync if tf_backend else 1
    where = f" on {replicas} replicas (global-batch gradient and losses)" if replicas > 1 else ""
    if not (path and os.path.isfile(path)) and not chief:
        return AlgorithmStatus(True, (
            f"DimReduce stage 2{where}; this worker reads the basis the chief writes to "
            f"{path!r}, waiting up to timeout={settings['timeout']} s"
        ))
    if not ((path and os.path.isfile(path)) or (directory and os.path.isdir(directory))):
        return AlgorithmStatus(False, (
            "no stage-1 basis: neither pca_mat_path nor weight_load_dir exists; record the "
            "trajectory with boost.callbacks.WeightTrajectory first"
        ))
    return AlgorithmStatus(True, f"DimReduce stage 2{where} (exclusive: the other algorithms are off)")
