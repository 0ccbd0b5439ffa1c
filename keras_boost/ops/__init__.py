"""Pure math of keras_boost, in `keras.ops`, testable against NumPy."""

from keras_boost.ops.adasum import adasum
from keras_boost.ops.adasum import adasum_reduce
from keras_boost.ops.adasum import adasum_tree
from keras_boost.ops.centralize import centralize
from keras_boost.ops.centralize import gc_applies
from keras_boost.ops.loss_scale import all_finite
from keras_boost.ops.loss_scale import group_all_finite
from keras_boost.ops.loss_scale import scale_gradient
from keras_boost.ops.loss_scale import unscale
from keras_boost.ops.loss_scale import unscale_by_group
from keras_boost.ops.loss_scale import update_group_scales
from keras_boost.ops.loss_scale import update_loss_scale
from keras_boost.ops.noise_scale import squared_global_norm
from keras_boost.ops.noise_scale import window_gradient_norms
