"""The error model of one sensor class (docs/error_model.md): the per-env coefficients of its terms and
their state.

A sensor's datasheet gives its errors in its own units: white noise as a density ``N`` (unit/sqrt(Hz)),
a bias random walk as ``K`` (unit/s/sqrt(Hz)), a bias instability ``sigma_g`` with a correlation time
``tau_c``, a scale-factor error ``k`` and a bandwidth ``f_c``. :class:`ErrorModel` turns the per-env values
of these options (held by the class's :class:`~sensorgym.core.parameters.ParameterTable`, resampled per
env at every reset) and the sensor's own sample interval ``T_s`` (``update_period`` when it is given,
else ``dt``; per env when it is randomized, from the class's :class:`~sensorgym.core.sampler.Sampler`)
into the coefficient tables the imperfection kernel
(:func:`~sensorgym.core.imperfections.imperfection_kernel`) multiplies by, and owns the two states the
terms carry from step to step:

* white noise: per-sample std ``sigma = noise + N / sqrt(T_s)`` (the two are exclusive per component);
* random walk: per-step increment std ``random_walk + K * sqrt(dt)``;
* Gauss-Markov bias ``g`` (state): ``g <- phi g + sigma_g sqrt(1 - phi^2) w``, ``phi = exp(-dt / tau_c)``,
  and ``g ~ N(0, sigma_g^2)`` at a reset;
* scale factor: the gain ``1 + k``;
* first-order low-pass filter ``y`` (state) over the sensor's own samples, ``a = exp(-2 pi f_c T_s)``,
  advanced in closed form over the ``m = max(dt / T_s, 1)`` samples of a step (one per due sample when
  ``T_s >= dt``): ``y <- a^m y + (1 - a^m) x + eps``,
  ``eps ~ N(0, sigma^2 (1 - a)^2 (1 - a^2m) / (1 - a^2))``; at a reset ``y = x + `` one draw of the
  filter's stationary std ``sigma sqrt((1 - a) / (1 + a))``.

The coefficients are computed in float64 and rounded once to the class's dtype, whenever a value they
derive from changes (at build, after a setter or a checkpoint load, and at a reset when one of those
values is randomized), never per step. A component without a filter gets ``a^m = 0``, ``1 - a^m = 1`` and
``sigma`` for both noise stds, so a class mixing filtered and unfiltered components runs one kernel.

Example: a gyro with a datasheet noise density, sampled at 200 Hz and read by a 50 Hz policy
    >>> import torch, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.02, seed=0)
    >>> gyro = mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(3,), noise_density=1.7e-4,
    ...                                             update_period=0.005, bandwidth=50.0))
    >>> mgr.reset({"w": torch.zeros(2, 3)})
    >>> model = mgr.metadata(sg.StateSensor).imperfections.model
    >>> round(float(model.sigma[0, 0]), 6)  # N / sqrt(T_s)
    0.002404
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from .randomization import Distribution

if TYPE_CHECKING:
    from .parameters import ParameterTable
    from .sampler import Sampler

__all__ = ["ErrorModel"]

#: the options each derived table depends on (a reset recomputes the tables when one is randomized)
_DEPENDS = ("noise", "noise_density", "random_walk", "random_walk_density", "bias_instability",
            "bias_correlation_time", "scale_factor", "bandwidth")  # fmt: skip


class ErrorModel:
    """Coefficients and state of one class's error-model terms (see the module docstring); ``md.imperfections
    .model``, None for a class without these options.

    Args:
        params: the class's parameter table (its ``model_fields`` say which terms exist).
        sensors: the class's sensors in column order.
        dt: the control step.
        sampler: the class's sampler, or None (then ``T_s`` is fixed per sensor by its options).
    """

    def __init__(self, params: ParameterTable, sensors: list, dt: float, sampler: Sampler | None) -> None:
        from .sampler import sample_interval

        self.params, self.dt, self.sampler = params, dt, sampler
        fields = set(params.model_fields)
        self.has_scale = "scale_factor" in fields
        self.has_noise_density = "noise_density" in fields
        self.has_walk_density = "random_walk_density" in fields
        self.has_markov = "bias_instability" in fields
        self.has_lowpass = "bandwidth" in fields
        like = params.noise
        b, cols = like.shape
        device = like.device
        cols_of = [j for j, s in enumerate(sensors) for _ in range(s.cache_slice.stop - s.cache_slice.start)]
        self.col_to_sensor = torch.tensor(cols_of, dtype=torch.long, device=device)
        # T_s per env and sensor: from the sampler (per env, possibly randomized), else fixed per sensor
        fixed = [sample_interval(s.options, dt) for s in sensors]
        self._fixed_interval = torch.tensor([fixed], dtype=torch.float64, device=device).expand(b, -1)

        def table(dtype: torch.dtype = like.dtype) -> torch.Tensor:
            return torch.zeros(b, cols, dtype=dtype, device=device)

        self.scale = table() if self.has_scale else None
        self.sigma = table() if (self.has_noise_density or self.has_lowpass) else None
        self.walk_std = table() if self.has_walk_density else None
        self.markov_state = self.phi = self.drive = self.markov_sigma = None
        if self.has_markov:
            self.markov_state, self.phi, self.drive, self.markov_sigma = table(), table(), table(), table()
        self.lowpass_state = self.decay = self.gain = self.step_std = self.start_std = None
        self.active = self.update = self.spare = None
        #: whether the filter's update mask follows the sampler's due samples every step (``T_s > dt``)
        self.follows_due = False
        if self.has_lowpass:
            self.lowpass_state, self.decay, self.gain = table(), table(), table()
            self.step_std, self.start_std, self.spare = table(), table(), table()
            self.active = table(torch.bool)
            self.follows_due = sampler is not None and sampler.has_rate
            self.update = table(torch.bool) if self.follows_due else None
            if self.follows_due:
                sampler.decides_early = True  # the filter advances on due samples, lost ones included
        randomized = set(params._random)
        self.resample_refreshes = bool(randomized & set(_DEPENDS)) or (
            sampler is not None
            and any(isinstance(s.options.update_period, Distribution) for s in sensors)
            and (self.has_noise_density or self.has_lowpass)
        )

    # -- which terms the kernel runs -------------------------------------------------------------------
    @property
    def needs_draws(self) -> bool:
        """Whether a term of the model draws standard normals every step."""
        return self.has_noise_density or self.has_lowpass or self.has_walk_density or self.has_markov

    def refresh(self) -> None:
        """Recompute every coefficient table from the current per-env values (not per step: at build,
        after a setter or a load, and at resets that resample a value they derive from)."""
        p, dt = self.params, self.dt
        f64 = torch.float64
        if self.has_scale:
            torch.add(p.scale_factor, 1.0, out=self.scale)
        if self.sigma is not None or self.has_lowpass:
            interval = self.sampler.sample_interval() if self.sampler is not None else self._fixed_interval
            t_s = interval.index_select(1, self.col_to_sensor)
        if self.sigma is not None:
            sigma = p.noise.to(f64)
            if self.has_noise_density:
                sigma = sigma + p.noise_density.to(f64) / t_s.sqrt()
            self.sigma.copy_(sigma)
        if self.has_walk_density:
            self.walk_std.copy_(p.random_walk.to(f64) + p.random_walk_density.to(f64) * math.sqrt(dt))
        if self.has_markov:
            tau = p.bias_correlation_time.to(f64)
            phi = torch.where(tau > 0, torch.exp(-dt / torch.where(tau > 0, tau, 1.0)), 0.0)
            sigma_g = p.bias_instability.to(f64)
            self.phi.copy_(phi)
            self.drive.copy_(sigma_g * torch.sqrt(1.0 - phi * phi))
            self.markov_sigma.copy_(sigma_g)
        if self.has_lowpass:
            self._refresh_lowpass(t_s)

    def _refresh_lowpass(self, t_s: torch.Tensor) -> None:
        f64 = torch.float64
        f_c = self.params.bandwidth.to(f64)
        active = f_c > 0
        x = 2.0 * math.pi * torch.where(active, f_c, 1.0) * t_s  # a = exp(-x): the decay per own sample
        m = torch.clamp(self.dt / t_s, min=1.0)  # own samples per step (1 per due sample when T_s >= dt)
        sigma = self.sigma.to(f64)
        one_minus_a = -torch.expm1(-x)
        decay = torch.exp(-x * m)
        step_std = sigma * one_minus_a * torch.sqrt(torch.expm1(-2.0 * x * m) / torch.expm1(-2.0 * x))
        start_std = sigma * torch.sqrt(one_minus_a / (2.0 - one_minus_a))  # (1 - a) / (1 + a)
        # no filter: y = 0 * y + 1 * x + sigma * w, the unfiltered noise, in the same kernel
        self.decay.copy_(torch.where(active, decay, 0.0))
        self.gain.copy_(torch.where(active, -torch.expm1(-x * m), 1.0))
        self.step_std.copy_(torch.where(active, step_std, sigma))
        self.start_std.copy_(torch.where(active, start_std, sigma))
        self.active.copy_(active)

    @staticmethod
    def update_mask(xp: Any, due: Any, col_to_sensor: Any, update: Any, active: Any) -> None:
        """``update = active and due`` per column (the filter's state advances on due samples only), on
        arrays of the executor ``xp``."""
        xp.take_in_range(due, col_to_sensor, update, 1)
        xp.logical_and(update, active, update)

    # -- persistence -----------------------------------------------------------------------------------
    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The terms' state (per env, restored for the envs a reset does not touch)."""
        out = {}
        if self.markov_state is not None:
            out["markov_state"] = self.markov_state
        if self.lowpass_state is not None:
            out["lowpass_state"] = self.lowpass_state
        return out
