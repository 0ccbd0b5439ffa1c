"""The wrapped optimizer's hyperparameters read and write through every wrapper."""

import inspect

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import dense_graph
from conftest import regression_data
from conftest import to_numpy
from keras_boost.algorithms.optimizer_wrapper import HYPERPARAMETERS

# On this model nothing of the wrappers acts (no kernel has a multiple of 16
# input channels, one freeze group, one replica), so each one trains like the
# SGD inside it.
WRAPPERS = {
    "freeze": lambda opt: boost.FreezeOptimizer(opt),
    "adasum": lambda opt: boost.AdaSum(opt),
    "accumulation": lambda opt: boost.GradientAccumulation(opt, 1),
    "centralization": lambda opt: boost.GradientCentralization(opt),
    "loss_scale": lambda opt: boost.optimizers.DynamicLossScaleOptimizer(opt),
    "compressed": lambda opt: boost.optimizers.CompressedAllReduce(opt),
    "wrap_o0": lambda opt: boost.wrap(opt, "O0"),
    "wrap_o1_chain": lambda opt: boost.wrap(opt, "O1", {"grad_freeze": {"param_groups": 1}}),
    "nested": lambda opt: boost.GradientAccumulation(
        boost.GradientCentralization(boost.AdaSum(opt)), 1),
}


def fit(optimizer, steps=4, **fit_args):
    model = keras.Model(*dense_graph(batch_norm=False))
    compile_args = {}
    if isinstance(optimizer, boost.optimizers.DynamicLossScaleOptimizer):
        compile_args["auto_scale_loss"] = False  # it scales the loss itself
    model.compile(optimizer=optimizer, loss="mse", **compile_args)
    x, y = regression_data(n=8 * steps)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0, **fit_args)
    return model


def assert_same_weights(a, b):
    for u, v in zip(to_numpy(a.weights), to_numpy(b.weights)):
        np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-7)


def test_the_list_covers_every_optimizer_argument():
    arguments = set()
    for module in (keras.optimizers, boost.optimizers):
        for cls in vars(module).values():
            if (inspect.isclass(cls) and issubclass(cls, keras.optimizers.Optimizer)
                    and not issubclass(cls, boost.OptimizerWrapper)):
                arguments |= {p.name for p in inspect.signature(cls.__init__).parameters.values()
                              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    structural = {"self", "name", "learning_rate", "inner_optimizer", "optimizer_map"}
    assert arguments - structural <= HYPERPARAMETERS, sorted(arguments - structural - HYPERPARAMETERS)


@pytest.mark.filterwarnings("ignore::keras_boost.NoEffectWarning")
@pytest.mark.parametrize("make", WRAPPERS.values(), ids=WRAPPERS.keys())
def test_hyperparameters_read_and_write_through(make):
    sgd = keras.optimizers.SGD(0.05, momentum=0.9, clipnorm=5.0, name="sgd")
    opt = make(sgd)
    assert (opt.momentum, opt.nesterov, opt.clipnorm, opt.use_ema) == (0.9, False, 5.0, False)
    opt.momentum = 0.5
    opt.clipnorm = 4.0
    assert (sgd.momentum, sgd.clipnorm) == (0.5, 4.0)
    assert "momentum" not in vars(opt) and "clipnorm" not in vars(opt)
    with pytest.raises(AttributeError, match=r"'beta_1'.*SGD 'sgd'.*'momentum'"):
        opt.beta_1 = 0.8
    assert not hasattr(sgd, "beta_1") and not hasattr(opt, "beta_1")
    # A training step uses the new value: the same weights as SGD at 0.5.
    reference = fit(keras.optimizers.SGD(0.05, momentum=0.5, clipnorm=4.0))
    assert_same_weights(fit(opt), reference)


@pytest.mark.filterwarnings("ignore::keras_boost.NoEffectWarning")
def test_weight_decay_exclusions_reach_the_wrapped_optimizer():
    def decayed():
        return keras.optimizers.SGD(0.05, momentum=0.9, weight_decay=0.5)

    def fit_excluding_head(optimizer):
        model = keras.Model(*dense_graph(batch_norm=False))
        optimizer.exclude_from_weight_decay(var_list=[model.get_layer("d2").kernel])
        model.compile(optimizer=optimizer, loss="mse")
        model.fit(*regression_data(n=32), batch_size=8, shuffle=False, verbose=0)
        return model

    opt = WRAPPERS["nested"](decayed())
    assert opt.weight_decay == 0.5
    assert_same_weights(fit_excluding_head(opt), fit_excluding_head(decayed()))


def test_dim_reduce_forwards_but_keeps_its_own_rho():
    rms = keras.optimizers.RMSprop(0.01, rho=0.8, momentum=0.9)
    opt = boost.DimReduce(rms, rho=0.5, weight_load_dir="unused")
    assert (opt.rho, opt.momentum) == (0.5, 0.9)
    opt.rho, opt.momentum = 0.6, 0.3
    assert (opt.rho, rms.rho, rms.momentum) == (0.6, 0.8, 0.3)


def test_boost_model_optimizer_forwards_hyperparameters():
    sgd = keras.optimizers.SGD(0.05, momentum=0.9)
    model = boost.BoostModel(*dense_graph(batch_norm=False), boost_level="O0")
    model.compile(optimizer=sgd, loss="mse")
    assert model.optimizer.momentum == 0.9
    model.optimizer.momentum = 0.5
    assert sgd.momentum == 0.5
    x, y = regression_data(n=32)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert_same_weights(model, fit(keras.optimizers.SGD(0.05, momentum=0.5)))


class SetMomentum(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.model.optimizer.momentum = 0.5


@pytest.mark.filterwarnings("ignore::keras_boost.NoEffectWarning")
def test_a_callback_sets_the_momentum_of_a_chain():
    sgd = keras.optimizers.SGD(0.05, momentum=0.9)
    model = fit(WRAPPERS["wrap_o1_chain"](sgd), callbacks=[SetMomentum()])
    assert sgd.momentum == 0.5
    assert_same_weights(model, fit(keras.optimizers.SGD(0.05, momentum=0.5)))


@pytest.mark.filterwarnings("ignore::keras_boost.NoEffectWarning")
def test_ema_through_a_chain_with_swap_ema_weights():
    def ema_sgd():
        return keras.optimizers.SGD(0.05, momentum=0.9, use_ema=True, ema_momentum=0.5)

    opt = WRAPPERS["wrap_o1_chain"](ema_sgd())
    assert opt.use_ema and opt.ema_momentum == 0.5
    # Validation swaps the EMA weights in and out (SwapEMAWeights finds the
    # slots one level below model.optimizer).
    models = [fit(o, callbacks=[keras.callbacks.SwapEMAWeights()], validation_data=regression_data(n=8))
              for o in (opt, ema_sgd())]
    # The EMA slots exist once, in the SGD (not again in each wrapper).
    averages = [v for v in opt.variables if "average" in v.path]
    assert len(averages) == len(models[0].trainable_variables)
    assert_same_weights(*models)
