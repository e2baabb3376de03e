"""A manager's checkpoint loads only into a manager of the same configuration; every mismatch is a
``ValueError`` naming what differs, and the checkpoint holds no code (``weights_only=True`` loads it)."""

from __future__ import annotations

import io

import pytest
import torch

import sensorgym as sg

BASE = {
    "num_envs": 3,
    "dt": 0.05,
    "sensors": {
        "gyro": dict(key="gyro", shape=(3,), noise=0.1, delay=0.1, history_length=2),
        "force": dict(key="force", shape=(1,), bias=sg.Uniform(-1.0, 1.0)),
    },
}


def _manager(num_envs=3, dt=0.05, sensors=None) -> sg.SensorManager:
    mgr = sg.SensorManager(num_envs=num_envs, dt=dt, seed=0)
    for name, kw in (sensors or BASE["sensors"]).items():
        mgr.add_sensor(sg.StateSensorOptions(**kw), name=name)
    mgr.reset({"gyro": torch.zeros(num_envs, 3), "force": torch.ones(num_envs, 1)})
    return mgr


def _with(name: str, **changes) -> dict:
    sensors = {k: dict(v) for k, v in BASE["sensors"].items()}
    sensors[name].update(changes)
    return sensors


MISMATCHES = {
    # what differs -> (target manager, regex the error must match)
    "noise": (
        lambda: _manager(sensors=_with("gyro", noise=0.0)),
        r"'gyro' option 'noise'.*noise=0\.1.*noise=0\.0",
    ),
    "delay distribution": (
        lambda: _manager(sensors=_with("gyro", delay=sg.Choice([0.0, 0.1]))),
        r"'gyro' option 'delay'.*delay=0\.1.*Choice",
    ),
    "history": (lambda: _manager(sensors=_with("gyro", history_length=3)), r"'gyro' option 'history_length'"),
    "sampler rate": (
        lambda: _manager(sensors=_with("gyro", update_period=0.1)),
        r"'gyro' option 'update_period'.*update_period=0\.0.*update_period=0\.1",
    ),
    "dropout": (
        lambda: _manager(sensors=_with("force", dropout=sg.Uniform(0.0, 0.1))),
        r"'force' option 'dropout'.*dropout=0\.0.*Uniform",
    ),
    "bias distribution": (
        lambda: _manager(sensors=_with("force", bias=sg.Uniform(-2.0, 2.0))),
        r"'force' option 'bias'.*Uniform\(low=-1\.0",
    ),
    "sensor set": (
        lambda: _manager(sensors={"gyro": BASE["sensors"]["gyro"]}),
        r"sensor set differs.*\['gyro', 'force'\].*\['gyro'\]",
    ),
    "sensor order": (
        lambda: _manager(sensors=dict(reversed(list(BASE["sensors"].items())))),
        r"sensor set differs",
    ),
    "num_envs": (lambda: _manager(num_envs=4), r"num_envs differs.*num_envs=3.*num_envs=4"),
    "dt": (lambda: _manager(dt=0.02), r"dt differs.*dt=0\.05.*dt=0\.02"),
}


@pytest.mark.parametrize("what", list(MISMATCHES))
def test_every_mismatch_is_refused_naming_what_differs(what: str) -> None:
    """Regression (issue 11.5): a manager with ``noise=0.1`` silently lost its noise on load, and a
    ``delay=Choice(...)`` target silently kept the saved uniform shift."""
    saved = _manager().state_dict()
    build, pattern = MISMATCHES[what]
    target = build()
    before = {k: v.clone() for k, v in target.storage(sg.StateSensor).state_tensors().items()}
    with pytest.raises(ValueError, match=pattern):
        target.load_state_dict(saved)
    for k, v in target.storage(sg.StateSensor).state_tensors().items():
        assert torch.equal(v, before[k]), f"{k} was changed by a refused load"


@pytest.mark.parametrize("version", [None, 2, 3, 5, "4"])
def test_other_format_versions_are_refused(version) -> None:
    saved = _manager().state_dict()
    saved["version"] = version
    with pytest.raises(ValueError, match=rf"format version {version!r}.*reads version 4"):
        _manager().load_state_dict(saved)


def test_same_configuration_round_trips_through_a_weights_only_load() -> None:
    """The checkpoint holds only tensors, numbers and strings: ``torch.load(weights_only=True)`` reads it
    (no code runs on load), and the loaded manager continues bit-identically."""
    a = _manager()
    for t in range(5):
        a.step({"gyro": torch.full((3, 3), float(t)), "force": torch.ones(3, 1)})
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    b = _manager()
    b.load_state_dict(torch.load(buf, weights_only=True))
    for t in range(5, 12):
        state = {"gyro": torch.full((3, 3), float(t)), "force": torch.ones(3, 1)}
        a.step(state)
        b.step(state)
        for s in ("gyro", "force"):
            sa = next(x for x in a.sensors if x.name == s)
            sb = next(x for x in b.sensors if x.name == s)
            assert torch.equal(sa.read(), sb.read())
