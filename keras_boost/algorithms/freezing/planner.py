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
   first 1 + TIMED_CALLS calls measure the full step time `t0` (their
   median) and the cost of a trace (and rule 6 is checked) before any
   other depth runs.
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
4. A depth is measured against the full step in pairs: each of its
   TIMED_CALLS calls after the first (tracing) one is divided by the
   latest full step, timed alongside it (depth 0 stays timed while another
   depth is), and its saving is `1 - median` of these ratios. Machine load
   slows both calls of a pair alike, so it cancels in the ratio, and the
   median ignores a pair that one slowed call spoiled. A depth whose saving
   does not beat the margin MIN_SAVING is dropped.
5. A depth that is not traced (or dropped) runs as the deepest kept depth
   shallower than it, which trains a superset of its variables: the step
   then updates more variables than the schedule asked for, never fewer.
6. Freezing trades accuracy for time, so it must buy enough time to be
   worth it. Whenever a depth's measurement completes (depth 0's first),
   the planner computes the best plan for the rest of the run: the set of
   depths to trace that saves the most seconds net of their traces
   (`best_plan_saving`; a depth's saving is its measurement once all its
   timed calls are in, else the prior, capped by the measured saving of
   any deeper depth). Here a measured depth saves the lower quartile of
   its paired savings, not their median: on a loaded machine, where the
   pairs spread, a plan near the threshold is switched off every time
   instead of kept or dropped by chance. If that is below
   `min_run_saving` of the remaining run's full-step time, freezing is
   switched off: every later step runs depth 0 and `off_reason` says why.
   It stays off for the planner's life (until the model is compiled
   again). On the bench's realistic ResNet-20 (TF, 2 vCPU) freezing saved
   about 1.5% net and cost up to 0.6 point of accuracy; see
   docs/methods/grad_freeze.md.

The decisions are a function of the measurements, so they are kept with
them: `state()` returns every measurement (a depth still being timed
included) and the switch-off, and a planner built with `state=` continues
from exactly there: it decides as this one did without timing again, and
times only what this one had left to time (`FreezeOptimizer` saves it in
its config, so a reloaded or resumed model repeats the decisions; resuming
after the timing is over is exact whatever the new run's timings).
`decision()` says what runs, as a `FreezeDecision`.

Non-adaptive mode (an explicit `param_groups`, MindSpore's meaning) applies
rule 1 only: every depth runs as scheduled. Pinned depths (`depths=`, the
config's `grad_freeze.depths`) run every request as the deepest pinned
depth at or above it, with no timing.
"""

import dataclasses
import statistics

import numpy as np

__all__ = [
    "best_plan_saving",
    "DepthPlanner",
    "FreezeDecision",
    "MIN_SAVING",
    "PRIOR_DEEPEST_SAVING",
    "TIMED_CALLS",
]

# Paired calls per depth after its first (tracing) call; for depth 0, the
# calls after its first that measure t0 before any other depth runs.
TIMED_CALLS = 5
# The margin a depth must beat: it is kept when the median of its paired
# ratios to the full step is below 1 - MIN_SAVING (rule 6's default bar for a
# whole run: a depth saving less is not worth its trace and its accuracy).
MIN_SAVING = 0.05
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


@dataclasses.dataclass(frozen=True)
class FreezeDecision:
    """What gradient freezing runs on a model, and why.

    Attributes:
        depths: the depths that run, sorted: each scheduled depth runs as the
            deepest of them at or above it. `(0,)` means freezing is off.
        source: `"measured"` (the depth planner timed the steps),
            `"pinned"` (`grad_freeze.depths` in the config) or `"schedule"`
            (an explicit `param_groups`: MindSpore's schedule, every depth).
        off_reason: why the planner switched freezing off, else None.
        expected_saving: the measured plan's expected saving (each measured
            depth at its lower-quartile saving, as rule 6 judges), as a
            fraction of the full-step time of the steps left when it was
            last judged (None unless measured).

    Example:

    ```python
    model.fit(x, y, epochs=5)
    print(model.freeze_decision)           # depths [0, 3, 6] (measured ...)
    # The same depths in another run, without timing:
    config = {"grad_freeze": {"depths": list(model.freeze_decision.depths)}}
    ```
    """

    depths: tuple
    source: str
    off_reason: str = None
    expected_saving: float = None

    def __str__(self):
        if self.off_reason is not None:
            return f"off, because {self.off_reason}"
        saving = "" if self.expected_saving is None else f", expected to save {self.expected_saving:.1%}"
        return f"depths {list(self.depths)} ({self.source}{saving})"


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
        depths: None, or the depths to run (pinned; no timing): a request
            runs as the deepest of them at or above it.
        state: a `state()` of an earlier planner for the same groups: its
            measurements and switch-off are taken over, not timed again.

    Example:

    ```python
    planner = DepthPlanner([[0, 1, 2], [1, 2], [2]], adaptive=True, min_run_saving=0.05)
    planner.set_schedule([0, 1, 0, 2], total_steps=300)
    depth = planner.choose(step=0)        # 0
    planner.record(depth, seconds=1.5)    # the first call traces
    ```
    """

    def __init__(self, groups, adaptive=True, min_run_saving=0.0, calls_per_step=1, depths=None,
                 state=None):
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
        self.pinned = None if depths is None else self._check_depths(depths, "grad_freeze.depths")
        self._table = None
        self.total_steps = None
        self.traced = []          # depths with a function, in tracing order
        self.dropped = set()      # traced, but not beating the MIN_SAVING margin
        self.declined = set()     # judged not worth tracing (for the report)
        self._calls = {}          # depth -> list of measured call seconds
        self._ratios = {}         # depth -> its calls / the latest full step's
        self._measurements = 0    # record() calls so far
        self._declined_at = {}    # requested depth -> _measurements when declined
        self._expected_saving = None  # rule 6's latest fraction
        self._last = (None, None)  # (schedule step, chosen depth)
        if state:
            self._restore(state)

    def _check_depths(self, depths, where):
        bad = [d for d in depths if not 0 <= int(d) < self.num_depths]
        if bad:
            raise ValueError(
                f"{where} lists depth(s) {bad}, but this model has {self.num_depths} "
                f"freeze depth(s), 0..{self.num_depths - 1}: give depths in that range (or 'auto')."
            )
        return sorted({self.alias[int(d)] for d in depths} | {0})

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
        """Whether the next call of `depth` should be timed (with a sync).

        Depth 0 stays timed while another depth is being timed: each of that
        depth's calls is paired with the latest full step (rule 4).
        """
        if not self.adaptive or self.pinned is not None:
            return False
        if depth == 0:
            return not self._timed(0) or any(not self._timed(d) for d in self.traced)
        return not self._timed(depth)

    def record(self, depth, seconds):
        """Records the wall time of one (synchronised) call of `depth`."""
        calls = self._calls.setdefault(depth, [])
        full = self._calls.get(0, [])
        if depth != 0 and calls and len(full) > 1:  # a steady call, paired with the latest full step
            self._ratios.setdefault(depth, []).append(float(seconds) / full[-1])
        calls.append(float(seconds))
        self._measurements += 1
        if depth not in self.traced:
            self.traced.append(depth)
        done = len(calls) if depth == 0 else len(self._ratios.get(depth, ()))
        if done != (1 + TIMED_CALLS if depth == 0 else TIMED_CALLS):
            return
        self._judge(depth)
        if self.adaptive and self.off_reason is None:
            self._check_worth_freezing(step=self._last[0] or 0)

    def _judge(self, depth):
        """Rule 4, once `depth`'s paired calls are in."""
        if depth != 0 and self.saving_fraction(depth) < MIN_SAVING:
            self.dropped.add(depth)

    def step_time(self, depth):
        """Seconds per call of `depth` once measured, else None: for depth 0
        the median of its calls after the first, for a deeper depth t0 times
        the median of its paired ratios."""
        t0 = statistics.median(self._calls[0][1:]) if len(self._calls.get(0, ())) > 1 else None
        if depth == 0 or t0 is None:
            return t0
        ratios = self._ratios.get(depth)
        return t0 * statistics.median(ratios) if ratios else None

    def saving_fraction(self, depth, cautious=False):
        """`1 - median` of `depth`'s paired ratios to the full step, or None.

        With `cautious`, `1 -` their upper quartile (the saving's lower
        quartile): what rule 6 judges, so that timings spread by machine
        load count against freezing instead of deciding it by chance.
        """
        ratios = self._ratios.get(depth)
        if not ratios:
            return None
        if cautious and len(ratios) > 1:
            return 1.0 - statistics.quantiles(ratios, n=4, method="inclusive")[2]
        return 1.0 - statistics.median(ratios)

    def _trace_cost_estimate(self):
        """The cost of one more trace: the median of those measured, or None."""
        costs = [c for c in map(self.trace_cost, self.traced) if c is not None]
        return statistics.median(costs) if costs else None

    def trace_cost(self, depth):
        """First call minus the steady step time of `depth`, once measured."""
        steady = self.step_time(depth)
        return None if steady is None else max(0.0, self._calls[depth][0] - steady)

    # --- what was decided, kept ---------------------------------------------

    def state(self):
        """Every measurement so far and the switch-off, JSON-ready (None
        before the first, and when nothing is measured: pinned or
        non-adaptive). A depth still being timed is kept with its calls so
        far: a planner built from this state takes its timing up where this
        one left it, so resuming a run repeats every decision made before."""
        if not self.adaptive or self.pinned is not None or not self._calls:
            return None
        return {
            "traced": list(self.traced),
            "calls": {str(d): list(self._calls[d]) for d in self.traced},
            "ratios": {str(d): list(r) for d, r in self._ratios.items()},
            "declined": sorted(self.declined),
            "off_reason": self.off_reason,
            "expected_saving": self._expected_saving,
        }

    def _restore(self, state):
        calls = {int(d): [float(c) for c in v] for d, v in state["calls"].items()}
        self._check_depths(calls, "the saved planner state")
        self._calls = calls
        self._ratios = {int(d): [float(r) for r in v] for d, v in state.get("ratios", {}).items()}
        # In tracing order; a state saved before "traced" was kept holds
        # completed measurements only, whose order no decision reads.
        self.traced = [int(d) for d in state.get("traced", sorted(calls))]
        self.declined = {int(d) for d in state.get("declined", ())}
        self._measurements = sum(len(v) for v in calls.values())
        for depth in self.traced:
            if self._timed(depth):
                self._judge(depth)
        self.off_reason = state.get("off_reason")
        self._expected_saving = state.get("expected_saving")

    def has_measured(self, depth):
        """Whether a call of `depth` was recorded (here or in the state this
        planner was built from)."""
        return bool(self._calls.get(depth))

    def decision(self):
        """A `FreezeDecision`: the depths that run and why; None while depth
        0 is still being measured."""
        if self.pinned is not None:
            return FreezeDecision(tuple(self.pinned), "pinned")
        if not self.adaptive:
            return FreezeDecision(tuple(sorted(set(self.alias))), "schedule")
        if not self._timed(0):
            return None
        depths = (0,) if self.off_reason is not None else tuple(sorted({0, *self._kept()}))
        return FreezeDecision(depths, "measured", self.off_reason, self._expected_saving)

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
        """Seconds saved per call of `depth`: measured, else the prior capped
        by the measured saving of any deeper depth. With `settled` (rule 6)
        a measurement counts only once all its paired calls are in, at its
        cautious (lower-quartile) saving."""
        t0 = self.step_time(0)
        measured = self.saving_fraction(depth, cautious=settled)
        if measured is not None and (self._timed(depth) or not settled):
            return t0 * measured
        prior = PRIOR_DEEPEST_SAVING * t0 * depth / max(1, self.num_depths - 1)
        # A shallower depth trains a superset of a deeper one's variables,
        # so it cannot save more than a deeper depth was measured to.
        deeper = [t0 * self.saving_fraction(e, cautious=settled) for e in self.traced
                  if e > depth and self._timed(e)]
        return min([prior] + deeper)

    def _timed(self, depth):
        """Whether all of `depth`'s timed (for depth > 0: paired) calls are in."""
        if depth == 0:
            return len(self._calls.get(0, ())) >= 1 + TIMED_CALLS
        return len(self._ratios.get(depth, ())) >= TIMED_CALLS

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
        # A depth not expected to beat the margin would be dropped once timed.
        margin = MIN_SAVING * self.step_time(0)
        candidates = [e for e in range(fallback + 1, requested + 1)
                      if self.alias[e] == e and e not in self.traced and self._saving(e) >= margin]
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
        if expected is None:
            return
        self._expected_saving = expected[0]
        if expected[0] >= self.min_run_saving:
            return
        fraction, plan = expected
        if self.total_steps is None:
            span = "of every step of a run of unknown length"
        else:
            span = f"of the time of the {max(0, self.total_steps - step):,} steps left"
        self.off_reason = (
            # Negative where kept depths (in every plan) save less at their
            # lower quartile than nothing: they would cost time.
            f"the best plan (depths {plan}) {'saves' if fraction >= 0 else 'costs'} an expected "
            f"{abs(fraction):.1%} {span} "
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
        if self.pinned is not None:
            depth = max(d for d in self.pinned if d <= depth)
        elif self.adaptive and not self._timed(0):
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
        if (self.pinned is not None or not self.adaptive) and depth not in self.traced:
            self.traced.append(depth)
        self._last = (step, depth)
        return depth

    def summary(self):
        """A few lines: what runs, what was merged, measured times."""
        pinned = "" if self.pinned is None else f", pinned to {self.pinned}"
        lines = [f"freeze depths: {self.num_depths} scheduled, adaptive={self.adaptive}{pinned}"]
        merged = {d: a for d, a in enumerate(self.alias) if a != d}
        if merged:
            lines.append(f"  same variables as a shallower depth (shared): {merged}")
        for d in self.traced:
            t, c = self.step_time(d), self.trace_cost(d)
            timing = "" if t is None else f": step {t * 1e3:.1f} ms, trace {c:.2f} s"
            dropped = f" (dropped: saves under {MIN_SAVING:.0%})" if d in self.dropped else ""
            lines.append(f"  depth {d} traced{timing}{dropped}")
        if self.declined:
            lines.append(f"  run as a shallower depth (not worth a trace of their own): {sorted(self.declined)}")
        if self.off_reason is not None:
            lines.append(f"  switched off (every later step trains everything): {self.off_reason}")
        return "\n".join(lines)
