"""Models with their own `train_step`: keras.io's VAE and GAN.

keras.io writes these steps with `tf.GradientTape`; here one step serves
every backend the way the backend guides write it: a tape (TensorFlow),
`torch.autograd` (torch), and for JAX a stateless step over the `state`
tuple that `fit` threads (the VAE only: Keras' JAX trainer threads the
state of `model.optimizer` alone, so a two-optimizer GAN cannot run in
`fit` on JAX).
"""

import keras
from keras import layers
from keras import ops

from programs.base import Data
from programs.base import SAMPLES
from programs.base import rng

SIZE, LATENT = 8, 2


def _gradients(loss_fn, variables):
    """`loss_fn() -> (loss, *aux)` and its gradients w.r.t. `variables`
    (TensorFlow and torch; JAX steps are stateless, see `VAE`)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            outputs = loss_fn()
        return outputs, tape.gradient(outputs[0], variables)
    if backend == "torch":
        import torch

        outputs = loss_fn()
        return outputs, torch.autograd.grad(outputs[0], [v.value for v in variables])
    raise NotImplementedError(f"no stateful custom step on {backend}")


def _apply(optimizer, grads, variables):
    if keras.backend.backend() == "torch":
        import torch

        with torch.no_grad():
            optimizer.apply(grads, variables)
    else:
        optimizer.apply(grads, variables)


def _minimize(optimizer, loss_fn, variables):
    outputs, grads = _gradients(loss_fn, variables)
    _apply(optimizer, grads, variables)
    return outputs


def _images(n, seed):
    return Data(rng(seed).uniform(0, 1, size=(n, SIZE, SIZE, 1)).astype("float32"))


# --- VAE ----------------------------------------------------------------------


@keras.saving.register_keras_serializable(package="keras_boost_test_programs")
class Sampling(layers.Layer):
    """z = z_mean + exp(z_log_var / 2) * eps."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = keras.random.SeedGenerator(1337)

    def call(self, inputs):
        z_mean, z_log_var = inputs
        epsilon = keras.random.normal(ops.shape(z_mean), seed=self.seed_generator)
        return z_mean + ops.exp(0.5 * z_log_var) * epsilon


class VAE(keras.Model):
    def __init__(self, encoder, decoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder, self.decoder = encoder, decoder
        names = ("total_loss", "reconstruction_loss", "kl_loss")
        self.trackers = [keras.metrics.Mean(name=name) for name in names]

    @property
    def metrics(self):
        return self.trackers

    def call(self, x):
        z_mean, _, _ = self.encoder(x)
        return self.decoder(z_mean)

    def vae_losses(self, x):
        z_mean, z_log_var, z = self.encoder(x)
        reconstruction = self.decoder(z)
        reconstruction_loss = ops.mean(
            ops.sum(keras.losses.binary_crossentropy(x, reconstruction), axis=(1, 2))
        )
        kl = -0.5 * (1 + z_log_var - ops.square(z_mean) - ops.exp(z_log_var))
        kl_loss = ops.mean(ops.sum(kl, axis=1))
        return reconstruction_loss + kl_loss, reconstruction_loss, kl_loss

    def track(self, losses):
        for tracker, value in zip(self.trackers, losses):
            tracker.update_state(value)
        return {t.name: t.result() for t in self.trackers}

    def train_step(self, *args):
        if keras.backend.backend() == "jax":
            return self._stateless_train_step(*args)
        (data,) = args
        x, _, _ = keras.utils.unpack_x_y_sample_weight(data)
        losses = _minimize(self.optimizer, lambda: self.vae_losses(x), self.trainable_weights)
        return self.track(losses)

    def _stateless_train_step(self, state, data):
        """Keras' "customizing fit with JAX" recipe."""
        import jax

        trainable, non_trainable, optimizer_state, metrics_state = state
        x, _, _ = keras.utils.unpack_x_y_sample_weight(data)

        def loss_fn(trainable, non_trainable):
            mapping = list(zip(self.trainable_variables, trainable))
            mapping += list(zip(self.non_trainable_variables, non_trainable))
            with keras.StatelessScope(state_mapping=mapping) as scope:
                losses = self.vae_losses(x)
            # The Sampling layer's seed generator advances: a state update.
            return losses[0], (losses, _updated(scope, self.non_trainable_variables, non_trainable))

        (_, (losses, non_trainable)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            trainable, non_trainable
        )
        trainable, optimizer_state = self.optimizer.stateless_apply(
            optimizer_state, grads, trainable
        )
        mapping = list(zip(self.metrics_variables, metrics_state))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            logs = self.track(losses)
        metrics_state = _updated(scope, self.metrics_variables, metrics_state)
        return logs, (trainable, non_trainable, optimizer_state, metrics_state)


def _updated(scope, variables, values):
    """The values of `variables` after `scope` (unassigned ones unchanged)."""
    news = [scope.get_current_value(v) for v in variables]
    return [value if new is None else new for new, value in zip(news, values)]


def vae():
    encoder_inputs = keras.Input((SIZE, SIZE, 1))
    h = layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(encoder_inputs)
    h = layers.Dense(16, activation="relu")(layers.Flatten()(h))
    z_mean = layers.Dense(LATENT, name="z_mean")(h)
    z_log_var = layers.Dense(LATENT, name="z_log_var")(h)
    z = Sampling()([z_mean, z_log_var])
    encoder = keras.Model(encoder_inputs, [z_mean, z_log_var, z], name="encoder")

    latent_inputs = keras.Input((LATENT,))
    h = layers.Dense((SIZE // 2) ** 2 * 8, activation="relu")(latent_inputs)
    h = layers.Reshape((SIZE // 2, SIZE // 2, 8))(h)
    h = layers.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu")(h)
    decoded = layers.Conv2DTranspose(1, 3, padding="same", activation="sigmoid")(h)
    decoder = keras.Model(latent_inputs, decoded, name="decoder")

    data = _images(SAMPLES, seed=4)
    model = VAE(encoder, decoder, name="vae")
    model(data.x[:1])  # builds it
    return model, data


# --- GAN ----------------------------------------------------------------------


class GAN(keras.Model):
    """keras.io's "DCGAN overriding train_step": no call(), two optimizers."""

    def __init__(self, discriminator, generator, latent_dim, **kwargs):
        super().__init__(**kwargs)
        self.discriminator, self.generator = discriminator, generator
        self.latent_dim = latent_dim
        self.seed_generator = keras.random.SeedGenerator(1337)

    def compile(self, d_optimizer, g_optimizer):
        super().compile()
        self.d_optimizer, self.g_optimizer = d_optimizer, g_optimizer
        self.loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)
        self.d_loss_metric = keras.metrics.Mean(name="d_loss")
        self.g_loss_metric = keras.metrics.Mean(name="g_loss")

    @property
    def metrics(self):
        return [self.d_loss_metric, self.g_loss_metric]

    def _noise(self, batch_size):
        return keras.random.normal((batch_size, self.latent_dim), seed=self.seed_generator)

    def train_step(self, real_images):
        real_images, _, _ = keras.utils.unpack_x_y_sample_weight(real_images)
        batch_size = ops.shape(real_images)[0]
        generated = self.generator(self._noise(batch_size))
        combined = ops.concatenate([generated, real_images], axis=0)
        labels = ops.concatenate([ops.ones((batch_size, 1)), ops.zeros((batch_size, 1))], axis=0)

        def d_loss():
            return (self.loss_fn(labels, self.discriminator(combined)),)

        (d_loss,) = _minimize(self.d_optimizer, d_loss, self.discriminator.trainable_weights)

        noise = self._noise(batch_size)
        misleading = ops.zeros((batch_size, 1))

        def g_loss():
            return (self.loss_fn(misleading, self.discriminator(self.generator(noise))),)

        (g_loss,) = _minimize(self.g_optimizer, g_loss, self.generator.trainable_weights)
        self.d_loss_metric.update_state(d_loss)
        self.g_loss_metric.update_state(g_loss)
        return {"d_loss": self.d_loss_metric.result(), "g_loss": self.g_loss_metric.result()}


def gan():
    latent = 4
    image = keras.Input((SIZE, SIZE, 1))
    h = layers.LeakyReLU(0.2)(layers.Conv2D(8, 3, strides=2, padding="same")(image))
    discriminator = keras.Model(image, layers.Dense(1)(layers.Flatten()(h)), name="discriminator")

    noise = keras.Input((latent,))
    h = layers.LeakyReLU(0.2)(layers.Dense((SIZE // 2) ** 2 * 8)(noise))
    h = layers.Reshape((SIZE // 2, SIZE // 2, 8))(h)
    h = layers.LeakyReLU(0.2)(layers.Conv2DTranspose(8, 3, strides=2, padding="same")(h))
    fake = layers.Conv2D(1, 3, padding="same", activation="sigmoid")(h)
    generator = keras.Model(noise, fake, name="generator")
    model = GAN(discriminator, generator, latent, name="gan")
    # Keras cannot build a model without call() by calling it; its variables
    # exist (both sub-models are built), so it is built.
    model.built = True
    return model, _images(SAMPLES, seed=5)


def compile_gan(model, d_optimizer, g_optimizer):
    model.compile(d_optimizer=d_optimizer, g_optimizer=g_optimizer)


def compile_vae(model, optimizer):
    model.compile(optimizer=optimizer)
