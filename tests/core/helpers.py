"""Stand-ins for built sensors, so the engine components can be unit-tested without a manager."""

from __future__ import annotations

import torch

import sensorgym as sg
from sensorgym.core.parameters import ParameterTable
from sensorgym.core.plan import ClassPlan
from sensorgym.core.rng import BatchRandom


class FakeSensor:
    """What a component reads of a built sensor: options, index, name and column slices."""

    def __init__(self, options, index: int, start: int, width: int, name: str | None = None) -> None:
        self.options, self.index, self.name = options, index, name or f"s{index}"
        self.cache_slice = self.return_slice = slice(start, start + width)


def sensors(*option_sets: dict, width: int = 1) -> list[FakeSensor]:
    out, start = [], 0
    for j, kw in enumerate(option_sets):
        w = kw.pop("width", width)
        out.append(FakeSensor(sg.StateSensorOptions(key=f"k{j}", shape=(w,), **kw), j, start, w))
        start += w
    return out


def class_plan(sensor_list, dt: float = 0.1) -> ClassPlan:
    """The plan a class of these stand-ins would have (their options, read once)."""
    return ClassPlan.build(sensor_list, dt)


def table(sensor_list, num_envs: int = 2, dt: float = 0.1, seed: int = 0) -> ParameterTable:
    plan = ClassPlan.build(sensor_list, dt)
    return ParameterTable(plan, num_envs, torch.device("cpu"), BatchRandom("cpu", seed), torch.float32)
