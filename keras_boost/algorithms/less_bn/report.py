"""What LessBN removed: `LessBNReport` and its `RemovedBN` entries."""

import dataclasses

__all__ = ["LessBNReport", "REPORT_ATTR", "RemovedBN"]

# The attribute of a LessBN model that holds its report.
REPORT_ATTR = "less_bn_report"


@dataclasses.dataclass(frozen=True)
class RemovedBN:
    """A BatchNormalization removed by LessBN, with the pattern that matched."""

    layer: str
    pattern: str
    root: str
    model: str


@dataclasses.dataclass(frozen=True)
class LessBNReport:
    """What LessBN removed from a model (print it, or read the fields).

    Attributes:
        model: name of the model.
        num_bn: BatchNormalization layers in the model (sub-models included).
        removed: tuple of `RemovedBN` (layer name, pattern, root layer).
        kept: names of the BatchNormalization layers that stay.
        head: one `"old Dense -> NormalizedDense (...)"` line per head that
            `fn_flag` replaced (joined by "; "), else None.
        notes: tuple of notes (shared BNs kept, frozen or trained BNs kept,
            heads not replaced, ...).
        protected: names of the BNs a pattern matched that stay because they
            are frozen or trained (see `LessBN`'s `remove_pretrained_bn`).
        unchanged: why LessBN changed nothing (e.g. "it has no
            BatchNormalization layer"), on the report of a model it left
            as it was; None when it removed BNs or swapped a head.

    Example:

    ```python
    new = boost.LessBN(model)
    print(new.less_bn_report)      # one line per removed BN
    new.less_bn_report.removed_names
    ```
    """

    model: str
    num_bn: int
    removed: tuple
    kept: tuple
    head: object = None
    notes: tuple = ()
    protected: tuple = ()
    unchanged: object = None

    @property
    def removed_names(self):
        return [r.layer for r in self.removed]

    @property
    def num_removed(self):
        return len(self.removed)

    def __str__(self):
        if self.unchanged:
            lines = [f"LessBN on {self.model!r}: nothing removed: {self.unchanged}."]
        else:
            lines = [
                f"LessBN on {self.model!r}: removed {self.num_removed} of {self.num_bn} "
                f"BatchNormalization layers."
            ]
        by_pattern = {}
        for r in self.removed:
            by_pattern.setdefault(r.pattern, []).append(r)
        for pattern, removed in by_pattern.items():
            lines.append(f"  {pattern} ({len(removed)}):")
            lines.extend(f"    {r.layer}  (root {r.root})" for r in removed)
        if self.head:
            lines.append(f"  head: {self.head}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def summary(self, print_fn=print):
        """Prints `str(self)` with `print_fn`."""
        print_fn(str(self))
