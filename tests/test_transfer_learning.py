"""keras.io's transfer-learning flow through keras_boost (issue 28, class 3).

The flow of `tests/programs/transfer.py` (a frozen "pretrained" base under a
new head; then the base, or its top with the BNs kept frozen, unfrozen and
recompiled at a lower rate) must train exactly the variables plain Keras
trains in each phase, at O0 and O1, through `boost.wrap` and
`BoostModel.from_model`; and the surgery must leave the pretrained base's
BatchNormalization layers in place.
"""

import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from programs import transfer

SEED = 1234
VARIANTS = [(way, level) for way in ("wrap", "from_model") for level in ("O0", "O1")]


def _values(variables):
    return [np.array(keras.ops.convert_to_numpy(v)) for v in variables]


def _changed(model, phase):
    """The paths of the variables of `model` that `phase()` changes."""
    variables = list(model.weights)
    before = _values(variables)
    phase()
    return {v.path for v, a, b in zip(variables, before, _values(variables)) if not np.array_equal(a, b)}


def run_flow(unfreeze, way=None, level=None):
    """Both phases; returns the changed variable paths of each, and the model."""
    keras.utils.set_random_seed(SEED)
    model, base, data = transfer.transfer_model()
    optimizer = keras.optimizers.Adam
    if way == "wrap":
        optimizer = lambda lr: boost.wrap(keras.optimizers.Adam(lr), level)  # noqa: E731
    elif way == "from_model":
        model = boost.BoostModel.from_model(model, level)
        base = model.get_layer(transfer.BASE_NAME)  # the copy's, when a surgery copied it

    def phase(learning_rate):
        transfer.compile_phase(model, optimizer(learning_rate))
        transfer.fit_phase(model, data)

    first = _changed(model, lambda: phase(1e-3))
    unfreeze(base)
    second = _changed(model, lambda: phase(1e-4))
    return first, second, model


UNFREEZE = [transfer.unfreeze_all, transfer.unfreeze_top]
HEAD = {"new_head/kernel", "new_head/bias"}
_PLAIN = {}


def plain(unfreeze):
    if unfreeze not in _PLAIN:
        first, second, model = run_flow(unfreeze)
        _PLAIN[unfreeze] = dict(first=first, second=second, paths={v.path for v in model.weights})
    return _PLAIN[unfreeze]


def test_plain_keras_flow_trains_the_head_then_the_unfrozen_base():
    assert plain(transfer.unfreeze_top)["first"] == HEAD
    assert plain(transfer.unfreeze_top)["second"] == HEAD | {"top_conv1/kernel", "top_conv2/kernel"}
    everything = plain(transfer.unfreeze_all)["second"]
    assert HEAD | {"stem_conv/kernel", "stem_bn/gamma", "top_bn2/beta"} <= everything
    # Keras 3.15's functional call replaces the recorded training=False by
    # fit's training=True, so an unfrozen base's BN statistics move too;
    # the boosted runs must do what plain Keras does, whatever that is.
    assert "top_bn1/moving_mean" in everything


@pytest.mark.parametrize("unfreeze", UNFREEZE, ids=lambda f: f.__name__)
@pytest.mark.parametrize("way, level", VARIANTS)
def test_each_phase_trains_exactly_the_variables_plain_keras_trains(way, level, unfreeze):
    reference = plain(unfreeze)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.NoEffectWarning)
        first, second, model = run_flow(unfreeze, way, level)
    assert first & reference["paths"] == reference["first"]
    assert second & reference["paths"] == reference["second"]
    bns = [l for l in model.get_layer(transfer.BASE_NAME).layers
           if isinstance(l, keras.layers.BatchNormalization)]
    assert len(bns) == 3  # the pretrained base keeps its BNs at O1 too
