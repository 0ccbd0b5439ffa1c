"""`GradientCentralization`: LessBN's `gc_flag`, as an optimizer wrapper."""

import warnings
import weakref

import keras

from keras_boost import keras_private
from keras_boost.algorithms.centralization.centralize import centralize
from keras_boost.algorithms.centralization.centralize import gc_applies
from keras_boost.algorithms.centralization.centralize import GC_CHANNEL_MULTIPLE
from keras_boost.algorithms.centralization.gates import squeeze_excite_kernels
from keras_boost.algorithms.less_bn import NO_GC_ATTR
from keras_boost.algorithms.less_bn import REPORT_ATTR
from keras_boost.algorithms.optimizer_wrapper import optimizer_chain
from keras_boost.algorithms.optimizer_wrapper import OptimizerWrapper
from keras_boost.errors import NoEffectWarning

__all__ = [
    "exclude_gate_kernels",
    "exclude_grouped_kernels",
    "exclude_unsuited_kernels",
    "GradientCentralization",
    "has_batch_norm",
    "should_centralize",
]

# MindSpore skips parameters whose name contains one of these. Keras'
# `Embedding` tables ("embeddings") are lookups, not the weight vectors of
# neurons GC is defined on; centralizing a position table over positions cost
# a transformer a point (benchmarks/results/JOURNAL.md, 2026-12-06).
_SKIPPED_NAME_PARTS = ("beta", "gamma", "bias", "embeddings")


_DEPTHWISE = (keras.layers.DepthwiseConv1D, keras.layers.DepthwiseConv2D)
_SEPARABLE = (keras.layers.SeparableConv1D, keras.layers.SeparableConv2D)


def _grouped_kernel(layer):
    """The depthwise / grouped kernel of `layer` (chosen by its type), or None."""
    if isinstance(layer, _DEPTHWISE):
        name = "kernel"
    elif isinstance(layer, _SEPARABLE):
        name = "depthwise_kernel"
    else:
        groups = getattr(layer, "groups", 1)
        if not (isinstance(groups, int) and groups > 1):
            return None
        name = "kernel"
    if not layer.built:
        return None  # no kernel yet (GradientCentralization marks again at build)
    return keras_private.layer_raw_variable(layer, name)


def _grouped_kernels(model):
    """Kernels of depthwise / grouped convolutions in `model` (recursively)."""
    layers = keras_private.flatten_layers(model, include_self=True, recursive=True)
    return [k for k in map(_grouped_kernel, layers) if k is not None]


def _exclude(function, model, *finders):
    """Marks the kernels the `finders` return for `model` (GC leaves them
    alone); the number of kernels marked."""
    if not isinstance(model, keras.layers.Layer):
        raise TypeError(
            f"{function} expects a keras.Model (or layer), got "
            f"{type(model).__module__}.{type(model).__name__}."
        )
    kernels = {id(k): k for find in finders for k in find(model)}
    for kernel in kernels.values():
        setattr(kernel, NO_GC_ATTR, True)
    return len(kernels)


def exclude_grouped_kernels(model):
    """Marks `model`'s depthwise and grouped-conv kernels: GC leaves them alone.

    `GradientCentralization` sees variables, not layers (a Keras 3 variable
    holds no reference to its layer), so the layer type is read here: the
    kernels of `DepthwiseConv1D/2D`, the depthwise kernels of
    `SeparableConv1D/2D` and the kernels of convolutions with `groups > 1`
    get a mark that `should_centralize` reads, whatever the layers are
    called. `exclude_unsuited_kernels`, which GC calls for you on the model
    it trains, does this and `exclude_gate_kernels`. The mark is on the
    variables: a model loaded from a file needs it again.

    Returns the number of kernels marked.

    Example:

    ```python
    inputs = keras.Input((8, 8, 32))
    model = keras.Model(inputs, keras.layers.DepthwiseConv2D(3, name="dw")(inputs))
    boost.optimizers.exclude_grouped_kernels(model)   # 1
    boost.optimizers.should_centralize(model.get_layer("dw").kernel)   # False
    ```
    """
    return _exclude("exclude_grouped_kernels", model, _grouped_kernels)


def exclude_gate_kernels(model):
    """Marks the kernels of `model`'s squeeze-excite gates: GC leaves them alone.

    A gate (EfficientNet, MobileNetV3) is a branch from a global pooling
    layer into a `Multiply`, found from the layer graph; its kernels feed no
    normalization, and centering their gradients cost O1 2.6 to 6.5 points
    on EfficientNetB0 (`docs/methods/centralization.md`). Like
    `exclude_grouped_kernels`, the mark is on the variables and is read by
    `should_centralize`. Returns the number of kernels marked.

    Example:

    ```python
    model = keras.applications.EfficientNetB0(weights=None)
    boost.optimizers.exclude_gate_kernels(model)   # 32
    ```
    """
    return _exclude("exclude_gate_kernels", model, squeeze_excite_kernels)


def exclude_unsuited_kernels(model):
    """`exclude_grouped_kernels(model)` and `exclude_gate_kernels(model)`:
    marks every kernel that GC leaves alone because of its layer or its
    place in the graph. `GradientCentralization(optimizer, model=model)`,
    `AutoBoost.network_auto_process_train` and `BoostModel` call it for you.
    Returns the number of kernels marked.

    Example:

    ```python
    boost.optimizers.exclude_unsuited_kernels(keras.applications.MobileNetV3Small(weights=None))
    ```
    """
    return _exclude("exclude_unsuited_kernels", model, _grouped_kernels, squeeze_excite_kernels)


def should_centralize(variable, channel_multiple=GC_CHANNEL_MULTIPLE):
    """Whether GC applies to the gradient of `variable` (MindSpore's rules).

    Yes for trainable tensors of rank >= 2 whose input-channel axis (-2) is a
    multiple of 16, except: names containing "beta", "gamma" or "bias"
    (MindSpore's rule) or "embeddings" (Keras' `Embedding` tables, which are
    lookups rather than neurons' weights); depthwise / grouped kernels;
    squeeze-excite gate kernels; and the `NormalizedDense` head.

    Depthwise / grouped and gate kernels are known by the mark that
    `exclude_unsuited_kernels(model)` sets from the layer graph. A variable
    alone does not tell its layer, so without the mark the fallback is the
    name: a path containing "depthwise" (Keras' default layer names, Keras
    Applications' naming, `SeparableConv`'s `depthwise_kernel`). A
    `DepthwiseConv2D(name="dw")` is therefore recognised only through the
    mark, and gate kernels only through it.

    Example:

    ```python
    dense = keras.layers.Dense(8); dense.build((None, 32))
    should_centralize(dense.kernel), should_centralize(dense.bias)  # True, False
    ```
    """
    if getattr(variable, NO_GC_ATTR, False):
        return False
    path = str(getattr(variable, "path", None) or getattr(variable, "name", ""))
    parts = path.lower().split("/")
    name = parts[-1]
    if any(p in name for p in _SKIPPED_NAME_PARTS):
        return False
    if "depthwise" in name or any("depthwise" in p for p in parts[:-1]):
        return False
    return gc_applies(variable.shape, channel_multiple)


def has_batch_norm(model):
    """Whether `model` has a `BatchNormalization` layer (sub-models
    included), or had one before LessBN removed it.

    Example:

    ```python
    has_batch_norm(keras.applications.MobileNetV2(weights=None))   # True
    ```
    """
    report = getattr(model, REPORT_ATTR, None)
    if report is not None and report.num_bn:
        return True
    layers = keras_private.flatten_layers(model, include_self=True, recursive=True)
    return any(isinstance(layer, keras.layers.BatchNormalization) for layer in layers)


def _building_model(optimizer):
    """The `keras.Model` compiled with `optimizer` (alone or in a chain) whose
    method is building it now, or None; one with BatchNormalization first.

    Keras builds a compiled model's optimizer from the model's own methods
    (`fit`'s symbolic build, `compile_from_config`, the first train step),
    and a Keras 3 variable does not know its layer: that model, found on the
    call stack, is where the layer types of a plain model's variables are.
    A prefix-cached fit builds it from the suffix (a head, often without
    BatchNormalization) inside the whole model's `fit`: the whole model is
    the one `only_with_batch_norm` asks about.
    """
    def compiled_with(model):
        return any(o is optimizer for o in optimizer_chain(getattr(model, "optimizer", None)))

    return (keras_private.calling_model(lambda model: compiled_with(model) and has_batch_norm(model))
            or keras_private.calling_model(compiled_with))


def _is_sparse(gradient):
    return type(gradient).__name__ == "IndexedSlices"


@keras.saving.register_keras_serializable(package="keras_boost")
class GradientCentralization(OptimizerWrapper):
    """Gradient centralization (LessBN's `gc_flag`) around any Keras optimizer.

    Before the wrapped optimizer's update, each kernel gradient that
    `should_centralize` selects (rank >= 2, input-channel axis a multiple of
    16, not a bias / norm parameter / depthwise or squeeze-excite gate
    kernel / `NormalizedDense` head) becomes `g - mean(g over every axis but
    the last)`, the per-output-channel centering of MindSpore's
    `Centralization` in Keras layouts. Sparse (`IndexedSlices`) gradients
    are passed through unchanged.

    Depthwise, grouped and gate kernels are recognised by their layer's type
    and place (`exclude_unsuited_kernels`), whatever they are called: in the
    layers of `model` when it is given, else of the model compiled with
    this optimizer (found when Keras builds the optimizer). An optimizer
    built outside a model (a custom training loop) knows only the names (see
    `should_centralize`), and says so when it centralizes convolution
    kernels: pass `model` there.

    With `only_with_batch_norm=True` (LessBN's `gc_flag="auto"`, the
    default of levels O1 and O2) it centralizes only when the model it
    trains has BatchNormalization (`has_batch_norm`; LessBN's companion on
    the nets whose BNs it removes) and passes every gradient through
    otherwise: on the zoo transformer, GC cost 0.25-0.55 point of accuracy
    on TensorFlow and JAX and gained none on PyTorch
    (`docs/methods/centralization.md`). `summary()` says which applied.
    The answer is part of the config once built: a model reloaded from a
    file (no LessBN report, perhaps no BN left) trains on as before.

    Differences from MindSpore: there, coupled weight decay is added to the
    gradient before centering; Keras applies weight decay to the variables
    inside the wrapped optimizer, so it is not centered. MindSpore's
    `gc_flag` is a bool, on by default.

    Args:
        optimizer: the `keras.optimizers.Optimizer` to wrap.
        model: optional `keras.Model` the optimizer will train: its
            depthwise, grouped-conv and gate kernels are marked
            (`exclude_unsuited_kernels`) now, and again when the optimizer is
            built (for layers built later). The model is not saved with the
            optimizer (`get_config` has no `model`): after reloading, the
            marks come from `exclude_unsuited_kernels(model)` on the loaded
            model, which `AutoBoost.network_auto_process_train` and
            `BoostModel.from_model` (with less_bn on) call on the model they
            return; without the marks only the name rule applies.
        name: optional name.
        only_with_batch_norm: centralize only when the model (`model`, else
            the model compiled with this optimizer, found when Keras builds
            it) has BatchNormalization. Without any model to ask (a custom
            training loop) it centralizes.

    Example:

    ```python
    opt = boost.GradientCentralization(keras.optimizers.SGD(0.1, momentum=0.9), model=model)
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    ```
    """

    def __init__(self, optimizer, model=None, name=None, only_with_batch_norm=False, **kwargs):
        super().__init__(optimizer, name=name or "gradient_centralization", **kwargs)
        if model is not None and not isinstance(model, keras.Model):
            raise TypeError(
                f"model must be None or a keras.Model, got "
                f"{type(model).__module__}.{type(model).__name__} ({model!r}). (The name is "
                "the third argument: GradientCentralization(optimizer, model=None, name=None).)"
            )
        if not isinstance(only_with_batch_norm, bool):
            raise TypeError(f"only_with_batch_norm must be True or False, got {only_with_batch_norm!r}.")
        self.only_with_batch_norm = only_with_batch_norm
        self._gc_mask = None
        # Decided when built for a model (None: not yet). False: every
        # gradient passes through. In the config: a model reloaded from a
        # file has no LessBN report to ask, and must train on as before.
        self._centralizing = None
        # A weak reference: the optimizer must not keep the model alive, and
        # the model is not part of the optimizer's state or config.
        self._model_ref = None
        if model is not None:
            self._model_ref = weakref.ref(model)
            exclude_unsuited_kernels(model)

    def _build_own(self, var_list):
        model = self._model_ref() if self._model_ref is not None else _building_model(self)
        if model is not None:
            exclude_unsuited_kernels(model)
        if self._centralizing is None and model is not None:
            self._centralizing = not (self.only_with_batch_norm and not has_batch_norm(model))
        # The JAX stateless path sees values, not variables: keep the rule's
        # result per position of the build-time variable list.
        self._gc_mask = [self.centralizing and should_centralize(v) for v in var_list]
        if model is None:
            self._warn_names_only(var_list)

    @property
    def centralizing(self):
        """False when `only_with_batch_norm` found a model without
        BatchNormalization at build: the wrapper then passes every gradient
        through."""
        return self._centralizing is not False

    def summary(self):
        """One phrase for the end-of-fit line: what GC does to this model.

        Example: `"gradient centralization of 21 conv/dense kernels"`.
        """
        if not self.centralizing:
            return "gradient centralization off (no BatchNormalization in the model)"
        if self._gc_mask is None:
            return "gradient centralization of the conv/dense kernels"
        if not any(self._gc_mask):
            return ("gradient centralization found no kernel to centralize (it needs input channels "
                    f"in multiples of {GC_CHANNEL_MULTIPLE})")
        return f"gradient centralization of {sum(self._gc_mask)} conv/dense kernels"

    def _warn_names_only(self, var_list):
        convolutions = [v.path for v, m in zip(var_list, self._gc_mask) if m and len(v.shape) >= 3]
        if convolutions:
            warnings.warn(
                f"{self.name}: built outside a model, so depthwise and grouped-conv kernels are "
                f"known by name only; the convolution kernels {convolutions} are centralized. "
                "Pass GradientCentralization(optimizer, model=model), or call "
                "boost.optimizers.exclude_unsuited_kernels(model) before building.",
                NoEffectWarning,
                stacklevel=4,
            )

    def _centralize(self, grads, mask):
        return [
            g if (g is None or not m or _is_sparse(g)) else centralize(g)
            for g, m in zip(grads, mask)
        ]

    def _mask_for(self, grads, trainable_variables):
        if not self.centralizing:
            return [False] * len(grads)
        if trainable_variables is not None and all(
            isinstance(v, keras.Variable) for v in trainable_variables
        ):
            return [should_centralize(v) for v in trainable_variables]
        if self._gc_mask is None or len(self._gc_mask) != len(grads):
            raise ValueError(
                f"{self.name}: got {len(grads)} gradients but was built for "
                f"{0 if self._gc_mask is None else len(self._gc_mask)} variables."
            )
        return self._gc_mask

    def _apply(self, grads, trainable_variables):
        mask = self._mask_for(grads, trainable_variables)
        self.inner_optimizer.apply(self._centralize(grads, mask), trainable_variables)

    def _stateless_apply(self, own_variables, inner_variables, grads, trainable):
        mask = self._mask_for(grads, None)
        new_trainable, new_inner = self.inner_optimizer.stateless_apply(
            inner_variables, self._centralize(grads, mask), trainable
        )
        return new_trainable, list(own_variables), list(new_inner)

    def get_config(self):
        config = super().get_config()
        config["only_with_batch_norm"] = self.only_with_batch_norm
        if self._centralizing is not None:  # decided on the model it trained
            config["centralizing"] = self._centralizing
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        centralizing = config.pop("centralizing", None)
        optimizer = super().from_config(config, custom_objects=custom_objects)
        optimizer._centralizing = centralizing
        return optimizer
