"""The workload zoo: models users bring, each with its data and recipe.

`WORKLOADS` maps a name to a factory returning a `keras_boost.bench.Workload`;
`keras_boost.bench.catalog.WORKLOADS` includes them, so
`keras-boost bench --workload NAME` runs them. Nothing downloads: the data
are made in the package or come from its embedded MNIST sample.

- `applications` (MobileNetV2), `applications-efficientnetb0`,
  `applications-resnet50v2`: keras.applications models from scratch on
  32x32 colored digits (`zoo.applications`).
- `finetune`: keras.io's transfer-learning flow, a ResNet-14 base
  pretrained on the digits 0-4 then a new head and its top fine-tuned on
  the digits 5-9, in two phases (`zoo.finetune`).
- `transformer`: keras.io's text-classification transformer on a generated
  keyword-order token task (`zoo.transformer`).
- `lm`: keras.io's miniature GPT (two causal transformer blocks), a
  character-level language model of generated grammar text, measured by
  its validation loss (`zoo.lm`).
"""

import functools

from keras_boost.bench.zoo.applications import applications_workload
from keras_boost.bench.zoo.finetune import finetune_workload
from keras_boost.bench.zoo.lm import lm_workload
from keras_boost.bench.zoo.transformer import transformer_workload

__all__ = ["WORKLOADS"]

WORKLOADS = {
    "applications": applications_workload,
    "applications-efficientnetb0": functools.partial(applications_workload, "EfficientNetB0"),
    "applications-resnet50v2": functools.partial(applications_workload, "ResNet50V2"),
    "finetune": finetune_workload,
    "lm": lm_workload,
    "transformer": transformer_workload,
}
