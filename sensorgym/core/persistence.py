"""Checkpoints and copies of a :class:`~sensorgym.SensorManager` (a mixin of the manager).

``state_dict()`` holds everything needed to continue bit-identically (rings, indices, accumulators,
parameters, the random generator and the sensors' options, checked on load), as tensors, numbers and
strings only, so a checkpoint loads with ``torch.load(..., weights_only=True)``. ``copy.deepcopy`` makes
an independent manager that continues exactly like the original; plain ``pickle`` is refused (it would
store each view of a shared buffer as its own copy).

Example:
    >>> import copy
    >>> import torch
    >>> import sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.1, seed=0)
    >>> _ = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), noise=0.1, delay=0.1))
    >>> mgr.reset({"x": torch.zeros(2, 1)})
    >>> saved, twin = mgr.state_dict(), copy.deepcopy(mgr)
    >>> for m in (mgr, twin):
    ...     m.step({"x": torch.ones(2, 1)})
    >>> bool(torch.equal(mgr.sensors[0].read(), twin.sensors[0].read()))
    True
    >>> mgr.load_state_dict(saved)  # back to the saved point
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["ManagerPersistence"]


def _default_reprs(options: Any) -> dict[str, str]:
    """``{field: repr(default)}`` of an options dataclass (fields without a default left out)."""
    out = {}
    for f in dataclasses.fields(options):
        if f.default is not dataclasses.MISSING:
            out[f.name] = repr(f.default)
    return out


class ManagerPersistence:
    """``state_dict``/``load_state_dict`` and copying, for :class:`~sensorgym.SensorManager` (see the
    module docstring; the manager's own attributes are used as they are)."""

    #: version of :meth:`state_dict`'s format (3: class-major buffers and the sensors' options; 4: the
    #: sampler state (own rate, dropout, sample ages) and each env's episode start)
    STATE_VERSION = 4

    def __deepcopy__(self, memo: dict) -> Any:
        """``copy.deepcopy``: torch copies the buffers with their views still sharing memory; the numpy
        views of the numpy executor are left out (:meth:`exclude_views`), and every class binds and plans
        again from the new tensors (a view copied along would not share the new memory and would
        silently read and write a detached array)."""
        new = object.__new__(type(self))
        memo[id(self)] = new
        self.exclude_views(memo)
        new._restore(copy.deepcopy(self.__dict__, memo))
        return new

    def exclude_views(self, memo: dict) -> None:
        """Mark every numpy view of this manager's buffers as not to be copied in a ``copy.deepcopy`` memo
        (the copy binds its own). A wrapper that holds views of the manager's buffers (through
        :meth:`numpy_view`) calls this before copying itself, whatever it copies first."""
        for storage in self._stores.values():
            for view in storage.binding.views():
                memo[id(view)] = None
        for view in self._views.views():
            memo[id(view)] = None

    def numpy_view(self, t: torch.Tensor) -> Any:
        """A numpy view of one of this manager's CPU buffers (a cache, a ring), made once per tensor (None
        where numpy cannot view it), for a packer outside the manager (the Gymnasium layer's
        ``ObservationLayout``); a deep copy of the manager leaves these out (:meth:`exclude_views`)."""
        return self._views.numpy(t)

    def views_id(self) -> int:
        """Which manager's views :meth:`numpy_view` gives (a copy's differ from the original's)."""
        return id(self._views)

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(
            "SensorManager cannot be pickled: pickle stores each view of a shared buffer as its own copy, "
            "so an unpickled manager's rings would no longer share memory and would silently read stale "
            "data. Fix: save mgr.state_dict() (torch.save) and load_state_dict() into a manager built with "
            "the same sensors, or copy.deepcopy(mgr) within a process."
        )

    def _restore(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._built:
            self.episode.bind(self._views if self.executor_used == "numpy" else None)
            for storage in self._stores.values():
                storage.plan()
            self._plan_draws()

    def _layout(self) -> list[tuple[str, list[str], int, int]]:
        return [
            (
                cls.__qualname__,
                [s.name for s in storage.sensors],
                storage.columns.stop - storage.columns.start,
                storage.measured.cache.shape[1],  # the class's return columns
            )
            for cls, storage in self._stores.items()
        ]

    def _sensor_records(self) -> list[dict[str, Any]]:
        """Name, class and options (each field as its exact ``repr``) of every sensor, in order: plain
        strings, so a checkpoint loads with ``torch.load(weights_only=True)``."""
        return [
            {
                "name": s.name,
                "class": type(s).__qualname__,
                "options": {f.name: repr(getattr(s.options, f.name)) for f in dataclasses.fields(s.options)},
            }
            for s in self.sensors
        ]

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically: rings, index, accumulators, parameters, RNG,
        and the sensors' options (checked on load). Only tensors, numbers and strings: it loads with
        ``torch.load(..., weights_only=True)``."""
        self._require_built("state_dict()")
        return {
            "version": self.STATE_VERSION,
            "num_envs": self.num_envs,
            "dt": self.dt,
            "t": self.clock.t,
            "episode_start": self.episode_start,
            "generator": self.random.get_state(),
            "sensors": self._sensor_records(),
            "layout": self._layout(),
            "groups": {
                str(d): {k: v.clone() for k, v in g.state_tensors().items()} for d, g in self._groups.items()
            },
            "classes": {
                cls.__qualname__: {
                    "tensors": {k: v.clone() for k, v in storage.state_tensors().items()},
                    "flags": storage.params.flags(),
                }
                for cls, storage in self._stores.items()
            },
        }

    def _check_compatible(self, saved: Mapping[str, Any]) -> None:
        """Refuse a state dict of another configuration with a ``ValueError`` naming what differs."""
        fix = "Fix: build the manager with the same num_envs, dt and sensors (same order and options)."
        version = saved.get("version") if isinstance(saved, Mapping) else None
        if version != self.STATE_VERSION:
            raise ValueError(
                f"load_state_dict: the checkpoint has format version {version!r}; this sensorgym reads "
                f"version {self.STATE_VERSION}. Fix: save the checkpoint again with this version."
            )
        for field in ("num_envs", "dt"):
            if saved[field] != getattr(self, field):
                raise ValueError(
                    f"load_state_dict: {field} differs: the checkpoint has {field}={saved[field]!r}, this "
                    f"manager {field}={getattr(self, field)!r}. {fix}"
                )
        mine, theirs = self._sensor_records(), saved["sensors"]
        names = [r["name"] for r in mine]
        saved_names = [r["name"] for r in theirs]
        if names != saved_names:
            raise ValueError(
                f"load_state_dict: the sensor set differs: the checkpoint has sensors {saved_names}, this "
                f"manager {names}. {fix}"
            )
        for a, b in zip(mine, theirs, strict=True):
            if a["class"] != b["class"]:
                raise ValueError(
                    f"load_state_dict: sensor {a['name']!r} is a {b['class']} in the checkpoint but a "
                    f"{a['class']} here. {fix}"
                )
            defaults = _default_reprs(self.sensors[names.index(a["name"])].options)
            for field in sorted(set(a["options"]) | set(b["options"])):
                # an option added after the checkpoint was written reads as its default (which changes
                # nothing): the checkpoint still loads while this manager leaves it at the default
                mine_v = a["options"].get(field, "<absent>")
                saved_v = b["options"].get(field, defaults.get(field, "<absent>"))
                if mine_v != saved_v:
                    raise ValueError(
                        f"load_state_dict: sensor {a['name']!r} option {field!r} differs: the checkpoint "
                        f"has {field}={saved_v}, this manager {field}={mine_v}. {fix}"
                    )
        layout = [tuple(x) for x in saved["layout"]]
        for (cls, names_a, iw, rw), (_, _, iw_b, rw_b) in zip(self._layout(), layout, strict=True):
            if (iw, rw) != (iw_b, rw_b):
                raise ValueError(
                    f"load_state_dict: the sensors {names_a} ({cls}) have {iw} columns here but {iw_b} in "
                    "the checkpoint (a shape inferred from the state differs). Fix: give the sensors "
                    "explicit shapes, or build from the same env."
                )

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` into a manager with the same configuration (built by reset/build);
        a checkpoint of another configuration is refused with a ``ValueError`` naming the difference."""
        self._require_built("load_state_dict()")
        self._check_compatible(state_dict)
        for d, g in self._groups.items():
            for k, v in g.state_tensors().items():
                v.copy_(state_dict["groups"][str(d)][k])
        for cls, storage in self._stores.items():
            saved = state_dict["classes"][cls.__qualname__]
            storage.params.load_flags(saved["flags"])
            storage.plan()  # before the tensors: leaving a fixed shift writes the previous shifts
            for k, v in storage.state_tensors().items():
                v.copy_(saved["tensors"][k])
            storage.refresh_derived()
        self.clock.t = int(state_dict["t"])
        self.episode.steps.copy_(self.clock.t - state_dict["episode_start"].to(self.device))
        self.random.set_state(state_dict["generator"])
        self._plan_draws()
