"""``RGBCameraSensor`` and ``DepthCameraSensor``: images rendered from a MuJoCo camera.

The image is rendered inside each sub-env (Async workers too) with one ``mujoco.Renderer`` per env, size
and kind, created on first use and freed with the env; headless machines need ``MUJOCO_GL=egl`` (or
``osmesa``) set before ``mujoco`` is first imported. GL drivers do not survive ``fork``: once a process
has rendered, create Async vector envs from it with ``vector_kwargs={"context": "forkserver"}`` (a
forked worker that would hang raises an error that says so instead). The camera is a named camera of
the model (``camera="front_cam"``: it moves with its body) or a free camera looking at ``lookat`` from
``distance`` metres at ``azimuth``/``elevation`` degrees (``camera=None``).

* RGB: ``uint8 (B, height, width, 3)``. The pipeline runs in float32 intensity units (0..255); the
  projection clamps to [0, 255] and rounds, so pixel noise saturates as on a real sensor.
* Depth: ``float32 (B, height, width)``, metres along the optical axis (the z-depth, not the ray
  length); pixels that see nothing read the far clipping distance. The projection clamps to
  ``[0, max_depth]`` (``max_depth=None``: no upper clamp).

``noise`` is the std of independent Gaussian pixel noise (intensity units for RGB, metres for depth),
drawn every step on the measured branch only; the ground-truth twin is the clean image. Delay, jitter,
history, padding and resets come from the manager, as for every sensor.

Example:
    >>> import mujoco
    >>> from sensorgym.sensors.mujoco.camera import DepthCameraOptions, DepthCameraSensor
    >>> m = mujoco.MjModel.from_xml_string('''<mujoco><worldbody>
    ...   <geom type="plane" size="5 5 .1"/><camera name="down" pos="0 0 2"/>
    ... </worldbody></mujoco>''')
    >>> d = mujoco.MjData(m); mujoco.mj_forward(m, d)
    >>> o = DepthCameraOptions(camera="down", width=8, height=6)
    >>> env = type("Env", (), {"model": m, "data": d})()
    >>> (image,) = DepthCameraSensor._extract_state(env, [o]).values()
    >>> image.shape, round(float(image.reshape(6, 8)[3, 4]), 3)   # the floor is 2 m below the camera
    ((48,), 2.0)
"""

from __future__ import annotations

import math
import os
import sys
import weakref
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from ...core.options import SensorOptions, option_error
from ...core.randomization import Distribution
from ...core.sensor import Sensor
from ...core.values import as_int, as_real
from .base import ExtractedInSubEnvs, mj_handles, name_to_id, state_key

__all__ = ["CameraOptions", "DepthCameraOptions", "DepthCameraSensor", "RGBCameraSensor"]

#: MjData -> {(height, width, depth): mujoco.Renderer}, per process (each Async worker has its own). Keyed
#: weakly by the env's MjData: a renderer (and its GL context) lives as long as the env that uses it.
_RENDERERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: renderers a forked child inherited: they belong to the parent's GL contexts, so the child must neither
#: use nor free them (freeing would run GL calls on the parent's context); kept alive until os._exit
_INHERITED: list = []
#: MjModel -> {options repr: camera id or MjvCamera}; weak keys, as for the renderers (ids get reused)
_CAMERAS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: set in a process forked from one that had already created an OpenGL context
_FORKED_WITH_GL = False


def _parent_has_gl() -> bool:
    egl = sys.modules.get("mujoco.egl")
    return len(_RENDERERS) > 0 or getattr(egl, "EGL_DISPLAY", None) is not None


def _after_fork_in_child() -> None:
    # The child inherits the parent's GL driver state but not its driver threads: a context created or
    # used here can wait forever on them (Mesa llvmpipe, NVIDIA EGL). Mesa with LP_NUM_THREADS=0 renders
    # on the calling thread and survives a fork.
    global _FORKED_WITH_GL
    if _parent_has_gl() and os.environ.get("LP_NUM_THREADS") != "0":
        _FORKED_WITH_GL = True
    _INHERITED.extend(_RENDERERS.values())
    _RENDERERS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _number(owner: str, name: str, value: Any, why: str, fix: str, ok: Any) -> float:
    if as_real(value) is None:
        raise option_error(owner, name, value, why, fix)
    value = as_real(value)
    if not (math.isfinite(value) and ok(value)):
        raise option_error(owner, name, value, why, fix)
    return value


@dataclass(frozen=True, kw_only=True)
class CameraOptions(SensorOptions):
    """Options of :class:`RGBCameraSensor` (and the base of :class:`DepthCameraOptions`).

    Args:
        width, height: image size in pixels (at most the model's offscreen buffer,
            ``<visual><global offwidth=... offheight=.../></visual>``, 640x480 by default).
        camera: name of a camera in the model; None for a free camera given by ``lookat``, ``distance``,
            ``azimuth`` and ``elevation`` (degrees; ignored for a named camera).
        noise: std of the Gaussian pixel noise of the measured image (intensity units 0..255 for RGB,
            metres for depth); a number, the same in every env.
        shadows: render shadows (RGB). Shadow maps dominate software rendering (EGL on a CPU): a 32x24
            image takes ~1 ms without them and ~100x longer with them; pass ``shadows=False`` there.

    Example:
        >>> CameraOptions(camera="front_cam", width=32, height=24, noise=3.0, delay=0.1).noise
        3.0
    """

    width: int = 64
    height: int = 48
    camera: str | None = None
    lookat: tuple[float, float, float] = (0.0, 0.0, 0.0)
    distance: float = 2.0
    azimuth: float = 90.0
    elevation: float = -45.0
    noise: float = 0.0
    shadows: bool = True

    def _validate(self) -> None:
        owner = type(self).__name__
        for name in ("width", "height"):
            value = getattr(self, name)
            if as_int(value) is None or value < 1:
                raise option_error(
                    owner, name, value, "expected a number of pixels >= 1", f"pass e.g. {name}=64"
                )
            object.__setattr__(self, name, as_int(value))
        if self.camera is not None and (not isinstance(self.camera, str) or not self.camera):
            raise option_error(
                owner,
                "camera",
                self.camera,
                "expected the name of a camera in the model, or None for a free camera",
                "pass camera='front_cam' or camera=None with lookat/distance/azimuth/elevation",
            )
        look = self.lookat
        if np.shape(look) != (3,) or not np.all(np.isfinite(np.asarray(look, dtype=float))):
            raise option_error(owner, "lookat", look, "expected 3 finite numbers", "pass lookat=(x, y, z)")
        object.__setattr__(self, "lookat", tuple(float(x) for x in look))
        object.__setattr__(
            self,
            "distance",
            _number(
                owner,
                "distance",
                self.distance,
                "expected metres > 0",
                "pass distance=2.0",
                lambda value: value > 0,
            ),
        )
        for name in ("azimuth", "elevation"):
            value = _number(
                owner, name, getattr(self, name), "expected finite degrees", f"pass {name}=0.0", bool
            )
            object.__setattr__(
                self, name, value if value else 0.0
            )  # -0.0 == 0.0 but reprs (state keys) differ
        if isinstance(self.noise, Distribution):
            raise option_error(
                owner,
                "noise",
                self.noise,
                "camera pixel noise is one number for every env (it is not randomized per episode)",
                "pass a number such as noise=2.0",
            )
        object.__setattr__(
            self,
            "noise",
            _number(
                owner, "noise", self.noise, "expected a std >= 0", "pass noise=0.0 for none", lambda v: v >= 0
            ),
        )
        object.__setattr__(self, "shadows", bool(self.shadows))
        super()._validate()


@dataclass(frozen=True, kw_only=True)
class DepthCameraOptions(CameraOptions):
    """Options of :class:`DepthCameraSensor`: :class:`CameraOptions` plus ``max_depth`` (metres; deeper
    readings saturate there; None: no saturation). ``noise`` is in metres.

    Example:
        >>> DepthCameraOptions(camera="front_cam", width=32, height=24, max_depth=10.0).max_depth
        10.0
    """

    max_depth: float | None = None

    def _validate(self) -> None:
        if self.max_depth is not None:
            value = _number(
                type(self).__name__,
                "max_depth",
                self.max_depth,
                "expected metres > 0",
                "pass max_depth=None (no saturation) or e.g. 10.0",
                lambda v: v > 0,
            )
            object.__setattr__(self, "max_depth", value)
        super()._validate()


def _renderer(model: Any, data: Any, height: int, width: int, depth: bool) -> Any:
    per_env = _RENDERERS.get(data)
    if per_env is None:
        per_env = _RENDERERS[data] = {}
    key = (height, width, depth)
    renderer = per_env.get(key)
    if renderer is None:
        import mujoco

        if _FORKED_WITH_GL:
            raise RuntimeError(
                "camera sensor: this process was forked from one that had already created an OpenGL "
                "context (it rendered a camera); GL drivers do not survive fork and rendering here would "
                "hang. Fix: create Async vector envs with a fresh worker start method, e.g. "
                "make_sensor_vec(..., vectorization_mode='async', vector_kwargs={'context': 'forkserver'}) "
                "(or 'spawn'), or create them before anything renders in the main process; with Mesa "
                "software rendering, LP_NUM_THREADS=0 in the environment also makes fork safe."
            )

        buf_w, buf_h = int(model.vis.global_.offwidth), int(model.vis.global_.offheight)
        if width > buf_w or height > buf_h:
            raise ValueError(
                f"camera image {width}x{height} exceeds the model's offscreen buffer {buf_w}x{buf_h}. Fix: "
                f'lower width/height, or add <visual><global offwidth="{max(width, buf_w)}" '
                f'offheight="{max(height, buf_h)}"/></visual> to the model.'
            )
        try:
            renderer = mujoco.Renderer(model, height, width)
        except Exception as e:  # no display / no GL backend: the usual cause on servers
            raise RuntimeError(
                f"cannot create a MuJoCo renderer ({type(e).__name__}: {e}). Fix: on a machine without a "
                "display, set MUJOCO_GL=egl (or osmesa) in the environment before mujoco is imported."
            ) from e
        if depth:
            renderer.enable_depth_rendering()
        per_env[key] = renderer
    return renderer


def _camera(model: Any, o: CameraOptions) -> Any:
    """What ``Renderer.update_scene`` takes: a camera id, or an ``MjvCamera`` for a free camera."""
    import mujoco

    per_model = _CAMERAS.get(model)
    if per_model is None:
        per_model = _CAMERAS[model] = {}
    cam = per_model.get(repr(o))
    if cam is None:
        if o.camera is not None:
            cam = name_to_id(model, mujoco.mjtObj.mjOBJ_CAMERA, o.camera, f"{type(o).__name__}.camera")
        else:
            cam = mujoco.MjvCamera()
            cam.type = mujoco.mjtCamera.mjCAMERA_FREE
            cam.lookat[:] = o.lookat
            cam.distance, cam.azimuth, cam.elevation = o.distance, o.azimuth, o.elevation
        per_model[repr(o)] = cam
    return cam


class _CameraSensor(ExtractedInSubEnvs, Sensor):
    """Render path shared by the RGB and depth cameras (no timeline: ``uses_ring_pipeline = False``).

    Rendered inside each sub-env like the MuJoCo catalog (:class:`ExtractedInSubEnvs`: the renderer reads
    body poses, so ``MjData`` is brought up to date once, together with the catalog)."""

    uses_ring_pipeline = False
    depth: ClassVar[bool] = False
    extracted_noun = "image"
    extracted_where = "cameras render inside each sub-env"

    @classmethod
    def _get_intermediate_dtype(cls) -> torch.dtype:
        return torch.float32

    @classmethod
    def _extract_state(cls, env: Any, options: list) -> dict[str, np.ndarray]:
        import mujoco

        model, data = mj_handles(env)
        shadow_flag = mujoco.mjtRndFlag.mjRND_SHADOW
        out = {}
        for sensor_options in options:
            renderer = _renderer(model, data, sensor_options.height, sensor_options.width, cls.depth)
            renderer.scene.flags[shadow_flag] = (
                sensor_options.shadows
            )  # one renderer serves sensors with either setting
            renderer.update_scene(data, camera=_camera(model, sensor_options))
            out[state_key(sensor_options)] = np.asarray(renderer.render(), dtype=np.float32).reshape(-1)
        return out

    @classmethod
    def _extracted_detail(cls, sensor: Any) -> str:
        options = sensor.options
        kind = "depth" if cls.depth else "RGB"
        return f" for a {options.width}x{options.height} {kind} image flattened per env"

    @classmethod
    def _noise_columns(cls, metadata: Any) -> torch.Tensor | None:
        """``(1, cols)`` pixel-noise std per column, or None when no sensor of the class is noisy."""
        if "noise" not in metadata.constants:
            if any(sensor.options.noise > 0 for sensor in metadata.sensors):
                cols = [
                    sensor.options.noise
                    for sensor in metadata.sensors
                    for _ in range(sensor.cache_slice.stop - sensor.cache_slice.start)
                ]
                metadata.constants["noise"] = torch.tensor(
                    [cols], dtype=torch.float32, device=metadata.device
                )
                metadata.constants["noise_draw"] = torch.zeros(
                    metadata.num_envs, len(cols), dtype=torch.float32, device=metadata.device
                )
            else:
                metadata.constants["noise"] = None
        return metadata.constants["noise"]

    @classmethod
    def _update_shared_cache(cls, state, md, gt_timeline, measured_timeline, intermediate) -> None:
        gt = gt_timeline.at(0)
        for sensor in md.sensors:  # one batched copy per sensor: the images arrive keyed per sensor
            src = state[sensor.state_key]
            image = src if torch.is_tensor(src) else torch.from_numpy(np.asarray(src))
            gt[:, sensor.cache_slice].copy_(image)
        # without a timeline, measured_timeline.at(0) is the intermediate buffer itself
        intermediate.copy_(gt)
        md.finish_raw_capture(gt_timeline, measured_timeline)  # nan_policy, on the clean images
        noise = cls._noise_columns(md)
        if noise is not None:
            draw = md.constants["noise_draw"]
            md.random.normal_(draw, md.capture_rows, 0)
            intermediate.addcmul_(draw, noise)


class RGBCameraSensor(_CameraSensor):
    """An RGB camera: ``uint8 (B, height, width, 3)``; see the module docstring.

    Example:
        >>> import sensorgym as sg
        >>> from sensorgym.sensors.mujoco.camera import CameraOptions
        >>> mgr = sg.SensorManager(num_envs=2, dt=0.05)
        >>> cam = mgr.add_sensor(CameraOptions(width=4, height=2, noise=1.0))
        >>> type(cam).__name__, cam.fields
        ('RGBCameraSensor', ((2, 4, 3),))
    """

    options_cls = CameraOptions

    def _get_return_format(self) -> tuple[int, ...]:
        return (self.options.height, self.options.width, 3)

    @classmethod
    def _get_cache_dtype(cls) -> torch.dtype:
        return torch.uint8

    @classmethod
    def _post_process(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> torch.Tensor:
        scratch = md.constants.get("rgb_scratch")
        if scratch is None:
            scratch = md.constants["rgb_scratch"] = torch.zeros_like(data)
        torch.clamp(data, 0.0, 255.0, out=scratch).round_()
        out = timeline.at(0)
        out.copy_(scratch)  # exact: integral values in [0, 255]
        return out


class DepthCameraSensor(_CameraSensor):
    """A depth camera: ``float32 (B, height, width)`` metres; see the module docstring.

    Example:
        >>> import sensorgym as sg
        >>> from sensorgym.sensors.mujoco.camera import DepthCameraOptions
        >>> mgr = sg.SensorManager(num_envs=2, dt=0.05)
        >>> cam = mgr.add_sensor(DepthCameraOptions(width=4, height=2, max_depth=5.0))
        >>> type(cam).__name__, cam.fields
        ('DepthCameraSensor', ((2, 4),))
    """

    options_cls = DepthCameraOptions
    depth = True

    def _get_return_format(self) -> tuple[int, ...]:
        return (self.options.height, self.options.width)

    @classmethod
    def _get_cache_dtype(cls) -> torch.dtype:
        return torch.float32

    @classmethod
    def _limits(cls, metadata: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if "limits" not in metadata.constants:
            upper_cols = [
                math.inf if sensor.options.max_depth is None else sensor.options.max_depth
                for sensor in metadata.sensors
                for _ in range(sensor.cache_slice.stop - sensor.cache_slice.start)
            ]
            upper = torch.tensor([upper_cols], dtype=torch.float32, device=metadata.device)
            metadata.constants["limits"] = (torch.zeros_like(upper), upper)
        return metadata.constants["limits"]

    @classmethod
    def _post_process(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> torch.Tensor:
        lower, upper = cls._limits(md)
        out = timeline.at(0)
        torch.clamp(data, lower, upper, out=out)  # noise cannot make depth negative
        return out
