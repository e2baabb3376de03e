"""``ActionLatency`` (docs/action_latency.md): exact ramp-action tests on envs that record the action they
applied, every autoreset mode, numpy and torch, jitter statistics, initial actions, episode boundaries,
randomization, checkpoints, bad input, composition with ``SensorObservation`` and a slow per-env reference."""

from __future__ import annotations

import copy
import math
import re
import sys
import types
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import batch_space
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sensorgym as sg
from sensorgym.core.rng import RandomSource
from sensorgym.envs import BatchedPendulumEnv
from sensorgym.wrappers import ActionLatency, SensorObservation
from sensorgym.wrappers.latency import APPLIED_KEY, IN_FLIGHT_KEY, LATENCY_KEY

DT = 0.1
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
ROOT = Path(__file__).resolve().parents[2]


# -- envs whose state records the applied action ----------------------------------------------------
class RecordEnv(gym.Env):
    """obs = [t, applied action (2)]: ``t`` steps into the episode; random episode ends from its RNG."""

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium convention
    dt = DT

    def __init__(self, p_end: float = 0.15, max_steps: int = 12, low: float = -1e7) -> None:
        self.p_end, self.max_steps = p_end, max_steps
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space = gym.spaces.Box(low, 1e7, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0, -1, -1], np.float32), {}

    def step(self, action):
        self.t += 1
        a = np.asarray(action, np.float32)
        terminated = bool(self.np_random.random() < self.p_end)
        truncated = self.t >= self.max_steps
        return np.array([self.t, *a], np.float32), 0.0, terminated, truncated, {}


class TorchRecordEnv(VectorEnv):
    """The same as one natively batched torch env, in any autoreset mode."""

    dt = DT

    def __init__(self, num_envs: int, mode: AutoresetMode, p_end: float = 0.15, max_steps: int = 12) -> None:
        self.num_envs, self.p_end, self.max_steps = num_envs, p_end, max_steps
        self.device = torch.device("cpu")
        self.metadata = {"autoreset_mode": AutoresetMode(mode), "render_modes": []}
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.single_action_space = gym.spaces.Box(-1e7, 1e7, (2,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.gen = torch.Generator()
        self.obs = torch.zeros(num_envs, 3)
        self.autoreset = torch.zeros(num_envs, dtype=torch.bool)

    def _reset_rows(self, rows):
        self.obs[rows] = torch.tensor([0.0, -1.0, -1.0])

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.gen.manual_seed(seed if isinstance(seed, int) else seed[0])
        rows = torch.ones(self.num_envs, dtype=torch.bool)
        if options and "reset_mask" in options:
            rows = torch.as_tensor(options.pop("reset_mask"))
        self._reset_rows(rows)
        self.autoreset &= ~rows
        return self.obs.clone(), {}

    def step(self, actions):
        a = torch.as_tensor(actions, dtype=torch.float32)
        obs = torch.cat([self.obs[:, :1] + 1, a], 1)
        term = torch.rand(self.num_envs, generator=self.gen) < self.p_end
        trunc = obs[:, 0] >= self.max_steps
        mode = self.metadata["autoreset_mode"]
        info = {}
        if mode is AutoresetMode.NEXT_STEP:
            restart = self.autoreset
            self.obs = obs
            self._reset_rows(restart)
            term, trunc = term & ~restart, trunc & ~restart
            self.autoreset = term | trunc
        elif mode is AutoresetMode.SAME_STEP:
            done = term | trunc
            info = {"final_obs": obs.clone(), "_final_obs": done, "final_info": {}}
            self.obs = obs
            self._reset_rows(done)
        else:
            self.obs = obs
        return self.obs.clone(), torch.zeros(self.num_envs), term, trunc, info


def make_envs(backend: str, mode: AutoresetMode, num_envs: int = 4, **kw) -> VectorEnv:
    if backend == "torch":
        return TorchRecordEnv(num_envs, mode, **kw)
    return SyncVectorEnv([lambda: RecordEnv(**kw) for _ in range(num_envs)], autoreset_mode=mode)


def np_(x):
    return x.detach().cpu().numpy() if torch.is_tensor(x) else np.asarray(x)


def with_final(obs, info, done):
    """SAME_STEP: the terminal observation in the rows that finished, else ``obs`` (numpy)."""
    out = np.array(np_(obs), copy=True)
    final = info.get("final_obs")
    for i in np.flatnonzero(done):
        out[i] = np_(final[i]) if isinstance(final, np.ndarray) and final.dtype == object else np_(final)[i]
    return out


# -- the slow per-env reference, written from docs/action_latency.md ----------------------------------------
class Reference:
    """One Python object per env: the episode's chosen actions, the index of the last applied one."""

    def __init__(self, num_envs, dt, delay, jitter, initial, zero, max_shift):
        self.dt, self.initial, self.zero, self.S = dt, initial, np.asarray(zero), max_shift
        self.fixed = {"delay": delay, "jitter": jitter}
        self.envs = [{} for _ in range(num_envs)]

    def reset(self, b, delay, jitter):
        init = self.zero if isinstance(self.initial, str) else np.asarray(self.initial)
        self.envs[b] = dict(chosen=[], last=None, delay=delay, jitter=jitter, applied=init)

    def step(self, b, action, u1, u2):
        e = self.envs[b]
        t = len(e["chosen"])
        e["chosen"].append(np.asarray(action))
        d_steps = round(e["delay"] / self.dt)
        j_steps = min(e["jitter"], e["delay"]) / self.dt
        extra = math.floor(np.float32(np.float32(j_steps) * np.float32(u1)) + np.float32(u2))
        extra = min(extra, max(0, math.ceil(j_steps - 1e-9)))
        target = t - (d_steps + extra)
        if e["last"] is not None:
            target = max(target, e["last"])  # never older than the previous applied action
        e["last"] = target
        if target >= 0:
            e["applied"] = e["chosen"][target]
        else:
            e["applied"] = (
                e["chosen"][0] if isinstance(self.initial, str) and self.initial == "first" else e["applied"]
            )
        return e["applied"]

    def in_flight(self, b):
        e = self.envs[b]
        t = len(e["chosen"])
        rows = []
        for k in range(self.S):
            idx = t - 1 - k
            pending = idx >= 0 and (e["last"] is None or idx > e["last"])
            rows.append(e["chosen"][idx] if pending else e["applied"])
        return np.array(rows).reshape(self.S, *np.shape(self.zero))

    def latency(self, b):
        e = self.envs[b]
        return np.array([round(e["delay"] / self.dt) * self.dt, min(e["jitter"], e["delay"])], np.float32)


class LoggingRandom(RandomSource):
    """A random source whose numbers come from numpy and are logged, so the reference can use them."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.log: list[tuple] = []

    def seed(self, seed):
        self.rng = np.random.default_rng(seed)

    def uniform_(self, out, rows, row_dim):
        out.copy_(torch.from_numpy(self.rng.random(tuple(out.shape), dtype=np.float32)))
        self.log.append(("u", None, None, out.clone()))
        return out

    def normal_(self, out, rows, row_dim):  # pragma: no cover - not used by ActionLatency
        raise AssertionError("ActionLatency draws no normal numbers")

    def sample_(self, dist, out, rows, row_dim):
        g = torch.Generator().manual_seed(int(self.rng.integers(2**31)))
        dist.sample_(out, g)
        self.log.append(("s", dist, None if rows is None else rows.clone(), out.clone()))
        return out

    def get_state(self):
        return copy.deepcopy(self.rng.bit_generator.state)

    def set_state(self, state):
        self.rng.bit_generator.state = copy.deepcopy(state)


def _resampled(log, dist, b):
    """The value a logged ``sample_`` call of ``dist`` drew for env ``b`` (None if no call covered it)."""
    value = None
    for kind, d, rows, out in log:
        if kind == "s" and d is dist and (rows is None or bool(rows[b])):
            value = float(out[b])
    return value


def run_against_reference(backend, mode, num_envs, delay, jitter, initial, steps, seed, env_seed=0):
    envs = make_envs(backend, mode, num_envs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a delay off the dt grid warns; tested elsewhere
        lat = ActionLatency(envs, delay=delay, jitter=jitter, initial_action=initial)
    rand = LoggingRandom(seed)
    lat._queue.line.random = rand
    ref = Reference(num_envs, DT, delay, jitter, initial, np.zeros(2, np.float32), lat.config.max_shift)

    def fixed(name, b):
        v = getattr(lat.config, name)
        return v if not isinstance(v, sg.Distribution) else _resampled(rand.log, v, b)

    def compare(info, rows=range(num_envs), prefix=""):
        for b in rows:
            np.testing.assert_array_equal(
                np_(info[IN_FLIGHT_KEY])[b], ref.in_flight(b), err_msg=f"{prefix}{b}"
            )
            np.testing.assert_array_equal(np_(info[APPLIED_KEY])[b], ref.envs[b]["applied"])
            np.testing.assert_allclose(np_(info[LATENCY_KEY])[b], ref.latency(b), rtol=1e-6)

    obs, info = lat.reset(seed=env_seed)
    for b in range(num_envs):
        ref.reset(b, fixed("delay", b), fixed("jitter", b))
    compare(info)
    autoreset = np.zeros(num_envs, bool)
    rng = np.random.default_rng(seed)
    for k in range(steps):
        rand.log.clear()
        chosen = np.stack([np.full(num_envs, k + 1), np.arange(num_envs) + 1], 1).astype(np.float32)
        chosen[:, 1] += 100 * rng.integers(0, 3, num_envs)
        actions = torch.from_numpy(chosen) if backend == "torch" else chosen
        obs, _, term, trunc, info = lat.step(actions)
        uniforms = [out for kind, _, _, out in rand.log if kind == "u"]
        assert len(uniforms) == (1 if lat.config.has_jitter else 0)
        u = np_(uniforms[0]) if uniforms else np.zeros((2, num_envs), np.float32)
        done = np_(term) | np_(trunc)
        for b in range(num_envs):
            if mode is AutoresetMode.NEXT_STEP and autoreset[b]:
                assert np_(obs)[b, 0] == 0  # the env reset and ignored the action
                ref.reset(b, fixed("delay", b), fixed("jitter", b))
                continue
            applied = ref.step(b, chosen[b], u[0, b], u[1, b])
            if mode is AutoresetMode.SAME_STEP and done[b]:
                final = info["final_obs"]
                row = final[b] if isinstance(final, np.ndarray) and final.dtype == object else np_(final)[b]
                np.testing.assert_array_equal(np_(row)[1:], applied)
                compare(info["final_info"], [b], "final ")
                ref.reset(b, fixed("delay", b), fixed("jitter", b))
            else:
                np.testing.assert_array_equal(np_(obs)[b, 1:], applied)
        compare(info)
        if mode is AutoresetMode.NEXT_STEP:
            autoreset = done
        elif mode is AutoresetMode.DISABLED and done.any():
            rand.log.clear()
            mask = torch.from_numpy(done) if backend == "torch" else done
            obs, info = lat.reset(options={"reset_mask": mask})
            for b in np.flatnonzero(done):
                ref.reset(b, fixed("delay", b), fixed("jitter", b))
            compare(info)
    return lat


# -- exact ramp-action tests ------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("mode", MODES)
def test_fixed_delay_is_exact(backend, mode):
    """delay = 2 steps, no jitter: step t of an episode applies the action chosen at t - 2, zeros before."""
    b, steps = 3, 60
    envs = make_envs(backend, mode, b, p_end=0.1)
    lat = ActionLatency(envs, delay=0.2, seed=0)
    assert lat.config.max_shift == 2
    lat.reset(seed=1)
    episode = [[] for _ in range(b)]  # the actions chosen in each env's current episode
    restart = np.zeros(b, bool)
    for k in range(steps):
        chosen = np.stack([np.full(b, k + 1.0), np.arange(b) + 1.0], 1).astype(np.float32)
        obs, _, term, trunc, info = lat.step(torch.from_numpy(chosen) if backend == "torch" else chosen)
        done = np_(term) | np_(trunc)
        obs = with_final(obs, info, done) if mode is AutoresetMode.SAME_STEP else np_(obs)
        for i in range(b):
            if restart[i]:
                assert obs[i, 0] == 0 and obs[i, 1] == -1  # the autoreset call: the env ignored it
                episode[i] = []
                continue
            episode[i].append(chosen[i])
            t = len(episode[i]) - 1
            expect = episode[i][t - 2] if t >= 2 else np.zeros(2, np.float32)
            assert obs[i, 0] == t + 1
            np.testing.assert_array_equal(obs[i, 1:], expect, err_msg=f"step {k} env {i} t {t}")
            pending = [episode[i][t - j] for j in range(min(2, t + 1))]
            window = np.array(pending + [expect] * (2 - len(pending)))
            terminal = mode is AutoresetMode.SAME_STEP and done[i]
            source = info["final_info"] if terminal else info
            np.testing.assert_array_equal(np_(source[IN_FLIGHT_KEY])[i], window)
        if mode is AutoresetMode.NEXT_STEP:
            restart = done
        else:
            for i in np.flatnonzero(done):
                episode[i] = []
            if mode is AutoresetMode.DISABLED and done.any():
                lat.reset(options={"reset_mask": torch.from_numpy(done) if backend == "torch" else done})
    assert sum(len(e) for e in episode) > 0


def test_zero_delay_passes_actions_through():
    lat = ActionLatency(make_envs("numpy", AutoresetMode.SAME_STEP, 2), seed=0)
    lat.reset(seed=0)
    a = np.array([[1.5, 2.5], [3.5, 4.5]], np.float32)
    obs, *_, info = lat.step(a)
    np.testing.assert_array_equal(obs[:, 1:], a)
    assert info[IN_FLIGHT_KEY].shape == (2, 0, 2)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "delay,jitter,initial",
    [
        (0.3, 0.2, "zero"),
        (0.2, 0.2, "first"),
        (sg.Choice([0.0, 0.1, 0.3]), sg.Uniform(0.0, 0.25), np.array([7.0, -7.0], np.float32)),
        (sg.Uniform(0.0, 0.35), 0.15, "first"),
    ],
)
def test_matches_slow_reference(backend, mode, delay, jitter, initial):
    run_against_reference(backend, mode, 5, delay, jitter, initial, steps=60, seed=3)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    backend=st.sampled_from(["numpy", "torch"]),
    mode=st.sampled_from(MODES),
    num_envs=st.integers(1, 4),
    d_steps=st.integers(0, 4),
    j_frac=st.sampled_from([0.0, 0.3, 0.5, 1.0]),
    random_delay=st.booleans(),
    random_jitter=st.booleans(),
    off_grid=st.booleans(),
    initial=st.sampled_from(["zero", "first", "array"]),
    steps=st.integers(1, 40),
    seed=st.integers(0, 2**16),
)
def test_property_against_reference(
    backend, mode, num_envs, d_steps, j_frac, random_delay, random_jitter, off_grid, initial, steps, seed
):
    delay = d_steps * DT + (0.037 if off_grid else 0.0)
    jitter = j_frac * delay
    if random_delay:
        delay = sg.Uniform(0.0, delay)
    if random_jitter and jitter > 0:
        jitter = sg.Choice([0.0, jitter / 2, jitter])
    init = np.array([-3.0, 9.0], np.float32) if initial == "array" else initial
    run_against_reference(backend, mode, num_envs, delay, jitter, init, steps, seed, env_seed=seed)


# -- jitter: monotone, and the law's statistics -----------------------------------------------------
def test_jitter_monotone_and_statistics():
    """Long episodes, delay 2 steps, jitter 2 steps: the applied action never goes back, the shift stays in
    [D, D + ceil(jitter/dt)], and its distribution matches a Monte-Carlo of the monotone law."""
    b, steps = 64, 400
    envs = make_envs("numpy", AutoresetMode.NEXT_STEP, b, p_end=0.0, max_steps=10_000)
    lat = ActionLatency(envs, delay=0.2, jitter=0.2, seed=123)
    lat.reset(seed=0)
    shifts, last = [], np.full(b, -np.inf)
    for k in range(steps):
        obs, *_ = lat.step(np.stack([np.full(b, k + 1.0), np.zeros(b)], 1).astype(np.float32))
        applied = obs[:, 1]  # the step (1-based) whose action was applied; 0 = initial action
        assert (applied >= np.minimum(last, applied)).all() and (applied >= last).all()
        last = applied
        if k >= 10:
            shifts.append(k + 1 - applied)
    shifts = np.concatenate(shifts)
    assert shifts.min() >= 2 and shifts.max() <= 4
    # the law from the spec, simulated with an independent numpy RNG
    rng = np.random.default_rng(0)
    n, prev, sim = 200_000, 10**9, []
    raw = 2 + np.floor(rng.uniform(0, 0.2, n) / DT + rng.uniform(0, 1, n))
    for r in raw:
        prev = min(r, prev + 1)
        sim.append(prev)
    sim = np.array(sim[100:])
    for s in (2, 3, 4):
        assert abs((shifts == s).mean() - (sim == s).mean()) < 0.02, s
    assert abs(shifts.mean() - sim.mean()) < 0.03
    # the unconstrained law's mean would be D + jitter / (2 dt) = 3; the monotone rule lowers it
    assert 2.0 < shifts.mean() < 3.0


def test_jitter_exceeding_dt_and_reseed():
    """jitter 2.5 dt: shifts reach D + 3; reset(seed=s) restarts the same stream."""

    def run(seed):
        lat = ActionLatency(
            make_envs("numpy", AutoresetMode.NEXT_STEP, 8, p_end=0.0, max_steps=999),
            delay=0.3,
            jitter=0.25,
            seed=99,
        )
        lat.reset(seed=seed)
        out = []
        for k in range(80):
            obs, *_ = lat.step(np.stack([np.full(8, k + 1.0), np.zeros(8)], 1).astype(np.float32))
            out.append(k + 1 - obs[:, 1])
        return np.array(out)

    a, b, c = run(5), run(5), run(6)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a[10:].min() >= 3 and a[10:].max() == 6


def test_latency_stream_independent_of_sensor_stream():
    """Seeded with the same number, the latency's draws are not the sensors' draws."""
    lat = ActionLatency(make_envs("numpy", AutoresetMode.NEXT_STEP, 2), delay=0.2, jitter=0.2, seed=7)
    draw = torch.zeros(2, 2).uniform_(generator=torch.Generator().manual_seed(7))  # a BatchRandom(seed=7)
    lat._queue.line.random.uniform_(lat._queue.line.draw_target, None, 1)
    assert not torch.equal(draw, lat._queue.line.draw_target)


# -- initial actions --------------------------------------------------------------------------------
def _first_steps(initial, low=-1e7, steps=4):
    envs = SyncVectorEnv([lambda: RecordEnv(p_end=0.0, low=low) for _ in range(2)])
    lat = ActionLatency(envs, delay=0.3, initial_action=initial)
    _, info = lat.reset(seed=0)
    out = [info[APPLIED_KEY]]
    for k in range(steps):
        obs, *_ = lat.step(np.full((2, 2), 10.0 + k, np.float32))
        out.append(obs[:, 1:])
    return np.array(out)


def test_initial_action_variants():
    zero = _first_steps("zero")
    np.testing.assert_array_equal(zero[:4], 0.0)
    np.testing.assert_array_equal(zero[4], 10.0)
    clipped = _first_steps("zero", low=0.5)  # zeros clipped into the action space
    np.testing.assert_array_equal(clipped[:4], 0.5)
    first = _first_steps("first")
    np.testing.assert_array_equal(first[0], 0.0)  # nothing chosen yet at the reset observation
    np.testing.assert_array_equal(first[1:5], 10.0)
    arr = _first_steps(np.array([2.0, -3.0]))
    np.testing.assert_array_equal(arr[:4], np.broadcast_to([2.0, -3.0], (4, 2, 2)))
    tensor = _first_steps(torch.tensor([2.0, -3.0]))
    np.testing.assert_array_equal(tensor, arr)


def test_first_action_is_per_episode():
    """``"first"``: each episode pads with its own first action, never the previous episode's."""
    envs = make_envs("numpy", AutoresetMode.SAME_STEP, 1, p_end=0.0, max_steps=3)
    lat = ActionLatency(envs, delay=0.5, initial_action="first")
    lat.reset(seed=0)
    seen = []
    for k in range(9):
        obs, _, _, trunc, info = lat.step(np.array([[k + 1.0, 0.0]], np.float32))
        final = info["final_obs"][0] if trunc[0] else obs[0]
        seen.append(final[1])
    assert seen == [1, 1, 1, 4, 4, 4, 7, 7, 7]


def test_discrete_actions():
    envs = gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync")
    lat = ActionLatency(envs, delay=0.04, dt=0.02, seed=0)  # dt = 0.02 s: 2 steps
    lat.reset(seed=0)
    _, *_, info = lat.step(np.array([1, 0, 1]))
    _, *_, info = lat.step(np.array([0, 0, 1]))
    assert info[IN_FLIGHT_KEY].tolist() == [[0, 1], [0, 0], [1, 1]]
    assert info[APPLIED_KEY].tolist() == [0, 0, 0]
    _, *_, info = lat.step(np.array([1, 1, 1]))
    assert info[APPLIED_KEY].tolist() == [1, 0, 1]
    assert lat.critic_sensors(applied=True)[APPLIED_KEY].shape == (1,)


# -- episode boundaries and randomization -----------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_boundary_never_crossed(mode):
    """Actions tagged with their episode: an applied action always comes from the current episode."""
    b = 6
    lat = ActionLatency(make_envs("numpy", mode, b, p_end=0.3), delay=0.3, jitter=0.3, seed=4)
    lat.reset(seed=2)
    episode, restart, crossings = np.zeros(b), np.zeros(b, bool), 0
    for k in range(200):
        obs, _, term, trunc, info = lat.step(np.stack([episode + 1, np.full(b, k)], 1).astype(np.float32))
        done = term | trunc
        if mode is AutoresetMode.SAME_STEP:
            obs = with_final(obs, info, done)
        live = ~restart
        tag = obs[live, 1]
        assert np.all((tag == 0) | (tag == episode[live] + 1)), k
        inflight = info[IN_FLIGHT_KEY][:, :, 0]  # fresh episodes (SAME_STEP, autoreset call) show zeros
        assert np.all((inflight == 0) | (inflight == episode[:, None] + 1))
        crossings += int(done.sum())
        if mode is AutoresetMode.NEXT_STEP:
            episode[restart] += 1
            restart = done
        else:
            episode[done] += 1
            if mode is AutoresetMode.DISABLED and done.any():
                _, info = lat.reset(options={"reset_mask": done})
                np.testing.assert_array_equal(info[IN_FLIGHT_KEY][done], 0.0)
    assert crossings > 50


def test_randomization_resampled_per_reset():
    b = 16
    lat = ActionLatency(
        make_envs("numpy", AutoresetMode.SAME_STEP, b, p_end=0.2),
        delay=sg.Choice([0.0, 0.1, 0.2, 0.3]),
        jitter=sg.Uniform(0.0, 0.1),
        seed=0,
    )
    assert lat.config.max_shift == 4
    _, info = lat.reset(seed=0)
    values = [info[LATENCY_KEY].copy()]
    changes_at_reset = changes_mid = 0
    for k in range(100):
        _, _, term, trunc, info = lat.step(np.full((b, 2), k + 1.0, np.float32))
        done = term | trunc
        now = info[LATENCY_KEY]
        changed = (now != values[-1]).any(1)
        changes_mid += int((changed & ~done).sum())
        changes_at_reset += int((changed & done).sum())
        if done.any():
            np.testing.assert_array_equal(info["final_info"][LATENCY_KEY][done], values[-1][done])
        values.append(now.copy())
    values = np.stack(values)
    assert changes_mid == 0 and changes_at_reset > 50
    assert set(np.round(values[..., 0].astype(float).ravel(), 6)) == {0.0, 0.1, 0.2, 0.3}
    assert (values[..., 1] <= values[..., 0] + 1e-7).all()  # effective jitter = min(jitter, delay)


def test_off_grid_delay_warns_and_rounds():
    with pytest.warns(UserWarning, match="not a multiple of dt"):
        lat = ActionLatency(make_envs("numpy", AutoresetMode.SAME_STEP, 1), delay=0.26)
    assert lat.config.max_shift == 3


# -- checkpoints ------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("mode", MODES)
def test_state_dict_round_trip_mid_episode(backend, mode):
    b = 5

    def actions(k):
        a = np.stack([np.full(b, k + 1.0), np.arange(b) * 1.5], 1).astype(np.float32)
        return torch.from_numpy(a) if backend == "torch" else a

    def advance(lat, k0, n):
        out = []
        for k in range(k0, k0 + n):
            obs, _, term, trunc, info = lat.step(actions(k))
            out.append([np_(obs), np_(info[IN_FLIGHT_KEY]), np_(info[APPLIED_KEY]), np_(info[LATENCY_KEY])])
            done = np_(term) | np_(trunc)
            if mode is AutoresetMode.DISABLED and done.any():
                _, info = lat.reset(options={"reset_mask": done})
                out.append([np_(info[IN_FLIGHT_KEY]), np_(info[LATENCY_KEY])])
        return out

    kw = dict(delay=sg.Uniform(0.0, 0.3), jitter=sg.Uniform(0.0, 0.2), initial_action="first")
    lat = ActionLatency(make_envs(backend, mode, b, p_end=0.2), seed=11, **kw)
    lat.reset(seed=3)
    advance(lat, 0, 17)
    state = lat.state_dict()
    env_copy = copy.deepcopy(lat.env)
    expected = advance(lat, 17, 40)
    fresh = ActionLatency(env_copy, seed=999, **kw)
    fresh.load_state_dict(state)
    state["ring"].fill_(-5)  # the wrapper owns copies
    got = advance(fresh, 17, 40)
    for e, g in zip(expected, got, strict=True):
        for x, y in zip(e, g, strict=True):
            assert x.tobytes() == y.tobytes()


def test_sensor_observation_checkpoint_covers_the_latency():
    """SensorObservation.state_dict(include_envs=True) snapshots the wrapped env, ActionLatency included."""

    def make():
        envs = gym.make_vec(
            "Pendulum-v1", num_envs=3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": "SameStep"}
        )
        lat = ActionLatency(envs, delay=sg.Uniform(0.0, 0.1), jitter=0.05, seed=0)
        sensors = {"a": sg.StateSensorOptions(key="obs", noise=0.1), **lat.critic_sensors()}
        return SensorObservation(lat, sensors, policy=["a"], seed=0)

    acts = np.random.default_rng(0).uniform(-2, 2, (60, 3, 1)).astype(np.float32)
    env = make()
    env.reset(seed=0)
    for k in range(20):
        env.step(acts[k])
    state = env.state_dict(include_envs=True)
    expected = [env.step(acts[k])[0] for k in range(20, 60)]
    fresh = make()
    fresh.reset(seed=5)
    fresh.load_state_dict(state)
    assert isinstance(fresh.env, ActionLatency)
    for k, e in zip(range(20, 60), expected, strict=True):
        got = fresh.step(acts[k])[0]
        for key in ("policy", "critic"):
            assert got[key].tobytes() == e[key].tobytes()


def test_load_state_dict_refuses_a_different_wrapper():
    lat = ActionLatency(make_envs("numpy", AutoresetMode.SAME_STEP, 3), delay=0.2)
    lat.reset(seed=0)
    other = ActionLatency(make_envs("numpy", AutoresetMode.SAME_STEP, 3), delay=0.3)
    with pytest.raises(ValueError, match=r"max_shift=2.*Fix"):
        other.load_state_dict(lat.state_dict())
    with pytest.raises(ValueError, match="not an ActionLatency state_dict"):
        other.load_state_dict({"ring": 1})


# -- bad input --------------------------------------------------------------------------------------
def _envs(n=2):
    return make_envs("numpy", AutoresetMode.SAME_STEP, n)


@pytest.mark.parametrize(
    "kwargs,exc,pattern",
    [
        (dict(delay=-0.1), ValueError, r"ActionLatency\.delay=-0\.1 .*>= 0.*Fix"),
        (dict(delay=float("nan")), ValueError, r"ActionLatency\.delay=nan.*Fix"),
        (dict(delay=True), TypeError, r"ActionLatency\.delay=True.*Fix"),
        (dict(delay="0.1"), TypeError, r"ActionLatency\.delay='0\.1'.*Fix"),
        (dict(delay=0.1, jitter=0.2), ValueError, r"ActionLatency\.jitter=0\.2.*<= delay.*Fix: lower jitter"),
        (dict(delay=sg.Uniform(0, 0.1), jitter=sg.Uniform(0, 0.2)), ValueError, r"jitter=Uniform.*Fix"),
        (dict(delay=sg.Normal(0.1, 0.1)), ValueError, r"delay=Normal.*negative.*Fix"),
        (dict(delay=sg.Normal(0.1, 0.1, low=0.0)), ValueError, r"delay=Normal.*bounded.*Fix"),
        (dict(dt=0.0), ValueError, r"dt=0\.0.*Fix"),
        (dict(dt=-1), ValueError, r"dt=-1.*Fix"),
        (dict(initial_action="last"), ValueError, r"initial_action='last'.*Fix"),
        (dict(initial_action=np.zeros(3)), ValueError, r"initial_action=.*shape \(3,\).*\(2,\).*Fix"),
        (dict(initial_action=np.array([2e7, 0.0])), ValueError, r"initial_action=.*not an action.*Fix"),
        (dict(initial_action=None), TypeError, r"initial_action=None.*Fix"),
        (dict(seed=-1), ValueError, r"seed=-1.*Fix"),
        (dict(seed=1.5), TypeError, r"seed=1\.5.*Fix"),
    ],
)
def test_bad_options(kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        ActionLatency(_envs(), **kwargs)


def test_bad_env_and_calls():
    with pytest.raises(TypeError, match=r"VectorEnv, got RecordEnv.*Fix"):
        ActionLatency(RecordEnv())
    dict_actions = SyncVectorEnv([lambda: gym.make("Pendulum-v1")])
    dict_actions.single_action_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})
    with pytest.raises(TypeError, match=r"action space Dict.*Fix"):
        ActionLatency(dict_actions, dt=0.05)
    lat = ActionLatency(_envs(), delay=0.1)
    with pytest.raises(RuntimeError, match=r"before reset.*Fix"):
        lat.step(np.zeros((2, 2), np.float32))
    lat.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(3, 2\), expected \(2, 2\).*Fix"):
        lat.step(np.zeros((3, 2), np.float32))
    with pytest.raises(TypeError, match=r"cannot be read.*Fix"):
        lat.step([["a", "b"], ["c", "d"]])
    with pytest.raises(ValueError, match=r"reset_mask.*shape \(2,\), got shape \(3,\).*Fix"):
        lat.reset(options={"reset_mask": np.ones(3, bool)})
    with pytest.raises(ValueError, match=r"reset_mask.*dtype torch.int64.*Fix"):
        lat.reset(options={"reset_mask": torch.ones(2, dtype=torch.long)})
    with pytest.raises(ValueError, match=r"reset\(seed\)=-3.*Fix"):
        lat.reset(seed=-3)
    with pytest.raises(ValueError, match=r"no action is ever in flight.*Fix"):
        ActionLatency(_envs()).critic_sensors()


def test_no_autoreset_metadata_warns():
    class Bare(TorchRecordEnv):
        pass

    env = Bare(2, AutoresetMode.NEXT_STEP)
    env.metadata = {}
    with pytest.warns(UserWarning, match="assuming NEXT_STEP"):
        ActionLatency(env, delay=0.1)


# -- composition ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_in_flight_actions_reach_the_critic(mode):
    """Inside SensorObservation the critic sees the in-flight actions (terminal ones in final_obs)."""
    b = 4
    lat = ActionLatency(make_envs("numpy", mode, b, p_end=0.2), delay=0.2, jitter=0.1, seed=0)
    sensors = {"t": sg.StateSensorOptions(key="obs", index=[0]), **lat.critic_sensors(latency=True)}
    env = SensorObservation(lat, sensors, policy=["t"], critic_env_obs=False, seed=0)
    assert env.observation_space["critic"].shape == (b, 1 + 3 * 2 + 2)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["critic"][:, 1:7], 0.0)
    saw_final = False
    for k in range(40):
        a = np.stack([np.full(b, k + 1.0), np.arange(b)], 1).astype(np.float32)
        obs, _, term, trunc, info = env.step(a)
        done = term | trunc
        lat_state = info[IN_FLIGHT_KEY].reshape(b, -1)
        np.testing.assert_array_equal(obs["critic"][:, 1:7], lat_state)
        np.testing.assert_allclose(obs["critic"][:, 7:], info[LATENCY_KEY])
        if mode is AutoresetMode.SAME_STEP and done.any():
            for i in np.flatnonzero(done):
                final = info["final_obs"][i]["critic"]
                np.testing.assert_array_equal(final[1:7], info["final_info"][IN_FLIGHT_KEY][i].ravel())
                saw_final = True
        if mode is AutoresetMode.DISABLED and done.any():
            obs, info = env.reset(options={"reset_mask": done})
            np.testing.assert_array_equal(obs["critic"][done, 1:7], 0.0)
    assert saw_final or mode is not AutoresetMode.SAME_STEP


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_batched_pendulum_torch(mode):
    env = BatchedPendulumEnv(num_envs=8, max_episode_steps=15, autoreset_mode=mode)
    lat = ActionLatency(env, delay=0.1, jitter=sg.Uniform(0.0, 0.1), initial_action="first", seed=0)
    obs, info = lat.reset(seed=0)
    assert torch.is_tensor(info[IN_FLIGHT_KEY]) and info[IN_FLIGHT_KEY].shape == (
        8,
        4,
        1,
    )  # dt = 0.05: 2 + 2 steps
    for k in range(40):
        a = torch.full((8, 1), (k % 5) * 0.25)
        obs, _, term, trunc, info = lat.step(a)
        assert torch.is_tensor(obs) and torch.is_tensor(info[APPLIED_KEY])
        if mode == "Disabled" and bool((term | trunc).any()):
            lat.reset(options={"reset_mask": term | trunc})


def test_sb3_composition():
    """SB3: PPO trains through SensorObservation(ActionLatency(...)); a terminal observation's critic part
    holds the actions that were in flight when the episode ended."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    from sensorgym.integrations.sb3 import AsymmetricActorCriticPolicy, SB3VecEnv

    envs = gym.make_vec(
        "Pendulum-v1",
        num_envs=2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    lat = ActionLatency(envs, delay=0.1, jitter=0.05, seed=0)
    sensors = {"angle": sg.StateSensorOptions(key="obs", index=[0, 1]), **lat.critic_sensors()}
    venv = SB3VecEnv(SensorObservation(lat, sensors, policy=["angle"], seed=0))
    venv.seed(0)
    venv.reset()
    rng = np.random.default_rng(0)
    for _ in range(200):
        obs, _, dones, infos = venv.step(rng.uniform(-2, 2, (2, 1)).astype(np.float32))
    assert dones.all()  # Pendulum truncates at 200 steps
    np.testing.assert_array_equal(obs["critic"][:, 2:5], 0.0)  # the reset observations: nothing in flight
    for i in range(2):
        terminal = infos[i]["terminal_observation"]["critic"][2:5]
        np.testing.assert_array_equal(terminal, infos[i][IN_FLIGHT_KEY].ravel())
        assert np.abs(terminal).max() > 0
    model = PPO(AsymmetricActorCriticPolicy, venv, n_steps=32, batch_size=32, seed=0)
    model.learn(64)


def test_async_equals_sync():
    def run(mode):
        envs = gym.make_vec(
            "Pendulum-v1", num_envs=2, vectorization_mode=mode, vector_kwargs={"autoreset_mode": "SameStep"}
        )
        lat = ActionLatency(envs, delay=0.1, jitter=0.1, seed=1)
        out = [lat.reset(seed=0)[0]]
        for k in range(30):
            obs, _, _, _, info = lat.step(np.full((2, 1), np.sin(k), np.float32))
            out += [obs, info[IN_FLIGHT_KEY]]
        lat.close()
        return out

    for a, b in zip(run("sync"), run("async"), strict=True):
        np.testing.assert_array_equal(a, b)


def test_docs_code_blocks_run():
    text = (ROOT / "docs/action_latency.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    module = types.ModuleType("doc_action_latency")
    sys.modules[module.__name__] = module
    try:
        for block in blocks:
            exec(compile(block, "docs/action_latency.md", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]


@pytest.mark.parametrize("jitter", [0.0, 0.02, 0.13, 0.14, 0.27, 0.3])
def test_jitter_ceiling_agrees_with_the_sensor_delay_law(jitter):
    """The per-env jitter ceiling uses the latency module's own documented tolerance
    (JITTER_CEIL_TOLERANCE): a jitter of a whole number of steps up to float rounding (0.14 / 0.02 =
    7.000000000000001) adds that many steps, exactly as the sensors' jitter_extra_steps, which sizes the
    queue (max_shift)."""
    from sensorgym.core.delay_law import delay_steps, jitter_extra_steps
    from sensorgym.wrappers.latency import JITTER_CEIL_TOLERANCE

    assert JITTER_CEIL_TOLERANCE == 1e-9
    delay, dt = 0.3, 0.02
    env = BatchedPendulumEnv(2, autoreset_mode="SameStep")
    env.dt = dt  # a pendulum stepped at 0.02 s (a dt contradicting the env's own is refused)
    lat = ActionLatency(env, delay, jitter, dt=dt, seed=0)
    lat.reset(seed=0)
    expected = jitter_extra_steps(jitter, dt)
    assert lat._queue.steps.jitter_ceil[:, 0].tolist() == [expected, expected]
    assert lat.config.max_shift == delay_steps(delay, dt) + expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(30):  # the applied shift never exceeds the queue
            lat.step(torch.zeros(2, 1))
    assert int(lat._shift().max()) <= lat.config.max_shift


@pytest.mark.parametrize(
    ("kwargs", "kind", "message"),
    [
        (
            dict(delay=-0.1),
            ValueError,
            "ActionLatency.delay=-0.1 is invalid: delay must be a finite number of "
            "seconds >= 0. Fix: use delay=0.0 for none.",
        ),
        (
            dict(delay="x"),
            TypeError,
            "ActionLatency.delay='x' is invalid: expected seconds as a float or a "
            "Distribution. Fix: pass e.g. delay=0.02 or delay=sg.Uniform(0.0, 0.04).",
        ),
        (
            dict(delay=0.1, jitter=sg.Normal(0.05, 0.01, low=0.0)),
            ValueError,
            "so the action queue can be sized",
        ),
        (dict(delay=sg.Uniform(-0.1, 0.1)), ValueError, "it can produce negative delay (-0.1)"),
    ],
)
def test_latency_times_are_checked_like_sensor_times(kwargs, kind, message):
    """ActionLatency's delay/jitter go through the options' own time check (options.check_seconds)."""
    with pytest.raises(kind) as caught:
        ActionLatency(BatchedPendulumEnv(2, autoreset_mode="SameStep"), **kwargs)
    assert message in str(caught.value)
