"""Base of the MuJoCo sensor catalog: measure inside the sub-env, copy batched in the manager.

A catalog sensor measures its raw physical value from ``MjModel``/``MjData`` inside each sub-env
(``_measure``, run by :class:`~sensorgym.wrappers.SimStateExtractor`, inside Async workers too) and
passes a small numpy array through ``info``. The manager-side hooks only read batched tensors, so one
sensor class serves Sync, Async and single envs alike. Before any sensor measures, the derived fields of
``MjData`` are brought up to date once per step (``mj_forward`` + ``mj_rnePostConstraint``): after
``mj_step`` they describe the last sub-step's intermediate state, not the current one.

Example:
    >>> import gymnasium as gym, sensorgym as sg
    >>> from sensorgym.sensors.mujoco.base import state_key
    >>> state_key(sg.JointEncoderOptions(joints=["hip_1"])).startswith("mj.JointEncoderOptions.")
    True
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from ...core.options import SimpleSensorOptions
from ...core.sensor import SimpleSensor

__all__ = [
    "ExtractedInSubEnvs",
    "MujocoSensor",
    "MujocoSensorOptions",
    "body_angular_acceleration",
    "check_extracted",
    "mj_handles",
    "name_to_id",
    "state_key",
    "sync_mjdata",
]

_MODELS: dict[int, tuple[weakref.ref, dict]] = {}
# mujoco.mjtObj.mjOBJ_XBODY: the body *frame* (origin xpos, axes xmat). mjOBJ_BODY would be the inertial
# frame (centre of mass xipos, principal axes ximat), which is not where a sensor is mounted.
_OBJ_XBODY = 2
_SENSOR_OFF = 1 << 13  # mujoco.mjtDisableBit.mjDSBL_SENSOR (checked in tests/sensors/test_native_path.py)
#: attribute under which an options object caches its state key (see :func:`state_key`)
_KEY_ATTR = "_sensorgym_state_key"
_DATA_TYPES: set[type] = set()  # types of MjData-like objects already seen to carry qpos


def mj_handles(env: Any) -> tuple[Any, Any]:
    """``(MjModel, MjData)`` of a Gymnasium MuJoCo env (or anything with ``.unwrapped.model/.data``)."""
    base = getattr(env, "unwrapped", env)
    model, data = getattr(base, "model", None), getattr(base, "data", None)
    if type(data) in _DATA_TYPES and model is not None:  # runs every step: skip the duck-typing probe
        return model, data
    if model is None or data is None or not hasattr(data, "qpos"):
        raise TypeError(
            f"{type(base).__name__} is not a MuJoCo env: the catalog sensors need "
            "env.unwrapped.model and env.unwrapped.data (gymnasium MujocoEnv or the sensorgym "
            "reference envs)."
        )
    _DATA_TYPES.add(type(data))
    return model, data


#: the name prefix of the sites and sensors sensorgym adds to a model (sensorgym.sensors.mujoco.native)
PREFIX = "sensorgym"
_SYNC = object()  # cache key of the per-model answer "does this model carry sensorgym's native sensors?"
_mujoco: Any = None  # the module, imported on first use (importing sensorgym does not import MuJoCo)


def _has_native(model: Any) -> bool:
    sensor = _mujoco.mjtObj.mjOBJ_SENSOR
    return any((_mujoco.mj_id2name(model, sensor, i) or "").startswith(PREFIX) for i in range(model.nsensor))


def sync_mjdata(env: Any) -> None:
    """Recompute positions, velocities, accelerations and contact forces from ``qpos``/``qvel``.

    One ``mj_forward``, which also computes the model's native sensors. A model built with
    :func:`~sensorgym.sensors.mujoco.native.add_native_sensors` may keep them disabled in ``mj_step``:
    they are
    switched on for this call only. ``mj_rnePostConstraint`` (``cacc``, for the Python IMU path) runs
    unless a native accelerometer already ran it.
    """
    global _mujoco
    if _mujoco is None:
        import mujoco

        _mujoco = mujoco
    model, data = mj_handles(env)
    if cached(model, ("native", _SYNC), lambda: _has_native(model)):
        opt = model.opt
        flags = opt.disableflags
        if flags & _SENSOR_OFF:
            opt.disableflags = flags & ~_SENSOR_OFF
            try:
                _mujoco.mj_forward(model, data)
            finally:
                opt.disableflags = flags
        else:
            _mujoco.mj_forward(model, data)
    else:
        _mujoco.mj_forward(model, data)
    if not data.flg_rnepost:
        _mujoco.mj_rnePostConstraint(model, data)


def body_angular_acceleration(model: Any, data: Any, body: int, scratch: np.ndarray) -> np.ndarray:
    """Angular acceleration (rad/s^2) of ``body`` in its body frame (``xmat``): the first 3 entries of
    ``scratch`` (a float64 ``(6,)`` array the caller keeps, filled by ``mj_objectAcceleration``), the same
    at every point of the rigid body. Needs ``data.cacc`` current (:func:`sync_mjdata` runs
    ``mj_rnePostConstraint``).

    Example:
        >>> import mujoco, numpy as np
        >>> m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body name="b"><joint name="j" '
        ...     'type="hinge" axis="0 0 1"/><geom size=".1" mass="1"/></body></worldbody><actuator>'
        ...     '<motor joint="j"/></actuator></mujoco>')
        >>> d = mujoco.MjData(m); d.ctrl[0] = 0.5; mujoco.mj_forward(m, d); mujoco.mj_rnePostConstraint(m, d)
        >>> alpha = body_angular_acceleration(m, d, 1, np.empty(6))   # torque / inertia about z
        >>> bool(np.allclose(alpha, [0.0, 0.0, 0.5 / m.body_inertia[1, 2]]))
        True
    """
    global _mujoco
    if _mujoco is None:
        import mujoco

        _mujoco = mujoco
    _mujoco.mj_objectAcceleration(model, data, _OBJ_XBODY, body, scratch, 1)
    return scratch[:3]


def check_extracted(
    cls: type, state: Any, metadata: Any, noun: str, where: str, detail: Callable[[Any], str] | None = None
) -> None:
    """Every sensor of ``cls`` finds its ``(B, width)`` entry, measured inside the sub-envs, in ``state``;
    otherwise a ``ValueError`` naming the sensor and the fix (the catalog and the cameras share this).

    Runs every step: the expected ``(key, shape)`` pairs are derived once per class metadata, and a state
    that matches them passes in one comparison per sensor; anything else takes the full check below."""
    expected = metadata.constants.get("extracted_shapes")
    if expected is None:
        expected = metadata.constants["extracted_shapes"] = [
            (sensor.state_key, (metadata.num_envs, sensor.cache_slice.stop - sensor.cache_slice.start))
            for sensor in metadata.sensors
        ]
    try:
        if all(state[key].shape == shape for key, shape in expected):
            return
    except (KeyError, AttributeError, TypeError):
        pass
    for sensor in metadata.sensors:
        key = sensor.state_key
        if key not in state:
            raise ValueError(
                f"sensor {sensor.name!r} ({cls.__name__}) has no {noun} in the state: {where}. Fix: build "
                "the env with make_sensor_vec(...) or add SimStateExtractor(env, sensors) to every sub-env "
                "(gym.make_vec(..., wrappers=[...]))."
            )
        width = sensor.cache_slice.stop - sensor.cache_slice.start
        shape = tuple(np.shape(state[key]))
        if len(shape) != 2 or shape[0] != metadata.num_envs or shape[1] != width:
            extra = detail(sensor) if detail is not None else ""
            wanted = (metadata.num_envs, width)
            raise ValueError(f"sensor {sensor.name!r}: {noun} of shape {shape}, expected {wanted}{extra}.")


def name_to_id(model: Any, objtype: Any, name: str, what: str) -> int:
    import mujoco

    idx = mujoco.mj_name2id(model, objtype, name)
    if idx < 0:
        count = {
            mujoco.mjtObj.mjOBJ_BODY: model.nbody,
            mujoco.mjtObj.mjOBJ_GEOM: model.ngeom,
            mujoco.mjtObj.mjOBJ_JOINT: model.njnt,
            mujoco.mjtObj.mjOBJ_CAMERA: model.ncam,
        }.get(objtype, 0)
        names = [mujoco.mj_id2name(model, objtype, i) for i in range(count)]
        raise ValueError(f"{what}={name!r}: no such name in the model; available: {[x for x in names if x]}.")
    return idx


def cached(model: Any, key: tuple, build: Any) -> Any:
    """Per-model cache of what a sensor derives from its options (ids, index arrays).

    ``key`` is ``(tag, options)``. Lookups run every step in the workers, so they go by object identity:
    the cache is keyed weakly by the model (an entry dies with its model, so a new model can never see
    an old one's ids through a recycled ``id``; values must not hold the model), and per model by the
    options object, kept alive by the entry so its ``id`` cannot be recycled either.
    """
    tag, options = key
    hit = _MODELS.get(id(model))
    per_model = hit[1] if hit is not None and hit[0]() is model else _new_model_entry(model)
    hit = per_model.get((tag, id(options)))
    if hit is None or hit[0] is not options:
        hit = per_model[(tag, id(options))] = (options, build())
    return hit[1]


def _new_model_entry(model: Any) -> dict:
    """A fresh cache for ``model``, dropped when the model dies (a dict by ``id`` with a weak reference:
    a lookup is a dict hit and a call of the reference, faster than a ``WeakKeyDictionary``)."""
    key = id(model)

    def drop(ref: weakref.ref) -> None:
        entry = _MODELS.get(key)
        if entry is not None and entry[0] is ref:
            del _MODELS[key]

    entry: tuple[weakref.ref, dict] = (weakref.ref(model, drop), {})
    _MODELS[key] = entry
    return entry[1]


def state_key(options: Any) -> str:
    """The state key under which a sensor's measurement travels (stable across processes: a digest of the
    options' ``repr``).

    It runs every step in the workers, so it is cached on the (frozen) options object itself, outside its
    fields (``repr``, ``==`` and ``hash`` ignore it): the cache lives and dies with the object, so it is
    bounded by the live options and no other object can ever see it (no ``id`` reuse)."""
    key = getattr(options, "__dict__", {}).get(_KEY_ATTR)
    if key is None:
        digest = hashlib.sha1(repr(options).encode()).hexdigest()[:12]
        key = f"mj.{type(options).__name__}.{digest}"
        if hasattr(options, "__dict__"):
            object.__setattr__(options, _KEY_ATTR, key)  # frozen dataclass: bypass its __setattr__
    return key


class ExtractedInSubEnvs:
    """Mixin of the sensors measured inside each sub-env (the MuJoCo catalog and the cameras): their
    ``state_key``, the once-per-step ``MjData`` update before extraction, and the state check.

    Subclasses set ``extracted_noun`` / ``extracted_where`` (the words of the missing-entry error) and may
    override ``_extracted_detail`` (appended to the wrong-shape error)."""

    extracted_noun: ClassVar[str] = "measurement"
    extracted_where: ClassVar[str] = "its data is computed inside each sub-env"

    @property
    def state_key(self) -> str:
        return state_key(self.options)

    @staticmethod
    def _prepare_extraction(env: Any) -> None:
        sync_mjdata(env)

    @classmethod
    def _extracted_detail(cls, sensor: Any) -> str:
        return ""

    @classmethod
    def _check_state(cls, state: Any, md: Any) -> None:
        check_extracted(cls, state, md, cls.extracted_noun, cls.extracted_where, cls._extracted_detail)


@dataclass(frozen=True, kw_only=True)
class MujocoSensorOptions(SimpleSensorOptions):
    """Base options of the MuJoCo catalog (time options and hardware imperfections)."""


class MujocoSensor(ExtractedInSubEnvs, SimpleSensor):
    """Base class: subclasses implement ``_measure(model, data, options) -> np.ndarray`` (flat, the
    intermediate size) and the shape accessors.

    Example: see :class:`~sensorgym.IMUSensor` and the other catalog sensors.
    """

    options_cls: ClassVar[type] = MujocoSensorOptions

    @classmethod
    def _measure(cls, model: Any, data: Any, options: Any) -> np.ndarray:
        raise NotImplementedError

    @classmethod
    def _gather_terms(cls, env: Any, options: list) -> list | None:
        """The class's readings in ``env``'s model as signed sums of ``MjData`` entries, one
        :data:`~sensorgym.sensors.mujoco.gather.Terms` per option in order, or None when they are not
        (then ``_extract_state`` measures them). Called once per model; must describe exactly what
        ``_extract_state`` returns. A subclass that overrides ``_extract_state`` or ``_measure`` does not
        inherit its parent's terms (the extraction then calls it) unless it defines its own. Default: None."""
        return None

    @classmethod
    def _extract_state(cls, env: Any, options: list) -> dict[str, np.ndarray]:
        model, data = mj_handles(env)
        return {
            state_key(o): np.asarray(cls._measure(model, data, o), dtype=np.float32).reshape(-1)
            for o in options
        }

    @classmethod
    def _get_cache_dtype(cls) -> torch.dtype:
        return torch.float32

    @classmethod
    def _update_raw_data(cls, state: Any, md: Any, raw: torch.Tensor) -> None:
        keys = md.constants.get("state_keys")
        if keys is None:
            keys = md.constants["state_keys"] = [s.state_key for s in md.sensors]
        sources = [state[k] for k in keys]
        for src in sources:
            if torch.is_tensor(src):
                break
        else:
            out = md.numpy_view(raw)
            if out is not None:
                # numpy measurements into a CPU buffer: one numpy write into raw's memory (a view), where
                # wrapping each source as a tensor and a torch.cat cost several torch dispatches per step
                if len(sources) == 1:
                    np.copyto(out, sources[0], casting="unsafe")
                else:  # the sensors tile raw's columns in order
                    np.concatenate(sources, axis=1, out=out, casting="unsafe")
                return
        parts = [src if torch.is_tensor(src) else torch.from_numpy(np.asarray(src)) for src in sources]
        if len(parts) > 1 and all(t.device == raw.device for t in parts):
            torch.cat(parts, dim=1, out=raw)  # the sensors tile raw's columns in order: one write
            return
        for s, t in zip(md.sensors, parts, strict=True):
            raw[:, s.cache_slice].copy_(t)
