"""LessBN's dry run: which BatchNormalization layers it would remove, and why others stay."""

import dataclasses
import itertools

import keras

from keras_boost.algorithms.less_bn import patterns as patterns_lib
from keras_boost.algorithms.less_bn.graph_view import all_bns
from keras_boost.algorithms.less_bn.graph_view import has_graph
from keras_boost.algorithms.less_bn.matcher import match_model
from keras_boost.algorithms.less_bn.pretrained import kept_note
from keras_boost.algorithms.less_bn.pretrained import why_kept
from keras_boost.algorithms.less_bn.report import LessBNReport
from keras_boost.validation import check_model

__all__ = ["find_less_bn", "patterns_without", "plan_removal", "unchanged_report", "why_nothing_removed"]


def _check_model(model):
    if isinstance(model, keras.Model) and not has_graph(model):
        raise TypeError(
            f"LessBN needs a Functional or Sequential model, got the subclassed model "
            f"{model.name!r} ({type(model).__name__}): its call() is Python code with no layer "
            "graph to match. Build the network with the functional API "
            "(keras.Input -> layers -> keras.Model(inputs, outputs)) and pass that, or drop "
            "the BatchNormalization layers in your own code."
        )
    check_model(model, where="LessBN's model")
    if isinstance(model, keras.Sequential) and not model.inputs:
        raise ValueError(
            f"Sequential model {model.name!r} has no input spec; start it with keras.Input(...)."
        )


def plan_removal(model, patterns=None, remove_pretrained_bn=False):
    """`(report, removed)`: `find_less_bn`'s report and `{id(bn layer): RemovedBN}` for the rebuild."""
    _check_model(model)
    pattern_list = tuple(patterns_lib.PATTERNS if patterns is None else patterns)
    matched, notes = match_model(model, pattern_list)
    bns = all_bns(model)
    removed, protected = {}, {}
    for bn, in_frozen_model in bns:
        if id(bn) in matched:
            reason = None if remove_pretrained_bn else why_kept(bn, in_frozen_model)
            if reason:
                protected.setdefault(reason, []).append(bn.name)
            else:
                removed[id(bn)] = matched[id(bn)]
    notes.extend(kept_note(reason, names) for reason, names in protected.items())
    report = LessBNReport(
        model.name, len(bns), tuple(removed.values()),
        kept=tuple(bn.name for bn, _ in bns if id(bn) not in removed),
        notes=tuple(notes),
        protected=tuple(itertools.chain.from_iterable(protected.values())),
    )
    return report, removed


def find_less_bn(model, patterns=None, remove_pretrained_bn=False):
    """Dry run of LessBN: which BNs it would remove, without building anything.

    Args:
        model: a built Functional or Sequential `keras.Model`.
        patterns: the patterns to try, in order (default
            `keras_boost.algorithms.less_bn.patterns.PATTERNS`).
        remove_pretrained_bn: as for `LessBN`.

    Returns:
        A `LessBNReport` (its `head` is None: the head is not considered).

    Example:

    ```python
    report = boost.surgery.find_less_bn(keras.applications.ResNet50(
        weights=None, input_shape=(64, 64, 3), classes=10))
    report.num_removed, report.num_bn   # (36, 53)
    ```
    """
    return plan_removal(model, patterns, remove_pretrained_bn)[0]


def patterns_without(exclude_patterns):
    """`PATTERNS` without the named ones; unknown names raise `ValueError`.

    Example:

    ```python
    [p.name for p in patterns_without(["InvertedResidual2"])]   # 15 of the 16
    ```
    """
    if isinstance(exclude_patterns, str):
        exclude_patterns = [exclude_patterns]
    if not isinstance(exclude_patterns, (list, tuple, set, frozenset)):
        raise TypeError(f"exclude_patterns must be a list of pattern names, got {exclude_patterns!r}.")
    valid = [p.name for p in patterns_lib.PATTERNS]
    unknown = sorted(str(n) for n in exclude_patterns if n not in valid)
    if unknown:
        raise ValueError(f"Unknown LessBN pattern(s) {unknown} in exclude_patterns. Valid patterns: {valid}.")
    return tuple(p for p in patterns_lib.PATTERNS if p.name not in exclude_patterns)


def why_nothing_removed(report):
    """Why the dry run `report` removes no BatchNormalization, as a clause."""
    if not report.num_bn:
        return "it has no BatchNormalization layer"
    if report.protected:
        return (f"the {len(report.protected)} BatchNormalization layers in its patterns are frozen "
                "or trained, and LessBN keeps those")
    return (
        f"none of its {report.num_bn} BatchNormalization layers is in a ResNet, MobileNetV2 or "
        "DenseNet pattern (see keras_boost.algorithms.less_bn.patterns)"
    )


def unchanged_report(model, section):
    """The report of a model that LessBN, as `AutoBoost` applies it, left as it
    was: nothing removed, and why (`LessBNReport.unchanged`).

    Args:
        model: the model LessBN left unchanged.
        section: the resolved `less_bn` config section it ran with.

    Example:

    ```python
    from keras_boost.algorithms.less_bn import unchanged_report
    mlp = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    print(unchanged_report(mlp, boost.AutoBoost("O1").config["less_bn"]))
    # LessBN on 'sequential': nothing removed: it has no BatchNormalization layer.
    ```
    """
    if not has_graph(model):
        bns = [bn.name for bn, _ in all_bns(model)]
        return LessBNReport(model.name, len(bns), removed=(), kept=tuple(bns),
                            unchanged="it is a subclassed model, whose call() has no layer graph to match")
    report = find_less_bn(model, patterns_without(section["exclude_patterns"]),
                          remove_pretrained_bn=section["remove_pretrained_bn"])
    return dataclasses.replace(report, unchanged=why_nothing_removed(report))
