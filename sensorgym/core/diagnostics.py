"""Read-only diagnostics of a built sensor: its current reading in columns and its sampler's decisions.

Tools that show what the engine did (``sensorgym inspect``'s tables and sampler figure, a notebook, a
test) read it here, not from the engine's components, whose layout may change; this module is the one
place that knows where each value lives. Every function takes a sensor of a built
:class:`~sensorgym.core.manager.SensorManager` (after its first ``reset``) and returns new tensors, env
first: writing them changes nothing in the engine, and reading them changes no random stream.

* :func:`reading`: the current measured (or ground-truth) reading as ``(B, cols)``, every field
  flattened in column order, without history: one row per env whatever the sensor's fields;
* :func:`sampler_state`: for a sensor with its own rate or lost samples (``update_period``, ``dropout``;
  docs/pipeline.md), per env this episode's period, phase, dropout and mean burst, whether this step
  took a sample, the episode step of the last sample and the steps since the env's reset; ``None`` for
  a sensor that takes a sample every step;
* :func:`replay_state`: for a sensor that replays a recording (``replay``; docs/error_model.md), per env
  and component the index of the recorded sample its last due sample took, and each recording's length.

Example: a 10 Hz sensor at a 50 Hz control step takes a sample every 5 steps
    >>> import torch, sensorgym as sg
    >>> from sensorgym.core import diagnostics
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.02)
    >>> gps = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), update_period=0.1,
    ...                                            update_phase=0.0), name="gps")
    >>> mgr.reset({"x": torch.zeros(2, 1)})
    >>> taken = []
    >>> for t in range(1, 7):
    ...     mgr.step({"x": torch.full((2, 1), float(t))})
    ...     taken.append(bool(diagnostics.sampler_state(gps)["taken"][0]))
    >>> taken
    [False, False, False, False, True, False]
    >>> state = diagnostics.sampler_state(gps)
    >>> state["period"].tolist(), state["last_sample"].tolist(), state["episode_step"].tolist()
    ([0.1, 0.1], [5, 5], [6, 6])
    >>> diagnostics.reading(gps).tolist()   # held: the sample of step 5
    [[5.0], [5.0]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .sensor import Sensor

__all__ = ["SAMPLER_STATE_KEYS", "reading", "replay_state", "sampler_state"]

#: the keys of :func:`sampler_state`, each a ``(B,)`` tensor
SAMPLER_STATE_KEYS = ("period", "phase", "dropout", "burst", "taken", "last_sample", "episode_step")


def _storage(sensor: Sensor, what: str) -> object:
    storage = sensor._storage
    if storage is None:
        raise RuntimeError(
            f"diagnostics.{what}({sensor.name!r}): the sensor's manager is not built yet. Fix: call "
            "reset() on the manager (or the env) first."
        )
    return storage


def reading(sensor: Sensor, ground_truth: bool = False) -> torch.Tensor:
    """``(B, cols)``: the sensor's current measured reading (with ``ground_truth``: its ground truth), its
    fields flattened and concatenated in column order (a copy; ``cols`` is the sum of the fields' sizes).

    The same values as ``sensor.read(0)`` (``read_ground_truth(0)``), without the split into fields: one
    flat row per env, what a table or a trace of every sensor column needs.
    """
    storage = _storage(sensor, "reading")
    branch = storage.gt if ground_truth else storage.measured
    return branch.cache[:, sensor.return_slice].clone()


def sampler_state(sensor: Sensor) -> dict[str, torch.Tensor] | None:
    """The sampler's state of ``sensor`` after the last step or reset, per env (copies), or ``None`` when
    the sensor takes a sample every step (its options set no ``update_period`` above ``dt``, no
    ``dropout`` and no randomized rate: its class may still hold a sampler for another sensor).

    Keys (:data:`SAMPLER_STATE_KEYS`), each ``(B,)``:

    * ``period``, ``phase`` (s), ``dropout``, ``burst`` (mean run of losses, 0: independent losses):
      float64, this episode's values (drawn at the env's reset when the option is a distribution);
    * ``taken``: bool, whether this step took a sample (the reset step always does; a due sample that
      was lost did not);
    * ``last_sample``: int64, the episode step of the sensor's last sample (what an undelayed read shows);
    * ``episode_step``: int64, the steps since the env's reset.

    Whether a step was due is the documented rule of docs/pipeline.md on ``period`` and ``phase``; a due
    step that took no sample lost it.
    """
    storage = _storage(sensor, "sampler_state")
    sampler = storage.sampler
    manager = sensor._manager
    if sampler is None or not storage.class_plan.sensors[sensor.index].needs_sampler:
        return None
    j, rates, samples = sensor.index, sampler.rates, sampler.samples
    return {
        "period": rates.period[:, j].clone(),
        "phase": rates.phase[:, j].clone(),
        "dropout": rates.dropout[:, j].clone(),
        "burst": rates.burst[:, j].clone(),
        "taken": sampler.take[:, j].clone(),
        "last_sample": samples.last_sample[:, j].clone(),
        "episode_step": manager.episode.steps.clone(),
    }


def replay_state(sensor: Sensor) -> dict[str, torch.Tensor] | None:
    """For a sensor that replays a recording (its option ``replay``), after the last step or reset (copies),
    or ``None`` for one that replays nothing:

    * ``index``: ``(B, components)`` int64, the recorded sample the last due sample took (0 in a component
      that replays nothing): it steps by the sensor's advance per due sample and wraps at the end;
    * ``length``: ``(components,)`` int64, the samples of each component's recording (1: none);
    * ``advance``: ``(components,)`` int64, the recorded samples a due sample advances (0: none).
    """
    storage = _storage(sensor, "replay_state")
    model = storage.md.imperfections
    if storage.class_plan.sensors[sensor.index].settings.get("replay") is None:
        return None
    cols = sensor.cache_slice
    return {
        "index": model.state("replay_index")[:, cols].clone(),
        "length": model.buffer("replay_length")[cols].clone(),
        "advance": model.buffer("replay_advance")[cols].clone(),
    }
