"""Measurement scripts, one per algorithm: `python -m benchmarks.<name> --help` from the repository root."""
