"""Quantization-aware training, under the path users know.

The code lives in `keras_boost.algorithms.quantization`;
`keras_boost.quantization.qat` still imports.

Example:

```python
qat = boost.quantization.quantize_aware(model)
qat.compile(optimizer="adam", loss="mse")
qat.fit(x, y, epochs=5, callbacks=[boost.quantization.QuantizationAwareTraining(start="0.7dur")])
qat.quantize("int8")
```
"""

from keras_boost.algorithms.quantization import QuantizationAwareTraining
from keras_boost.algorithms.quantization import QuantizeAwareDense
from keras_boost.algorithms.quantization import quantize_aware
from keras_boost.algorithms.quantization import set_active
from keras_boost.algorithms.quantization import strip

# The old modules stay attributes of this package, as before the algorithms
# moved (`boost.quantization.qat.strip`).
from keras_boost.quantization import qat  # noqa: F401

__all__ = ["QuantizationAwareTraining", "QuantizeAwareDense", "quantize_aware", "set_active", "strip"]
