"""The MuJoCo sensors' state keys: cached on the options object itself (no module-level cache keyed by
``id()``, so nothing grows and a recycled id can never return another object's key), and the sensors
measured inside the sub-envs (catalog and cameras) share one ``_check_state``."""

from __future__ import annotations

import hashlib
import pickle

import pytest

import sensorgym as sg
from sensorgym.sensors.mujoco import base as mujoco_base
from sensorgym.sensors.mujoco.base import ExtractedInSubEnvs, MujocoSensor, state_key
from sensorgym.sensors.mujoco.camera import DepthCameraSensor, RGBCameraSensor


def _expected(options) -> str:
    return f"mj.{type(options).__name__}.{hashlib.sha1(repr(options).encode()).hexdigest()[:12]}"


def test_keys_are_right_even_when_ids_are_recycled():
    seen_ids = set()
    for i in range(100):  # each options object dies before the next is made: CPython reuses the ids
        options = sg.JointEncoderOptions(joints=["hip_1"], noise=0.001 * i)
        seen_ids.add(id(options))
        assert state_key(options) == _expected(options)
        assert state_key(options) == _expected(options)  # the cached value
        del options
    assert len(seen_ids) < 100  # ids were recycled, and every key was still right


def test_the_cache_lives_on_the_options_object_only():
    options = sg.JointEncoderOptions(joints=["hip_1"], delay=0.02)
    key = state_key(options)
    assert options.__dict__[mujoco_base._KEY_ATTR] == key
    assert not any(isinstance(v, dict) and id(options) in v for v in vars(mujoco_base).values())
    twin = sg.JointEncoderOptions(joints=["hip_1"], delay=0.02)
    assert twin == options and hash(twin) == hash(options) and repr(twin) == repr(options)
    assert state_key(twin) == key
    restored = pickle.loads(pickle.dumps(options))  # as in an Async worker
    assert restored == options and state_key(restored) == key


@pytest.mark.parametrize("cls", [RGBCameraSensor, DepthCameraSensor])
def test_catalog_and_cameras_share_one_state_check(cls):
    assert issubclass(cls, ExtractedInSubEnvs) and issubclass(MujocoSensor, ExtractedInSubEnvs)
    check = ExtractedInSubEnvs.__dict__["_check_state"].__func__
    assert cls._check_state.__func__ is check and MujocoSensor._check_state.__func__ is check
    assert cls.extracted_noun == "image" and MujocoSensor.extracted_noun == "measurement"
