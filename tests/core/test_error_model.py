"""SPEC 5.1: a sensor's error model in its own units (noise density, random-walk density, Gauss-Markov bias
instability, scale factor, bandwidth, bursty losses).

Four kinds of checks, each written from the SPEC and not from the code: the manager against the slow
per-env reference (tests/core/reference.py) on random configurations, on both executors; statistics
against closed forms with fixed seeds (tolerances from each statistic's own standard error); the Allan
deviation of simulated noise computed by ``allantools`` (a library nobody here wrote) against its
closed form; exact values where the SPEC defines them (scale factor, step response, option errors).
"""

from __future__ import annotations

import copy
import math

import allantools
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sensorgym as sg
from sensorgym.core.options import bounds_of

from ..helpers import FilterOptions, as_np
from .reference import ReferenceManager

DT = 0.01


def trace(
    steps: int, b: int = 64, seed: int = 0, dt: float = DT, value: float = 0.0, executor="auto", **opts
):
    """``(steps + 1, b)`` measured reads of one scalar sensor fed a constant."""
    mgr = sg.SensorManager(num_envs=b, dt=dt, seed=seed, executor=executor)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), **opts))
    state = {"x": torch.full((b, 1), value)}
    mgr.reset(state)
    out = np.empty((steps + 1, b), np.float64)
    out[0] = as_np(s.read())[:, 0]
    for t in range(1, steps + 1):
        mgr.step(state)
        out[t] = as_np(s.read())[:, 0]
    return out


def autocorrelation(x: np.ndarray, lag: int) -> float:
    """Lag-``lag`` autocorrelation over time, pooled over envs (columns), of a zero-mean stationary trace."""
    return float(np.sum(x[lag:] * x[:-lag]) / np.sum(x * x))


# -- the manager against the slow reference -------------------------------------------------------------
MODEL_KEYS = ("noise_density", "random_walk_density", "bias_instability", "scale_factor", "bandwidth")


def _model_options(draw) -> dict:
    kw = {}
    if draw(st.booleans()):
        kw["noise_density"] = draw(st.sampled_from([0.05, [0.0, 0.1], sg.Uniform(0.01, 0.1)]))
    else:
        kw["noise"] = draw(st.sampled_from([0.0, 0.5, sg.Uniform(0.0, 1.0)]))
    if draw(st.booleans()):
        kw["random_walk_density"] = draw(st.sampled_from([0.2, sg.LogUniform(0.01, 0.3)]))
    else:
        kw["random_walk"] = draw(st.sampled_from([0.0, 0.3]))
    if draw(st.booleans()):
        kw["bias_instability"] = draw(st.sampled_from([0.5, [0.0, 0.4], sg.Uniform(0.1, 0.5)]))
        kw["bias_correlation_time"] = draw(st.sampled_from([0.5, 3.0, sg.Uniform(0.2, 2.0)]))
    if draw(st.booleans()):
        kw["scale_factor"] = draw(st.sampled_from([0.05, [-0.1, 0.2], sg.Uniform(-0.05, 0.05)]))
    kw["update_period"] = draw(
        st.sampled_from([0.0, 0.02, 0.25, 0.1, sg.Uniform(0.02, 0.3), sg.Choice([0.0, 0.05])])
    )
    if draw(st.booleans()):  # cut-offs below the Nyquist rate of the longest own sample interval
        nyquist = 1.0 / (2.0 * max(bounds_of(kw["update_period"])[1], 0.1))  # dt = 0.1
        kw["bandwidth"] = draw(
            st.sampled_from([0.4 * nyquist, [0.0, 0.8 * nyquist], sg.Uniform(0.1 * nyquist, 0.95 * nyquist)])
        )
    kw["dropout"] = draw(st.sampled_from([0.0, 0.2, sg.Uniform(0.0, 0.3)]))
    if kw["dropout"] != 0.0 and draw(st.booleans()):  # a burst length needs losses (refused without)
        kw["dropout_burst"] = draw(st.sampled_from([1.0, 3.0, sg.Uniform(1.0, 4.0)]))
    kw["delay"] = draw(st.sampled_from([0.0, 0.1, 0.2]))
    kw["history_length"] = draw(st.integers(0, 3))
    kw["bias"] = draw(st.sampled_from([0.0, [0.25, -0.5]]))
    return kw


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_manager_matches_the_slow_reference_with_the_error_model(data):
    """Random SPEC 5.1 configurations (values, per-component values and distributions; own rates below,
    at and above dt; bursty losses; delays and history), resets folded into steps and partial resets, on
    both executors and both random sources: the reads equal the reference's (to float32 rounding of the
    coefficients, which the two compute with different but equivalent float64 formulas)."""
    draw = data.draw
    b = draw(st.integers(1, 4))
    dt = 0.1
    mgr = sg.SensorManager(
        num_envs=b, dt=dt, seed=draw(st.integers(0, 1000)), per_env_rng=draw(st.booleans()),
        executor=draw(st.sampled_from(["torch", "numpy"])),
    )  # fmt: skip
    for i in range(draw(st.integers(1, 3))):
        kw = _model_options(draw)
        if draw(st.booleans()):
            mgr.add_sensor(sg.StateSensorOptions(key="x", index=[0, 1], **kw), f"s{i}")
        else:
            mgr.add_sensor(FilterOptions(width=2, alpha=draw(st.sampled_from([0.0, 0.5])), **kw), f"s{i}")
    g = torch.Generator().manual_seed(draw(st.integers(0, 1000)))

    def state(t):
        return {"x": torch.randint(0, 40, (b, 3), generator=g).float() * 0.5 + 10.0 * t}

    def compare(where):
        for s in mgr.sensors:
            np.testing.assert_allclose(
                as_np(s.read(0)), ref.read(s, False, 0), rtol=2e-5, atol=2e-5, err_msg=f"{where} {s.name}"
            )
            np.testing.assert_array_equal(as_np(s.read_ground_truth(0)), ref.read(s, True, 0))
            if s.options.history_length:
                np.testing.assert_allclose(as_np(s.read()), ref.read(s), rtol=2e-5, atol=2e-5)
            np.testing.assert_array_equal(as_np(s.read_age()), ref.read_age(s), err_msg=f"{where} age")

    ref = ReferenceManager(mgr)
    x = state(0)
    mgr.reset(x)
    ref.reset(x, np.ones(b, bool))
    compare("reset")
    for t in range(1, draw(st.integers(1, 30))):
        x = state(t)
        action = draw(st.sampled_from(["step"] * 5 + ["step_reset", "reset"]))
        mask = None
        if action != "step":
            mask = np.array(draw(st.lists(st.booleans(), min_size=b, max_size=b)), dtype=bool)
        if action == "step":
            mgr.step(x)
            ref.step(x)
        elif action == "step_reset":
            mgr.step(x, reset_mask=mask)
            ref.step(x, mask)
        else:
            mgr.reset(x, envs_idx=mask)
            ref.reset(x, mask)
        compare(f"t={t} {action}")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_both_executors_give_the_same_bits(seed):
    """Every term at once, autoresets and a partial reset: numpy executor == torch executor, bit for bit,
    the whole state included."""
    opts = dict(
        noise_density=[0.1, 0.0, 0.05], noise=[0.0, 0.2, 0.0], random_walk_density=0.05,
        bias_instability=sg.Uniform(0.1, 0.3), bias_correlation_time=2.0, scale_factor=[0.01, -0.02, 0.0],
        bandwidth=[3.0, 0.0, sg.Uniform(1.0, 6.0)], update_period=sg.Uniform(0.005, 0.03),
        dropout=0.1, dropout_burst=3.0, delay=0.02, history_length=2,
    )  # fmt: skip
    managers = []
    for executor in ("torch", "numpy"):
        mgr = sg.SensorManager(num_envs=5, dt=DT, seed=seed, executor=executor)
        mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), **opts), "imu")
        managers.append(mgr)
    gen = torch.Generator().manual_seed(seed)
    for t in range(60):
        x = {"x": torch.randn(5, 3, generator=gen)}
        mask = torch.rand(5, generator=gen) < 0.1
        for mgr in managers:
            if t == 0:
                mgr.reset(x)
            elif t == 30:
                mgr.reset(x, envs_idx=[1, 3])
            else:
                mgr.step(x, reset_mask=mask)
        a, b = (as_np(m.sensors[0].read()) for m in managers)
        np.testing.assert_array_equal(a, b)
    sa, sb = (m.state_dict() for m in managers)
    for (k, va), vb in zip(
        sa["classes"]["StateSensor"]["tensors"].items(),
        sb["classes"]["StateSensor"]["tensors"].values(),
        strict=True,
    ):
        assert torch.equal(va, vb), k


def test_compiled_kernel_equals_the_eager_one_bit_for_bit():
    opts = dict(
        noise_density=0.1, random_walk_density=0.05, bias_instability=0.2, bias_correlation_time=1.0,
        scale_factor=0.02, bandwidth=[3.0, 0.0], update_period=0.02, dropout=0.2, dropout_burst=2.0,
    )  # fmt: skip
    reads = []
    for compile_ in (False, True):
        mgr = sg.SensorManager(num_envs=4, dt=DT, seed=3, compile=compile_, executor="torch")
        s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), **opts))
        x = {"x": torch.linspace(-1, 1, 8).reshape(4, 2)}
        mgr.reset(x)
        out = []
        for t in range(12):
            mgr.step(x, reset_mask=torch.tensor([t == 5, False, False, t == 9]))
            out.append(s.read().clone())
        reads.append(torch.stack(out))
    assert torch.equal(reads[0], reads[1])


# -- statistics against closed forms ---------------------------------------------------------------------
@pytest.mark.parametrize(("update_period", "seed"), [(0.0, 0), (0.002, 1), (0.04, 2)])
def test_noise_density_gives_a_per_sample_spread_of_n_over_sqrt_ts(update_period, seed):
    """sigma = N / sqrt(T_s) for T_s = dt, T_s < dt (a 500 Hz sensor read at 100 Hz) and T_s > dt (25 Hz:
    the spread of the samples taken)."""
    n = 0.02
    x = trace(1000, seed=seed, noise_density=n, update_period=update_period, update_phase=0.0)
    t_s = update_period or DT
    if update_period > DT:
        x = x[:: round(update_period / DT)]  # one read per sample
    expected = n / math.sqrt(t_s)
    se = expected / math.sqrt(2 * x.size)
    assert abs(x.std() - expected) < 5 * se, (x.std(), expected)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_walk_density_variance_grows_as_k2_t(seed):
    """The drift's variance after t seconds is K^2 t, independent of the rate."""
    k = 0.3
    x = trace(400, b=512, seed=seed, random_walk_density=k)
    for step in (100, 400):
        var, expected = x[step].var(), k * k * step * DT
        assert abs(var / expected - 1) < 5 * math.sqrt(2 / 512), (step, var, expected)
    assert np.all(x[0] == 0)  # zeroed at the reset


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gauss_markov_bias_is_stationary_with_exponential_autocorrelation(seed):
    sigma, tau = 0.4, 0.2
    x = trace(2000, b=64, seed=seed, bias_instability=sigma, bias_correlation_time=tau)
    # stationary from the reset on: the spread at the reset and over the run is sigma
    assert abs(x[0].std() / sigma - 1) < 5 / math.sqrt(2 * 64)
    n_eff = x.size * DT / (2 * tau)  # independent samples: one per two correlation times
    assert abs(x.std() / sigma - 1) < 5 / math.sqrt(2 * n_eff)
    for lag in (1, 10, 20):
        rho = autocorrelation(x, lag)
        assert abs(rho - math.exp(-lag * DT / tau)) < 5 / math.sqrt(n_eff), (lag, rho)


@pytest.mark.parametrize(("update_period", "seed"), [(0.0, 0), (0.002, 1), (0.04, 2)])
def test_low_pass_filter_spread_and_autocorrelation_match_the_closed_form(update_period, seed):
    """A first-order filter on white noise: stationary spread sigma sqrt((1 - a) / (1 + a)) from the very
    first read, lag-k autocorrelation a^(m k) per read (m own samples per step; per sample above dt)."""
    n, f_c = 0.05, 4.0
    t_s = update_period or DT
    x = trace(3000, seed=seed, noise_density=n, bandwidth=f_c, update_period=update_period, update_phase=0.0)
    if update_period > DT:
        x = x[:: round(update_period / DT)]
    a = math.exp(-2 * math.pi * f_c * t_s)
    m = max(DT / t_s, 1.0)
    sigma = n / math.sqrt(t_s)
    expected = sigma * math.sqrt((1 - a) / (1 + a))
    rho1 = a**m
    n_eff = x.size * (1 - rho1) / (1 + rho1)
    assert abs(x[0].std() / expected - 1) < 5 / math.sqrt(2 * x.shape[1])  # stationary start
    assert abs(x.std() / expected - 1) < 5 / math.sqrt(2 * n_eff), (x.std(), expected)
    for lag in (1, 3):
        assert abs(autocorrelation(x, lag) - rho1**lag) < 5 / math.sqrt(n_eff)


def test_low_pass_step_response_is_exact():
    """No noise: after a step from 0 to 1 the read is 1 - a^(m s) after s steps (closed form), with
    m = dt / T_s own samples per step; the ground truth jumps at once."""
    f_c, t_s = 2.0, 0.0025
    mgr = sg.SensorManager(num_envs=1, dt=DT, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), bandwidth=f_c, update_period=t_s))
    mgr.reset({"x": torch.zeros(1, 1)})
    a_m = math.exp(-2 * math.pi * f_c * t_s) ** (DT / t_s)
    for step in range(1, 30):
        mgr.step({"x": torch.ones(1, 1)})
        assert float(s.read()) == pytest.approx(1 - a_m**step, rel=1e-6, abs=1e-7)
        assert float(s.read_ground_truth()) == 1.0


def test_a_lost_due_sample_still_advances_the_filter():
    """SPEC 5.1: a due sample that is lost is computed (it advances the filter) and not delivered. With a
    25 Hz sensor at 100 Hz and every sample after the reset lost but the third, the delivered value is the
    filter advanced three times."""
    f_c, t_s = 2.0, 0.04
    a = math.exp(-2 * math.pi * f_c * t_s)
    outs = {}
    for dropout in (0.0, 0.9):
        mgr = sg.SensorManager(num_envs=256, dt=DT, seed=0)
        s = mgr.add_sensor(
            sg.StateSensorOptions(
                key="x", shape=(1,), bandwidth=f_c, update_period=t_s, update_phase=0.0, dropout=dropout
            )
        )
        mgr.reset({"x": torch.zeros(256, 1)})
        reads = []
        for _ in range(12):
            mgr.step({"x": torch.ones(256, 1)})
            reads.append(as_np(s.read())[:, 0].copy())
        outs[dropout] = np.stack(reads)
    # without losses: the samples at steps 4, 8, 12 read 1 - a, 1 - a^2, 1 - a^3
    np.testing.assert_allclose(outs[0.0][[3, 7, 11]].mean(1), [1 - a, 1 - a**2, 1 - a**3], rtol=1e-6)
    # with losses: whatever was delivered is one of those values, never a filter that skipped a sample
    delivered = np.unique(outs[0.9][11])
    allowed = np.array([0.0, 1 - a, 1 - a**2, 1 - a**3])
    assert np.abs(delivered[:, None] - allowed[None, :]).min(1).max() < 1e-6, delivered
    assert np.isclose(outs[0.9][11], 1 - a**3, rtol=1e-6).any()  # some env kept only the third sample


@pytest.mark.parametrize(
    ("p", "burst", "seed"), [(0.1, 4.0, 0), (0.3, 2.0, 1), (0.05, 8.0, 2), (0.2, None, 3)]
)
def test_loss_fraction_and_mean_burst_match_the_chain(p, burst, seed):
    """Long-run loss fraction p and mean run of lost samples L (independent losses: 1 / (1 - p))."""
    x = trace(4000, b=64, seed=seed, noise=1.0, dropout=p, dropout_burst=burst)
    lost = x[1:] == x[:-1]  # a lost sample repeats the held one bit for bit (fresh noise never does)
    frac = lost.mean()
    runs = []
    for col in lost.T:
        edges = np.flatnonzero(np.diff(np.concatenate([[0], col.astype(int), [0]])))
        runs += list(edges[1::2] - edges[::2])
    mean_run = float(np.mean(runs))
    length = burst if burst is not None else 1 / (1 - p)
    # the run count is the sample: both statistics' standard errors follow from it
    n_runs = len(runs)
    assert abs(frac - p) < 5 * math.sqrt(p * (1 - p) / n_runs) * math.sqrt(length), (frac, p)
    assert abs(mean_run - length) < 5 * math.sqrt(max(length * (length - 1), 0.25) / n_runs), (
        mean_run,
        length,
    )


def test_allan_deviation_of_white_noise_and_random_walk_matches_theory_via_allantools():
    """The overlapping Allan deviation (computed by allantools) of a simulated sensor with noise density N
    and random-walk density K follows sigma^2(tau) = N^2 / tau + K^2 tau / 3 (IEEE 952)."""
    n, k, rate = 0.01, 0.002, 100.0
    x = trace(60_000, b=8, seed=5, noise_density=n, random_walk_density=k)
    taus = np.array([0.05, 0.2, 1.0, 5.0, 20.0, 50.0])
    theory = np.sqrt(n**2 / taus + k**2 * taus / 3)
    devs = []
    for env in range(x.shape[1]):
        t, dev, _, _ = allantools.oadev(x[:, env], rate=rate, data_type="freq", taus=taus)
        assert np.allclose(t, taus)
        devs.append(dev)
    dev = np.sqrt(np.mean(np.square(devs), axis=0))  # averaged over the 8 envs
    np.testing.assert_allclose(dev, theory, rtol=0.1)


def test_bias_instability_shows_in_the_allan_deviation_via_allantools():
    """A Gauss-Markov bias's Allan variance (closed form for a first-order Markov process, IEEE 952):
    q^2 tc / T * (1 - tc / (2T) (3 - 4 e^{-T/tc} + e^{-2T/tc})) with q^2 = sigma^2 (2 / tc) ... written in
    the variance form sigma_A^2(T) = (sigma^2 tc / T) (2 - (tc / T)(3 - 4 e^{-T/tc} + e^{-2T/tc}))."""
    sigma, tc, rate = 0.05, 0.5, 100.0
    x = trace(100_000, b=4, seed=7, bias_instability=sigma, bias_correlation_time=tc)
    taus = np.array([0.05, 0.2, 0.5, 1.0, 3.0, 10.0])
    r = tc / taus
    theory = np.sqrt(sigma**2 * r * (2 - r * (3 - 4 * np.exp(-1 / r) + np.exp(-2 / r))))
    devs = [allantools.oadev(x[:, e], rate=rate, data_type="freq", taus=taus)[1] for e in range(4)]
    dev = np.sqrt(np.mean(np.square(devs), axis=0))
    np.testing.assert_allclose(dev, theory, rtol=0.15)


# -- exact values -----------------------------------------------------------------------------------------
def test_scale_factor_multiplies_by_one_plus_k_exactly_before_the_bias():
    mgr = sg.SensorManager(num_envs=2, dt=DT, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), scale_factor=[0.5, -0.25], bias=1.0))
    x = torch.tensor([[2.0, 4.0], [-8.0, 0.5]])
    mgr.reset({"x": x})
    assert s.read().tolist() == [[4.0, 4.0], [-11.0, 1.375]]  # x (1 + k) + bias
    assert s.read_ground_truth().tolist() == x.tolist()


def test_the_order_of_terms_is_scale_drift_noise_bias_resolution():
    """A scaled value plus drift, then the bias, then quantization: (x (1 + k) + walk) + b, rounded."""
    mgr = sg.SensorManager(num_envs=1, dt=DT, seed=0)
    s = mgr.add_sensor(
        sg.StateSensorOptions(key="x", shape=(1,), scale_factor=1.0, random_walk_density=0.5, bias=0.3,
                              resolution=0.25)
    )  # fmt: skip
    mgr.reset({"x": torch.tensor([[0.6]])})
    assert float(s.read()) == 1.5  # round((0.6 * 2 + 0) + 0.3 = 1.5 / 0.25) * 0.25
    mgr.step({"x": torch.tensor([[0.6]])})
    model = mgr.metadata(sg.StateSensor).imperfections
    walk = float(model.state("random_walk_state"))
    assert walk == pytest.approx(float(model.draws(1)) * 0.5 * math.sqrt(DT), rel=1e-6)
    expected = round((np.float32(1.2) + np.float32(walk) + np.float32(0.3)) / 0.25) * 0.25
    assert float(s.read()) == expected


@pytest.mark.parametrize(
    ("kw", "pattern"),
    [
        (
            dict(noise=0.1, noise_density=0.1),
            r"noise_density=0.1 is invalid: noise=0.1 and noise_density are",
        ),
        (dict(random_walk=[0.0, 0.1], random_walk_density=[0.0, 0.2]), r"random_walk_density.*component 1"),
        (dict(bias_instability=0.1), r"bias_correlation_time=0.0 is invalid.*needs a correlation time"),
        (dict(bias_instability=sg.Uniform(0.0, 0.1), bias_correlation_time=sg.Uniform(0.0, 1.0)), r"> 0"),
        (dict(scale_factor=-1.0), r"scale_factor=-1.0 is invalid.*k > -1"),
        (dict(scale_factor=sg.Uniform(-1.5, 0.0)), r"k > -1"),
        (dict(bandwidth=-1.0), r"bandwidth must be >= 0"),
        (dict(noise_density=sg.Normal(0.0, 1.0)), r"negative"),
        (dict(dropout=0.5, dropout_burst=0.5), r"dropout_burst=0.5 is invalid.*>= 1"),
        (
            dict(dropout=0.6, dropout_burst=1.0),
            r"q = p / \(L \(1 - p\)\) = 1.5 > 1.*at most L / \(L \+ 1\) = 0.5",
        ),
        (dict(dropout=0.5, dropout_burst=sg.Uniform(0.5, 2.0)), r"outside \[1, inf\)"),
        (dict(dropout_burst="long"), r"expected a mean number of lost samples"),
    ],
)
def test_invalid_error_model_options_are_refused_by_name(kw, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        sg.StateSensorOptions(key="x", **kw)


def test_a_setter_cannot_add_noise_where_a_noise_density_is():
    mgr = sg.SensorManager(num_envs=2, dt=DT, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), noise_density=[0.1, 0.0]))
    mgr.reset({"x": torch.zeros(2, 2)})
    s.set_noise([0.0, 0.5])  # the component without a density: fine
    with pytest.raises(ValueError, match=r"noise_density=\(0.1, 0.0\) on these components"):
        s.set_noise([0.5, 0.0])


def test_the_noise_setter_still_acts_on_a_class_with_a_noise_density():
    """sigma = noise + N / sqrt(T_s) is re-derived after set_noise."""
    mgr = sg.SensorManager(num_envs=1, dt=DT, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), noise_density=[0.1, 0.0]))
    mgr.reset({"x": torch.zeros(1, 2)})
    s.set_noise([0.0, 0.5])
    model = mgr.metadata(sg.StateSensor).imperfections
    assert model.table("sigma")[0].tolist() == pytest.approx([0.1 / math.sqrt(DT), 0.5])
    mgr.step({"x": torch.zeros(1, 2)})
    assert float(s.read()[0, 1]) != 0.0


# -- defaults, randomization, persistence ----------------------------------------------------------------
@pytest.mark.parametrize("executor", ["torch", "numpy"])
def test_explicit_defaults_change_nothing_random_stream_included(executor):
    base = dict(key="x", shape=(2,), noise=0.3, random_walk=0.1, bias=0.2, delay=0.02, dropout=0.2)
    explicit = dict(
        noise_density=0.0, random_walk_density=0.0, bias_instability=0.0, bias_correlation_time=0.0,
        scale_factor=0.0, bandwidth=0.0, dropout_burst=None,
    )  # fmt: skip
    out = []
    for extra in ({}, explicit):
        mgr = sg.SensorManager(num_envs=3, dt=DT, seed=11, executor=executor)
        s = mgr.add_sensor(sg.StateSensorOptions(**base, **extra))
        mgr.reset({"x": torch.zeros(3, 2)})
        reads = [s.read().clone()]
        for t in range(20):
            mgr.step({"x": torch.full((3, 2), float(t))}, reset_mask=torch.tensor([t == 7, False, False]))
            reads.append(s.read().clone())
        out.append((torch.stack(reads), mgr.random.generator.get_state(), mgr.state_dict()["classes"]))
        # the defaults run the per-step terms only (no table of the error-model options is made)
        model = mgr.metadata(sg.StateSensor).imperfections
        assert [t.name for t in model.terms] == ["random_walk", "white_noise", "bias", "resolution"]
    assert torch.equal(out[0][0], out[1][0])
    assert torch.equal(out[0][1], out[1][1])
    assert out[0][2].keys() == out[1][2].keys()
    for k, v in out[0][2]["StateSensor"]["tensors"].items():
        assert torch.equal(v, out[1][2]["StateSensor"]["tensors"][k]), k


def test_error_model_options_are_resampled_per_env_at_every_reset_and_readable():
    mgr = sg.SensorManager(num_envs=6, dt=DT, seed=0)
    s = mgr.add_sensor(
        sg.StateSensorOptions(
            key="x", shape=(1,), noise_density=sg.LogUniform(0.01, 0.1), bandwidth=sg.Uniform(1.0, 10.0),
            dropout=0.1, dropout_burst=sg.Uniform(1.0, 5.0),
        )
    )  # fmt: skip
    mgr.reset({"x": torch.zeros(6, 1)})
    r0 = s.read_randomization()
    assert set(r0) == {"noise_density", "bandwidth", "dropout_burst"}
    assert len(set(r0["bandwidth"][:, 0].tolist())) == 6  # per env
    model = mgr.metadata(sg.StateSensor).imperfections
    sigma0 = model.table("sigma").clone()
    np.testing.assert_allclose(
        as_np(sigma0)[:, 0], as_np(r0["noise_density"])[:, 0] / math.sqrt(DT), rtol=1e-6
    )
    for _ in range(5):
        mgr.step({"x": torch.zeros(6, 1)})
    assert torch.equal(s.read_randomization()["bandwidth"], r0["bandwidth"])  # held for the episode
    mgr.step({"x": torch.zeros(6, 1)}, reset_mask=torch.tensor([False, True, False, False, True, False]))
    r1 = s.read_randomization()
    changed = (r1["bandwidth"] != r0["bandwidth"])[:, 0].tolist()
    assert changed == [False, True, False, False, True, False]
    assert not torch.equal(model.table("sigma"), sigma0)  # the derived coefficients follow
    assert mgr.randomization_names() == ["StateSensor_0.noise_density[0]", "StateSensor_0.bandwidth[0]",
                                         "StateSensor_0.dropout_burst"]  # fmt: skip


def test_a_randomized_sample_interval_below_dt_sets_sigma_per_env():
    mgr = sg.SensorManager(num_envs=4, dt=DT, seed=0)
    s = mgr.add_sensor(
        sg.StateSensorOptions(key="x", shape=(1,), noise_density=0.1, update_period=sg.Uniform(0.001, 0.01))
    )
    mgr.reset({"x": torch.zeros(4, 1)})
    period = s.read_randomization()["update_period"][:, 0].double()
    sigma = mgr.metadata(sg.StateSensor).imperfections.table("sigma")[:, 0].double()
    np.testing.assert_allclose(as_np(sigma), as_np(0.1 / period.sqrt()), rtol=1e-6)


def test_state_dict_round_trip_continues_bit_identically():
    opts = dict(
        noise_density=0.1, random_walk_density=0.05, bias_instability=0.2, bias_correlation_time=1.0,
        scale_factor=0.02, bandwidth=3.0, update_period=0.03, dropout=0.3, dropout_burst=3.0,
        history_length=2, delay=0.02,
    )  # fmt: skip

    def make():
        mgr = sg.SensorManager(num_envs=3, dt=DT, seed=0)
        mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), **opts))
        mgr.reset({"x": torch.zeros(3, 2)})
        return mgr

    a = make()
    for t in range(17):
        a.step({"x": torch.full((3, 2), float(t))})
    saved = copy.deepcopy(a.state_dict())
    b = make()
    b.load_state_dict(saved)
    for t in range(17, 40):
        x = {"x": torch.full((3, 2), float(t))}
        a.step(x, reset_mask=torch.tensor([t == 25, False, False]))
        b.step(x, reset_mask=torch.tensor([t == 25, False, False]))
        assert torch.equal(a.sensors[0].read(), b.sensors[0].read())


def test_a_checkpoint_written_before_the_error_model_options_still_loads():
    """Records without the SPEC 5.1 fields read as their defaults (which change nothing)."""
    mgr = sg.SensorManager(num_envs=2, dt=DT, seed=0)
    mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), noise=0.1))
    mgr.reset({"x": torch.zeros(2, 1)})
    saved = mgr.state_dict()
    for record in saved["sensors"]:
        for name in ("dropout_burst", *MODEL_KEYS, "bias_correlation_time"):
            del record["options"][name]
    mgr.load_state_dict(saved)
    other = sg.SensorManager(num_envs=2, dt=DT, seed=0)
    other.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), noise=0.1, bandwidth=1.0))
    other.reset({"x": torch.zeros(2, 1)})
    with pytest.raises(ValueError, match="option 'bandwidth' differs"):
        other.load_state_dict(saved)


def test_allan_deviation_of_filtered_white_noise_matches_the_closed_form_via_allantools():
    """A first-order filter (a = exp(-2 pi f_c T_s)) on white noise of per-sample std sigma: for tau = M T_s,
    sigma_A^2 = (sigma^2 / M^2) (M - a (1 - a^M) (3 - a^M) / (1 - a^2)) (docs/error_model.md); it falls
    below the unfiltered N / sqrt(tau) near T_s and joins it for tau >> 1 / f_c."""
    n, f_c = 0.05, 4.0
    x = trace(40_000, b=8, seed=9, noise_density=n, bandwidth=f_c)
    a, sigma = math.exp(-2 * math.pi * f_c * DT), n / math.sqrt(DT)
    m = np.array([1, 2, 4, 8, 16, 64, 256])
    theory = np.sqrt(sigma**2 / m**2 * (m - a * (1 - a**m) * (3 - a**m) / (1 - a * a)))
    devs = [allantools.oadev(x[:, e], rate=1 / DT, data_type="freq", taus=m * DT)[1] for e in range(8)]
    dev = np.sqrt(np.mean(np.square(devs), axis=0))
    np.testing.assert_allclose(dev, theory, rtol=0.05)
    assert dev[0] < 0.5 * n / math.sqrt(DT)  # the filter removes most of the per-sample spread
