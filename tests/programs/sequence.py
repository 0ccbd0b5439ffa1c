"""Sequence models: a transformer text classifier, a masked bidirectional
LSTM classifier and a Conv1D forecaster."""

import keras
import numpy as np
from keras import layers
from keras import ops

from programs.base import Data
from programs.base import SAMPLES
from programs.base import rng

VOCAB, MAXLEN, EMBED = 50, 10, 16


@keras.saving.register_keras_serializable(package="keras_boost_test_programs")
class TokenAndPositionEmbedding(layers.Layer):
    """keras.io's text-classification-with-transformer embedding layer."""

    def __init__(self, maxlen, vocab_size, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.maxlen, self.vocab_size, self.embed_dim = maxlen, vocab_size, embed_dim
        self.token_emb = layers.Embedding(vocab_size, embed_dim)
        self.pos_emb = layers.Embedding(maxlen, embed_dim)

    def call(self, x):
        positions = ops.arange(0, ops.shape(x)[-1], 1)
        return self.token_emb(x) + self.pos_emb(positions)

    def get_config(self):
        config = super().get_config()
        config.update(maxlen=self.maxlen, vocab_size=self.vocab_size, embed_dim=self.embed_dim)
        return config


def transformer():
    inputs = keras.Input((MAXLEN,), dtype="int32")
    x = TokenAndPositionEmbedding(MAXLEN, VOCAB, EMBED)(inputs)
    attention = layers.MultiHeadAttention(num_heads=2, key_dim=8)(x, x)
    x = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([x, layers.Dropout(0.1)(attention)]))
    ffn = layers.Dense(EMBED)(layers.Dense(32, activation="relu")(x))
    x = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([x, layers.Dropout(0.1)(ffn)]))
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(0.1)(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    generator = rng(1)
    tokens = generator.integers(1, VOCAB, size=(SAMPLES, MAXLEN)).astype("int32")
    labels = (tokens[:, 0] < VOCAB // 2).astype("int32")
    return keras.Model(inputs, outputs, name="transformer_classifier"), Data(tokens, labels)


def masked_bilstm():
    """keras.io's bidirectional-LSTM text classifier: padded token ids, an
    `Embedding(mask_zero=True)` whose mask the LSTMs honour, a softmax head."""
    inputs = keras.Input((MAXLEN,), dtype="int32")
    x = layers.Embedding(VOCAB, EMBED, mask_zero=True)(inputs)
    x = layers.Bidirectional(layers.LSTM(8, return_sequences=True))(x)
    x = layers.Bidirectional(layers.LSTM(8))(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    generator = rng(5)
    tokens = generator.integers(1, VOCAB, size=(SAMPLES, MAXLEN)).astype("int32")
    lengths = generator.integers(3, MAXLEN + 1, size=SAMPLES)
    tokens[np.arange(MAXLEN)[None, :] >= lengths[:, None]] = 0  # padding after each sequence
    labels = (tokens[:, 0] < VOCAB // 2).astype("int32")
    return keras.Model(inputs, outputs, name="masked_bilstm"), Data(tokens, labels)


def conv1d_forecaster():
    """keras.io's time-series Conv1D + BN + ReLU stack, as a regressor."""
    steps = 16
    inputs = keras.Input((steps, 1))
    x = inputs
    for filters in (8, 8):
        x = layers.Conv1D(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.ReLU()(x)
    x = layers.GlobalAveragePooling1D()(x)
    outputs = layers.Dense(1)(x)
    generator = rng(2)
    phase = generator.uniform(0, 2 * np.pi, size=(SAMPLES, 1))
    t = phase + 0.4 * np.arange(steps + 1)[None, :]
    series = (np.sin(t) + 0.05 * generator.normal(size=t.shape)).astype("float32")
    data = Data(series[:, :steps, None], series[:, steps:])
    return keras.Model(inputs, outputs, name="conv1d_forecaster"), data
