"""Quantization-aware training for Keras' `model.quantize("int8")`.

`quantize_aware(model)` swaps the `Dense` layers of a copy for
`QuantizeAwareDense` layers that train through int8 fake quantization
(`fake_quantize`, `abs_max_dequantized`: the pure math), switched on by
`QuantizationAwareTraining` at a point of training; `strip` returns plain
`Dense` layers again.

Example:

```python
from keras_boost.algorithms.quantization import QuantizationAwareTraining, quantize_aware

qat = quantize_aware(model)
qat.compile(optimizer="adam", loss="mse")
qat.fit(x, y, epochs=5, callbacks=[QuantizationAwareTraining(start="0.7dur")])
qat.quantize("int8")
```

The method card: `docs/methods/pruning.md` (its quantization section).
"""

from keras_boost.algorithms.quantization.fake_quant import abs_max_dequantized
from keras_boost.algorithms.quantization.fake_quant import fake_quantize
from keras_boost.algorithms.quantization.qat import QuantizationAwareTraining
from keras_boost.algorithms.quantization.qat import QuantizeAwareDense
from keras_boost.algorithms.quantization.qat import quantize_aware
from keras_boost.algorithms.quantization.qat import set_active
from keras_boost.algorithms.quantization.qat import strip

__all__ = [
    "QuantizationAwareTraining",
    "QuantizeAwareDense",
    "abs_max_dequantized",
    "fake_quantize",
    "quantize_aware",
    "set_active",
    "strip",
]
