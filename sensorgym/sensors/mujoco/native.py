"""MuJoCo's own sensors as the fast path of the catalog.

MuJoCo computes accelerometers, gyros, magnetometers and contact sensors in C during ``mj_forward``, which
the catalog already calls once per step (:func:`~sensorgym.sensors.mujoco.base.sync_mjdata`).
:func:`add_native_sensors` adds, to an ``MjSpec``, the native sensors whose readings equal what a catalog
sensor measures; the catalog then copies their ``data.sensordata`` slice instead of doing the math in
Python. Names are derived from the options (:func:`imu_names`, :func:`contact_names`), so the measuring
side finds them by name, once per model, and checks that each is the sensor it expects (type, object,
no cutoff, no history). A sensor without native counterparts in its model is measured in Python as before;
the imperfection pipeline on top is the same either way.

What is native:

* ``IMUSensor``: a site on ``body`` at ``pos_offset``/``euler_offset`` carrying an ``accelerometer`` and a
  ``gyro``, and a ``magnetometer`` where the model's ``<option magnetic>`` equals ``magnetic_field``
  (``set_magnetic=True`` sets it when every IMU agrees and the model has no magnetometer of its own; the
  field is read by magnetometers only). Otherwise the field is rotated into the site frame in Python. A
  randomized mount gets its site at the nominal pose (:func:`~sensorgym.sensors.mujoco.imu.nominal_value`):
  the per-env mount is applied in the manager, from the nominal reading and, for a randomized position,
  the body's angular acceleration, measured in Python beside the native read.
* ``ContactSensor``: MuJoCo's ``contact`` sensor with ``data="found"`` counts the contacts that involve its
  ``geom1``/``body1``. Ours counts the contacts of the target with any geom whose body is not excluded:
  the native count of the target minus, per excluded body, the native count of (target, that body). The
  two are equal when the target's own body is not excluded (else every contact of the target would be
  subtracted), when no explicit ``<pair>`` joins two geoms of a body target (a contact of the target with
  itself, which ours does not count), and without flex contacts or sleeping; otherwise the class measures
  in Python.
* ``JointEncoderSensor`` is already one slice copy of ``qpos``, and ``ContactForceSensor`` has no native
  counterpart over a geom set with exclusions: both stay as they are.

When the model had no sensors of its own, the added ones are switched off in ``mj_step``
(``<flag sensor="disable"/>``: MuJoCo would otherwise compute them, and the accelerometer's
``mj_rnePostConstraint``, in every sub-step) and :func:`~sensorgym.sensors.mujoco.base.sync_mjdata` turns
them on for its one ``mj_forward`` per control step. ``data.sensordata`` is then current after each
sensorgym extraction, not after a bare ``mj_step``.

Example:
    >>> import mujoco, sensorgym as sg
    >>> from sensorgym.sensors.mujoco.native import add_native_sensors
    >>> spec = mujoco.MjSpec.from_string(
    ...     '<mujoco><worldbody><body name="torso"><freejoint/><geom size=".1"/></body></worldbody></mujoco>')
    >>> names = add_native_sensors(spec, [sg.IMUOptions(body="torso", pos_offset=(0.1, 0, 0))])
    >>> [n.rsplit("_", 1)[-1] for n in names]
    ['acc', 'gyro']
    >>> spec.compile().nsensor
    2
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any

import numpy as np

from .base import PREFIX
from .geometry import euler_to_matrix

__all__ = ["add_native_sensors", "contact_names", "imu_names", "native_model_xml", "supports_native"]


def _digest(*parts: Any) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:10]


def imu_names(o: Any) -> tuple[str, str, str, str]:
    """``(site, accelerometer, gyro, magnetometer)`` names of an IMU's native sensors, derived from the
    options that place it (``body``, ``pos_offset``, ``euler_offset``; a randomized mount by its nominal
    pose, where its ground truth is measured).

    Example:
        >>> import sensorgym as sg
        >>> imu_names(sg.IMUOptions(body="torso"))[1].endswith("_acc")
        True
    """
    site = f"{PREFIX}_imu_{o.body}_{_digest(o.body, o.nominal_pos_offset, o.nominal_euler_offset)}"
    return site, f"{site}_acc", f"{site}_gyro", f"{site}_mag"


def _excluded(o: Any) -> tuple[str, ...]:
    return tuple(sorted(set(o.exclude_bodies)))


def contact_names(o: Any) -> tuple[str, ...]:
    """Names of a contact switch's native ``contact`` sensors: all contacts of the target first, then one
    per excluded body (sorted, without repeats), whose counts are subtracted.

    Example:
        >>> import sensorgym as sg
        >>> len(contact_names(sg.ContactOptions(geom="left_ankle_geom", exclude_bodies=("torso",))))
        2
    """
    kind, target = ("geom", o.geom) if o.geom is not None else ("body", o.body)
    excl = _excluded(o)
    base = f"{PREFIX}_contact_{kind}_{target}_{_digest(kind, target, excl)}"
    return (f"{base}_all", *(f"{base}_x{i}" for i in range(len(excl))))


def supports_native(options: Any) -> bool:
    """Whether ``options`` belongs to a catalog class that can read native sensors (IMU, contact switch).

    Example:
        >>> import sensorgym as sg
        >>> encoder = sg.JointEncoderOptions(joints=["j"])
        >>> supports_native(sg.IMUOptions(body="torso")), supports_native(encoder)
        (True, False)
    """
    return _native_kind(options) is not None


def _native_kind(options: Any) -> str | None:
    """``"imu"`` or ``"contact"`` for the option classes that declare it (``native_kind``) themselves: a
    subclass measures on its own terms, so it does not inherit native sensors."""
    return vars(type(options)).get("native_kind")


def _site_quat(euler_deg: tuple[float, float, float]) -> list[float]:
    import mujoco

    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, euler_to_matrix(euler_deg).reshape(-1))
    return quat.tolist()


_SENSOR_TYPES = {
    "accelerometer": "mjSENS_ACCELEROMETER",
    "gyro": "mjSENS_GYRO",
    "magnetometer": "mjSENS_MAGNETOMETER",
    "contact": "mjSENS_CONTACT",
}


@dataclass
class _Additions:
    """What :func:`add_native_sensors` adds, in a neutral form applied to an ``MjSpec`` or to MJCF text.

    ``sites``: ``(body, name, pos, quat)``; ``sensors``: ``(kind, name, object type, object, reference
    body or None)`` with kind an MJCF sensor tag; ``magnetic``: the field to set, or None."""

    sites: list[tuple[str, str, list[float], list[float]]] = dc_field(default_factory=list)
    sensors: list[tuple[str, str, str, str, str | None]] = dc_field(default_factory=list)
    magnetic: tuple[float, float, float] | None = None
    disable_in_step: bool = False


def _plan(spec: Any, sensors: Mapping[str, Any] | Iterable[Any], set_magnetic: bool) -> _Additions:
    import mujoco

    options = list(sensors.values()) if isinstance(sensors, Mapping) else list(sensors)
    imus = [o for o in options if _native_kind(o) == "imu"]
    switches = [o for o in options if _native_kind(o) == "contact"]
    names = {x.name for x in spec.sensors if x.name}
    sites = {x.name for x in spec.sites if x.name}
    plan = _Additions()

    def add(kind: str, name: str, objtype: str, obj: str, ref: str | None = None) -> None:
        if name not in names:
            plan.sensors.append((kind, name, objtype, obj, ref))
            names.add(name)

    fields = {o.magnetic_field for o in imus}
    magnetic = tuple(float(x) for x in spec.option.magnetic)
    has_magnetometer = any(s.type == mujoco.mjtSensor.mjSENS_MAGNETOMETER for s in spec.sensors)
    if set_magnetic and len(fields) == 1 and not has_magnetometer and next(iter(fields)) != magnetic:
        plan.magnetic = magnetic = next(iter(fields))
    for o in imus:
        site, acc, gyro, mag = imu_names(o)
        if spec.body(o.body) is None:
            raise ValueError(f"IMUOptions.body={o.body!r}: no such body in the model.")
        if site not in sites:
            plan.sites.append((o.body, site, list(o.nominal_pos_offset), _site_quat(o.nominal_euler_offset)))
            sites.add(site)
        add("accelerometer", acc, "site", site)
        add("gyro", gyro, "site", site)
        if o.magnetic_field == magnetic:
            add("magnetometer", mag, "site", site)
    for o in switches:
        if o.geom is not None:
            geom = spec.geom(o.geom)
            if geom is None:
                raise ValueError(f"ContactOptions.geom={o.geom!r}: no such geom in the model.")
            objtype, target, own_body = "geom", o.geom, geom.parent.name
        else:
            objtype, target, own_body = "body", o.body, o.body
        excl = _excluded(o)
        if own_body in excl:
            continue  # not expressible by subtraction: measured in Python
        first, *per_body = contact_names(o)
        add("contact", first, objtype, target)
        for name, body in zip(per_body, excl, strict=True):
            add("contact", name, objtype, target, body)
    plan.disable_in_step = bool(plan.sensors) and len(spec.sensors) == 0
    return plan


def add_native_sensors(
    spec: Any, sensors: Mapping[str, Any] | Iterable[Any], *, set_magnetic: bool = False
) -> list[str]:
    """Add to ``spec`` (a ``mujoco.MjSpec``, edited in place) the native sensors that ``sensors`` (options,
    or a name -> options mapping) can read; return the names of the sensors added.

    Idempotent: names that already exist are not added twice. Options of other classes are ignored. With
    ``set_magnetic=True``, the model's magnetic field is set to the IMUs' ``magnetic_field`` when they all
    agree and the model has no magnetometer of its own, so the magnetometer is native as well. When the
    spec had no sensors, the model's sensors are disabled in ``mj_step`` and computed only by
    :func:`~sensorgym.sensors.mujoco.base.sync_mjdata` (see the module docstring).

    Example: see the module docstring.
    """
    import mujoco

    plan = _plan(spec, sensors, set_magnetic)
    for body, name, pos, quat in plan.sites:
        spec.body(body).add_site(name=name, pos=pos, quat=quat)
    obj = {
        "site": mujoco.mjtObj.mjOBJ_SITE,
        "geom": mujoco.mjtObj.mjOBJ_GEOM,
        "body": mujoco.mjtObj.mjOBJ_BODY,
    }
    for kind, name, objtype, target, ref in plan.sensors:
        kw: dict[str, Any] = {}
        if kind == "contact":  # data="found", reduce none, one slot
            kw["intprm"] = [1 << int(mujoco.mjtConDataField.mjCONDATA_FOUND), 0, 1]
        if ref is not None:
            kw.update(reftype=mujoco.mjtObj.mjOBJ_BODY, refname=ref)
        sensor_type = getattr(mujoco.mjtSensor, _SENSOR_TYPES[kind])
        spec.add_sensor(name=name, type=sensor_type, objtype=obj[objtype], objname=target, **kw)
    if plan.magnetic is not None:
        spec.option.magnetic = list(plan.magnetic)
    if plan.disable_in_step:
        spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_SENSOR)
    return [x[1] for x in plan.sensors]


def _num(values: Iterable[float]) -> str:
    return " ".join(repr(float(v)) for v in values)  # full precision (MuJoCo's XML writer keeps 6 digits)


def _patch_mjcf(src: Path, plan: _Additions) -> str:
    """The MJCF text of ``src`` with ``plan`` added: the original elements and numbers are kept as written
    (``MjSpec.to_xml`` would round every number to 6 digits), relative asset paths made absolute."""
    root = ET.parse(src).getroot()
    base = src.parent
    compiler = root.find("compiler")
    if compiler is None:
        compiler = ET.Element("compiler")
        root.insert(0, compiler)
    for attr in ("meshdir", "texturedir"):
        compiler.set(attr, str(base / compiler.get(attr, "")))  # an absolute value is kept by the join
    for include in root.iter("include"):
        include.set("file", str(base / include.get("file", "")))
    bodies = {e.get("name"): e for e in root.iter("body") if e.get("name")}
    worldbody = root.find("worldbody")
    if worldbody is not None:
        bodies.setdefault("world", worldbody)
    for body, name, pos, quat in plan.sites:
        if body not in bodies:
            raise ValueError(f"body {body!r} is not declared in {src} itself (an included file?).")
        ET.SubElement(bodies[body], "site", name=name, pos=_num(pos), quat=_num(quat))
    section = ET.SubElement(root, "sensor")
    for kind, name, objtype, target, ref in plan.sensors:
        attrs = {"name": name}
        if kind == "contact":
            attrs.update({f"{objtype}1": target, "data": "found"})
            if ref is not None:
                attrs["body2"] = ref
        else:
            attrs["site"] = target
        ET.SubElement(section, kind, attrs)
    if plan.magnetic is not None or plan.disable_in_step:
        option = root.find("option")
        if option is None:
            option = ET.Element("option")
            root.insert(1, option)
        if plan.magnetic is not None:
            option.set("magnetic", _num(plan.magnetic))
        if plan.disable_in_step:
            flag = option.find("flag")
            if flag is None:
                flag = ET.SubElement(option, "flag")
            flag.set("sensor", "disable")
    return ET.tostring(root, encoding="unicode")


def native_model_xml(
    xml_path: str | os.PathLike,
    sensors: Mapping[str, Any] | Iterable[Any],
    *,
    set_magnetic: bool = True,
    cache_dir: str | os.PathLike | None = None,
) -> str:
    """Path of a copy of the MJCF file ``xml_path`` with the native sensors of ``sensors`` added (the same
    additions as :func:`add_native_sensors`), written once, atomically and named by its content, under
    ``cache_dir`` (default: ``$SENSORGYM_CACHE`` or ``<tempdir>/sensorgym``). The original elements and
    numbers are kept as written and asset paths made absolute, so the copy loads from anywhere and
    simulates exactly as the original. Gymnasium's MuJoCo envs take it as ``xml_file=``.

    Example:
        >>> import gymnasium as gym, sensorgym as sg
        >>> from gymnasium.envs.mujoco.mujoco_env import expand_model_path
        >>> path = native_model_xml(expand_model_path("ant.xml"), [sg.IMUOptions(body="torso")])
        >>> env = gym.make("Ant-v5", xml_file=path)
        >>> env.unwrapped.model.nsensor
        3
    """
    import mujoco

    src = Path(xml_path).resolve()
    plan = _plan(mujoco.MjSpec.from_file(str(src)), sensors, set_magnetic)
    xml = _patch_mjcf(src, plan)
    root = Path(cache_dir or os.environ.get("SENSORGYM_CACHE") or Path(tempfile.gettempdir()) / "sensorgym")
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{src.stem}-native-{hashlib.sha1(xml.encode()).hexdigest()[:16]}.xml"
    if not path.exists():  # content-named: concurrent writers write the same bytes
        fd, tmp = tempfile.mkstemp(dir=root, suffix=".xml")
        with os.fdopen(fd, "w") as f:
            f.write(xml)
        os.replace(tmp, path)
    return str(path)


def sensor_address(
    model: Any,
    name: str,
    sensor_type: Any,
    objtype: Any,
    objid: int,
    reftype: Any = None,
    refid: int = -1,
) -> int | None:
    """``sensordata`` address of the native sensor ``name`` if it is exactly the expected sensor (type,
    object, reference object, no cutoff, no delay/history, for a ``contact`` sensor ``data="found"`` only)
    and the model does not let sensors sleep; else None (the caller measures in Python).

    Example:
        >>> import mujoco
        >>> m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body name="b"><freejoint/>'
        ...     '<geom size=".1"/><site name="s"/></body></worldbody><sensor><gyro name="g" site="s"/>'
        ...     '</sensor></mujoco>')
        >>> sensor_address(m, "g", mujoco.mjtSensor.mjSENS_GYRO, mujoco.mjtObj.mjOBJ_SITE, 0)
        0
    """
    import mujoco

    i = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, name)
    if i < 0 or model.opt.enableflags & int(mujoco.mjtEnableBit.mjENBL_SLEEP):
        return None
    reftype = mujoco.mjtObj.mjOBJ_UNKNOWN if reftype is None else reftype
    contact = int(sensor_type) == int(mujoco.mjtSensor.mjSENS_CONTACT)
    ok = (
        int(model.sensor_type[i]) == int(sensor_type)
        and int(model.sensor_objtype[i]) == int(objtype)
        and int(model.sensor_objid[i]) == objid
        and int(model.sensor_reftype[i]) == int(reftype)
        and (int(reftype) == int(mujoco.mjtObj.mjOBJ_UNKNOWN) or int(model.sensor_refid[i]) == refid)
        and model.sensor_cutoff[i] == 0
        and model.sensor_history[i, 0] <= 0
        and (
            not contact or int(model.sensor_intprm[i, 0]) == 1 << int(mujoco.mjtConDataField.mjCONDATA_FOUND)
        )
    )
    return int(model.sensor_adr[i]) if ok else None
