"""Which matched BatchNormalization layers LessBN keeps: the frozen and the trained ones."""

import keras
import numpy as np

__all__ = ["kept_note", "why_kept"]

_OPT_IN = '{"less_bn": {"remove_pretrained_bn": true}}'

_KEPT_BECAUSE = {
    "frozen": "frozen (trainable=False on the layer or on a model enclosing it)",
    "trained": "trained (their moving statistics are no longer Keras' initial mean 0 and "
               "variance 1: pretrained or fitted weights)",
}


def why_kept(bn, in_frozen_model):
    """`"frozen"`, `"trained"`, or None when LessBN may remove `bn`."""
    if in_frozen_model or not bn.trainable:
        return "frozen"
    mean = keras.ops.convert_to_numpy(bn.moving_mean)
    variance = keras.ops.convert_to_numpy(bn.moving_variance)
    if np.any(mean != 0) or np.any(variance != 1):
        return "trained"
    return None


def kept_note(reason, names, shown=6):
    """The report's note on the matched BNs kept for `reason` (`why_kept`'s answer)."""
    listed = ", ".join(repr(n) for n in names[:shown])
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return (
        f"{len(names)} BatchNormalization layer(s) in a pattern kept because they are "
        f"{_KEPT_BECAUSE[reason]}: {listed}{more}. LessBN does not rewrite frozen or pretrained "
        f"parts; pass remove_pretrained_bn=True (AutoBoost: {_OPT_IN}) to remove them too."
    )
