"""Quantization-aware training for Keras' `model.quantize("int8")`.

Example:

```python
qat = boost.quantization.quantize_aware(model)
qat.compile(optimizer="adam", loss="mse")
qat.fit(x, y, epochs=5, callbacks=[boost.quantization.QuantizationAwareTraining(start="0.7dur")])
qat.quantize("int8")
```
"""

from keras_boost.quantization.qat import QuantizationAwareTraining
from keras_boost.quantization.qat import QuantizeAwareDense
from keras_boost.quantization.qat import quantize_aware
from keras_boost.quantization.qat import set_active
from keras_boost.quantization.qat import strip
