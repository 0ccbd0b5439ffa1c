"""Programs of the shapes Keras users write, for `tests/test_programs.py`.

Each `Program` builds a tiny model (built, uncompiled) with tiny synthetic
data, and says how it is compiled and fit. `PROGRAMS` maps names to them.
"""

import functools

import keras

from programs import applications
from programs import generative
from programs import multi_io
from programs import procedures
from programs import sequence
from programs import tabular
from programs import vision
from programs.base import Data
from programs.base import Program
from programs.base import compile_with

_classifier = functools.partial(
    compile_with, loss="sparse_categorical_crossentropy", metrics=["accuracy"]
)
_logits_classifier = functools.partial(
    compile_with,
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)

_regressor = functools.partial(compile_with, loss="mse", metrics=["mae"])
# keras.applications models train through BoostModel.from_model alone, on
# every backend: the MobileNets at O0 (against plain Keras) and O1, the
# bigger graphs at O1 here (the surgery, the step, saving and resuming on
# their graphs) and at O0 uncompiled in
# `test_big_applications_at_o0_train_like_plain_keras`: their compiled O0 runs
# would add 75-160 s each on 2 CPU cores (three compiles of a 20-40 s step,
# with XLA's cheap passes: see conftest.py).
_APPLICATION = dict(entry_points=frozenset({"boost_model"}))
_BIG_APPLICATION = dict(_APPLICATION, levels=("O1",))

PROGRAMS = {
    p.name: p
    for p in [
        Program("convnet", vision.convnet, _classifier),
        Program("xception", vision.xception, _logits_classifier),
        Program("mobilenet_v2", vision.mobilenet_v2, _logits_classifier, less_bn_target=True),
        Program("residual_operator", vision.residual_operator, _classifier),
        Program("residual_mlp", tabular.residual_mlp, _regressor),
        Program("transformer", sequence.transformer, _classifier),
        Program("masked_bilstm", sequence.masked_bilstm, _classifier),
        Program(
            "conv1d_callbacks",
            sequence.conv1d_forecaster,
            _regressor,
            fit=procedures.fit_with_checkpoint_and_schedules,
        ),
        Program(
            "multi_io",
            multi_io.image_and_features,
            multi_io.compile_two_heads,
            loss_keys=("loss", "class_loss", "value_loss"),
            less_bn_target=True,
        ),
        Program(
            "tabular_dict",
            tabular.heart_disease_classifier,
            functools.partial(compile_with, loss="binary_crossentropy", metrics=["accuracy"]),
        ),
        Program(
            "vae",
            generative.vae,
            generative.compile_vae,
            loss_keys=("total_loss", "reconstruction_loss", "kl_loss"),
            custom_train_step=True,
            subclassed=True,
        ),
        Program(
            "gan",
            generative.gan,
            generative.compile_gan,
            optimizers=("d_optimizer", "g_optimizer"),
            loss_keys=("d_loss", "g_loss"),
            custom_train_step=True,
            subclassed=True,
            backends=frozenset({"tensorflow", "torch"}),
            skip_reason="Keras' JAX trainer threads one optimizer's state through fit",
        ),
        Program(
            "convnet_mixed_float16",
            functools.partial(vision.convnet, output_dtype="float32"),
            _classifier,
            policy="mixed_float16",
            rtol=1e-3,
            atol=1e-4,
        ),
        Program(
            "tf_data_backup_restore",
            vision.convnet,
            _classifier,
            fit=procedures.fit_interrupted_then_resumed,
            backends=frozenset({"tensorflow"}),
            skip_reason="tf.data input",
        ),
        Program("app_mobilenet_v2", applications.mobilenet_v2, _classifier, less_bn_target=True,
                **_APPLICATION),
        Program("app_mobilenet_v3_small", applications.mobilenet_v3_small, _logits_classifier,
                less_bn_target=True, **_APPLICATION),
        Program("app_resnet50_v2", applications.resnet50_v2, _logits_classifier, **_BIG_APPLICATION),
        Program("app_efficientnet_b0", applications.efficientnet_b0, _logits_classifier,
                **_BIG_APPLICATION),
        Program("app_densenet121", applications.densenet121, _logits_classifier, less_bn_target=True,
                **_BIG_APPLICATION),
    ]
}

# The programs of the fast lane (`-m "not slow"`): a BN CNN, an `h + inputs`
# residual MLP and a transformer, through every entry point; the others
# (seconds each, minutes for keras.applications) run in the full suite.
FAST_LANE = frozenset({"convnet", "residual_mlp", "transformer"})

__all__ = ["Data", "FAST_LANE", "PROGRAMS", "Program"]
