"""Quantization-aware training, under the path users know.

The code lives in `keras_boost.algorithms.quantization`.

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

__all__ = ["QuantizationAwareTraining", "QuantizeAwareDense", "quantize_aware", "set_active", "strip"]
