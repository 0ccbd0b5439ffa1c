"""Old home of keras_boost's pure math (`keras.ops`, testable against NumPy).

Each function lives with its algorithm now (`keras_boost.algorithms.<name>`);
this package re-exports the names it always had, and its old modules
(`keras_boost.ops.adasum`, `.centralize`, `.loss_scale`, ...) still import.
"""

# The old modules first, so that they stay attributes of this package as
# before the algorithms moved (`boost.ops.sparsity.magnitude_mask`); the
# functions named like their module (`adasum`, `centralize`) then take
# their names back.
from keras_boost.ops import adasum  # noqa: F401
from keras_boost.ops import centralize  # noqa: F401
from keras_boost.ops import dim_reduce  # noqa: F401
from keras_boost.ops import fake_quant  # noqa: F401
from keras_boost.ops import freeze_schedule  # noqa: F401
from keras_boost.ops import loss_scale  # noqa: F401
from keras_boost.ops import noise_scale  # noqa: F401
from keras_boost.ops import pca  # noqa: F401
from keras_boost.ops import sparsity  # noqa: F401
from keras_boost.algorithms.adasum import adasum  # noqa: F811
from keras_boost.algorithms.adasum import adasum_reduce
from keras_boost.algorithms.adasum import adasum_tree
from keras_boost.algorithms.batch_size import squared_global_norm
from keras_boost.algorithms.batch_size import window_gradient_norms
from keras_boost.algorithms.centralization import centralize  # noqa: F811
from keras_boost.algorithms.centralization import gc_applies
from keras_boost.algorithms.loss_scaling import all_finite
from keras_boost.algorithms.loss_scaling import group_all_finite
from keras_boost.algorithms.loss_scaling import scale_gradient
from keras_boost.algorithms.loss_scaling import unscale
from keras_boost.algorithms.loss_scaling import unscale_by_group
from keras_boost.algorithms.loss_scaling import update_group_scales
from keras_boost.algorithms.loss_scaling import update_loss_scale

__all__ = [
    "adasum",
    "adasum_reduce",
    "adasum_tree",
    "all_finite",
    "centralize",
    "gc_applies",
    "group_all_finite",
    "scale_gradient",
    "squared_global_norm",
    "unscale",
    "unscale_by_group",
    "update_group_scales",
    "update_loss_scale",
    "window_gradient_norms",
]
