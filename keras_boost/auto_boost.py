"""`AutoBoost` and `wrap`: apply a resolved boost config to Keras objects.

The order in which algorithms are applied is fixed here and only here
(MindSpore's order): dim_reduce is exclusive; otherwise LessBN, then gradient
freezing, then AdaSum; accumulation and group loss scaling act in the train
step.
"""

import copy
import json

import keras

from keras_boost import config as config_lib
from keras_boost.errors import not_implemented

# Algorithms that exist in this version. An enabled algorithm outside this set
# raises NotImplementedError where it is requested, never a silent no-op.
IMPLEMENTED = frozenset({"grad_accumulation", "grad_freeze"})


def check_implemented(config):
    missing = [a for a in config_lib.enabled_algorithms(config) if a not in IMPLEMENTED]
    if missing:
        raise not_implemented(missing)


class AutoBoost:
    """Resolves a boost level and config, and applies it to a model/optimizer.

    Unlike MindSpore's `AutoBoost`, this is not a process-wide singleton: each
    instance holds its own resolved config.

    Args:
        level: `"O0"` (nothing), `"O1"` (LessBN + gradient freezing) or `"O2"`
            (O1 + AdaSum).
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
        from keras_boost.optimizers.boost_optimizer import BoostOptimizer

        optimizer = BoostOptimizer(optimizer, self._level, self._config)
        return model, optimizer

    def network_auto_process_eval(self, model):
        """Returns the inference model matching `network_auto_process_train`."""
        check_model(model)
        check_implemented(self._config)
        return model


def check_model(model, where="model"):
    """Raises unless `model` is a built Keras 3 model."""
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"{where} must be a keras.Model (Keras 3), got "
            f"{type(model).__module__}.{type(model).__name__}."
        )
    if not model.built:
        raise ValueError(
            f"{where} {model.name!r} is not built: call it on data or use "
            "keras.Input so that its variables exist."
        )
    return model


def wrap(optimizer, level="O0", boost_config_dict=None):
    """Wraps `optimizer` with the optimizer-level algorithms of a boost config.

    The result is a `keras.optimizers.Optimizer` usable on any Keras model and
    recognised by `BoostModel`, which also runs the train-step-level
    algorithms of the same config.

    Example:

    ```python
    model.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.1), "O0"),
                  loss="sparse_categorical_crossentropy")
    ```
    """
    from keras_boost.optimizers.boost_optimizer import BoostOptimizer

    return BoostOptimizer(optimizer, level, boost_config_dict)
