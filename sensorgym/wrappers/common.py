"""Pieces shared by the vector and the single-env wrappers: their common constructor
(:func:`init_sensor_wrapper`), options checking, dt inference, the template state used to build the
manager before the first reset, and info cleaning."""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from ..core.manager import SensorManager
from ..core.options import SensorOptions, did_you_mean
from ..core.sensor import Sensor
from ..core.values import as_real
from ..sensors.state import StateSensorOptions
from .layout import ObservationLayout
from .spaces import template_entries
from .state_mapping import EXTRACTOR_KEY, LAYOUT_KEY

__all__ = [
    "ExtractionPlan",
    "autoreset_mode_of",
    "check_checkpoint_options",
    "check_sensors",
    "checkpoint_options",
    "clean_info",
    "constructor_arguments",
    "env_control_step",
    "extract_state",
    "infer_dt",
    "init_sensor_wrapper",
    "template_state",
]


def init_sensor_wrapper(
    wrapper: Any,
    env: Any,
    num_envs: int,
    env_obs_space: gym.Space,
    arguments: Mapping[str, Any],
    device: str | Any,
) -> dict[str, SensorOptions]:
    """The constructor both sensor wrappers share (``SensorObservation`` and
    ``SingleEnvSensorObservation``, whose keyword arguments are the same).

    ``arguments`` are the wrapper's constructor arguments except ``env`` (``sensors``, ``dt``, ``device``,
    ``seed``, ``policy``, ``critic``, ``critic_env_obs``, ``critic_randomization``, ``per_env_rng``,
    ``policy_age``, ``critic_age``, ``executor``), recorded as given (``gym.utils.RecordConstructorArgs``);
    ``device`` is where the manager lives (``arguments["device"]`` or the wrapper's own default). Sets
    ``wrapper.dt``,
    ``.manager`` (built), ``.sensors`` (name -> Sensor) and ``.layout``; returns the checked sensor options.
    """
    gym.utils.RecordConstructorArgs.__init__(wrapper, **arguments)
    sensors, policy, critic = check_sensors(arguments["sensors"], arguments["policy"], arguments["critic"])
    wrapper.dt = infer_dt(env, arguments["dt"])
    manager = SensorManager(
        num_envs,
        wrapper.dt,
        device=device,
        seed=arguments["seed"],
        per_env_rng=arguments["per_env_rng"],
        executor=arguments.get("executor", "auto"),
    )
    wrapper.manager = manager
    wrapper.sensors = {name: manager.add_sensor(opts, name=name) for name, opts in sensors.items()}
    manager.build(template_state(wrapper.sensors, env_obs_space, num_envs))
    wrapper.layout = ObservationLayout(
        manager,
        wrapper.sensors,
        policy,
        critic,
        env_obs_space,
        include_env_obs=arguments["critic_env_obs"],
        include_randomization=arguments["critic_randomization"],
        policy_age=arguments["policy_age"],
        critic_age=arguments["critic_age"],
    )
    return sensors


#: constructor arguments of a sensor wrapper that a checkpoint may differ in: the checkpoint's random state
#: replaces the seed's, the executor gives the same bits, and the sensors are checked by the manager
_FREE_ARGUMENTS = frozenset({"seed", "executor", "sensors"})


def checkpoint_options(wrapper: Any) -> dict[str, str]:
    """A sensor wrapper's options as a checkpoint records them (each an exact ``repr``), resolved as
    the wrapper uses them (``policy=None`` is every sensor, ``dt`` the inferred step, ``device`` its
    type): everything that changes what the wrapper computes or returns, except what the manager checks
    itself (the sensors) and what a checkpoint replaces (the seed) or cannot change (the executor)."""
    arguments = wrapper._saved_kwargs  # gym.utils.RecordConstructorArgs
    names = list(arguments["sensors"])
    out = {}
    for name, value in arguments.items():
        if name in _FREE_ARGUMENTS:
            continue
        if name in ("policy", "critic") and value is None:
            value = names
        elif name == "dt":
            value = wrapper.dt
        elif name == "device":
            value = wrapper.manager.device.type  # cuda:0 and cuda:1 hold the same generator state
        if isinstance(value, (list, tuple)):
            value = list(value)
        out[name] = repr(value)
    return out


def check_checkpoint_options(who: str, saved: Mapping[str, str] | None, mine: Mapping[str, str]) -> None:
    """Refuse a checkpoint saved with other options (``saved`` None: a checkpoint from before the options
    were recorded, not checked)."""
    if saved is None:
        return
    for name in sorted(set(saved) | set(mine)):
        theirs, value = saved.get(name, "<absent>"), mine.get(name, "<absent>")
        if theirs != value:
            raise ValueError(
                f"{who}.load_state_dict: option {name!r} differs: the checkpoint was saved with "
                f"{name}={theirs}, this wrapper has {name}={value}. Fix: build the wrapper with the "
                "options of the one that saved the checkpoint."
            )


def constructor_arguments(local_names: Mapping[str, Any]) -> dict[str, Any]:
    """A wrapper constructor's ``locals()`` at its first line, without ``self`` and ``env``."""
    return {k: v for k, v in local_names.items() if k not in ("self", "env", "__class__")}


def check_sensors(
    sensors: Any, policy: Sequence[str] | None, critic: Sequence[str] | None
) -> tuple[dict[str, SensorOptions], list[str], list[str]]:
    if not isinstance(sensors, Mapping) or not sensors:
        raise TypeError(
            f"sensors={sensors!r}: expected a non-empty mapping of name -> options. Fix: pass e.g. "
            "sensors={'angle': sg.StateSensorOptions(key='obs', index=[0, 1], delay=0.04)}."
        )
    for name, opts in sensors.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"sensors: sensor names must be non-empty strings, got {name!r}.")
        if not isinstance(opts, SensorOptions):
            raise TypeError(
                f"sensors[{name!r}]={opts!r}: expected a SensorOptions instance. Fix: pass e.g. "
                "sg.StateSensorOptions(key='obs')."
            )
    names = list(sensors)
    policy = names if policy is None else list(policy)
    critic = names if critic is None else list(critic)
    for what, chosen in (("policy", policy), ("critic", critic)):
        unknown = [n for n in chosen if n not in sensors]
        if unknown:
            raise ValueError(f"{what}={chosen!r}: unknown sensor names {unknown}; known: {names}.")
    if not policy:
        raise ValueError("policy=[]: the policy observation needs at least one sensor.")
    return dict(sensors), policy, critic


def infer_dt(env: Any, dt: float | None) -> float:
    """The control step: ``dt`` of the (sub-)envs, or ``metadata["dt"]``; or ``dt`` when given, which must
    then agree with the env's own step when the env gives one (every delay, period and latency is converted
    with it: a contradicting ``dt`` would silently give other delays in seconds than asked for)."""
    own = env_control_step(env)
    if dt is None:
        if own is None:
            raise ValueError(
                "dt: cannot infer the control step from the env (no `dt` attribute on the env or its "
                "sub-envs, no metadata['dt']). Fix: pass dt=<seconds per step>, e.g. dt=0.05."
            )
        return own
    step = as_real(dt)
    if step is None or not math.isfinite(step) or step <= 0:
        raise ValueError(f"dt={dt!r}: the control step in seconds must be > 0. Fix: pass e.g. dt=0.05.")
    if own is not None and not math.isclose(step, own, rel_tol=1e-6, abs_tol=0.0):  # float32 steps
        raise ValueError(
            f"dt={dt!r} contradicts the env's own control step, {own:g} s (its `dt`, e.g. a MuJoCo env's "
            f"frame_skip x model timestep): a delay of 0.1 s would become {round(0.1 / step):d} steps = "
            f"{round(0.1 / step) * own:g} s. Fix: leave dt out (the env's own is used), or change the env's "
            "step (e.g. its frame_skip) instead."
        )
    return step


def env_control_step(env: Any) -> float | None:
    """The control step (s) ``env`` gives itself: ``dt`` of the env or its sub-envs (all equal), else
    ``metadata["dt"]``; None when it gives none (e.g. CartPole)."""
    candidates = [step for layer in _layers(env) if (step := _own_dt(layer)) is not None]
    base = getattr(env, "unwrapped", env)
    probes = [lambda: base.dt]
    probes.append(lambda: _all_equal(sub_env_attr(base, "dt")))  # Sync/Async: ask the sub-envs
    if hasattr(env, "get_wrapper_attr"):
        probes.append(lambda: env.get_wrapper_attr("dt"))
    for probe in probes:
        with contextlib.suppress(Exception):  # any failure just means "not here"
            candidates.append(probe())
    meta = getattr(env, "metadata", {}) or {}
    if not candidates and "dt" in meta:
        candidates.append(meta["dt"])
    for c in candidates:
        if (step := as_real(c)) is not None and math.isfinite(step) and step > 0:
            return step
    return None


def _layers(env: Any) -> list[Any]:
    """``env`` and every wrapper below it (``.env``), outermost first."""
    layers = [env]
    while (inner := getattr(layers[-1], "env", None)) is not None and len(layers) < 256:
        layers.append(inner)
    return layers


def _own_dt(layer: Any) -> Any:
    """The ``dt`` a wrapper layer itself holds (an instance attribute or a property of its class, as every
    sensorgym wrapper has once built), not one reached through attribute forwarding: a Gymnasium
    ``VectorWrapper`` forwards nothing, so a CartPole in ``ActionLatency(dt=0.02)`` is found here."""
    if "dt" in getattr(layer, "__dict__", {}) or isinstance(getattr(type(layer), "dt", None), property):
        with contextlib.suppress(Exception):
            return layer.dt
    return None


def sub_env_attr(base: Any, name: str) -> list[Any]:
    """Each sub-env's attribute ``name`` through the vector env's ``get_attr``, asking first whether every
    sub-env has it: a sub-env that raises inside an ``AsyncVectorEnv`` worker gets that worker shut down by
    Gymnasium (the next reset dies with ``'NoneType' object has no attribute 'send'``), so a probe must
    never make one raise. Raises ``AttributeError`` here, in this process, when any sub-env lacks it."""
    if not hasattr(base, "get_attr"):
        raise AttributeError(f"{type(base).__name__} has no sub-envs to ask for {name!r}")
    if not all(base.call("has_wrapper_attr", name)):  # gymnasium.Env.has_wrapper_attr never raises
        raise AttributeError(f"a sub-env of {type(base).__name__} has no attribute {name!r}")
    return list(base.get_attr(name))


def _all_equal(values: Sequence[Any]) -> Any:
    if len(set(values)) != 1:
        raise ValueError("sub-envs disagree")
    return values[0]


def template_state(sensors: Mapping[str, Sensor], obs_space: gym.Space, num_envs: int) -> dict:
    """Zeros shaped like the state the sensors will read, to build the manager before any reset."""
    state: dict[str, np.ndarray] = template_entries(obs_space, num_envs)
    observed = set(state)
    # per key: the exact shape an index-less sensor gives, else the narrowest shape every index fits in
    # (several sensors may read one info entry, some through an index and some whole)
    exact: dict[str, tuple[int, ...]] = {}
    widest: dict[str, tuple[int, ...]] = {}
    for name, sensor in sensors.items():
        options = sensor.options
        if not isinstance(options, StateSensorOptions) or options.key in observed:
            continue
        if options.shape is None:
            hint = did_you_mean(options.key, sorted(observed))
            raise ValueError(
                f"sensor {name!r} reads state[{options.key!r}], which is not part of the observation "
                f"(keys {sorted(observed)}), and its shape is unknown before the first reset. Fix: {hint}"
                f"{'or, ' if hint else ''}if it is an info entry, give its shape, e.g. "
                f"{type(options).__name__}(key={options.key!r}, shape=(3,), ...)."
            )
        if options.index is None:
            exact.setdefault(options.key, tuple(options.shape))
            continue
        # wide enough for every index, negative ones counting from the end
        last = max(max(i + 1 if i >= 0 else -i for i in options.index), 1)
        if last > widest.get(options.key, (0,))[-1]:
            widest[options.key] = (*options.shape[:-1], last)
    for key, shape in {**widest, **exact}.items():
        state[key] = np.zeros((num_envs, *shape), np.float32)
    return state


class ExtractionPlan:
    """What to measure inside one (sub-)env for a set of sensors, grouped by class once (this runs
    every step in every sub-env).

    :meth:`packed` gives the flat array that travels to the vector wrapper: when every class describes its
    readings in the env's model as signed sums of ``MjData`` entries (``_gather_terms``, e.g. the Ant's
    native IMU and foot switches and its encoders), in one :class:`~sensorgym.sensors.mujoco.gather.
    GatherProgram` built once per model, else by packing :meth:`__call__`'s per-class measurements.
    """

    def __init__(self, sensors: Mapping[str, SensorOptions]) -> None:
        from ..core.sensor import _overrides

        by_class: dict[type, list[SensorOptions]] = {}
        for opts in sensors.values():
            cls = Sensor.registered_class(type(opts))
            if _overrides(cls, "_extract_state"):
                by_class.setdefault(cls, []).append(opts)
        self.groups = list(by_class.items())
        # bring the simulator's derived state up to date once, whatever number of classes need it
        self.prepares = list({getattr(cls, "_prepare_extraction", None) for cls in by_class} - {None})
        self._program: tuple[Any, Any] = (None, None)  # (model, GatherProgram or None) of the last env

    def packed(self, env: gym.Env) -> np.ndarray:
        """``pack(self(env))``, computed in one gather where the classes allow (see the class docstring)."""
        base = env.unwrapped
        program = self._program_for(base)
        if program is None:
            return self.pack(self(env))
        for prepare in self.prepares:
            prepare(base)
        return program(base.data)

    def packed_with_layout(self, env: gym.Env) -> tuple[np.ndarray, tuple]:
        """``(packed(env), its layout)`` (see :meth:`layout`; sent once per reset, it never changes)."""
        program = self._program_for(env.unwrapped)
        if program is None:
            values = self(env)
            return self.pack(values), self.layout(values)
        return self.packed(env), program.layout

    def _program_for(self, base: Any) -> Any:
        """The gather of ``base``'s model (built once per model), or None."""
        model, program = self._program
        if model is not getattr(base, "model", None):
            model, program = self._program = (getattr(base, "model", None), self._gather_program(base))
        return program

    def _gather_program(self, base: Any) -> Any:
        """A :class:`~sensorgym.sensors.mujoco.gather.GatherProgram` of every class's terms, or None."""
        if not self.groups or getattr(base, "data", None) is None:
            return None
        terms: list = []
        seen: set[str] = set()
        for cls, opts in self.groups:
            gather = getattr(cls, "_gather_terms", None)
            found = gather(base, opts) if gather is not None and _gathers_itself(cls) else None
            if found is None:
                return None
            for key, values in found:
                if key not in seen:  # equal options share a state key: measured once, like __call__
                    seen.add(key)
                    terms.append((key, values))
        from ..sensors.mujoco.gather import GatherProgram

        return GatherProgram(terms)

    def __call__(self, env: gym.Env) -> dict[str, np.ndarray]:
        base = env.unwrapped  # resolved once: each wrapper layer costs a little on every access
        for prepare in self.prepares:
            prepare(base)
        out: dict[str, np.ndarray] = {}
        for cls, opts in self.groups:
            out.update(cls._extract_state(base, opts))
        return out

    @staticmethod
    def pack(values: Mapping[str, Any]) -> np.ndarray:
        """One flat float32 array (see :meth:`layout`)."""
        if not values:
            return np.zeros(0, np.float32)
        return np.concatenate(list(values.values()), axis=None, dtype=np.float32)

    @staticmethod
    def layout(values: Mapping[str, Any]) -> tuple:
        """``((state key, shape), ...)`` of :meth:`pack`'s output."""
        return tuple((k, np.shape(v)) for k, v in values.items())


def _gathers_itself(cls: type) -> bool:
    """Whether ``cls``'s terms describe its own measurement: a subclass that measures differently
    (overrides ``_extract_state`` or ``_measure`` below the class that defines ``_gather_terms``) must not
    inherit its parent's terms."""

    def owner(name: str) -> type | None:
        return next((c for c in cls.__mro__ if name in c.__dict__), None)

    terms = owner("_gather_terms")
    return terms is not None and all(
        (o := owner(name)) is None or issubclass(terms, o) for name in ("_extract_state", "_measure")
    )


def extract_state(env: gym.Env, sensors: Mapping[str, SensorOptions]) -> dict[str, np.ndarray]:
    """Run every sensor class's ``_extract_state`` on a single env (inside a sub-env or worker)."""
    return ExtractionPlan(sensors)(env)


def needs_extraction(sensors: Mapping[str, SensorOptions]) -> bool:
    from ..core.sensor import _overrides

    return any(_overrides(Sensor.registered_class(type(o)), "_extract_state") for o in sensors.values())


_HIDDEN = frozenset({EXTRACTOR_KEY, "_" + EXTRACTOR_KEY, LAYOUT_KEY, "_" + LAYOUT_KEY})


def clean_info(info: Mapping) -> dict:
    """A shallow copy of ``info`` without the extractor's raw state (also inside ``final_info``)."""
    out = {k: v for k, v in info.items() if k not in _HIDDEN}
    if isinstance(out.get("final_info"), Mapping):
        out["final_info"] = clean_info(out["final_info"])
    return out


def autoreset_mode_of(env: Any) -> AutoresetMode:
    """The vector env's declared ``metadata["autoreset_mode"]``; NEXT_STEP (Gymnasium's default), with a
    warning, when it declares none."""
    mode = env.metadata.get("autoreset_mode")
    if mode is None:
        warnings.warn(
            f"{type(env.unwrapped).__name__} declares no metadata['autoreset_mode']; assuming "
            "NEXT_STEP (the gymnasium default). Set it on the env if it resets differently.",
            stacklevel=3,
        )
        mode = AutoresetMode.NEXT_STEP
    return AutoresetMode(mode)
