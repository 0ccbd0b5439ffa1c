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
   first 1 + TIMED_CALLS calls measure the full step time `t0` and the
   cost of a trace (and rule 6 is checked) before any other depth runs.
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
   the bench CNN), capped by any deeper depth's measured saving. The trace
   cost is the median of those measured so far.
4. A traced depth whose measured step saves less than 2% of `t0` is
   dropped.
5. A depth that is not traced (or dropped) runs as the deepest kept depth
   shallower than it, which trains a superset of its variables: the step
   then updates more variables than the schedule asked for, never fewer.
6. Freezing trades accuracy for time, so it must buy enough time to be
   worth it. Whenever a depth's measurement completes (depth 0's first),
   the planner computes the best plan for the rest of the run: the set of
   depths to trace that saves the most seconds net of their traces
   (`best_plan_saving`; a depth's saving is its measurement once all its
   timed calls are in, else the prior, capped by the measured saving of
   any deeper depth). If that is below
   `min_run_saving` of the remaining run's full-step time, freezing is
   switched off: every later step runs depth 0 and `off_reason` says why
   (BoostModel warns `NoEffectWarning`). It stays off for the planner's
   life (until the model is compiled again). On the bench's realistic
   ResNet-20 (TF, 2 vCPU) freezing saved about 1.5% net and cost up to 0.6
   point of accuracy; see docs/methods/grad_freeze.md.

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


def best_plan_saving(uses, saving, kept, candidates, trace_cost):
    """The most seconds a set of traced depths saves over the rest of a run.

    Each requested depth `d` runs as the deepest depth of the plan at or
    shallower than `d` (rule 5), so a plan is a set of depths: depth 0 and
    every `kept` depth (already traced, free), plus any of `candidates`,
    each costing `trace_cost`. Dynamic programming over the depths in
    order: O(n^3) for n depths (a few dozen at most).

    Args:
        uses: dict, requested depth -> remaining calls.
        saving: dict, depth -> seconds saved per call against depth 0
            (for every depth in `kept` and `candidates`).
        kept: depths in the plan already (no cost).
        candidates: depths that may be traced.
        trace_cost: seconds one more trace costs.

    Returns:
        `(seconds, plan)`: the net seconds saved and the sorted plan.

    Example:

    ```python
    best_plan_saving({0: 70, 1: 20, 2: 10}, {1: 0.01, 2: 0.02},
                     kept=set(), candidates={1, 2}, trace_cost=0.35)
    # (0.0, [0]): no depth repays a 0.35 s trace
    ```
    """
    kept = set(kept)
    points = sorted({0} | kept | set(candidates))

    def segment(depth, stop):  # calls served by `depth` until the next planned depth
        per_call = 0.0 if depth == 0 else saving[depth]
        return per_call * sum(n for d, n in uses.items() if depth <= d < stop)

    best = {}  # depth -> (net seconds from it on, plan from it on)
    for i in range(len(points) - 1, -1, -1):
        depth = points[i]
        # The next planned depth may skip candidates but not a kept depth.
        later = points[i + 1:]
        options = [] if kept & set(later) else [(segment(depth, float("inf")), [depth])]
        for nxt in later:
            cost = 0.0 if nxt in kept else trace_cost
            value, plan = best[nxt]
            options.append((segment(depth, nxt) + value - cost, [depth] + plan))
            if nxt in kept:
                break
        # On a tie the smaller plan wins: no trace for nothing.
        best[depth] = max(options, key=lambda option: (option[0], -len(option[1])))
    return best[0]


class DepthPlanner:
    """Maps each requested freeze depth to the depth whose function runs.

    Args:
        groups: per depth, the indices of the variables it trains.
        adaptive: apply the whole rule (True) or only the sharing of
            identical depths (False).
        min_run_saving: rule 6's threshold, a fraction of the remaining
            run's full-step time in [0, 1); 0 keeps freezing whenever any
            depth pays for its trace.
        calls_per_step: calls per schedule step (the accumulation window):
            timings are per call, the schedule counts steps.

    Example:

    ```python
    planner = DepthPlanner([[0, 1, 2], [1, 2], [2]], adaptive=True, min_run_saving=0.05)
    planner.set_schedule([0, 1, 0, 2], total_steps=300)
    depth = planner.choose(step=0)        # 0
    planner.record(depth, seconds=1.5)    # the first call traces
    ```
    """

    def __init__(self, groups, adaptive=True, min_run_saving=0.0, calls_per_step=1):
        groups = [frozenset(g) for g in groups]
        self.num_depths = len(groups)
        self.adaptive = bool(adaptive)
        if not 0.0 <= min_run_saving < 1.0:
            raise ValueError(f"min_run_saving must be in [0, 1), got {min_run_saving!r}.")
        self.min_run_saving = float(min_run_saving)
        self.calls_per_step = int(calls_per_step)
        self.off_reason = None    # rule 6: why freezing was switched off
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
        return self.adaptive and not self._timed(depth)

    def record(self, depth, seconds):
        """Records the wall time of one (synchronised) call of `depth`."""
        calls = self._calls.setdefault(depth, [])
        calls.append(float(seconds))
        self._measurements += 1
        if depth not in self.traced:
            self.traced.append(depth)
        t0 = self.step_time(0)
        if t0 is None or len(calls) != 1 + TIMED_CALLS:
            return
        if depth != 0 and t0 - self.step_time(depth) < MIN_SAVING * t0:
            self.dropped.add(depth)
        if self.adaptive and self.min_run_saving > 0 and self.off_reason is None:
            self._check_worth_freezing(step=self._last[0] or 0)

    def step_time(self, depth):
        """Fastest steady-state call of `depth` in seconds once measured, else None."""
        calls = self._calls.get(depth, [])
        return min(calls[1:]) if len(calls) > 1 else None

    def _trace_cost_estimate(self):
        """The cost of one more trace: the median of those measured, or None."""
        costs = [c for c in map(self.trace_cost, self.traced) if c is not None]
        return statistics.median(costs) if costs else None

    def trace_cost(self, depth):
        """First call minus the steady step time of `depth`, once measured."""
        steady = self.step_time(depth)
        return None if steady is None else max(0.0, self._calls[depth][0] - steady)

    # --- decisions ---------------------------------------------------------

    def _uses(self, depth, start):
        """Calls that request `depth` (after aliasing) in schedule steps
        [start, total); with an unknown length, per schedule cycle."""
        if self.total_steps is None:
            return self.calls_per_step * int(self._cumulative[depth][-1])
        length, cumulative = len(self._table), self._cumulative[depth]

        def upto(stop):  # uses in [0, stop)
            cycles, rest = divmod(stop, length)
            return cycles * cumulative[-1] + cumulative[rest]

        steps = max(0, upto(self.total_steps) - upto(min(start, self.total_steps)))
        return self.calls_per_step * steps

    def _saving(self, depth, settled=False):
        """Seconds saved per call of `depth`: measured (with `settled`, only
        once all its timed calls are in), else the prior capped by the
        measured saving of any deeper depth."""
        t0 = self.step_time(0)
        measured = self.step_time(depth)
        if measured is not None and (self._timed(depth) or not settled):
            return t0 - measured
        prior = PRIOR_DEEPEST_SAVING * t0 * depth / max(1, self.num_depths - 1)
        # A shallower depth trains a superset of a deeper one's variables,
        # so it cannot save more than a deeper depth was measured to.
        deeper = [t0 - self.step_time(e) for e in self.traced if e > depth and self._timed(e)]
        return min([prior] + deeper)

    def _timed(self, depth):
        """Whether all of `depth`'s timed calls are in."""
        return len(self._calls.get(depth, ())) >= 1 + TIMED_CALLS

    def _kept(self):
        return [d for d in self.traced if d not in self.dropped]

    def _fallback(self, depth):
        """The deepest kept depth at or shallower than `depth`."""
        return max((d for d in self._kept() if d <= depth), default=0)

    def _gain(self, candidate, step):
        """Expected seconds saved by tracing `candidate` over the rest of the
        run (with an unknown length, per schedule cycle)."""
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
        cost = self._trace_cost_estimate()
        fallback = self._fallback(requested)
        candidates = [e for e in range(fallback + 1, requested + 1)
                      if self.alias[e] == e and e not in self.traced]
        gains = {e: self._gain(e, step) for e in candidates}
        best = max(gains, key=gains.get, default=None)
        # A run of unknown length repays any trace that saves time at all.
        threshold = 0.0 if self.total_steps is None else cost
        return best if best is not None and gains[best] > threshold else None

    def expected_run_saving(self, step):
        """Rule 6: `(fraction, plan)`, the best plan's net saving as a
        fraction of the full-step time of schedule steps `[step, end)`, or
        None before depth 0 is measured. With an unknown run length the
        fraction is per step, traces free (a long run repays them)."""
        t0 = self.step_time(0)
        if t0 is None:
            return None
        depths = sorted(set(self.alias))
        uses = {d: float(self._uses(d, step)) for d in depths}
        if self.total_steps is None:
            steps, cost = len(self._table), 0.0
        else:
            steps, cost = max(1, self.total_steps - step), self._trace_cost_estimate()
        kept = set(self._kept())
        candidates = {d for d in depths if d not in self.traced}
        # A depth still being timed counts at its prior, not at a partial
        # measurement that one slowed call could make look worthless.
        saving = {d: self._saving(d, settled=True) for d in kept | candidates}
        seconds, plan = best_plan_saving(uses, saving, kept, candidates, cost)
        return seconds / (steps * self.calls_per_step * t0), plan

    def _check_worth_freezing(self, step):
        expected = self.expected_run_saving(step)
        if expected is None or expected[0] >= self.min_run_saving:
            return
        fraction, plan = expected
        if self.total_steps is None:
            span = "of every step of a run of unknown length"
        else:
            span = f"of the time of the {max(0, self.total_steps - step):,} steps left"
        self.off_reason = (
            f"the best plan (depths {plan}) saves an expected {fraction:.1%} {span} "
            f"(full step {self.step_time(0) * 1e3:.1f} ms, a trace "
            f"{self._trace_cost_estimate():.2f} s), below min_run_saving={self.min_run_saving:g}"
        )

    def choose(self, step, requested=None):
        """The depth to run at schedule step `step` (requested: the schedule's).

        Within one schedule step (an accumulation window) the answer is
        fixed, so every micro-step of a window trains the same variables.
        """
        if self._last[0] == step:
            return self._last[1]
        requested = int(self._table[step % len(self._table)] if requested is None else requested)
        depth = 0 if self.off_reason is not None else self.alias[requested]
        if self.adaptive and not self._timed(0):
            depth = 0  # rule 2: depth 0 runs until timed (t0, a trace's cost, rule 6)
        elif self.adaptive and depth != 0 and (depth not in self.traced or depth in self.dropped):
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
        if self.off_reason is not None:
            lines.append(f"  switched off (every later step trains everything): {self.off_reason}")
        return "\n".join(lines)
