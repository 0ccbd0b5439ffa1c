"""Moved: `AdaSum` lives in `keras_boost.algorithms.adasum` now; this path keeps old imports working."""

from keras_boost.algorithms.adasum import AdaSum  # noqa: F401
from keras_boost.algorithms.adasum import AlgorithmStatus  # noqa: F401
from keras_boost.algorithms.adasum import adasum_status  # noqa: F401
from keras_boost.algorithms.adasum import bytes_sent_per_replica  # noqa: F401
from keras_boost.algorithms.adasum import replica_plan  # noqa: F401

__all__ = ["AdaSum", "adasum_status", "AlgorithmStatus", "bytes_sent_per_replica", "replica_plan"]
