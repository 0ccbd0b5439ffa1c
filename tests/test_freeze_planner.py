"""The freeze depth planner: its rule on fake timings, and its use in BoostModel."""

import itertools
import json
import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import regression_data
from keras_boost.algorithms.freezing import TIMED_CALLS
from keras_boost.algorithms.freezing import DepthPlanner
from keras_boost.algorithms.freezing import FreezeDecision
from keras_boost.algorithms.freezing import FreezingStep
from keras_boost.algorithms.freezing import best_plan_saving

SUFFIXES = [[0, 1, 2, 3], [1, 2, 3], [2, 3], [3]]


def run(planner, steps, step_time, trace_time=2.0, load=lambda step: 1.0):
    """Drives the planner like BoostModel's dispatch; returns the depths run.

    A fake clock: a call of depth d at `step` takes `step_time[d] * load(step)`
    seconds, plus `trace_time` on its first call.
    """
    ran = []
    for step in range(steps):
        depth = planner.choose(step)
        if planner.needs_timing(depth):
            first = depth not in planner.traced
            planner.record(depth, step_time[depth] * load(step) + (trace_time if first else 0.0))
        ran.append(depth)
    return ran


def test_identical_groups_share_one_depth():
    planner = DepthPlanner([[0, 1], [0, 1], [1], [1]], adaptive=False)
    assert planner.alias == [0, 0, 2, 2]
    planner.set_schedule([0, 1, 2, 3])
    assert [planner.choose(s) for s in range(4)] == [0, 0, 2, 2]


def test_non_adaptive_runs_every_depth_as_scheduled():
    planner = DepthPlanner(SUFFIXES, adaptive=False)
    table = [0, 3, 1, 2, 0, 0]
    planner.set_schedule(table, total_steps=6)
    assert run(planner, 6, {d: 0.01 for d in range(4)}) == table
    assert not planner.needs_timing(0)  # no syncs in non-adaptive mode


def test_short_run_traces_only_the_full_step():
    # 300 steps of 20 ms: no depth can repay a 2 s trace (at most ~0.6 x 20 ms
    # saved on each of its < 300 uses), so every frozen step runs as depth 0.
    planner = DepthPlanner(SUFFIXES, adaptive=True)
    table = [0, 1, 0, 2, 0, 3]
    planner.set_schedule(table, total_steps=300)
    ran = run(planner, 300, {0: 0.02, 1: 0.015, 2: 0.012, 3: 0.01})
    assert set(ran) == {0}
    assert planner.traced == [0] and planner.declined == {1, 2, 3}


def test_long_run_traces_depths_that_repay_their_trace():
    planner = DepthPlanner(SUFFIXES, adaptive=True)
    planner.set_schedule([0, 1, 0, 2, 0, 3], total_steps=100_000)
    ran = run(planner, 60, {0: 0.02, 1: 0.015, 2: 0.012, 3: 0.01})
    # Depth 0 runs first until timed (t0 and the trace cost), then the
    # frozen depths run as scheduled.
    assert ran[:1 + TIMED_CALLS] == [0] * (1 + TIMED_CALLS)
    assert ran[-6:] == [0, 1, 0, 2, 0, 3]
    assert sorted(planner.traced) == [0, 1, 2, 3]
    assert planner.step_time(3) == pytest.approx(0.01)
    assert planner.trace_cost(0) == pytest.approx(2.0)


def test_a_depth_that_saves_nothing_is_dropped_for_the_deepest_kept_shallower_one():
    planner = DepthPlanner(SUFFIXES, adaptive=True)
    planner.set_schedule([0, 1, 0, 2, 0, 3], total_steps=100_000)
    # Depth 2 is measured no faster than the full step.
    ran = run(planner, 120, {0: 0.02, 1: 0.015, 2: 0.0199, 3: 0.01})
    assert planner.dropped == {2}
    assert ran[-6:] == [0, 1, 0, 1, 0, 3]  # depth 2 runs as depth 1 (a superset)
    # A frozen depth is timed on its first 1 + TIMED_CALLS calls only; the
    # full step while another depth is timed (its pairs' reference).
    assert all(len(planner._calls[d]) == 1 + TIMED_CALLS for d in (1, 2, 3))
    assert planner.needs_timing(0) is False and len(planner._calls[0]) < 60


def test_machine_load_cancels_in_paired_timings():
    # The machine gets 3x slower once the full step is measured (another job
    # starts). Depth 3 really takes half the full step: judged against the
    # unloaded full step, it would look 50% slower and be dropped, and
    # freezing switched off; paired with full steps under the same load,
    # its ratio stays 0.5.
    planner = DepthPlanner(SUFFIXES, adaptive=True, min_run_saving=0.05)
    planner.set_schedule([0, 3], total_steps=100_000)
    ran = run(planner, 60, {0: 0.02, 3: 0.01}, load=lambda step: 1.0 if step < 1 + TIMED_CALLS else 3.0)
    assert planner.saving_fraction(3) == pytest.approx(0.5)
    assert planner.dropped == set() and planner.off_reason is None
    assert ran[-4:] == [0, 3, 0, 3]


def test_a_pair_spoiled_by_one_slowed_call_does_not_flip_a_depth():
    # Depth 2 saves 40%; two of its five pairs hit a full step slowed 4x
    # (ratio 0.15) or a slowed frozen step (ratio 2.4): the median is 0.6.
    planner = DepthPlanner(SUFFIXES, adaptive=True)
    planner.set_schedule([0, 1, 0, 2, 0, 3], total_steps=100_000)
    for seconds in [2.0] + [0.02] * TIMED_CALLS:
        planner.record(0, seconds)
    planner.record(2, 2.0)  # its trace
    for full, frozen in [(0.02, 0.012), (0.08, 0.012), (0.02, 0.012), (0.02, 0.048), (0.02, 0.012)]:
        planner.record(0, full)
        planner.record(2, frozen)
    assert planner.saving_fraction(2) == pytest.approx(0.4)
    assert planner.dropped == set()
    assert planner.step_time(2) == pytest.approx(0.6 * planner.step_time(0))


@pytest.mark.parametrize("ratio, kept", [(0.96, False), (0.94, True)])
def test_a_depth_must_beat_the_margin(ratio, kept):
    planner = DepthPlanner(SUFFIXES, adaptive=True)
    planner.set_schedule([0, 3], total_steps=100_000)
    run(planner, 40, {0: 0.02, 1: 0.02, 2: 0.02, 3: 0.02 * ratio})
    # Once depth 3 misses the margin, no shallower depth is tried (it trains more).
    assert (3 not in planner.dropped) == kept
    assert planner.decision().depths == ((0, 3) if kept else (0,))


def test_the_state_repeats_the_decisions_without_timing():
    # Measured under load, then saved: a planner built from the state makes
    # the same choice at every later step, and times nothing.
    def planner_for(state=None):
        planner = DepthPlanner(SUFFIXES, adaptive=True, min_run_saving=0.05, state=state)
        planner.set_schedule([0, 1, 0, 2, 0, 3], total_steps=3000)
        return planner

    measured = planner_for()
    run(measured, 100, {0: 0.02, 1: 0.0195, 2: 0.012, 3: 0.01}, load=lambda step: 1 + step % 3)
    state = measured.state()
    assert json.loads(json.dumps(state)) == state  # saved in the optimizer's config
    restored = planner_for(state)
    assert restored.decision() == measured.decision()
    assert [restored.choose(s) for s in range(100, 400)] == [measured.choose(s) for s in range(100, 400)]
    assert not any(restored.needs_timing(d) for d in range(4))


def test_a_depth_still_being_timed_is_saved_and_its_timing_taken_up():
    def planner_for(state=None):
        planner = DepthPlanner(SUFFIXES, adaptive=True, state=state)
        planner.set_schedule([0, 3, 0, 1], total_steps=100_000)
        return planner

    planner = planner_for()
    assert planner.state() is None  # nothing measured yet
    times = {0: 0.02, 1: 0.019, 3: 0.01}
    run(planner, 1 + TIMED_CALLS + 4, times)
    assert 3 in planner.traced and planner.needs_timing(3)  # saved mid-way through depth 3's calls
    state = json.loads(json.dumps(planner.state()))
    assert {"0", "3"} <= set(state["calls"])
    restored = planner_for(state)
    # From here on, the same timings give the same decisions, step by step.
    later = range(1 + TIMED_CALLS + 4, 200)
    assert [run_step(restored, s, times) for s in later] == [run_step(planner, s, times) for s in later]
    assert restored.state() == planner.state() and restored.decision() == planner.decision()


def run_step(planner, step, step_time, trace_time=2.0):
    """One step of `run`; returns the depth run."""
    depth = planner.choose(step)
    if planner.needs_timing(depth):
        planner.record(depth, step_time[depth] + (0.0 if planner.has_measured(depth) else trace_time))
    return depth


def test_pinned_depths_run_as_given_without_timing():
    planner = DepthPlanner(SUFFIXES, adaptive=True, depths=[2])
    planner.set_schedule([0, 1, 2, 3], total_steps=100)
    assert [planner.choose(s) for s in range(4)] == [0, 0, 2, 2]
    assert not any(planner.needs_timing(d) for d in range(4))
    assert planner.decision() == FreezeDecision((0, 2), "pinned")
    off = DepthPlanner(SUFFIXES, adaptive=True, depths=[0])
    off.set_schedule([0, 3], total_steps=100)
    assert [off.choose(s) for s in range(4)] == [0, 0, 0, 0]
    with pytest.raises(ValueError, match=r"lists depth\(s\) \[4\], but this model has 4 freeze depth\(s\), 0..3"):
        DepthPlanner(SUFFIXES, depths=[0, 4])


def test_one_answer_per_schedule_step():
    # With accumulation every micro-step of a window asks for the same step.
    planner = DepthPlanner(SUFFIXES, adaptive=True)
    planner.set_schedule([0, 3], total_steps=100_000)
    assert planner.choose(5) == planner.choose(5)


def test_unknown_length_counts_as_long():
    planner = DepthPlanner(SUFFIXES, adaptive=True)
    planner.set_schedule([0, 0, 3], total_steps=None)
    assert 3 in run(planner, 30, {0: 0.02, 1: 0.015, 2: 0.012, 3: 0.01})
    assert "depth 3 traced" in planner.summary()


# --- rule 6: is freezing worth its accuracy cost? ------------------------------


def brute_force_plan_saving(uses, saving, kept, candidates, cost):
    """Every subset of the candidates, each request run as rule 5 says."""
    best = -np.inf
    for size in range(len(candidates) + 1):
        for extra in itertools.combinations(sorted(candidates), size):
            plan = {0} | set(kept) | set(extra)
            runs_as = {d: max(e for e in plan if e <= d) for d in uses}
            seconds = sum(n * saving.get(runs_as[d], 0.0) for d, n in uses.items())
            best = max(best, seconds - cost * size)
    return best


@pytest.mark.parametrize("seed", range(20))
def test_best_plan_saving_is_the_best_subset(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 8))
    uses = {d: float(rng.integers(0, 200)) for d in range(n)}
    saving = {d: float(rng.uniform(-0.002, 0.02)) for d in range(1, n)}
    kept = {d for d in range(1, n) if rng.random() < 0.2}
    candidates = {d for d in range(1, n) if d not in kept and rng.random() < 0.8}
    cost = float(rng.uniform(0.0, 2.0))
    seconds, plan = best_plan_saving(uses, saving, kept, candidates, cost)
    assert seconds == pytest.approx(brute_force_plan_saving(uses, saving, kept, candidates, cost))
    assert plan[0] == 0 and kept <= set(plan) <= {0} | kept | candidates
    # The plan returned is one that saves that much.
    extra = set(plan) - kept - {0}
    assert seconds == pytest.approx(brute_force_plan_saving(uses, saving, kept | extra, set(), cost)
                                    - cost * len(extra))


def test_best_plan_saving_example():
    assert best_plan_saving({0: 70, 1: 20, 2: 10}, {1: 0.01, 2: 0.02}, set(), {1, 2}, 0.35) == (0.0, [0])
    seconds, plan = best_plan_saving({0: 70, 1: 20, 2: 10}, {1: 0.01, 2: 0.02}, set(), {1, 2}, 0.15)
    assert plan == [0, 1] and seconds == pytest.approx(30 * 0.01 - 0.15)  # [0, 1, 2]: 0.1


def test_freezing_that_saves_too_little_is_switched_off():
    # 2,000 steps of 20 ms, half of them depth 3 saving 1.2 ms at best (prior
    # 0.6 * 20 ms * 3/3 = 12 ms is optimistic): with a 2 s trace the best plan
    # saves (1,000 * 12 ms - 2 s) / 40 s = 25%, so depth 3 is traced; once
    # measured, the rest saves ~1,000 * 1.2 ms / 40 s = 3% < 5%: switched off.
    planner = DepthPlanner(SUFFIXES, adaptive=True, min_run_saving=0.05)
    planner.set_schedule([0, 3], total_steps=2000)
    ran = run(planner, 2000, {0: 0.02, 1: 0.02, 2: 0.02, 3: 0.0188})
    assert planner.traced == [0, 3] and planner.dropped == set()  # 6% saved: beats the margin
    # Depth 3 ran only for its timed calls; everything after them is depth 0.
    assert ran.count(3) == 1 + TIMED_CALLS
    assert set(ran[max(i for i, d in enumerate(ran) if d == 3) + 1:]) == {0}
    assert "below min_run_saving=0.05" in planner.off_reason
    assert "switched off" in planner.summary()


def test_a_short_run_switches_freezing_off_before_any_frozen_step():
    # The planner sees on depth 0's measurement that no plan repays a trace.
    planner = DepthPlanner(SUFFIXES, adaptive=True, min_run_saving=0.05)
    planner.set_schedule([0, 1, 0, 2, 0, 3], total_steps=300)
    assert set(run(planner, 300, {0: 0.02, 1: 0.015, 2: 0.012, 3: 0.01})) == {0}
    fraction, plan = planner.expected_run_saving(1 + TIMED_CALLS)
    assert plan == [0] and fraction == 0.0
    assert planner.off_reason is not None


def test_freezing_that_saves_enough_is_kept():
    planner = DepthPlanner(SUFFIXES, adaptive=True, min_run_saving=0.05)
    planner.set_schedule([0, 1, 0, 2, 0, 3], total_steps=100_000)
    ran = run(planner, 600, {0: 0.02, 1: 0.015, 2: 0.012, 3: 0.01})
    assert planner.off_reason is None and ran[-6:] == [0, 1, 0, 2, 0, 3]
    # Measured: (1/6) * (25% + 40% + 50%) of the full-step time, traces paid.
    fraction, plan = planner.expected_run_saving(600)
    assert plan == [0, 1, 2, 3] and fraction == pytest.approx((0.25 + 0.4 + 0.5) / 6, rel=1e-3)


def test_unknown_length_judges_the_per_step_saving():
    planner = DepthPlanner(SUFFIXES, adaptive=True, min_run_saving=0.18)
    planner.set_schedule([0, 0, 3], total_steps=None)
    run(planner, 30, {0: 0.02, 1: 0.015, 2: 0.012, 3: 0.01})
    # Depth 3 saves half a step on a third of the steps: 1/6 < 0.18 (its
    # prior, 0.6 of a step, gave 0.2 before it was timed).
    assert planner.expected_run_saving(30) == (pytest.approx(1 / 6), [0, 3])
    assert "of every step of a run of unknown length" in planner.off_reason


def test_a_depth_still_being_timed_counts_at_its_prior():
    # One slowed call must not switch freezing off: depth 3's partial timing
    # (one steady call, 3x slower than the full step) is not used yet.
    planner = DepthPlanner(SUFFIXES, adaptive=True, min_run_saving=0.05)
    planner.set_schedule([0, 3], total_steps=2000)
    for seconds in [2.0] + [0.02] * TIMED_CALLS:
        planner.record(planner.choose(0), seconds)
    assert planner.choose(1) == 3
    planner.record(3, 2.0)
    planner.record(3, 0.06)
    fraction, plan = planner.expected_run_saving(1)
    assert plan == [0, 3] and fraction == pytest.approx(0.5 * 0.6 * 0.02 / 0.02, rel=0.01)
    # Once its timed calls are in, the measurement decides: depth 3 saves
    # 0.5% (dropped), and depth 2's prior is capped at that (a shallower
    # depth trains more, so it cannot save more): nothing left to gain.
    for _ in range(TIMED_CALLS - 1):
        planner.record(3, 0.0199)
    assert planner.dropped == {3} and planner.off_reason is not None
    assert planner._saving(2) == pytest.approx(0.0001)


@pytest.mark.parametrize("ratios, kept", [
    ([0.87, 0.88, 0.88, 0.88, 0.89], True),    # quiet: saves 12%, lower quartile 12%
    ([0.80, 0.85, 0.88, 0.97, 1.02], False),   # loaded: the same median, lower quartile 3%
    ([0.70, 0.80, 0.88, 1.10, 1.20], False),   # lower quartile -10%: the kept depth would cost time
])
def test_rule_6_judges_the_lower_quartile_of_a_depths_saving(ratios, kept):
    # Depth 3 runs on half the steps of a long run: the plan saves half of
    # depth 3's saving. Its median (12%) gives 6% >= 5% either way; rule 6
    # keeps freezing only where the timings' lower quartile clears 5% too.
    planner = DepthPlanner(SUFFIXES, adaptive=True, min_run_saving=0.05)
    planner.set_schedule([0, 3], total_steps=100_000)
    for seconds in [2.0] + [0.02] * TIMED_CALLS:
        planner.record(planner.choose(0), seconds)
    assert planner.choose(1) == 3
    planner.record(3, 2.0)  # its trace
    for ratio in ratios:
        planner.record(0, 0.02)   # the full step it is paired with
        planner.record(3, 0.02 * ratio)
    assert planner.saving_fraction(3) == pytest.approx(0.12)
    assert planner.saving_fraction(3, cautious=True) == pytest.approx(1 - sorted(ratios)[3])
    assert planner.dropped == set()  # rule 4 (keep the depth) still reads the median
    assert (planner.off_reason is None) is kept
    fraction, plan = planner.expected_run_saving(12)
    assert plan == [0, 3] and fraction == pytest.approx(0.5 * (1 - sorted(ratios)[3]), rel=1e-3)
    if not kept:
        verb = "saves" if fraction >= 0 else "costs"
        assert f"{verb} an expected {abs(fraction):.1%} of the time" in planner.off_reason


def test_with_accumulation_a_schedule_step_counts_its_calls():
    # 200 schedule steps of 4 micro-steps each, half at depth 3 (saving half
    # of a 20 ms call): 400 calls x 10 ms = 4 s against a 2 s trace, 12.5%
    # of the run. Counted per schedule step (100 x 10 ms) no plan would pay.
    def drive(calls_per_step):
        planner = DepthPlanner(SUFFIXES, adaptive=True, min_run_saving=0.05,
                               calls_per_step=calls_per_step)
        planner.set_schedule([0, 3], total_steps=200)
        ran, seen = [], set()
        for step in range(200):
            for _ in range(4):
                depth = planner.choose(step)
                if planner.needs_timing(depth):
                    planner.record(depth, {0: 0.02, 3: 0.01}.get(depth, 0.02)
                                   + (2.0 if depth not in seen else 0.0))
                    seen.add(depth)
                ran.append(depth)
        return planner, ran

    planner, ran = drive(calls_per_step=4)
    assert planner.off_reason is None and ran[-8:] == [0] * 4 + [3] * 4
    assert planner.expected_run_saving(0) == (pytest.approx(400 * 0.01 / 16.0), [0, 3])  # trace paid
    assert drive(calls_per_step=1)[0].off_reason is not None


def test_rule_6_is_not_applied_to_mindspore_schedules():
    planner = DepthPlanner(SUFFIXES, adaptive=False, min_run_saving=0.5)
    planner.set_schedule([0, 3], total_steps=300)
    assert run(planner, 6, {d: 0.02 for d in range(4)}) == [0, 3] * 3
    assert planner.off_reason is None


@pytest.mark.parametrize("value", [-0.1, 1.0])
def test_min_run_saving_out_of_range(value):
    with pytest.raises(ValueError, match=r"min_run_saving must be in \[0, 1\)"):
        DepthPlanner(SUFFIXES, min_run_saving=value)


# --- in BoostModel --------------------------------------------------------------


def deep_graph():
    init = keras.initializers.GlorotUniform(seed=1)
    inputs = keras.Input((5,))
    h = inputs
    for i in range(4):
        h = keras.layers.Dense(8, activation="relu", kernel_initializer=init, name=f"d{i}")(h)
    return inputs, keras.layers.Dense(3, kernel_initializer=init, name="head")(h)


@pytest.mark.parametrize("adaptive", [False, True])
def test_boost_model_traces_a_depth_only_on_first_use(monkeypatch, adaptive):
    if adaptive and keras.backend.backend() == "torch":
        pytest.skip("torch compiles nothing, so no trace cost declines a depth; "
                    "the rule itself is tested on fake timings above")
    config = {"boost": {"mode": "manual", "less_bn": False},
              "grad_freeze": {"param_groups": 5, "freeze_type": 0, "freeze_p": 0.5,
                              "total_steps": 300, "adaptive_depths": adaptive,
                              "min_run_saving": 0.0}}  # rule 3 alone (rule 6: below)
    model = boost.BoostModel(*deep_graph(), boost_level="O1", boost_config_dict=config)
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    traces = {}
    original = boost.BoostModel.train_step

    def counting(self, *args):
        depth = next(p.depth for p in self._boost_step_parts() if isinstance(p, FreezingStep))
        traces[depth] = traces.get(depth, 0) + 1
        return original(self, *args)

    monkeypatch.setattr(boost.BoostModel, "train_step", counting)
    x, y = regression_data(n=8)
    ran = []
    logger = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: ran.append(int(logs["freeze_depth"])))
    model.fit(x, y, batch_size=1, epochs=3, shuffle=False, verbose=0, callbacks=[logger])
    # Schedule "0000 1234" (zero_cnt = floor(0.5 * 4 / 0.5) = 4), 24 steps.
    if adaptive:
        # 24 steps cannot repay a trace: only the full step is compiled.
        assert set(traces) == {0} and model.freeze_planner.traced == [0]
        assert ran == [0] * 24
    else:
        assert ran == ([0, 0, 0, 0, 1, 2, 3, 4] * 3)
        assert set(traces) == {0, 1, 2, 3, 4}
    if keras.backend.backend() != "torch":  # torch runs the Python step every call
        assert all(count == 1 for count in traces.values())


def simulated_run_seconds(adaptive, table, groups, steps, trace=1.0, t0=0.065, slope=0.05):
    """Total seconds (steps + traces) of a run driven by the planner."""
    planner = DepthPlanner(groups, adaptive=adaptive)
    planner.set_schedule(table, total_steps=steps)
    total, seen = 0.0, set()
    for step in range(steps):
        depth = planner.choose(step)
        seconds = t0 * (1 - slope * depth) + (trace if depth not in seen else 0.0)
        seen.add(depth)
        total += seconds
        if planner.needs_timing(depth):
            planner.record(depth, seconds)
    return total, planner


def test_coarse_depths_are_traced_when_they_serve_deeper_requests():
    # MindSpore's default schedule over 2,000 steps of 65 ms, a 1 s trace and
    # 5% saved per frozen group: no depth repays its trace on its own uses
    # (depth 9: ~13 uses x 29 ms), but a few coarse depths that also serve
    # the deeper requests do.
    n, steps = 10, 2000
    table = boost.GradientFreeze(seed=0).generate_freeze_index_sequence(n, 1, 0.7, steps)
    groups = [list(range(d, n)) for d in range(n)]
    never = steps * 0.065 + 1.0
    adaptive, planner = simulated_run_seconds(True, table, groups, steps)
    every_depth, _ = simulated_run_seconds(False, table, groups, steps)
    assert adaptive < never - 1.0 and adaptive < every_depth - 1.0
    assert 2 <= len(planner.traced) < n
    # A request runs as the deepest kept depth at or above it: never fewer
    # variables trained than the schedule asked for.
    for requested in range(n):
        assert planner.choose(10_000 + requested, requested) <= requested


def rule_6_model(min_run_saving, **grad_freeze):
    config = {"boost": {"mode": "manual", "less_bn": False},
              "grad_freeze": {"param_groups": 5, "freeze_type": 0, "freeze_p": 0.5,
                              "adaptive_depths": True, "min_run_saving": min_run_saving, **grad_freeze}}
    model = boost.BoostModel(*deep_graph(), boost_level="O1", boost_config_dict=config)
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    return model


def fit_logging_depths(model, epochs=3, verbose=0):
    x, y = regression_data(n=8)
    ran = []
    logger = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: ran.append(int(logs["freeze_depth"])))
    model.fit(x, y, batch_size=1, epochs=epochs, shuffle=False, verbose=verbose, callbacks=[logger])
    return ran


@pytest.mark.parametrize("min_run_saving", [0.0, 0.99])
def test_boost_model_reports_switching_freezing_off_at_the_end_of_fit(capsys, min_run_saving):
    # No plan can save 99% of a run's time (the deepest step still runs the
    # head), so 0.99 switches freezing off on every backend; 0 never does.
    # It is said once, in fit's closing line: no warning breaks the progress bar.
    model = rule_6_model(min_run_saving)
    with warnings.catch_warnings():
        warnings.simplefilter("error", boost.NoEffectWarning)
        ran = fit_logging_depths(model, verbose=2)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("keras_boost O1")]
    assert len(lines) == 1 and "freezing in 5 groups" in lines[0]
    if min_run_saving:
        assert "off, because" in lines[0] and "min_run_saving=0.99" in lines[0]
        assert model.freeze_decision.depths == (0,) and model.freeze_planner.off_reason is not None
        # Schedule "0000 1234" per epoch: depth 0 runs alone until timed (6
        # calls), and then rule 6 switches freezing off.
        assert ran == [0] * 24
        assert "steps ran frozen" not in lines[0]  # no step froze anything
    else:
        assert model.freeze_planner.off_reason is None
        assert model.freeze_decision.source == "measured" and model.freeze_decision.off_reason is None


def freezing_part(model):
    return next(p for p in model._boost_step_parts() if isinstance(p, FreezingStep))


def test_steps_that_froze_while_being_timed_are_reported_when_freezing_ends_off():
    # Timing a depth trains at it (on torch, with nothing to compile, the
    # planner times every depth before rule 6 can judge): when freezing is
    # then switched off, the summary says how many steps froze layers.
    counted = rule_6_model(0.0, adaptive_depths=False)  # MindSpore's schedule: every depth runs
    ran = fit_logging_depths(counted, epochs=2)
    assert freezing_part(counted).frozen_calls == sum(depth != 0 for depth in ran) > 0
    switched_off = rule_6_model(0.99)
    fit_logging_depths(switched_off, epochs=1)
    assert "steps ran frozen" not in switched_off.boost_summary()  # it decided before any froze
    freezing_part(switched_off).frozen_calls = 3  # as after timing three deeper calls
    assert switched_off.freeze_decision.depths == (0,)
    assert "min_run_saving=0.99 (3 steps ran frozen at deeper depths while they were timed)" \
        in switched_off.boost_summary()


def test_the_freeze_decision_is_saved_and_a_reload_repeats_it_without_timing(tmp_path, monkeypatch):
    model = rule_6_model(0.99)
    fit_logging_depths(model, epochs=1)
    decision = model.freeze_decision
    assert decision.off_reason is not None
    model.save(tmp_path / "m.keras")
    restored = keras.saving.load_model(tmp_path / "m.keras")
    timed = []
    monkeypatch.setattr(DepthPlanner, "record", lambda self, depth, seconds: timed.append(depth))
    assert fit_logging_depths(restored, epochs=2) == [0] * 16
    assert restored.freeze_decision == decision and timed == []
    clone = keras.models.clone_model(model)  # compiled like model: the same chain config
    fit_logging_depths(clone, epochs=1)
    assert clone.freeze_decision == decision and timed == []


def test_depths_pinned_by_the_config_run_without_timing(monkeypatch):
    timed = []
    monkeypatch.setattr(DepthPlanner, "record", lambda self, depth, seconds: timed.append(depth))
    model = rule_6_model(0.99, depths=[2])
    # Schedule "0000 1234": depth 1 runs as 0, depths 2-4 as 2; rule 6 never judges.
    assert fit_logging_depths(model, epochs=1) == [0, 0, 0, 0, 0, 2, 2, 2]
    assert model.freeze_decision == FreezeDecision((0, 2), "pinned") and timed == []
    with pytest.raises(ValueError, match=r"grad_freeze.depths lists depth\(s\) \[7\].*0..4"):
        fit_logging_depths(rule_6_model(0.0, depths=[7]))
    with pytest.raises(TypeError, match="grad_freeze.depths must be 'auto' or a list of freeze depths"):
        boost.AutoBoost("O1", {"grad_freeze": {"depths": 3}})


def test_min_run_saving_is_validated_by_the_config():
    with pytest.raises(ValueError, match=r"grad_freeze.min_run_saving must be in \[0.0, 1.0\), got 1.5"):
        boost.AutoBoost("O1", {"grad_freeze": {"min_run_saving": 1.5}})


def fake_clock(seconds, trace):
    """A `FreezingStep.clock`: a call of depth d takes `seconds[d]`, plus
    `trace` on the first call of d by each part (a new process traces)."""
    now, started, seen = [0.0], [False], set()

    def clock(part):
        started[0] = not started[0]
        if not started[0]:  # the end of a call
            first = (id(part), part.depth) not in seen
            seen.add((id(part), part.depth))
            now[0] += seconds[part.depth] + (trace if first else 0.0)
        return now[0]

    return clock


def resumable_model(total_steps):
    config = {"boost": {"mode": "manual", "less_bn": False},
              "grad_freeze": {"param_groups": 5, "freeze_type": 0, "freeze_p": 0.5,
                              "adaptive_depths": True, "total_steps": total_steps}}
    model = boost.BoostModel(*deep_graph(), boost_level="O1", boost_config_dict=config)
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9), loss="mse")
    return model


def test_resuming_repeats_the_timing_driven_decisions_exactly(tmp_path, monkeypatch):
    # Fake timings, the same in the continuous run and before the save: a
    # depth saves 15% of the full step per level, a trace costs 2.5 s, so
    # freezing repays over the configured 48 steps (not over the 32 of the
    # first fit alone). After the resume another clock, which would decide
    # otherwise (nothing saves, traces cost 50 s), must not be consulted.
    timings = {d: 1.0 - 0.15 * d for d in range(5)}
    monkeypatch.setattr(FreezingStep, "clock", fake_clock(timings, trace=2.5))
    continuous = resumable_model(total_steps=48)
    interrupted = resumable_model(total_steps=48)
    interrupted.set_weights(continuous.get_weights())
    ran = fit_logging_depths(continuous, epochs=6)
    monkeypatch.setattr(FreezingStep, "clock", fake_clock(timings, trace=2.5))
    ran_before = fit_logging_depths(interrupted, epochs=4)
    assert ran_before == ran[:32]
    planner = interrupted.freeze_planner
    assert 3 in ran and not any(planner.needs_timing(d) for d in planner.traced)  # timing over
    interrupted.save(tmp_path / "m.keras")
    restored = keras.saving.load_model(tmp_path / "m.keras")
    monkeypatch.setattr(FreezingStep, "clock", fake_clock(dict.fromkeys(range(5), 1.0), trace=50.0))
    assert fit_logging_depths(restored, epochs=2) == ran[32:]
    assert restored.freeze_decision == continuous.freeze_decision
    for a, b in zip(restored.get_weights(), continuous.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_the_planner_counts_the_steps_left_in_the_configured_run(monkeypatch):
    # One epoch (8 steps) per fit, the run's length set to 48: each fit plans
    # over the steps left in the whole run, not over its own epoch, which
    # alone repays no trace (rule 6 would switch freezing off).
    monkeypatch.setattr(FreezingStep, "clock", fake_clock({d: 1.0 - 0.15 * d for d in range(5)}, trace=2.5))
    model = resumable_model(total_steps=48)
    ran = []
    for epoch in range(3):
        ran += fit_logging_depths(model, epochs=1)
        assert model.freeze_planner.total_steps == 48
    assert model.freeze_planner.off_reason is None and 3 in ran


def test_a_resumed_run_takes_up_a_half_timed_depth_without_timing_its_retrace(tmp_path, monkeypatch):
    timings = {d: 1.0 - 0.15 * d for d in range(5)}
    monkeypatch.setattr(FreezingStep, "clock", fake_clock(timings, trace=2.5))
    model = resumable_model(total_steps=48)
    fit_logging_depths(model, epochs=2)
    assert model.freeze_planner.needs_timing(3)  # saved with depth 3 half-timed
    before = model.freeze_planner.state()["calls"]
    model.save(tmp_path / "m.keras")
    restored = keras.saving.load_model(tmp_path / "m.keras")
    ran = fit_logging_depths(restored, epochs=1)
    after = restored.freeze_planner.state()["calls"]
    # The saved calls are kept; of each depth's calls after the reload, the
    # first (which traces again) is not timed as a step.
    for depth in ("0", "3"):
        assert after[depth][:len(before[depth])] == before[depth]
        assert len(after[depth]) == len(before[depth]) + ran.count(int(depth)) - 1
