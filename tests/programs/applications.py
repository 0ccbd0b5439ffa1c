"""keras.applications models with `weights=None`, at 32x32 (the smallest
input each accepts) with 4 classes: the architectures users fine-tune."""

import warnings

import keras

from programs.base import SAMPLES
from programs.base import images

SIZE, CLASSES = 32, 4


def _application(name, **kwargs):
    def build():
        with warnings.catch_warnings():
            # "`input_shape` is undefined or non-square, or `rows` is not in
            # [96, 128, 160, 192, 224]": only the ImageNet weights need those.
            warnings.simplefilter("ignore", UserWarning)
            model = getattr(keras.applications, name)(
                input_shape=(SIZE, SIZE, 3), weights=None, classes=CLASSES, **kwargs
            )
        return model, images(SAMPLES, SIZE, 3, CLASSES, seed=7)

    build.__name__ = name
    return build


mobilenet_v2 = _application("MobileNetV2", alpha=0.35)  # softmax head
mobilenet_v3_small = _application("MobileNetV3Small", classifier_activation=None)  # hard-swish
resnet50_v2 = _application("ResNet50V2", classifier_activation=None)
efficientnet_b0 = _application("EfficientNetB0", classifier_activation=None)
densenet121 = _application("DenseNet121", classifier_activation=None)
