"""Checkpoints of an SB3 run through sensorgym: everything to continue training exactly.

:func:`save_checkpoint` writes the model, the ``VecNormalize`` statistics, the replay buffer (off-policy),
the sensor wrapper's state and the random states; :func:`load_checkpoint` restores them onto a freshly
built env of the same config, with the algorithm class the run was saved with. sensorgym's own files
(``sensors.pt``, ``state.pt``) hold only tensors and plain data and load with ``weights_only=True``; the
third-party files (:data:`CHECKPOINT_PICKLE_FILES`) are pickles: **only load checkpoints you trust**.
Importing this module needs no SB3; the functions do.

Example:
    >>> import tempfile, sensorgym as sg
    >>> from stable_baselines3 import PPO
    >>> from sensorgym.wrappers import make_sensor_vec
    >>> from sensorgym.integrations.sb3 import SB3VecEnv
    >>> from sensorgym.integrations.sb3_checkpoint import load_checkpoint, save_checkpoint
    >>> def env():
    ...     return SB3VecEnv(make_sensor_vec("Pendulum-v1", 2, {"angle": sg.StateSensorOptions(
    ...         key="obs", index=[0, 1], noise=0.05)}, autoreset_mode="SameStep", seed=0))
    >>> model = PPO("MultiInputPolicy", env(), n_steps=16, batch_size=16, seed=0).learn(32)
    >>> folder = tempfile.mkdtemp()
    >>> save_checkpoint(folder, model, model.get_env())
    >>> again, _ = load_checkpoint(folder, env())
    >>> type(again).__name__, again.num_timesteps
    ('PPO', 32)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "CHECKPOINT_PICKLE_FILES",
    "CHECKPOINT_SAFE_FILES",
    "from_plain",
    "load_checkpoint",
    "save_checkpoint",
    "to_plain",
]


def _stack(env: Any) -> list[Any]:
    """The env stack from the top down to the :class:`~sensorgym.wrappers.SensorObservation`, inclusive:
    SB3's ``VecEnvWrapper``s and ``SB3VecEnv`` (their ``venv``), then Gymnasium's vector wrappers (their
    ``env``), e.g. ``VecMonitor(VecNormalize(SB3VecEnv(RecordEpisodeStatistics(SensorObservation(...)))))``.
    One line naming the stack when it holds no sensor wrapper."""
    from gymnasium.vector import VectorWrapper

    from ..wrappers.vector import SensorObservation

    nodes, node = [], env
    while node is not None:
        nodes.append(node)
        if isinstance(node, SensorObservation):
            return nodes
        node = getattr(node, "venv", None) or (node.env if isinstance(node, VectorWrapper) else None)
    raise ValueError(
        f"the env stack {' -> '.join(type(n).__name__ for n in nodes)} holds no SensorObservation, whose "
        "state a checkpoint saves. Fix: pass the SB3VecEnv over a sensorgym SensorObservation (or a "
        "wrapper stack above one)."
    )


def _vec_normalize(nodes: list[Any]) -> Any:
    """The ``VecNormalize`` of the stack (its statistics are ``vecnormalize.pkl``), or None."""
    from stable_baselines3.common.vec_env import VecNormalize

    return next((n for n in nodes if isinstance(n, VecNormalize)), None)


def _is_adapter(node: Any) -> bool:
    """Whether ``node`` is the SB3 ``VecEnv`` over the Gymnasium stack (``SB3VecEnv``: an SB3 ``VecEnv``
    that wraps no other, stateless between steps), told by SB3's classes (importing the adapter's module
    from here would be an import circle: it imports this one)."""
    from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

    return isinstance(node, VecEnv) and not isinstance(node, VecEnvWrapper)


#: attributes of a wrapper that are not its state: the wrapped env, and SB3's monitor's open log writer
_NOT_STATE = ("env", "venv", "class_attributes", "results_writer")


def _wrapper_states(nodes: list[Any]) -> list[tuple[str, Any]]:
    """``(class name, state)`` of every wrapper between the top and the sensor wrapper (its own
    ``state_dict()`` when it has one, e.g. ``ActionLatency``; else its attributes, e.g.
    ``RecordEpisodeStatistics``' episode counters or ``VecMonitor``'s returns), without ``VecNormalize``
    (``vecnormalize.pkl``) and the adapter; a wrapper whose state does not pickle is refused in one line."""
    import copy
    import pickle

    vec_normalize = _vec_normalize(nodes)
    states = []
    for node in nodes[:-1]:
        if node is vec_normalize or _is_adapter(node):
            continue
        if callable(getattr(node, "state_dict", None)):
            state = node.state_dict()
        else:
            state = {k: copy.deepcopy(v) for k, v in vars(node).items() if k not in _NOT_STATE}
        try:
            pickle.dumps(state)
        except Exception as e:
            raise ValueError(
                f"cannot checkpoint the {type(node).__name__} of the env stack: its state does not pickle "
                f"({e}). Fix: put it inside the SensorObservation (whose snapshot holds the envs below it), "
                "or leave it out of a run that must resume."
            ) from e
        states.append((type(node).__qualname__, state))
    return states


def _load_wrapper_states(nodes: list[Any], saved: list[tuple[str, Any]], file: Path) -> None:
    """Put :func:`_wrapper_states` back into the same wrappers of a freshly built stack; a stack with other
    wrappers is refused, naming both, before anything changes."""
    vec_normalize = _vec_normalize(nodes)
    here = [n for n in nodes[:-1] if n is not vec_normalize and not _is_adapter(n)]
    names = [type(n).__qualname__ for n in here]
    if names != [name for name, _ in saved]:
        raise ValueError(
            f"{file}: the checkpoint's env stack has the wrappers {[name for name, _ in saved]} above the "
            f"sensors, this env {names}. Fix: build the env with the same wrappers, in the same order."
        )
    for node, (_, state) in zip(here, saved, strict=True):
        if callable(getattr(node, "load_state_dict", None)):
            node.load_state_dict(state)
        else:
            vars(node).update(state)


#: checkpoint files written by :func:`save_checkpoint`; the ``.pt`` files hold only tensors and plain data
CHECKPOINT_SAFE_FILES = ("sensors.pt", "state.pt")
#: third-party formats that unpickle (run code) when loaded: load them only from a checkpoint you trust
CHECKPOINT_PICKLE_FILES = ("model.zip", "vecnormalize.pkl", "replay_buffer.pkl", "envs.pkl", "wrappers.pkl")


def save_checkpoint(path: str | Path, model: Any, env: Any) -> None:
    """Everything to continue training exactly, in the folder ``path``.

    * ``sensors.pt``, ``state.pt``: sensorgym's own state (the sensor wrapper; the algorithm's class, its
      device, last observation, random states), tensors and plain data only: :func:`load_checkpoint`
      reads them with ``torch.load(weights_only=True)``, which runs no code from the file.
    * ``model.zip`` (SB3's format), ``vecnormalize.pkl`` (when normalizing), ``replay_buffer.pkl``
      (off-policy algorithms) and ``envs.pkl`` (a snapshot of the envs, :mod:`sensorgym.wrappers.checkpoint`)
      are pickles: loading them runs code they contain, so **load only checkpoints you trust**.

    Works for every SB3 algorithm (PPO, A2C, SAC, TD3, ...).
    """
    import pickle
    import random

    path = Path(path)
    nodes = _stack(env)
    wrappers = _wrapper_states(nodes)  # refused here, before anything is written, when one does not pickle
    path.mkdir(parents=True, exist_ok=True)
    model.save(path / "model.zip")
    vec_normalize = _vec_normalize(nodes)
    if vec_normalize is not None:
        vec_normalize.save(str(path / "vecnormalize.pkl"))
    if getattr(model, "replay_buffer", None) is not None:
        model.save_replay_buffer(path / "replay_buffer.pkl")
    sensors = dict(nodes[-1].state_dict(include_envs=True))
    (path / "envs.pkl").write_bytes(sensors.pop("envs"))
    torch.save(to_plain(sensors), path / "sensors.pt")
    (path / "wrappers.pkl").unlink(missing_ok=True)  # a folder reused from another stack
    if wrappers:
        (path / "wrappers.pkl").write_bytes(pickle.dumps(wrappers))
    cls = type(model)
    state = {
        "format": 2,
        "algorithm": f"{cls.__module__}:{cls.__qualname__}",
        "device": str(model.device),
        "last_obs": model._last_obs,
        "last_episode_starts": model._last_episode_starts,
        "last_original_obs": getattr(model, "_last_original_obs", None),
        "action_space_rng": model.action_space.np_random.bit_generator.state,
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
        "numpy_rng": np.random.get_state(),
        "python_rng": random.getstate(),
        "num_timesteps": model.num_timesteps,
        # VecNormalize does not pickle its running discounted returns (reward normalization state)
        "vecnormalize_returns": getattr(vec_normalize, "returns", None),
    }
    torch.save(to_plain(state), path / "state.pt")


def _load_plain(file: Path) -> Any:
    """A ``.pt`` file of tensors and plain data; anything else (e.g. a pickled object) is refused."""
    import pickle

    try:
        return from_plain(torch.load(file, weights_only=True, map_location="cpu"))
    except pickle.UnpicklingError as e:
        raise ValueError(
            f"{file}: refused. It holds more than tensors and plain data (a tampered file, or a checkpoint "
            "written by an older sensorgym), and loading it would run code stored in it. Fix: train again "
            "(or re-save the checkpoint with this version from a trusted copy)."
        ) from e


def _algorithm_class(name: str, given: Any) -> Any:
    import importlib

    from stable_baselines3.common.base_class import BaseAlgorithm

    if given is not None:
        saved = name.rsplit(":", 1)[-1]
        if given.__qualname__ != saved:
            raise ValueError(
                f"load_checkpoint(algorithm={given.__qualname__}): the checkpoint was saved by {saved}. "
                "Fix: pass the algorithm class it was trained with (or leave algorithm unset)."
            )
        return given
    module, _, qualname = name.partition(":")
    if module.split(".")[0] not in ("stable_baselines3", "sb3_contrib"):
        raise ValueError(
            f"the checkpoint was saved by {name}, which is not an algorithm of stable_baselines3 or "
            "sb3_contrib; sensorgym does not import modules named by a file. Fix: pass its class, "
            "load_checkpoint(path, env, algorithm=MyAlgorithm)."
        )
    cls = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    if not (isinstance(cls, type) and issubclass(cls, BaseAlgorithm)):
        raise ValueError(f"the checkpoint names {name}, which is not an SB3 algorithm class.")
    return cls


def load_checkpoint(
    path: str | Path,
    env: Any,
    tensorboard_log: str | None = None,
    *,
    device: Any = None,
    algorithm: Any = None,
) -> tuple[Any, Any]:
    """Restore :func:`save_checkpoint` onto a freshly built env of the same config: ``(model, env)``.

    The model is reloaded with the algorithm class it was saved with (PPO, A2C, SAC, TD3, ...; pass
    ``algorithm`` for a class outside stable_baselines3/sb3_contrib) on ``device`` (default: the device
    it was saved from, CPU when that one is not available here).

    Security: ``sensors.pt`` and ``state.pt`` are read with ``torch.load(weights_only=True)`` and a file
    holding anything but tensors and plain data is refused. ``model.zip``, ``vecnormalize.pkl``,
    ``replay_buffer.pkl`` and ``envs.pkl`` are pickle-based formats (SB3's, Gymnasium envs): loading them
    runs code they contain, so **only load checkpoints you trust**.
    """
    import pickle
    import random

    path = Path(path)
    sensors = _load_plain(path / "sensors.pt")
    state = _load_plain(path / "state.pt")
    if state.get("format") != 2 or "algorithm" not in state:
        raise ValueError(
            f"{path / 'state.pt'}: not a checkpoint of this sensorgym version (no algorithm recorded). "
            "Fix: train again to write a new checkpoint."
        )
    cls = _algorithm_class(state["algorithm"], algorithm)
    if device is None:
        device = state.get("device", "cpu")
        if str(device).startswith("cuda") and not torch.cuda.is_available():
            device = "cpu"
    nodes = _stack(env)
    vec_normalize = _vec_normalize(nodes)
    if (path / "vecnormalize.pkl").exists():
        if vec_normalize is None:
            raise ValueError(
                f"{path / 'vecnormalize.pkl'}: the checkpoint normalizes observations, this env has no "
                "VecNormalize. Fix: wrap the env in VecNormalize as the run did (its statistics are loaded)."
            )
        with open(path / "vecnormalize.pkl", "rb") as f:  # into the env's own VecNormalize, where it is
            saved = vars(pickle.load(f))
        vars(vec_normalize).update({k: v for k, v in saved.items() if k not in _NOT_STATE})
    wrappers = pickle.loads((path / "wrappers.pkl").read_bytes()) if (path / "wrappers.pkl").exists() else []
    _load_wrapper_states(nodes, wrappers, path / "wrappers.pkl")
    if (path / "envs.pkl").exists():
        sensors["envs"] = (path / "envs.pkl").read_bytes()
    nodes[-1].load_state_dict(sensors)
    model = cls.load(
        path / "model.zip", env=env, device=device, force_reset=False, tensorboard_log=tensorboard_log
    )
    if (path / "replay_buffer.pkl").exists() and hasattr(model, "load_replay_buffer"):
        model.load_replay_buffer(path / "replay_buffer.pkl")
    if state.get("vecnormalize_returns") is not None and vec_normalize is not None:
        vec_normalize.returns = np.array(state["vecnormalize_returns"], copy=True)
    model._last_obs = state["last_obs"]
    model._last_episode_starts = state["last_episode_starts"]
    if state.get("last_original_obs") is not None:
        model._last_original_obs = state["last_original_obs"]
    model.action_space.np_random.bit_generator.state = state["action_space_rng"]
    torch.set_rng_state(state["torch_rng"])
    cuda_rng = state.get("cuda_rng")
    if cuda_rng is not None and torch.cuda.is_available() and len(cuda_rng) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda_rng)
    np.random.set_state(state["numpy_rng"])
    random.setstate(state["python_rng"])
    return model, env


# -- checkpoint state as plain data (loadable with torch.load(weights_only=True)) -----------------------
_ND = "__ndarray__"


def to_plain(x: Any) -> Any:
    """``x`` with numpy arrays and scalars replaced by plain data (bytes + dtype + shape), so that
    ``torch.load(..., weights_only=True)`` restores it without unpickling any code; tensors, numbers,
    strings, bytes, ``None`` and dicts/lists/tuples of them are kept. :func:`from_plain` inverts it.

    Example:
        >>> import io, numpy as np, torch
        >>> state = {"rng": np.random.get_state(), "mask": np.array([True, False]), "n": np.int64(3)}
        >>> buf = io.BytesIO(); torch.save(to_plain(state), buf); _ = buf.seek(0)
        >>> back = from_plain(torch.load(buf, weights_only=True))
        >>> bool(np.array_equal(back["rng"][1], state["rng"][1])), back["mask"].dtype, type(back["n"])
        (True, dtype('bool'), <class 'numpy.int64'>)
    """
    if isinstance(x, (np.ndarray, np.generic)):
        arr = np.asarray(x)
        if arr.dtype.hasobject:
            raise TypeError(f"cannot store an object array (dtype {arr.dtype}) as plain checkpoint data.")
        return {
            _ND: np.ascontiguousarray(arr).tobytes(),
            "dtype": arr.dtype.str,
            "shape": list(arr.shape),
            "scalar": isinstance(x, np.generic),
        }
    if isinstance(x, Mapping):
        return {k: to_plain(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(to_plain(v) for v in x)
    if isinstance(x, list):
        return [to_plain(v) for v in x]
    if x is None or torch.is_tensor(x) or isinstance(x, (bool, int, float, str, bytes)):
        return x
    raise TypeError(
        f"cannot store a {type(x).__name__} as plain checkpoint data (tensors, numpy arrays, numbers, "
        "strings, bytes and containers of them only)."
    )


def from_plain(x: Any) -> Any:
    """The inverse of :func:`to_plain`."""
    if isinstance(x, Mapping):
        if _ND in x:
            arr = np.frombuffer(x[_ND], dtype=np.dtype(x["dtype"])).reshape(x["shape"]).copy()
            return arr[()] if x.get("scalar") else arr
        return {k: from_plain(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(from_plain(v) for v in x)
    if isinstance(x, list):
        return [from_plain(v) for v in x]
    return x
