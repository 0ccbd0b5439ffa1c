"""`AutoBoost` and `wrap`: apply a resolved boost config to Keras objects.

The order in which algorithms are applied is fixed here and only here
(MindSpore's order): dim_reduce is exclusive; otherwise LessBN (then
keras_boost's fused batch norm of the BNs that remain), then gradient
freezing, then AdaSum; accumulation and group loss scaling act in the train
step, prefix caching in `BoostModel.fit`.
"""

import contextlib
import copy
import json
import warnings

import keras

from keras_boost import config as config_lib
from keras_boost import keras_private
from keras_boost.config import check_implemented
from keras_boost.errors import NoEffectWarning
from keras_boost.graph import layers_shared_with_nested_models
from keras_boost.optimizers.boost_optimizer import BoostOptimizer
from keras_boost.algorithms.centralization import exclude_unsuited_kernels
from keras_boost.algorithms.precision import choose_precision
from keras_boost.algorithms.precision import resolve_precision
from keras_boost.algorithms.fused_batch_norm import fuse_batch_norm
from keras_boost.algorithms.less_bn import REPORT_ATTR
from keras_boost.algorithms.less_bn import less_bn_for_config
from keras_boost.algorithms.less_bn import patterns_without
from keras_boost.validation import check_model
from keras_boost.validation import check_optimizer
from keras_boost.validation import has_layer_graph

__all__ = ["AutoBoost", "wrap"]


class AutoBoost:
    """Resolves a boost level and config, and applies it to a model/optimizer.

    Unlike MindSpore's `AutoBoost`, this is not a process-wide singleton: each
    instance holds its own resolved config.

    Args:
        level: `"O0"` (nothing), `"O1"` (LessBN + gradient freezing, with
            keras_boost's fused batch norm and prefix caching) or `"O2"`
            (O1 + AdaSum). The optimizer `network_auto_process_train`
            returns is for a plain model: as with `boost.wrap`, the level's
            gradient freezing is left out of it (a `BoostModel` built from
            the pair puts it back).
        boost_config_dict: `None`, a dict in MindSpore's layout, or the path of
            a JSON file holding one. See `keras_boost.config.SCHEMA`.

    Example:

    ```python
    ab = boost.AutoBoost("O0", {"boost": {"mode": "manual"}})
    ab.config["grad_freeze"]["param_groups"]  # 10
    model, optimizer = ab.network_auto_process_train(model, keras.optimizers.SGD())
    ```
    """

    def __init__(self, level="O0", boost_config_dict=None):
        self._level = config_lib.check_level(level)
        self._config = config_lib.resolve_config(level, boost_config_dict)
        patterns_without(self._config["less_bn"]["exclude_patterns"])  # unknown names fail here

    @property
    def level(self):
        return self._level

    @property
    def config(self):
        """The fully resolved config (a copy: every section, every key)."""
        return copy.deepcopy(self._config)

    @property
    def enabled(self):
        """Names of the enabled algorithms, in application order."""
        return config_lib.enabled_algorithms(self._config)

    def to_json(self, **kwargs):
        """The resolved config as a JSON string (kwargs go to `json.dumps`)."""
        return json.dumps(self._config, **kwargs)

    def __repr__(self):
        return f"AutoBoost(level={self._level!r}, enabled={self.enabled})"

    def network_auto_process_train(self, model, optimizer):
        """Applies the model- and optimizer-level algorithms for training.

        Returns `(model, optimizer)` ready for `compile`/`fit`: the model is a
        new one when a surgery (LessBN) applies, else the same object; the
        optimizer is `boost.wrap(optimizer, level, config)`. Everything is
        validated before anything is built, so nothing is half-applied.
        """
        check_model(model)
        check_optimizer(optimizer)
        check_implemented(self._config)
        original = model
        model = self.network_auto_process_model(model)
        if model is not original:
            optimizer = _optimizer_for(optimizer, original, model)
        # gc_flag adds GradientCentralization innermost in BoostOptimizer's chain.
        optimizer = BoostOptimizer(optimizer, self._level, self._config)
        optimizer.model_surgery_handled = True  # done just above
        if self._config["boost"]["loss_scale_group"]:
            warnings.warn(
                "loss_scale_group acts in BoostModel's train step, not in the (model, optimizer) "
                "pair returned here: use BoostModel.from_model(model, boost_config_dict=...).",
                NoEffectWarning,
                stacklevel=2,
            )
        return model, optimizer

    def network_auto_process_model(self, model):
        """The model-level part of `network_auto_process_train`: LessBN, then
        fused batch norm, then the `common.precision` policy.

        Returns the same model when neither changes anything, else a new one
        (the input is never changed). With `precision="auto"` the timing
        report is printed and kept as the new model's `precision_choice`.
        """
        check_model(model)
        check_implemented(self._config)
        original = model
        less_bn = self._config["boost"]["less_bn"]
        if less_bn:
            model = self._less_bn(model)
        report = getattr(model, REPORT_ATTR, None)
        if self._config["boost"]["fused_batch_norm"]:
            model = self._fuse_batch_norm(model)
        model, choice = resolve_precision(model, self._config["common"]["precision"])
        if report is not None and getattr(model, REPORT_ATTR, None) is None:
            setattr(model, REPORT_ATTR, report)  # a precision copy of the LessBN model
        if choice is not None and model is not original:  # never an attribute on the user's model
            model.precision_choice = choice
        if less_bn:
            exclude_unsuited_kernels(model)
        return model

    def _less_bn(self, model):
        if getattr(model, REPORT_ATTR, None) is not None:
            return model  # LessBN already applied
        if not has_layer_graph(model):
            warnings.warn(
                f"less_bn: {model.name!r} is a subclassed model ({type(model).__name__}), "
                "whose call() has no layer graph to match, so no BatchNormalization is "
                "removed (gradient centralization still applies through the optimizer). "
                "Build it with the functional API to get the surgery.",
                NoEffectWarning,
                stacklevel=4,
            )
            return model
        with self._quiet_if_level_chose():
            return less_bn_for_config(model, self._config["less_bn"])

    def _quiet_if_level_chose(self):
        """Silences "found nothing to do" when the level turned the algorithm
        on, not the user (mode "auto"): a model without BatchNormalization at
        O1, or JAX, where XLA fuses already. The report and the end-of-fit
        summary line say what ran; NoEffectWarning stays for what the user
        asked for by name."""
        if self._config["boost"]["mode"] != "auto":
            return contextlib.nullcontext()
        return _ignoring(NoEffectWarning)

    def _fuse_batch_norm(self, model):
        if not has_layer_graph(model):
            warnings.warn(
                f"fused_batch_norm: {model.name!r} is a subclassed model ({type(model).__name__}), "
                "whose layers cannot be swapped from outside; use "
                "boost.layers.FusedBatchNormalization in its layers instead.",
                NoEffectWarning,
                stacklevel=4,
            )
            return model
        report = getattr(model, REPORT_ATTR, None)
        with self._quiet_if_level_chose():
            model = fuse_batch_norm(model)
        if report is not None:
            setattr(model, REPORT_ATTR, report)  # the copy of a LessBN model
        return model

    def network_auto_process_eval(self, model):
        """Returns the inference model matching `network_auto_process_train`.

        With less_bn on: a model that already came out of LessBN (e.g. the
        one `network_auto_process_train` returned) is returned as is; any
        other model gets the same surgery as in training (the config's
        `fn_flag` and `remove_pretrained_bn`), so its layers (and weights)
        line up with the training model's.
        (MindSpore passes `fn_flag=False` here because its head swap happened
        in place on the shared backbone; Keras surgery makes a new model.)
        """
        check_model(model)
        check_implemented(self._config)
        if self._config["boost"]["less_bn"]:
            if getattr(model, REPORT_ATTR, None) is None and has_layer_graph(model):
                model = less_bn_for_config(model, self._config["less_bn"])
        return model

    def network_for_boost_model(self, model, input_shape=None):
        """What `BoostModel.from_model` builds from: `(inputs, outputs,
        processed, config, choice)`.

        `network_auto_process_model` runs first (`processed` is its result).
        With `common.precision="auto"`, `choice` is the `PrecisionChoice` and
        `config` (else None) the resolved config with the chosen policy in
        place of "auto": a reload or a clone computes in it without timing
        again. A subclassed model is called on a new `keras.Input` of
        `input_shape` (default: the shape it was built with).
        """
        model = self.network_auto_process_model(model)  # the same model when nothing changes
        choice = config = None
        if self._config["common"]["precision"] == "auto":
            # The surgery attaches the choice to a model it copied; when it
            # kept the model itself (float32 kept), the choice it just made
            # is in the process cache: no new timing.
            choice = getattr(model, "precision_choice", None) or choose_precision(model)
            config = self.config
            config["common"]["precision"] = choice.policy
        inputs, outputs = _graph_io(model)
        if inputs is None:
            if input_shape is None:
                shapes = keras_private.subclassed_build_shapes(model)
                if len(shapes) != 1:
                    raise ValueError(
                        f"Cannot tell the input shape of subclassed model {model.name!r}; "
                        "pass input_shape=(...) (without the batch axis)."
                    )
                input_shape = tuple(shapes[0])[1:]
            inputs = keras.Input(shape=tuple(input_shape))
            outputs = model(inputs)
        return inputs, outputs, model, config, choice


def _graph_io(model):
    """The input and output structures (dicts, lists or tensors) of a graph model.

    A model whose class builds it from its config (keras-hub's tasks) and
    whose graph calls a layer of a nested model again (a causal LM's tied
    token embedding) is called as one layer on new inputs: its own config
    saves and loads it, where its graph's would load the shared layer twice.
    """
    if isinstance(model, keras.Sequential):
        return model.inputs[0], model.outputs[0]
    try:
        inputs, outputs = model.input, model.output
    except (AttributeError, ValueError):
        return None, None
    if keras_private.functional_like_constructor(type(model)) or not layers_shared_with_nested_models(model):
        return inputs, outputs
    inputs = keras.tree.map_structure(lambda t: keras.Input(batch_shape=t.shape, dtype=t.dtype, name=t.name), inputs)
    return inputs, model(inputs)


def _optimizer_for(optimizer, old_model, new_model):
    """The user's optimizer, ready for `new_model`'s variables.

    Keras optimizers build lazily, so an unbuilt optimizer is used as is. A
    built one holds state for the old variables: it is re-created from its
    config (its state is not carried over, as in MindSpore, which always
    builds a new optimizer here). Weight-decay exclusions given as variables
    are mapped to the new model's variables by path.
    """
    if optimizer.built:
        warnings.warn(
            f"The optimizer {optimizer.name!r} was already built (it holds state for the "
            "original model's variables); LessBN made a new model, so it is re-created from "
            "its config and starts with fresh state.",
            UserWarning,
            stacklevel=3,
        )
        optimizer = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    excluded = getattr(optimizer, "_exclude_from_weight_decay", None)
    if excluded:
        key = optimizer._var_key  # id(variable), or the tf.Variable's id on TF
        paths = {v.path for v in old_model.variables if key(v) in excluded}
        optimizer._exclude_from_weight_decay = set(excluded) | {
            key(v) for v in new_model.variables if v.path in paths
        }
        optimizer._exclude_from_weight_decay_cache = dict()
    return optimizer


def wrap(optimizer, level=None, boost_config_dict=None):
    """Wraps `optimizer` with the optimizer-level algorithms of a boost config.

    The result is a `keras.optimizers.Optimizer` usable on any Keras model.
    A `BoostModel` compiled with it also runs the train-step-level algorithms
    of the same config. Without a level it is `"O0"` on a plain model and
    follows the level of the `BoostModel` it is compiled with (a `BoostModel`
    wraps a plain optimizer by itself, so `wrap` is only needed there to set
    a config in one place).

    Args:
        optimizer: a `keras.optimizers.Optimizer` instance.
        level: `"O0"`, `"O1"`, `"O2"`, or None (see above).
        boost_config_dict: `None`, a dict or a JSON file path.

    A level (mode `"auto"`) on a plain model leaves out gradient freezing:
    there the model computes every gradient, so freezing through the
    optimizer would only drop updates and save no time. `wrap(opt, "O1")`
    thus runs gradient centralization (LessBN's `gc_flag`, on a model with
    BatchNormalization) and `"O2"` adds AdaSum; the result's `left_out`
    says what was left out. Freezing asked for by name
    (`{"boost": {"mode": "manual", "grad_freeze": True}}`) runs, with a
    `NoEffectWarning` that it saves no time. A `BoostModel` compiled with
    the result builds the level's whole chain, freezing included.

    Example:

    ```python
    model.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.1), "O1"),
                  loss="sparse_categorical_crossentropy")
    ```
    """
    return BoostOptimizer(optimizer, level, boost_config_dict)


@contextlib.contextmanager
def _ignoring(category):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category)
        yield
