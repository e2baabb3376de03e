"""The error model of one sensor class (docs/error_model.md): the per-env coefficients of its terms and
their state.

A sensor's datasheet gives its errors in its own units: white noise as a density ``N`` (unit/sqrt(Hz)),
a bias random walk as ``K`` (unit/s/sqrt(Hz)), a bias instability ``sigma_g`` with a correlation time
``tau_c``, a scale-factor error ``k`` and a bandwidth ``f_c``. :class:`ErrorModel` turns the per-env values
of these options (held by the class's :class:`~sensorgym.core.parameters.ParameterTable`, resampled per
env at every reset) and the sensor's own sample interval ``T_s`` (``update_period`` when it is given,
else ``dt``; per env when it is randomized, from the class's :class:`~sensorgym.core.sampler.Sampler`)
into the coefficient tables the imperfection kernel
(:func:`~sensorgym.core.imperfections.imperfection_kernel`) multiplies by, and holds the two states the
terms carry from step to step, each in a component with its coefficients (:class:`GaussMarkovBias`,
:class:`LowpassFilter`):

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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .randomization import Distribution

if TYPE_CHECKING:
    from .parameters import ParameterTable
    from .sampler import Sampler

__all__ = ["ErrorModel", "GaussMarkovBias", "LowpassFilter"]

#: the options each derived table depends on (a reset recomputes the tables when one is randomized)
_DEPENDS = ("noise", "noise_density", "random_walk", "random_walk_density", "bias_instability",
            "bias_correlation_time", "scale_factor", "bandwidth")  # fmt: skip


class GaussMarkovBias:
    """The Gauss-Markov bias of one class's components: its state and the coefficients of its two updates,
    ``(B, cols)`` each, in the class's dtype. A class's :class:`ErrorModel` holds one (``markov``) when some
    sensor of it can have a bias instability.

    Per step the kernel advances ``state <- phi * state + drive * w``; at a reset it restarts the state at
    ``sigma * w`` (its stationary std), ``w`` standard normals.

    Attributes:
        state: the bias ``g`` (restored for the envs a reset does not touch; checkpoint key
            ``markov_state``).
        phi: ``exp(-dt / tau_c)`` (0 where ``tau_c`` is 0).
        drive: ``sigma_g sqrt(1 - phi^2)``, the std of the per-step increment.
        sigma: ``sigma_g``, the stationary std the state restarts with.
    """

    def __init__(self, table: Callable[[], torch.Tensor]) -> None:
        self.state, self.phi, self.drive, self.sigma = table(), table(), table(), table()

    def refresh(self, bias_instability: torch.Tensor, correlation_time: torch.Tensor, dt: float) -> None:
        """Recompute the coefficients (in float64, rounded once) from the per-env ``sigma_g``, ``tau_c``."""
        f64 = torch.float64
        tau = correlation_time.to(f64)
        phi = torch.where(tau > 0, torch.exp(-dt / torch.where(tau > 0, tau, 1.0)), 0.0)
        sigma_g = bias_instability.to(f64)
        self.phi.copy_(phi)
        self.drive.copy_(sigma_g * torch.sqrt(1.0 - phi * phi))
        self.sigma.copy_(sigma_g)


class LowpassFilter:
    """The first-order low-pass filter of one class's components: its state, its coefficients and the
    masks and scratch of its update, ``(B, cols)`` each. A class's :class:`ErrorModel` holds one
    (``lowpass``) when some sensor of it can have a bandwidth.

    Per step the kernel computes ``y + gain * (x - y) + step_std * w`` (``gain = 1 - a^m``: the specified
    ``a^m y + (1 - a^m) x`` in a form whose float rounding keeps a noise-free output between ``y`` and
    ``x``) and stores it into ``state`` where :attr:`update` is set (else where :attr:`active` is), and at
    a reset restarts it at ``x + start_std * w`` (built in :attr:`spare`). A component without a filter
    (``f_c = 0``) gets ``gain = 1`` and its unfiltered ``sigma`` for both stds, and its state stays 0, so
    its output is exactly ``x`` plus its noise.

    Attributes:
        state: the filter's output ``y`` (restored for the envs a reset does not touch; checkpoint key
            ``lowpass_state``).
        gain: ``1 - a^m``, over the ``m`` own samples of a step (``a = exp(-2 pi f_c T_s)``).
        step_std: the std of the noise the filter accumulates over a step.
        start_std: the filter's stationary std ``sigma sqrt((1 - a) / (1 + a))``, drawn at a reset.
        active: ``f_c > 0`` (bool).
        spare: the kernel's scratch for the reset value.
        follows_due: whether the update mask follows the sampler's due samples every step (``T_s > dt``).
        update: the mask the state advances where it is set (``active`` and due), only with
            :attr:`follows_due`, else None.
    """

    def __init__(self, table: Callable[..., torch.Tensor], follows_due: bool) -> None:
        self.state, self.gain = table(), table()
        self.step_std, self.start_std, self.spare = table(), table(), table()
        self.active = table(torch.bool)
        self.follows_due = follows_due
        self.update = table(torch.bool) if follows_due else None

    def refresh(self, bandwidth: torch.Tensor, t_s: torch.Tensor, sigma: torch.Tensor, dt: float) -> None:
        """Recompute the coefficients (in float64, rounded once) from the per-env ``f_c``, the sample
        interval ``t_s`` (float64) and the unfiltered noise std ``sigma`` (the class's dtype)."""
        f64 = torch.float64
        f_c = bandwidth.to(f64)
        active = f_c > 0
        x = 2.0 * math.pi * torch.where(active, f_c, 1.0) * t_s  # a = exp(-x): the decay per own sample
        m = torch.clamp(dt / t_s, min=1.0)  # own samples per step (1 per due sample when T_s >= dt)
        sigma = sigma.to(f64)
        one_minus_a = -torch.expm1(-x)
        step_std = sigma * one_minus_a * torch.sqrt(torch.expm1(-2.0 * x * m) / torch.expm1(-2.0 * x))
        start_std = sigma * torch.sqrt(one_minus_a / (2.0 - one_minus_a))  # (1 - a) / (1 + a)
        # no filter: y = 0 + 1 * (x - 0) + sigma * w, the unfiltered noise, in the same kernel
        self.gain.copy_(torch.where(active, -torch.expm1(-x * m), 1.0))
        self.step_std.copy_(torch.where(active, step_std, sigma))
        self.start_std.copy_(torch.where(active, start_std, sigma))
        self.active.copy_(active)


def _term_view(term: str, name: str, doc: str) -> property:
    def get(self: ErrorModel) -> Any:
        part = getattr(self, term)
        return None if part is None else getattr(part, name)

    return property(get, doc=doc)


class ErrorModel:
    """Coefficients and state of one class's error-model terms (see the module docstring); ``md.imperfections
    .model``, None for a class without these options.

    It holds the tables of the stateless terms (``sigma``, ``walk_std``, ``scale``) and gives the two terms
    with a state to their components: :attr:`markov` (a :class:`GaussMarkovBias`) and :attr:`lowpass` (a
    :class:`LowpassFilter`), each None when no sensor of the class uses the term. Their tables also read
    as attributes of the model (``markov_state``, ``phi``, ``lowpass_state``, ``gain``, ...: None without
    the term).

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
        self.sigma = table() if (self.has_noise_density or "bandwidth" in fields) else None
        self.walk_std = table() if self.has_walk_density else None
        #: the Gauss-Markov bias (:class:`GaussMarkovBias`), None when no sensor has a bias instability
        self.markov = GaussMarkovBias(table) if "bias_instability" in fields else None
        #: the first-order filter (:class:`LowpassFilter`), None when no sensor has a bandwidth; its update
        #: mask follows the sampler's due samples every step when the class has an own rate (``T_s > dt``)
        self.lowpass: LowpassFilter | None = None
        if "bandwidth" in fields:
            follows_due = sampler is not None and sampler.has_rate
            self.lowpass = LowpassFilter(table, follows_due)
            if follows_due:
                sampler.decides_early = True  # the filter advances on due samples, lost ones included
        randomized = set(params._random)
        self.resample_refreshes = bool(randomized & set(_DEPENDS)) or (
            sampler is not None
            and any(isinstance(s.options.update_period, Distribution) for s in sensors)
            and (self.has_noise_density or self.has_lowpass)
        )

    # -- the terms' tables as attributes of the model (None without the term) ------------------------------
    markov_state = _term_view("markov", "state", "``(B, cols)`` the Gauss-Markov bias ``g``.")
    phi = _term_view("markov", "phi", "``(B, cols)`` ``exp(-dt / tau_c)``.")
    drive = _term_view("markov", "drive", "``(B, cols)`` ``sigma_g sqrt(1 - phi^2)``.")
    markov_sigma = _term_view("markov", "sigma", "``(B, cols)`` ``sigma_g``.")
    lowpass_state = _term_view("lowpass", "state", "``(B, cols)`` the filter's output ``y``.")
    gain = _term_view("lowpass", "gain", "``(B, cols)`` ``1 - a^m``.")
    step_std = _term_view("lowpass", "step_std", "``(B, cols)`` the filter's per-step noise std.")
    start_std = _term_view("lowpass", "start_std", "``(B, cols)`` the filter's stationary std.")
    active = _term_view("lowpass", "active", "``(B, cols)`` ``f_c > 0``.")
    update = _term_view("lowpass", "update", "``(B, cols)`` the filter's update mask, or None.")
    spare = _term_view("lowpass", "spare", "``(B, cols)`` the filter's reset scratch.")

    @property
    def has_markov(self) -> bool:
        """Whether some sensor of the class has a Gauss-Markov bias."""
        return self.markov is not None

    @property
    def has_lowpass(self) -> bool:
        """Whether some sensor of the class has a filter."""
        return self.lowpass is not None

    @property
    def follows_due(self) -> bool:
        """Whether the filter's update mask follows the sampler's due samples every step (``T_s > dt``)."""
        return self.lowpass is not None and self.lowpass.follows_due

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
        if self.sigma is not None or self.lowpass is not None:
            interval = self.sampler.sample_interval() if self.sampler is not None else self._fixed_interval
            t_s = interval.index_select(1, self.col_to_sensor)
        if self.sigma is not None:
            sigma = p.noise.to(f64)
            if self.has_noise_density:
                sigma = sigma + p.noise_density.to(f64) / t_s.sqrt()
            self.sigma.copy_(sigma)
        if self.has_walk_density:
            self.walk_std.copy_(p.random_walk.to(f64) + p.random_walk_density.to(f64) * math.sqrt(dt))
        if self.markov is not None:
            self.markov.refresh(p.bias_instability, p.bias_correlation_time, dt)
        if self.lowpass is not None:
            self.lowpass.refresh(p.bandwidth, t_s, self.sigma, dt)

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
        if self.markov is not None:
            out["markov_state"] = self.markov.state
        if self.lowpass is not None:
            out["lowpass_state"] = self.lowpass.state
        return out
