"""Loss-based curriculum: sample easy (or hard) examples more often, early on.

`CurriculumSampler` is a `keras.utils.PyDataset` that draws each epoch's
batches with per-example probabilities from the examples' last losses
(`curriculum_probabilities`, rank-based), annealed to uniform sampling by
`anneal` (`anneal_weight`); `CurriculumCallback` re-scores the examples.

Example:

```python
from keras_boost.algorithms.curriculum import CurriculumCallback, CurriculumSampler

sampler = CurriculumSampler(x, y, batch_size=64, mode="easy", anneal=0.6)
model.fit(sampler, epochs=10, callbacks=[CurriculumCallback(sampler)])
```

The method card: `docs/methods/progressive_resizing.md` (its curriculum section).
"""

from keras_boost.algorithms.curriculum.sampler import CurriculumCallback
from keras_boost.algorithms.curriculum.sampler import CurriculumSampler
from keras_boost.algorithms.curriculum.sampler import per_example_loss
from keras_boost.algorithms.curriculum.schedule import MODES
from keras_boost.algorithms.curriculum.schedule import anneal_weight
from keras_boost.algorithms.curriculum.schedule import curriculum_probabilities

__all__ = [
    "MODES",
    "CurriculumCallback",
    "CurriculumSampler",
    "anneal_weight",
    "curriculum_probabilities",
    "per_example_loss",
]
