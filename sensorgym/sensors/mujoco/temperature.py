"""``TemperatureGridSensor``: a grid of thermometers over a MuJoCo body, heated by what presses on it.

The body's bounding box (from its collision geoms, or the ``extent`` option) is cut into
``grid_size = (gx, gy, gz)`` cells; the reading is the temperature of every cell, ``(B, gx, gy, gz)``
float32 in °C. The temperature field is *state*: it lives in the manager (``md.extra["field"]``),
starts at ``base_temperature`` at every reset, and each control step it evolves by

* contact heating: inside each sub-env the normal force of every contact touching the body (from one of
  ``source_bodies`` when given) is added to the cell that holds the contact point (in the body frame),
  which gives a per-cell force ``F`` (N).
  Without ``contact_temperature`` a cell warms at ``contact_heat * F`` °C/s (a heat source); with it,
  the contact is a conductance towards that temperature, ``contact_heat * F * (contact_temperature - T)``
  (``contact_heat`` in 1/(s·N): a firmer press conducts better);
* exchange with the air: ``-heat_transfer * (T - ambient_temperature)``;
* diffusion: ``diffusivity * laplacian(T)`` on the cell grid with insulated (zero-flux) faces, explicit
  and substepped so every substep satisfies ``h * diffusivity * sum(2 / dx_i**2) <= 0.9`` (stable and
  free of over- and undershoot).

The sources and the exchange are linear in ``T`` and held for the step, so they are integrated exactly
(an exponential per substep): a field relaxes as ``exp(-heat_transfer * t)`` whatever ``dt`` is.

The sensor's own imperfections follow the pipeline: ``fluctuation`` is fine-scale noise on the
measured field (a physics imperfection, independent per cell and step), which then passes through the
thermometer's thermal lag, a first-order RC filter of time constant ``time_constant`` on the measured
branch only; the ground truth is the field itself. Noise, bias, resolution, delay and history are the
standard options.

Example:
    >>> import numpy as np, sensorgym as sg
    >>> from sensorgym.sensors.mujoco.base import state_key
    >>> from sensorgym.sensors.mujoco.temperature import TemperatureGridOptions
    >>> o = TemperatureGridOptions(body="plate", grid_size=(2, 1, 1), extent=(0.1, 0.05, 0.01),
    ...                            contact_heat=0.5, heat_transfer=0.0, diffusivity=0.0)
    >>> mgr = sg.SensorManager(num_envs=1, dt=0.1)
    >>> plate = mgr.add_sensor(o)
    >>> press = {state_key(o): np.array([[10.0, 0.0]], np.float32)}  # 10 N on cell 0
    >>> mgr.reset(press)
    >>> mgr.step(press)
    >>> plate.read().shape, plate.read()[0, :, 0, 0].tolist()  # 20 °C + 0.5 * 10 N * 0.1 s
    (torch.Size([1, 2, 1, 1]), [20.5, 20.0])
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...core.options import option_error
from ...core.values import as_real
from .base import MujocoSensor, MujocoSensorOptions, cached, mj_handles, name_to_id, state_key

__all__ = ["TemperatureGridOptions", "TemperatureGridSensor", "body_box", "extent_key"]

#: largest ``h * diffusivity * sum(2 / dx**2)`` of one explicit diffusion substep (<= 1: monotone)
STABILITY = 0.9
#: substeps per control step above which the options probably describe something unintended
SUBSTEP_WARNING = 200


def extent_key(options: Any) -> str:
    """State key of the grid's half sizes ``(3,)`` measured from the model (when ``extent`` is None)."""
    return f"{state_key(options)}.extent"


def _finite(value: Any) -> bool:
    number = as_real(value)
    return number is not None and math.isfinite(number)


@dataclass(frozen=True, kw_only=True)
class TemperatureGridOptions(MujocoSensorOptions):
    """Options of :class:`TemperatureGridSensor`.

    Args:
        body: the body carrying the grid.
        grid_size: cells ``(gx, gy, gz)`` along the body's x, y, z axes; the reading has this shape.
        extent: half sizes (m) of the box the grid covers, centred on the body origin; None: the
            bounding box of the body's collision geoms (measured from the model inside each sub-env).
        base_temperature: the field at every reset (°C).
        ambient_temperature: the air the body exchanges heat with (°C).
        diffusivity: thermal diffusivity (m²/s), e.g. 9.7e-5 for aluminium, 4e-6 for steel.
        heat_transfer: rate of exchange with the air (1/s): the field relaxes to ambient as
            ``exp(-heat_transfer * t)``.
        contact_heat: without ``contact_temperature``: °C/s a cell warms per newton of normal contact
            force on it; with it: the contact conductance per newton (1/(s·N)).
        contact_temperature: temperature of what touches the body (°C), or None for a heat source.
        source_bodies: the bodies whose contacts heat (e.g. a heater); empty: every contact does. Without
            it a body resting on the floor heats itself by its weight in heat-source mode.
        fluctuation: std (°C) of a fine-scale fluctuation of the measured field, independent per cell
            and step; it goes through the thermal lag.
        time_constant: the thermometers' thermal lag (s): ``y += dt / tau * (x - y)`` on the measured
            reading (gain clamped to 1); 0: no lag.

    Example:
        >>> from sensorgym.sensors.mujoco.temperature import TemperatureGridOptions
        >>> TemperatureGridOptions(body="plate", grid_size=[4, 2, 1], time_constant=0.5).grid_size
        (4, 2, 1)
    """

    body: str
    grid_size: tuple[int, int, int] = (4, 4, 1)
    extent: tuple[float, float, float] | None = None
    base_temperature: float = 20.0
    ambient_temperature: float = 20.0
    diffusivity: float = 1e-4
    heat_transfer: float = 0.01
    contact_heat: float = 0.1
    contact_temperature: float | None = None
    source_bodies: tuple[str, ...] = ()
    fluctuation: float = 0.0
    time_constant: float = 0.0

    def _validate(self) -> None:
        owner = "TemperatureGridOptions"
        if not isinstance(self.body, str) or not self.body:
            raise TypeError(
                f"{owner}.body={self.body!r} is invalid: expected a body name. Fix: pass body='plate'."
            )
        g = self.grid_size
        if (
            isinstance(g, (str, bytes))
            or np.ndim(g) != 1
            or len(g) != 3
            or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > 0 for n in g)
        ):
            raise option_error(
                owner,
                "grid_size",
                g,
                "expected 3 positive ints (cells along x, y, z)",
                "pass grid_size=(4, 4, 1)",
            )
        object.__setattr__(self, "grid_size", tuple(int(n) for n in g))
        src = self.source_bodies
        if isinstance(src, str) or not all(isinstance(x, str) and x for x in src):
            raise option_error(
                owner,
                "source_bodies",
                src,
                "expected a list of body names",
                "pass source_bodies=('heater',) or () for every contact",
            )
        object.__setattr__(self, "source_bodies", tuple(src))
        if self.extent is not None:
            e = self.extent
            if np.ndim(e) != 1 or len(e) != 3 or not all(_finite(x) and float(x) > 0 for x in e):
                raise option_error(
                    owner,
                    "extent",
                    e,
                    "expected 3 positive half sizes in metres",
                    "pass extent=(0.2, 0.1, 0.01) or None to use the body's geoms",
                )
            object.__setattr__(self, "extent", tuple(float(x) for x in e))
        for name in ("base_temperature", "ambient_temperature"):
            self._number(name, non_negative=False)
        for name in ("diffusivity", "heat_transfer", "contact_heat", "fluctuation", "time_constant"):
            self._number(name, non_negative=True)
        if self.contact_temperature is not None:
            self._number("contact_temperature", non_negative=False)
        super()._validate()

    def _number(self, name: str, non_negative: bool) -> None:
        v = getattr(self, name)
        if not _finite(v):
            raise option_error(
                "TemperatureGridOptions",
                name,
                v,
                "expected a finite number (distributions are not supported for this option)",
                f"pass e.g. {name}={float(getattr(type(self), name, 0.0) or 0.0)!r}",
            )
        if non_negative and v < 0:
            raise option_error(
                "TemperatureGridOptions", name, v, f"{name} must be >= 0", f"use {abs(float(v))!r} or 0.0"
            )
        object.__setattr__(self, name, float(v))

    @property
    def num_cells(self) -> int:
        return math.prod(self.grid_size)

    @property
    def diffuses(self) -> bool:
        """Whether heat moves between cells (a positive diffusivity and more than one cell)."""
        return self.diffusivity > 0 and self.num_cells > 1


# -- inside each sub-env ---------------------------------------------------------------------------------


def body_box(model: Any, body: int) -> tuple[np.ndarray, np.ndarray]:
    """``(centre, half sizes)`` in the body frame of the box around the body's collision geoms (all its
    geoms when none collides)."""
    geoms = np.flatnonzero(model.geom_bodyid == body)
    colliding = geoms[(model.geom_contype[geoms] != 0) | (model.geom_conaffinity[geoms] != 0)]
    geoms = colliding if colliding.size else geoms
    if geoms.size == 0:
        raise ValueError(
            f"TemperatureGridOptions.body: body {body} has no geoms to take a size from. Fix: give the "
            "grid's half sizes with extent=(x, y, z)."
        )
    import mujoco

    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
    corners = []
    for g in geoms:
        centre, half = model.geom_aabb[g, :3], model.geom_aabb[g, 3:]
        rot = np.empty(9)
        mujoco.mju_quat2Mat(rot, model.geom_quat[g])
        local = centre + signs * half  # (8, 3) in the geom frame
        corners.append(local @ rot.reshape(3, 3).T + model.geom_pos[g])
    pts = np.concatenate(corners)
    lo, hi = pts.min(0), pts.max(0)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(hi > lo)):
        raise ValueError(
            f"TemperatureGridOptions.body: the geoms of body {body} have no finite, non-flat bounding box "
            f"({lo} .. {hi}), e.g. a plane. Fix: give the grid's half sizes with extent=(x, y, z)."
        )
    return (lo + hi) / 2, (hi - lo) / 2


@dataclass(frozen=True)
class _BodyGrid:
    body: int
    mine: np.ndarray  # (ngeom,) bool: geom belongs to the body
    heats: np.ndarray  # (ngeom,) bool: a contact with this geom heats the body
    lo: np.ndarray  # (3,) body-frame corner of the grid
    inv_cell: np.ndarray  # (3,) 1 / cell size
    top: np.ndarray  # (3,) last cell index per axis
    strides: np.ndarray  # (3,) flat index = cell index @ strides (C order of grid_size)
    extent: np.ndarray  # (3,) float32 half sizes


def _body_grid(model: Any, o: TemperatureGridOptions) -> _BodyGrid:
    import mujoco

    def build() -> _BodyGrid:
        body = name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, o.body, "TemperatureGridOptions.body")
        heats = np.ones(model.ngeom, dtype=bool)
        if o.source_bodies:
            ids = [
                name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, b, "TemperatureGridOptions.source_bodies")
                for b in o.source_bodies
            ]
            heats = np.isin(model.geom_bodyid, ids)
        if o.extent is None:
            centre, half = body_box(model, body)
        else:
            centre, half = np.zeros(3), np.asarray(o.extent, dtype=float)
        n = np.asarray(o.grid_size)
        _, gy, gz = o.grid_size
        return _BodyGrid(
            body=body,
            mine=model.geom_bodyid == body,
            heats=heats,
            lo=centre - half,
            inv_cell=n / (2 * half),
            top=n - 1,
            strides=np.array([gy * gz, gz, 1]),
            extent=half.astype(np.float32),
        )

    return cached(model, ("temperature_grid", o), build)


# -- manager side ----------------------------------------------------------------------------------------


class _Axis:
    """One grid axis of the explicit Laplacian: views of the field and the Laplacian buffer, and the
    flux buffer, made once so that a substep allocates nothing."""

    def __init__(self, grid: torch.Tensor, lap: torch.Tensor, dim: int, coef: float) -> None:
        n = grid.shape[dim]
        self.upper, self.lower = grid.narrow(dim, 1, n - 1), grid.narrow(dim, 0, n - 1)
        self.lap_lower, self.lap_upper = lap.narrow(dim, 0, n - 1), lap.narrow(dim, 1, n - 1)
        self.flux = torch.zeros_like(self.lower)
        self.coef = coef  # diffusivity * h / dx**2


class _SensorPlan:
    """One sensor's slice of the class buffers and its diffusion substeps."""

    def __init__(self, plan: _ClassPlan, md: Any, s: Any, extent: np.ndarray | None) -> None:
        o: TemperatureGridOptions = s.options
        sl = s.cache_slice
        b = md.num_envs
        self.field = plan.field[:, sl]
        self.n_sub, self.axes, self.lap, self.grid = 1, [], None, None
        if o.diffuses:
            cell = 2 * np.asarray(extent, dtype=float) / np.asarray(o.grid_size)
            active = [i for i, n in enumerate(o.grid_size) if n > 1]
            ratio = md.dt * o.diffusivity * sum(2 / cell[i] ** 2 for i in active)
            self.n_sub = max(1, math.ceil(ratio / STABILITY - 1e-9))
            if self.n_sub > SUBSTEP_WARNING:
                warnings.warn(
                    f"sensor {s.name!r}: diffusivity={o.diffusivity:g} m²/s on cells of "
                    f"{np.round(cell, 6).tolist()} m needs {self.n_sub} explicit substeps per step of "
                    f"{md.dt:g} s. Fix: fewer cells (grid_size) or a smaller diffusivity.",
                    stacklevel=6,
                )
            h = md.dt / self.n_sub
            self.grid = self.field.view(b, *o.grid_size)
            self.lap = torch.zeros(b, *o.grid_size, dtype=plan.field.dtype, device=md.device)
            self.axes = [_Axis(self.grid, self.lap, i + 1, o.diffusivity * h / cell[i] ** 2) for i in active]
        self.h = md.dt / self.n_sub
        self.rate = plan.rate[:, sl]
        self.gain = plan.gain[:, sl]
        self.source = plan.drive[:, sl]
        self.change = plan.change[:, sl]

    def substeps(self) -> None:
        for _ in range(self.n_sub):
            if self.axes:
                self.lap.zero_()
                for ax in self.axes:
                    # flux form: what leaves a cell enters its neighbour, so diffusion conserves heat
                    torch.sub(ax.upper, ax.lower, out=ax.flux)
                    ax.lap_lower.add_(ax.flux, alpha=ax.coef)
                    ax.lap_upper.sub_(ax.flux, alpha=ax.coef)
                self.grid.add_(self.lap)
            # T += (s - lam T) (1 - e^{-lam h}) / lam: the exact solution over h written as an
            # increment, so that in float32 the steady state s / lam is a fixed point (the form
            # e^{-lam h} T + ... drifts by eps / (lam h) relative when lam h is small)
            torch.addcmul(self.source, self.rate, self.field, value=-1.0, out=self.change)
            self.field.addcmul_(self.change, self.gain)


class _ClassPlan:
    """Per-class constants and buffers of the thermal model (``md.constants["plan"]``)."""

    def __init__(self, md: Any) -> None:
        b, dev, f32 = md.num_envs, md.device, torch.float32
        sensors = md.sensors
        self.keys = [state_key(s.options) for s in sensors]
        self.heat_cols: list[torch.Tensor] = []

        def cols(value_of: Any) -> torch.Tensor:
            vals = [float(value_of(s.options)) for s in sensors for _ in range(s.options.num_cells)]
            return torch.tensor([vals], dtype=f32, device=dev)

        def conductance(o: TemperatureGridOptions) -> float:
            return o.contact_heat if o.contact_temperature is not None else 0.0

        def source(o: TemperatureGridOptions) -> float:  # °C/s per newton, either kind of contact
            if o.contact_temperature is not None:
                return o.contact_heat * o.contact_temperature
            return o.contact_heat

        self.base = cols(lambda o: o.base_temperature)
        self.k = cols(lambda o: o.heat_transfer)
        self.k_ambient = cols(lambda o: o.heat_transfer * o.ambient_temperature)
        self.conductance = cols(conductance)
        self.source = cols(source)
        if "field" not in md.extra:
            md.extra["field"] = self.base.expand(b, -1).clone()
        self.field = md.extra["field"]
        width = self.field.shape[1]
        self.heat = torch.zeros(b, width, dtype=f32, device=dev)
        self.heat_cols = [self.heat[:, s.cache_slice] for s in sensors]
        self.drive = torch.zeros(b, width, dtype=f32, device=dev)  # s: k T_amb + source F
        self.change = torch.zeros(b, width, dtype=f32, device=dev)
        # the relaxation rate depends on the force only with a contact temperature; otherwise the rate
        # and the gain are per-column constants
        self.variable_rate = any(s.options.contact_temperature is not None for s in sensors)
        rows = b if self.variable_rate else 1
        self.rate = self.k.expand(rows, -1).clone()  # lam: k + conductance F
        self.gain = torch.zeros(rows, width, dtype=f32, device=dev)  # (1 - e^{-lam h}) / lam
        if self.variable_rate:
            self.positive = torch.zeros(b, width, dtype=torch.bool, device=dev)
        fluct = [s.options.fluctuation for s in sensors]
        self.fluctuation = cols(lambda o: o.fluctuation) if any(fluct) else None
        self.draw = torch.zeros(b, width, dtype=f32, device=dev) if any(fluct) else None
        taus = [s.options.time_constant for s in sensors]
        self.rc_gain = None
        if any(md.dt < t for t in taus):  # a lag shorter than dt is a pass-through (gain clamped to 1)
            self.rc_gain = cols(lambda o: min(md.dt / o.time_constant, 1.0) if o.time_constant > 0 else 1.0)
        self.sensors: list[_SensorPlan] | None = None

    def build_steps(self, md: Any, state: Any) -> None:
        """The substep plan; needs the cell size, which may come from the model through the state."""
        self.sensors = []
        for s, key in zip(md.sensors, self.keys, strict=True):
            extent = None
            if s.options.diffuses:
                extent = s.options.extent if s.options.extent is not None else _state_extent(state, key, s)
            self.sensors.append(_SensorPlan(self, md, s, extent))
        h = [p.h for p, s in zip(self.sensors, md.sensors, strict=True) for _ in range(s.options.num_cells)]
        h64 = torch.tensor([h], dtype=torch.float64, device=md.device)
        self.h = h64.to(torch.float32)
        self.neg_h = (-h64).to(torch.float32)
        if not self.variable_rate:
            k = self.k.to(torch.float64)
            gain = torch.where(k > 0, -torch.expm1(-k * h64) / k.clamp(min=1e-300), h64)
            self.gain.copy_(gain)

    def advance(self) -> None:
        # dT/dt = s - lam T with s = k T_amb + source F and lam = k + conductance F, held over the step
        torch.mul(self.heat, self.source, out=self.drive)
        self.drive.add_(self.k_ambient)
        if self.variable_rate:
            torch.mul(self.heat, self.conductance, out=self.rate)
            self.rate.add_(self.k)
            torch.mul(self.rate, self.neg_h, out=self.gain)
            torch.expm1(self.gain, out=self.gain)
            self.gain.div_(self.rate).neg_()  # 0/0 where lam = 0, replaced by h just below
            torch.gt(self.rate, 0, out=self.positive)
            torch.where(self.positive, self.gain, self.h, out=self.gain)
        for p in self.sensors:
            p.substeps()


def _as_tensor(x: Any) -> torch.Tensor:
    return x if torch.is_tensor(x) else torch.from_numpy(np.asarray(x))


def _state_extent(state: Any, key: str, s: Any) -> np.ndarray:
    value = state[f"{key}.extent"]
    rows = value.detach().cpu().numpy() if torch.is_tensor(value) else np.asarray(value)
    rows = rows.reshape(-1, 3).astype(np.float64)
    if not np.allclose(rows, rows[0], rtol=1e-6, atol=0.0):
        raise ValueError(
            f"sensor {s.name!r}: the sub-envs report different sizes of body {s.options.body!r} "
            f"({rows.tolist()}); one manager runs one grid geometry. Fix: give extent=(x, y, z)."
        )
    return rows[0]


class TemperatureGridSensor(MujocoSensor):
    """Temperature of every cell of a grid over a body, ``(B, gx, gy, gz)`` float32 °C.

    The per-cell normal force is measured inside each sub-env; the field, its reset and its time
    stepping run in the manager, batched over envs. See the module docstring for the model.

    Example: in heat-source mode with air exchange, a pressed plate heads for ``Ta + c F / k``
        >>> import numpy as np, sensorgym as sg
        >>> from sensorgym.sensors.mujoco.base import state_key
        >>> from sensorgym.sensors.mujoco.temperature import TemperatureGridOptions
        >>> o = TemperatureGridOptions(body="plate", grid_size=(1, 1, 1), extent=(0.1, 0.1, 0.01),
        ...                            contact_heat=0.1, heat_transfer=0.5, time_constant=1.0)
        >>> mgr = sg.SensorManager(num_envs=2, dt=0.5)
        >>> plate = mgr.add_sensor(o)
        >>> press = {state_key(o): np.array([[10.0], [0.0]], np.float32)}
        >>> mgr.reset(press)
        >>> for _ in range(60):
        ...     mgr.step(press)
        >>> [round(x, 3) for x in plate.read_ground_truth().flatten().tolist()]  # 20 + 0.1 * 10 / 0.5
        [22.0, 20.0]
    """

    options_cls = TemperatureGridOptions

    def _get_return_format(self) -> tuple[int, ...]:
        return self.options.grid_size

    # -- inside each sub-env -------------------------------------------------------------------------------
    @classmethod
    def _measure(cls, model: Any, data: Any, o: TemperatureGridOptions) -> np.ndarray:
        """Per-cell normal contact force (N) on the body this step, flat in ``grid_size`` C order."""
        import mujoco

        grid = _body_grid(model, o)
        heat = np.zeros(o.num_cells, dtype=np.float32)
        n = int(data.ncon)
        if n == 0:
            return heat
        contacts = data.contact
        g1, g2 = contacts.geom1[:n], contacts.geom2[:n]
        mine1 = grid.mine[g1]
        other = np.where(mine1, g2, g1)
        # the body against something else that heats
        hits = np.flatnonzero((mine1 != grid.mine[g2]) & grid.heats[other])
        if hits.size == 0:
            return heat
        force, f6 = np.empty(hits.size), np.zeros(6)
        for j, i in enumerate(hits):  # mj_contactForce has no batched form; a body has few contacts
            mujoco.mj_contactForce(model, data, int(i), f6)
            force[j] = abs(f6[0])  # row 0 of the contact frame is the normal
        b = grid.body
        # body frame: R^T (p - x), written for row vectors
        local = (contacts.pos[hits] - data.xpos[b]) @ data.xmat[b].reshape(3, 3)
        # points on a face or slightly outside (penetration, margin) belong to the nearest cell
        cell = np.clip(np.floor((local - grid.lo) * grid.inv_cell).astype(np.int64), 0, grid.top)
        flat = cell @ grid.strides
        heat += np.bincount(flat, weights=force, minlength=o.num_cells).astype(np.float32)
        return heat

    @classmethod
    def _extract_state(cls, env: Any, options: list) -> dict[str, np.ndarray]:
        model, data = mj_handles(env)
        out = {}
        for o in options:
            out[state_key(o)] = cls._measure(model, data, o)
            if o.extent is None:
                out[extent_key(o)] = _body_grid(model, o).extent
        return out

    # -- manager side, batched over envs -------------------------------------------------------------------
    @classmethod
    def _plan(cls, md: Any) -> _ClassPlan:
        plan = md.constants.get("plan")
        if plan is None:
            plan = md.constants["plan"] = _ClassPlan(md)
        return plan

    @classmethod
    def _init_metadata(cls, md: Any) -> None:
        cls._plan(md)  # creates md.extra["field"], so a state_dict can be loaded before the first reset

    @classmethod
    def _check_state(cls, state: Any, md: Any) -> None:
        super()._check_state(state, md)
        for s in md.sensors:
            o = s.options
            if o.extent is None and o.diffuses and extent_key(o) not in state:
                raise ValueError(
                    f"sensor {s.name!r} ({cls.__name__}) has no body size in the state: with extent=None "
                    "the sub-env measures it from the model. Fix: build the env with make_sensor_vec(...) "
                    "(or SimStateExtractor), or give extent=(x, y, z) when feeding the heating input "
                    "directly."
                )

    @classmethod
    def _reset_envs(cls, md: Any, envs_mask: torch.Tensor) -> None:
        plan = cls._plan(md)
        torch.where(envs_mask[:, None], plan.base, plan.field, out=plan.field)

    @classmethod
    def _update_raw_data(cls, state: Any, md: Any, raw: torch.Tensor) -> None:
        plan = cls._plan(md)
        if md.advancing:  # a reset capture only reads the field: time does not pass
            if plan.sensors is None:
                plan.build_steps(md, state)
            for cols, key in zip(plan.heat_cols, plan.keys, strict=True):
                cols.copy_(_as_tensor(state[key]))
            plan.advance()
            if md.reset_mask is not None:
                # envs whose state starts a new episode in this step start from the base temperature
                torch.where(md.reset_mask[:, None], plan.base, plan.field, out=plan.field)
        raw.copy_(plan.field)

    @classmethod
    def _apply_physics_imperfections(cls, md: Any, data: torch.Tensor, timeline: Any) -> None:
        plan = cls._plan(md)
        if plan.draw is None:
            return
        md.random.normal_(plan.draw, md.capture_rows, 0)
        data.addcmul_(plan.draw, plan.fluctuation)

    @classmethod
    def _apply_transform(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> None:
        if not is_measured:
            return  # the ground truth is the field itself
        plan = cls._plan(md)
        if plan.rc_gain is None:
            return
        prev = timeline.at(1)  # last step's reading (the reset value itself right after a reset)
        data.sub_(prev).mul_(plan.rc_gain).add_(prev)
