"""Every use of private Keras in keras_boost, in one module.

Keras 3 keeps some of what a train-step add-on needs out of its public API:
the trainer's loss and metric plumbing, a layer's own sublayers and
variables, the graph behind a functional model, an optimizer's variable
index. Each such use is wrapped here in a small named function (or, for the
two private methods `BoostModel` overrides, a mixin) whose docstring says
which internal it wraps and why keras_boost needs it.
`tests/test_keras_private.py` checks each item against the installed Keras,
so an upgrade that moves one fails one clear test, and
`tests/test_architecture.py` keeps `keras.src` out of every other module.

Example:

```python
from keras_boost import keras_private

layers = keras_private.flatten_layers(model, include_self=False)
x, y, sample_weight = keras_private.unpack_x_y_sample_weight(data)
```
"""

import contextlib
import inspect

import keras
from keras.src import backend as _backend
from keras.src.backend.common import masking as _masking
from keras.src.losses import loss as _loss_module
from keras.src.models.functional import Functional
from keras.src.models.functional import functional_like_constructor as _functional_like_constructor
from keras.src.trainers.data_adapters import data_adapter_utils as _data_adapter_utils
from keras.src.utils import io_utils as _io_utils
from keras.src.utils import tracking as _tracking

__all__ = [
    "Functional",
    "GraphRunHooks",
    "attention_projections",
    "calling_model",
    "compile_arguments",
    "call_has_training_arg",
    "compute_loss",
    "compute_output_spec",
    "distribute_strategy",
    "flatten_layers",
    "gradient_all_reduce_replaced",
    "has_gradient_all_reduce",
    "in_multi_worker_mode",
    "inbound_node",
    "is_functional",
    "keras_history_operation",
    "keras_mask",
    "layer_own_variables",
    "layer_raw_variable",
    "learning_rate_read_once",
    "loss_tracker",
    "losses_override",
    "no_automatic_dependency_tracking",
    "optimizer_clip_gradients",
    "optimizer_own_variables",
    "optimizer_raw_learning_rate",
    "optimizer_trained_variables",
    "optimizer_uses_weight_decay",
    "optimizer_variable_index",
    "optimizer_var_key",
    "print_msg",
    "replace_gradient_all_reduce",
    "restore_gradient_all_reduce",
    "set_layer_trainable_flag",
    "set_optimizer_trained_variables",
    "set_weight_decay_exclusions",
    "subclassed_build_shapes",
    "symbolic_build",
    "track_optimizer_variable",
    "training_kwargs",
    "unpack_x_y_sample_weight",
    "unscale_loss_for_distribution",
    "update_metrics_variables",
    "uses_weight_decay",
    "weight_decay_exclusions",
]


# --- data and printing --------------------------------------------------------


def unpack_x_y_sample_weight(data):
    """`(x, y, sample_weight)` of one batch, as Keras' own train steps unpack it.

    Wraps `keras.src.trainers.data_adapters.data_adapter_utils
    .unpack_x_y_sample_weight`: a custom train step must accept every batch
    form `fit` accepts (`x`, `(x,)`, `(x, y)`, `(x, y, sample_weight)`).
    """
    return _data_adapter_utils.unpack_x_y_sample_weight(data)


def print_msg(message):
    """Prints `message` through Keras' printer (`keras.src.utils.io_utils
    .print_msg`), so it goes where the progress bar goes (absl logging when
    interactive logging is off)."""
    _io_utils.print_msg(message)


def unscale_loss_for_distribution(loss):
    """The loss without the `1 / num_replicas` factor Keras' TF losses apply
    under a strategy (`keras.src.losses.loss.unscale_loss_for_distribution`):
    the loss tracker shows the per-replica-unscaled loss, as Keras' own
    TensorFlow train step does."""
    return _loss_module.unscale_loss_for_distribution(loss)


# `keras.src.utils.tracking.no_automatic_dependency_tracking`: an optimizer
# wrapper's `build` assigns lists of the inner optimizer's variables, which
# Keras' automatic tracking would otherwise adopt as the wrapper's own
# (Keras' LossScaleOptimizer decorates its `build` the same way).
no_automatic_dependency_tracking = _tracking.no_automatic_dependency_tracking


# --- layers and models --------------------------------------------------------


def compute_output_spec(fn, *args):
    """`fn(*args)` traced on the symbolic `args` (KerasTensors), as the
    backend traces a compiled step, without running it or changing any
    variable (`keras.src.backend.compute_output_spec`)."""
    return _backend.compute_output_spec(fn, *args)


def is_functional(model):
    """Whether `model` is a Keras functional model (`keras.src.models
    .functional.Functional`, which has no public name; `keras.Sequential` is
    not one): graph surgery needs the graph behind a model."""
    return isinstance(model, Functional)


def functional_like_constructor(cls):
    """Whether `cls(inputs, outputs, name=...)` builds a `cls` (`keras.src.
    models.functional.functional_like_constructor`): `keras.models.clone_model`
    re-creates such a class, and any other one (keras-hub's backbones and
    tasks, built from their config) as a plain functional model; graph
    surgery follows the same rule."""
    return _functional_like_constructor(cls)


def flatten_layers(layer, include_self=True, recursive=True):
    """`layer`'s sublayers, depth-first in tracking order (`Layer
    ._flatten_layers`).

    The public `Model.layers` lists only the direct children of a model, and
    a plain layer has no public list of its sublayers at all.
    """
    return list(layer._flatten_layers(include_self=include_self, recursive=recursive))


def layer_own_variables(layer, trainable=True, non_trainable=True):
    """The variables `layer` created itself, without its sublayers'
    (`Layer._trainable_variables` / `Layer._non_trainable_variables`): the
    public `trainable_weights` collect the sublayers' too."""
    own = list(layer._trainable_variables) if trainable else []
    return own + (list(layer._non_trainable_variables) if non_trainable else [])


def layer_raw_variable(layer, name):
    """The variable behind `layer.<name>`, or None.

    Keras' Dense/Conv/Embedding keep the variable in `_<name>` (e.g.
    `_kernel`) and make `<name>` a property that adds the LoRA term when LoRA
    is on; code marking the variable itself needs the stored one.
    """
    for attr in ("_" + name, name):
        value = getattr(layer, attr, None)
        if isinstance(value, keras.Variable):
            return value
    return None


def attention_projections(layer):
    """`{"query", "key", "value", "output"}` -> the `EinsumDense` projections
    of a `keras.layers.MultiHeadAttention` (`_query_dense`, `_key_dense`,
    `_value_dense`, `_output_dense`), None for one it lacks: a
    model-parallel layout shards each projection's kernel."""
    return {role: getattr(layer, f"_{role}_dense", None) for role in ("query", "key", "value", "output")}


def set_layer_trainable_flag(layer, trainable):
    """Sets `layer`'s own `trainable` flag (`Layer._trainable`) without the
    public setter, which pushes the flag down onto every sublayer: a copied
    model keeps its sublayers' own flags."""
    layer._trainable = bool(trainable)


def call_has_training_arg(layer):
    """Whether `layer.call` takes a `training` argument (`Layer
    ._call_has_training_arg`, read by Keras' own train steps before calling
    the model)."""
    return bool(getattr(layer, "_call_has_training_arg", False))


def training_kwargs(layer, training):
    """`{"training": training}` when `layer.call` takes it, else `{}`: how
    Keras' own train steps call a model (`model(x, **training_kwargs(model,
    True))`, or `stateless_call(..., **training_kwargs(model, False))`)."""
    return {"training": training} if call_has_training_arg(layer) else {}


def subclassed_build_shapes(model):
    """The input shapes `model` was built (or first called) with, as a list
    (`Layer._build_shapes_dict`); empty when unknown. A subclassed model has
    no `inputs`: this is the only record of its input shape."""
    return list((getattr(model, "_build_shapes_dict", None) or {}).values())


def keras_history_operation(tensor):
    """The operation (layer) that produced the symbolic `tensor`, or None
    (`KerasTensor._keras_history.operation`)."""
    history = getattr(tensor, "_keras_history", None)
    return None if history is None else history.operation


def inbound_node(tensor):
    """The graph node that produced the symbolic `tensor`, or None when it
    has no producer (`KerasTensor._keras_history` and `Operation
    ._inbound_nodes`): a functional graph is walked back from its outputs
    through these nodes (`node.arguments.keras_tensors`, `node.is_input`)."""
    history = getattr(tensor, "_keras_history", None)
    if history is None or history.operation is None:
        return None
    return history.operation._inbound_nodes[history.node_index]


def keras_mask(tensor):
    """The Keras mask attached to `tensor` (symbolic or eager), or None
    (`keras.src.backend.common.masking.get_keras_mask`, `tensor._keras_mask`):
    a graph split where a masked tensor crosses would drop the mask."""
    return _masking.get_keras_mask(tensor)


class GraphRunHooks:
    """Mixin for a `keras.Model` subclass: public hooks around two private
    `Functional` / `Trainer` methods.

    - `on_graph_run(outputs)` runs after `Functional._run_through_graph`
      (every call of the functional graph, including the one
      `keras.models.clone_model` makes with copied layers).
    - `symbolic_build_batch(iterator, data_batch)` lets the subclass pick the
      batch the TensorFlow trainer's `_maybe_symbolic_build` builds from;
      returning None keeps Keras' own choice.

    Example:

    ```python
    class MyModel(keras_private.GraphRunHooks, keras.Model):
        def on_graph_run(self, outputs):
            print("graph ran")
    ```
    """

    def on_graph_run(self, outputs):
        """Called with the outputs of each run of the functional graph."""

    def symbolic_build_batch(self, iterator, data_batch):
        """`(strategy, data_batch)` to build from in `strategy`'s scope, or
        None for Keras' default."""
        return None

    def _run_through_graph(self, *args, **kwargs):
        outputs = super()._run_through_graph(*args, **kwargs)
        self.on_graph_run(outputs)
        return outputs

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        choice = self.symbolic_build_batch(iterator, data_batch)
        if choice is None:
            return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
        strategy, batch = choice
        with strategy.scope():
            symbolic_build(self, batch)


def symbolic_build(model, data_batch):
    """Builds `model`'s metrics and optimizer from one batch without training
    (`Trainer._symbolic_build`)."""
    model._symbolic_build(data_batch=data_batch)


def calling_model(predicate):
    """The innermost `keras.Model` on the call stack, as the `self` of one of
    its methods, for which `predicate(model)` holds, or None.

    Keras builds a compiled model's optimizer from the model's own methods
    (`fit`'s symbolic build, `compile_from_config`, the first train step) and
    passes it variables only: a Keras 3 variable does not know its layer.
    That calling model is where the layer types are.
    """
    frame = inspect.currentframe()
    try:
        while frame is not None:
            owner = frame.f_locals.get("self")
            if isinstance(owner, keras.Model) and predicate(owner):
                return owner
            frame = frame.f_back
        return None
    finally:
        del frame  # no reference cycle through this frame


# --- the trainer --------------------------------------------------------------


def compile_arguments(model):
    """The arguments `model.compile` was given, as given (`Trainer
    ._compile_config.config`: the optimizer, loss, metrics... objects
    themselves), or `{}` before `compile`. The public `get_compile_config`
    serializes them, and deserializing makes new objects: compiling a second
    model that trains the same variables needs the same optimizer."""
    config = getattr(model, "_compile_config", None) if model.compiled else None
    return dict(config.config) if config is not None else {}


def compute_loss(model, x, y, y_pred, sample_weight, training=True):
    """`model`'s compiled loss plus its layers' losses (`Trainer
    ._compute_loss`: `compute_loss` with Keras' check that a subclass
    overriding `compute_loss` still gets the `training` argument)."""
    return model._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training)


def loss_tracker(model):
    """The `Mean` metric behind `fit`'s `loss` log (`Trainer._loss_tracker`),
    which a custom train step updates as Keras' own does."""
    return model._loss_tracker


def update_metrics_variables(model, metrics_variables, loss, x, y, y_pred, sample_weight):
    """`(logs, new metrics variables)` after one batch, statelessly (the JAX
    trainer's `_update_metrics_variables`: loss tracker, then compiled
    metrics)."""
    return model._update_metrics_variables(metrics_variables, loss, x, y, y_pred, sample_weight)


@contextlib.contextmanager
def losses_override(model, losses):
    """Makes `model.losses` return `losses` inside the block (`Layer
    ._losses_override`, as the JAX trainer's `compute_loss_and_updates`
    does): `stateless_call` returns the layers' losses as values, which the
    stateless loss must then see."""
    if not losses:
        yield
        return
    model._losses_override.clear()
    model._losses_override = losses
    try:
        yield
    finally:
        model._losses_override.clear()


# --- optimizers ---------------------------------------------------------------


def optimizer_var_key(optimizer, variable):
    """The key `optimizer` indexes `variable` by (`BaseOptimizer._var_key`:
    the variable's id, the tf.Variable's id on TensorFlow)."""
    return optimizer._var_key(variable)


def optimizer_variable_index(optimizer, variable):
    """The position of `variable` in the list `optimizer` was built with
    (`BaseOptimizer._get_variable_index`): a slot list is in that order."""
    return optimizer._get_variable_index(variable)


def optimizer_trained_variables(optimizer):
    """The variables `optimizer` was built for (`BaseOptimizer
    ._trainable_variables`), in build order."""
    return optimizer._trainable_variables


def set_optimizer_trained_variables(optimizer, variables):
    """Records `variables` as those `optimizer` was built for, as
    `BaseOptimizer.build` does (`_trainable_variables` and
    `_trainable_variables_indices`): a wrapper whose `build` does not call
    Keras' (it would add EMA/accumulator slots) still answers
    `optimizer_variable_index`."""
    variables = list(variables)
    for i, variable in enumerate(variables):
        optimizer._trainable_variables_indices[optimizer._var_key(variable)] = i
    optimizer._trainable_variables = variables


def optimizer_own_variables(optimizer):
    """The variables `optimizer` itself created, in creation order
    (`BaseOptimizer._variables`; the public `variables` of a wrapper also
    lists the wrapped optimizer's)."""
    return optimizer._variables


def track_optimizer_variable(optimizer, variable):
    """Adds a variable made outside `add_variable` to `optimizer`'s
    variables, so that it is saved (`BaseOptimizer._track_variable`)."""
    optimizer._track_variable(variable)


def optimizer_raw_learning_rate(optimizer):
    """The learning rate as given: a `LearningRateSchedule` or a variable
    (`BaseOptimizer._learning_rate`; the public `learning_rate` evaluates a
    schedule)."""
    return getattr(optimizer, "_learning_rate", None)


def optimizer_uses_weight_decay(optimizer, variable):
    """Whether `optimizer` decays `variable` (`BaseOptimizer._use_weight_decay`:
    the `exclude_from_weight_decay` lists, which have no public reader)."""
    return bool(optimizer._use_weight_decay(variable))


def optimizer_clip_gradients(optimizer, grads):
    """`grads` clipped by `optimizer`'s clipnorm / global_clipnorm / clipvalue
    (`BaseOptimizer._clip_gradients`), None entries kept: a wrapper that
    applies some updates itself clips them as the optimizer would."""
    return optimizer._clip_gradients(list(grads))


def weight_decay_exclusions(optimizer):
    """The keys (`optimizer_var_key`) of the variables excluded from
    `optimizer`'s weight decay, or an empty set (`BaseOptimizer
    ._exclude_from_weight_decay`: the public setter only writes)."""
    return set(getattr(optimizer, "_exclude_from_weight_decay", None) or ())


def uses_weight_decay(optimizer, variable):
    """Whether `optimizer`'s decoupled weight decay applies to `variable`
    (`BaseOptimizer._use_weight_decay`: the exclusions by variable and by
    name pattern); False when its `weight_decay` is None."""
    return optimizer.weight_decay is not None and bool(optimizer._use_weight_decay(variable))


def set_weight_decay_exclusions(optimizer, keys):
    """Replaces the excluded keys after `optimizer` was built (`BaseOptimizer
    .exclude_from_weight_decay` refuses then), and clears Keras' cache of
    the decision (`_exclude_from_weight_decay_cache`)."""
    optimizer._exclude_from_weight_decay = set(keys)
    optimizer._exclude_from_weight_decay_cache = dict()


@contextlib.contextmanager
def learning_rate_read_once(optimizer):
    """Within it, the decoupled weight decay of `optimizer` (or of the
    innermost optimizer it wraps, following `inner_optimizer`) evaluates
    its learning-rate schedule once per step instead of once per variable.

    Keras' TensorFlow and JAX optimizers (`TFOptimizer._apply_weight_decay`,
    `BaseOptimizer._apply_weight_decay`) read `self.learning_rate`, which
    calls the schedule (`BaseOptimizer._learning_rate`), inside their loop
    over the variables: a traced step then holds one copy of the schedule
    (a warm-up `cond`, a cosine) per decayed variable. MobileNetV2's 158
    variables made its TensorFlow trace 14 s longer (27-30 s against 13-17
    s, AMD EPYC 2 vCPU). This instance's `_apply_weight_decay` is replaced
    for the duration by one that reads the schedule once, when Keras would
    have read it first (inside any `StatelessScope`), and hands that value
    to every variable: the same number, so the weights are bit-identical.
    Reentrant; a constant learning rate, no weight decay, or an optimizer
    under a `tf.distribute` strategy (its replicas share this object, in
    threads) is left alone.

    Example:

    ```python
    with keras_private.learning_rate_read_once(optimizer):
        optimizer.apply(grads, variables)
    ```
    """
    while getattr(optimizer, "inner_optimizer", None) is not None:
        optimizer = optimizer.inner_optimizer
    if "_apply_weight_decay" in vars(optimizer) or not hasattr(optimizer, "_apply_weight_decay"):
        yield  # already inside one (a wrapper around a wrapper), or not a Keras optimizer
        return
    # `_value`, not `value`: reading `value` in JAX's jitted fit (variables
    # purged) fails; on TensorFlow both are the backing `tf.Variable`.
    if distribute_strategy(getattr(optimizer.iterations, "_value", None)) is not None:
        # tf.distribute: replicas may run in threads that share this optimizer
        # object; Keras' per-variable read stays.
        yield
        return
    per_variable = optimizer._apply_weight_decay

    def apply_weight_decay(variables):
        schedule = getattr(optimizer, "_learning_rate", None)
        if optimizer.weight_decay is None or isinstance(schedule, keras.Variable) or not callable(schedule):
            return per_variable(variables)
        value = optimizer._get_current_learning_rate()
        optimizer._learning_rate = lambda: value
        try:
            return per_variable(variables)
        finally:
            optimizer._learning_rate = schedule

    optimizer._apply_weight_decay = apply_weight_decay
    try:
        yield
    finally:
        del optimizer._apply_weight_decay


def has_gradient_all_reduce(optimizer):
    """Whether `optimizer` sums gradients over replicas inside `apply`
    (`TFOptimizer._all_reduce_sum_gradients`, Keras' TensorFlow
    optimizers)."""
    return hasattr(optimizer, "_all_reduce_sum_gradients")


def replace_gradient_all_reduce(optimizer, fn):
    """Makes this `optimizer` instance call `fn(grads_and_vars)` instead of
    its SUM all-reduce (`TFOptimizer._all_reduce_sum_gradients`): a wrapper
    that combined the replicas' gradients itself (AdaSum) applies them
    as they are."""
    optimizer._all_reduce_sum_gradients = fn


def gradient_all_reduce_replaced(optimizer):
    """Whether a wrapper replaced `optimizer`'s SUM all-reduce for the
    current apply (`replace_gradient_all_reduce`): the gradients it gets are
    combined already."""
    return "_all_reduce_sum_gradients" in vars(optimizer)


def restore_gradient_all_reduce(optimizer):
    """Undoes `replace_gradient_all_reduce` on this instance."""
    del optimizer._all_reduce_sum_gradients


# --- tf.distribute (through values that Keras and TensorFlow hand us) --------


def distribute_strategy(value):
    """The `tf.distribute.Strategy` that `value` belongs to, or None: a
    model's (`Trainer._distribute_strategy`, None before one is set) or a
    distributed variable's (`DistributedValues._distribute_strategy`)."""
    return getattr(value, "_distribute_strategy", None)


def in_multi_worker_mode(strategy):
    """Whether `strategy` spans several workers (`StrategyExtended
    ._in_multi_worker_mode`, the test Keras' TensorFlow trainer uses)."""
    return strategy.extended._in_multi_worker_mode()
