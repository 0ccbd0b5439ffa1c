"""Command-line checks shared by the benchmark entry points."""


def require_positive(parser, args, names):
    """`parser.error` for the first of `names` (argparse dests) below 1."""
    for name in names:
        value = getattr(args, name)
        if value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
