"""`Distiller`: knowledge distillation (Hinton et al. 2015) as a `keras.Model`.

The loss of a training step is

    alpha * hard + (1 - alpha) * T**2 * KL(softmax(teacher / T) || softmax(student / T))

where `hard` is the compiled loss of the student's output against the labels
(plus the student's regularization losses), `T` the temperature, and the KL
divergence is averaged over the batch (and over any non-class axes). `alpha`
weights the *hard* (label) loss, as in the Keras distillation example; the
`T**2` factor keeps the soft term's gradients on the scale of the hard one
when `T` changes (Hinton et al., section 2).

Only `compute_loss` is overridden, so the Keras train step of every backend
runs unchanged, with any optimizer, `boost.wrap(optimizer, level)` included
(its gradient centralization, accumulation and, asked for by name, freezing
apply to the student's weights). The teacher is frozen without being changed: its variables are
left out of the distiller's trainable variables (they count as
non-trainable state, so JAX's stateless step carries them), the user's
teacher keeps its own `trainable` flags, and it is called with
`training=False` (BatchNormalization keeps its moving statistics, dropout is
off). `call` returns the student's output, so `evaluate` and `predict`
measure the student, with the hard loss only.

`boost.BoostModel.from_model(distiller)` refuses it with a clear error
naming `compute_loss` (BoostModel's step computes the compiled loss itself
and would drop the teacher's term) and points to `boost.wrap`.
"""

import keras
from keras import ops

from keras_boost import keras_private

__all__ = ["Distiller"]


def _symbolic_inputs(model):
    """Symbolic inputs like those `model` was built for, or None when unknown."""
    try:
        return model.input  # functional and Sequential models
    except (AttributeError, ValueError):
        pass
    # A subclassed model records the shapes it was built (or first called) with.
    shapes = keras_private.subclassed_build_shapes(model)
    if len(shapes) != 1 or not isinstance(shapes[0], (tuple, list)):
        return None
    shape = tuple(shapes[0])
    if not all(d is None or isinstance(d, int) for d in shape):
        return None  # nested inputs
    return keras.KerasTensor((None,) + shape[1:])


def _output_shape(role, model, inputs):
    """The output shape (without the batch axis) of `model` on symbolic `inputs`."""
    output = model.compute_output_spec(inputs)
    if not isinstance(output, keras.KerasTensor):
        raise ValueError(
            f"The {role} must return one tensor (the per-class outputs); it returns "
            f"{keras.tree.map_structure(lambda t: tuple(t.shape), output)}."
        )
    return tuple(output.shape[1:])


@keras.saving.register_keras_serializable(package="keras_boost")
class Distiller(keras.Model):
    """Trains `student` on labels and on the softened outputs of `teacher`.

    The training loss is `alpha * hard + (1 - alpha) * T**2 *
    KL(softmax(teacher/T) || softmax(student/T))`: `alpha` weights the hard
    (label) loss given to `compile`, `1 - alpha` the soft teacher term (see
    the module docstring). Compile and fit it like any model; `evaluate`
    and `predict` use the student alone.

    Args:
        teacher: a trained `keras.Model` returning logits (or probabilities,
            with `from_logits=False`); frozen here.
        student: the `keras.Model` to train, with the same output shape.
        temperature: `T > 0`; higher spreads the teacher's probabilities.
        alpha: weight of the hard loss, in [0, 1].
        from_logits: whether both models return logits (default) rather
            than probabilities.
        **kwargs: `keras.Model` arguments (`name`, ...).

    Raises:
        ValueError: for a temperature <= 0, an alpha outside [0, 1], or
            teacher and student output shapes that differ (or are not one
            tensor each); the shapes are compared here when both models
            are built (functional, or subclassed and already called or
            built), else at the first training step.

    Example:

    ```python
    distiller = boost.Distiller(teacher, student, temperature=4.0, alpha=0.1)
    distiller.compile(optimizer=boost.wrap(keras.optimizers.Adam(1e-3), "O1"),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    distiller.fit(x_train, y_train, epochs=5)
    distiller.evaluate(x_test, y_test)  # the student's loss and accuracy
    distiller.student.save("student.keras")
    ```
    """

    def __init__(self, teacher, student, temperature=3.0, alpha=0.1, from_logits=True, **kwargs):
        super().__init__(**kwargs)
        for role, model in (("teacher", teacher), ("student", student)):
            if not isinstance(model, keras.Model):
                raise TypeError(f"{role} must be a keras.Model, got {type(model).__name__}.")
        try:
            temperature = float(temperature)
        except (TypeError, ValueError):
            temperature = float("nan")
        if not temperature > 0.0:
            raise ValueError(f"temperature must be a number > 0 (e.g. 2 to 10), got {temperature!r}.")
        try:
            alpha_value = float(alpha)
        except (TypeError, ValueError):
            alpha_value = float("nan")
        if not 0.0 <= alpha_value <= 1.0:
            raise ValueError(
                f"alpha must be in [0, 1] (the weight of the hard, label loss; 1 - alpha weights "
                f"the teacher's soft loss), got {alpha!r}."
            )
        # Checked here when both models are built and an input shape is known
        # (else at the first training step, in `distillation_loss`).
        inputs = _symbolic_inputs(teacher)
        if inputs is None:
            inputs = _symbolic_inputs(student)
        if teacher.built and student.built and inputs is not None:
            self._check_shapes(_output_shape("teacher", teacher, inputs),
                               _output_shape("student", student, inputs))
        self.teacher = teacher
        self.student = student
        self.temperature = temperature
        self.alpha = alpha_value
        self.from_logits = bool(from_logits)

    def _check_shapes(self, teacher_shape, student_shape):
        teacher_shape, student_shape = tuple(teacher_shape), tuple(student_shape)
        if teacher_shape != student_shape:
            raise ValueError(
                f"The teacher's output shape {teacher_shape} differs from the student's "
                f"{student_shape} (batch axis excluded): distillation needs one output per class "
                "for both, with the same shape."
            )

    def call(self, inputs, training=None):
        return self.student(inputs, training=training)

    # The teacher is frozen here, not by setting `teacher.trainable = False`,
    # which would change the user's model (and its variables' flags).
    def _split_teacher(self, variables):
        teacher = {id(v) for v in self.teacher.variables}
        return ([v for v in variables if id(v) not in teacher],
                [v for v in variables if id(v) in teacher])

    @property
    def trainable_variables(self):
        return self._split_teacher(super().trainable_variables)[0]

    @property
    def non_trainable_variables(self):
        return super().non_trainable_variables + self._split_teacher(super().trainable_variables)[1]

    @property
    def trainable_weights(self):
        return self._split_teacher(super().trainable_weights)[0]

    @property
    def non_trainable_weights(self):
        return super().non_trainable_weights + self._split_teacher(super().trainable_weights)[1]

    def _log_probabilities(self, outputs):
        if self.from_logits:
            return ops.log_softmax(outputs / self.temperature, axis=-1)
        logits = ops.log(ops.clip(outputs, 1e-7, 1.0))
        return ops.log_softmax(logits / self.temperature, axis=-1)

    def distillation_loss(self, teacher_outputs, student_outputs, sample_weight=None):
        """`T**2 * KL(softmax(teacher/T) || softmax(student/T))`, averaged over
        the batch; with `sample_weight`, each example's term is weighted as
        Keras weights the hard loss (`mean(kl * w)`).

        Example:

        ```python
        soft = distiller.distillation_loss(teacher(x), student(x))
        ```
        """
        self._check_shapes(teacher_outputs.shape[1:], student_outputs.shape[1:])
        teacher_log = ops.stop_gradient(self._log_probabilities(ops.cast(teacher_outputs, "float32")))
        student_log = self._log_probabilities(ops.cast(student_outputs, "float32"))
        kl = ops.sum(ops.exp(teacher_log) * (teacher_log - student_log), axis=-1)
        if sample_weight is not None:
            kl = kl * ops.reshape(ops.cast(sample_weight, "float32"), ops.shape(kl))
        return ops.mean(kl) * (self.temperature ** 2)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        hard = super().compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                    training=training)
        if not training or self.alpha == 1.0:
            return hard
        teacher_outputs = self.teacher(x, training=False)
        soft = self.distillation_loss(teacher_outputs, y_pred, sample_weight)
        return self.alpha * hard + (1.0 - self.alpha) * ops.cast(soft, hard.dtype)

    def get_config(self):
        config = {"name": self.name, "trainable": self.trainable}
        teacher, student = (keras.saving.serialize_keras_object(m) for m in (self.teacher, self.student))
        for nested in (teacher, student):
            # Their own compile state (e.g. the teacher's trained optimizer) is not
            # the distiller's: without this, loading warns about optimizer variables.
            if isinstance(nested, dict):
                nested.pop("compile_config", None)
        config.update(
            teacher=teacher,
            student=student,
            temperature=self.temperature,
            alpha=self.alpha,
            from_logits=self.from_logits,
        )
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        teacher = keras.saving.deserialize_keras_object(config.pop("teacher"), custom_objects=custom_objects)
        student = keras.saving.deserialize_keras_object(config.pop("student"), custom_objects=custom_objects)
        return cls(teacher, student, **config)
