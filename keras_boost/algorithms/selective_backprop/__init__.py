"""Selective backprop (Jiang et al. 2019; Composer's SelectiveBackprop) in `BoostModel`.

In a window of training, `BoostModel`'s train step ranks each batch's
examples by their loss (an inference pass, no gradient) and trains on the
hardest `keep` fraction (`per_example_loss`, `hardest_examples`,
`take_examples`: the math). Switched on by the config flag
`boost.selective_backprop` (off at every level), tuned by the section
`selective_backprop` (`keep`, `start`, `end`, `total_steps`).

Example:

```python
model = boost.BoostModel.from_model(model, boost_config_dict={
    "boost": {"mode": "manual", "selective_backprop": True}})
```

The method card: `docs/methods/selective_backprop.md`.
"""

from keras_boost.algorithms.selective_backprop.selection import example_loss_function
from keras_boost.algorithms.selective_backprop.selection import hardest_examples
from keras_boost.algorithms.selective_backprop.selection import kept_count
from keras_boost.algorithms.selective_backprop.selection import per_example_loss
from keras_boost.algorithms.selective_backprop.selection import take_examples
from keras_boost.algorithms.selective_backprop.step import SelectiveBackpropStep

__all__ = ["SelectiveBackpropStep", "example_loss_function", "hardest_examples", "kept_count", "per_example_loss",
           "take_examples"]
