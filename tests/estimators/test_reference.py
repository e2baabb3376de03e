"""The batched estimators against the slow per-sample references of the papers (tests/estimators/
reference.py): numpy and torch, float64 to ~1e-12 and float32 loosely; a batch of B envs equals B single
runs bit for bit; the two executors give the same bits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sensorgym.estimators import Madgwick, Mahony

from . import reference as ref

RATE = 200.0


def random_log(seed: int, n: int = 300, batch: int | None = None) -> tuple[np.ndarray, ...]:
    """A moving, noisy IMU log (rad/s, m/s², µT) and a random unit q0."""
    rng = np.random.default_rng(seed)
    shape = (n, 3) if batch is None else (batch, n, 3)
    gyr = rng.normal(0.0, 1.0, shape)
    acc = rng.normal(0.0, 2.0, shape) + np.array([0.0, 0.0, 9.81])
    mag = rng.normal(0.0, 5.0, shape) + np.array([18.0, 0.0, -45.0])
    q0 = rng.normal(size=4 if batch is None else (batch, 4))
    return gyr, acc, mag, q0 / np.linalg.norm(q0, axis=-1, keepdims=True)


def reference_run(filt, gyr, acc, mag, q0) -> np.ndarray:
    dt = 1.0 / filt.rate
    if isinstance(filt, Madgwick):
        scale = 0.5 if filt.earth_field == "c_code" else 1.0
        return np.array(ref.madgwick(q0, gyr, acc, mag, filt.gains["beta"], dt, scale))
    return np.array(ref.mahony(q0, gyr, acc, mag, filt.gains["kp"], filt.gains["ki"], dt)[0])


FILTERS = [
    Madgwick(beta=0.3, rate=RATE),
    Madgwick(beta=0.3, rate=RATE, earth_field="c_code"),
    Mahony(kp=1.5, ki=0.4, rate=RATE),
    Mahony(kp=0.5, ki=0.0, rate=RATE),
]


@pytest.mark.parametrize("filt", FILTERS, ids=repr)
@pytest.mark.parametrize("axes", [6, 9])
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_matches_the_paper_reference_in_float64(filt, axes, kind):
    gyr, acc, mag, q0 = random_log(1)
    mag = mag if axes == 9 else None
    expected = reference_run(filt, gyr, acc, mag, q0)
    conv = (lambda x: x) if kind == "numpy" else (lambda x: None if x is None else torch.tensor(x))
    args = tuple(conv(x) for x in (gyr, acc, mag))
    got = filt.run(*args, q0=q0)
    got = got.numpy() if kind == "torch" else got
    assert got.dtype == np.float64 and got.shape == (300, 4)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("filt", FILTERS, ids=repr)
def test_float32_follows_the_reference_loosely(filt):
    gyr, acc, mag, q0 = random_log(2)
    expected = reference_run(filt, gyr, acc, mag, q0)
    f32 = [x.astype(np.float32) for x in (gyr, acc, mag)]
    got = filt.run(*f32, q0=q0)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=0, atol=2e-4)
    got_t = filt.run(*(torch.tensor(x) for x in f32), q0=q0)
    assert got_t.dtype == torch.float32
    np.testing.assert_array_equal(got_t.numpy(), got)  # float32 too: the same bits on both executors


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31),
    gain=st.floats(0.0, 3.0),
    ki=st.floats(0.0, 1.0),
    mahony=st.booleans(),
    axes=st.sampled_from([6, 9]),
    zero_acc=st.booleans(),
    zero_mag=st.booleans(),
)
def test_property_any_gain_and_log(seed, gain, ki, mahony, axes, zero_acc, zero_mag):
    """Random gains, logs and starts; some samples with the accelerometer or magnetometer reading zero
    (that correction is skipped for that sample only)."""
    gyr, acc, mag, q0 = random_log(seed, n=40)
    if zero_acc:
        acc[::7] = 0.0
    if zero_mag:
        mag[::5] = 0.0
    filt = Mahony(kp=gain, ki=ki, rate=RATE) if mahony else Madgwick(beta=gain, rate=RATE)
    mag = mag if axes == 9 else None
    got = filt.run(gyr, acc, mag, q0=q0)
    np.testing.assert_allclose(got, reference_run(filt, gyr, acc, mag, q0), rtol=0, atol=1e-12)
    assert np.all(np.isfinite(got))


def test_mahony_bias_estimate_follows_the_reference():
    gyr, acc, mag, q0 = random_log(3)
    filt = Mahony(kp=1.0, ki=0.7, rate=RATE)
    _, biases = ref.mahony(q0, gyr, acc, mag, 1.0, 0.7, 1.0 / RATE)
    state = filt.new_state(1, executor="numpy")
    filt.initialize(state, q0=q0)
    for i in range(len(gyr)):
        filt.update(state, gyr[i : i + 1], acc[i : i + 1], mag[i : i + 1])
        np.testing.assert_allclose(filt.bias(state)[0], biases[i], rtol=0, atol=1e-12)


@pytest.mark.parametrize("filt", FILTERS, ids=repr)
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_a_batch_equals_single_runs_bit_for_bit(filt, kind):
    """B envs with their own logs and starts in one run give exactly the B single runs."""
    gyr, acc, mag, q0 = random_log(4, n=120, batch=5)
    conv = (lambda x: x) if kind == "numpy" else torch.tensor
    batch = filt.run(conv(gyr), conv(acc), conv(mag), q0=conv(q0))
    assert tuple(batch.shape) == (5, 120, 4)
    for b in range(5):
        single = filt.run(conv(gyr[b]), conv(acc[b]), conv(mag[b]), q0=conv(q0[b]))
        assert np.array_equal(np.asarray(batch[b]), np.asarray(single))


@pytest.mark.parametrize("cls", [Madgwick, Mahony])
def test_per_env_gains_equal_single_runs(cls):
    """Gains written per env into the state: each env runs as a filter of its own gains."""
    gyr, acc, mag, q0 = random_log(5, n=80, batch=3)
    gains = [{"beta": b} for b in (0.05, 0.5, 2.0)] if cls is Madgwick else [
        {"kp": kp, "ki": ki} for kp, ki in ((0.2, 0.0), (1.0, 0.3), (4.0, 1.0))
    ]  # fmt: skip
    rates = (100.0, 200.0, 285.7)
    proto = cls(**gains[0], rate=rates[0])
    state = proto.new_state(3, executor="numpy")
    for key in gains[0]:
        state.tensors[key].copy_(torch.tensor([g[key] for g in gains], dtype=torch.float64))
    state.tensors["dt"].copy_(1.0 / torch.tensor(rates, dtype=torch.float64))
    proto.initialize(state, q0=q0)
    out = []
    for i in range(gyr.shape[1]):
        proto.update(state, gyr[:, i], acc[:, i], mag[:, i])
        out.append(proto.quaternion(state).copy())
    out = np.stack(out, axis=1)
    for b in range(3):
        single = cls(**gains[b], rate=rates[b]).run(gyr[b], acc[b], mag[b], q0=q0[b])
        assert np.array_equal(out[b], single)


@pytest.mark.parametrize("filt", FILTERS, ids=repr)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_executors_give_the_same_bits(filt, dtype):
    gyr, acc, mag, q0 = (x.astype(dtype) for x in random_log(6, n=300, batch=40))
    on_numpy = filt.run(gyr, acc, mag, q0=q0)
    on_torch = filt.run(*(torch.tensor(x) for x in (gyr, acc, mag)), q0=torch.tensor(q0))
    assert np.array_equal(on_numpy, on_torch.numpy())


def test_why_the_torch_executor_takes_numpys_square_root_on_cpu():
    """torch's own CPU square root is 1 ulp off for some inputs (0.7% of these with torch 2.13 on AVX-512;
    none on a CPU where torch's kernel is exact); the op the estimators use gives numpy's correctly
    rounded result on the same tensors."""
    from sensorgym.estimators._ops import ops_for

    x = np.exp(np.random.default_rng(8).uniform(-30, 30, 4096))
    exact = np.sqrt(x)
    out = torch.empty(4096, dtype=torch.float64)
    ops_for("torch", "cpu").sqrt(torch.from_numpy(x), out)
    assert np.array_equal(out.numpy(), exact)


def test_the_report_gradient_is_what_the_step_uses():
    """The closed form the step computes, −2·(d ⊗ q ⊗ f) − 2(d·f)q summed over the references, equals the
    report's J^T f (a random point, every term; the reference's Jacobians are the report's)."""
    rng = np.random.default_rng(7)
    for _ in range(20):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        a, m = (v / np.linalg.norm(v) for v in rng.normal(size=(2, 3)))
        h = ref.qmul(ref.qmul(q, [0.0, *m]), [q[0], -q[1], -q[2], -q[3]])
        b = np.array([0.0, np.hypot(h[1], h[2]), 0.0, h[3]])
        rot = ref.rotation_matrix(q)
        f_g = np.array(rot)[2] - a  # R^T e_z - a
        f_b = np.array(rot).T @ b[1:] - m
        total = np.zeros(4)
        for d, f in ((np.array([0.0, 0.0, 0.0, 1.0]), f_g), (b, f_b)):
            total += -2 * np.array(ref.qmul(d, ref.qmul(q, [0.0, *f]))) - 2 * (d[1:] @ f) * q
        np.testing.assert_allclose(total, ref.madgwick_gradient(q, a, m), atol=1e-12)
