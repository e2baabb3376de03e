"""The default hardware imperfections of :class:`~sensorgym.SimpleSensor`: one kernel, eager or compiled.

Order: random walk, noise, bias, resolution. They run on the per-step working buffer, a copy of the
measured timeline slot, so imperfections are frozen into the snapshot captured this step and never
compound through a recurrent ``_apply_transform``. The standard-normal draws were made by the manager
for the whole dtype buffer in one call.

:func:`imperfection_kernel` is written once, against an array namespace (:mod:`sensorgym.core.xp`):
:func:`hardware_imperfections` runs it on torch tensors, and a manager with the numpy executor (small CPU
batches) runs it on numpy views of the same buffers. :class:`HardwareImperfections` (one per class, ``md.
imperfections``) holds the random-walk accumulator and the draws, and binds the kernel's arguments once
from the parameter table's flags (absent imperfections are passed as None and cost nothing); with
``SensorManager(compile=True)`` it runs the same function through ``torch.compile`` (one fused kernel per
combination of present imperfections; the same numbers, bit for bit: products are rounded before the
add, never fused into a multiply-add).

Example:
    >>> import torch
    >>> from sensorgym.core.imperfections import hardware_imperfections
    >>> x = torch.tensor([[0.25, 0.75, 1.25]])
    >>> r = torch.tensor([[0.5, 0.5, 0.0]])
    >>> scratch = torch.empty_like(x)
    >>> hardware_imperfections(x, scratch, None, None, None, None, None, None,
    ...                        torch.full_like(x, 0.25), torch.where(r > 0, r, 1.0), r > 0)
    >>> x.tolist()  # bias 0.25, then quantized to 0.5 where r > 0
    [[0.5, 1.0, 1.5]]
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import torch

from .error_model import ErrorModel
from .xp import TORCH, Binding

if TYPE_CHECKING:
    from .parameters import ParameterTable

__all__ = [
    "HardwareImperfections",
    "hardware_imperfections",
    "imperfection_kernel",
    "quantize_",
]


def quantize_(
    data: torch.Tensor, safe_step: torch.Tensor, active: torch.Tensor, scratch: torch.Tensor
) -> torch.Tensor:
    """``data = round(data / r) * r`` (half to even) where ``active``; in place, no allocation."""
    _quantize(TORCH, data, safe_step, active, scratch)
    return data


def _quantize(xp: Any, data: Any, safe_step: Any, active: Any, scratch: Any) -> None:
    xp.div(data, safe_step, scratch)
    xp.round(scratch, scratch)
    xp.mul(scratch, safe_step, scratch)
    xp.select_into(data, active, scratch)


def imperfection_kernel(
    xp: Any,
    data: Any,
    scratch: Any,
    walk: Any,
    walk_draw: Any,
    walk_std: Any,
    reset_rows: Any,
    noise_draw: Any,
    noise_std: Any,
    bias: Any,
    resolution_step: Any,
    resolution_active: Any,
    source: Any = None,
    scale: Any = None,
    markov: Any = None,
    lowpass: Any = None,
) -> None:
    """The one definition of the imperfections, on arrays of the executor ``xp``
    (:mod:`sensorgym.core.xp`): see :func:`hardware_imperfections` for the arguments."""
    # `x` is what the next operation reads: the raw value in `source` until the first write into `data`
    # (that write is the copy, so a folded copy costs no pass of its own), then `data` itself
    x = data if source is None else source
    if scale is not None:  # scale-factor error: x (1 + k)
        xp.mul(x, scale, data)
        x = data
    if walk is not None:
        xp.add(walk, xp.mul(walk_draw, walk_std, scratch), walk)
        if reset_rows is not None:
            xp.fill_where(walk, reset_rows[:, None], 0.0)
        xp.add(x, walk, data)
        x = data
    if markov is not None:  # Gauss-Markov bias: g <- phi g + drive w; g = sigma_g w at a reset
        state, draw, phi, drive, sigma = markov
        xp.mul(state, phi, state)
        xp.add(state, xp.mul(draw, drive, scratch), state)
        if reset_rows is not None:
            xp.select_into(state, reset_rows[:, None], xp.mul(draw, sigma, scratch))
        xp.add(x, state, data)
        x = data
    if lowpass is not None:  # white noise through the sensor's filter, closed form over the step
        state, gain, step_std, start_std, update, spare = lowpass
        if reset_rows is not None:  # the filter starts at the reset sample, at its stationary spread
            xp.add(x, xp.mul(noise_draw, start_std, scratch), spare)
        # y + (1 - a^m) (x - y): the specified a^m y + (1 - a^m) x, written so that float rounding keeps
        # the output between y and x: a reading of a bounded input stays in its bounds (a^m y + (1 - a^m) x
        # in float32 drifted up to 50 ulps outside them when 1 - a^m is small). Without a filter y is 0.
        xp.sub(x, state, scratch)  # (x is read first: it may be `data`)
        xp.mul(scratch, gain, scratch)
        xp.add(state, scratch, data)
        xp.add(data, xp.mul(noise_draw, step_std, scratch), data)
        if reset_rows is not None:
            xp.select_into(data, reset_rows[:, None], spare)
        xp.select_into(state, update, data)  # only where filtered (and due): without a filter y stays 0
        x = data
    elif noise_draw is not None:
        xp.add(x, xp.mul(noise_draw, noise_std, scratch), data)
        x = data
    if bias is not None:
        xp.add(x, bias, data)
        x = data
    if resolution_step is not None and resolution_active is None:
        xp.div(x, resolution_step, data)
        xp.round(data, data)
        xp.mul(data, resolution_step, data)
        x = data
    if x is not data:  # nothing wrote yet: partial quantization keeps the raw value where it is off
        xp.copy(data, x)
    if resolution_active is not None:
        _quantize(xp, data, resolution_step, resolution_active, scratch)


def hardware_imperfections(
    data: torch.Tensor,
    scratch: torch.Tensor,
    walk: torch.Tensor | None,
    walk_draw: torch.Tensor | None,
    walk_std: torch.Tensor | None,
    reset_rows: torch.Tensor | None,
    noise_draw: torch.Tensor | None,
    noise_std: torch.Tensor | None,
    bias: torch.Tensor | None,
    resolution_step: torch.Tensor | None,
    resolution_active: torch.Tensor | None,
    source: torch.Tensor | None = None,
    scale: torch.Tensor | None = None,
    markov: tuple | None = None,
    lowpass: tuple | None = None,
) -> None:
    """Scale factor, random walk, Gauss-Markov bias, noise (through the sensor's low-pass filter), bias,
    resolution on ``data`` ``(B, cols)`` in place (None: absent), on torch tensors
    (:func:`imperfection_kernel` with the torch executor; what ``torch.compile`` wraps).

    ``walk`` is the random-walk accumulator (advanced, and zeroed in ``reset_rows`` so a reset snapshot
    shows no drift); ``resolution_active`` None means every component is quantized. With ``source``, the
    value to corrupt is read from ``source`` and written to ``data`` (the copy folded into the first
    operation; the same numbers as ``data.copy_(source)`` followed by the in-place call). ``scale`` is
    the gain ``1 + k``; ``markov`` is ``(state, draws, phi, drive, sigma_g)`` and ``lowpass`` ``(state,
    a^m, 1 - a^m, step std, start std, update mask or None, scratch)``, the tables of the
    :class:`~sensorgym.core.error_model.ErrorModel`'s :class:`~sensorgym.core.error_model.GaussMarkovBias`
    and :class:`~sensorgym.core.error_model.LowpassFilter` (with ``lowpass`` the noise runs through the filter
    and ``noise_std`` is unused).
    """
    imperfection_kernel(
        TORCH, data, scratch, walk, walk_draw, walk_std, reset_rows, noise_draw, noise_std, bias,
        resolution_step, resolution_active, source, scale, markov, lowpass,
    )  # fmt: skip


_compiled: Any = None


def _compiled_kernel() -> Any:
    global _compiled
    if _compiled is None:
        import torch._dynamo

        # one graph per combination of present imperfections and reset/no-reset, per class shape
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        _compiled = torch.compile(hardware_imperfections, dynamic=False, fullgraph=True)
    return _compiled


class HardwareImperfections:
    """The default imperfections of one class: the random-walk accumulator, this step's draws and the
    kernel's arguments, bound by :meth:`plan` from the parameter table (at build, after a setter and
    after loading a checkpoint). ``md.imperfections`` of a class.

    Example:
        >>> import torch, sensorgym as sg
        >>> mgr = sg.SensorManager(num_envs=1, dt=0.1, seed=0)
        >>> s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), bias=0.25, resolution=0.5))
        >>> mgr.reset({"x": torch.tensor([[1.0, 2.2]])})
        >>> imperfections = mgr.metadata(sg.StateSensor).imperfections
        >>> imperfections.walk_args[1] is None, imperfections.other_args[2] is not None  # no walk; bias
        (True, True)
        >>> data = torch.zeros(1, 2)  # the hook's working buffer
        >>> imperfections(data, None)  # the raw value is read from the GT slot (the folded copy)
        >>> data.tolist()  # [1.0, 2.2] + 0.25, then quantized to 0.5
        [[1.0, 2.5]]
    """

    def __init__(self, params: ParameterTable, compiled: bool, binding: Binding | None = None) -> None:
        self.params, self.compiled = params, compiled
        #: the executor of the kernel (the class's, decided by the manager at build; torch when compiled)
        self.binding = binding if binding is not None and not compiled else Binding("torch")
        # inductor computes float16/bfloat16 elementwise work in float32 and rounds once at the end, where
        # the eager kernel rounds after every operation: those dtypes keep the eager kernel (same bits)
        exact = not params.has_component_params or params.noise.dtype in (torch.float32, torch.float64)
        if compiled and exact:
            self.kernel = _compiled_kernel()
        else:
            self.kernel = functools.partial(imperfection_kernel, self.binding.xp)
        self.random_walk_state: torch.Tensor | None = None
        self.scratch: torch.Tensor | None = None
        if params.has_component_params:
            self.random_walk_state = torch.zeros_like(params.noise)
            self.scratch = torch.zeros_like(params.noise)
        self.noise_draw: torch.Tensor | None = None
        self.random_walk_draw: torch.Tensor | None = None
        self.markov_draw: torch.Tensor | None = None
        #: the class's error-model terms (:class:`~sensorgym.core.error_model.ErrorModel`), attached by its
        #: storage once its sampler exists; None: the class uses none of them and pays nothing
        self.model: ErrorModel | None = None
        self._due: tuple = ()  # the filter's update mask, from the sampler's due samples (see plan)
        #: the GT slot the default hooks leave this step's raw value in, when the copy into the working
        #: buffer is folded into the kernel's first write (set by the class's storage; None: no fold)
        self.raw_source: torch.Tensor | None = None
        self.plan()

    def attach_model(self, model: ErrorModel | None) -> None:
        """Run the class's error-model terms (its storage calls this at build, after making the sampler)."""
        self.model = model
        if model is not None:
            model.refresh()
        self.plan()

    def fold_raw_copy(self, source: torch.Tensor | None) -> None:
        """Read the raw value from ``source`` (the class's GT slot) in
        :meth:`__call__` instead of a copy in the working buffer: the default hooks then
        skips that copy (one pass less per step)."""
        self.raw_source = source
        self.plan()

    @property
    def draw_blocks(self) -> int:
        """Standard normals per component per step: noise, random walk (and the Gauss-Markov bias)."""
        return 3 if self.model is not None and self.model.has_markov else 2

    @property
    def needs_draws(self) -> bool:
        p, m = self.params, self.model
        return p.has_component_params and (
            p.has_noise or p.has_random_walk or (m is not None and m.needs_draws)
        )

    def use_draws(self, draws: torch.Tensor | None) -> None:
        """This class's ``(k, B, cols)`` block of standard normals (noise, random walk and, with a
        Gauss-Markov bias, its driving noise), or None."""
        blocks = (None,) * 3 if draws is None else (*draws.unbind(0), None)
        self.noise_draw, self.random_walk_draw, self.markov_draw = blocks[:3]
        self.plan()

    def plan(self) -> None:
        """Bind the kernel's arguments: an absent imperfection is None (skipped)."""
        p, m, array = self.params, self.model, self.binding.array
        self.bound_source = array(self.raw_source)
        self._data: tuple[Any, Any] = (None, None)  # the hook's working buffer and its array (__call__)
        self.model_args: tuple = (None, None, None)
        self._due = ()
        if not p.has_component_params:  # nothing to apply (e.g. an integer intermediate dtype)
            self.has_walk, self.walk_args, self.other_args = False, (None,) * 4, (None,) * 5
            self.uses_rows = False
            return
        walk_density = m is not None and m.has_walk_density
        walk = (p.has_random_walk or walk_density) and self.random_walk_draw is not None
        noise_density = m is not None and m.has_noise_density
        noise = (p.has_noise or noise_density) and self.noise_draw is not None
        lowpass = m is not None and m.has_lowpass and self.noise_draw is not None
        markov = m is not None and m.has_markov and self.markov_draw is not None
        if p.resolution_all_active:
            resolution = (p.resolution, None)
        elif p.has_resolution:
            resolution = (p.resolution_step, p.resolution_active)
        else:
            resolution = (None, None)
        self.has_walk = walk
        self.uses_rows = walk or lowpass or markov  # terms that restart at a reset
        walk_args = (
            self.scratch,
            self.random_walk_state if walk else None,
            self.random_walk_draw if walk else None,
            (m.walk_std if walk_density else p.random_walk) if walk else None,
        )
        other_args = (
            self.noise_draw if noise or lowpass else None,
            (m.sigma if noise_density else p.noise) if noise and not lowpass else None,
            p.bias if p.has_bias else None,
            *resolution,
        )
        # the kernel's arguments as arrays of its executor: the tensors, or numpy views of their memory
        self.walk_args, self.other_args = tuple(map(array, walk_args)), tuple(map(array, other_args))
        if m is not None:
            m.refresh()  # a setter may have changed a value the coefficients derive from (noise)
            g, f = m.markov, m.lowpass  # the Gauss-Markov bias and the filter (None: no such term)
            model_args = (
                m.scale,
                (g.state, self.markov_draw, g.phi, g.drive, g.sigma) if markov else None,
                (f.state, f.gain, f.step_std, f.start_std, f.update if f.follows_due else f.active, f.spare)
                if lowpass
                else None,
            )
            self.model_args = tuple(
                tuple(map(array, a)) if isinstance(a, tuple) else array(a) for a in model_args
            )
            if f is not None and f.follows_due:  # update = active and due, per column, every step (__call__)
                self._due = tuple(map(array, (m.sampler.due, m.col_to_sensor, f.update, f.active)))

    def __call__(self, data: torch.Tensor, reset_mask: torch.Tensor | None) -> None:
        """Apply them to ``data`` ``(B, cols)`` in place (``reset_mask``: the envs this capture resets);
        where the default hooks folded the copy of the raw value into this call (:meth:`fold_raw_copy`),
        ``data`` is first set from the GT slot (the same numbers)."""
        array = self._data[1] if data is self._data[0] else self._bind_data(data)
        rows = None
        if reset_mask is not None and self.uses_rows:
            rows = reset_mask if self.binding.xp is TORCH else reset_mask.numpy()  # a capture's own mask
        if self._due:  # the filter advances where a sample is due
            ErrorModel.update_mask(self.binding.xp, *self._due)
        self.kernel(array, *self.walk_args, rows, *self.other_args, self.bound_source, *self.model_args)

    def _bind_data(self, data: torch.Tensor) -> Any:
        """``data`` as an array of the executor; the hook passes the same working buffer every step, so
        the last one is kept with its array."""
        self._data = (data, self.binding.array(data))
        return self._data[1]
