"""Warnings and errors shared by every keras_boost algorithm."""

import contextlib

__all__ = ["NoEffectWarning", "not_implemented", "reraise_with_context"]


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


@contextlib.contextmanager
def reraise_with_context(doing):
    """Re-raises an error from TF/JAX/torch internals with what keras_boost was doing.

    The error keeps its type (callers' `except ValueError` still work) and
    chains the original; errors already carrying keras_boost context pass
    through unchanged.
    """
    try:
        yield
    except (ValueError, TypeError, RuntimeError) as error:
        message = str(error)
        if "keras_boost" in message or type(error).__module__.startswith("keras_boost"):
            raise
        try:
            wrapped = type(error)(f"keras_boost: while {doing}: {message}")
        except Exception:  # an exception type with another constructor
            raise error from None
        raise wrapped from error
