"""The zoo workloads the check runs, and their shortened versions for the time to accuracy."""

import dataclasses
import inspect

__all__ = ["find_workload", "shortened"]


def find_workload(name, samples=None):
    """The registered zoo workload `name`, or `(None, reason)` when it is not registered.

    With `samples`, a factory that takes a `samples` argument (the
    `finetune` workload: its pretraining too) is asked for that small
    version.
    """
    from keras_boost.bench import catalog

    factory = catalog.WORKLOADS.get(name)
    if factory is None:
        return None, (f"workload {name!r} is not registered in keras_boost.bench.catalog.WORKLOADS "
                      f"(registered: {', '.join(sorted(catalog.WORKLOADS))})")
    if samples is not None and "samples" in inspect.signature(factory).parameters:
        return factory(samples=samples), None
    return factory(), None


def shortened(workload, epochs, samples=None):
    """`workload` trained for `epochs` epochs, on its first `samples` examples (None: all).

    `Workload.with_epochs` rescales the recipe (warmup, and a fine-tuning
    workload's two phases); a fine-tuning workload keeps at least 2 epochs
    (one per phase), and no workload gets more than its own.

    Example:

    ```python
    short = shortened(applications_workload(), 4)
    short.epochs, short.warmup_epochs   # 4, 1.0
    ```
    """
    epochs = min(max(int(epochs), 2 if workload.fine_tune is not None else 1), workload.epochs)
    short = workload.with_epochs(epochs)
    if samples is None:
        return short

    def data():
        (x, y), (x_test, y_test) = workload.data()
        return (x[:samples], y[:samples]), (x_test[:samples], y_test[:samples])

    return dataclasses.replace(short, data=data)
