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
    from .plan import ClassPlan, SensorPlan
    from .rng import RandomSource

__all__ = [
    "SAMPLER_FIELDS",
    "HeldSamples",
    "LossChain",
    "PhaseIndex",
    "Sampler",
    "SamplerRates",
]

#: the sampler's options, one value per sensor and env
_BELOW_ONE = math.nextafter(1.0, 0.0)
SAMPLER_FIELDS = ("update_period", "update_phase", "dropout", "dropout_burst")
_TOL = 1e-9  # the due rule's tolerance: T = n*dt samples every n steps


class SamplerRates:
    """The sampler's per-env options of one class, ``(B, n_sensors)`` float64, and what a reset draws.

    Holds the period ``T`` (:attr:`period`), phase ``phi`` (:attr:`phase`), dropout ``p``
    (:attr:`dropout`) and mean burst length ``L`` (:attr:`burst`, 0: independent losses) of every env and
    sensor, the two tables the due rule derives from the period (:attr:`every_step`: ``T <= dt``;
    :attr:`safe_period`: ``T``, or 1 where ``T <= dt``, a safe divisor), and the randomization:
    ``entries`` lists ``(field, sensor, distribution)`` resampled per env at every reset,
    ``drawn_phase`` the sensors whose phase is drawn ``U[0, T)`` at every reset, with the buffers
    :meth:`resample` works in (``scratch``, ``phase_u``, ``phase_cols``), and :attr:`randomized` maps a
    sensor to its fields readable as randomization (in ``SAMPLER_FIELDS`` order).
    """

    def __init__(
        self, sensors: tuple[SensorPlan, ...], num_envs: int, dt: float, device: torch.device
    ) -> None:
        b, n = num_envs, len(sensors)
        self.dt = dt
        f64 = dict(dtype=torch.float64, device=device)
        self.period = torch.zeros(b, n, **f64)
        self.phase = torch.zeros(b, n, **f64)
        self.dropout = torch.zeros(b, n, **f64)
        self.burst = torch.zeros(b, n, **f64)  # mean run of losses, 0: independent losses
        self.entries: list[tuple[str, int, Distribution]] = []
        self.drawn_phase: list[int] = []
        for j, s in enumerate(sensors):
            for name in SAMPLER_FIELDS:
                value = getattr(s, name)
                if isinstance(value, Distribution):
                    self.entries.append((name, j, value))
                elif value is not None:
                    self.table(name)[:, j] = value
            if s.update_phase is None and bounds_of(s.update_period)[1] > dt:
                self.drawn_phase.append(j)
        drawn = {(name, j) for name, j, _ in self.entries} | {("update_phase", j) for j in self.drawn_phase}
        self.randomized: dict[int, list[str]] = {}
        for j in range(n):
            fields = [name for name in SAMPLER_FIELDS if (name, j) in drawn]
            if fields:
                self.randomized[j] = fields
        self.every_step = torch.zeros(b, n, dtype=torch.bool, device=device)  # T <= dt
        self.safe_period = torch.ones(b, n, **f64)
        self.scratch = torch.zeros(b, n, **f64)
        self.phase_u = torch.zeros(b, len(self.drawn_phase), **f64)
        self.phase_cols = torch.tensor(self.drawn_phase, dtype=torch.long, device=device)

    def table(self, name: str) -> torch.Tensor:
        """The ``(B, n_sensors)`` table of the option ``name`` (one of ``SAMPLER_FIELDS``)."""
        return getattr(self, _TENSOR[name])

    def refresh(self) -> None:
        """Recompute :attr:`every_step` and :attr:`safe_period` from the period."""
        torch.le(self.period, self.dt, out=self.every_step)
        self.safe_period.copy_(self.period).masked_fill_(self.every_step, 1.0)

    def resample(self, mask: torch.Tensor, random: RandomSource) -> bool:
        """Draw new values of the randomized options and phases for the envs in ``mask`` (B,) bool; False
        (and nothing drawn) when none is randomized."""
        if not self.entries and not self.drawn_phase:
            return False
        rows = mask[:, None]
        for name, j, dist in self.entries:
            col = self.scratch[:, j : j + 1]
            random.sample_(dist, col, mask, 0)
            if name == "dropout":  # Uniform(lo, 1) is [lo, 1); lo + (1 - lo) u can round up to 1
                col.clamp_(max=_BELOW_ONE)
            target = self.table(name)[:, j : j + 1]
            torch.where(rows, col, target, out=target)
        if self.drawn_phase:
            random.uniform_(self.phase_u, mask, 0)
            drawn = self.phase_u * self.period.index_select(1, self.phase_cols)
            old = self.phase.index_select(1, self.phase_cols)
            self.phase.index_copy_(1, self.phase_cols, torch.where(rows, drawn, old))
        return True


class PhaseIndex:
    """The due rule's state: ``floor((t*dt - phi) / T + 1e-9)`` per env and sensor, float64 ``(B, n)``.

    :attr:`k` is this step's value (computed by :meth:`compute`), :attr:`k_prev` the previous step's (the
    checkpoint's ``phase_index``; the sampler copies ``k`` into it once it has decided); a step is due
    where ``k > k_prev`` or ``T <= dt``. It reads the manager's steps since each env's reset and its
    rates' ``phase``, ``safe_period`` and ``every_step``, bound at build (they are written in place only).
    """

    def __init__(self, rates: SamplerRates, episode_steps: torch.Tensor) -> None:
        like = rates.period
        self.dt, self.steps = rates.dt, episode_steps
        self.phase, self.safe_period, self.every_step = rates.phase, rates.safe_period, rates.every_step
        self.k = torch.zeros_like(like)
        self.k_prev = torch.zeros_like(like)
        self._t = torch.zeros(like.shape[0], 1, dtype=like.dtype, device=like.device)

    def compute(self) -> None:
        """:attr:`k` at ``t = steps``. The rule's value at ``t - 1`` is :attr:`k_prev`, computed with the
        same operations at the previous step (``phi`` and ``T`` change only at a reset)."""
        out = self.k
        self._t.copy_(self.steps[:, None])
        torch.mul(self._t.expand_as(out), self.dt, out=out)
        out.sub_(self.phase).div_(self.safe_period).add_(_TOL).floor_()


class LossChain:
    """The sampler's losses: this step's dropout draws ``u`` (:attr:`u`, ``U[0, 1)``, one per env and
    sensor) and, with ``dropout_burst``, the two-state Markov chain over the due samples.

    ``kept`` is the scratch of independent losses (``u >= p``). With bursts (``bursty``), ``lost_prev``
    is the chain's state (the previous due sample lost), ``after_loss`` / ``after_kept`` its two loss
    thresholds (``1 - 1/L`` and ``p / (L (1 - p))``; ``p`` for both without a burst length, see
    :meth:`refresh`), and ``threshold`` / ``not_kept`` the scratch of :meth:`lose`.
    """

    def __init__(self, num_envs: int, n: int, device: torch.device, bursty: bool) -> None:
        f64 = dict(dtype=torch.float64, device=device)
        self.u = torch.zeros(num_envs, n, **f64)
        self.kept = torch.zeros(num_envs, n, dtype=torch.bool, device=device)
        self.bursty = bursty
        if bursty:
            self.lost_prev = torch.zeros(num_envs, n, dtype=torch.bool, device=device)
            self.after_loss = torch.zeros(num_envs, n, **f64)  # 1 - 1/L, or p without a burst length
            self.after_kept = torch.zeros(num_envs, n, **f64)  # p / (L (1 - p)), or p
            self.threshold = torch.zeros(num_envs, n, **f64)
            self.not_kept = torch.zeros(num_envs, n, dtype=torch.bool, device=device)

    def refresh(self, dropout: torch.Tensor, burst: torch.Tensor) -> None:
        """The chain's two thresholds from the per-env dropout ``p`` and burst length ``L``."""
        bursty = burst >= 1.0
        length = torch.where(bursty, burst, 1.0)
        torch.where(bursty, 1.0 - 1.0 / length, dropout, out=self.after_loss)
        kept = dropout / (length * (1.0 - dropout))
        torch.where(bursty, kept, dropout, out=self.after_kept)

    def lose(self, due: torch.Tensor) -> None:
        """The loss chain over the due samples: a due sample is lost when ``u`` is below the threshold of
        the chain's state (the previous due sample lost or kept); ``due`` becomes the samples taken."""
        lost_prev, not_kept = self.lost_prev, self.not_kept
        torch.where(lost_prev, self.after_loss, self.after_kept, out=self.threshold)
        torch.lt(self.u, self.threshold, out=not_kept)
        not_kept.logical_and_(due)  # lost = due and below the threshold
        # the chain moves on due samples only: lost_prev = lost where due, unchanged elsewhere
        torch.where(due, not_kept, lost_prev, out=lost_prev)
        due.logical_and_(not_kept.logical_not_())


class HeldSamples:
    """The sample-and-hold bookkeeping of one class: what is held and when it was taken.

    :attr:`steps` is the manager's ``(B,)`` steps since each env's reset (read, never written here),
    :attr:`last_sample` ``(B, n)`` the step of each sensor's last sample, :attr:`held` ``(B, cols)`` its
    return-space snapshot (the class's return dtype) and :attr:`ring` (with a delay ring of depth > 1)
    the step of the sample behind each snapshot of the delay ring, else None. ``width`` is the sensors'
    common width (a snapshot is then ``(B, n, width)`` and a decision broadcasts over it), or None: the
    decision is spread to the columns with ``col_to_sensor`` into ``take_cols``. :meth:`Sampler.hold`
    writes them every step.
    """

    def __init__(
        self,
        widths: list[int],
        num_envs: int,
        device: torch.device,
        clock: Clock,
        rdtype: torch.dtype,
        delay_depth: int,
        episode_steps: torch.Tensor,
    ) -> None:
        b, n, cols = num_envs, len(widths), sum(widths)
        self.steps = episode_steps
        self.last_sample = torch.zeros(b, n, dtype=torch.long, device=device)
        self.held = torch.zeros(b, cols, dtype=rdtype, device=device)
        self.ring = Ring(delay_depth, b, n, torch.long, device, clock) if delay_depth > 1 else None
        self.width = widths[0] if len(set(widths)) == 1 else None
        if self.width is None:
            sensor_of = [j for j, w in enumerate(widths) for _ in range(w)]
            self.col_to_sensor = torch.tensor(sensor_of, dtype=torch.long, device=device)
            self.take_cols = torch.zeros(b, cols, dtype=torch.bool, device=device)

    def sample_step(self, j: int, shift: torch.Tensor | int, clock_t: int) -> torch.Tensor:
        """``(B,)`` episode step of sensor ``j``'s sample behind the snapshot read ``shift`` steps back."""
        ring = self.ring
        if ring is None:
            return self.last_sample[:, j].clone()
        b = ring.buffer.shape[1]
        slot = torch.remainder(clock_t - torch.as_tensor(shift, device=ring.buffer.device), ring.depth)
        slot = slot.expand(b) if slot.dim() == 0 else slot
        return ring.buffer[slot, torch.arange(b, device=slot.device), j]


class Sampler:
    """Sample-and-hold of one sensor class (see the module docstring).

    Its state lives in four components, one responsibility each: :attr:`rates` (a :class:`SamplerRates`:
    the per-env period, phase, dropout and burst tables and their randomization), :attr:`phase_index`
    (a :class:`PhaseIndex`: the due rule's phase index of this step and the previous one), :attr:`losses`
    (a :class:`LossChain`: the dropout draws and the burst chain) and :attr:`samples` (a
    :class:`HeldSamples`: the held snapshot, the step of the last sample and the sample ring), each read
    through its own name (``sampler.rates.period``, ``sampler.samples.last_sample``). The step's decision
    is :attr:`take` (and :attr:`due`).

    Args:
        plan: the class's plan (:class:`~sensorgym.core.plan.ClassPlan`: its sensors' options, read once).
        widths: return-space columns of each sensor.
        num_envs, device, random, clock: the manager's.
        rdtype: return dtype of the class (of the held snapshot).
        delay_depth: depth of the class's delay ring (0: no delay): a ring of sample steps of that
            depth tells the age of a delayed read.
        episode_steps: the manager's ``(B,)`` steps since each env's reset (read, never written here).
    """

    def __init__(
        self,
        plan: ClassPlan,
        widths: list[int],
        num_envs: int,
        device: torch.device,
        random: RandomSource,
        clock: Clock,
        rdtype: torch.dtype,
        delay_depth: int,
        episode_steps: torch.Tensor,
    ) -> None:
        b, n, dt = num_envs, len(plan.sensors), plan.dt
        self.random = random
        self.has_rate, self.has_dropout, self.has_burst = plan.has_rate, plan.has_dropout, plan.has_burst
        #: whether a due sample that is lost must be known before the class's hook (a low-pass filter
        #: advances on it): set by the class's storage, which then calls :meth:`decide` before the hook
        self.decides_early = False
        self.rates = SamplerRates(plan.sensors, b, dt, device)
        self.phase_index = PhaseIndex(self.rates, episode_steps)
        self.losses = LossChain(b, n, device, self.has_burst)
        self.samples = HeldSamples(widths, b, device, clock, rdtype, delay_depth, episode_steps)
        self.take = torch.zeros(b, n, dtype=torch.bool, device=device)
        #: this step's due samples (taken or lost); kept only when :attr:`decides_early` (see there)
        self.due = torch.zeros(b, n, dtype=torch.bool, device=device)
        self.refresh_derived()

    # -- parameters ------------------------------------------------------------------------------------
    def refresh_derived(self) -> None:
        """Recompute the tables derived from the per-env values (the due rule's; the chain's thresholds)."""
        rates = self.rates
        rates.refresh()
        if self.has_burst:  # the loss chain's two thresholds; p for both without a burst length
            self.losses.refresh(rates.dropout, rates.burst)

    def sample_interval(self) -> torch.Tensor:
        """``(B, n)`` float64 ``T_s`` per env and sensor: the period where it is > 0, else ``dt``."""
        period = self.rates.period
        return torch.where(period > 0, period, self.rates.dt)

    def resample(self, mask: torch.Tensor) -> None:
        """New period, dropout and phase values for the envs in ``mask`` (B,) bool."""
        if self.rates.resample(mask, self.random):
            self.refresh_derived()

    def randomization(self, j: int) -> dict[str, torch.Tensor]:
        """``{field: (B, 1)}`` float32 per-env values of sensor ``j``'s randomized sampler options."""
        rates = self.rates
        return {name: rates.table(name)[:, j : j + 1].float() for name in rates.randomized.get(j, [])}

    # -- the per-step decision and the hold ------------------------------------------------------------
    def decide(self, ctx: Any) -> None:
        """Decide which envs take this step's sample (:attr:`take`; with :attr:`decides_early` also which
        were due, :attr:`due`). :meth:`hold` calls it, unless :attr:`decides_early`: then the class's
        storage calls it before the class's hook. ``ctx``: the capture's
        :class:`~sensorgym.core.metadata.CaptureContext`."""
        take, reset_mask, advancing = self.take, ctx.reset_mask, ctx.advancing
        index, losses = self.phase_index, self.losses
        if self.has_dropout:
            # drawn in reset captures too (and ignored there): an env's stream then does not depend on
            # whether its reset came with a step (an autoreset) or alone
            self.random.uniform_(losses.u, ctx.rows, 0)
        if self.has_rate:
            index.compute()
        if not advancing:  # a reset capture: only the reset envs take (and keep) a sample
            take.copy_(reset_mask[:, None].expand_as(take))
            if self.decides_early:
                self.due.copy_(take)
        else:
            if self.has_rate:  # due iff the phase index grew since the last step (or T <= dt)
                torch.gt(index.k, index.k_prev, out=take)
                take.logical_or_(index.every_step)
            else:
                take.fill_(True)
            if self.decides_early:  # before the losses: a lost due sample still advances the filter
                self.due.copy_(take)
            if self.has_burst:
                losses.lose(take)
            elif self.has_dropout:
                take.logical_and_(torch.ge(losses.u, self.rates.dropout, out=losses.kept))
            if reset_mask is not None:
                take.logical_or_(reset_mask[:, None])
                if self.decides_early:
                    self.due.logical_or_(reset_mask[:, None])
        if self.has_burst and reset_mask is not None:  # the reset sample is kept: the chain restarts
            losses.lost_prev.masked_fill_(reset_mask[:, None], False)
        if self.has_rate:
            index.k_prev.copy_(index.k)

    def hold(self, snapshot: torch.Tensor, ctx: Any) -> None:
        """Decide which envs take this step's sample (unless decided before the hook) and, in the
        others, overwrite ``snapshot`` ``(B, cols)`` (this step's measured return-space snapshot) with
        the held one, in place. ``ctx``: the capture's :class:`~sensorgym.core.metadata.CaptureContext`."""
        if not self.decides_early:
            self.decide(ctx)
        take, reset_mask, samples = self.take, ctx.reset_mask, self.samples
        last_sample, held, ring = samples.last_sample, samples.held, samples.ring
        torch.where(take, samples.steps[:, None], last_sample, out=last_sample)
        if ring is not None:
            ring.at(0).copy_(last_sample)
            if reset_mask is not None:  # padded reads show the reset sample, taken at step 0
                ring.buffer.masked_fill_(reset_mask[None, :, None], 0)
        w = samples.width
        if w is None:
            torch.index_select(take, 1, samples.col_to_sensor, out=samples.take_cols)
            torch.where(samples.take_cols, snapshot, held, out=snapshot)
        else:
            b = snapshot.shape[0]
            per_sensor = snapshot.view(b, -1, w)
            torch.where(take.unsqueeze(2), per_sensor, held.view(b, -1, w), out=per_sensor)
        held.copy_(snapshot)

    # -- ages --------------------------------------------------------------------------------------------
    def sample_step(self, j: int, shift: torch.Tensor | int, clock_t: int) -> torch.Tensor:
        """``(B,)`` episode step of the sample behind the snapshot read ``shift`` steps back."""
        return self.samples.sample_step(j, shift, clock_t)

    # -- save/restore ------------------------------------------------------------------------------------
    def row_state(self) -> list[torch.Tensor]:
        """Tensors a capture writes for every env (restored for the envs a reset does not touch)."""
        samples = self.samples
        out = [samples.last_sample, samples.held, self.phase_index.k_prev]  # (the steps are the manager's)
        if self.has_burst:
            out.append(self.losses.lost_prev)
        if samples.ring is not None:
            out.append(samples.ring.at(0))
        return out

    def parameter_tensors(self) -> list[torch.Tensor]:
        rates = self.rates
        return [rates.period, rates.phase, rates.dropout] + ([rates.burst] if self.has_burst else [])

    def state_tensors(self) -> dict[str, torch.Tensor]:
        rates, samples = self.rates, self.samples
        out = {
            "period": rates.period,
            "phase": rates.phase,
            "dropout": rates.dropout,
            "steps": samples.steps,
            "phase_index": self.phase_index.k_prev,
            "last_sample": samples.last_sample,
            "held": samples.held,
        }
        if samples.ring is not None:
            out["sample_ring"] = samples.ring.buffer
        if self.has_burst:
            out["burst"] = rates.burst
            out["lost_prev"] = self.losses.lost_prev
        return out


_TENSOR = {"update_period": "period", "update_phase": "phase", "dropout": "dropout", "dropout_burst": "burst"}
