"""The Kalibr files :meth:`~sensorgym.sensors.mujoco.imu.IMUOptions.from_kalibr` reads, as a mapping of one
IMU's keys.

Kalibr users have three shapes of file on disk: the ``imu.yaml`` given to ``kalibr_calibrate_imu_camera``
(the noise keys at the top level), the ``imu-*.yaml`` it writes (one block per IMU, ``imu0:``, ``imu1:``,
..., each with the noise keys, ``T_i_b``, ``time_offset`` and ``model``, and for its scale-misalignment
models ``accelerometers:``/``gyroscopes:`` matrices), and OpenVINS's ``kalibr_imu_chain.yaml`` (the same
blocks, with its own intrinsics ``Tw``, ``R_IMUtoGYRO``, ``Ta``, ``R_IMUtoACC``, ``Tg``, behind OpenCV's
``%YAML:1.0`` header, which PyYAML does not parse). All three are read: the header is dropped, and of a
file of blocks the block ``imu`` names is taken (default ``imu0``, Kalibr's reference IMU). A file that is
not YAML, a camera chain (``cam0:``, ... and no IMU), or an ``imu`` it does not have is one line naming the
fix.

Example:
    >>> table, where = kalibr_table({"imu0": {"update_rate": 200.0}, "imu1": {"update_rate": 400.0}})
    >>> table["update_rate"], where
    (200.0, 'the Kalibr mapping, block imu0')
    >>> kalibr_table({"imu0": {"update_rate": 200.0}, "imu1": {"update_rate": 400.0}}, imu="imu1")[0]
    {'update_rate': 400.0}
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["KALIBR_NOT_NOISE", "kalibr_table", "read_yaml"]

#: keys of a Kalibr (or OpenVINS) IMU block that are not its noise model: read past. ``rostopic`` and
#: ``time_offset`` name the data; ``T_i_b`` (the pose against imu0), ``model`` and its ``accelerometers``
#: / ``gyroscopes`` matrices are Kalibr's calibration of this unit; ``Tw``, ``R_IMUtoGYRO``, ``Ta``,
#: ``R_IMUtoACC``, ``Tg`` are OpenVINS's. A mount or coupling is given as a keyword instead.
KALIBR_NOT_NOISE = (
    "rostopic",
    "time_offset",
    "T_i_b",
    "model",
    "accelerometers",
    "gyroscopes",
    "Tw",
    "R_IMUtoGYRO",
    "Ta",
    "R_IMUtoACC",
    "Tg",
)
_NOISE_KEYS = (
    "accelerometer_noise_density",
    "accelerometer_random_walk",
    "gyroscope_noise_density",
    "gyroscope_random_walk",
    "update_rate",
)
_BLOCK = re.compile(r"^(imu|cam)(\d+)$")
#: OpenCV's FileStorage header (``%YAML:1.0``, where YAML writes ``%YAML 1.0``)
_OPENCV_HEADER = re.compile(r"\A(\ufeff)?[ \t]*%YAML:[ \t]*\d+\.\d+[ \t]*(#[^\n]*)?(?=\r?\n|\Z)")


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        raise ImportError(
            "IMUOptions.from_kalibr/to_kalibr read and write YAML files with PyYAML, which is not "
            "installed. Fix: pip install pyyaml"
        ) from None
    return yaml


def read_yaml(path: str | os.PathLike) -> Any:
    """The parsed YAML file at ``path``, its OpenCV ``%YAML:1.0`` header dropped (the line stays, empty, so
    that PyYAML's line numbers are the file's); one line naming the file when it is not YAML."""
    yaml = _yaml()
    where = repr(os.fspath(path))
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        byte = f"byte {e.start} is {e.object[e.start]:#04x}"
        raise ValueError(
            f"IMUOptions.from_kalibr: {where} is not a text file ({byte}). Fix: pass the Kalibr imu.yaml "
            "(accelerometer_noise_density: ..., ...)."
        ) from None
    text = _OPENCV_HEADER.sub("", text, count=1)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ValueError(
            f"IMUOptions.from_kalibr: {where} is not valid YAML{at}: {' '.join(str(problem).split())}. "
            "Fix: correct the file there (a Kalibr imu.yaml is lines of key: value)."
        ) from None


def _blocks(table: Mapping[str, Any], kind: str) -> list[str]:
    """The ``imuN`` (or ``camN``) blocks of a file, in number order."""
    found = [(int(m[2]), k) for k in table if isinstance(k, str) and (m := _BLOCK.match(k)) and m[1] == kind]
    return [k for _, k in sorted(found)]


def kalibr_table(source: Any, imu: str | None = None) -> tuple[Mapping[str, Any], str]:
    """``(one IMU's mapping, how to name it in a message)`` of a Kalibr file given as a path or a parsed
    mapping: the file itself for an ``imu.yaml``, its block ``imu`` (default ``imu0``) for a file of
    ``imuN:`` blocks."""
    if isinstance(source, Mapping):
        table, where = source, "the Kalibr mapping"
    elif isinstance(source, (str, os.PathLike)):
        table, where = read_yaml(source), repr(os.fspath(source))
        if not isinstance(table, Mapping):
            raise ValueError(
                f"IMUOptions.from_kalibr: {where} holds {type(table).__name__}, not a mapping of keys to "
                "values. Fix: pass a Kalibr imu.yaml (accelerometer_noise_density: ..., ...)."
            )
    else:
        raise TypeError(
            f"IMUOptions.from_kalibr(source={source!r}): expected the path of a Kalibr imu.yaml or its "
            "parsed mapping. Fix: pass e.g. from_kalibr('imu.yaml', body='torso')."
        )
    imus = _blocks(table, "imu")
    if not imus:
        if imu is not None:
            raise ValueError(
                f"IMUOptions.from_kalibr(imu={imu!r}): {where} describes one IMU (it has no imu0:, imu1:, "
                "... blocks). Fix: drop imu=."
            )
        if _blocks(table, "cam") and not any(k in table for k in _NOISE_KEYS):
            raise ValueError(
                f"IMUOptions.from_kalibr: {where} is a Kalibr camera chain ({_blocks(table, 'cam')}), which "
                "holds no IMU noise model. Fix: pass the IMU's file: the imu.yaml given to "
                "kalibr_calibrate_imu_camera, or the imu-*.yaml it writes."
            )
        return table, where
    loose = [k for k in table if k not in imus and k not in _blocks(table, "cam")]
    if loose:
        raise ValueError(
            f"IMUOptions.from_kalibr: {where} has IMU blocks {imus} and also the top-level key "
            f"{loose[0]!r}: it is not clear which describes the IMU. Fix: keep the noise keys inside one "
            "imuN: block."
        )
    chosen = imus[0] if imu is None else imu
    if chosen not in imus:
        raise ValueError(
            f"IMUOptions.from_kalibr(imu={imu!r}): {where} has the IMU blocks {imus}. Fix: pass one of them."
        )
    block = table[chosen]
    if not isinstance(block, Mapping):
        raise ValueError(
            f"IMUOptions.from_kalibr: {where}, block {chosen} holds {type(block).__name__}, not the IMU's "
            f"keys. Fix: write its noise keys under {chosen}: (accelerometer_noise_density: ..., ...)."
        )
    return block, f"{where}, block {chosen}"
