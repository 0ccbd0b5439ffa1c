"""The step-part interface and how BoostModel gets its parts."""

import keras
import pytest
from conftest import dense_graph
from conftest import regression_data

import keras_boost as boost
from keras_boost.algorithms.compose import step_parts_for
from keras_boost.algorithms.freezing import FreezingStep
from keras_boost.algorithms.loss_scaling import LossScaleStep
from keras_boost.algorithms.step_part import StatelessStep
from keras_boost.algorithms.step_part import StepPart
from keras_boost.algorithms.step_part import trained_variables
from keras_boost.algorithms.step_part import update_owner

FREEZE = {"boost": {"mode": "manual", "grad_freeze": True},
          "grad_freeze": {"param_groups": 2, "total_steps": 8}}


class _Owner(StepPart):
    owns_update = True


class _Suffix(StepPart):
    def trained_variables(self, variables):
        return variables[1:]


def test_the_default_part_changes_nothing():
    part, variables = StepPart(), ["a", "b"]
    assert part.trained_variables(variables) == variables and part.restored_state(None) == []
    assert part.finish(None) == {} and part.stateless_finish(None) == {}
    assert part.make_train_function(None, None) is None and part.callbacks(None) == [] and part.summary(None) == ""
    with pytest.raises(NotImplementedError, match="does not own the update"):
        part.apply(None)


def test_parts_narrow_the_trained_variables_in_turn():
    assert trained_variables([_Suffix(), _Suffix()], ["a", "b", "c"]) == ["c"]


def test_one_owner_of_the_update_at_most():
    owner = _Owner()
    assert update_owner([StepPart(), owner]) is owner and update_owner([StepPart()]) is None
    with pytest.raises(ValueError, match="_Owner and _Owner both replace the update"):
        update_owner([owner, _Owner()])


def test_the_parts_come_from_the_compiled_chain():
    plain = boost.BoostModel(*dense_graph(), loss_scale=None)
    plain.compile(optimizer="sgd", loss="mse")
    assert step_parts_for(plain) == [] and plain._boost_step_parts() == []
    model = boost.BoostModel(*dense_graph(), boost_config_dict=FREEZE, loss_scale="dynamic")
    model.compile(optimizer="sgd", loss="mse")
    parts = model._boost_step_parts()
    assert [type(p) for p in parts] == [FreezingStep, LossScaleStep]
    assert model._boost_step_parts() is parts  # kept until the next compile


def test_a_replaced_optimizer_is_refused():
    model = boost.BoostModel(*dense_graph(), loss_scale=None)
    model.compile(optimizer="sgd", loss="mse")
    model.optimizer = keras.optimizers.SGD()
    x, y = regression_data(n=4)
    with pytest.raises(ValueError, match="model.optimizer was replaced after compile by SGD"):
        model.fit(x, y, verbose=0)


def test_the_stateless_step_reads_and_writes_by_variable():
    model = boost.BoostModel(*dense_graph(), loss_scale="dynamic")
    model.compile(optimizer="sgd", loss="mse")
    scale = next(v for v in model.optimizer.variables if v.name == "dynamic_scale")
    bn_mean = next(v for v in model.non_trainable_variables if "moving_mean" in v.path)
    state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
             [v.value for v in model.optimizer.variables], [])
    step = StatelessStep(model, None, None, None, state, [], loss_fn=None)
    assert float(step.value(scale)) == 2.0**15
    step.optimizer_values = list(step.optimizer_values)  # a part may replace the list
    step.assign(scale, 2.0)
    step.assign(bn_mean, keras.ops.ones_like(bn_mean.value))
    assert step.value(scale) == 2.0 and float(keras.ops.sum(step.value_before(bn_mean))) == 0.0
    assert step.optimizer_slice(model.optimizer) == slice(0, len(model.optimizer.variables))
