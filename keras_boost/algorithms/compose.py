"""What `BoostModel` asks of the algorithms, answered in one place.

`BoostModel` names no algorithm: it asks this module for the step parts of
its optimizer chain (`step_parts_for`), for its loss scale, for the checks
and preparation `compile` needs, for the warnings a constructor gives, and
for the end-of-fit summary, to which every algorithm contributes its phrase.
"""

import inspect
import warnings
import weakref

import keras

from keras_boost import config as config_lib
from keras_boost import keras_private
from keras_boost.algorithms.accumulation import find_gradient_accumulation
from keras_boost.algorithms.dim_reduce import DimReduce
from keras_boost.algorithms.dim_reduce import DimReduceStep
from keras_boost.algorithms.freezing import FreezeOptimizer
from keras_boost.algorithms.freezing import FreezingStep
from keras_boost.algorithms.loss_scaling import DynamicLossScaleOptimizer
from keras_boost.algorithms.loss_scaling import GroupLossScaleStep
from keras_boost.algorithms.loss_scaling import LossScaleStep
from keras_boost.algorithms.loss_scaling import group_manager
from keras_boost.algorithms.loss_scaling import model_loss_scale
from keras_boost.algorithms.optimizer_wrapper import find_in_chain
from keras_boost.algorithms.step_part import update_owner
from keras_boost.errors import NoEffectWarning
from keras_boost.algorithms.fused_batch_norm import FusedBatchNormalization
from keras_boost.optimizers.boost_optimizer import BoostOptimizer
from keras_boost.algorithms.cautious import CautiousOptimizer
from keras_boost.algorithms.centralization import GradientCentralization
from keras_boost.algorithms.centralization import exclude_unsuited_kernels
from keras_boost.algorithms.precision import PrecisionChoice
from keras_boost.algorithms.precision import model_policies
from keras_boost.algorithms.less_bn import find_less_bn
from keras_boost.algorithms.less_bn import patterns_without
from keras_boost.algorithms.less_bn import REPORT_ATTR
from keras_boost.algorithms.less_bn import unchanged_report
from keras_boost.algorithms.orthogonal_updates import OrthogonalUpdates
from keras_boost.algorithms.prefix_cache import fit_with_level_cache
from keras_boost.algorithms.selective_backprop import SelectiveBackpropStep
from keras_boost.algorithms.seq_length_warmup import SeqLengthWarmupStep

__all__ = ["carry_surgery_report", "choice_from_config", "model_loss_scale", "prepare_compile", "run_fit",
           "step_parts_for", "summary_line", "warn_unapplied"]

# model -> the `CacheDecision` of its last fit (prefix caching on).
_FIT_DECISIONS = weakref.WeakKeyDictionary()
_FIT_SIGNATURE = inspect.signature(keras.Model.fit)


def step_parts_for(model, optimizer=None):
    """The `StepPart`s of `model` compiled with `optimizer` (default: its own)."""
    optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
    if optimizer is not None and not isinstance(optimizer, BoostOptimizer):
        # Only reachable by assigning model.optimizer by hand.
        raise ValueError(
            f"BoostModel {model.name!r}: model.optimizer was replaced after compile by "
            f"{type(optimizer).__name__}; compile again instead."
        )
    parts = []
    freeze = find_in_chain(optimizer, FreezeOptimizer)
    if freeze is not None:
        accumulation = find_gradient_accumulation(optimizer)
        parts.append(FreezingStep(freeze, accumulation.max_accumulation_step if accumulation else 1))
    for wrapper_type, part_type in ((DynamicLossScaleOptimizer, LossScaleStep), (DimReduce, DimReduceStep)):
        wrapper = find_in_chain(optimizer, wrapper_type)
        if wrapper is not None:
            parts.append(part_type(wrapper))
    if model.boost_config["boost"]["loss_scale_group"]:
        parts.append(GroupLossScaleStep(group_manager(model)))
    if model.boost_config["boost"]["seq_length_warmup"]:
        parts.append(SeqLengthWarmupStep(**model.boost_config["seq_length_warmup"]))
    if model.boost_config["boost"]["selective_backprop"]:
        parts.append(SelectiveBackpropStep(**model.boost_config["selective_backprop"]))
    return parts


def prepare_compile(model, optimizer, parts, compile_kwargs):
    """Checks and prepares `optimizer` (the chain) and `parts` for `model`;
    returns the `compile` keyword arguments to pass on to Keras."""
    update_owner(parts)  # two parts replacing the update do not combine
    if model.loss_scale is not None:
        # The chain scales the loss; Keras must not add a LossScaleOptimizer.
        compile_kwargs = {**compile_kwargs, "auto_scale_loss": False}
    for part in parts:
        part.on_compile(model, compile_kwargs)
    optimizer.model_surgery_handled = True  # the model's own constructor warned
    # GC sees variables only; mark this graph's depthwise, grouped and gate kernels
    # (again after load_model, whose variables are new).
    exclude_unsuited_kernels(model)
    return compile_kwargs


def warn_unapplied(model, stacklevel):
    """Warns when `model`'s config asks for model surgery (LessBN) or a
    precision its constructor cannot apply (`from_model` does)."""
    config = model.boost_config
    if config["boost"]["less_bn"]:
        removable = _less_bn_report(model).num_removed
        if removable:
            warnings.warn(
                f"BoostModel(boost_level={model.boost_level!r}) trains the graph it is "
                f"given, but LessBN would remove {removable} BatchNormalization "
                "layer(s) from it: build it with BoostModel.from_model(model, "
                "boost_level=...) (or boost.LessBN(model) first) to apply the surgery.",
                NoEffectWarning, stacklevel=stacklevel + 1,
            )
    precision = config["common"]["precision"]
    if precision is not None and not model_policies(model) <= {precision}:
        warnings.warn(
            f"BoostModel(boost_config_dict={{'common': {{'precision': {precision!r}}}}}) trains the "
            f"layers it is given, which compute in {sorted(model_policies(model))}: build it with "
            "BoostModel.from_model(model, boost_config_dict=...) to get the precision applied.",
            NoEffectWarning, stacklevel=stacklevel + 1,
        )


def carry_surgery_report(source, boosted):
    """Sets `boosted.less_bn_report`: what LessBN did to `source`, the model
    `boosted` was built from.

    The report of the surgery when LessBN changed `source`; an empty report
    saying why nothing was removed (`LessBNReport.unchanged`) when LessBN
    was on and left it as it was; None when LessBN is off (O0, or
    `{"boost": {"mode": "manual", "less_bn": false}}`).
    """
    report = getattr(source, REPORT_ATTR, None)
    if report is None and boosted.boost_config["boost"]["less_bn"]:
        report = unchanged_report(source, boosted.boost_config["less_bn"])
    setattr(boosted, REPORT_ATTR, report)


def choice_from_config(choice):
    """The `PrecisionChoice` a constructor gets as itself or as its config."""
    return PrecisionChoice.from_config(choice) if isinstance(choice, dict) else choice


def _less_bn_report(model):
    section = model.boost_config["less_bn"]
    return find_less_bn(model, patterns_without(section["exclude_patterns"]),
                        remove_pretrained_bn=section["remove_pretrained_bn"])


def run_fit(model, fit, args, kwargs, parts):
    """`BoostModel.fit(*args, **kwargs)`: Keras' `fit` (`fit`, bound to the
    model) with the parts' callbacks and the end-of-fit summary, or, with
    prefix caching on and able to act, the cached fit (see
    `keras_boost.algorithms.prefix_cache.level`)."""
    arguments = _FIT_SIGNATURE.bind(model, *args, **kwargs).arguments
    arguments.pop("self")
    user_callbacks = list(arguments.get("callbacks") or [])
    report = _BoostReportCallback(model)
    extra = [callback for part in parts for callback in part.callbacks(model)]

    def uncached_fit(**given):
        return fit(**{**given, "callbacks": [*user_callbacks, *extra, report]})

    _FIT_DECISIONS.pop(model, None)
    if not model.boost_config["boost"]["prefix_cache"]:
        return uncached_fit(**arguments)
    arguments["callbacks"] = [*user_callbacks, report]
    max_cache_mb = model.boost_config["prefix_cache"]["max_cache_mb"]
    return fit_with_level_cache(model, uncached_fit, arguments, parts, max_cache_mb,
                                record=lambda decision: _FIT_DECISIONS.__setitem__(model, decision))


def summary_line(model, parts):
    """`BoostModel.boost_summary()`: each algorithm's phrase, in one line
    ("" at O0 with nothing on)."""
    config = model.boost_config
    if not (config_lib.enabled_algorithms(config) or config["common"]["precision"] or model.loss_scale is not None):
        return ""
    owner = update_owner(parts)
    decision = _FIT_DECISIONS.get(model)
    if decision is not None and decision.cached:  # the optional parts did not run (its phrase says so)
        parts = [part for part in parts if not part.optional]
    phrases = [_surgery_phrase(model), _centralization_phrase(model), _cautious_phrase(model),
               _orthogonal_phrase(model)]
    phrases += [part.summary(model) for part in parts if part is not owner]
    phrases += [decision.phrase] if decision is not None else []
    # The update's owner is the loss scaling when there is one.
    phrases += [_precision_phrase(model), (owner.summary(model) if owner else "") or "no loss scaling"]
    return f"keras_boost {model.boost_level} on {model.name!r}: " + "; ".join(p for p in phrases if p) + "."


def _surgery_phrase(model):
    report = getattr(model, REPORT_ATTR, None)
    layers = keras_private.flatten_layers(model)
    fused = sum(isinstance(layer, FusedBatchNormalization) for layer in layers)
    phrases = []
    if report is not None and not report.unchanged:
        done = [f"removed {report.num_removed} of {report.num_bn} BatchNormalization"] if report.num_bn else []
        done += ["NormalizedDense head"] if report.head else []
        phrases.append("LessBN " + (", ".join(done) or "changed nothing"))
    elif model.boost_config["boost"]["less_bn"]:
        removable = _less_bn_report(model).num_removed
        phrases.append(f"LessBN not applied ({removable} BatchNormalization it would remove: build with "
                       "BoostModel.from_model)" if removable else "no BatchNormalization for LessBN to remove")
    if fused:
        phrases.append(f"{fused} fused BatchNormalization")
    return "; ".join(phrases)


def _centralization_phrase(model):
    # It changes the updates even where nothing else of the level acts, or
    # (gc_flag "auto") switches itself off: say which.
    optimizer = getattr(model, "optimizer", None)
    centralization = find_in_chain(optimizer, GradientCentralization) if optimizer is not None else None
    return centralization.summary() if centralization is not None else ""


def _orthogonal_phrase(model):
    optimizer = getattr(model, "optimizer", None)
    orthogonal = find_in_chain(optimizer, OrthogonalUpdates) if optimizer is not None else None
    return orthogonal.summary() if orthogonal is not None else ""


def _cautious_phrase(model):
    # The known failure of caution is a mask that never fires: say how much it masked.
    optimizer = getattr(model, "optimizer", None)
    cautious = find_in_chain(optimizer, CautiousOptimizer) if optimizer is not None else None
    return cautious.summary() if cautious is not None else ""


def _precision_phrase(model):
    if model.precision_choice is not None:
        return model.precision_choice.summary_line()
    policies = sorted(model_policies(model))
    return "" if policies == ["float32"] else f"precision {', '.join(policies)}"


class _BoostReportCallback(keras.callbacks.Callback):
    """Prints `boosted.boost_summary()` at the end of `fit` when `verbose`
    is not 0 (after the progress bar, through Keras' printer). It holds the
    model itself: a cached fit's callbacks see the suffix as their model."""

    def __init__(self, boosted):
        super().__init__()
        self._boosted = weakref.ref(boosted)

    def on_train_end(self, logs=None):
        boosted = self._boosted()
        line = boosted.boost_summary() if boosted is not None else ""
        if line and self.params.get("verbose"):
            keras_private.print_msg(line)
