"""The workload zoo: models users bring, each with its data and recipe.

`WORKLOADS` maps a name to a factory returning a `keras_boost.bench.Workload`;
`keras_boost.bench.harness.WORKLOADS` includes them, so
`keras-boost bench --workload NAME` runs them. Nothing downloads: the data
are made in the package or come from its embedded MNIST sample.
"""

__all__ = ["WORKLOADS"]

WORKLOADS = {}
