"""Snapshots of the simulation behind a sensor wrapper, so a run can stop mid-episode and resume in a
fresh process with every sub-env, sensor and random stream exactly where it was.

* ``SyncVectorEnv``: the whole vector env is pickled (cloudpickle: sub-env factories are often lambdas);
  MuJoCo sub-envs also keep their full integration state (``mj_getState``), which pickling alone does not
  restore exactly (e.g. the solver's warm start).
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

import pickle
from typing import Any

import numpy as np

__all__ = ["restore_vector_env", "snapshot_vector_env"]


def _mujoco_states(venv: Any) -> list[np.ndarray | None]:
    states: list[np.ndarray | None] = []
    for env in getattr(venv, "envs", []):
        data = getattr(env.unwrapped, "data", None)
        model = getattr(env.unwrapped, "model", None)
        if data is None or model is None or not hasattr(data, "qacc_warmstart"):
            states.append(None)
            continue
        import mujoco

        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        state = np.empty(mujoco.mj_stateSize(model, spec))
        mujoco.mj_getState(model, data, state, spec)
        states.append(state)
    return states


def snapshot_vector_env(venv: Any) -> bytes:
    """Bytes that :func:`restore_vector_env` turns back into an identical, independent vector env."""
    import cloudpickle
    from gymnasium.vector import AsyncVectorEnv

    if isinstance(venv, AsyncVectorEnv):
        raise ValueError(
            "cannot snapshot an AsyncVectorEnv: its sub-envs live in worker processes. Fix: checkpoint "
            "with vectorization='sync' (or a natively batched env with state_dict()), or save only the "
            "sensor state (state_dict(include_envs=False)) and reset the envs on resume."
        )
    return pickle.dumps({"env": cloudpickle.dumps(venv), "mujoco": _mujoco_states(venv)})


def restore_vector_env(blob: bytes) -> Any:
    snap = pickle.loads(blob)
    venv = pickle.loads(snap["env"])
    for env, state in zip(getattr(venv, "envs", []), snap.get("mujoco", []), strict=False):
        if state is not None:
            import mujoco

            base = env.unwrapped
            mujoco.mj_setState(base.model, base.data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
    return venv
