"""`BoostOptimizer`: what `boost.wrap` returns."""

import keras

from keras_boost import auto_boost
from keras_boost.optimizers.base import OptimizerWrapper
from keras_boost.optimizers.base import check_optimizer


def build_optimizer_chain(optimizer, config):
    """Wraps `optimizer` in the wrappers a resolved config enables.

    Fixed order, innermost first: GradientCentralization, FreezeOptimizer,
    GradientAccumulation, AdaSum.
    """
    auto_boost.check_implemented(config)
    return optimizer


@keras.saving.register_keras_serializable(package="keras_boost")
class BoostOptimizer(OptimizerWrapper):
    """The optimizer-level algorithms of a boost level and config.

    Built by `boost.wrap(optimizer, level, boost_config_dict)`. At `"O0"` it
    is a pure pass-through. `BoostModel` reads its config to run the
    train-step-level algorithms (loss scaling, freezing) of the same level.

    Args:
        optimizer: the user's `keras.optimizers.Optimizer`.
        boost_level: `"O0"`, `"O1"` or `"O2"`.
        boost_config_dict: `None`, a dict or a JSON file path.
        name: optional name.

    Example:

    ```python
    opt = boost.wrap(keras.optimizers.Adam(1e-3), "O0")
    model.compile(optimizer=opt, loss="mse")
    opt.boost_config["boost"]["mode"]  # "auto"
    ```
    """

    def __init__(self, optimizer, boost_level="O0", boost_config_dict=None, name=None):
        check_optimizer(optimizer)
        resolved = auto_boost.AutoBoost(boost_level, boost_config_dict)
        chain = build_optimizer_chain(optimizer, resolved.config)
        super().__init__(chain, name=name or "boost_optimizer")
        self._auto_boost = resolved
        self._user_optimizer = optimizer

    @property
    def boost_level(self):
        return self._auto_boost.level

    @property
    def boost_config(self):
        """The fully resolved boost config."""
        return self._auto_boost.config

    def get_config(self):
        return {
            "name": self.name,
            "optimizer": keras.saving.serialize_keras_object(self._user_optimizer),
            "boost_level": self.boost_level,
            # The resolved config re-resolves to itself, so reloading is exact.
            "boost_config_dict": self.boost_config,
        }
