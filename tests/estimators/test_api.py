"""The pinned offline API (``Madgwick(beta=..., rate=...)``, ``Mahony(kp=..., ki=..., rate=...)``,
``.run(gyr, acc, mag=None, q0=None)``), its bad input, the per-step API the pipeline will call (state,
mask, checkpoint, no allocation per step), the outputs and the extension point."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
import torch

import sensorgym.estimators as est
from sensorgym.estimators import AttitudeEstimator, Madgwick, Mahony, integrate_rate, pad
from sensorgym.estimators.quaternion import (
    attitude_errors,
    projected_gravity,
    quat_multiply,
    roll_pitch,
    rotate,
)

from .test_reference import random_log


def test_import_sensorgym_does_not_load_the_estimators():
    code = (
        "import sys, sensorgym\n"
        "assert 'sensorgym.estimators' not in sys.modules\n"
        "import sensorgym.estimators as e\n"
        "assert e.Madgwick and e.Mahony\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "filt", [Madgwick(beta=0.1, rate=100.0), Mahony(kp=1.0, ki=0.1, rate=100.0)], ids=repr
)
def test_run_shapes_kinds_and_dtypes(filt):
    gyr, acc, mag, _ = random_log(21, n=30, batch=3)
    q = filt.run(gyr[0], acc[0])
    assert isinstance(q, np.ndarray) and q.shape == (30, 4) and q.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, atol=1e-12)
    qb = filt.run(gyr, acc, mag)
    assert qb.shape == (3, 30, 4) and qb.flags.c_contiguous
    qt = filt.run(torch.tensor(gyr, dtype=torch.float32), torch.tensor(acc, dtype=torch.float32))
    assert isinstance(qt, torch.Tensor) and qt.dtype == torch.float32 and qt.shape == (3, 30, 4)
    assert filt.run(gyr[0].astype(int), acc[0].astype(int)).dtype == np.float64
    assert filt.run(np.zeros((0, 3)), np.zeros((0, 3))).shape == (0, 4)
    assert filt.run(gyr[0].tolist(), acc[0].tolist()).shape == (30, 4)  # sequences are arrays too


def test_gains_per_env_run_one_log_through_each():
    gyr, acc, mag, _ = random_log(22, n=50)
    both = Mahony(kp=[0.5, 2.0], ki=[0.0, 0.1], rate=100.0).run(gyr, acc, mag)
    assert both.shape == (2, 50, 4)
    np.testing.assert_array_equal(both[1], Mahony(kp=2.0, ki=0.1, rate=100.0).run(gyr, acc, mag))
    mixed = Mahony(kp=[0.5, 2.0], ki=0.1, rate=100.0)  # a number applies to every env
    np.testing.assert_array_equal(mixed.run(gyr, acc)[0], Mahony(kp=0.5, ki=0.1, rate=100.0).run(gyr, acc))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: Madgwick(beta=0.1, rate=0.0),
            r"Madgwick\(rate=0.0\): the sample rate in Hz must be a positive",
        ),
        (lambda: Madgwick(beta=-1.0, rate=100.0), r"Madgwick\(beta=-1.0\): a gain is a number >= 0"),
        (lambda: Mahony(kp=float("nan"), ki=0.0, rate=100.0), r"Mahony\(kp=nan\)"),
        (
            lambda: Mahony(kp=[1.0, 2.0], ki=[0.1], rate=1.0),
            r"Mahony\(ki=\[0.1\]\): 1 values; other gains have 2",
        ),
        (
            lambda: Madgwick(beta=0.1, rate=100.0, earth_field="half"),
            r"earth_field='half'.*'paper'.*'c_code'",
        ),
        (lambda: Madgwick(beta=[0.1, 0.2], rate=1.0).new_state(3), r"given for 2 envs, not 3"),
    ],
)
def test_bad_options_are_one_clear_line(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_bad_logs_are_one_clear_line():
    f = Madgwick(beta=0.1, rate=100.0)
    with pytest.raises(
        ValueError, match=r"Madgwick.run: expected gyr, acc of one shape \(N, 3\) or \(B, N, 3\); "
    ):
        f.run(np.zeros((5, 3)), np.zeros((6, 3)))
    with pytest.raises(ValueError, match=r"got gyr \(5, 4\)"):
        f.run(np.zeros((5, 4)), np.zeros((5, 4)))
    with pytest.raises(TypeError, match="gyr and acc must all be numpy arrays or all torch tensors"):
        f.run(np.zeros((5, 3)), torch.zeros(5, 3))
    with pytest.raises(ValueError, match=r"Madgwick\.initialize: give q0 or a first accelerometer sample"):
        f.initialize(f.new_state(1))


def test_the_first_sample_starts_the_filter():
    """Without q0 the state before sample 0 is the frame of the first sample: z along the accelerometer,
    x along the horizontal field; an accelerometer reading zero starts at the identity."""
    rng = np.random.default_rng(23)
    acc = rng.normal(size=(4, 3)) * [1, 1, 3]
    mag = rng.normal(size=(4, 3))
    state = Mahony(kp=1.0, ki=0.0, rate=100.0).new_state(4)
    Mahony(kp=1.0, ki=0.0, rate=100.0).initialize(state, torch.tensor(acc), torch.tensor(mag))
    q = state.tensors["q"].T.numpy()
    up = rotate(q, acc) / np.linalg.norm(acc, axis=1, keepdims=True)
    np.testing.assert_allclose(up, np.tile([0, 0, 1.0], (4, 1)), atol=1e-12)
    field = rotate(q, mag)
    np.testing.assert_allclose(field[:, 1], 0.0, atol=1e-12)
    assert np.all(field[:, 0] > 0)
    Mahony(kp=1.0, ki=0.0, rate=100.0).initialize(state, np.zeros((4, 3)))
    np.testing.assert_array_equal(state.tensors["q"].T.numpy(), np.tile([1.0, 0, 0, 0], (4, 1)))


@pytest.mark.parametrize("cls", [Madgwick, Mahony])
def test_a_sample_reading_zero_skips_its_correction(cls):
    """At rest with the gyroscope and accelerometer reading zero nothing moves a tilted estimate; a
    magnetometer reading zero leaves the 9-axis update equal to the 6-axis one."""
    gains = {"beta": 0.5} if cls is Madgwick else {"kp": 2.0, "ki": 0.5}
    q0 = np.array([0.9, 0.3, -0.2, 0.1]) / np.linalg.norm([0.9, 0.3, -0.2, 0.1])
    zeros = np.zeros((20, 3))
    q = cls(**gains, rate=100.0).run(zeros, zeros, zeros, q0=q0)
    np.testing.assert_allclose(q, np.tile(q0, (20, 1)), atol=1e-15)
    gyr, acc, _, _ = random_log(24, n=40)
    f = cls(**gains, rate=100.0)
    np.testing.assert_array_equal(f.run(gyr, acc, zeros.repeat(2, 0), q0=q0), f.run(gyr, acc, q0=q0))


@pytest.mark.parametrize("cls", [Madgwick, Mahony])
@pytest.mark.parametrize("executor", ["numpy", "torch"])
def test_masked_envs_hold_and_the_others_step(cls, executor):
    gains = {"beta": 0.2} if cls is Madgwick else {"kp": 1.0, "ki": 0.5}
    f = cls(**gains, rate=100.0)
    gyr, acc, mag, q0 = random_log(25, n=60, batch=4)
    if executor == "torch":
        gyr, acc, mag = (torch.tensor(x) for x in (gyr, acc, mag))
    state, free = f.new_state(4, executor=executor), f.new_state(4, executor=executor)
    for s in (state, free):
        f.initialize(s, q0=q0)
    rng = np.random.default_rng(26)
    for i in range(60):
        mask = rng.random(4) < 0.5
        before = state.state_dict()
        free.load_state_dict(before)
        f.update(
            state, gyr[:, i], acc[:, i], mag[:, i], mask=mask if executor == "numpy" else torch.tensor(mask)
        )
        f.update(free, gyr[:, i], acc[:, i], mag[:, i])
        held, took = torch.tensor(~mask), torch.tensor(mask)
        for name in state.persistent:
            assert torch.equal(state.tensors[name][..., held], before[name][..., held]), name
            assert torch.equal(state.tensors[name][..., took], free.tensors[name][..., took]), name
        assert took.any() or held.any()


def test_a_checkpoint_resumes_bit_for_bit():
    f = Mahony(kp=1.0, ki=0.3, rate=100.0)
    gyr, acc, mag, q0 = random_log(27, n=100, batch=2)
    a, b = f.new_state(2, executor="numpy"), f.new_state(2, executor="numpy")
    f.initialize(a, q0=q0)
    for i in range(50):
        f.update(a, gyr[:, i], acc[:, i], mag[:, i])
    b.load_state_dict(a.state_dict())
    for i in range(50, 100):
        f.update(a, gyr[:, i], acc[:, i], mag[:, i])
        f.update(b, gyr[:, i], acc[:, i], mag[:, i])
    np.testing.assert_array_equal(f.quaternion(a), f.quaternion(b))
    np.testing.assert_array_equal(f.bias(a), f.bias(b))
    with pytest.raises(KeyError, match="missing"):
        b.load_state_dict({"q": a.tensors["q"]})


@pytest.mark.parametrize("cls", [Madgwick, Mahony])
def test_a_step_allocates_nothing(cls):
    """After the first step (which records the step's op list), a step makes no new arrays: the traced
    memory does not grow over 300 steps."""
    gains = {"beta": 0.2} if cls is Madgwick else {"kp": 1.0, "ki": 0.5}
    f = cls(**gains, rate=100.0)
    state = f.new_state(64, executor="numpy")
    arr = state.arrays
    arr.g.v[:] = 0.1
    arr.a.v[:] = [[0.1], [0.2], [9.8]]
    arr.m.v[:] = [[20.0], [1.0], [-40.0]]
    f.step(state, True)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for _ in range(300):
        f.step(state, True)
    grown = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert grown < 4096, (
        grown
    )  # one 64-env float64 row is 512 bytes; 300 steps of any array would be far more


def test_outputs():
    rng = np.random.default_rng(28)
    q = rng.normal(size=(5, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    f = Madgwick(beta=0.1, rate=100.0)
    for executor in ("numpy", "torch"):
        state = f.new_state(5, executor=executor)
        f.initialize(state, q0=q)
        out = np.empty((5, 3)) if executor == "numpy" else torch.empty(5, 3, dtype=torch.float64)
        f.projected_gravity(state, out)
        np.testing.assert_allclose(np.asarray(out), projected_gravity(q), atol=1e-15)
    # gravity's direction: what a resting accelerometer reads, negated and normalized
    down_in_sensor = np.array([rotate(qi * [1, -1, -1, -1], np.array([0, 0, -1.0])) for qi in q])
    np.testing.assert_allclose(projected_gravity(q), down_in_sensor, atol=1e-15)
    roll, pitch = 0.3, -0.4
    q_rp = quat_multiply(
        [np.cos(pitch / 2), 0, np.sin(pitch / 2), 0], [np.cos(roll / 2), np.sin(roll / 2), 0, 0]
    )
    np.testing.assert_allclose(roll_pitch(q_rp), [roll, pitch], atol=1e-15)
    np.testing.assert_allclose(roll_pitch(torch.tensor(q_rp)).numpy(), [roll, pitch], atol=1e-15)
    heading_only = quat_multiply([np.cos(0.05), 0, 0, np.sin(0.05)], q)  # 0.1 rad about the earth's z
    np.testing.assert_allclose(attitude_errors(heading_only, q), np.tile([0.1, 0.1, 0.0], (5, 1)), atol=1e-7)
    tilt_only = quat_multiply([np.cos(0.05), np.sin(0.05), 0, 0], q)
    np.testing.assert_allclose(attitude_errors(tilt_only, q), np.tile([0.1, 0.0, 0.1], (5, 1)), atol=1e-7)


def test_a_third_estimator_needs_only_a_subclass():
    """The extension point: a gyro integrator with its own state row (a sample counter) and gain, masked
    updates and run() from the base class, no change to the engine."""

    class CountingGyro(AttitudeEstimator):
        gain_names = ("gain",)
        state_rows = {"count": 1}  # noqa: RUF012

        def _step(self, state, magnetometer):
            o, A = state.ops, state.arrays
            pad(o, A.g)
            integrate_rate(o, A, A.g)
            o.add(A.count, A.gain, A.count_new)

    f = CountingGyro(rate=50.0, gain=1.0)
    gyr = np.tile([0.0, 0.0, np.pi], (50, 1))  # half a turn in a second
    q = f.run(gyr, np.tile([0, 0, 9.8], (50, 1)), q0=[1.0, 0, 0, 0])
    # each first-order step then normalization turns by 2·atan(ω·dt/2), not ω·dt
    assert 2 * np.arctan2(q[-1, 3], q[-1, 0]) == pytest.approx(50 * 2 * np.arctan(np.pi / 50 / 2), abs=1e-12)
    state = f.new_state(2, executor="numpy")
    f.initialize(state, q0=[1.0, 0, 0, 0])
    f.update(state, gyr[:2], gyr[:2], mask=np.array([True, False]))
    assert state.tensors["count"].tolist() == [1.0, 0.0]
    assert set(est.__all__) >= {"Madgwick", "Mahony", "AttitudeEstimator", "projected_gravity", "roll_pitch"}


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_the_same_bits_as_on_cpu():
    gyr, acc, mag, q0 = random_log(29, n=200, batch=8)
    for filt in (Madgwick(beta=0.2, rate=100.0, earth_field="c_code"), Mahony(kp=1.0, ki=0.2, rate=100.0)):
        cpu = filt.run(gyr, acc, mag, q0=q0)
        gpu = filt.run(*(torch.tensor(x, device="cuda") for x in (gyr, acc, mag)), q0=q0)
        assert gpu.device.type == "cuda"
        np.testing.assert_array_equal(gpu.cpu().numpy(), cpu)
