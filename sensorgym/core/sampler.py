"""The sampler's own rate, lost samples and the age of a reading (options ``update_period``,
``update_phase``, ``dropout``; docs/pipeline.md).

A :class:`Sampler` belongs to one sensor class whose sensors set ``update_period > dt`` or ``dropout > 0``
(a class without them has none and pays nothing). Per env and sensor it owns the sampler's parameters
(period ``T``, phase ``phi``, dropout ``p``, resampled at every reset), the steps since the env's reset,
the step of the last sample and the held snapshot. Each capture it decides which envs take a sample:

* due: ``T <= dt``: every step; else with ``tau_t = t*dt - phi`` (float64), step ``t >= 1`` is due iff
  ``floor(tau_t/T + 1e-9) > floor(tau_{t-1}/T + 1e-9)``; the reset step always takes a sample;
* lost: a due sample is dropped when ``u < p`` (``u ~ U[0, 1)``, one per env and sensor per step); with
  ``dropout_burst = L`` the threshold depends on whether the previous due sample was lost (a two-state
  Markov chain over the due samples, docs/error_model.md): ``1 - 1/L`` after a loss,
  ``q = p / (L (1 - p))`` after a kept sample, so losses come in runs of ``L`` samples on average and
  their long-run fraction is ``p``;

and on the others it overwrites the step's measured snapshot with the held one, bit for bit, before the
delay line sees it. Ground truth is never held. It also remembers, per snapshot of the delay ring, the
step at which its sample was taken, which :meth:`sample_step` turns into the age of a reading.

Example: a 30 Hz sampler at a 50 Hz control step takes samples 2, 2, 1 steps apart
    >>> import torch, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=1, dt=0.02)
    >>> cam = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), update_period=1 / 30,
    ...                                            update_phase=0.0))
    >>> mgr.reset({"x": torch.zeros(1, 1)})
    >>> seen = []
    >>> for t in range(1, 10):
    ...     mgr.step({"x": torch.full((1, 1), float(t))})
    ...     seen.append(int(cam.read()[0, 0]))
    >>> seen
    [0, 2, 2, 4, 5, 5, 7, 7, 9]
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from .options import bounds_of
from .randomization import Distribution
from .ring import Clock, Ring

if TYPE_CHECKING:
    from .protocols import SensorHandle as Sensor
    from .rng import RandomSource

__all__ = ["SAMPLER_FIELDS", "Sampler", "needs_sampler"]

#: the sampler's options, one value per sensor and env
_BELOW_ONE = math.nextafter(1.0, 0.0)
SAMPLER_FIELDS = ("update_period", "update_phase", "dropout", "dropout_burst")
_TOL = 1e-9  # the due rule's tolerance: T = n*dt samples every n steps
#: options whose meaning depends on the sensor's own sample interval ``T_s`` (docs/error_model.md)
_RATE_DEPENDENT = ("noise_density", "bandwidth")


def needs_sampler(options: Any, dt: float) -> bool:
    """Whether a sensor needs a :class:`Sampler`: its options can skip a step's sample (``T > dt`` or
    ``dropout > 0``), or its error model needs a per-env sample interval drawn from an ``update_period``
    distribution (``noise_density`` or ``bandwidth`` with a randomized rate below ``dt``)."""
    if bounds_of(options.update_period)[1] > dt or bounds_of(options.dropout)[1] > 0:
        return True
    period = options.update_period
    return isinstance(period, Distribution) and any(
        bounds_of(v) != (0.0, 0.0)
        for name in _RATE_DEPENDENT
        for v in _components(getattr(options, name, 0.0))
    )


def _components(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def sample_interval(options: Any, dt: float) -> float:
    """``T_s`` of a sensor whose ``update_period`` is a number: the period when it is > 0, else ``dt``."""
    period = options.update_period
    return float(period) if not isinstance(period, Distribution) and period > 0 else dt


class Sampler:
    """Sample-and-hold of one sensor class (see the module docstring).

    Args:
        sensors: the class's sensors in column order.
        widths: return-space columns of each sensor.
        num_envs, dt, device, random, clock: the manager's.
        rdtype: return dtype of the class (of the held snapshot).
        delay_depth: depth of the class's delay ring (0: no delay): a ring of sample steps of that
            depth tells the age of a delayed read.
        episode_steps: the manager's ``(B,)`` steps since each env's reset (read, never written here).
    """

    def __init__(
        self,
        sensors: list[Sensor],
        widths: list[int],
        num_envs: int,
        dt: float,
        device: torch.device,
        random: RandomSource,
        clock: Clock,
        rdtype: torch.dtype,
        delay_depth: int,
        episode_steps: torch.Tensor,
    ) -> None:
        b, n = num_envs, len(sensors)
        self.dt, self.random = dt, random
        f64 = dict(dtype=torch.float64, device=device)
        self.period = torch.zeros(b, n, **f64)
        self.phase = torch.zeros(b, n, **f64)
        self.dropout = torch.zeros(b, n, **f64)
        self.burst = torch.zeros(b, n, **f64)  # mean run of losses, 0: independent losses
        # (field, sensor, distribution) resampled per env at every reset
        self._random: list[tuple[str, int, Distribution]] = []
        self._drawn_phase: list[int] = []  # sensors whose phase is drawn U[0, T) at every reset
        for j, s in enumerate(sensors):
            o = s.options
            for name in SAMPLER_FIELDS:
                value = getattr(o, name)
                if isinstance(value, Distribution):
                    self._random.append((name, j, value))
                elif value is not None:
                    getattr(self, _TENSOR[name])[:, j] = value
            if o.update_phase is None and bounds_of(o.update_period)[1] > dt:
                self._drawn_phase.append(j)
        self.has_rate = any(bounds_of(s.options.update_period)[1] > dt for s in sensors)
        self.has_dropout = any(bounds_of(s.options.dropout)[1] > 0 for s in sensors)
        self.has_burst = self.has_dropout and any(s.options.dropout_burst is not None for s in sensors)
        #: whether a due sample that is lost must be known before the class's hook (a low-pass filter
        #: advances on it): set by the class's storage, which then calls :meth:`decide` before the hook
        self.decides_early = False
        # sensor -> its fields readable as randomization (distributions and drawn phases), field order
        drawn = {(name, j) for name, j, _ in self._random} | {("update_phase", j) for j in self._drawn_phase}
        self.randomized: dict[int, list[str]] = {}
        for j in range(n):
            fields = [name for name in SAMPLER_FIELDS if (name, j) in drawn]
            if fields:
                self.randomized[j] = fields

        self.steps = episode_steps  # the manager's steps since each env's reset (it advances them)
        self.last_sample = torch.zeros(b, n, dtype=torch.long, device=device)  # step of the last sample
        self.held = torch.zeros(b, sum(widths), dtype=rdtype, device=device)  # the last sample's snapshot
        self.sample_ring = Ring(delay_depth, b, n, torch.long, device, clock) if delay_depth > 1 else None
        self.take = torch.zeros(b, n, dtype=torch.bool, device=device)
        #: this step's due samples (taken or lost); kept only when :attr:`decides_early` (see there)
        self.due = torch.zeros(b, n, dtype=torch.bool, device=device)
        if self.has_burst:
            self.lost_prev = torch.zeros(b, n, dtype=torch.bool, device=device)  # the chain's state
            self._p_after_loss = torch.zeros(b, n, **f64)  # 1 - 1/L, or p without a burst length
            self._p_after_kept = torch.zeros(b, n, **f64)  # p / (L (1 - p)), or p
            self._threshold = torch.zeros(b, n, **f64)
            self._not_kept = torch.zeros(b, n, dtype=torch.bool, device=device)
        # sensors of equal width: a snapshot is (B, n, w) and the decision broadcasts over w; otherwise
        # it is spread to the columns with one index_select
        self._width = widths[0] if len(set(widths)) == 1 else None
        if self._width is None:
            cols = [j for j, w in enumerate(widths) for _ in range(w)]
            self.col_to_sensor = torch.tensor(cols, dtype=torch.long, device=device)
            self.take_cols = torch.zeros(b, sum(widths), dtype=torch.bool, device=device)
        self.every_step = torch.zeros(b, n, dtype=torch.bool, device=device)  # T <= dt
        self.safe_period = torch.ones(b, n, **f64)
        # floor(tau_t / T + 1e-9) of this step and of the previous one (the due rule compares them)
        self._k = torch.zeros(b, n, **f64)
        self.k_prev = torch.zeros(b, n, **f64)
        self._t = torch.zeros(b, 1, **f64)
        self._u = torch.zeros(b, n, **f64)  # this step's dropout draws
        self._kept = torch.zeros(b, n, dtype=torch.bool, device=device)
        self._scratch = torch.zeros(b, n, **f64)
        self._phase_u = torch.zeros(b, len(self._drawn_phase), **f64)
        self._phase_cols = torch.tensor(self._drawn_phase, dtype=torch.long, device=device)
        self.refresh_derived()

    # -- parameters ------------------------------------------------------------------------------------
    def refresh_derived(self) -> None:
        torch.le(self.period, self.dt, out=self.every_step)
        self.safe_period.copy_(self.period).masked_fill_(self.every_step, 1.0)
        if self.has_burst:  # the loss chain's two thresholds; p for both without a burst length
            bursty = self.burst >= 1.0
            length = torch.where(bursty, self.burst, 1.0)
            torch.where(bursty, 1.0 - 1.0 / length, self.dropout, out=self._p_after_loss)
            kept = self.dropout / (length * (1.0 - self.dropout))
            torch.where(bursty, kept, self.dropout, out=self._p_after_kept)

    def sample_interval(self) -> torch.Tensor:
        """``(B, n)`` float64 ``T_s`` per env and sensor: the period where it is > 0, else ``dt``."""
        return torch.where(self.period > 0, self.period, self.dt)

    def resample(self, mask: torch.Tensor) -> None:
        """New period, dropout and phase values for the envs in ``mask`` (B,) bool."""
        if not self._random and not self._drawn_phase:
            return
        rows = mask[:, None]
        for name, j, dist in self._random:
            col = self._scratch[:, j : j + 1]
            self.random.sample_(dist, col, mask, 0)
            if name == "dropout":  # Uniform(lo, 1) is [lo, 1); lo + (1 - lo) u can round up to 1
                col.clamp_(max=_BELOW_ONE)
            target = getattr(self, _TENSOR[name])[:, j : j + 1]
            torch.where(rows, col, target, out=target)
        if self._drawn_phase:
            self.random.uniform_(self._phase_u, mask, 0)
            drawn = self._phase_u * self.period.index_select(1, self._phase_cols)
            old = self.phase.index_select(1, self._phase_cols)
            self.phase.index_copy_(1, self._phase_cols, torch.where(rows, drawn, old))
        self.refresh_derived()

    def randomization(self, j: int) -> dict[str, torch.Tensor]:
        """``{field: (B, 1)}`` float32 per-env values of sensor ``j``'s randomized sampler options."""
        return {
            name: getattr(self, _TENSOR[name])[:, j : j + 1].to(torch.float32)
            for name in self.randomized.get(j, [])
        }

    # -- the per-step decision and the hold ------------------------------------------------------------
    def decide(self, ctx: Any) -> None:
        """Decide which envs take this step's sample (:attr:`take`; with :attr:`decides_early` also which
        were due, :attr:`due`). :meth:`hold` calls it, unless :attr:`decides_early`: then the class's
        storage calls it before the class's hook. ``ctx``: the capture's
        :class:`~sensorgym.core.metadata.CaptureContext`."""
        take, reset_mask, advancing = self.take, ctx.reset_mask, ctx.advancing
        if self.has_dropout:
            # drawn in reset captures too (and ignored there): an env's stream then does not depend on
            # whether its reset came with a step (an autoreset) or alone
            self.random.uniform_(self._u, ctx.rows, 0)
        if self.has_rate:
            self._phase_index(self._k)
        if not advancing:  # a reset capture: only the reset envs take (and keep) a sample
            take.copy_(reset_mask[:, None].expand_as(take))
            if self.decides_early:
                self.due.copy_(take)
        else:
            if self.has_rate:  # due iff the phase index grew since the last step (or T <= dt)
                torch.gt(self._k, self.k_prev, out=take)
                take.logical_or_(self.every_step)
            else:
                take.fill_(True)
            if self.decides_early:  # before the losses: a lost due sample still advances the filter
                self.due.copy_(take)
            if self.has_burst:
                self._lose_in_bursts(take)
            elif self.has_dropout:
                take.logical_and_(torch.ge(self._u, self.dropout, out=self._kept))
            if reset_mask is not None:
                take.logical_or_(reset_mask[:, None])
                if self.decides_early:
                    self.due.logical_or_(reset_mask[:, None])
        if self.has_burst and reset_mask is not None:  # the reset sample is kept: the chain restarts
            self.lost_prev.masked_fill_(reset_mask[:, None], False)
        if self.has_rate:
            self.k_prev.copy_(self._k)

    def _lose_in_bursts(self, due: torch.Tensor) -> None:
        """The loss chain over the due samples: a due sample is lost when ``u`` is below the threshold of
        the chain's state (the previous due sample lost or kept); ``due`` becomes the samples taken."""
        torch.where(self.lost_prev, self._p_after_loss, self._p_after_kept, out=self._threshold)
        torch.lt(self._u, self._threshold, out=self._not_kept)
        self._not_kept.logical_and_(due)  # lost = due and below the threshold
        # the chain moves on due samples only: lost_prev = lost where due, unchanged elsewhere
        torch.where(due, self._not_kept, self.lost_prev, out=self.lost_prev)
        due.logical_and_(self._not_kept.logical_not_())

    def hold(self, snapshot: torch.Tensor, ctx: Any) -> None:
        """Decide which envs take this step's sample (unless decided before the hook) and, in the
        others, overwrite ``snapshot`` ``(B, cols)`` (this step's measured return-space snapshot) with
        the held one, in place. ``ctx``: the capture's :class:`~sensorgym.core.metadata.CaptureContext`."""
        if not self.decides_early:
            self.decide(ctx)
        take, reset_mask = self.take, ctx.reset_mask
        torch.where(take, self.steps[:, None], self.last_sample, out=self.last_sample)
        if self.sample_ring is not None:
            slot = self.sample_ring.at(0)
            slot.copy_(self.last_sample)
            if reset_mask is not None:  # padded reads show the reset sample, taken at step 0
                self.sample_ring.buffer.masked_fill_(reset_mask[None, :, None], 0)
        if self._width is None:
            torch.index_select(take, 1, self.col_to_sensor, out=self.take_cols)
            torch.where(self.take_cols, snapshot, self.held, out=snapshot)
        else:
            b, w = snapshot.shape[0], self._width
            per_sensor = snapshot.view(b, -1, w)
            torch.where(take.unsqueeze(2), per_sensor, self.held.view(b, -1, w), out=per_sensor)
        self.held.copy_(snapshot)

    def _phase_index(self, out: torch.Tensor) -> None:
        """``out`` (B, n) = ``floor((t*dt - phi) / T + 1e-9)`` at ``t = steps``, in float64 (the due rule).
        Kept from one step to the next (``k_prev``): the rule's value at ``t - 1`` is the one computed,
        with the same operations, at the previous step (``phi`` and ``T`` change only at a reset)."""
        self._t.copy_(self.steps[:, None])
        torch.mul(self._t.expand_as(out), self.dt, out=out)
        out.sub_(self.phase).div_(self.safe_period).add_(_TOL).floor_()

    # -- ages --------------------------------------------------------------------------------------------
    def sample_step(self, j: int, shift: torch.Tensor | int, clock_t: int) -> torch.Tensor:
        """``(B,)`` episode step of the sample behind the snapshot read ``shift`` steps back."""
        if self.sample_ring is None:
            return self.last_sample[:, j].clone()
        ring = self.sample_ring
        b = ring.buffer.shape[1]
        slot = torch.remainder(clock_t - torch.as_tensor(shift, device=ring.buffer.device), ring.depth)
        slot = slot.expand(b) if slot.dim() == 0 else slot
        return ring.buffer[slot, torch.arange(b, device=slot.device), j]

    # -- save/restore ------------------------------------------------------------------------------------
    def row_state(self) -> list[torch.Tensor]:
        """Tensors a capture writes for every env (restored for the envs a reset does not touch)."""
        out = [self.last_sample, self.held, self.k_prev]  # (the steps are the manager's)
        if self.has_burst:
            out.append(self.lost_prev)
        if self.sample_ring is not None:
            out.append(self.sample_ring.at(0))
        return out

    def parameter_tensors(self) -> list[torch.Tensor]:
        return [self.period, self.phase, self.dropout] + ([self.burst] if self.has_burst else [])

    def state_tensors(self) -> dict[str, torch.Tensor]:
        out = {
            "period": self.period,
            "phase": self.phase,
            "dropout": self.dropout,
            "steps": self.steps,
            "phase_index": self.k_prev,
            "last_sample": self.last_sample,
            "held": self.held,
        }
        if self.sample_ring is not None:
            out["sample_ring"] = self.sample_ring.buffer
        if self.has_burst:
            out["burst"] = self.burst
            out["lost_prev"] = self.lost_prev
        return out


_TENSOR = {"update_period": "period", "update_phase": "phase", "dropout": "dropout", "dropout_burst": "burst"}
