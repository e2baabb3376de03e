"""bitcheck scenarios of bad input (``err/``): each builds what it needs, hands one invalid input to the
public API and records the exception's type and message; where a refused call must leave the manager as it
was, the reads after it are recorded too."""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from bitcheck_engine import B, Feed, manager, reads
from bitcheck_gym import EchoEnv, echo_envs
from gymnasium.vector import AutoresetMode

import sensorgym as sg
from sensorgym.wrappers import ActionLatency, SensorObservation

U, N = sg.Uniform, sg.Normal
S = sg.StateSensorOptions


def _built(**options: Any) -> tuple[sg.SensorManager, Feed]:
    mgr = manager("numpy", False, {"a": S(key="x", shape=(3,), **options), "b": S(key="y", index=[0, 2])})
    feed = Feed({"x": 3, "y": 4}, seed=1)
    mgr.reset(feed(0))
    mgr.step(feed(1))
    return mgr, feed


def _unregistered(rec: Any, ctx: Any) -> None:
    """The message lists the registered classes, which depend on what the process imported (a test module
    defines its own): the list is recorded as '[...]' so the record holds the rest of the line."""
    try:
        sg.SensorManager(num_envs=2, dt=0.02).add_sensor(_Unregistered())
    except Exception as e:
        message = re.sub(r"\[[^]]*\]", "[...]", str(e))
        rec.out("error", f"{type(e).__name__}: {message}")
        return
    rec.out("error", "no exception")


def _then_reads(fn: Callable[[sg.SensorManager, Feed], Any], **options: Any) -> Callable:
    """A refused call on a built manager, then the reads and one more step: nothing changed."""

    def scenario(rec: Any, ctx: Any) -> None:
        mgr, feed = _built(**options)
        rec.raises("error", lambda: fn(mgr, feed))
        reads(rec, "after", mgr)
        mgr.step(feed(2))
        reads(rec, "next", mgr)

    return scenario


def _raises(fn: Callable[[], Any]) -> Callable:
    def scenario(rec: Any, ctx: Any) -> None:
        rec.raises("error", fn)

    return scenario


def _state(**changes: Any) -> Callable:
    def fn(mgr: sg.SensorManager, feed: Feed) -> None:
        state = feed(2)
        state.update(changes)
        for key, value in changes.items():
            if value is None:
                del state[key]
        mgr.step(state)

    return fn


def _add_after_build() -> None:
    mgr, _ = _built()
    mgr.add_sensor(S(key="x"))


def _duplicate_name() -> None:
    mgr = sg.SensorManager(num_envs=B, dt=0.02)
    mgr.add_sensor(S(key="x"), name="a")
    mgr.add_sensor(S(key="y"), name="a")


def _step_before_reset() -> None:
    mgr = sg.SensorManager(num_envs=B, dt=0.02)
    mgr.add_sensor(S(key="x", shape=(3,)))
    mgr.step({"x": np.zeros((B, 3), np.float32)})


def _load_mismatch(field: str) -> Callable:
    def fn() -> None:
        mgr, _ = _built(noise=0.1)
        other, _ = _built(noise=0.2 if field == "noise" else 0.1)
        saved = mgr.state_dict()
        if field == "version":
            saved["version"] = 3
        other.load_state_dict(saved)

    return fn


class _Unregistered(sg.SimpleSensorOptions):
    pass


def _latency(**kw: Any) -> Callable:
    return lambda: ActionLatency(echo_envs("numpy", AutoresetMode.NEXT_STEP), **kw)


def _latency_step(actions: Any, reset: bool = True) -> Callable:
    def fn() -> None:
        lat = ActionLatency(echo_envs("numpy", AutoresetMode.NEXT_STEP), delay=0.2)
        if reset:
            lat.reset(seed=0)
        lat.step(actions)

    return fn


def _latency_mask() -> None:
    lat = ActionLatency(echo_envs("numpy", AutoresetMode.DISABLED), delay=0.2)
    lat.reset(seed=0)
    lat.reset(options={"reset_mask": np.zeros(3, bool)})


def _observation(sensors: dict, **kw: Any) -> Callable:
    return lambda: SensorObservation(gym.make_vec("Pendulum-v1", 2, vectorization_mode="sync"), sensors, **kw)


ERRORS: dict[str, Callable] = {
    # the manager's own arguments
    "manager/num_envs": _raises(lambda: sg.SensorManager(num_envs=0, dt=0.02)),
    "manager/dt": _raises(lambda: sg.SensorManager(num_envs=2, dt=-0.01)),
    "manager/executor": _raises(lambda: sg.SensorManager(num_envs=2, dt=0.02, executor="gpu")),
    "manager/num_threads": _raises(lambda: sg.SensorManager(num_envs=2, dt=0.02, num_threads=-2)),
    # options (SPEC 2.5, 2.8, 5.1)
    "options/delay_negative": _raises(lambda: S(key="x", delay=-0.1)),
    "options/delay_type": _raises(lambda: S(key="x", delay="0.1")),
    "options/delay_unbounded": _raises(lambda: S(key="x", delay=N(0.05, 0.01))),
    "options/jitter_over_delay": _raises(lambda: S(key="x", delay=0.01, jitter=0.02)),
    "options/history_negative": _raises(lambda: S(key="x", history_length=-1)),
    "options/history_type": _raises(lambda: S(key="x", history_length="3")),
    "options/padding": _raises(lambda: S(key="x", padding_type="last")),
    "options/nan_policy": _raises(lambda: S(key="x", nan_policy="ignore")),
    "options/max_delay": _raises(lambda: S(key="x", delay=0.05, jitter=0.02, max_delay=0.06)),
    "options/noise_negative": _raises(lambda: S(key="x", noise=-0.1)),
    "options/noise_string": _raises(lambda: S(key="x", noise="a")),
    "options/noise_empty": _raises(lambda: S(key="x", noise=[])),
    "options/noise_2d": _raises(lambda: S(key="x", noise=np.ones((2, 2)))),
    "options/noise_distribution_negative": _raises(lambda: S(key="x", noise=U(-0.1, 0.1))),
    "options/noise_and_density": _raises(lambda: S(key="x", noise=0.1, noise_density=0.01)),
    "options/random_walk_and_density": _raises(
        lambda: S(key="x", random_walk=[0.1, 0.0], random_walk_density=0.1)
    ),
    "options/correlation_time": _raises(lambda: S(key="x", bias_instability=0.1)),
    "options/scale_factor": _raises(lambda: S(key="x", scale_factor=-1.5)),
    "options/scale_factor_distribution": _raises(lambda: S(key="x", scale_factor=U(-2.0, 0.0))),
    "options/bandwidth_nyquist_period": _raises(lambda: S(key="x", bandwidth=60.0, update_period=0.01)),
    "options/bandwidth_nyquist_dt": _raises(
        lambda: manager("numpy", False, {"a": S(key="x", bandwidth=30.0)})
    ),
    "options/dropout_one": _raises(lambda: S(key="x", dropout=1.0)),
    "options/dropout_distribution": _raises(lambda: S(key="x", dropout=U(0.0, 1.2))),
    "options/burst_short": _raises(lambda: S(key="x", dropout=0.2, dropout_burst=0.5)),
    "options/burst_without_dropout": _raises(lambda: S(key="x", dropout_burst=3.0)),
    "options/burst_q_over_one": _raises(lambda: S(key="x", dropout=0.8, dropout_burst=2.0)),
    "options/update_period_negative": _raises(lambda: S(key="x", update_period=-0.01)),
    "options/key": _raises(lambda: S(key="")),
    "options/shape": _raises(lambda: S(key="x", shape=(0, 2))),
    "options/index": _raises(lambda: S(key="x", index=[])),
    "options/imu_per_field_and_whole": _raises(
        lambda: sg.IMUOptions(body="b", gyro_noise=0.1, gyro_noise_density=0.01)
    ),
    "options/imu_pos_offset": _raises(lambda: sg.IMUOptions(body="b", pos_offset=(0.0, 0.1))),
    "options/imu_coupling": _raises(lambda: sg.IMUOptions(body="b", acc_cross_axis_coupling=(0.1, 0.2))),
    "options/attribute": _raises(lambda: sg.EnvAttributeOptions(attr="")),
    # building and stepping
    "build/unregistered": _unregistered,
    "build/not_options": _raises(lambda: sg.SensorManager(num_envs=2, dt=0.02).add_sensor({"key": "x"})),
    "build/after_build": _raises(_add_after_build),
    "build/duplicate_name": _raises(_duplicate_name),
    "build/step_before_reset": _raises(_step_before_reset),
    "build/noise_length": _raises(lambda: _built(noise=[0.1, 0.2])),
    "build/shape_mismatch": _raises(
        lambda: manager("numpy", False, {"a": S(key="x", shape=(2,))}).reset(Feed({"x": 3})(0))
    ),
    "build/index_range": _raises(
        lambda: manager("numpy", False, {"a": S(key="x", index=[5])}).reset(Feed({"x": 3})(0))
    ),
    "build/no_shape": _raises(
        lambda: manager("numpy", False, {"a": S(key="x")}).reset({"q": np.zeros((B, 1))})
    ),
    "state/missing_key": _then_reads(_state(x=None)),
    "state/misspelled_key": _then_reads(lambda m, f: m.step({"xx": f(2)["x"], "y": f(2)["y"]})),
    "state/wrong_width": _then_reads(_state(x=np.zeros((B, 4), np.float32))),
    "state/wrong_batch": _then_reads(_state(x=np.zeros((B + 1, 3), np.float32))),
    "state/not_numeric": _then_reads(_state(x=np.array([["a"] * 3] * B))),
    "state/nan_raise": _then_reads(
        _state(x=np.full((B, 3), np.nan, np.float32)), nan_policy="raise", noise=0.1
    ),
    "mask/wrong_shape": _then_reads(lambda m, f: m.step(f(2), reset_mask=torch.arange(B + 1) == 0)),
    # an all-False mask of the wrong shape is taken for "no reset" today (recorded as it is)
    "mask/wrong_shape_empty": _then_reads(
        lambda m, f: m.step(f(2), reset_mask=torch.zeros(B + 1, dtype=torch.bool))
    ),
    "mask/all_indices": _then_reads(lambda m, f: m.step(f(2), reset_mask=[0, 1, 2, 3, 4])),
    "mask/repeated": _then_reads(lambda m, f: m.reset(f(2), envs_idx=[1, 1])),
    "mask/index_range": _then_reads(lambda m, f: m.reset(f(2), envs_idx=[B])),
    "mask/float": _then_reads(lambda m, f: m.step(f(2), reset_mask=np.zeros(B, np.float32))),
    "read/history_too_long": _then_reads(lambda m, f: m.sensors[0].read(history_length=3), history_length=2),
    "read/history_negative": _then_reads(lambda m, f: m.sensors[0].read(history_length=-1)),
    "setter/noise_length": _then_reads(lambda m, f: m.sensors[0].set_noise([0.1, 0.2])),
    "setter/noise_negative": _then_reads(lambda m, f: m.sensors[0].set_noise(-1.0), noise=0.1),
    "setter/density_exclusive": _then_reads(lambda m, f: m.sensors[0].set_noise(0.1), noise_density=0.01),
    "setter/jitter_over_delay": _then_reads(lambda m, f: m.sensors[0].set_jitter(0.05), delay=0.02),
    "setter/delay_over_max": _then_reads(
        lambda m, f: m.sensors[0].set_delay(0.2), delay=0.02, max_delay=0.06
    ),
    "checkpoint/noise_differs": _raises(_load_mismatch("noise")),
    "checkpoint/version": _raises(_load_mismatch("version")),
    "checkpoint/pickle": _raises(lambda: pickle.dumps(_built()[0])),
    # the Gymnasium layer
    "latency/not_vector_env": _raises(lambda: ActionLatency(EchoEnv(), delay=0.1)),
    "latency/seed": _raises(_latency(delay=0.1, seed=-1)),
    "latency/jitter_over_delay": _raises(_latency(delay=0.1, jitter=0.2)),
    "latency/initial_action": _raises(_latency(delay=0.1, initial_action="last")),
    "latency/initial_action_shape": _raises(_latency(delay=0.1, initial_action=np.zeros(3, np.float32))),
    "latency/action_shape": _raises(_latency_step(np.zeros((4, 3), np.float32))),
    "latency/step_before_reset": _raises(_latency_step(np.zeros((4, 2), np.float32), reset=False)),
    "latency/reset_mask": _raises(_latency_mask),
    "latency/critic_in_flight": _raises(lambda: _latency()().critic_sensors()),
    "observation/not_vector_env": _raises(lambda: SensorObservation(EchoEnv(), {"a": S(key="obs")})),
    "observation/unknown_policy": _raises(_observation({"a": S(key="obs")}, policy=["b"])),
    "observation/missing_key": _raises(_observation({"a": S(key="observation")})),
}


def scenarios() -> dict[str, Callable]:
    return {f"err/{name}": fn for name, fn in ERRORS.items()}
