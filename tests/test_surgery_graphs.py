"""The surgeries on the functional graphs users bring (issue 28, class 1).

Each graph mixes what `keras.models.clone_model` handles (operations that
are not layers, masks, shared layers, nested models, several inputs and
outputs) with one LessBN pattern (InvertedResidual2: conv -> BN -> ReLU6 ->
global pooling -> Dense), whose BN has epsilon 1e-12: at its initial values
it is then exactly the identity, so removing it changes no output. Every
entry point must copy such a graph with identical outputs, new weights, the
same trainable flags, and leave the input model as it was.
"""

import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost.graph import topological_nodes
from keras_boost.surgery import fuse_batch_norm
from keras_boost.graph import rebuild

pytestmark = pytest.mark.filterwarnings("ignore:.*does not support masking:UserWarning")

L = keras.layers
BACKEND = keras.backend.backend()
NO_HEAD = {"less_bn": {"fn_flag": False}}  # outputs comparable: only the BN goes


def _tail(x, classes=3, pool=L.GlobalAveragePooling2D, conv=L.Conv2D, name="cls"):
    """The LessBN pattern every graph ends with; its BN (`f"{name}_bn"`) goes."""
    x = conv(4, 1, use_bias=False, name=f"{name}_conv")(x)
    x = L.BatchNormalization(epsilon=1e-12, name=f"{name}_bn")(x)
    x = pool()(L.ReLU(6.0)(x))
    return L.Dense(classes, activation="softmax", name=name)(x)


def residual_op():
    """`h + inputs`: an Add operation, not an Add layer."""
    inputs = keras.Input((8, 8, 3))
    h = L.ReLU()(L.BatchNormalization(name="bn")(L.Conv2D(3, 3, padding="same")(inputs)))
    return keras.Model(inputs, _tail(h + inputs), name="residual_op")


def preprocess_input():
    """A transfer-learning tutorial's `preprocess_input(inputs)`: TrueDivide, Subtract."""
    inputs = keras.Input((8, 8, 3))
    x = keras.applications.mobilenet_v2.preprocess_input(inputs)
    return keras.Model(inputs, _tail(L.Conv2D(4, 3)(x)), name="preprocess_input")


def masked_sequence():
    """Embedding(mask_zero=True) (its mask: a NotEqual operation) -> Bidirectional LSTM."""
    inputs = keras.Input((6,), dtype="int32")
    x = L.Embedding(20, 8, mask_zero=True)(inputs)
    x = L.Bidirectional(L.LSTM(4, return_sequences=True))(x)
    out = _tail(x, pool=L.GlobalAveragePooling1D, conv=L.Conv1D)  # Conv1D drops the mask
    return keras.Model(inputs, out, name="masked_sequence")


def multi_io():
    """Two inputs, two outputs: a softmax head and a linear regression head."""
    image, features = keras.Input((8, 8, 3), name="image"), keras.Input((5,), name="features")
    cls = _tail(L.Conv2D(4, 3)(image))
    joined = L.Concatenate()([features, L.Flatten()(L.AveragePooling2D(8)(image))])
    reg = L.Dense(2, kernel_regularizer=keras.regularizers.L2(0.1), name="reg")(joined)
    return keras.Model([image, features], [cls, reg], name="multi_io")


def shared_layer():
    """One Conv2D called twice."""
    inputs = keras.Input((8, 8, 3))
    shared = L.Conv2D(3, 3, padding="same", name="shared")
    return keras.Model(inputs, _tail(shared(L.ReLU()(shared(inputs)))), name="shared_layer")


def nested():
    """A functional sub-model (with an operation) and a Sequential one, frozen."""
    inner_in = keras.Input((8, 8, 3))
    inner = keras.Model(inner_in, L.Conv2D(3, 3, padding="same")(inner_in) * 0.5, name="inner")
    frozen = keras.Sequential([keras.Input((8, 8, 3)), L.Conv2D(3, 1), L.BatchNormalization()],
                              name="frozen_seq")
    frozen.trainable = False
    inputs = keras.Input((8, 8, 3))
    return keras.Model(inputs, _tail(L.Add()([inner(inputs), frozen(inputs)])), name="nested")


GRAPHS = [residual_op, preprocess_input, masked_sequence, multi_io, shared_layer, nested]


def sample_inputs(model, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for spec in model.inputs:
        shape = (3,) + tuple(spec.shape[1:])
        if "int" in str(spec.dtype):  # token ids, with padding zeros at the end
            tokens = rng.integers(1, 20, size=shape)
            tokens[:, -2:] = 0
            out.append(tokens.astype("int32"))
        else:
            out.append(rng.normal(0, 50, size=shape).astype("float32"))
    return out if len(out) > 1 else out[0]


def outputs(model, x):
    result = model(x, training=False)
    return [keras.ops.convert_to_numpy(r) for r in (result if isinstance(result, list) else [result])]


def graph_state(model):
    """What a surgery could change in the input model: operations, nodes, weights."""
    return [
        (op.name, type(op), len(op._inbound_nodes), len(op._outbound_nodes),
         [np.array(keras.ops.convert_to_numpy(w)).tobytes() for w in getattr(op, "weights", [])])
        for op in model._flatten_layers(include_self=False) + list(getattr(model, "operations", []))
    ]


def trainable_flags(model):
    """Every layer's trainable flag by name, every variable's by path."""
    flags = {l.name: l.trainable for l in model._flatten_layers(include_self=True)}
    flags.update({v.path: v.trainable for v in model.weights})
    return flags


def on_common_keys(a, b):
    common = a.keys() & b.keys()
    return {k: a[k] for k in common}, {k: b[k] for k in common}


def less_bn(model):
    return boost.LessBN(model)


def from_model(model):
    return boost.BoostModel.from_model(model, "O1", boost_config_dict=NO_HEAD)


def auto_boost(model):
    new, _ = boost.AutoBoost("O1", NO_HEAD).network_auto_process_train(model, keras.optimizers.SGD())
    return new


def fused(model):
    return fuse_batch_norm(model)


def copy(model):
    return rebuild(model, "copy")


ENTRY_POINTS = [copy, less_bn, fused, from_model, auto_boost]


def _skip_unless_fused(entry, model):
    if entry is fused and (BACKEND == "jax" or boost.surgery.count_batch_norms(model) == 0):
        pytest.skip("fuse_batch_norm returns the model itself here (JAX, or no 4-D BN): no copy to check")


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("build", GRAPHS, ids=lambda f: f.__name__)
def test_surgery_copies_the_graph_with_identical_outputs(build, entry):
    keras.utils.set_random_seed(0)
    model = build()
    _skip_unless_fused(entry, model)
    x = sample_inputs(model)
    expected, before, flags = outputs(model, x), graph_state(model), trainable_flags(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.NoEffectWarning)
        new = entry(model)
    assert new is not model
    for got, want in zip(outputs(new, x), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert not {id(w) for w in new.weights} & {id(w) for w in model.weights}
    assert graph_state(model) == before
    got_flags, want_flags = on_common_keys(trainable_flags(new), flags)
    assert got_flags == want_flags
    if entry in (less_bn, from_model, auto_boost):
        assert new.less_bn_report.removed_names == ["cls_bn"]


@pytest.mark.parametrize("build", GRAPHS, ids=lambda f: f.__name__)
def test_topological_nodes_lists_every_call_once_after_its_producers(build):
    model = build()
    nodes = topological_nodes(model)
    position = {id(node): i for i, node in enumerate(nodes)}
    assert len(position) == len(nodes)
    for i, node in enumerate(nodes):
        for tensor in node.arguments.keras_tensors:
            producer = tensor._keras_history.operation._inbound_nodes[tensor._keras_history.node_index]
            assert producer.is_input or position[id(producer)] < i
    # Every layer of the model is called in its graph (the shared one twice).
    called = [node.operation for node in nodes]
    assert {id(layer) for layer in model.layers if not isinstance(layer, L.InputLayer)} <= set(map(id, called))
    assert len(called) == len(set(map(id, called))) + (build is shared_layer)


def test_topological_nodes_stops_at_inputs_that_are_inner_tensors():
    inputs = keras.Input((4,))
    h = L.Dense(4, name="outside")(inputs)
    model = keras.Model(h, L.Dense(1, name="inside")(L.ReLU(name="relu")(h)))
    assert [node.operation.name for node in topological_nodes(model)] == ["relu", "inside"]


def test_shared_layer_stays_one_layer_called_twice():
    model = shared_layer()
    new = boost.LessBN(model)
    shared = new.get_layer("shared")
    assert len(shared._inbound_nodes) == 2
    assert len(new.weights) == len(model.weights) - 4  # the removed BN's 4 variables


def test_nested_models_keep_their_class_and_trainable_flag():
    new = boost.LessBN(nested())
    assert isinstance(new.get_layer("frozen_seq"), keras.Sequential)
    assert new.get_layer("frozen_seq").trainable is False
    assert new.get_layer("inner").trainable is True


@pytest.mark.skipif(BACKEND == "torch", reason="Keras' torch backend draws an unseeded Dropout's mask "
                    "from torch's global generator, not from the layer's seed state")
def test_copy_draws_the_dropout_masks_the_original_draws():
    inputs = keras.Input((8, 8, 3))
    model = keras.Model(inputs, _tail(L.Dropout(0.5)(L.Conv2D(4, 3)(inputs))))
    new = rebuild(model, "copy")
    x = sample_inputs(model)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(new(x, training=True)),
                               keras.ops.convert_to_numpy(model(x, training=True)), rtol=1e-5, atol=1e-6)


def test_operation_that_cannot_be_copied_is_named():
    class Scale(keras.Operation):  # no config: positional arguments only
        def __init__(self, *factor):
            super().__init__()
            self.factor = factor[0]

        def call(self, x):
            return x * self.factor

        def compute_output_spec(self, x):
            return keras.KerasTensor(x.shape, x.dtype)

    inputs = keras.Input((8, 8, 3))
    model = keras.Model(inputs, _tail(Scale(2.0)(inputs)))
    with pytest.raises(TypeError, match=r"(?s)cannot copy the operation .*Scale.*re-created"):
        boost.LessBN(model)


@pytest.mark.skipif(
    BACKEND == "jax",
    reason="MobileNetV3Small takes ~50 s to build on JAX (one initializer compile per kernel "
    "shape); its operations (Add, Multiply) are covered on JAX by the small graphs above",
)
@pytest.mark.parametrize("entry", [copy, fused, from_model], ids=lambda f: f.__name__)
def test_mobilenet_v3_small_hard_swish_operations(entry):
    """keras.applications MobileNetV3Small: hard-swish is keras.ops arithmetic."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = keras.applications.MobileNetV3Small(
            input_shape=(32, 32, 3), weights=None, classes=10, minimalistic=False)
    x = np.random.default_rng(0).uniform(0, 255, size=(2, 32, 32, 3)).astype("float32")
    expected = outputs(model, x)
    config = {"boost": {"mode": "manual", "less_bn": False}}  # nothing removed: identical outputs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.NoEffectWarning)
        new = (boost.BoostModel.from_model(model, "O1", boost_config_dict=config)
               if entry is from_model else entry(model))
    assert not {id(w) for w in new.weights} & {id(w) for w in model.weights}  # a copy
    np.testing.assert_allclose(outputs(new, x)[0], expected[0], rtol=1e-6, atol=1e-7)
