"""Keras callbacks of keras_boost."""

from keras_boost.callbacks.curriculum import CurriculumCallback
from keras_boost.callbacks.curriculum import CurriculumSampler
from keras_boost.callbacks.progressive import ProgressiveResizing
from keras_boost.callbacks.weight_trajectory import WeightTrajectory
from keras_boost.callbacks.weight_trajectory import load_trajectory
from keras_boost.callbacks.batch_size import AdaptiveBatchSize
