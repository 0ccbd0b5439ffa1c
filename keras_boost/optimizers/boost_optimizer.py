"""`BoostOptimizer`: what `boost.wrap` returns."""

import warnings

import keras

from keras_boost import auto_boost
from keras_boost.errors import NoEffectWarning
from keras_boost.optimizers.accumulation import GradientAccumulation
from keras_boost.optimizers.base import OptimizerWrapper
from keras_boost.optimizers.base import check_optimizer
from keras_boost.optimizers.centralization import GradientCentralization
from keras_boost.optimizers.freeze import FreezeOptimizer


def build_optimizer_chain(optimizer, config):
    """Wraps `optimizer` in the wrappers a resolved config enables.

    Fixed order, innermost first: GradientCentralization, FreezeOptimizer,
    GradientAccumulation, AdaSum.
    """
    auto_boost.check_implemented(config)
    flags = config["boost"]
    if flags["less_bn"] and config["less_bn"]["gc_flag"]:
        optimizer = GradientCentralization(optimizer)
    if flags["grad_freeze"]:
        # Groups come from the model when BoostModel builds it (by layer
        # structure), else from the variable list at build time.
        optimizer = FreezeOptimizer(optimizer, schedule=dict(config["grad_freeze"]))
    if flags["grad_accumulation"]:
        steps = config["grad_accumulation"]["grad_accumulation_step"]
        if steps > 1:
            optimizer = GradientAccumulation(optimizer, steps)
        else:
            # As in MindSpore: accumulation acts only for a step count > 1.
            warnings.warn(
                "grad_accumulation is enabled with grad_accumulation_step=1, so "
                "every micro-batch is an update and nothing is accumulated; set "
                '{"grad_accumulation": {"grad_accumulation_step": k}} with k > 1.',
                NoEffectWarning,
                stacklevel=3,
            )
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

    def __init__(
        self, optimizer, boost_level="O0", boost_config_dict=None, name=None, chain_built=False
    ):
        check_optimizer(optimizer)
        resolved = auto_boost.AutoBoost(boost_level, boost_config_dict)
        # `chain_built` (from_config): `optimizer` is the saved chain itself,
        # with its state-defining config (e.g. a generated freeze schedule).
        chain = optimizer if chain_built else build_optimizer_chain(optimizer, resolved.config)
        super().__init__(chain, name=name or "boost_optimizer")
        self._auto_boost = resolved
        # BoostModel sets this: it applies (or reports) the model surgery.
        self.model_surgery_handled = False

    def _build_own(self, var_list):
        if self.boost_config["boost"]["less_bn"] and not self.model_surgery_handled:
            warnings.warn(
                "less_bn is on, but this optimizer only sees the gradients: gradient "
                "centralization (gc_flag) applies, the BatchNormalization removal does "
                "not. Use BoostModel.from_model(model, boost_level=...), "
                "AutoBoost(level, config).network_auto_process_train(model, optimizer) "
                "or boost.LessBN(model) for the model surgery.",
                NoEffectWarning,
                stacklevel=4,
            )

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
            "optimizer": keras.saving.serialize_keras_object(self.inner_optimizer),
            "boost_level": self.boost_level,
            # The resolved config re-resolves to itself, so reloading is exact.
            "boost_config_dict": self.boost_config,
            "chain_built": True,
        }
