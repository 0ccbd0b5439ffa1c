"""Command-line checks shared by the benchmark entry points."""

import argparse

__all__ = ["number_list", "require_positive"]


def require_positive(parser, args, names):
    """`parser.error` for the first of `names` (argparse dests) below 1."""
    for name in names:
        value = getattr(args, name)
        if value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")


def number_list(kind, minimum):
    """An argparse `type`: comma-separated `kind` values, each >= `minimum`.

    Example:

    ```python
    parser.add_argument("--alpha", type=number_list(float, 0.0), default=[0.001])
    ```
    """

    def parse(text):
        try:
            values = [kind(part) for part in text.split(",")]
        except ValueError:
            values = []
        if not values or min(values) < minimum:
            raise argparse.ArgumentTypeError(
                f"expected {kind.__name__}s >= {minimum} separated by commas, got {text!r}")
        return values

    return parse
