"""`python -m keras_boost.bench [bench] [options]`: `keras-boost [bench [options]]`.

This module is the bench's own, so the command may be left out:
`python -m keras_boost.bench --quick` is `keras-boost bench --quick`. Without
options, with `--help` or `--version` it answers as `keras-boost` does.
"""

import sys

from keras_boost_cli import main

argv = sys.argv[1:]
if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
    argv = ["bench", *argv]
main(argv)
