"""Sensor classes and state builders shared by the core tests.

``FilterSensor``: float, with a measured-only physics offset and a recurrent transform
``y_t = x_t + alpha * y_{t-1}`` reading ``timeline.at(1)`` (both branches).
``ThresholdSensor``: float intermediate, bool return via a threshold ``_post_process``.
``ByteSensor``: float intermediate, uint8 return via clamp + round ``_post_process``.
``HalfSensor``: float16 intermediate and return, ``state["x"]`` ``(B, 3)`` as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

import sensorgym as sg


def ramp_state(t: float, num_envs: int, width: int = 1, key: str = "x", env_scale: float = 100.0):
    """``x[b, c] = t + env_scale * b + 1000 * c`` (env ``b``, component ``c``): every env and component
    distinct, exact in float32."""
    env_offset = torch.arange(num_envs, dtype=torch.float32)[:, None] * env_scale
    component_offset = torch.arange(width, dtype=torch.float32)[None, :] * 1000.0
    return {key: (float(t) + env_offset + component_offset)}


@dataclass(frozen=True, kw_only=True)
class FilterOptions(sg.SimpleSensorOptions):
    key: str = "x"
    width: int = 1
    alpha: float = 0.0
    physics_offset: float = 0.0


class FilterSensor(sg.SimpleSensor):
    options_cls = FilterOptions
    cache_dtype = torch.float32

    def _get_return_format(self):
        return (self.options.width,)

    @classmethod
    def _update_raw_data(cls, state, md, raw):
        for s in md.sensors:
            raw[:, s.cache_slice] = torch.as_tensor(state[s.options.key])[:, : s.options.width]

    @classmethod
    def _apply_physics_imperfections(cls, md, data, timeline):
        for s in md.sensors:
            if s.options.physics_offset:
                data[:, s.cache_slice] += s.options.physics_offset

    @classmethod
    def _apply_transform(cls, md, data, timeline, *, is_measured):
        prev = timeline.at(1)
        for s in md.sensors:
            if s.options.alpha:
                data[:, s.cache_slice] += s.options.alpha * prev[:, s.cache_slice]


@dataclass(frozen=True, kw_only=True)
class ThresholdOptions(sg.SimpleSensorOptions):
    key: str = "x"
    width: int = 1
    threshold: float = 0.5


class ThresholdSensor(sg.SimpleSensor):
    options_cls = ThresholdOptions
    cache_dtype = torch.bool
    intermediate_dtype = torch.float32

    def _get_return_format(self):
        return (self.options.width,)

    @classmethod
    def _update_raw_data(cls, state, md, raw):
        for s in md.sensors:
            raw[:, s.cache_slice] = torch.as_tensor(state[s.options.key])[:, : s.options.width]

    @classmethod
    def _post_process(cls, md, data, timeline, *, is_measured):
        out = timeline.at(0)
        for s in md.sensors:
            torch.gt(data[:, s.cache_slice], s.options.threshold, out=out[:, s.return_slice])
        return out


@dataclass(frozen=True, kw_only=True)
class ByteOptions(sg.SimpleSensorOptions):
    key: str = "x"
    width: int = 1


class ByteSensor(sg.SimpleSensor):
    options_cls = ByteOptions
    cache_dtype = torch.uint8
    intermediate_dtype = torch.float32

    def _get_return_format(self):
        return (self.options.width,)

    @classmethod
    def _update_raw_data(cls, state, md, raw):
        for s in md.sensors:
            raw[:, s.cache_slice] = torch.as_tensor(state[s.options.key])[:, : s.options.width]

    @classmethod
    def _post_process(cls, md, data, timeline, *, is_measured):
        return data.clamp(0, 255).round().to(torch.uint8)


@dataclass(frozen=True, kw_only=True)
class HalfOptions(sg.SimpleSensorOptions):
    pass


class HalfSensor(sg.SimpleSensor):
    """A reduced-precision class: compiled code and numpy would round it differently from eager torch."""

    options_cls = HalfOptions
    intermediate_dtype = cache_dtype = torch.float16
    return_format = (3,)

    @classmethod
    def _update_raw_data(cls, state, md, raw):
        raw.copy_(state["x"])


def as_np(x) -> np.ndarray:
    """A numpy copy (``read()`` returns a view of the cache, which the next step overwrites)."""
    return x.detach().cpu().numpy().copy() if torch.is_tensor(x) else np.array(x)
