"""SPEC 2.8: the sampler's own rate (``update_period``, ``update_phase``), lost samples (``dropout``),
sample-and-hold and the age of a reading (``read_age``); plus two core regressions of issue 11 (a partial
reset only checks the envs it resets for non-finite values; a huge delay is refused by name)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sensorgym as sg
from sensorgym.wrappers import SensorObservation, SimStateExtractor, SingleEnvSensorObservation

from ..helpers import ByteOptions, FilterOptions, ThresholdOptions, as_np
from ..wrappers.envs import RampEnv
from .reference import ReferenceManager

DT = 0.02


def ramp(t: float, b: int = 1, width: int = 1) -> dict:
    return {"x": torch.full((b, width), float(t))}


def run(opts: sg.SensorOptions, steps: int, b: int = 1, seed: int = 0, dt: float = DT):
    """Reads (the ramp value = the step of the snapshot shown) and ages after reset and each step."""
    mgr = sg.SensorManager(num_envs=b, dt=dt, seed=seed)
    s = mgr.add_sensor(opts)
    mgr.reset(ramp(0, b))
    reads, ages = [s.read(0)[:, 0].clone()], [s.read_age()]
    for t in range(1, steps + 1):
        mgr.step(ramp(t, b))
        reads.append(s.read(0)[:, 0].clone())
        ages.append(s.read_age())
    return mgr, s, torch.stack(reads, 1), torch.stack(ages, 1)


def due_steps(period: float, phase: float, dt: float, steps: int) -> list[int]:
    """SPEC 2.8's due rule, written out: the steps that take a sample (0 always)."""
    out = [0]
    for t in range(1, steps + 1):
        if period <= dt:
            out.append(t)
            continue
        now = math.floor((t * dt - phase) / period + 1e-9)
        before = math.floor(((t - 1) * dt - phase) / period + 1e-9)
        if now > before:
            out.append(t)
    return out


def held(samples: list[int], steps: int) -> list[int]:
    """The step of the last sample at each step 0..steps."""
    out, last = [], 0
    for t in range(steps + 1):
        last = t if t in samples else last
        out.append(last)
    return out


# -- the due rule, exactly ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("period", "phase", "expected"),
    [
        (0.04, 0.0, [0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10]),  # T = 2 dt: every other step
        (0.06, 0.0, [0, 0, 0, 3, 3, 3, 6, 6, 6, 9, 9]),  # T = 3 dt (0.06 / 0.02 is not exact in floats)
        (1 / 30, 0.0, [0, 0, 2, 2, 4, 5, 5, 7, 7, 9, 10]),  # 30 Hz at 50 Hz: gaps 2, 2, 1
        (0.04, 0.02, [0, 1, 1, 3, 3, 5, 5, 7, 7, 9, 9]),  # a phase of one step shifts the pattern
        (0.1, 0.03, [0, 0, 2, 2, 2, 2, 2, 7, 7, 7, 7]),  # samples at t*dt - 0.03 crossing k*0.1
        (0.02, 0.0, list(range(11))),  # T = dt: every step, as without the option
        (0.01, 0.0, list(range(11))),  # T < dt: every step
    ],
)
def test_due_rule_on_a_ramp(period, phase, expected):
    _, _, reads, ages = run(sg.StateSensorOptions(key="x", update_period=period, update_phase=phase), 10)
    assert reads[0].tolist() == expected
    assert expected == held(due_steps(period, phase, DT, 10), 10)
    want = torch.tensor([(t - s) * DT for t, s in enumerate(expected)], dtype=torch.float64).float()
    assert torch.equal(ages[0], want)
    assert ages.dtype == torch.float32 and ages.shape == (1, 11)


def test_thirty_hz_at_fifty_hz_gives_the_2_2_1_pattern():
    _, _, reads, _ = run(sg.StateSensorOptions(key="x", update_period=1 / 30, update_phase=0.0), 60)
    samples = sorted(set(reads[0].tolist()))
    gaps = np.diff(samples).tolist()
    assert gaps == [2, 2, 1] * (len(gaps) // 3) + [2, 2, 1][: len(gaps) % 3]
    assert len(samples) == 37  # 30 Hz over 1.2 s: 36 periods, 37 samples with the one at the reset


@pytest.mark.parametrize("period", [0.05, 0.07, 1 / 30, 0.1, 0.3])
def test_drawn_phases_follow_the_rule_per_env_and_are_redrawn_at_reset(period):
    b, steps = 64, 40
    mgr, _, reads, _ = run(sg.StateSensorOptions(key="x", update_period=period), steps, b=b)
    phase = mgr.storage(sg.StateSensor).sampler.rates.phase[:, 0].clone()
    assert bool(((phase >= 0) & (phase < period)).all())
    assert len(set(phase.tolist())) == b  # not in lock-step
    for i in range(b):
        assert reads[i].tolist() == held(due_steps(period, float(phase[i]), DT, steps), steps)
    mgr.reset(ramp(0, b))
    assert not torch.equal(mgr.storage(sg.StateSensor).sampler.rates.phase[:, 0], phase)


def test_a_batch_mixing_rates_and_classes():
    """Sensors of one class with different periods and phases, next to a sensor without the options."""
    mgr = sg.SensorManager(num_envs=2, dt=DT, seed=0)
    fast = mgr.add_sensor(sg.StateSensorOptions(key="x"))
    slow = mgr.add_sensor(sg.StateSensorOptions(key="x", update_period=0.1, update_phase=0.0))
    odd = mgr.add_sensor(sg.StateSensorOptions(key="x", update_period=0.06, update_phase=0.04))
    mgr.reset(ramp(0, 2))
    for t in range(1, 13):
        mgr.step(ramp(t, 2))
        assert fast.read()[:, 0].tolist() == [t, t]
        assert slow.read()[:, 0].tolist() == [held(due_steps(0.1, 0.0, DT, t), t)[-1]] * 2
        assert odd.read()[:, 0].tolist() == [held(due_steps(0.06, 0.04, DT, t), t)[-1]] * 2
        assert fast.read_age().tolist() == [0.0, 0.0]


# -- what a hold repeats and what it does not ----------------------------------------------------------------
def test_held_snapshots_repeat_noise_bias_and_quantization_bit_for_bit():
    opts = sg.StateSensorOptions(
        key="x", shape=(3,), update_period=0.1, update_phase=0.0, noise=0.3, bias=0.7, resolution=0.01
    )
    mgr = sg.SensorManager(num_envs=4, dt=DT, seed=1)
    s = mgr.add_sensor(opts)
    x = {"x": torch.zeros(4, 3)}
    mgr.reset(x)
    reads = [s.read().clone()]
    for _ in range(20):
        mgr.step(x)
        reads.append(s.read().clone())
    samples = due_steps(0.1, 0.0, DT, 20)  # 0, 5, 10, 15, 20
    assert samples == [0, 5, 10, 15, 20]
    for t in range(21):
        last = max(k for k in samples if k <= t)
        assert torch.equal(reads[t], reads[last]), t  # bit for bit, noise included
    for a, b in itertools.pairwise(samples):
        assert not torch.equal(reads[a], reads[b])  # a new sample draws new noise


def test_random_walk_keeps_drifting_under_a_hold_and_a_sample_captures_it():
    mgr = sg.SensorManager(num_envs=3, dt=DT, seed=2)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", update_period=0.08, update_phase=0.0, random_walk=0.5))
    x = {"x": torch.zeros(3, 1)}
    mgr.reset(x)
    md = mgr.metadata(sg.StateSensor)
    walks, reads = [md.random_walk_state.clone()], [s.read().clone()]
    for _ in range(16):
        mgr.step(x)
        walks.append(md.random_walk_state.clone())
        reads.append(s.read().clone())
    samples = due_steps(0.08, 0.0, DT, 16)
    for t in range(1, 17):
        assert not torch.equal(walks[t], walks[t - 1])  # the drift advances every step
        last = max(k for k in samples if k <= t)
        assert torch.equal(reads[t], walks[last])  # the held sample shows the drift of its step


def test_ground_truth_is_never_held():
    mgr = sg.SensorManager(num_envs=2, dt=DT, seed=0)
    s = mgr.add_sensor(
        sg.StateSensorOptions(key="x", update_period=0.1, dropout=0.5, history_length=3, noise=0.1)
    )
    mgr.reset(ramp(0, 2))
    for t in range(1, 15):
        mgr.step(ramp(t, 2))
        assert s.read_ground_truth(0)[:, 0].tolist() == [t, t]
        assert s.read_ground_truth()[:, :, 0].tolist() == [[t, max(t - 1, 0), max(t - 2, 0)]] * 2


# -- dropout ---------------------------------------------------------------------------------------------
def test_dropout_loses_the_given_fraction_of_due_samples_and_never_the_reset_sample():
    b, steps = 2000, 60
    _, _, reads, _ = run(sg.StateSensorOptions(key="x", dropout=0.2), steps, b=b, seed=3)
    assert bool((reads[:, 0] == 0).all())
    taken = reads[:, 1:] == torch.arange(1, steps + 1)
    lost = 1.0 - taken.float().mean().item()
    # 120,000 due samples: std of the lost fraction ~0.0012
    assert 0.19 < lost < 0.21
    # per env, per sample: the losses are independent (about 20% of envs lose step 1)
    assert 0.17 < 1.0 - taken[:, 0].float().mean().item() < 0.23

    _, _, reads, _ = run(
        sg.StateSensorOptions(key="x", update_period=0.04, update_phase=0.0, dropout=0.5), 40, b=b, seed=4
    )
    due = torch.arange(2, 41, 2)  # T = 2 dt
    taken = reads[:, due] == due
    assert 0.48 < 1.0 - taken.float().mean().item() < 0.52
    odd = torch.arange(1, 41, 2)
    assert bool((reads[:, odd] == reads[:, odd - 1]).all())  # never a sample off the due steps


def test_dropout_with_p_near_one_still_takes_the_reset_sample():
    mgr, s, reads, ages = run(sg.StateSensorOptions(key="x", dropout=0.999), 5, b=500, seed=5)
    assert bool((reads[:, 0] == 0).all()) and bool((ages[:, 0] == 0).all())
    mgr.reset(ramp(7, 500))
    assert bool((s.read()[:, 0] == 7).all()) and bool((s.read_age() == 0).all())


# -- composition with delay, jitter and history --------------------------------------------------------------
def test_a_held_sample_and_a_delay_compose():
    opts = sg.StateSensorOptions(key="x", update_period=0.06, update_phase=0.0, delay=0.04, history_length=4)
    _, s, _, _ = run(opts, 0)
    mgr = s._manager
    samples = due_steps(0.06, 0.0, DT, 20)
    snaps = held(samples, 20)  # the per-step snapshots: the step of the sample each shows
    reads, ages = [], []
    for t in range(1, 21):
        mgr.step(ramp(t))
        reads.append(s.read())
        ages.append(float(s.read_age()[0]))
        shown = snaps[t - 2] if t >= 2 else 0  # delay 2 steps; padding shows the reset snapshot
        assert reads[-1][0, 0, 0].item() == shown
        assert ages[-1] == pytest.approx((t - shown) * DT, abs=1e-6)
        # causal history: entry i is what read() returned i steps earlier
        for i in range(min(4, len(reads))):
            assert reads[-1][0, i, 0].item() == reads[-1 - i][0, 0, 0].item()


def test_jitter_and_a_hold_compose_monotonically():
    opts = sg.StateSensorOptions(key="x", update_period=0.05, delay=0.06, jitter=0.06, history_length=3)
    b, steps = 256, 40
    mgr, _, reads, ages = run(opts, steps, b=b, seed=6)
    phase = mgr.storage(sg.StateSensor).sampler.rates.phase[:, 0]
    for i in range(b):
        snaps = held(due_steps(0.05, float(phase[i]), DT, steps), steps)
        r = reads[i].tolist()
        assert all(a <= c for a, c in itertools.pairwise(r))  # never back in capture time
        assert set(r) <= set(snaps)  # every read is a per-step snapshot
        for t in range(steps + 1):
            # the age is the steps since the sample shown
            assert ages[i, t].item() == pytest.approx((t - r[t]) * DT, abs=1e-6)
            # shift in [D, D + J] = [3, 6] steps: the snapshot of one of those steps (or the padding)
            assert r[t] in {snaps[c] if c >= 0 else 0 for c in range(t - 6, t - 2)}


def test_age_of_a_plain_delayed_sensor_counts_the_padding_then_the_delay():
    for padding in ("reset", "zero"):
        _, _, _, ages = run(sg.StateSensorOptions(key="x", delay=0.06, padding_type=padding), 8)
        want = [min(t, 3) * DT for t in range(9)]
        assert ages[0].tolist() == pytest.approx(want, abs=1e-7)
    _, _, _, ages = run(sg.StateSensorOptions(key="x"), 4)
    assert ages[0].tolist() == [0.0] * 5


# -- resets --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["reset", "reset_mask"])
def test_reset_mid_hold_starts_the_sampler_again(how):
    opts = sg.StateSensorOptions(key="x", update_period=0.1, update_phase=0.0, delay=0.02, noise=0.0)
    mgr = sg.SensorManager(num_envs=2, dt=DT, seed=0)
    s = mgr.add_sensor(opts)
    mgr.reset(ramp(0, 2))
    for t in range(1, 8):  # samples at 0 and 5; step 7 holds sample 5
        mgr.step(ramp(t, 2))
    assert s.read()[:, 0].tolist() == [5, 5]
    # env 0 starts a new episode whose first value is 100
    x = {"x": torch.tensor([[100.0], [8.0]])}
    if how == "reset":
        mgr.step(ramp(8, 2))
        mgr.reset(x, envs_idx=[0])
        base = 8
    else:
        mgr.step(x, reset_mask=np.array([True, False]))
        base = 8
    assert s.read()[0, 0].item() == 100.0  # the reset sample, padded into the delay line
    assert s.read_age()[0].item() == 0.0
    assert s.read()[1, 0].item() == 5.0  # env 1 still holds its old sample (delay 1 step)
    history = {0: [100.0], 1: []}
    for k in range(1, 12):
        mgr.step({"x": torch.tensor([[100.0 + k], [base + k]])})
        history[0].append(s.read()[0, 0].item())
    # env 0's sampler restarted at the reset: samples at 0, 5, 10 of the new episode, read one step late
    assert history[0] == [100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 105.0, 105.0, 105.0, 105.0, 105.0, 110.0]


def test_a_reset_drops_the_held_sample_of_the_last_episode_with_dropout():
    mgr = sg.SensorManager(num_envs=1, dt=DT, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", dropout=0.99, history_length=3, delay=0.04))
    mgr.reset(ramp(0))
    for t in range(1, 6):
        mgr.step(ramp(t))
    mgr.step(ramp(50), reset_mask=[True])
    assert s.read()[0, :, 0].tolist() == [50.0, 50.0, 50.0]
    mgr.step(ramp(51))
    assert s.read()[0, :, 0].tolist() == [50.0, 50.0, 50.0]


# -- defaults, randomization, validation ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra",
    [
        dict(update_period=0.0, update_phase=None, dropout=0.0),
        dict(update_period=DT),  # T <= dt: every step, exactly as without the option
        dict(update_period=0.01),
    ],
)
def test_defaults_passed_explicitly_change_nothing_random_stream_included(extra):
    base = dict(key="x", shape=(2,), delay=0.04, jitter=0.02, noise=0.1, random_walk=0.01, history_length=2)
    out = []
    for kw in (base, {**base, **extra}):
        mgr = sg.SensorManager(num_envs=3, dt=DT, seed=9)
        s = mgr.add_sensor(sg.StateSensorOptions(**kw))
        mgr.reset(ramp(0, 3, 2))
        for t in range(1, 10):
            mgr.step(ramp(t, 3, 2), reset_mask=[t % 4 == 0, False, False])
        out.append((s.read().clone(), mgr.random.generator.get_state(), mgr.storage(sg.StateSensor)))
    assert torch.equal(out[0][0], out[1][0])
    assert torch.equal(out[0][1], out[1][1])
    assert out[1][2].sampler is None  # nothing extra allocated or run


def test_sampler_options_are_randomized_per_env_at_every_reset_and_readable():
    opts = sg.StateSensorOptions(
        key="x",
        update_period=sg.Choice([0.04, 0.1]),
        update_phase=sg.Uniform(0.0, 0.02),
        dropout=sg.Uniform(0.0, 0.3),
    )
    mgr = sg.SensorManager(num_envs=200, dt=DT, seed=0)
    s = mgr.add_sensor(opts, name="cam")
    mgr.reset(ramp(0, 200))
    assert mgr.randomization_names() == ["cam.update_period", "cam.update_phase", "cam.dropout"]
    r = s.read_randomization()
    first = {k: v.clone() for k, v in r.items()}
    assert sorted(set(r["update_period"][:, 0].tolist())) == pytest.approx([0.04, 0.1])
    assert bool((r["dropout"] >= 0).all() and (r["dropout"] < 0.3).all())
    assert mgr.read_randomization().shape == (200, 3)
    mgr.reset(ramp(0, 200), envs_idx=list(range(100)))
    r = s.read_randomization()
    assert torch.equal(r["dropout"][100:], first["dropout"][100:])
    assert not torch.equal(r["dropout"][:100], first["dropout"][:100])
    # a drawn phase (update_phase=None) is readable too
    mgr = sg.SensorManager(num_envs=2, dt=DT, seed=0)
    mgr.add_sensor(sg.StateSensorOptions(key="x", update_period=0.1), name="gps")
    mgr.reset(ramp(0, 2))
    assert mgr.randomization_names() == ["gps.update_phase"]


@pytest.mark.parametrize(
    ("kw", "error", "pattern"),
    [
        (dict(update_period=-0.1), ValueError, r"update_period=-0\.1 is invalid"),
        (dict(update_period="fast"), TypeError, r"update_period='fast'"),
        (dict(update_period=sg.Uniform(-0.1, 0.1)), ValueError, r"negative update_period"),
        (dict(update_phase=-0.01), ValueError, r"update_phase=-0\.01 is invalid"),
        (dict(dropout=1.0), ValueError, r"dropout=1\.0 is invalid.*0 <= dropout < 1"),
        (dict(dropout=-0.1), ValueError, r"dropout=-0\.1 is invalid"),
        (dict(dropout=sg.Uniform(0.5, 1.01)), ValueError, r"dropout=Uniform.*outside \[0, 1\)"),
        (
            dict(dropout=sg.Normal(0.5, 0.3, low=0.0, high=1.0)),
            ValueError,
            r"dropout=Normal.*outside \[0, 1\)",
        ),
        (dict(dropout=sg.Choice([0.0, 1.0])), ValueError, r"dropout=Choice.*outside \[0, 1\)"),
        (dict(dropout="often"), TypeError, r"dropout='often'"),
        (dict(update_period=float("nan")), ValueError, r"update_period=nan"),
    ],
)
def test_invalid_sampler_options_are_refused_by_name(kw, error, pattern):
    with pytest.raises(error, match=pattern):
        sg.StateSensorOptions(key="x", **kw)


def test_a_uniform_dropout_up_to_one_is_accepted_and_never_draws_one():
    """``Uniform(lo, 1)`` is ``[lo, 1)``: accepted (issue 23: it was refused though it never reaches 1);
    ``lo + (1 - lo) u`` can round up to 1.0 in float64, and the sampler keeps such a draw below 1."""
    for dist in (sg.Uniform(0.0, 1.0), sg.Uniform(0.5, 1.0)):
        mgr = sg.SensorManager(num_envs=4096, dt=DT, seed=0)
        mgr.add_sensor(sg.StateSensorOptions(key="x", update_period=2 * DT, dropout=dist), name="s")
        mgr.reset(ramp(0, 4096))
        drawn = mgr.read_randomization()[:, mgr.randomization_names().index("s.dropout")]
        assert bool((drawn >= dist.low).all()) and bool((drawn < 1.0).all())
        assert float(drawn.max()) > 0.99  # the whole interval is drawn
    sampler = mgr.storage(sg.StateSensor).sampler
    sampler.rates.dropout.fill_(0.0)
    col = torch.ones(4096, 1, dtype=torch.float64)  # a draw that rounded up to 1.0
    mgr.random.sample_ = lambda dist, out, mask, k: out.copy_(col)  # the next draws are all 1.0
    mgr.reset(ramp(0, 4096))
    assert float(sampler.rates.dropout.max()) == math.nextafter(1.0, 0.0)


# -- checkpoints ---------------------------------------------------------------------------------------------
def test_state_dict_round_trip_mid_hold_continues_bit_identically():
    def build():
        mgr = sg.SensorManager(num_envs=8, dt=DT, seed=3)
        mgr.add_sensor(
            sg.StateSensorOptions(
                key="x",
                shape=(2,),
                update_period=sg.Uniform(0.03, 0.12),
                dropout=0.2,
                delay=0.04,
                jitter=0.04,
                noise=0.1,
                random_walk=0.05,
                history_length=3,
            ),
            name="a",
        )
        mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), update_period=0.1), name="b")
        mgr.reset(ramp(0, 8, 2))
        return mgr

    a = build()
    for t in range(1, 8):
        a.step(ramp(t, 8, 2), reset_mask=[t == 5] + [False] * 7)
    saved = a.state_dict()
    b = build()
    b.load_state_dict(saved)
    for t in range(8, 30):
        mask = [t % 9 == 0] * 4 + [False] * 4
        a.step(ramp(t, 8, 2), reset_mask=mask)
        b.step(ramp(t, 8, 2), reset_mask=mask)
        for sa, sb in zip(a.sensors, b.sensors, strict=True):
            assert torch.equal(sa.read(), sb.read())
            assert torch.equal(sa.read_age(), sb.read_age())


# -- through the wrapper, all three autoreset modes ----------------------------------------------------------
SENSORS = {
    "t": sg.StateSensorOptions(key="t", shape=(1,), update_period=sg.Choice([0.2, 0.3]), dropout=0.2),
    "x": sg.StateSensorOptions(
        key="obs", index=[2], update_period=0.25, delay=0.1, jitter=0.1, noise=0.05, history_length=2
    ),
}


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_all_autoreset_modes_against_single_env_references(mode):
    """The vector wrapper equals one single-env wrapper per sub-env (per-env random streams), and the age
    column of "t" (the env's own step counter, held) is exactly (env step - sampled step) * dt."""
    b, seed = 4, 11
    kw = dict(critic_randomization=True, per_env_rng=True, policy_age=["t", "x"], critic_age=["t"])
    venv = SensorObservation(
        SyncVectorEnv([lambda: SimStateExtractor(RampEnv(), SENSORS)] * b, autoreset_mode=mode), SENSORS, **kw
    )
    refs = [SingleEnvSensorObservation(RampEnv(), SENSORS, **kw) for _ in range(b)]
    assert venv.single_observation_space["policy"].shape == (1 + 2 + 2,)
    rng = np.random.default_rng(0)
    obs, _ = venv.reset(seed=seed)
    ref = [r.reset(seed=seed + i)[0] for i, r in enumerate(refs)]
    pending = np.zeros(b, bool)
    boundaries = 0
    env_t = np.zeros(b, int)

    def check(what):
        for i in range(b):
            for k in ("policy", "critic"):
                np.testing.assert_array_equal(obs[k][i], ref[i][k], err_msg=f"{what} env {i} {k}")
        age = obs["policy"][:, 3]
        np.testing.assert_allclose(age, (env_t - obs["policy"][:, 0]) * 0.1, atol=1e-5, err_msg=what)
        np.testing.assert_array_equal(obs["critic"][:, -1], age)

    check("reset")
    for t in range(120):
        actions = rng.uniform(-1, 1, (b, 1)).astype(np.float32)
        obs, _, term, trunc, info = venv.step(actions)
        assert obs in venv.observation_space
        for i in range(b):
            if mode is AutoresetMode.NEXT_STEP and pending[i]:
                ref[i] = refs[i].reset()[0]
                pending[i], env_t[i] = False, 0
                continue
            o, _, te, tr, _ = refs[i].step(actions[i])
            env_t[i] += 1
            ref[i] = o
            if te or tr:
                boundaries += 1
                if mode is AutoresetMode.NEXT_STEP:
                    pending[i] = True
                elif mode is AutoresetMode.SAME_STEP:
                    final = info["final_obs"][i]
                    np.testing.assert_array_equal(final["policy"], o["policy"])
                    ref[i] = refs[i].reset()[0]
                    env_t[i] = 0
        check(f"step {t}")
        if mode is AutoresetMode.DISABLED:
            mask = (term | trunc) | (rng.random(b) < 0.1)
            if mask.any():
                obs, _ = venv.reset(options={"reset_mask": mask.copy()})
                for i in np.flatnonzero(mask):
                    ref[i] = refs[i].reset()[0]
                    env_t[i] = 0
                check(f"partial reset {t}")
    assert boundaries >= 10


def test_wrapper_age_options_are_checked():
    with pytest.raises(ValueError, match=r"policy_age=\['nope'\].*unknown"):
        SingleEnvSensorObservation(RampEnv(), SENSORS, policy_age=["nope"])
    with pytest.raises(ValueError, match=r"critic_age='t'"):
        SingleEnvSensorObservation(RampEnv(), SENSORS, critic_age="t")


# -- the slow reference --------------------------------------------------------------------------------------
def _options(draw, kind: str):
    d_steps = draw(st.integers(0, 3))
    period = draw(st.sampled_from([0.0, 0.1, 0.15, 0.2, 0.25, 1 / 3, 0.45, sg.Choice([0.1, 0.3])]))
    common = dict(
        delay=d_steps * 0.1,
        jitter=min(draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])) * 0.1, d_steps * 0.1),
        history_length=draw(st.integers(0, 3)),
        padding_type=draw(st.sampled_from(["reset", "zero"])),
        noise=draw(st.sampled_from([0.0, 0.5])),
        bias=draw(st.sampled_from([0.0, [0.25, -0.75]])),
        random_walk=draw(st.sampled_from([0.0, 0.3])),
        resolution=draw(st.sampled_from([0.0, 0.25])),
        update_period=period,
        update_phase=draw(st.sampled_from([None, 0.0, 0.05, sg.Uniform(0.0, 0.2)])),
        dropout=draw(st.sampled_from([0.0, 0.3, sg.Uniform(0.0, 0.6)])),
    )
    if kind == "state":
        return sg.StateSensorOptions(key="x", index=[0, 1], **common)
    if kind == "filter":
        return FilterOptions(width=2, alpha=0.5, physics_offset=draw(st.sampled_from([0.0, 3.0])), **common)
    if kind == "threshold":
        return ThresholdOptions(width=2, threshold=5.0, **common)
    return ByteOptions(width=2, **common)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_manager_matches_the_slow_reference_with_sampler_options(data):
    draw = data.draw
    b = draw(st.integers(1, 4))
    mgr = sg.SensorManager(
        num_envs=b, dt=0.1, seed=draw(st.integers(0, 1000)), per_env_rng=draw(st.booleans())
    )
    for i in range(draw(st.integers(1, 4))):
        mgr.add_sensor(
            _options(draw, draw(st.sampled_from(["state", "filter", "threshold", "byte"]))), f"s{i}"
        )
    g = torch.Generator().manual_seed(draw(st.integers(0, 1000)))

    def state(t):
        return {"x": torch.randint(0, 40, (b, 3), generator=g).float() * 0.5 + 10.0 * t}

    def mask():
        return np.array(draw(st.lists(st.booleans(), min_size=b, max_size=b)), dtype=bool)

    def compare(where):
        for s in mgr.sensors:
            np.testing.assert_array_equal(
                as_np(s.read(0)), ref.read(s, False, 0), err_msg=f"{where} {s.name}"
            )
            np.testing.assert_array_equal(as_np(s.read_ground_truth(0)), ref.read(s, True, 0))
            if s.options.history_length:
                np.testing.assert_array_equal(as_np(s.read()), ref.read(s), err_msg=f"{where} {s.name} hist")
            np.testing.assert_array_equal(
                as_np(s.read_age()), ref.read_age(s), err_msg=f"{where} {s.name} age"
            )

    ref = ReferenceManager(mgr)
    x = state(0)
    mgr.reset(x)
    ref.reset(x, np.ones(b, bool))
    compare("reset")
    for t in range(1, draw(st.integers(1, 30))):
        x = state(t)
        action = draw(st.sampled_from(["step"] * 5 + ["step_reset", "reset"]))
        if action == "step":
            mgr.step(x)
            ref.step(x)
        elif action == "step_reset":
            m = mask()
            mgr.step(x, reset_mask=m)
            ref.step(x, m)
        else:
            m = mask()
            mgr.reset(x, envs_idx=m)
            ref.reset(x, m)
        compare(f"t={t} {action}")


# -- issue 11: partial resets and nan_policy="raise"; a huge delay -------------------------------------------
def test_a_partial_reset_checks_only_the_envs_it_resets_for_non_finite_values():
    mgr = sg.SensorManager(num_envs=3, dt=DT, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", nan_policy="raise", delay=0.02))
    mgr.reset({"x": torch.zeros(3, 1)})
    mgr.step({"x": torch.ones(3, 1)})
    before = s.read().clone()
    # env 2 is not being reset; its row of the state is NaN (e.g. a diverged env awaiting its own reset)
    state = {"x": torch.tensor([[5.0], [1.0], [float("nan")]])}
    mgr.reset(state, envs_idx=[0])
    assert s.read()[0, 0].item() == 5.0
    assert torch.equal(s.read()[1:], before[1:])
    # a NaN in a row that is being reset still raises, naming the sensor, and loses nothing
    snapshot = s.read().clone()
    with pytest.raises(ValueError, match=r"sensor 'StateSensor_0'.*non-finite.*envs \[2\]"):
        mgr.reset(state, envs_idx=[0, 2])
    assert torch.equal(s.read(), snapshot)


@pytest.mark.parametrize(
    ("kw", "name", "depth"),
    [
        (dict(delay=1e9), "delay=1000000000.0", 5 * 10**10 + 1),
        (dict(delay=1e9, jitter=1e9), "jitter=1000000000.0", 10**11 + 1),
        (dict(max_delay=1e9), "max_delay=1000000000.0", 5 * 10**10 + 2),
    ],
)
def test_a_huge_delay_is_refused_naming_the_option_and_the_memory(kw, name, depth):
    mgr = sg.SensorManager(num_envs=64, dt=DT)
    mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), **kw), name="slow")
    with pytest.raises(ValueError, match=rf"sensor 'slow': {name} at dt=0\.02 s needs.*bytes") as err:
        mgr.reset({"x": torch.zeros(64, 3)})
    need = depth * 64 * 3 * 4  # ring slots x envs x columns x float32
    assert f"{need:,} bytes" in str(err.value)


def test_a_torch_env_gets_the_same_observations_and_ages_as_its_numpy_twin():
    """A natively batched torch env (NEXT_STEP, terminations as tensors) and the same sub-envs as a numpy
    SyncVectorEnv: identical observations, ages included, as torch tensors and numpy arrays."""
    import gymnasium as gym

    from ..wrappers.envs import SpaceEnv, TorchSpaceVecEnv

    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    sensors = {
        "a": sg.StateSensorOptions(key="obs", index=[0, 1], update_period=0.25, dropout=0.1, delay=0.1),
        "b": sg.StateSensorOptions(key="t", shape=(1,), update_period=sg.Uniform(0.1, 0.4), history_length=2),
    }
    kw = dict(seed=5, policy_age=["a", "b"], critic_age=["b"])
    torch_env = SensorObservation(TorchSpaceVecEnv(space, 3), sensors, **kw)
    numpy_env = SensorObservation(
        SyncVectorEnv([lambda: SpaceEnv(space)] * 3, autoreset_mode=AutoresetMode.NEXT_STEP), sensors, **kw
    )
    a, _ = torch_env.reset(seed=5)
    b, _ = numpy_env.reset(seed=5)
    for t in range(40):
        for k in ("policy", "critic"):
            assert torch.is_tensor(a[k]) and isinstance(b[k], np.ndarray)
            np.testing.assert_array_equal(a[k].numpy(), b[k], err_msg=f"step {t} {k}")
        actions = np.zeros((3, 1), np.float32)
        a, *_ = torch_env.step(actions)
        b, *_ = numpy_env.step(actions)
    assert bool((a["policy"][:, -2:] >= 0).all())
