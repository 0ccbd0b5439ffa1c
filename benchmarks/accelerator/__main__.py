"""`python -m benchmarks.accelerator`."""

from benchmarks.accelerator.cli import main

main()
