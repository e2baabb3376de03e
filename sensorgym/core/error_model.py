"""The error model of one sensor class (docs/error_model.md): its terms' tables, state and draws, and the
plan of the step's imperfections (``md.imperfections`` of a class).

Each term is a record of :mod:`sensorgym.core.terms` (scale factor, random walk, Gauss-Markov bias, white
noise, the sensor's low-pass filter, bias, resolution, and any registered one); :class:`ErrorModel` holds
for its class what those records declare: the ``(B, cols)`` coefficient tables a term derives from the
per-env option values (owned by the class's :class:`~sensorgym.core.parameters.ParameterTable`; recomputed
in float64 and rounded once to the class's dtype at build, after a setter or a load, and at a reset that
redraws a value they derive from, never per step), each term's per-env state, the class's block of the
step's standard normals, the per-step inputs the terms read, and the plan: ``((apply, args), ...)`` of the
terms present, bound once per plan to the arrays of the class's executor (the tensors, or numpy views of
them). The default hook runs the plan with :func:`~sensorgym.core.terms.run_plan` (or its
``torch.compile``-d twin with ``SensorManager(compile=True)``: one fused kernel per combination of present
terms; the same numbers, bit for bit: products are rounded before the add, never fused).

Example: a gyro with a datasheet noise density, sampled at 200 Hz and read by a 50 Hz policy
    >>> import torch, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.02, seed=0)
    >>> gyro = mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(3,), noise_density=1.7e-4,
    ...                                             update_period=0.005, bandwidth=50.0))
    >>> mgr.reset({"w": torch.zeros(2, 3)})
    >>> model = mgr.metadata(sg.StateSensor).imperfections
    >>> round(float(model.table("sigma")[0, 0]), 6)  # N / sqrt(T_s)
    0.002404
    >>> [term.name for term, _ in model.terms_run()]
    ['lowpass']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from . import terms as _terms
from .terms import Term, run_plan
from .xp import TORCH, Binding

if TYPE_CHECKING:
    from .parameters import ParameterTable
    from .sampler import Sampler

__all__ = ["ErrorModel"]

_compiled: Any = None


def _compiled_plan() -> Any:
    global _compiled
    if _compiled is None:
        import torch._dynamo

        # one graph per combination of present terms and reset/no-reset, per class shape
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        _compiled = torch.compile(run_plan, dynamic=False, fullgraph=True)
    return _compiled


class ErrorModel:
    """The error terms of one sensor class (see the module docstring).

    Args:
        params: the class's parameter table (the per-env option values, the flags of what can be non-zero;
            its ``plan``: the class's options, read once).
        compiled: run the plan through ``torch.compile``.
        binding: the class's executor.
    """

    def __init__(self, params: ParameterTable, compiled: bool, binding: Binding | None = None) -> None:
        plan = params.plan
        self.params, self.dt, self.compiled = params, plan.dt, compiled
        #: the executor of the plan (the class's, decided by the manager at build; torch when compiled)
        self.binding = binding if binding is not None and not compiled else Binding("torch")
        self.xp, self.array = self.binding.xp, self.binding.array
        values = params.components.values
        like = values.get("noise")  # None: no per-component tables (a non-floating intermediate dtype)
        self._shape = None if like is None else (like.shape, like.dtype, like.device)
        # inductor computes float16/bfloat16 elementwise work in float32 and rounds once at the end, where
        # the eager plan rounds after every operation: those dtypes keep the eager plan (same bits)
        exact = like is None or like.dtype in (torch.float32, torch.float64)
        self.run = _compiled_plan() if compiled and exact else run_plan
        #: the terms (then the stages after them) some sensor of the class has: the class holds a per-env
        #: table of their first option
        every = (*_terms.TERMS, *_terms.STAGES)
        self.terms: tuple[Term, ...] = tuple(t for t in every if _holds(t, values, plan))
        self._tables: dict[str, torch.Tensor] = {}
        #: constant buffers a term makes once from the plan (:meth:`buffer`): not per env, not saved
        self.buffers: dict[str, torch.Tensor] = {}
        self.states: dict[str, torch.Tensor] = {}  # per-env state, by name (checkpoint key "md.<name>")
        self.inputs: dict[str, torch.Tensor] = {}  # the state entries the terms read every step
        self.scratch: torch.Tensor | None = None
        self.one: torch.Tensor | None = None
        if like is not None:
            self.scratch = torch.zeros_like(like)
            self.one = torch.ones((), dtype=like.dtype, device=like.device)
            for term in self.terms:
                dtypes = dict(term.state_dtypes)
                for name in term.state:
                    self.states[name] = torch.zeros_like(like, dtype=dtypes.get(name, like.dtype))
                for key in term.inputs:
                    self.inputs[key] = torch.zeros_like(like)
        self._widths = [s.width for s in plan.sensors]
        self._col_to_sensor: torch.Tensor | None = None  # made for the terms that read per-sensor values
        self._fixed_interval: torch.Tensor | None = None
        if like is not None and plan.rate_dependent():
            # T_s per env and sensor: from the sampler (per env, possibly randomized), else fixed per sensor
            fixed = [s.sample_interval for s in plan.sensors]
            interval = torch.tensor([fixed], dtype=torch.float64, device=like.device)
            self._fixed_interval = interval.expand(like.shape[0], -1)
        #: the class's sampler (:meth:`attach_sampler`; None: every step is a sample): a term reads this
        #: step's decision from it, ``sampler.take`` and ``sampler.due`` (``(B, n_sensors)`` bool)
        self.sampler: Sampler | None = None
        self.follows_due = False
        #: per term, the fields its derivation reads (a reset that redraws one recomputes its tables)
        self._reads = {t.name: frozenset(t.options + t.depends) for t in self.terms}
        self._draws: tuple = (None, None, None)
        #: the GT slot the default hooks leave this step's raw value in, when the copy into the working
        #: buffer is folded into the plan's first write (set by the class's storage; None: no fold)
        self.raw_source: torch.Tensor | None = None
        if like is not None:
            for term in self.terms:
                if term.setup is not None:
                    term.setup(self)
        self.plan()

    # -- what the terms' records bind and derive through -------------------------------------------------
    def value(self, field: str) -> torch.Tensor:
        """``(B, cols)`` per-env values of the option ``field`` (the parameter table's)."""
        return self.params.components.values[field]

    def has(self, field: str) -> bool:
        """Whether the class holds per-env values of ``field`` (some sensor has it; always for the options a
        setter can switch on: noise, bias, random walk, resolution)."""
        return field in self.params.components.values

    def can_be_nonzero(self, field: str) -> bool:
        """Whether some env's ``field`` can be non-zero (from the options, or a setter since)."""
        return self.params.components.nonzero.get(field, False)

    def table(self, name: str) -> torch.Tensor:
        """The ``(B, cols)`` coefficient table ``name`` of a term (made on first use, at build)."""
        table = self._tables.get(name)
        if table is None:
            shape, dtype, device = self._shape
            for term in self.terms:
                if name in term.tables:
                    dtype = dict(term.table_dtypes).get(name, dtype)
            table = self._tables[name] = torch.zeros(shape, dtype=dtype, device=device)
        return table

    def buffer(self, name: str, value: torch.Tensor | None = None) -> torch.Tensor:
        """The constant buffer ``name`` a term's setup made (``value`` given: keep it under that name)."""
        if value is not None:
            self.buffers[name] = value
        return self.buffers[name]

    def state(self, name: str) -> torch.Tensor:
        """The per-env state ``name`` of a term, ``(B, cols)``."""
        return self.states[name]

    def input(self, key: str) -> torch.Tensor:
        """The ``(B, cols)`` buffer the class's storage copies ``state[key]`` into every step."""
        return self.inputs[key]

    def draws(self, block: int) -> torch.Tensor | None:
        """Block ``block`` of the class's standard normals of this step, ``(B, cols)``, or None."""
        return self._draws[block] if block < len(self._draws) else None

    def sample_interval(self) -> torch.Tensor:
        """``(B, cols)`` float64 ``T_s`` of each env and column."""
        interval = self.sampler.sample_interval() if self.sampler is not None else self._fixed_interval
        return interval.index_select(1, self.column_sensor())

    def column_sensor(self) -> torch.Tensor:
        """``(cols,)`` int64: the sensor (its index in the class) of each column."""
        if self._col_to_sensor is None:
            cols_of = [j for j, w in enumerate(self._widths) for _ in range(w)]
            self._col_to_sensor = torch.tensor(cols_of, dtype=torch.long, device=self.scratch.device)
        return self._col_to_sensor

    # -- presence, draws and the plan ----------------------------------------------------------------------
    def _present(self, term: Term) -> bool:
        if self._shape is None:
            return False
        if term.present is not None:
            return term.present(self)
        return any(self.can_be_nonzero(field) for field in term.options)

    @property
    def needs_draws(self) -> bool:
        """Whether a present term draws standard normals every step."""
        return any(t.draws is not None and self._present(t) for t in self.terms)

    @property
    def draw_blocks(self) -> int:
        """Standard normals per component per step: white noise and random walk always (their place in the
        stream is fixed), and the blocks of the other present terms."""
        blocks = [t.draws for t in self.terms if t.draws is not None and self._present(t)]
        return max([1, *blocks]) + 1

    def use_draws(self, draws: torch.Tensor | None) -> None:
        """This class's ``(k, B, cols)`` block of standard normals, or None."""
        self._draws = (None, None, None) if draws is None else tuple(draws.unbind(0))
        self.plan()

    def attach_sampler(self, sampler: Sampler | None) -> None:
        """The class's sampler (its storage makes it after the model): a per-env ``T_s``, and the due samples
        the filter advances on when the sensor has an own rate (``T_s > dt``)."""
        self.sampler = sampler
        self.follows_due = sampler is not None and sampler.has_rate and self.has("bandwidth")
        if self.follows_due or (sampler is not None and any(t.samples for t in self.terms)):
            sampler.decides_early = True  # the plan reads this step's due (or taken) samples
        self.refresh()
        self.plan()

    def fold_raw_copy(self, source: torch.Tensor | None) -> None:
        """Read the raw value from ``source`` (the class's GT slot) in the plan's first operation instead of
        a copy into the working buffer: the default hooks then skip that copy (one pass less per step)."""
        self.raw_source = source
        self.plan()

    def terms_run(self) -> list[tuple[Term, tuple]]:
        """``[(term, args)]`` of the terms this plan runs, in order (args as the executor's arrays)."""
        return [(t, a) for t, (_, a) in zip(self._run_terms, self.plan_steps, strict=True)]

    def plan(self) -> None:
        """Bind each present term's arguments, as arrays of the class's executor (at build, after a setter,
        a load or a copy)."""
        array = self.array
        self.source = array(self.raw_source)
        #: the hook's working buffer and its array (:meth:`bind_data`)
        self.data: torch.Tensor | None = None
        self.data_array: Any = None
        self.refresh()  # a setter may have changed a value the coefficients derive from (noise)
        run, steps = [], []
        for term in self.terms:
            if not self._present(term) or (term.draws is not None and self.draws(term.draws) is None):
                continue
            args = term.bind(self)
            run.append(term)
            steps.append((term.apply, tuple(_as_arrays(array, a) for a in args)))
        self._run_terms = run
        #: ``((apply, args), ...)``: the step's terms, in order
        self.plan_steps: tuple = tuple(steps)
        #: whether a present term restarts at a reset (it then reads the reset rows)
        self.uses_rows = any(t.restarts for t in run)

    def rows(self, reset_mask: torch.Tensor | None) -> Any:
        """The reset rows the plan reads, as an array of the executor (None when no term restarts)."""
        if reset_mask is None or not self.uses_rows:
            return None
        return reset_mask if self.xp is TORCH else reset_mask.numpy()  # a capture's own mask

    def bind_data(self, data: torch.Tensor) -> Any:
        """``data`` (the hook's working buffer) as an array of the executor, kept with it (:attr:`data`,
        :attr:`data_array`): the hook passes the same buffer every step and reads the kept one."""
        self.data, self.data_array = data, self.array(data)
        return self.data_array

    def copy_inputs(self, state: Any) -> None:
        """Copy each state entry a term reads into its ``(B, cols)`` buffer (broadcast from ``(B,)`` or
        ``(B, 1)``): the class's storage calls this before the class's hook."""
        for key, buffer in self.inputs.items():
            value = torch.as_tensor(state[key], device=buffer.device)
            buffer.copy_(value.reshape(buffer.shape[0], -1).expand_as(buffer))

    def redraw(self, mask: torch.Tensor) -> None:
        """At a reset of the envs in ``mask``: what the present terms draw for them (after the options'
        resample; the class's storage calls it)."""
        for term in self.terms:
            if term.redraw is not None and self._present(term):
                term.redraw(self, mask)

    # -- the tables ------------------------------------------------------------------------------------------
    def refresh(self, changed: set[str] | frozenset[str] | dict | None = None) -> None:
        """Recompute the terms' tables from the per-env values: every term's (``changed`` None), or those
        of the terms whose derivation reads a field in ``changed`` (the fields a reset redrew)."""
        if self._shape is None:
            return
        for term in self.terms:
            if term.derive is not None and (
                changed is None or not self._reads[term.name].isdisjoint(changed)
            ):
                term.derive(self)

    # -- persistence -----------------------------------------------------------------------------------------
    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The terms' per-env state (restored for the envs a reset does not touch)."""
        return dict(self.states)


def _holds(term: Term, values: dict, plan: Any) -> bool:
    """Whether a class holds ``term``: it has a per-env table of the term's first option, or (a term of
    non-numeric settings) some sensor gives its first setting."""
    if term.options and term.options[0] in values:
        return True
    return bool(term.settings) and any(s.settings.get(term.settings[0]) is not None for s in plan.sensors)


def _as_arrays(array: Any, value: Any) -> Any:
    """A term's argument as the executor's array (tuples of arrays too; None stays None)."""
    if isinstance(value, tuple):
        return tuple(_as_arrays(array, v) for v in value)
    return array(value) if isinstance(value, torch.Tensor) else value
