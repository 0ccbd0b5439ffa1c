"""The examples run as a user runs them (short settings), on every backend."""

import importlib.util
import os

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_transfer_learning_caches_the_frozen_base_at_o1_in_both_phases(capsys):
    results = load("transfer_learning").main(["--epochs", "2", "--pretrain-epochs", "3", "--samples", "1600",
                                              "--quiet"])
    out = capsys.readouterr().out
    assert list(results) == ["keras.Model", "BoostModel O1"]
    # Phase 1 caches the whole base; phase 2 the base below its unfrozen top block.
    assert "prefix cache: a frozen prefix of 10 operations computed once" in out
    assert "prefix cache: a frozen prefix of 6 operations computed once" in out
    for seconds, accuracy in results.values():
        assert seconds > 0 and accuracy > 0.4  # 5 classes: chance is 0.2


def test_transfer_learning_refuses_bad_epochs():
    with pytest.raises(SystemExit):
        load("transfer_learning").parse_args(["--samples", "0"])
