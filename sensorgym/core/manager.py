"""``SensorManager``: owns all sensor storage, runs the per-step pipeline, serves reads and state.

Example:
    >>> import torch, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.02, seed=0)
    >>> gyro = mgr.add_sensor(sg.StateSensorOptions(key="gyro", shape=(3,), delay=0.04, history_length=2))
    >>> ramp = lambda t: {"gyro": torch.full((2, 3), float(t))}
    >>> mgr.reset(ramp(0))
    >>> for t in range(1, 4):
    ...     mgr.step(ramp(t))
    >>> gyro.read()[0, :, 0].tolist(), gyro.read_ground_truth(history_length=0)[0, 0].item()
    ([1.0, 0.0], 3.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .metadata import STEP, CaptureContext, SensorMetadata
from .options import SensorOptions
from .persistence import ManagerPersistence
from .ring import Clock, EpisodeSteps
from .rng import BatchRandom, PerEnvRandom, RandomSource
from .rows import Rollback, env_mask, folded_seed, known_empty
from .sensor import Sensor, normalize_format, reads_timeline
from .storage import ClassStorage, DtypeGroup
from .values import as_int, as_real
from .xp import Binding, choose_executor

if TYPE_CHECKING:
    from .accel import CapturedStep

__all__ = ["Rollback", "SensorManager", "env_mask"]


#: below this many intermediate elements per step (envs x columns), the CPU step runs on one thread by
#: default: its ops are too small for threads to pay off, and under contention they wait on each other
#: (benchmarks/bench_contention.py)
MULTITHREAD_ELEMENTS = 1 << 22


class SensorManager(ManagerPersistence):
    """Batched sensors for ``num_envs`` parallel environments stepped every ``dt`` seconds.

    Args:
        num_envs: batch size ``B``.
        dt: control step in seconds (the time between two :meth:`step` calls).
        device: where every buffer lives (``"cpu"``, ``"cuda"``, ...); states may come from anywhere.
        seed: seeds the one ``torch.Generator`` behind noise, jitter and randomization
            (None: nondeterministic).
        per_env_rng: give every env its own generator (env ``b`` seeded with ``seed + b``) so an env's
            numbers do not depend on the batch it runs in; slower (a loop over envs), for
            reproducibility and reference tests. See :mod:`sensorgym.core.rng`.
        compile: run the default hardware imperfections of each class as one ``torch.compile``-fused
            kernel (same numbers, bit for bit; the first steps compile). See :mod:`sensorgym.core.accel`;
            for CUDA graphs of the whole step see :meth:`capture_cuda_graph`.
        num_threads: torch intra-op threads for :meth:`reset`/:meth:`step` on the CPU. ``None`` (default):
            one thread while the step's work (envs x intermediate columns) is below
            :data:`MULTITHREAD_ELEMENTS`, torch's global setting above it; ``0``: torch's global setting
            always (the behaviour before this option); ``k``: ``k`` threads. The setting is applied for the
            duration of the call and restored after it, so the user's global setting is never changed
            behind their back. Why one thread: the step is many small ops, and with another process on the
            machine each multi-threaded op waits on an OpenMP barrier for a descheduled thread (measured on
            2 cores next to one busy process: a B=64 step took 85x its single-threaded time). Numbers are
            bit-identical whatever the setting. See docs/performance.md (contention).
        executor: how the per-step arithmetic of the stages, the delay line and the imperfection kernel
            runs: ``"torch"`` (torch ops), ``"numpy"`` (the same definitions executed on numpy views of
            the same CPU buffers: no torch dispatch cost, for small batches) or ``"auto"`` (default:
            numpy on the CPU without ``compile`` while ``num_envs x intermediate columns`` is at most
            :data:`~sensorgym.core.xp.NUMPY_MAX_ELEMENTS`, else torch). Decided at build; the results
            are bit-identical (random numbers come from the same torch generators either way), see
            :mod:`sensorgym.core.xp`. :attr:`executor_used` tells which one runs.

    See the module docstring for a runnable example.
    """

    def __init__(
        self,
        num_envs: int,
        dt: float,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        per_env_rng: bool = False,
        compile: bool = False,
        num_threads: int | None = None,
        executor: str = "auto",
    ) -> None:
        n, step = as_int(num_envs), as_real(dt)
        threads = None if num_threads is None else as_int(num_threads)
        if num_threads is not None and (threads is None or threads < 0):
            raise ValueError(
                f"SensorManager(num_threads={num_threads!r}): expected None (automatic), 0 (torch's global "
                "setting) or a number of threads >= 1. Fix: leave it out, or pass e.g. num_threads=1."
            )
        if n is None or n < 1:
            raise ValueError(f"SensorManager(num_envs={num_envs!r}): num_envs must be an int >= 1.")
        if step is None or not math.isfinite(step) or step <= 0:
            raise ValueError(
                f"SensorManager(dt={dt!r}): dt is the control step in seconds and must be > 0. "
                "Fix: pass e.g. dt=0.02 (50 Hz)."
            )
        self.num_envs = n
        self.dt = step
        self.compile = bool(compile)
        self.device = torch.device(device)
        self.num_threads = threads
        self.executor = executor
        choose_executor(executor, self.device, self.compile, 0)  # refuse a bad value now, not at build
        #: the executor decided at build (``"torch"`` or ``"numpy"``); None before build
        self.executor_used: str | None = None
        self._views = Binding("numpy")  # numpy views of the manager's buffers (see numpy_view)
        self._step_threads = 0  # decided at build from the work size: 0 = leave torch's setting alone
        #: the random source of every draw; ``random.generator`` is its torch generator (with
        #: ``per_env_rng``: env 0's)
        self.random: RandomSource = (
            PerEnvRandom(self.num_envs, self.device, seed) if per_env_rng else BatchRandom(self.device, seed)
        )
        self.clock = Clock()
        self.sensors: list[Sensor] = []
        self._names: set[str] = set()
        self._built = False
        self._groups: dict[torch.dtype, DtypeGroup] = {}
        self._stores: dict[type, ClassStorage] = {}
        self._all_rows = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self.rollback = Rollback()
        #: ``episode.steps``: ``(B,)`` steps since each env's last reset (advanced on the device: CUDA
        #: graphs replay it)
        self.episode = EpisodeSteps(self.num_envs, self.device)

    @property
    def episode_start(self) -> torch.Tensor:
        """``(B,)`` the clock value at each env's last reset (a new tensor)."""
        return self.clock.t - self.episode.steps

    # -- configuration ---------------------------------------------------------------------------------
    def seed(self, seed: int | Sequence[int] | None, envs_idx: Any = None) -> None:
        """Reseed the manager's random source (None: from OS entropy). One seed per env (a sequence) seeds
        env ``b``'s stream with ``seed[b]`` under ``per_env_rng`` (an int: ``seed + b``); one generator takes
        the first.

        ``envs_idx`` (a bool mask or indices; Gymnasium's ``reset(seed=..., options={"reset_mask": m})``):
        only those envs are reseeded, as Gymnasium seeds only the masked sub-envs. Under ``per_env_rng``
        the other envs' streams go on untouched; one shared generator cannot be reseeded for some envs, so
        the seed is folded into its stream (:func:`~sensorgym.core.rows.folded_seed`): deterministic, and
        a constant seed in a loop of partial resets never replays the same numbers."""
        if envs_idx is None:
            self.random.seed(seed)
            return
        rows = torch.nonzero(self._to_mask(envs_idx, "envs_idx").cpu()).flatten().tolist()
        if not rows:
            return
        per_env = isinstance(self.random, PerEnvRandom)
        if seed is None:
            if not per_env:
                self.random.seed(None)
                return
            seed = int(torch.randint(0, 2**62, (1,)).item())
        if isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + b for b in range(self.num_envs)]
        else:
            seeds = [int(s) for s in seed]
            if len(seeds) != self.num_envs:
                raise ValueError(
                    f"seed: {len(seeds)} seeds for {self.num_envs} envs. Fix: one seed per env, or one int "
                    "(env b then gets seed + b)."
                )
        if per_env:
            for b in rows:
                self.random.generators[b].manual_seed(seeds[b])
        else:
            given = [int(seed)] if isinstance(seed, (int, np.integer)) else [seeds[b] for b in rows]
            self.random.seed(folded_seed(given, rows, self.random.get_state()))

    def add_sensor(self, options: SensorOptions, name: str | None = None) -> Sensor:
        """Create the sensor registered for ``type(options)``; returns its handle."""
        if self._built:
            raise RuntimeError(
                "add_sensor() after build: the storage layout is fixed once the manager is built "
                "(by build() or the first reset()). Fix: add every sensor before the first reset."
            )
        if not isinstance(options, SensorOptions):
            raise TypeError(
                f"add_sensor expects a SensorOptions instance, got {type(options).__name__}. Fix: pass "
                "e.g. sg.StateSensorOptions(key='obs')."
            )
        cls = Sensor.registered_class(type(options))
        options.check_with_dt(self.dt)
        name = name if name is not None else f"{cls.__name__}_{len(self.sensors)}"
        if name in self._names:
            raise ValueError(f"add_sensor(name={name!r}): a sensor with this name already exists.")
        sensor = cls(options, self, name)
        self._names.add(name)
        self.sensors.append(sensor)
        return sensor

    @property
    def is_built(self) -> bool:
        return self._built

    def build(self, state: Any = None) -> None:
        """Lay out and allocate every buffer. Optional: the first :meth:`reset` builds with its state
        (which lets sensors infer shapes)."""
        if self._built:
            return
        if not self.sensors:
            raise RuntimeError("build(): no sensors were added. Fix: call add_sensor(...) first.")
        by_class: dict[type, list[Sensor]] = {}
        for s in self.sensors:
            by_class.setdefault(type(s), []).append(s)
        layout: dict[torch.dtype, list[tuple[type, int]]] = {}
        return_layout: dict[type, tuple[torch.dtype, int]] = {}
        for cls, sensors in by_class.items():
            icol = rcol = 0
            for j, s in enumerate(sensors):
                s._on_build(state)
                ifields = normalize_format(
                    s._get_intermediate_format(), f"{cls.__name__}._get_intermediate_format"
                )
                rfields = normalize_format(s._get_return_format(), f"{cls.__name__}._get_return_format")
                i_width, r_width = sum(math.prod(f) for f in ifields), sum(math.prod(f) for f in rfields)
                s._place(j, slice(icol, icol + i_width), slice(rcol, rcol + r_width))
                icol, rcol = icol + i_width, rcol + r_width
            intermediate_dtype, return_dtype = cls._get_intermediate_dtype(), cls._get_cache_dtype()
            for what, dt in (
                ("_get_intermediate_dtype", intermediate_dtype),
                ("_get_cache_dtype", return_dtype),
            ):
                if not isinstance(dt, torch.dtype):
                    raise TypeError(f"{cls.__name__}.{what}() must return a torch.dtype, got {dt!r}")
            layout.setdefault(intermediate_dtype, []).append((cls, icol))
            return_layout[cls] = (return_dtype, rcol)
        elements = self.num_envs * sum(w for entries in layout.values() for _, w in entries)
        self.executor_used = choose_executor(self.executor, self.device, self.compile, elements)
        for intermediate_dtype, entries in layout.items():
            # classes with timeline rings first, so the rings cover one leading column span
            entries.sort(key=lambda e: not reads_timeline(e[0]))
            ring_cols = sum(w for c, w in entries if reads_timeline(c))
            depth = max([c.timeline_depth for c, _ in entries if reads_timeline(c)] or [1])
            group = DtypeGroup(
                intermediate_dtype,
                sum(w for _, w in entries),
                ring_cols,
                max(1, depth),
                self.num_envs,
                self.device,
                self.clock,
            )
            self._groups[intermediate_dtype] = group
            start = 0
            for cls, width in entries:
                return_dtype, return_cols = return_layout[cls]
                storage = ClassStorage(
                    cls, by_class[cls], group, slice(start, start + width), return_dtype, return_cols,
                    dt=self.dt, random=self.random, clock=self.clock, compiled=self.compile,
                    episode_steps=self.episode.steps, executor=self.executor_used,
                )  # fmt: skip
                cls._init_metadata(storage.md)
                for s in by_class[cls]:
                    s._attach(storage)
                self._stores[cls] = storage
                start += width
        # keep the class order of first appearance
        self._stores = {cls: self._stores[cls] for cls in by_class}
        self._built = True
        self._step_threads = self._decide_threads()
        self.episode.bind(self._views if self.executor_used == "numpy" else None)
        self.rollback.every_step = any(
            s.nan_policy == "raise" for storage in self._stores.values() for s in storage.class_plan.sensors
        )
        self._plan_draws()

    def _plan_draws(self) -> None:
        """One standard-normal draw per dtype per step covers every class that needs noise or drift (with
        per-env generators: one per class, drawn by env row): each dtype group lays out its members'."""
        one_generator = isinstance(self.random, BatchRandom)
        for group in self._groups.values():
            group.members = [storage for storage in self._stores.values() if storage.group is group]
            group.one_generator = one_generator
            group.plan_draws()

    # -- stepping --------------------------------------------------------------------------------------
    def reset(self, state: Any, envs_idx: Any = None) -> None:
        """Start a new episode for the given envs (all by default; a bool mask or indices): resample their
        randomized options and re-capture a snapshot for them only, without advancing the others."""
        if not self._built:
            self.build(state)
        mask = self._to_mask(envs_idx, "envs_idx")
        self._check_state(state)
        if envs_idx is not None and known_empty(mask):
            return  # nothing to reset (checked on the host: no device sync)
        self._capture(state, self._reset_context(mask, mask, advancing=False))

    def step(self, state: Any, reset_mask: Any = None) -> None:
        """One control step for every env. ``reset_mask`` (optional) marks envs whose ``state`` is the
        first of a new episode (e.g. a gymnasium autoreset): they are reset as part of this step instead of
        needing a separate :meth:`reset`. It is a bool mask ``(B,)`` (on an accelerator: no device sync), a
        0/1 integer done vector ``(B,)`` (rsl_rl's ``dones``) or env indices; see
        :func:`~sensorgym.core.rows.env_mask` for how integers are told apart (an input that reads both
        ways is refused, so none is misread)."""
        if not self._built:
            raise RuntimeError(
                "step() before reset(): the manager captures the first snapshot of each episode at "
                "reset. Fix: call mgr.reset(state) once before stepping."
            )
        mask = (
            None if reset_mask is None or known_empty(reset_mask) else self._to_mask(reset_mask, "reset_mask")
        )
        if mask is not None and mask is not reset_mask and known_empty(mask):
            mask = None  # integers that select nothing (a done vector of zeros): a plain step, like False
        for storage in self._stores.values():  # every class validates before anything is written
            storage.cls._check_state(state, storage.md)
        self.clock.tick()
        self._capture(state, STEP if mask is None else self._reset_context(mask, None, advancing=True))

    def _reset_context(
        self, mask: torch.Tensor, rows: torch.Tensor | None, advancing: bool
    ) -> CaptureContext:
        """The context of a capture that resets the envs in ``mask``; on the numpy executor it carries their
        indices, so the reset stages write those rows with numpy instead of masked torch ops over all."""
        index = np.flatnonzero(mask.numpy()) if self.executor_used == "numpy" else None
        return CaptureContext(mask, rows, advancing=advancing, reset_index=index)

    def _decide_threads(self) -> int:
        """The intra-op thread count :meth:`step` runs with; 0 leaves torch's global setting alone."""
        if self.device.type != "cpu" or self.num_threads == 0:
            return 0
        if self.num_threads is not None:
            return self.num_threads
        work = self.num_envs * sum(group.cols for group in self._groups.values())
        return 1 if work < MULTITHREAD_ELEMENTS else 0

    def capture_cuda_graph(self, state: Mapping[str, torch.Tensor]) -> CapturedStep:
        """CUDA graphs of :meth:`step` (one per ring-clock phase) for states shaped like ``state``; returns
        a callable ``step(state, reset_mask=None)`` equal to :meth:`step` bit for bit. See
        :mod:`sensorgym.core.accel`."""
        from .accel import CapturedStep

        return CapturedStep(self, state)

    def _check_state(self, state: Any) -> None:
        for storage in self._stores.values():
            storage.cls._check_state(state, storage.md)

    def _capture(self, state: Any, ctx: CaptureContext) -> None:
        """Run one capture of every class under the step's thread count (see ``num_threads``)."""
        # A reset must leave the envs it does not reset untouched, and a failed step (e.g.
        # nan_policy="raise") must not lose captured snapshots: both save the rows a capture writes.
        mask, advancing = ctx.reset_mask, ctx.advancing
        keep = None
        if not advancing or self.rollback.every_step:
            keep = [self.episode.steps]
            # the numpy executor saves and restores through numpy views (None: some buffer has none)
            arrays = None if self.episode.arrays is None else [self.episode.arrays[0]]
            for storage in self._stores.values():
                rows = storage.row_state()
                if mask is not None and self.rollback.every_step:
                    # resampling writes only the reset rows; their old values matter only if the
                    # capture can fail half-way (nan_policy="raise") and must be undone
                    rows += storage.parameter_tensors()
                keep += rows
                if arrays is not None:
                    views = [storage.md.numpy_view(t) for t in rows]
                    arrays = None if any(v is None for v in views) else arrays + views
            self.rollback.save(keep, arrays)
            rng_state = self.random.get_state()  # a failed capture must not consume random numbers
        threads = self._step_threads
        previous = torch.get_num_threads() if threads else 0
        if previous != threads:
            torch.set_num_threads(threads)
        # sensors measure: nothing they write is differentiable, and a state that requires grad (a
        # differentiable simulator's) must not make the in-place writes into the buffers fail
        grad = torch.is_grad_enabled()
        if grad:
            torch.set_grad_enabled(False)  # public API; as a call it switches the mode at once
        try:
            if advancing:
                self.episode.advance()
            if mask is not None:
                self.episode.restart(mask, ctx.reset_index)
            for storage in self._stores.values():
                if ctx is not STEP:  # STEP is what every md holds between captures
                    storage.md.context = ctx
                if mask is not None:
                    storage.resample(mask)
                    storage.cls._reset_envs(storage.md, mask)
            fill = self.random.fill_normal  # one generator: the C method itself (no Python frame per step)
            for group in self._groups.values():
                for draws in group.fills:
                    if fill is not None:
                        fill(draws)
                    else:
                        self.random.normal_(draws, ctx.rows, 1)
            for storage in self._stores.values():
                storage.capture(state, ctx)
            if not advancing:
                self.rollback.restore(keep, mask)
        except BaseException:
            if keep is not None:
                self.rollback.restore(keep, torch.zeros_like(self._all_rows))
                self.random.set_state(rng_state)
                for storage in self._stores.values():
                    storage.refresh_derived()
            elif advancing:
                self.episode.undo_advance()
            if advancing:
                self.clock.t -= 1
            raise
        finally:
            if ctx is not STEP:
                for storage in self._stores.values():
                    storage.md.context = STEP
            if grad:
                torch.set_grad_enabled(True)
            if previous != threads:
                torch.set_num_threads(previous)

    def _to_mask(self, envs_idx: Any, what: str) -> torch.Tensor:
        return self._all_rows if envs_idx is None else env_mask(envs_idx, self.num_envs, self.device, what)

    # -- reads -----------------------------------------------------------------------------------------
    def _require_built(self, what: str) -> None:
        if not self._built:
            raise RuntimeError(f"{what} before the manager was built. Fix: call mgr.reset(state) first.")

    def _read(self, sensor: Sensor, history_length: int | None, ground_truth: bool) -> Any:
        if not self._built:
            self._require_built("read()")
        storage: ClassStorage = sensor._storage
        n_max = storage.class_plan.sensors[sensor.index].history_length
        n = n_max if history_length is None else history_length
        if type(n) is not int:  # numpy and torch integers too
            n = as_int(n)
        if n is None or n < 0:
            raise ValueError(f"read(history_length={history_length!r}): expected an int >= 0.")
        if n > n_max:
            raise ValueError(
                f"read(history_length={n}) on sensor {sensor.name!r}: only {n_max} reads of history are "
                f"kept. Fix: set history_length={n} in its options, or read fewer."
            )
        branch = storage.gt if ground_truth else storage.measured
        if n == 0:
            return sensor._pack(branch.cache[:, sensor.return_slice], (self.num_envs,))
        return sensor._pack(branch.history.history(n, sensor.return_slice), (self.num_envs, n))

    def _read_age(self, sensor: Sensor) -> torch.Tensor:
        """``(B,)`` float32 seconds since the sample behind ``sensor.read()`` was taken: ``(t - s) * dt``
        with ``t`` the steps since the env's reset and ``s`` the episode step of that sample."""
        self._require_built("read_age()")
        storage: ClassStorage = sensor._storage
        steps = self.episode.steps
        shift = storage.current_shift(sensor.index)
        if storage.sampler is not None:
            taken = storage.sampler.sample_step(sensor.index, shift, self.clock.t)
        else:  # every snapshot is a sample; padding shows the reset sample (step 0)
            taken = (steps - shift).clamp_(min=0)
        return ((steps - taken).to(torch.float64) * self.dt).to(torch.float32)

    def read_sensors(self, ground_truth: bool = False) -> dict[type, torch.Tensor]:
        """``{SensorClass: (B, [H,] cols)}`` new tensors; ``H`` is the class's longest history."""
        self._require_built("read_sensors()")
        out = {}
        for cls, storage in self._stores.items():
            branch = storage.gt if ground_truth else storage.measured
            if storage.history_length:
                out[cls] = branch.history.history(storage.history_length)
            else:
                out[cls] = branch.cache.clone()
        return out

    def metadata(self, sensor_cls: type) -> SensorMetadata:
        self._require_built("metadata()")
        return self._stores[sensor_cls].md

    def storage(self, sensor_cls: type) -> ClassStorage:
        self._require_built("storage()")
        return self._stores[sensor_cls]

    # -- randomization and setters ---------------------------------------------------------------------
    def _read_randomization(self, sensor: Sensor) -> dict[str, torch.Tensor]:
        self._require_built("read_randomization()")
        storage: ClassStorage = sensor._storage
        out = storage.params.randomization(sensor)
        if storage.sampler is not None:
            out.update(storage.sampler.randomization(sensor.index))
        out.update({f: v for f, (v, _) in sensor._extra_randomization().items()})
        return out

    def randomization_names(self) -> list[str]:
        """Column names of :meth:`read_randomization`: ``"<sensor>.<field>"`` for delay and jitter (one
        value per sensor), ``"<sensor>.<field>[<component>]"`` for the per-component options."""
        self._require_built("randomization_names()")
        names = []
        for s in self.sensors:
            for f, comps in s._storage.params.randomized_components(s).items():
                names += (
                    [f"{s.name}.{f}"] if f in ("delay", "jitter") else [f"{s.name}.{f}[{c}]" for c in comps]
                )
            sampler = s._storage.sampler
            if sampler is not None:
                names += [f"{s.name}.{f}" for f in sampler.rates.randomized.get(s.index, [])]
            for f, (_, comps) in s._extra_randomization().items():
                names += [f"{s.name}.{f}[{c}]" for c in comps]
        return names

    def read_randomization(self) -> torch.Tensor:
        """``(B, P)`` float32: every randomized option's current per-env value (for a critic)."""
        self._require_built("read_randomization()")
        parts = [v for s in self.sensors for v in s.read_randomization().values()]
        if not parts:
            return torch.zeros(self.num_envs, 0, device=self.device)
        return torch.cat(parts, dim=1)
