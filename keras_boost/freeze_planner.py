"""Which freeze depths get a compiled train function of their own.

Gradient freezing saves time because a frozen step's backward pass stops
early; but on TensorFlow and JAX every distinct depth costs one more trace
and compilation, which a short run may never pay back. `DepthPlanner`
decides on the host, per schedule step, which compiled depth runs a
requested depth. Pure Python (no Keras), so the rule is tested on its own.

The rule (adaptive mode):

1. Depths whose trained variables are the same set share one function
   (with fewer blocks than groups, several depths train everything).
2. Depth 0 (the full step) always runs first: it is the fallback, and its
   first calls measure the full step time `t0` and the cost of a trace.
3. A requested depth `r` that has no function runs as the deepest kept
   depth `f <= r` (rule 5), unless tracing a new depth `e` in `(f, r]` is
   expected to pay back: `gain(e) > expected trace cost`, where
   `gain(e) = sum over depths r' >= e whose current fallback is shallower
   than e of remaining uses of r' x (saving(e) - saving(fallback of r'))`.
   Counting the deeper requests that `e` would serve is what lets a long
   run trace a few coarse depths (e.g. 3 and 6 of 10) where no single
   depth repays its trace on its own uses. Of the candidates, the one with
   the largest gain is traced. A depth's saving is its measured one once it
   has run; before that the prior `0.6 * t0 * d / (n - 1)` (the deepest
   depth of the default 10-group schedule measured 0.39x the full step on
   the bench CNN). The trace cost is the median of those measured so far.
4. A traced depth whose measured step saves less than 2% of `t0` is
   dropped.
5. A depth that is not traced (or dropped) runs as the deepest kept depth
   shallower than it, which trains a superset of its variables: the step
   then updates more variables than the schedule asked for, never fewer.

Non-adaptive mode (an explicit `param_groups`, MindSpore's meaning) applies
rule 1 only: every depth runs as scheduled.
"""

import statistics

import numpy as np

# Timed calls per depth after its first (tracing) call. A step time is the
# fastest of them: on a shared machine noise only ever adds time (the rule
# of Python's `timeit`), where a median of 3 moves with one or two slowed
# calls.
TIMED_CALLS = 5
# A depth must save at least this fraction of the full step to be kept.
MIN_SAVING = 0.02
# Prior saving of the deepest depth, as a fraction of the full step.
PRIOR_DEEPEST_SAVING = 0.6


class DepthPlanner:
    """Maps each requested freeze depth to the depth whose function runs.

    Args:
        groups: per depth, the indices of the variables it trains.
        adaptive: apply the whole rule (True) or only the sharing of
            identical depths (False).

    Example:

    ```python
    planner = DepthPlanner([[0, 1, 2], [1, 2], [2]], adaptive=True)
    planner.set_schedule([0, 1, 0, 2], total_steps=300)
    depth = planner.choose(step=0)        # 0
    planner.record(depth, seconds=1.5)    # the first call traces
    ```
    """

    def __init__(self, groups, adaptive=True):
        groups = [frozenset(g) for g in groups]
        self.num_depths = len(groups)
        self.adaptive = bool(adaptive)
        # Rule 1: the shallowest depth with the same trained set.
        self.alias = [next(e for e in range(d + 1) if groups[e] == groups[d])
                      for d in range(len(groups))]
        self._table = None
        self.total_steps = None
        self.traced = []          # depths with a function, in tracing order
        self.dropped = set()      # traced, but saving less than MIN_SAVING
        self.declined = set()     # judged not worth tracing (for the report)
        self._calls = {}          # depth -> list of measured call seconds
        self._measurements = 0    # record() calls so far
        self._declined_at = {}    # requested depth -> _measurements when declined
        self._last = (None, None)  # (schedule step, chosen depth)

    @property
    def has_schedule(self):
        return self._table is not None

    def set_schedule(self, table, total_steps=None):
        """The freeze schedule (one depth per step, cycled) and the run's
        length in schedule steps (None: unknown, treated as long)."""
        self._table = np.asarray([self.alias[d] for d in table], dtype=np.int64)
        self._cumulative = {
            d: np.concatenate([[0], np.cumsum(self._table == d)]) for d in set(self.alias)
        }
        self.total_steps = total_steps

    # --- measurements ------------------------------------------------------

    def needs_timing(self, depth):
        """Whether the next call of `depth` should be timed (with a sync)."""
        return self.adaptive and len(self._calls.get(depth, ())) < 1 + TIMED_CALLS

    def record(self, depth, seconds):
        """Records the wall time of one (synchronised) call of `depth`."""
        calls = self._calls.setdefault(depth, [])
        calls.append(float(seconds))
        self._measurements += 1
        if depth not in self.traced:
            self.traced.append(depth)
        t0 = self.step_time(0)
        if depth != 0 and t0 is not None and len(calls) == 1 + TIMED_CALLS:
            if t0 - self.step_time(depth) < MIN_SAVING * t0:
                self.dropped.add(depth)

    def step_time(self, depth):
        """Fastest steady-state call of `depth` in seconds once measured, else None."""
        calls = self._calls.get(depth, [])
        return min(calls[1:]) if len(calls) > 1 else None

    def trace_cost(self, depth):
        """First call minus the steady step time of `depth`, once measured."""
        steady = self.step_time(depth)
        return None if steady is None else max(0.0, self._calls[depth][0] - steady)

    # --- decisions ---------------------------------------------------------

    def _uses(self, depth, start):
        """Schedule steps in [start, total) that request `depth` (after aliasing)."""
        if self.total_steps is None:
            return float("inf")
        length, cumulative = len(self._table), self._cumulative[depth]

        def upto(stop):  # uses in [0, stop)
            cycles, rest = divmod(stop, length)
            return cycles * cumulative[-1] + cumulative[rest]

        return max(0, upto(self.total_steps) - upto(min(start, self.total_steps)))

    def _saving(self, depth):
        """Seconds saved per call of `depth`: measured, else the prior."""
        t0 = self.step_time(0)
        measured = self.step_time(depth)
        if measured is not None:
            return t0 - measured
        return PRIOR_DEEPEST_SAVING * t0 * depth / max(1, self.num_depths - 1)

    def _kept(self):
        return [d for d in self.traced if d not in self.dropped]

    def _fallback(self, depth):
        """The deepest kept depth at or shallower than `depth`."""
        return max((d for d in self._kept() if d <= depth), default=0)

    def _gain(self, candidate, step):
        """Expected seconds saved over the rest of the run by tracing `candidate`."""
        total = 0.0
        for requested in set(self.alias):
            if requested < candidate:
                continue
            fallback = self._fallback(requested)
            extra = self._saving(candidate) - self._saving(fallback)
            if fallback < candidate and extra > 0:
                total += self._uses(requested, step) * extra
        return total

    def _depth_to_trace(self, requested, step):
        """Rule 3: the new depth worth tracing for this request, or None."""
        costs = [c for c in (self.trace_cost(d) for d in self.traced) if c is not None]
        if self.step_time(0) is None or not costs:
            return None  # depth 0 runs first and measures both
        cost = statistics.median(costs)
        fallback = self._fallback(requested)
        candidates = [e for e in range(fallback + 1, requested + 1)
                      if self.alias[e] == e and e not in self.traced]
        gains = {e: self._gain(e, step) for e in candidates}
        best = max(gains, key=gains.get, default=None)
        return best if best is not None and gains[best] > cost else None

    def choose(self, step, requested=None):
        """The depth to run at schedule step `step` (requested: the schedule's).

        Within one schedule step (an accumulation window) the answer is
        fixed, so every micro-step of a window trains the same variables.
        """
        if self._last[0] == step:
            return self._last[1]
        requested = int(self._table[step % len(self._table)] if requested is None else requested)
        depth = self.alias[requested]
        if self.adaptive and depth != 0 and (depth not in self.traced or depth in self.dropped):
            # Remaining uses only shrink, so a declined request stays
            # declined until a new measurement changes the estimates.
            if self._declined_at.get(depth) == self._measurements:
                new = None
            else:
                new = self._depth_to_trace(depth, step)
                self._declined_at[depth] = self._measurements if new is None else None
            if new == depth:
                self.declined.discard(depth)
            else:
                self.declined.add(depth)
            depth = self._fallback(depth) if new is None else new
        if not self.adaptive and depth not in self.traced:
            self.traced.append(depth)
        self._last = (step, depth)
        return depth

    def summary(self):
        """A few lines: what runs, what was merged, measured times."""
        lines = [f"freeze depths: {self.num_depths} scheduled, adaptive={self.adaptive}"]
        merged = {d: a for d, a in enumerate(self.alias) if a != d}
        if merged:
            lines.append(f"  same variables as a shallower depth (shared): {merged}")
        for d in self.traced:
            t, c = self.step_time(d), self.trace_cost(d)
            timing = "" if t is None else f": step {t * 1e3:.1f} ms, trace {c:.2f} s"
            lines.append(f"  depth {d} traced{timing}{' (dropped: no saving)' if d in self.dropped else ''}")
        if self.declined:
            lines.append(f"  run as a shallower depth (not worth a trace of their own): {sorted(self.declined)}")
        return "\n".join(lines)
