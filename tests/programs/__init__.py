"""Programs of the shapes Keras users write, for `tests/test_programs.py`.

Each `Program` builds a tiny model (built, uncompiled) with tiny synthetic
data, and says how it is compiled and fit. `PROGRAMS` maps names to them.
"""

import functools

import keras

from programs import generative
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

PROGRAMS = {
    p.name: p
    for p in [
        Program("convnet", vision.convnet, _classifier),
        Program("xception", vision.xception, _logits_classifier),
        Program("mobilenet_v2", vision.mobilenet_v2, _logits_classifier, less_bn_target=True),
        Program("transformer", sequence.transformer, _classifier),
        Program(
            "conv1d_callbacks",
            sequence.conv1d_forecaster,
            functools.partial(compile_with, loss="mse", metrics=["mae"]),
            fit=procedures.fit_with_checkpoint_and_schedules,
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
    ]
}

__all__ = ["Data", "PROGRAMS", "Program"]
