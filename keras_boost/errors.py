"""Warnings and errors shared by every keras_boost algorithm."""


class NoEffectWarning(UserWarning):
    """An enabled algorithm found nothing to act on (e.g. LessBN matched no BN)."""


def not_implemented(names):
    """The error raised when a config enables algorithms that do not exist yet."""
    names = list(names)
    return NotImplementedError(
        f"keras_boost does not implement {names} yet, so enabling "
        f"{'it' if len(names) == 1 else 'them'} would do nothing. Disable "
        f"{'it' if len(names) == 1 else 'them'} with "
        '{"boost": {"mode": "manual", ' + ", ".join(f'"{n}": false' for n in names)
        + "}} or use level 'O0'."
    )
