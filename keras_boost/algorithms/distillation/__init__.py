"""Knowledge distillation: a student trained on a teacher's softened outputs.

`Distiller(teacher, student, temperature=..., alpha=...)` is a
`keras.Model` whose loss mixes the student's loss on the labels with the
KL divergence to the teacher's temperature-softened predictions (Hinton et
al. 2015); the teacher is frozen.

Example:

```python
from keras_boost.algorithms.distillation import Distiller

distiller = Distiller(teacher, student, temperature=4.0, alpha=0.1)
distiller.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
distiller.fit(x, y, epochs=3)
```

The method card: `docs/methods/distillation.md`.
"""

from keras_boost.algorithms.distillation.distiller import Distiller

__all__ = ["Distiller"]
