"""`BoostOptimizer`: what `boost.wrap` returns, and what `BoostModel` compiles."""

import contextlib
import copy
import warnings

import keras

from keras_boost import config as config_lib
from keras_boost.algorithms.accumulation import GradientAccumulation
from keras_boost.algorithms.adasum import AdaSum
from keras_boost.algorithms.cautious import CautiousOptimizer
from keras_boost.algorithms.centralization import GradientCentralization
from keras_boost.algorithms.dim_reduce import DimReduce
from keras_boost.algorithms.freezing import FreezeOptimizer
from keras_boost.algorithms.loss_scaling import DynamicLossScale
from keras_boost.algorithms.loss_scaling import DynamicLossScaleOptimizer
from keras_boost.algorithms.optimizer_wrapper import OptimizerWrapper
from keras_boost.algorithms.optimizer_wrapper import find_in_chain
from keras_boost.algorithms.optimizer_wrapper import optimizer_chain
from keras_boost.algorithms.orthogonal_updates import OrthogonalUpdates
from keras_boost.errors import NoEffectWarning
from keras_boost.validation import check_optimizer

__all__ = ["BoostOptimizer", "build_optimizer_chain", "chain_for_model"]

# The level's algorithms that cannot act through an optimizer on a plain
# keras.Model, so that a level (mode "auto") leaves them out of `wrap`'s
# chain: there the model computes every gradient, and freezing would only
# drop updates (measured: no time saved, a higher final loss; see
# docs/methods/grad_freeze.md). BoostModel builds its chain with them.
_MODEL_ONLY = {"grad_freeze": FreezeOptimizer}


def build_optimizer_chain(optimizer, config, loss_scale=None):
    """Wraps `optimizer` in the wrappers a resolved config enables.

    Fixed order, innermost first: CautiousOptimizer, OrthogonalUpdates,
    GradientCentralization, FreezeOptimizer, AdaSum, GradientAccumulation,
    DynamicLossScaleOptimizer (when `loss_scale` is a `DynamicLossScale`).
    AdaSum sits inside accumulation,
    so it combines each accumulated update once, and outside freezing and
    centralization, which then act on the combined gradient. Caution wraps
    the user's optimizer itself: its mask compares the optimizer's step with
    the gradient that optimizer was given (centralized, combined, accumulated).
    An algorithm that `optimizer`'s own
    chain already contains raises `ValueError` instead of acting twice.
    """
    config_lib.check_implemented(config)
    flags = config["boost"]
    if flags["dim_reduce"]:
        # Exclusive, as in MindSpore (the resolved config has every other
        # algorithm off): stage 2 replaces the optimizer chain.
        if loss_scale is not None:
            raise ValueError(
                "dim_reduce does not combine with loss scaling yet; stage 2 needs a float32 "
                "model (or loss_scale=None)."
            )
        if find_in_chain(optimizer, DimReduce) is not None:
            raise ValueError(f"The optimizer {optimizer.name!r} already contains a DimReduce.")
        return DimReduce(optimizer, **config["dim_reduce"])
    wanted = []
    if flags["cautious"]:
        wanted.append((CautiousOptimizer, "cautious"))
    if flags["orthogonal_updates"]:
        wanted.append((OrthogonalUpdates, "orthogonal_updates"))
    if flags["less_bn"] and config["less_bn"]["gc_flag"]:
        wanted.append((GradientCentralization, "less_bn.gc_flag"))
    if flags["grad_freeze"]:
        wanted.append((FreezeOptimizer, "grad_freeze"))
    if flags["adasum"]:
        wanted.append((AdaSum, "adasum"))
    if flags["grad_accumulation"]:
        wanted.append((GradientAccumulation, "grad_accumulation"))
    if loss_scale is not None:
        wanted.append((DynamicLossScaleOptimizer, "loss_scale"))
    for cls, flag in wanted:
        if find_in_chain(optimizer, cls) is not None:
            raise ValueError(
                f"The optimizer {optimizer.name!r} already contains a {cls.__name__}, and the "
                f"boost config enables it too ({flag}); pass the plain optimizer, or switch "
                f"{flag} off with {{'boost': {{'mode': 'manual', ...}}}}."
            )
    if flags["cautious"]:
        optimizer = CautiousOptimizer(optimizer, **config["cautious"])
    if flags["orthogonal_updates"]:
        optimizer = OrthogonalUpdates(optimizer, **config["orthogonal_updates"])
    if flags["less_bn"] and config["less_bn"]["gc_flag"]:
        gc_flag = config["less_bn"]["gc_flag"]
        optimizer = GradientCentralization(optimizer, only_with_batch_norm=gc_flag == "auto")
    if flags["grad_freeze"]:
        # Groups come from the model when BoostModel builds it (by layer
        # structure), else from the variable list at build time.
        optimizer = FreezeOptimizer(optimizer, schedule=dict(config["grad_freeze"]))
    if flags["adasum"]:
        optimizer = AdaSum(
            optimizer,
            reduce_on=config["adasum"]["reduce_on"],
            hierarchical=config["adasum"]["hierarchical"],
            exchange=config["adasum"]["exchange"],
            norm_bound=config["adasum"]["norm_bound"],
            device_number=config["common"]["device_number"],
            gradient_split_groups=config["common"]["gradient_split_groups"],
        )
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
                stacklevel=4,
            )
    if loss_scale is not None:
        optimizer = DynamicLossScaleOptimizer(optimizer, loss_scale)
    return optimizer


@keras.saving.register_keras_serializable(package="keras_boost")
class BoostOptimizer(OptimizerWrapper):
    """The optimizer-level algorithms of a boost level and config.

    Built by `boost.wrap(optimizer, level, boost_config_dict)`, and by
    `BoostModel.compile` from whatever optimizer it is given. At `"O0"` it is
    a pure pass-through. Without a level (`boost.wrap(optimizer)`), it is O0
    on a plain model and takes the level of the `BoostModel` it is compiled
    with.

    Args:
        optimizer: the user's `keras.optimizers.Optimizer`.
        boost_level: `"O0"`, `"O1"`, `"O2"`, or `None` (follow the model).
        boost_config_dict: `None`, a dict or a JSON file path.
        loss_scale: `None`, or a `boost.DynamicLossScale`: dynamic loss
            scaling, outermost in the chain (`BoostModel` sets it).
        name: optional name.
        for_boost_model: build the chain for a `BoostModel`'s train step
            (`BoostModel.compile` sets it). Otherwise the chain is for a
            plain model, and a level (mode `"auto"`) leaves out gradient
            freezing, which saves no time there (`left_out` names it); a
            config that asks for it by name (mode `"manual"` or
            `"enable_all"`) keeps it.

    Example:

    ```python
    opt = boost.wrap(keras.optimizers.Adam(1e-3), "O1")
    model.compile(optimizer=opt, loss="mse")
    opt.boost_config["boost"]["grad_freeze"]  # True: the level's config
    opt.left_out  # ('grad_freeze',): not in the chain on a plain model
    ```
    """

    def __init__(
        self, optimizer, boost_level="O0", boost_config_dict=None, name=None,
        loss_scale=None, chain_built=False, for_boost_model=False,
    ):
        check_optimizer(optimizer)
        if boost_level is None and boost_config_dict is not None:
            raise ValueError(
                "boost.wrap got a boost_config_dict without a level; pass the level too "
                "(e.g. boost.wrap(optimizer, 'O1', config))."
            )
        level = "O0" if boost_level is None else boost_level
        resolved = config_lib.resolve_config(config_lib.check_level(level), boost_config_dict)
        if isinstance(loss_scale, dict):
            loss_scale = DynamicLossScale.from_config(loss_scale)
        if loss_scale is not None and not isinstance(loss_scale, DynamicLossScale):
            raise TypeError(
                f"loss_scale must be None or a boost.DynamicLossScale, got {loss_scale!r}."
            )
        # `chain_built` (from_config): `optimizer` is the saved chain itself,
        # with its state-defining config (e.g. a generated freeze schedule).
        if chain_built:
            chain = optimizer
        else:
            settings = resolved if for_boost_model else _for_plain_model(resolved)
            chain = build_optimizer_chain(optimizer, settings, loss_scale)
        super().__init__(chain, name=name or "boost_optimizer")
        # Read from the chain, so that a reloaded chain says the same.
        self._left_out = tuple(
            name for name, cls in _MODEL_ONLY.items()
            if resolved["boost"][name] and find_in_chain(chain, cls) is None
        )
        self._boost_config = resolved
        self._boost_level = boost_level
        self._loss_scale = loss_scale
        self._user_optimizer = None if chain_built else optimizer
        # True once the model surgery of the level was applied (or reported)
        # by BoostModel or AutoBoost.network_auto_process_train.
        self.model_surgery_handled = False

    def _build_own(self, var_list):
        flags = self._boost_config["boost"]
        # A level's less_bn on a plain model still centralizes gradients
        # (gc_flag); the surgery it cannot do is only worth a warning when
        # asked for by name, as in AutoBoost.
        if flags["less_bn"] and flags["mode"] != "auto" and not self.model_surgery_handled:
            # The level's other model-level algorithms cannot act here either.
            others = [name for name, on in (("fused batch norm", flags["fused_batch_norm"]),
                                            ("prefix caching", flags["prefix_cache"])) if on]
            also = f" ({' and '.join(others)} neither)" if others else ""
            warnings.warn(
                "less_bn is on, but this optimizer only sees the gradients: gradient "
                "centralization (gc_flag) can apply, the BatchNormalization removal does "
                f"not{also}. Use BoostModel.from_model(model, boost_level=...), "
                "AutoBoost(level, config).network_auto_process_train(model, optimizer) "
                "or boost.LessBN(model) for the model surgery.",
                NoEffectWarning,
                stacklevel=4,
            )
        if self._boost_config["boost"]["loss_scale_group"] and not self.model_surgery_handled:
            warnings.warn(
                "loss_scale_group acts in BoostModel's train step (the per-group unscale and "
                "overflow skip); an optimizer on a plain model cannot do it. Use "
                "BoostModel.from_model(model, boost_config_dict=...) with a "
                "boost.layers.GroupLossScaleManager in the model.",
                NoEffectWarning,
                stacklevel=4,
            )
        batch_parts = [name for name in ("seq_length_warmup", "selective_backprop") if flags[name]]
        if batch_parts and not self.model_surgery_handled:
            warnings.warn(
                f"{' and '.join(batch_parts)} {'choose' if len(batch_parts) > 1 else 'chooses'} the batch "
                "BoostModel's train step trains on; an "
                "optimizer on a plain model never sees the batches. Use "
                "BoostModel.from_model(model, boost_config_dict=...).",
                NoEffectWarning,
                stacklevel=4,
            )
        precision = self._boost_config["common"]["precision"]
        if precision is not None and not self.model_surgery_handled:
            warnings.warn(
                f"common.precision={precision!r} sets the model's dtype policy, which an "
                "optimizer cannot change: use BoostModel.from_model(model, boost_config_dict=...) "
                "or AutoBoost(level, config).network_auto_process_train(model, optimizer), "
                "or boost.precision.with_precision(model, policy).",
                NoEffectWarning,
                stacklevel=4,
            )

    @property
    def boost_level(self):
        """The level given, or None when it follows the model (then O0 alone)."""
        return self._boost_level

    @property
    def left_out(self):
        """Names of the level's algorithms left out of this chain because an
        optimizer on a plain model cannot make them save time (e.g.
        `("grad_freeze",)` for `boost.wrap(optimizer, "O1")`); a `BoostModel`
        compiled with this optimizer builds its chain with them."""
        return self._left_out

    def __repr__(self):
        chain = " > ".join(type(o).__name__ for o in optimizer_chain(self)[1:])
        left_out = f", left out on a plain model: {list(self._left_out)}" if self._left_out else ""
        return f"<BoostOptimizer level={self._boost_level!r}: {chain}{left_out}>"

    @property
    def boost_config(self):
        """The fully resolved boost config (a copy)."""
        return copy.deepcopy(self._boost_config)

    @property
    def loss_scale(self):
        """The `DynamicLossScale` of the chain, or None."""
        return self._loss_scale

    @property
    def user_optimizer(self):
        """The optimizer that was wrapped (None for a reloaded chain)."""
        return self._user_optimizer

    def get_config(self):
        return {
            "name": self.name,
            "optimizer": keras.saving.serialize_keras_object(self.inner_optimizer),
            "boost_level": self._boost_level,
            # The resolved config re-resolves to itself, so reloading is exact.
            "boost_config_dict": self._boost_config,
            "loss_scale": None if self._loss_scale is None else self._loss_scale.get_config(),
            "chain_built": True,
        }


    def build_for(self, model):
        """Builds the whole chain for `model`'s variables (idempotent), in
        its strategy's scope.

        `BoostModel`'s step applies parts of the chain directly (the loss
        scaler), so the chain is built at compile rather than on its first
        `apply`; its variables, and hence saving and loading, are then
        complete.
        """
        if self.built or not model.built:
            return
        tf_backend = keras.backend.backend() == "tensorflow"
        with model.distribute_strategy.scope() if tf_backend else contextlib.nullcontext():
            self.build(model.trainable_variables)


def _for_plain_model(config):
    """`config` without the algorithms the level (mode "auto") turned on
    that cannot act through an optimizer on a plain model."""
    if config["boost"]["mode"] != "auto":
        return config
    return {**config, "boost": {**config["boost"], **dict.fromkeys(_MODEL_ONLY, False)}}


def _chain_settings(config):
    """A resolved config without `common.precision`, which sets the model's
    dtypes, not the optimizer chain (a copy in another precision, e.g.
    `with_precision`'s, keeps its source's compiled chain)."""
    return {**config, "common": {**config["common"], "precision": None}}


def chain_for_model(model, optimizer):
    """The `BoostOptimizer` a `BoostModel` compiles for `optimizer`.

    A plain Keras optimizer (or its name, or config) is wrapped in the
    model's chain; a `boost.wrap(optimizer)` without a level follows the
    model; one with another explicit level or config, and Keras'
    `LossScaleOptimizer` (the model scales the loss itself), are refused.
    """
    if isinstance(optimizer, (str, dict)):
        optimizer = keras.optimizers.get(optimizer)  # "sgd", a config dict
    check_optimizer(optimizer, where=f"BoostModel {model.name!r}'s optimizer")
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        raise ValueError(
            f"BoostModel {model.name!r} scales the loss itself (the overflow check runs "
            "over all replicas): compile it with the inner optimizer "
            f"({optimizer.inner_optimizer.name!r}) instead of a LossScaleOptimizer, and "
            "set the scaling with BoostModel(..., loss_scale=boost.DynamicLossScale("
            "initial_scale=...)) or loss_scale='dynamic'."
        )
    level, config, loss_scale = model.boost_level, model.boost_config, model.loss_scale
    if not isinstance(optimizer, BoostOptimizer):
        return BoostOptimizer(optimizer, level, config, loss_scale=loss_scale, for_boost_model=True)
    if optimizer.boost_level is not None and (
        optimizer.boost_level != level or _chain_settings(optimizer.boost_config) != _chain_settings(config)
    ):
        raise ValueError(
            f"BoostModel {model.name!r} has boost_level={level!r} but was compiled "
            f"with boost.wrap(..., {optimizer.boost_level!r}) and "
            f"{'the same level with another' if optimizer.boost_level == level else 'its'}"
            " config; set the level and config in one place: BoostModel wraps a plain "
            "optimizer itself, and boost.wrap(optimizer) without a level follows the model."
        )
    if optimizer.boost_level is not None and optimizer.loss_scale == loss_scale and not optimizer.left_out:
        return optimizer  # e.g. the saved chain, re-compiled by load_model
    if optimizer.built or optimizer.user_optimizer is None:
        raise ValueError(
            f"The optimizer {optimizer.name!r} was already built for a plain model or other "
            f"boost settings (level {optimizer.boost_level!r}, loss scale {optimizer.loss_scale}, "
            f"left out {list(optimizer.left_out)}) than "
            f"BoostModel {model.name!r} (level {level!r}, loss scale {loss_scale}); "
            "compile with a fresh optimizer."
        )
    return BoostOptimizer(optimizer.user_optimizer, level, config, loss_scale=loss_scale, for_boost_model=True)
