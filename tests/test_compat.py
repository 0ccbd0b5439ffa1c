"""keras_boost.compat: MindSpore's names are keras_boost's objects, each in the table."""

import keras_boost as boost
from keras_boost import compat


def test_mindspore_names_are_the_package_objects():
    assert compat.AutoBoost is boost.AutoBoost
    assert compat.LessBN is boost.LessBN
    assert compat.GradientFreeze is boost.GradientFreeze
    assert compat.FreezeOpt is boost.FreezeOptimizer
    assert compat.GradientAccumulation is boost.GradientAccumulation
    assert compat.AdaSum is boost.AdaSum
    assert compat.DimReduce is boost.DimReduce
    assert compat.GroupLossScaleManager is boost.layers.GroupLossScaleManager
    assert compat.GradientCentralization is boost.GradientCentralization
    assert compat.CommonHeadLastFN is boost.layers.NormalizedDense
    assert compat.BoostTrainOneStepCell is boost.BoostModel
    assert compat.BoostTrainOneStepWithLossScaleCell is boost.BoostModel


def test_the_methods_mindspore_users_call_exist():
    for name in ("network_auto_process_train", "network_auto_process_eval"):
        assert callable(getattr(compat.AutoBoost, name))
    for name in ("check_adasum_enable", "check_dim_reduce_enable"):
        assert callable(getattr(compat.BoostTrainOneStepCell, name))
    for name in ("split_parameters_groups", "generate_freeze_index_sequence", "freeze_generate"):
        assert callable(getattr(compat.GradientFreeze, name))


def test_every_exported_name_is_in_the_table():
    table = compat.__doc__
    for name in compat.__all__:
        assert f"`{name}" in table, name
