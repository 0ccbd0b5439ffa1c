"""One test per private Keras item `keras_boost.keras_private` wraps: a Keras
upgrade that moves one fails the test named after it."""

import keras
import numpy as np
import pytest

from conftest import dense_graph
from conftest import subclassed_dense_net
from keras_boost import keras_private

BACKEND = keras.backend.backend()


def _model():
    inputs, outputs = dense_graph()
    return keras.Model(inputs, outputs)


def _compiled():
    model = _model()
    model.compile(optimizer="adam", loss="mse")
    return model


def _built_optimizer(model=None):
    model = model or _model()
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    return model, optimizer


def test_unpack_x_y_sample_weight():
    x, y, w = np.ones((2, 5)), np.zeros((2, 3)), np.ones((2,))
    assert keras_private.unpack_x_y_sample_weight((x, y, w)) == (x, y, w)
    assert keras_private.unpack_x_y_sample_weight((x, y)) == (x, y, None)
    assert keras_private.unpack_x_y_sample_weight(x) == (x, None, None)


def test_print_msg(capsys):
    keras_private.print_msg("boost line")
    assert "boost line" in capsys.readouterr().out


def test_unscale_loss_for_distribution():
    value = keras.ops.convert_to_numpy(keras_private.unscale_loss_for_distribution(keras.ops.convert_to_tensor(2.0)))
    assert float(value) == pytest.approx(2.0)  # one replica: no factor


def test_no_automatic_dependency_tracking():
    class Holder(keras.layers.Layer):
        @keras_private.no_automatic_dependency_tracking
        def keep(self, variables):
            self.kept = list(variables)

    holder, variable = Holder(), keras.Variable(1.0)
    holder.keep([variable])
    assert holder.kept == [variable] and variable not in holder.weights


def test_functional():
    assert keras_private.is_functional(_model())
    assert not keras_private.is_functional(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]))
    assert not keras_private.is_functional(keras.layers.Dense(1))
    assert issubclass(keras_private.Functional, keras.Model)


def test_functional_like_constructor():
    class ConfigBuilt(keras.Model):  # keras-hub's backbones look like this
        def __init__(self, units, **kwargs):
            inputs = keras.Input((2,))
            super().__init__(inputs, keras.layers.Dense(units)(inputs), **kwargs)

    class Functional(keras.Model):
        def __init__(self, *args, extra=1, **kwargs):
            super().__init__(*args, **kwargs)

    assert keras_private.functional_like_constructor(Functional)
    assert keras_private.functional_like_constructor(type(_model()))
    assert not keras_private.functional_like_constructor(ConfigBuilt)


def test_flatten_layers():
    model = _model()
    names = [layer.name for layer in keras_private.flatten_layers(model, include_self=False)]
    assert names[:1] != [model.name] and {"d1", "bn", "d2"} <= set(names)
    assert keras_private.flatten_layers(model)[0] is model


def test_layer_own_variables():
    outer = keras.Sequential([keras.Input((5,)), keras.layers.BatchNormalization()])
    bn = outer.layers[0]
    assert len(keras_private.layer_own_variables(bn)) == 4
    assert len(keras_private.layer_own_variables(bn, non_trainable=False)) == 2
    assert keras_private.layer_own_variables(outer) == []  # its sublayer's are not its own


def test_layer_raw_variable():
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    layer.enable_lora(1)
    raw = keras_private.layer_raw_variable(layer, "kernel")
    assert isinstance(raw, keras.Variable) and raw.shape == (3, 2)
    assert keras_private.layer_raw_variable(layer, "missing") is None


def test_attention_projections():
    layer = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    x = np.ones((1, 3, 8), "float32")
    layer(x, x)
    projections = keras_private.attention_projections(layer)
    assert set(projections) == {"query", "key", "value", "output"}
    assert all(isinstance(p, keras.layers.EinsumDense) and p.built for p in projections.values())
    assert keras_private.attention_projections(keras.layers.Dense(1)) == dict.fromkeys(projections)


def test_set_layer_trainable_flag():
    outer = keras.Sequential([keras.Input((5,)), keras.layers.Dense(2)])
    keras_private.set_layer_trainable_flag(outer, False)
    assert not outer.trainable and outer.layers[0].trainable


def test_call_has_training_arg():
    assert keras_private.call_has_training_arg(keras.layers.Dropout(0.5))
    assert not keras_private.call_has_training_arg(keras.layers.ReLU())
    assert keras_private.training_kwargs(keras.layers.Dropout(0.5), False) == {"training": False}
    assert keras_private.training_kwargs(keras.layers.ReLU(), True) == {}


def test_subclassed_build_shapes():
    net = subclassed_dense_net()
    assert keras_private.subclassed_build_shapes(net) == []
    net(np.ones((4, 7), "float32"))
    assert [tuple(s) for s in keras_private.subclassed_build_shapes(net)] == [(4, 7)]


def test_keras_history_operation_and_inbound_node():
    model = _model()
    assert keras_private.keras_history_operation(model.outputs[0]) is model.get_layer("d2")
    node = keras_private.inbound_node(model.outputs[0])
    assert node.operation is model.get_layer("d2") and not node.is_input
    (parent,) = node.arguments.keras_tensors
    assert isinstance(keras_private.keras_history_operation(parent), keras.layers.Activation)
    assert keras_private.inbound_node(keras.Input((2,))).is_input
    assert keras_private.inbound_node(np.ones(2)) is None


def test_keras_mask():
    inputs = keras.Input((4,), dtype="int32")
    embedded = keras.layers.Embedding(5, 2, mask_zero=True)(inputs)
    assert keras_private.keras_mask(embedded) is not None
    assert keras_private.keras_mask(inputs) is None
    eager = keras.layers.Embedding(5, 2, mask_zero=True)(np.array([[1, 0]]))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(keras_private.keras_mask(eager)), [[True, False]])


def test_compile_arguments():
    model = _model()
    assert keras_private.compile_arguments(model) == {}
    loss = keras.losses.MeanSquaredError()
    model.compile(optimizer="sgd", loss=loss, metrics=["mae"], loss_weights=[2.0])
    given = keras_private.compile_arguments(model)
    assert given["loss"] is loss and given["metrics"] == ["mae"] and given["loss_weights"] == [2.0]
    assert given["optimizer"] is model.optimizer


def test_graph_run_hooks():
    seen = []

    class Hooked(keras_private.GraphRunHooks, keras.Model):
        def on_graph_run(self, outputs):
            seen.append(outputs)

    inputs, outputs = dense_graph()
    model = Hooked(inputs, outputs)
    model(np.ones((2, 5), "float32"))
    assert seen  # `Functional._run_through_graph` still runs the graph
    if BACKEND == "tensorflow":  # only Keras' TensorFlow trainer builds through it
        assert callable(getattr(keras.Model, "_maybe_symbolic_build"))


def test_symbolic_build():
    model = _compiled()
    assert not model.optimizer.built
    x = np.ones((2, 5), "float32")
    keras_private.symbolic_build(model, (x, np.ones((2, 3), "float32")))
    assert model.optimizer.built


def test_calling_model():
    class Net(keras.Model):
        def probe(self, predicate):
            return keras_private.calling_model(predicate)

    inputs, outputs = dense_graph()
    net = Net(inputs, outputs)
    assert net.probe(lambda m: m is net) is net
    assert net.probe(lambda m: False) is None
    assert keras_private.calling_model(lambda m: True) is None


def test_compute_loss_and_loss_tracker():
    model = _compiled()
    x, y = np.ones((2, 5), "float32"), np.zeros((2, 3), "float32")
    y_pred = model(x)
    loss = keras_private.compute_loss(model, x, y, y_pred, None)
    expected = np.mean(keras.ops.convert_to_numpy(y_pred) ** 2)
    assert float(keras.ops.convert_to_numpy(loss)) == pytest.approx(expected, rel=1e-5)
    assert isinstance(keras_private.loss_tracker(model), keras.metrics.Mean)


@pytest.mark.skipif(BACKEND != "jax", reason="the JAX trainer's stateless metrics update")
def test_update_metrics_variables():
    model = _compiled()
    x, y = np.ones((2, 5), "float32"), np.zeros((2, 3), "float32")
    model.fit(x, y, epochs=1, verbose=0)  # builds the metrics
    variables = [v.value for v in model.metrics_variables]
    logs, new = keras_private.update_metrics_variables(model, variables, 1.0, x, y, model(x), None)
    assert "loss" in logs and len(new) == len(variables)


def test_losses_override():
    model = _model()
    with keras_private.losses_override(model, [keras.ops.convert_to_tensor(3.0)]):
        assert len(model.losses) == 1
    assert model.losses == []


def test_optimizer_var_key_and_trained_variables():
    model, optimizer = _built_optimizer()
    variables = model.trainable_variables
    assert keras_private.optimizer_trained_variables(optimizer) == variables
    keys = {keras_private.optimizer_var_key(optimizer, v) for v in variables}
    assert len(keys) == len(variables)
    assert keras_private.optimizer_variable_index(optimizer, variables[2]) == 2


def test_set_optimizer_trained_variables():
    model = _model()
    optimizer = keras.optimizers.SGD()
    variables = model.trainable_variables[:2]
    keras_private.set_optimizer_trained_variables(optimizer, variables)
    assert keras_private.optimizer_trained_variables(optimizer) == variables
    assert keras_private.optimizer_variable_index(optimizer, variables[1]) == 1


def test_optimizer_own_and_tracked_variables():
    _, optimizer = _built_optimizer()
    own = keras_private.optimizer_own_variables(optimizer)
    assert own and all(isinstance(v, keras.Variable) for v in own)
    extra = keras.Variable(0.0, name="extra")
    keras_private.track_optimizer_variable(optimizer, extra)
    assert any(v is extra for v in optimizer.variables)


def test_optimizer_raw_learning_rate():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    assert keras_private.optimizer_raw_learning_rate(keras.optimizers.SGD(schedule)) is schedule
    assert keras_private.optimizer_raw_learning_rate(object()) is None


def test_weight_decay_exclusions():
    model = _model()
    optimizer = keras.optimizers.AdamW()
    bias = model.get_layer("d1").bias
    optimizer.exclude_from_weight_decay(var_list=[bias])
    keys = keras_private.weight_decay_exclusions(optimizer)
    assert keys == {keras_private.optimizer_var_key(optimizer, bias)}
    optimizer.build(model.trainable_variables)
    assert not optimizer._use_weight_decay(bias)
    keras_private.set_weight_decay_exclusions(optimizer, set())
    assert optimizer._use_weight_decay(bias)  # the cached decision was cleared
    assert keras_private.weight_decay_exclusions(keras.optimizers.SGD()) == set()


def test_optimizer_uses_weight_decay():
    model = _model()
    optimizer = keras.optimizers.AdamW()
    bias, kernel = model.get_layer("d1").bias, model.get_layer("d1").kernel
    optimizer.exclude_from_weight_decay(var_list=[bias])
    optimizer.build(model.trainable_variables)
    assert keras_private.optimizer_uses_weight_decay(optimizer, kernel)
    assert not keras_private.optimizer_uses_weight_decay(optimizer, bias)


def test_optimizer_clip_gradients():
    grads = [keras.ops.ones((2,)) * 3.0, None]
    clipped = keras_private.optimizer_clip_gradients(keras.optimizers.SGD(clipvalue=1.0), grads)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(clipped[0]), [1.0, 1.0])
    assert clipped[1] is None


class CountingSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A warm-up then decay schedule that counts its calls (made in Python,
    also while a step is traced)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, step):
        self.calls += 1
        step = keras.ops.cast(step, "float32")
        return keras.ops.where(step < 2.0, 0.05 * (step + 1.0) / 2.0, 0.05 / keras.ops.sqrt(step))


def _decaying_steps(optimizer, variables, steps=4, once=False):
    rng = np.random.default_rng(0)
    for _ in range(steps):
        grads = [keras.ops.convert_to_tensor(rng.normal(size=v.shape).astype("float32")) for v in variables]
        if once:
            with keras_private.learning_rate_read_once(optimizer):
                optimizer.apply(grads, variables)
        else:
            optimizer.apply(grads, variables)
    return [keras.ops.convert_to_numpy(v) for v in variables]


@pytest.mark.parametrize("make", [lambda s: keras.optimizers.AdamW(s, weight_decay=0.1),
                                  lambda s: keras.optimizers.SGD(s, momentum=0.9, weight_decay=0.01)])
def test_learning_rate_read_once(make):
    # The same weights as Keras' per-variable reads, with one schedule call a
    # step instead of one per decayed variable (plus the update's own read).
    results, calls = [], []
    for once in (False, True):
        keras.utils.set_random_seed(0)
        variables = [keras.Variable(np.full(shape, 0.5, "float32")) for shape in [(3, 2), (2,), (4,)]]
        schedule = CountingSchedule()
        optimizer = make(schedule)
        optimizer.build(variables)
        results.append(_decaying_steps(optimizer, variables, once=once))
        calls.append(schedule.calls)
        assert "_apply_weight_decay" not in vars(optimizer)  # restored
    for per_variable, read_once in zip(*results):
        np.testing.assert_array_equal(per_variable, read_once)
    if BACKEND == "torch":
        assert calls[1] == calls[0]  # Keras' torch optimizers read it once already
    else:
        assert calls[0] == 4 * (3 + 1) and calls[1] == 4 * (1 + 1)


def test_learning_rate_read_once_leaves_a_distributed_optimizer_alone():
    optimizer = keras.optimizers.AdamW(CountingSchedule(), weight_decay=0.1)

    class Mirrored:  # what a tf.distribute variable carries
        _distribute_strategy = object()

    object.__setattr__(optimizer, "_iterations", type("Iterations", (), {"_value": Mirrored()})())
    with keras_private.learning_rate_read_once(optimizer):
        assert "_apply_weight_decay" not in vars(optimizer)


def test_learning_rate_read_once_is_reentrant_and_reaches_the_innermost():
    inner = keras.optimizers.AdamW(CountingSchedule(), weight_decay=0.1)
    outer = keras.optimizers.LossScaleOptimizer(inner)
    with keras_private.learning_rate_read_once(outer):
        replaced = vars(inner)["_apply_weight_decay"]
        with keras_private.learning_rate_read_once(inner):
            assert vars(inner)["_apply_weight_decay"] is replaced
    assert "_apply_weight_decay" not in vars(inner)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="Keras' TensorFlow optimizers all-reduce in apply")
def test_gradient_all_reduce():
    optimizer = keras.optimizers.SGD()
    assert keras_private.has_gradient_all_reduce(optimizer)
    keras_private.replace_gradient_all_reduce(optimizer, list)
    assert optimizer._all_reduce_sum_gradients is list
    keras_private.restore_gradient_all_reduce(optimizer)
    assert optimizer._all_reduce_sum_gradients is not list


@pytest.mark.skipif(BACKEND != "tensorflow", reason="tf.distribute")
def test_distribute_strategy_and_multi_worker_mode():
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(["CPU:0"])
    with strategy.scope():
        model = _compiled()
        variable = tf.Variable(1.0)
    assert keras_private.distribute_strategy(model) is strategy
    assert keras_private.distribute_strategy(variable) is strategy
    assert keras_private.distribute_strategy(object()) is None
    assert keras_private.in_multi_worker_mode(strategy) is False
