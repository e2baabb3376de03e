"""Signed distance from points to MuJoCo geoms (the proximity and tactile sensors build on it), and the
Euler-angle mounts of the IMU, the ray caster and the native sites.

Exact for planes, spheres, capsules, cylinders and boxes; ellipsoids use a scaled-sphere estimate;
meshes and height fields fall back to their bounding sphere. Distances are negative inside a geom. Every
function is vectorized over points; the loop runs over the (few) tracked geoms.

Example:
    >>> import mujoco, numpy as np
    >>> from sensorgym.sensors.mujoco.geometry import nearest_surface
    >>> m = mujoco.MjModel.from_xml_string(
    ...     '<mujoco><worldbody><geom type="sphere" size=".5" pos="0 0 1"/></worldbody></mujoco>')
    >>> d = mujoco.MjData(m); mujoco.mj_forward(m, d)
    >>> dist, geom, normal = nearest_surface(m, d, np.array([[0.0, 0.0, 3.0]]), np.array([0]))
    >>> float(dist[0]), normal[0].tolist()
    (1.5, [0.0, 0.0, 1.0])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["euler_to_matrix", "geom_sdf", "nearest_surface", "tree_geoms"]

_EPS = 1e-6


def euler_to_matrix(euler_deg: Any) -> np.ndarray:
    """Rotation matrix of intrinsic x-y-z Euler angles in degrees."""
    ax, ay, az = (math.radians(float(a)) for a in euler_deg)
    cx, sx, cy, sy, cz, sz = (
        math.cos(ax),
        math.sin(ax),
        math.cos(ay),
        math.sin(ay),
        math.cos(az),
        math.sin(az),
    )
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rx @ ry @ rz


def _box_sdf(q: np.ndarray, half: np.ndarray) -> np.ndarray:
    d = np.abs(q) - half
    outside = np.linalg.norm(np.maximum(d, 0.0), axis=-1)
    return outside + np.minimum(d.max(axis=-1), 0.0)


def geom_sdf(model: Any, data: Any, geom: int, points: np.ndarray) -> np.ndarray:
    """Signed distance from ``points`` (N, 3, world) to the surface of ``geom``."""
    import mujoco

    t = int(model.geom_type[geom])
    size = model.geom_size[geom]
    pos, rot = data.geom_xpos[geom], data.geom_xmat[geom].reshape(3, 3)
    q = (points - pos) @ rot  # into the geom frame
    if t == mujoco.mjtGeom.mjGEOM_PLANE:
        return q[:, 2]
    if t == mujoco.mjtGeom.mjGEOM_SPHERE:
        return np.linalg.norm(q, axis=1) - size[0]
    if t == mujoco.mjtGeom.mjGEOM_CAPSULE:
        z = np.clip(q[:, 2], -size[1], size[1])
        axis = np.stack([np.zeros_like(z), np.zeros_like(z), z], axis=1)
        return np.linalg.norm(q - axis, axis=1) - size[0]
    if t == mujoco.mjtGeom.mjGEOM_CYLINDER:
        radial = np.linalg.norm(q[:, :2], axis=1) - size[0]
        axial = np.abs(q[:, 2]) - size[1]
        d = np.stack([radial, axial], axis=1)
        return np.linalg.norm(np.maximum(d, 0.0), axis=1) + np.minimum(d.max(axis=1), 0.0)
    if t == mujoco.mjtGeom.mjGEOM_BOX:
        return _box_sdf(q, size[:3])
    if t == mujoco.mjtGeom.mjGEOM_ELLIPSOID:
        scaled = np.linalg.norm(q / size[:3], axis=1)
        return (scaled - 1.0) * size[:3].min()
    return np.linalg.norm(q, axis=1) - model.geom_rbound[geom]  # mesh, hfield: bounding sphere


def nearest_surface(
    model: Any, data: Any, points: np.ndarray, geoms: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each point: signed distance to the nearest of ``geoms``, that geom's id, and the outward
    surface normal there (the SDF gradient, world frame). With no geoms the distance is +inf."""
    n = len(points)
    best = np.full(n, np.inf)
    which = np.full(n, -1, dtype=np.int64)
    for g in geoms:
        d = geom_sdf(model, data, int(g), points)
        closer = d < best
        best[closer], which[closer] = d[closer], int(g)
    normal = np.zeros((n, 3))
    for g in np.unique(which[which >= 0]):
        rows = which == g
        p = points[rows]
        grad = np.stack(
            [
                geom_sdf(model, data, int(g), p + e) - geom_sdf(model, data, int(g), p - e)
                for e in np.eye(3) * _EPS
            ],
            axis=1,
        )
        norm = np.linalg.norm(grad, axis=1, keepdims=True)
        normal[rows] = grad / np.where(norm > 0, norm, 1.0)
    return best, which, normal


def tree_geoms(model: Any, body: int) -> np.ndarray:
    """Geoms of the whole kinematic tree ``body`` belongs to (the robot itself)."""
    root = int(model.body_rootid[body])
    return (
        np.flatnonzero(model.body_rootid[model.geom_bodyid] == root)
        if root != 0
        else np.flatnonzero(model.geom_bodyid == body)
    )
