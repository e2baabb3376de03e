"""Issue 35 item 2 / SPEC §6: the attitude estimator in the pipeline (``AttitudeSensor``).

Each route is checked against one the pipeline did not write: the offline ``run`` of
:mod:`sensorgym.estimators` on the very samples the IMU took (bit for bit), MuJoCo's own body orientation
for the ground truth, a plain ``IMUSensor`` for the measured IMU, B single-env managers for a batch, the
uninterrupted run for a checkpoint and a partial reset, and the closed form ``exp(-kp t)`` for Mahony's
tilt error in the loop.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.estimators import Madgwick, Mahony
from sensorgym.sensors.mujoco.attitude import OUTPUTS, truth_key

DT = 0.01
LEVEL = torch.tensor([1.0, 0.0, 0.0, 0.0])
ACC0 = np.round(np.array([0.3, -0.2, 9.81]) * 1024) / 1024


def _log(n: int, b: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A synthetic IMU log ``(n, b, 3)`` each; the accelerometer is an affine function of the gyroscope
    (``c + 2 w``), so a held sample's accelerometer follows from its gyroscope. Every value is a multiple
    of 2^-10 (exact in float32: Madgwick's normalized step turns a last-bit difference into a full step
    when its gradient is near zero, so a reference must see the very same float32 samples)."""
    rng = np.random.default_rng(seed)
    gyr = np.round(rng.normal(0.0, 0.5, (n, b, 3)) * 1024) / 1024
    acc = ACC0 + 2.0 * gyr
    mag = np.array([0.25, 0.0625, -0.375]) + 0.125 * gyr
    return gyr, acc, mag


def _manager(b: int, executor: str = "torch", seed: int = 0, **options):
    mgr = sg.SensorManager(num_envs=b, dt=DT, seed=seed, executor=executor)
    o = sg.AttitudeOptions(body="torso", **options)
    return mgr, mgr.add_sensor(o), o


def _states(att, o, gyr, acc, mag, truth=None):
    b = gyr.shape[1]
    q = LEVEL.expand(b, 4) if truth is None else truth

    def state(k):
        x = np.concatenate([acc[k], gyr[k], mag[k]], -1).astype(np.float32)
        return {att.state_key: torch.from_numpy(x), truth_key(o): q}

    return state


def _drive(mgr, att, state, n):
    """Reset, step ``n - 1`` times; every reading stacked along a step axis (a reading of several
    outputs: a tuple of the same type, each stacked)."""
    mgr.reset(state(0))
    out = []
    for k in range(n):
        if k:
            mgr.step(state(k))
        r = att.read()
        out.append([x.clone() for x in r] if isinstance(r, tuple) else r.clone())
    if isinstance(r, tuple):
        return type(r)(*(torch.stack(col, 1) for col in zip(*out, strict=True)))
    return torch.stack(out, 1)


def _filter(kind, rate, magnetometer=False):
    if kind == "madgwick":
        return Madgwick(beta=0.2, rate=rate)
    return Mahony(kp=2.0, ki=0.1, rate=rate)


GAINS = dict(estimator_beta=0.2, estimator_kp=2.0, estimator_ki=0.1)


@pytest.mark.parametrize("executor", ["torch", "numpy"])
@pytest.mark.parametrize("kind", ["madgwick", "mahony"])
@pytest.mark.parametrize("magnetometer", [False, True])
def test_the_pipeline_estimate_is_the_offline_run_on_the_same_samples_bit_for_bit(
    executor, kind, magnetometer
):
    n, b = 150, 3
    gyr, acc, mag = _log(n, b)
    mgr, att, o = _manager(
        b, executor, estimator=kind, estimator_magnetometer=magnetometer, outputs=("quaternion",), **GAINS
    )
    got = _drive(mgr, att, _states(att, o, gyr, acc, mag), n).numpy()
    f32 = [np.ascontiguousarray(x.transpose(1, 0, 2)).astype(np.float32) for x in (gyr, acc, mag)]
    if executor == "torch":
        f32 = [torch.from_numpy(x) for x in f32]
    ref = _filter(kind, 1 / DT).run(f32[0], f32[1], f32[2] if magnetometer else None)
    np.testing.assert_array_equal(got, np.asarray(ref))


@pytest.mark.parametrize("executor", ["torch", "numpy"])
def test_it_consumes_each_taken_sample_once_at_the_imus_own_rate_and_holds_over_lost_ones(executor):
    """A 50 Hz IMU in a 100 Hz loop losing 20% of its samples: the estimate after every step is the
    offline 50 Hz run over exactly the samples the IMU delivered (read back from the held gyroscope)."""
    n, b = 400, 4
    gyr, acc, mag = _log(n, b)
    mgr, att, o = _manager(
        b, executor, update_period=0.02, dropout=0.2, outputs=("quaternion", "ang_vel"), **GAINS
    )
    state = _states(att, o, gyr, acc, mag)
    mgr.reset(state(0))
    qs, ws = [], []
    for k in range(n):
        if k:
            mgr.step(state(k))
        qs.append(att.read().quaternion.clone())
        ws.append(att.read().ang_vel.clone())
    qs, ws = torch.stack(qs, 1).numpy(), torch.stack(ws, 1).numpy()
    taken = []
    for e in range(b):
        new = np.r_[True, np.any(ws[e, 1:] != ws[e, :-1], axis=-1)]  # a sample arrived at this step
        g = ws[e, new].astype(np.float64)
        ref = Madgwick(beta=0.2, rate=50.0).run(g.astype(np.float32), (ACC0 + 2.0 * g).astype(np.float32))
        np.testing.assert_array_equal(qs[e], ref[np.cumsum(new) - 1])
        taken.append(new.sum())
    # 200 due samples per env, 20% lost: 160 expected, binomial sd 5.7 (4 sd)
    assert all(abs(t - 160) < 23 for t in taken), taken
    assert len(set(taken)) > 1  # the losses are per env


def test_a_batch_of_envs_equals_that_many_single_envs():
    n, b = 80, 3
    gyr, acc, mag = _log(n, b)
    opts = dict(estimator="mahony", outputs=("projected_gravity", "roll_pitch", "bias"), **GAINS)
    mgr, att, o = _manager(b, **opts)
    batch = _drive(mgr, att, _states(att, o, gyr, acc, mag), n)
    for e in range(b):
        m1, a1, o1 = _manager(1, **opts)
        single = _drive(m1, a1, _states(a1, o1, gyr[:, e : e + 1], acc[:, e : e + 1], mag[:, e : e + 1]), n)
        for field in batch._fields:
            torch.testing.assert_close(getattr(single, field)[0], getattr(batch, field)[e], rtol=0, atol=0)


def test_both_executors_agree():
    n, b = 120, 4
    gyr, acc, mag = _log(n, b)
    opts = dict(
        estimator="madgwick",
        estimator_magnetometer=True,
        update_period=0.02,
        gyro_noise=0.01,
        outputs=("projected_gravity", "quaternion", "roll_pitch"),
        **GAINS,
    )
    runs = []
    for ex in ("torch", "numpy"):
        mgr, att, o = _manager(b, ex, **opts)
        runs.append(_drive(mgr, att, _states(att, o, gyr, acc, mag), n))
    for field in runs[0]._fields:
        torch.testing.assert_close(getattr(runs[0], field), getattr(runs[1], field), rtol=0, atol=1e-6)


def test_the_outputs_are_readings_delayed_and_stacked_like_any_other():
    n, b = 60, 2
    gyr, acc, mag = _log(n, b)
    plain = _manager(b, outputs=("projected_gravity",), **GAINS)
    late = _manager(b, outputs=("projected_gravity",), delay=0.03, history_length=3, **GAINS)
    now = _drive(plain[0], plain[1], _states(plain[1], plain[2], gyr, acc, mag), n)
    stacked = _drive(late[0], late[1], _states(late[1], late[2], gyr, acc, mag), n)
    assert stacked.shape == (b, n, 3, 3)
    # history row h (newest first) at step k is the estimate of step k - 3 - h (a 3-step delay)
    for k in range(10, n):
        for h in range(3):
            torch.testing.assert_close(stacked[:, k, h], now[:, k - 3 - h], rtol=0, atol=0)


@pytest.mark.parametrize("executor", ["torch", "numpy"])
@pytest.mark.parametrize("period", [0.0, 0.02])
def test_a_partial_reset_restarts_only_its_env_and_the_others_run_on(executor, period):
    """Env 0 resets at step 30 (by ``reset(state, [0])`` after the step, or with the step's
    ``reset_mask``): envs 1 and 2 equal the run without a reset, bit for bit (a reset capture does not
    update them again); env 0 restarts (at the IMU's own rate too: period 0.02 s in a 0.01 s loop)."""
    n, b, at = 60, 3, 30
    gyr, acc, mag = _log(n, b)

    def drive(reset_at, via_step):
        mgr, att, o = _manager(b, executor, update_period=period, outputs=("quaternion",), **GAINS)
        state = _states(att, o, gyr, acc, mag)
        mgr.reset(state(0))
        out = [att.read().clone()]
        for k in range(1, n):
            if k == reset_at and via_step:
                mgr.step(state(k), reset_mask=torch.tensor([True, False, False]))
            else:
                mgr.step(state(k))
                if k == reset_at:
                    mgr.reset(state(k), [0])
            out.append(att.read().clone())
        return torch.stack(out, 1).numpy()

    whole = drive(None, False)
    if period == 0.0:  # every step a sample: the offline run is the reference
        f32 = [np.ascontiguousarray(x.transpose(1, 0, 2)).astype(np.float32) for x in (gyr, acc)]
        np.testing.assert_array_equal(whole, Madgwick(beta=0.2, rate=1 / DT).run(*f32))
    for via_step in (False, True):
        got = drive(at, via_step)
        np.testing.assert_array_equal(got[1:], whole[1:])
        np.testing.assert_array_equal(got[0, :at], whole[0, :at])
        assert not np.array_equal(got[0, at:], whole[0, at:])
        if period == 0.0:
            restarted = Madgwick(beta=0.2, rate=1 / DT).run(f32[0][0, at:], f32[1][0, at:])
            np.testing.assert_array_equal(got[0, at:], restarted)


@pytest.mark.parametrize("executor", ["torch", "numpy"])
def test_a_checkpoint_resumes_bit_for_bit_mid_episode(executor):
    n, b, cut = 90, 3, 41
    gyr, acc, mag = _log(n, b)
    opts = dict(
        estimator="mahony",
        estimator_kp=sg.Uniform(0.5, 3.0),
        estimator_ki=sg.Uniform(0.0, 0.3),
        estimator_init="truth",
        estimator_init_error=8.0,
        update_period=0.02,
        dropout=0.1,
        gyro_noise=0.01,
        gyro_random_walk=0.001,
        outputs=("quaternion", "bias"),
    )
    mgr, att, o = _manager(b, executor, **opts)
    state = _states(att, o, gyr, acc, mag)
    whole = _drive(mgr, att, state, n)
    mgr, att, o = _manager(b, executor, **opts)
    _drive(mgr, att, state, cut)
    saved = mgr.state_dict()
    mgr2, att2, _ = _manager(b, executor, seed=99, **opts)
    mgr2.reset(state(0))
    mgr2.load_state_dict(saved)
    rest = []
    for k in range(cut, n):
        mgr2.step(state(k))
        rest.append(att2.read().quaternion.clone())
    torch.testing.assert_close(torch.stack(rest, 1), whole.quaternion[:, cut:], rtol=0, atol=0)


@pytest.mark.parametrize("executor", ["torch", "numpy"])
@pytest.mark.parametrize("kind", ["madgwick", "mahony", "none"])
def test_a_deep_copy_runs_on_as_the_original_and_checkpoints_its_own_state(executor, kind):
    """``copy.deepcopy(mgr)`` mid-episode (its estimator state, the truth, the compiled calls' views: its
    own memory), every output: copy and original read the same bits from then on, also after the
    original is gone, and the copy's checkpoint holds the copy's state (once, this raised: the outputs
    held a module; and a copied view of the state's memory would have been saved stale)."""
    import copy
    import gc

    n, b, cut = 60, 3, 23
    gyr, acc, mag = _log(n, b)
    rng = np.random.default_rng(5)
    truth = torch.from_numpy(rng.normal(size=(n, b, 4)).astype(np.float32))
    truth = truth / truth.norm(dim=-1, keepdim=True)
    mgr, att, o = _manager(b, executor, estimator=kind, outputs=tuple(OUTPUTS), update_period=0.02,
                           gyro_bias=0.03, gyro_noise=0.01)  # fmt: skip

    key, true_key = att.state_key, truth_key(o)

    def state(k):
        x = np.concatenate([acc[k], gyr[k], mag[k]], -1).astype(np.float32)
        return {key: x, true_key: truth[k].numpy()}

    def reads(a):
        return [t.clone() for r in (a.read(), a.read_ground_truth()) for t in r]

    mgr.reset(state(0))
    for k in range(1, cut):
        mgr.step(state(k))
    twin = copy.deepcopy(mgr)
    twin_att = twin.sensors[0]
    for k in range(cut, cut + 10):
        mgr.step(state(k))
        twin.step(state(k))
        for x, y in zip(reads(att), reads(twin_att), strict=True):
            assert torch.equal(x, y)
    expected = [reads(att)]
    for k in range(cut + 10, n):
        mgr.step(state(k))
        expected.append(reads(att))
    saved = twin.state_dict()
    del mgr, att
    gc.collect()
    for k in range(cut + 10, n):
        twin.step(state(k))
        for x, y in zip(expected[k - cut - 9], reads(twin_att), strict=True):
            assert torch.equal(x, y)
    fresh, fresh_att, _ = _manager(b, executor, seed=7, estimator=kind, outputs=tuple(OUTPUTS),
                                   update_period=0.02, gyro_bias=0.03, gyro_noise=0.01)  # fmt: skip
    fresh.reset(state(0))
    fresh.load_state_dict(saved)
    for k in range(cut + 10, n):
        fresh.step(state(k))
    for x, y in zip(reads(twin_att), reads(fresh_att), strict=True):
        assert torch.equal(x, y)


def test_gains_are_drawn_per_env_and_sensor_at_every_reset_from_the_managers_seed():
    b = 64
    gyr, acc, mag = _log(3, b)

    def gains(seed):
        mgr, att, o = _manager(b, seed=seed, estimator_beta=sg.Uniform(0.05, 0.5))
        state = _states(att, o, gyr, acc, mag)
        mgr.reset(state(0))
        first = mgr._stores[type(att)].md.constants["attitude"].state.tensors["beta"].clone()
        mgr.reset(state(1), [0, 1])
        second = mgr._stores[type(att)].md.constants["attitude"].state.tensors["beta"].clone()
        return first, second

    first, second = gains(0)
    assert first.min() >= 0.05 and first.max() <= 0.5 and first.std() > 0.08  # U(0.05, 0.5): sd 0.13
    assert (second[:2] != first[:2]).all() and torch.equal(second[2:], first[2:])
    torch.testing.assert_close(gains(0)[0], first, rtol=0, atol=0)
    assert not torch.equal(gains(1)[0], first)


def test_initialized_from_the_truth_the_first_estimate_is_off_by_exactly_the_configured_angle():
    """beta = 0 and no rotation: the update leaves the initial state, so the first reading's tilt error
    is the configured 7 degrees about a horizontal axis drawn per env."""
    b = 16
    gyr, acc, mag = _log(2, b)
    gyr[:] = 0.0
    tilt = torch.tensor([math.cos(0.2), math.sin(0.2), 0.0, 0.0])  # the truth: rolled 0.4 rad
    mgr, att, o = _manager(
        b,
        estimator_beta=0.0,
        estimator_init="truth",
        estimator_init_error=7.0,
        outputs=("projected_gravity", "quaternion"),
    )
    mgr.reset(_states(att, o, gyr, acc, mag, truth=tilt.expand(b, 4))(0))
    est, true = att.read(), att.read_ground_truth()
    err = torch.rad2deg(torch.acos((est.projected_gravity * true.projected_gravity).sum(-1).clamp(-1, 1)))
    torch.testing.assert_close(err, torch.full((b,), 7.0), rtol=0, atol=2e-3)
    # about a horizontal axis: the turn's axis (from truth to estimate) has no world z component
    q, t = est.quaternion.double(), true.quaternion.double()
    rel = _mul(q, _conj(t))
    assert rel[:, 3].abs().max() < 1e-6
    assert torch.unique(torch.sign(rel[:, 1:3]), dim=0).shape[0] > 1  # the axes differ across envs


def _conj(q):
    return q * torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


def _mul(p, q):
    p0, p1, p2, p3 = p.unbind(-1)
    q0, q1, q2, q3 = q.unbind(-1)
    return torch.stack(
        [
            p0 * q0 - p1 * q1 - p2 * q2 - p3 * q3,
            p0 * q1 + p1 * q0 + p2 * q3 - p3 * q2,
            p0 * q2 - p1 * q3 + p2 * q0 + p3 * q1,
            p0 * q3 + p1 * q2 - p2 * q1 + p3 * q0,
        ],
        -1,
    )


def test_in_the_loop_mahonys_tilt_error_decays_as_exp_minus_kp_t():
    """A static IMU (level, no noise) whose estimate starts 5 degrees off: the tilt error after t seconds
    is 5 exp(-kp t) (small-angle closed form); kp = 1 instead of 2 misses it by 1.2 degrees."""
    b, n, kp = 4, 200, 2.0
    gyr, acc, mag = _log(n, b)
    gyr[:] = 0.0
    acc[:] = [0.0, 0.0, 9.81]
    mgr, att, o = _manager(
        b,
        estimator="mahony",
        estimator_kp=kp,
        estimator_ki=0.0,
        estimator_init="truth",
        estimator_init_error=5.0,
    )
    pg = _drive(mgr, att, _states(att, o, gyr, acc, mag), n)
    err = torch.rad2deg(torch.acos((-pg[..., 2].double()).clamp(-1, 1)))
    steps = torch.arange(n, dtype=torch.float64) + 1  # the reset sample is consumed: one step in
    # the continuous closed form within its O(kp dt) discretization, the discrete one (1 - kp dt)^k tightly
    assert (err - 5.0 * torch.exp(-kp * steps * DT)).abs().max() < 0.05
    assert (err - 5.0 * (1 - kp * DT) ** steps).abs().max() < 0.01  # float32 acos near 0: ~0.005 deg


@pytest.mark.parametrize("executor", ["torch", "numpy"])
def test_estimator_none_reads_the_true_orientation_and_orientation_noise_is_white_with_its_std(executor):
    """``estimator="none"``: the orientation outputs are the truth (bit for bit) and ``ang_vel`` the
    measured gyroscope; ``orientation_noise`` adds N(0, std) per step and component to the orientation
    outputs only (the Isaac Lab-style observation noise)."""
    n, b = 400, 8
    gyr, acc, mag = _log(n, b)
    rng = np.random.default_rng(3)
    truth = torch.from_numpy(rng.normal(size=(b, 4))).float()
    truth = truth / truth.norm(dim=1, keepdim=True)
    outputs = ("projected_gravity", "roll_pitch", "ang_vel")
    runs = {}
    for std in (0.0, 0.05):
        mgr, att, o = _manager(b, executor, estimator="none", orientation_noise=std, outputs=outputs)
        runs[std] = (
            _drive(mgr, att, _states(att, o, gyr, acc, mag, truth=truth), n),
            att.read_ground_truth(),
        )
    clean, gt = runs[0.0]
    for field in ("projected_gravity", "roll_pitch"):
        assert torch.equal(getattr(clean, field)[:, -1], getattr(gt, field))
    torch.testing.assert_close(
        clean.ang_vel, torch.from_numpy(gyr.transpose(1, 0, 2)).float(), rtol=0, atol=0
    )
    noisy = runs[0.05][0]
    assert torch.equal(noisy.ang_vel, clean.ang_vel)  # the rate is not perturbed
    residual = torch.cat([(noisy.projected_gravity - clean.projected_gravity).reshape(-1),
                          (noisy.roll_pitch - clean.roll_pitch).reshape(-1)]).double()  # fmt: skip
    m = residual.numel()  # 16,000 draws: the sample sd within 3% (~5 standard errors), the mean within 5 se
    assert abs(residual.std().item() / 0.05 - 1) < 0.03 and abs(residual.mean().item()) < 5 * 0.05 / m**0.5
    r = (noisy.projected_gravity - clean.projected_gravity).double()  # (B, steps, 3)
    lag1 = torch.corrcoef(torch.stack([r[:, 1:].reshape(-1), r[:, :-1].reshape(-1)]))[0, 1]
    assert abs(lag1) < 5 / r[:, 1:].numel() ** 0.5  # white: no correlation from one step to the next


def test_orientation_noise_is_refused_when_negative():
    with pytest.raises(ValueError, match=r"orientation_noise.*-0\.1.*>= 0"):
        sg.AttitudeOptions(body="torso", orientation_noise=-0.1)
