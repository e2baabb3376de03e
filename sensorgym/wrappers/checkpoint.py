"""Snapshots of the simulation behind a sensor wrapper, so a run can stop mid-episode and resume in a
fresh process with every sub-env, sensor and random stream exactly where it was.

* ``SyncVectorEnv`` (also under other vector wrappers, e.g. ``ActionLatency``): the whole vector env is
  pickled (cloudpickle: sub-env factories are often lambdas). Some sub-envs pickle as their constructor
  arguments (Gymnasium's ``EzPickle``: every MuJoCo env), so unpickling builds a fresh env: each sub-env's
  ``np_random`` is therefore saved and put back, and a MuJoCo sub-env's whole ``MjData`` (integration
  state, solver warm start and the derived quantities such as body positions, which the next step's
  reward may read) is copied back into the rebuilt env, and so is its whole ``MjModel`` (a run may change
  the model, e.g. a per-env mass or damping randomization, which a model rebuilt from the XML would lose;
  :func:`copy_model_fields`). Any other ``EzPickle`` sub-env is refused: its
  state would silently come back as a fresh env's.
* natively batched torch envs: pickled the same way (tensors and ``torch.Generator`` pickle).
* ``AsyncVectorEnv``: the sub-envs live in worker processes; they cannot be snapshotted from the parent.

Example:
    >>> import gymnasium as gym, numpy as np
    >>> from sensorgym.wrappers.checkpoint import restore_vector_env, snapshot_vector_env
    >>> envs = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync")
    >>> _ = envs.reset(seed=0)
    >>> copy = restore_vector_env(snapshot_vector_env(envs))
    >>> a = np.ones((2, 1), np.float32)
    >>> bool(np.array_equal(envs.step(a)[0], copy.step(a)[0]))
    True
"""

from __future__ import annotations

import contextlib
import pickle
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = [
    "check_same_vector_env",
    "copy_model_fields",
    "picklable_env_fns",
    "restore_vector_env",
    "snapshot_vector_env",
    "vector_env_options",
]


def _base(venv: Any) -> Any:
    """The vector env under any vector wrappers (``ActionLatency`` does not forward ``envs``)."""
    return getattr(venv, "unwrapped", venv)


def _is_mujoco(env: Any) -> bool:
    data = getattr(env, "data", None)
    return data is not None and getattr(env, "model", None) is not None and hasattr(data, "qacc_warmstart")


def _sub_env_states(venv: Any) -> list[dict[str, Any]]:
    """Per sub-env: what unpickling an ``EzPickle`` env would lose (its random generator, its ``MjData``)."""
    from gymnasium.utils import EzPickle

    states = []
    for i, env in enumerate(getattr(_base(venv), "envs", [])):
        base = env.unwrapped
        mujoco_env = _is_mujoco(base)
        if isinstance(base, EzPickle) and not mujoco_env:
            raise ValueError(
                f"cannot snapshot sub-env {i} ({type(base).__name__}): it pickles as its constructor "
                "arguments (EzPickle), so its state would come back as a fresh env's. Fix: save only the "
                "sensor state (state_dict(include_envs=False)) and reset the envs on resume."
            )
        states.append(
            {
                "np_random": getattr(base, "_np_random", None),
                "np_random_seed": getattr(base, "_np_random_seed", None),
                "mjdata": base.data if mujoco_env else None,  # MjData pickles whole
                # and so does MjModel: a run may have changed it (per-env mass or damping randomization),
                # and the rebuilt env's model comes fresh from its XML
                "mjmodel": base.model if mujoco_env else None,
            }
        )
    return states


def copy_model_fields(dst: Any, src: Any, where: str = "MjModel") -> None:
    """Copy every field of the MuJoCo model ``src`` into ``dst`` in place (``dst`` keeps its identity, so
    whatever holds it, a renderer or a sensor plan, sees the copy): every array, every settable scalar, and
    the nested option, visual and statistic structs. A size that differs (another XML) is refused with a
    ``ValueError``."""
    for name in dir(src):
        if name.startswith("_"):
            continue
        value = getattr(src, name)
        if (
            name == "signature"
            or callable(value)
            or value is None
            or isinstance(value, (str, bytes, list, tuple, dict))
        ):
            continue  # names, paths and text: fixed by the XML; the signature (a hash of the structure) is
            # not kept by pickling
        if isinstance(value, np.ndarray):
            target = getattr(dst, name)
            if target.shape != value.shape:
                raise ValueError(
                    f"cannot restore {where}.{name}: shape {value.shape} in the snapshot, {target.shape} in "
                    "the rebuilt env (its model came from another XML). Fix: restore into the env that was "
                    "saved."
                )
            if target.flags.writeable:
                np.copyto(target, value)
        elif isinstance(value, (bool, int, float, np.number)):
            if getattr(dst, name) != value:
                try:
                    setattr(dst, name, value)
                except AttributeError:  # a size: fixed by the XML
                    raise ValueError(
                        f"cannot restore {where}.{name}={value!r}: the rebuilt env has "
                        f"{getattr(dst, name)!r} (its model came from another XML). Fix: restore into the "
                        "env that was saved."
                    ) from None
        else:  # a nested struct (opt, vis, stat, vis.global_, ...): a view of the model's memory
            copy_model_fields(getattr(dst, name), value, f"{where}.{name}")


@contextlib.contextmanager
def picklable_env_fns(venv: Any) -> Iterator[None]:
    """Within the block, a ``SyncVectorEnv`` whose ``env_fns`` is a generator (``gym.make_vec`` before
    Gymnasium 1.4 passes one, consumed when the sub-envs were made) holds an empty tuple instead, so the env
    pickles and deep-copies: the generator cannot, and, consumed, it holds nothing."""
    base = _base(venv)
    fns = getattr(base, "env_fns", None)
    if not isinstance(fns, types.GeneratorType):
        yield
        return
    base.env_fns = ()
    try:
        yield
    finally:
        base.env_fns = fns


def snapshot_vector_env(venv: Any) -> bytes:
    """Bytes that :func:`restore_vector_env` turns back into an identical, independent vector env."""
    import cloudpickle
    from gymnasium.vector import AsyncVectorEnv

    if isinstance(_base(venv), AsyncVectorEnv):
        raise ValueError(
            "cannot snapshot an AsyncVectorEnv: its sub-envs live in worker processes. Fix: checkpoint "
            "with vectorization='sync' (or a natively batched env with state_dict()), or save only the "
            "sensor state (state_dict(include_envs=False)) and reset the envs on resume."
        )
    with picklable_env_fns(venv):
        return pickle.dumps({"env": cloudpickle.dumps(venv), "sub_envs": _sub_env_states(venv)})


def restore_vector_env(blob: bytes) -> Any:
    snap = pickle.loads(blob)
    venv = pickle.loads(snap["env"])
    envs = getattr(_base(venv), "envs", [])
    for env, state in zip(envs, snap.get("sub_envs", []), strict=False):
        base = env.unwrapped
        if state["np_random"] is not None:
            base._np_random, base._np_random_seed = state["np_random"], state["np_random_seed"]
        if state.get("mjmodel") is not None:
            copy_model_fields(base.model, state["mjmodel"])
        if state["mjdata"] is not None:
            import mujoco

            mujoco.mj_copyData(base.data, base.model, state["mjdata"])
    for env, state in zip(envs, snap.get("mujoco", []), strict=False):  # snapshots before 2026-12-02
        if state is not None:
            import mujoco

            base = env.unwrapped
            mujoco.mj_setState(base.model, base.data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
    return venv


def vector_env_options(venv: Any) -> list[tuple[str, dict[str, str]]]:
    """``(class name, options)`` of every layer of a vector env, outermost first: each vector wrapper's
    options (its ``checkpoint_options()``, else its recorded constructor arguments but the seed, each an
    exact ``repr``), then the vector env itself with its env id."""
    from gymnasium.vector import VectorEnv

    layers = []
    env = venv
    while True:
        own = getattr(env, "checkpoint_options", None)
        if callable(own):
            options = own()
        else:
            saved = getattr(env, "_saved_kwargs", None) or {}  # gym.utils.RecordConstructorArgs
            options = {k: repr(v) for k, v in saved.items() if k not in ("env", "seed")}
        inner = getattr(env, "env", None)
        if not isinstance(inner, VectorEnv) or inner is env:
            spec = getattr(env, "spec", None)
            options = {**options, "id": repr(getattr(spec, "id", None))}
            layers.append((type(env).__name__, options))
            return layers
        layers.append((type(env).__name__, options))
        env = inner


def check_same_vector_env(restored: Any, current: Any) -> None:
    """Refuse a snapshot whose vector env (its wrappers, their options, its env id) differs from the one the
    checkpoint is loaded into, with a ``ValueError`` naming the wrapper and the option: the snapshot would
    silently replace it."""
    saved, mine = vector_env_options(restored), vector_env_options(current)
    fix = "Fix: build the vector env and its wrappers as the run that saved the checkpoint did."
    if [name for name, _ in saved] != [name for name, _ in mine]:
        raise ValueError(
            f"load_state_dict: the snapshot's vector env is {[n for n, _ in saved]} (outermost first), this "
            f"wrapper's {[n for n, _ in mine]}. {fix}"
        )
    for (name, theirs), (_, options) in zip(saved, mine, strict=True):
        for field in sorted(set(theirs) | set(options)):
            a, b = theirs.get(field, "<absent>"), options.get(field, "<absent>")
            if a != b:
                raise ValueError(
                    f"load_state_dict: {name} option {field!r} differs: the snapshot has {field}={a}, this "
                    f"wrapper's env {field}={b}. {fix}"
                )
