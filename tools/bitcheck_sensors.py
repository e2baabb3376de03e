"""bitcheck scenarios of the sensors: the run-time setters, ``state_dict`` round trips mid-episode (save,
continue, load into a fresh manager, continue; a deep copy; a rollback), several classes in one manager
(``StateSensor``, ``EnvAttributeSensor``, custom classes with their own hooks and dtypes, the IMU), the IMU
with per-field options and a randomized mount on a synthetic state (no MuJoCo), and the checkpoint files
of the manager (``file/``) that a later tree must load.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from bitcheck_engine import B, Feed, drive, finish, manager, randomization, reads, start

import sensorgym as sg
from sensorgym.sensors.mujoco.base import state_key
from sensorgym.sensors.mujoco.imu import alpha_key

U, N, C = sg.Uniform, sg.Normal, sg.Choice
EXECUTORS = ("numpy", "torch")


# -- setters -----------------------------------------------------------------------------------------------
def _setter_sensors() -> dict[str, sg.StateSensorOptions]:
    return {
        "a": sg.StateSensorOptions(
            key="x", shape=(3,), delay=0.04, noise=0.1, random_walk=0.01, max_delay=0.12
        ),
        "b": sg.StateSensorOptions(
            key="y", index=[1, 3], jitter=0.0, delay=0.02, noise=U(0.0, 0.2), history_length=2
        ),
    }


def _setter_events(mgr: sg.SensorManager, which: str) -> dict[int, Callable[[], None]]:
    a, b = mgr.sensors
    rows = torch.tensor([False, True, False, True, True])
    per_env = torch.arange(B * 3, dtype=torch.float32).reshape(B, 3) / 50
    events = {
        "noise": {
            3: lambda: a.set_noise(0.3),
            5: lambda: a.set_noise(per_env),
            6: lambda: b.set_noise(0.05, [0, 2]),
        },
        "bias": {3: lambda: a.set_bias([0.1, 0.2, 0.3], envs_idx=[1, 3]), 6: lambda: b.set_bias(-0.5, rows)},
        "random_walk": {
            3: lambda: a.set_random_walk(0.0, envs_idx=rows),
            9: lambda: b.set_random_walk([0.1, 0.0]),
        },
        "resolution": {3: lambda: a.set_resolution(0.05), 6: lambda: a.set_resolution([0.0, 0.5, 0.1], [4])},
        "delay": {
            3: lambda: a.set_delay(0.08),
            5: lambda: a.set_delay(0.02, envs_idx=[0]),
            9: lambda: b.set_delay(0.0),
        },
        "jitter": {
            3: lambda: a.set_jitter(0.02),
            6: lambda: a.set_jitter(0.0, envs_idx=[2]),
            8: lambda: b.set_jitter(0.02),
        },
    }
    if which != "all":
        return events[which]
    merged: dict[int, list[Callable[[], None]]] = {}  # every setter, half of them 11 steps later
    for i, group in enumerate(events.values()):
        for t, fn in group.items():
            merged.setdefault(t + 11 * (i % 2), []).append(fn)
    return {t: (lambda fns=fns: [f() for f in fns]) for t, fns in merged.items()}


def setter_scenario(which: str, executor: str, per_env: bool) -> Callable:
    def scenario(rec: Any, ctx: Any) -> None:
        mgr = manager(executor, per_env, _setter_sensors())
        feed = Feed({"x": 3, "y": 4}, seed=3)
        start(rec, mgr, feed)
        drive(rec, mgr, feed, range(1, 25), events=_setter_events(mgr, which))
        finish(rec, mgr)

    return scenario


def seed_scenario(executor: str, per_env: bool) -> Callable:
    """``SensorManager.seed``: whole, per env (a list), and for some envs only (folded into one generator's
    stream, or the chosen envs' own streams), between steps."""

    def scenario(rec: Any, ctx: Any) -> None:
        mgr = manager(executor, per_env, _setter_sensors())
        feed = Feed({"x": 3, "y": 4}, seed=4)
        events = {
            3: lambda: mgr.seed(5),
            6: lambda: mgr.seed(7, envs_idx=[1, 3]),
            9: lambda: mgr.seed(
                [10, 11, 12, 13, 14], envs_idx=torch.tensor([True, False, False, False, True])
            ),
            12: lambda: mgr.seed([20, 21, 22, 23, 24]),
            18: lambda: mgr.seed(3, envs_idx=[]),
        }
        start(rec, mgr, feed)
        drive(rec, mgr, feed, range(1, 25), events=events)
        finish(rec, mgr)

    return scenario


# -- state_dict round trips --------------------------------------------------------------------------------
ROUND_TRIPS: dict[str, dict[str, sg.StateSensorOptions]] = {
    "delay_jitter_noise": {
        "a": sg.StateSensorOptions(
            key="x", shape=(3,), delay=0.06, jitter=0.04, noise=0.1, random_walk=0.02, history_length=2
        ),
        "b": sg.StateSensorOptions(
            key="y", index=[0, 2], bias=U(-1.0, 1.0), resolution=0.05, delay=U(0.0, 0.06)
        ),
    },
    "sampler_error_model": {
        "a": sg.StateSensorOptions(
            key="x",
            shape=(3,),
            update_period=U(0.03, 0.07),
            dropout=0.2,
            dropout_burst=2.0,
            bandwidth=5.0,
            noise_density=0.01,
        ),
        "b": sg.StateSensorOptions(
            key="y",
            index=[1, 2],
            bias_instability=0.1,
            bias_correlation_time=0.5,
            scale_factor=U(-0.1, 0.1),
            random_walk_density=0.02,
        ),
    },
    "nan_hold_history": {
        "a": sg.StateSensorOptions(
            key="x",
            shape=(3,),
            nan_policy="hold",
            delay=0.04,
            history_length=3,
            padding_type="zero",
            noise=0.05,
        ),
        "b": sg.StateSensorOptions(key="y", index=[3], nan_policy="raise", jitter=0.02, delay=0.02),
    },
}


def round_trip_scenario(config: str, executor: str, per_env: bool) -> Callable:
    """Save at step 8, continue to 14 (``live``); load into a fresh manager through ``torch.save`` and
    ``torch.load(weights_only=True)`` and continue (``fresh``); a deep copy taken at 8 continues (``copy``);
    the original loads its own checkpoint back and continues again (``rollback``). Every branch is
    recorded, the checkpoint too."""
    sensors = ROUND_TRIPS[config]

    def scenario(rec: Any, ctx: Any) -> None:
        feed = Feed({"x": 3, "y": 4}, seed=5, nan=config.startswith("nan"))
        mgr = manager(executor, per_env, sensors)
        start(rec, mgr, feed)
        drive(rec, mgr, feed, range(1, 9))
        saved = mgr.state_dict()
        rec.state("8.sd", saved)
        twin = copy.deepcopy(mgr)
        later = range(9, 15)
        drive(rec, mgr, feed, later, tag="live.")
        buffer = io.BytesIO()
        torch.save(saved, buffer)
        buffer.seek(0)
        fresh = manager(executor, per_env, sensors, seed=999)
        fresh.reset(feed(100))
        fresh.load_state_dict(torch.load(buffer, weights_only=True))
        rec.state("fresh.sd", fresh.state_dict())
        drive(rec, fresh, feed, later, tag="fresh.")
        drive(rec, twin, feed, later, tag="copy.")
        mgr.load_state_dict(saved)
        drive(rec, mgr, feed, later, tag="rollback.")
        finish(rec, mgr)

    return scenario


# -- custom classes ----------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CounterOptions(sg.SimpleSensorOptions):
    key: str = "z"
    gain: float = 2.0


class Counter(sg.SimpleSensor):
    """Integer counts of a lagged reading: a transform that reads the previous timeline slot, a projection
    to int32, per-env state in ``md.extra`` reset by ``_reset_envs`` and constants in ``md.constants``."""

    options_cls = CounterOptions
    return_format = (2,)
    cache_dtype = torch.int32
    intermediate_dtype = torch.float32

    @classmethod
    def _init_metadata(cls, md: Any) -> None:
        gains = [s.options.gain for s in md.sensors for _ in range(2)]
        md.constants["gain"] = torch.tensor([gains], dtype=torch.float32, device=md.device)
        md.extra["resets"] = torch.zeros(md.num_envs, 1, dtype=torch.float32, device=md.device)

    @classmethod
    def _reset_envs(cls, md: Any, envs_mask: torch.Tensor) -> None:
        md.extra["resets"][envs_mask] += 1.0

    @classmethod
    def _update_raw_data(cls, state: Any, md: Any, raw: torch.Tensor) -> None:
        for s in md.sensors:
            raw[:, s.cache_slice] = torch.as_tensor(state[s.options.key], dtype=torch.float32)
        raw.add_(md.extra["resets"])

    @classmethod
    def _apply_transform(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> None:
        if is_measured:
            data.mul_(0.5).add_(timeline.at(1), alpha=0.5)

    @classmethod
    def _post_process(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> torch.Tensor:
        out = timeline.at(0)
        out.copy_(torch.round(data * md.constants["gain"]))
        return out


@dataclass(frozen=True, kw_only=True)
class HalfOptions(sg.SimpleSensorOptions):
    key: str = "x"


class Half(sg.SimpleSensor):
    """float16 readings: a class numpy promotes differently, which keeps the torch executor; a physics
    imperfection (before the response: it goes through it)."""

    options_cls = HalfOptions
    return_format = (3,)
    cache_dtype = torch.float16

    @classmethod
    def _update_raw_data(cls, state: Any, md: Any, raw: torch.Tensor) -> None:
        for s in md.sensors:
            raw[:, s.cache_slice] = torch.as_tensor(state[s.options.key]).to(torch.float16)

    @classmethod
    def _apply_physics_imperfections(cls, md: Any, data: torch.Tensor, timeline: Any) -> None:
        data.mul_(0.75).add_(timeline.at(1), alpha=0.25)


@dataclass(frozen=True, kw_only=True)
class BrainOptions(HalfOptions):
    pass


class Brain(Half):
    """bfloat16 readings: a class numpy cannot view; its own hardware imperfections around the standard
    ones."""

    options_cls = BrainOptions
    cache_dtype = torch.bfloat16

    @classmethod
    def _update_raw_data(cls, state: Any, md: Any, raw: torch.Tensor) -> None:
        for s in md.sensors:
            raw[:, s.cache_slice] = torch.as_tensor(state[s.options.key]).to(torch.bfloat16)

    @classmethod
    def _apply_hardware_imperfections(cls, md: Any, data: torch.Tensor) -> None:
        super()._apply_hardware_imperfections(md, data)  # the standard terms, then a saturating ADC
        data.clamp_(-3.0, 3.0)


# -- the IMU on a synthetic state ------------------------------------------------------------------------
MOUNTED = sg.IMUOptions(
    body="link",
    pos_offset=U(-0.1, 0.1),
    euler_offset=(N(0.0, 2.0, low=-6.0, high=6.0), 0.0, U(-5.0, 5.0)),
    mag_cross_axis_coupling=N(0.0, 0.01),
    noise=0.01,
    delay=0.02,
)
IMUS: dict[str, dict[str, sg.IMUOptions]] = {
    "mount": {"i": MOUNTED, "j": sg.IMUOptions(body="base", noise=0.02, history_length=2)},
    "mount_full": {
        "i": sg.IMUOptions(
            body="link",
            pos_offset=(U(0.0, 0.3), N(-0.05, 0.05, low=-0.2, high=0.1), 0.23),
            euler_offset=(N(30.0, 10.0, low=0.0, high=60.0), U(-30.0, -10.0), C([40.0, 50.0])),
            magnetic_field=(0.05, 0.25, -0.45),
            acc_cross_axis_coupling=U(-0.02, 0.02),
            gyro_cross_axis_coupling=(0.01, N(0.0, 0.01), 0.0),
            jitter=0.02,
            delay=0.04,
        ),
        "j": MOUNTED,
    },
    "per_field": {
        "i": sg.IMUOptions(
            body="link",
            pos_offset=(0.1, 0.0, 0.05),
            euler_offset=(10.0, 0.0, -5.0),
            acc_noise=0.02,
            gyro_noise=U(0.001, 0.01),
            mag_resolution=0.01,
            acc_bias=(0.1, 0.0, -0.1),
            gyro_bias=N(0.0, 0.01),
            acc_random_walk=0.001,
            gyro_random_walk_density=0.0005,
            mag_bias_instability=0.01,
            mag_bias_correlation_time=5.0,
            acc_scale_factor=0.01,
            gyro_bandwidth=10.0,
            mag_noise_density=U(0.0001, 0.001),
        ),
        "j": sg.IMUOptions(
            body="link", acc_bandwidth=20.0, acc_noise_density=0.002, update_period=0.005, dropout=0.1
        ),
    },
    "couplings_fixed": {
        "i": sg.IMUOptions(
            body="link",
            acc_cross_axis_coupling=0.01,
            gyro_cross_axis_coupling=(0.01, -0.02, 0.005),
            mag_cross_axis_coupling=np.array([[1.0, 0.02, 0.0], [0.0, 1.0, -0.01], [0.03, 0.0, 1.0]]),
            magnetic_field=(0.2, 0.0, -0.4),
            history_length=2,
            padding_type="zero",
            delay=0.03,
            jitter=0.01,
        ),
        "j": sg.IMUOptions(
            body="link", euler_offset=(90.0, 0.0, 45.0), pos_offset=(0.0, 0.1, 0.0), bias=0.05
        ),
    },
}


class ImuFeed:
    """Synthetic IMU states (no MuJoCo): readings and angular accelerations from this tool's streams (the
    state keys are the sensors' own, but not the numbers, which do not depend on the options' repr)."""

    def __init__(self, options: list[sg.IMUOptions], seed: int = 0, extra: Feed | None = None):
        self.options, self.seed, self.extra = options, seed, extra

    def __call__(self, t: int) -> dict[str, Any]:
        out = self.extra(t) if self.extra is not None else {}
        for j, o in enumerate(self.options):
            rng = np.random.default_rng([self.seed, t, 100 + j])
            out[state_key(o)] = (rng.normal(size=(B, 9)) * 5).astype(np.float32)
            if any(isinstance(v, sg.Distribution) for v in o.pos_offset):
                out[alpha_key(o)] = (rng.normal(size=(B, 3)) * 20).astype(np.float32)
        return out


def _imu_reads(rec: Any, tag: str, mgr: sg.SensorManager) -> None:
    for s in mgr.sensors:
        if isinstance(s, sg.IMUSensor):
            rec.out(f"{tag}.{s.name}.mount", s.read_mount())


def imu_scenario(config: str, executor: str, per_env: bool) -> Callable:
    sensors = IMUS[config]

    def scenario(rec: Any, ctx: Any) -> None:
        mgr = manager(executor, per_env, sensors)
        feed = ImuFeed(list(sensors.values()), seed=len(config))
        start(rec, mgr, feed)
        _imu_reads(rec, "0", mgr)
        for t in range(1, 21):
            drive(rec, mgr, feed, range(t, t + 1))
            _imu_reads(rec, str(t), mgr)
        finish(rec, mgr)

    return scenario


def several_classes(executor: str, per_env: bool, history: bool = False) -> Callable:
    """StateSensor, EnvAttributeSensor, Counter, Half, Brain and the IMU in one manager."""

    def scenario(rec: Any, ctx: Any) -> None:
        h = 2 if history else 0
        sensors = {
            "a": sg.StateSensorOptions(key="x", shape=(3,), delay=0.04, noise=0.1, history_length=h),
            "attr": sg.EnvAttributeOptions(attr="state", shape=(4,), index=[0, 3], bias=N(0.0, 0.1)),
            "c1": CounterOptions(key="z", gain=3.0, history_length=h),
            "c2": CounterOptions(key="x2", delay=0.04, noise=0.5, random_walk=0.1, gain=0.5),
            "h": HalfOptions(noise=0.01, delay=0.02, resolution=0.01),
            "bf": BrainOptions(noise=0.01, jitter=0.02, delay=0.04, history_length=h),
            "i": MOUNTED,
        }
        mgr = manager(executor, per_env, sensors)
        base = Feed({"x": 3, "attr.state": 4, "z": 2, "x2": 2}, seed=9)
        feed = ImuFeed([MOUNTED], seed=9, extra=base)
        start(rec, mgr, feed)
        drive(rec, mgr, feed, range(1, 25))
        _imu_reads(rec, "end", mgr)
        finish(rec, mgr)

    return scenario


def memory_scenario(config: str, executor: str) -> Callable:
    """``sg.memory_report``: the bytes a manager holds (its own category: a redesign that lays buffers out
    otherwise changes these numbers and nothing else, which is for a person to judge)."""

    def scenario(rec: Any, ctx: Any) -> None:
        if config == "classes":
            sensors = {"a": ROUND_TRIPS["delay_jitter_noise"]["a"], "c": CounterOptions(key="z", delay=0.04)}
            sensors.update(IMUS["mount_full"])
            extra = Feed({"x": 3, "z": 2}, seed=2)
            feed: Callable[[int], Any] = ImuFeed(list(IMUS["mount_full"].values()), seed=2, extra=extra)
        else:
            sensors, feed = {**ROUND_TRIPS[config]}, Feed({"x": 3, "y": 4}, seed=2)
        mgr = manager(executor, False, sensors)
        mgr.reset(feed(0))
        report = sg.memory_report(mgr)
        rec.out("report", (report.total, report.shared, report.per_class, report.num_envs, str(report)))

    return scenario


# -- checkpoint files ------------------------------------------------------------------------------------
def file_scenario(build: Callable[[], tuple[sg.SensorManager, Callable[[int], Any]]], file: str) -> Callable:
    """Record mode: run a manager to step 9 and ``torch.save`` its ``state_dict`` into the checkpoint folder.
    Both modes: a freshly built manager loads that file (``weights_only=True``) and continues to step 18;
    in compare mode the file is the one the recording tree saved."""

    def scenario(rec: Any, ctx: Any) -> None:
        path = ctx.checkpoints / file
        if ctx.mode == "record":  # the run that saves is not recorded: compare mode does not run it
            mgr, feed = build()
            mgr.reset(feed(0))
            drive(type(rec)(), mgr, feed, range(1, 10))
            torch.save(mgr.state_dict(), path)
        mgr, feed = build()
        mgr.reset(feed(500))
        mgr.load_state_dict(torch.load(path, weights_only=True))
        rec.state("loaded.sd", mgr.state_dict())
        reads(rec, "loaded", mgr)
        drive(rec, mgr, feed, range(10, 19))
        randomization(rec, "end", mgr)

    return scenario


def _file_state(executor: str, per_env: bool) -> Callable:
    def build():
        sensors = {**ROUND_TRIPS["sampler_error_model"], "d": ROUND_TRIPS["delay_jitter_noise"]["a"]}
        return manager(executor, per_env, sensors), Feed({"x": 3, "y": 4}, seed=21)

    return build


def _file_classes():
    sensors = {
        "a": ROUND_TRIPS["delay_jitter_noise"]["a"],
        "c": CounterOptions(key="z", delay=0.02, noise=0.3),
    }
    sensors.update(IMUS["mount_full"])
    feed = ImuFeed(list(IMUS["mount_full"].values()), seed=22, extra=Feed({"x": 3, "z": 2}, seed=22))
    return manager("numpy", False, sensors), feed


def scenarios() -> dict[str, Callable]:
    out: dict[str, Callable] = {}
    for i, executor in enumerate(EXECUTORS):
        for j, which in enumerate(("noise", "bias", "random_walk", "resolution", "delay", "jitter", "all")):
            out[f"setter/{which}/{executor}"] = setter_scenario(which, executor, per_env=(i + j) % 2 == 1)
        out[f"setter/all/{executor}/per_env_rng"] = setter_scenario("all", executor, per_env=True)
        for per_env in (False, True):
            out[f"seed/{executor}/{'per_env_rng' if per_env else 'one_rng'}"] = seed_scenario(
                executor, per_env
            )
        for config in ROUND_TRIPS:
            for per_env in (False, True):
                name = f"state_dict/{config}/{executor}/{'per_env_rng' if per_env else 'one_rng'}"
                out[name] = round_trip_scenario(config, executor, per_env)
        for config in IMUS:
            for per_env in (False, True):
                out[f"imu/{config}/{executor}/{'per_env_rng' if per_env else 'one_rng'}"] = imu_scenario(
                    config, executor, per_env
                )
        for per_env in (False, True):
            out[f"classes/{executor}/{'per_env_rng' if per_env else 'one_rng'}"] = several_classes(
                executor, per_env
            )
        out[f"classes/history/{executor}"] = several_classes(executor, False, history=True)
        for config in ("classes", "sampler_error_model"):
            out[f"memory/{config}/{executor}"] = memory_scenario(config, executor)
    out["file/manager_numpy"] = file_scenario(_file_state("numpy", False), "manager_numpy.pt")
    out["file/manager_torch_per_env_rng"] = file_scenario(
        _file_state("torch", True), "manager_torch_per_env.pt"
    )
    out["file/manager_classes"] = file_scenario(_file_classes, "manager_classes.pt")
    return out
