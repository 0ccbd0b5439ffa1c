"""keras_boost on JAX and PyTorch with TensorFlow absent (issue 43).

TensorFlow is an extra: a subprocess makes every import of it fail, as if it
were not installed, then trains, saves and reloads a BoostModel and wraps an
optimizer. keras_boost must neither need TensorFlow nor try to import it
(Keras' own saving tries, and copes when it is absent).
"""

import os
import subprocess
import sys
import textwrap

import keras
import pytest

import keras_boost

pytestmark = pytest.mark.skipif(keras.backend.backend() == "tensorflow",
                                reason="the TensorFlow backend needs TensorFlow")

# Runs in a fresh interpreter: the finder is in place before Keras is imported.
SCRIPT = textwrap.dedent("""
    import importlib.abc
    import os
    import sys
    import traceback

    PACKAGE = sys.argv[2]
    attempts = []


    # Finds what the finders it wraps find, except TensorFlow: as if not
    # installed (`find_spec` gives None, `import` raises ModuleNotFoundError).
    class NoTensorFlow(importlib.abc.MetaPathFinder):
        def __init__(self, finders):
            self.finders = finders

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tensorflow", "tensorflow_text"):
                # Who asked: keras_boost's own frames, if any, name the culprit.
                attempts.extend(f"{f.filename}:{f.lineno}" for f in traceback.extract_stack()
                                if f.filename.startswith(PACKAGE))
                return None
            for finder in self.finders:
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    return spec
            return None


    sys.meta_path[:] = [NoTensorFlow(list(sys.meta_path))]

    import keras
    import numpy as np

    import keras_boost as boost


    def small_model():
        inputs = keras.Input((8,))
        hidden = keras.layers.Dense(16, activation="relu")(inputs)
        return keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(hidden))


    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 8)).astype("float32")
    y = rng.integers(0, 3, size=64)

    model = boost.BoostModel.from_model(small_model(), boost_level="O1")
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    history = model.fit(x, y, epochs=2, batch_size=16, verbose=0)
    path = os.path.join(sys.argv[1], "model.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    np.testing.assert_allclose(reloaded.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)

    plain = small_model()
    plain.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.1), "O1"), loss="sparse_categorical_crossentropy")
    plain.fit(x, y, epochs=1, batch_size=16, verbose=0)

    print("epochs", len(history.history["loss"]))
    print("tensorflow modules", sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow"))
    print("keras_boost attempts", attempts)
""")


def test_trains_saves_and_wraps_without_tensorflow(tmp_path):
    package = os.path.dirname(keras_boost.__file__)
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), package],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "epochs 2" in lines
    assert "tensorflow modules []" in lines
    assert "keras_boost attempts []" in lines, result.stdout
