"""Fuzzing: random sensor sets, option values (distributions included), state shapes and dtypes, reset
patterns and autoreset modes. Invariants checked at every step:

* reads have the declared shape and dtype, and are finite for finite input;
* reads are idempotent within a step;
* history is causal: ``read(N)[:, i]`` is what ``read()`` gave ``i`` steps ago (envs not reset since);
* ground truth is never delayed: it does not depend on delay/jitter settings at all;
* wrapper observations lie inside the declared observation space, are float32 and fresh arrays.

Invalid input gets a documented exception (``ValueError``/``TypeError``) whose message names the option
or sensor and says how to fix it; never an error from deep inside torch, never a silent wrong answer.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sensorgym as sg
from sensorgym.wrappers import SensorObservation

from ..helpers import ByteOptions, FilterOptions, ThresholdOptions, as_np
from ..wrappers.envs import make_ramp

DT = 0.1
DTYPES = ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"]
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

time_values = st.sampled_from(
    [0.0, 0.1, 0.2, 0.3, sg.Uniform(0.0, 0.3), sg.Choice([0.0, 0.2]), sg.LogUniform(0.05, 0.3)]
)
imperfection = st.sampled_from(
    [0.0, 0.5, 2.0, sg.Uniform(0.0, 1.0), sg.LogUniform(0.01, 1.0), sg.Normal(0.5, 0.2, low=0.0)]
)
bias_values = st.sampled_from([0.0, -1.5, sg.Normal(0.0, 1.0), sg.Choice([-1.0, 1.0])])


@st.composite
def time_and_imperfections(draw) -> dict:
    delay = draw(time_values)
    delay_hi = delay.bounds[1] if isinstance(delay, sg.Distribution) else delay
    delay_lo = delay.bounds[0] if isinstance(delay, sg.Distribution) else delay
    jitter = draw(st.sampled_from([0.0, 0.05, 0.1, 0.2]))
    jitter = jitter if jitter <= delay_lo else 0.0
    return dict(
        delay=delay,
        jitter=jitter,
        history_length=draw(st.integers(0, 3)),
        padding_type=draw(st.sampled_from(["reset", "zero"])),
        noise=draw(imperfection),
        bias=draw(bias_values),
        random_walk=draw(st.sampled_from([0.0, 0.1, sg.Uniform(0.0, 0.2)])),
        resolution=draw(st.sampled_from([0.0, 0.25, sg.Choice([0.0, 0.5])])),
        max_delay=draw(st.sampled_from([None, max(0.5, delay_hi + jitter)])),
    )


@st.composite
def sensor_specs(draw, b: int):
    """(name, options, state key, per-env shape, dtype) for 1..4 sensors over distinct state entries."""
    specs = []
    for i in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["state", "state", "filter", "threshold", "byte"]))
        common = draw(time_and_imperfections())
        key = f"k{i}"
        if kind == "state":
            shape = draw(st.sampled_from([(), (1,), (3,), (2, 3)]))
            index = None
            if shape and draw(st.booleans()):
                index = draw(st.sampled_from([[0], [-1], [0, 1][: shape[-1]], [2, 0][: shape[-1]]]))
                if max(index) >= shape[-1]:
                    index = [0]
            opts = sg.StateSensorOptions(key=key, index=index, **common)
            dtype = draw(st.sampled_from(DTYPES))
        else:
            shape = (2,)
            cls = {"filter": FilterOptions, "threshold": ThresholdOptions, "byte": ByteOptions}[kind]
            extra = {"alpha": draw(st.sampled_from([0.0, 0.5]))} if kind == "filter" else {}
            opts = cls(key=key, width=2, **extra, **common)
            dtype = "float32"
        specs.append((f"s{i}", opts, key, shape, dtype))
    return specs


def _state(specs, b: int, gen: np.random.Generator, as_torch: bool) -> dict:
    out = {}
    for _, _, key, shape, dtype in specs:
        x = gen.integers(0, 6, size=(b, *shape)) * (0.5 if dtype.startswith("float") else 1)
        arr = x.astype(dtype)
        out[key] = torch.from_numpy(arr) if as_torch else arr
    return out


def _no_delay(opts: sg.SensorOptions) -> sg.SensorOptions:
    return dataclasses.replace(opts, delay=0.0, jitter=0.0, max_delay=None)


def _reset_pattern(draw, b: int):
    kind = draw(st.sampled_from(["none", "none", "mask", "indices", "tensor", "all"]))
    mask = np.array(draw(st.lists(st.booleans(), min_size=b, max_size=b)), dtype=bool)
    if kind == "none":
        return None, np.zeros(b, bool)
    if kind == "all":
        return None if draw(st.booleans()) else np.ones(b, bool), np.ones(b, bool)
    if kind == "mask":
        return mask, mask
    idx = np.flatnonzero(mask)
    if len(idx) == b <= 2:  # [0] or [0, 1] reads both as indices and as a 0/1 done vector: refused
        return mask, mask
    return (list(idx) if kind == "indices" else torch.as_tensor(idx, dtype=torch.long)), mask


@FUZZ
@given(data=st.data())
def test_manager_invariants(data):
    draw = data.draw
    b = draw(st.integers(1, 5))
    specs = draw(sensor_specs(b))
    seed = draw(st.integers(0, 2**31 - 1))
    as_torch = draw(st.booleans())
    mgr = sg.SensorManager(num_envs=b, dt=DT, seed=seed)
    twin = sg.SensorManager(num_envs=b, dt=DT, seed=seed)  # same sensors without delay/jitter
    sensors = [mgr.add_sensor(o, name=n) for n, o, *_ in specs]
    twins = [twin.add_sensor(_no_delay(o), name=n) for n, o, *_ in specs]
    gen = np.random.default_rng(seed)

    state = _state(specs, b, gen, as_torch)
    mgr.reset(state)
    twin.reset(state)
    past: list[list[np.ndarray]] = []  # past[t][k]: read() of sensor k at step t
    since_reset = np.zeros(b, dtype=int)

    for _ in range(draw(st.integers(1, 10))):
        state = _state(specs, b, gen, as_torch)
        envs, mask = _reset_pattern(draw, b)
        if mask.any() and draw(st.booleans()):
            mgr.step(state, reset_mask=envs if envs is not None else None)
            twin.step(state, reset_mask=envs if envs is not None else None)
        else:
            mgr.step(state)
            twin.step(state)
            if mask.any():
                mgr.reset(state, envs)
                twin.reset(state, envs)
        since_reset += 1
        since_reset[mask] = 0

        now = []
        for s, t, (name, opts, _key, _shape, _dtype) in zip(sensors, twins, specs, strict=True):
            fmt = s.fields[0]
            cache_dtype = type(s)._get_cache_dtype()
            m = s.read(0)
            assert tuple(m.shape) == (b, *fmt), name
            assert m.dtype == cache_dtype, name
            assert torch.equal(m, s.read(0)), f"{name}: read() not idempotent"
            assert torch.isfinite(m.float()).all(), f"{name}: non-finite reading from finite input"
            gt = s.read_ground_truth(0)
            assert torch.equal(gt, t.read_ground_truth(0)), f"{name}: GT depends on delay/jitter"
            if isinstance(opts, sg.StateSensorOptions):
                x = torch.as_tensor(np.asarray(state[opts.key])).to(torch.float32)
                if opts.index is not None:
                    x = (x[:, None] if x.dim() == 1 else x)[..., list(opts.index)]
                assert torch.equal(gt, x.reshape(b, *fmt)), f"{name}: GT is not the current state"
            h = opts.history_length
            if h:
                hist = s.read()
                assert tuple(hist.shape) == (b, h, *fmt) and hist.dtype == cache_dtype
                assert torch.equal(hist, s.read()), f"{name}: history read not idempotent"
                np.testing.assert_array_equal(as_np(hist[:, 0]), as_np(m))
                for i in range(1, min(h, len(past))):
                    ok = since_reset >= i  # envs not reset within the last i steps
                    np.testing.assert_array_equal(
                        as_np(hist[:, i])[ok], past[-i][len(now)][ok], err_msg=f"{name} history slot {i}"
                    )
            now.append(as_np(m).copy())
        past.append(now)


class _RampSpaces:
    """Sensor sets for the wrapper fuzz over RampEnv (obs = [episode, t, x], info t and speed)."""

    @staticmethod
    @st.composite
    def sensors(draw) -> dict:
        out = {}
        for i in range(draw(st.integers(1, 3))):
            common = draw(time_and_imperfections())
            key = draw(st.sampled_from(["obs", "t", "speed"]))
            if key == "obs":
                shape, index = None, draw(st.sampled_from([[0], [1, 2], [2]]))
            else:  # info entries are not in the observation space: their shape must be given
                shape, index = (1,), None
            out[f"s{i}"] = sg.StateSensorOptions(key=key, shape=shape, index=index, **common)
        return out


@FUZZ
@given(data=st.data())
def test_wrapper_observations_stay_in_their_spaces(data):
    draw = data.draw
    b = draw(st.integers(1, 4))
    mode = draw(st.sampled_from(list(AutoresetMode)))
    sensors = draw(_RampSpaces.sensors())
    envs = gym.vector.SyncVectorEnv([make_ramp(p_end=0.3, max_steps=6)] * b, autoreset_mode=mode)
    wrapped = SensorObservation(envs, sensors, critic_randomization=draw(st.booleans()))
    space = wrapped.single_observation_space
    vspace = wrapped.observation_space
    obs, _ = wrapped.reset(seed=draw(st.integers(0, 10_000)))
    earlier = []
    for _ in range(draw(st.integers(1, 12))):
        assert vspace.contains(obs), "observation outside observation_space"
        for key, v in obs.items():
            assert v.dtype == np.float32 and v.shape == (b, *space[key].shape), key
        earlier.append(({k: v for k, v in obs.items()}, {k: v.copy() for k, v in obs.items()}))
        options = None
        if mode == AutoresetMode.DISABLED:
            mask = np.array(draw(st.lists(st.booleans(), min_size=b, max_size=b)), dtype=bool)
            if mask.any():
                obs, _ = wrapped.reset(options={"reset_mask": mask})
                assert vspace.contains(obs)
        obs, _, term, trunc, info = wrapped.step(wrapped.action_space.sample())
        if mode == AutoresetMode.SAME_STEP and "final_obs" in info:
            for i in np.flatnonzero(info["_final_obs"]):
                assert space.contains(info["final_obs"][i]), "final_obs outside single_observation_space"
        if mode == AutoresetMode.DISABLED and (term | trunc).any():
            obs, _ = wrapped.reset(options={"reset_mask": term | trunc})
        del options
    for live, copy in earlier:  # observations handed out earlier were never overwritten in place
        for k in live:
            np.testing.assert_array_equal(live[k], copy[k], err_msg=f"{k} mutated after return")
    wrapped.close()


# -- invalid input -------------------------------------------------------------------------------------
BAD_OPTIONS = [
    ("delay", -0.1),
    ("delay", float("nan")),
    ("delay", "fast"),
    ("jitter", 0.5),  # > delay
    ("history_length", -1),
    ("history_length", 2.5),
    ("padding_type", "edge"),
    ("nan_policy", "ignore"),
    ("noise", -0.2),
    ("noise", [0.1, -0.1]),
    ("noise", float("inf")),
    ("random_walk", sg.Uniform(-1.0, 1.0)),
    ("resolution", -0.01),
    ("resolution", "fine"),
    ("bias", [1.0, 2.0, 3.0, 4.0]),  # does not match the 3 components read below
    ("max_delay", -1.0),
    ("delay", sg.Uniform(-0.1, 0.1)),
]


@pytest.mark.parametrize(("field", "value"), BAD_OPTIONS, ids=[f"{f}={v!r}" for f, v in BAD_OPTIONS])
def test_bad_option_values_name_the_field_and_the_fix(field, value):
    def build():
        opts = sg.StateSensorOptions(key="x", shape=(3,), **{field: value})
        mgr = sg.SensorManager(num_envs=2, dt=DT)
        mgr.add_sensor(opts)
        mgr.reset({"x": np.zeros((2, 3))})

    with pytest.raises((ValueError, TypeError)) as e:
        build()
    msg = str(e.value)
    assert field in msg and "Fix" in msg, msg


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: sg.Uniform(1.0, 0.0), "swap"),
        (lambda: sg.LogUniform(0.0, 1.0), "LogUniform"),
        (lambda: sg.Normal(0.0, -1.0), "std"),
        (lambda: sg.Choice([]), "at least one"),
        (lambda: sg.Uniform(0.0, float("inf")), "finite"),
    ],
)
def test_bad_distributions(make, needle):
    with pytest.raises(ValueError, match=needle):
        make()


@pytest.fixture
def built():
    mgr = sg.SensorManager(num_envs=3, dt=DT, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), history_length=2), name="imu")
    mgr.reset({"x": np.zeros((3, 2))})
    return mgr, s


BAD_STATES = [
    ({"y": np.zeros((3, 2))}, ValueError, "no key 'x'"),
    ({"x": np.zeros((2, 2))}, ValueError, "num_envs=3"),
    ({"x": np.zeros((3, 5))}, ValueError, "needs 2"),
    ({"x": np.zeros(3)}, ValueError, "needs 2"),
    ({"x": np.array([["a", "b"]] * 3)}, TypeError, "numeric"),
    ({"x": np.zeros((3, 2), dtype=complex)}, TypeError, "numeric"),
    ([np.zeros((3, 2))], TypeError, "mapping"),
]


@pytest.mark.parametrize(("state", "exc", "needle"), BAD_STATES)
def test_bad_state_is_rejected_before_anything_is_written(built, state, exc, needle):
    mgr, _ = built
    mgr.step({"x": np.ones((3, 2))})
    before = mgr.state_dict()
    for call in (lambda: mgr.step(state), lambda: mgr.reset(state, [1])):
        with pytest.raises(exc, match=needle) as e:
            call()
        assert "imu" in str(e.value)
        after = mgr.state_dict()
        for k, v in before.items():
            if torch.is_tensor(v):
                assert torch.equal(v, after[k]), k


@pytest.mark.parametrize(
    ("envs_idx", "exc", "needle"),
    [
        ([3], ValueError, "out of range"),
        ([-1], ValueError, "out of range"),
        (np.ones(4, bool), ValueError, "num_envs=3"),
        ([0.5], TypeError, "env indices"),
        (torch.tensor([1.0]), TypeError, "integers"),
        (["a"], TypeError, "bool mask"),
    ],
)
def test_bad_env_indices(built, envs_idx, exc, needle):
    mgr, s = built
    with pytest.raises(exc, match=needle):
        mgr.reset({"x": np.zeros((3, 2))}, envs_idx)
    with pytest.raises(exc, match=needle):
        s.set_noise(0.1, envs_idx)


@pytest.mark.parametrize("n", [-1, 3, 1.5, True])
def test_bad_history_reads(built, n):
    _, s = built
    with pytest.raises(ValueError, match="history_length"):
        s.read(n)


@pytest.mark.parametrize(
    ("setter", "value", "needle"),
    [
        ("set_noise", -1.0, "noise"),
        ("set_resolution", -0.5, "resolution"),
        ("set_bias", [1.0, 2.0, 3.0], "bias"),
        ("set_delay", -0.1, "delay"),
        ("set_delay", 5.0, "max_delay"),
        ("set_jitter", 0.3, "jitter"),
    ],
)
def test_bad_runtime_setters(built, setter, value, needle):
    mgr, s = built
    before = mgr.state_dict()
    with pytest.raises((ValueError, TypeError), match=needle):
        getattr(s, setter)(value)
    after = mgr.state_dict()
    for k, v in before.items():
        if torch.is_tensor(v):
            assert torch.equal(v, after[k]), k


def test_wrapper_rejects_unknown_state_keys():
    envs = gym.vector.SyncVectorEnv([make_ramp()] * 2)
    with pytest.raises(ValueError, match=r"'speedo'.*'velocity'.*shape is unknown.*Fix"):
        SensorObservation(envs, {"speedo": sg.StateSensorOptions(key="velocity")})
    wrapped = SensorObservation(envs, {"speedo": sg.StateSensorOptions(key="velocity", shape=(1,))})
    with pytest.raises(ValueError, match=r"'speedo'.*no key 'velocity'.*Fix"):
        wrapped.reset(seed=0)
    wrapped.close()
