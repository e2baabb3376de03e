"""Gymnasium and RL-library integration.

* :class:`SensorObservation`: a vector wrapper for any ``VectorEnv`` (Sync, Async, natively batched).
* :class:`SingleEnvSensorObservation`: the same for one ``gym.Env`` (passes the env checkers).
* :class:`ActionLatency`: delayed (and jittered) actions for any ``VectorEnv``; the actuator half.
* :class:`SimStateExtractor` and :func:`make_sensor_vec`: simulator state computed inside sub-envs.
* ``sensorgym.integrations.sb3``: a Stable-Baselines3 ``VecEnv`` adapter and ``AsymmetricActorCriticPolicy``.
* ``sensorgym.integrations.rsl_rl``, ``.skrl``, ``.rl_games``: critic-input adapters.
"""

from .extract import SimStateExtractor
from .latency import ActionLatency
from .make import make_sensor_vec
from .single import SingleEnvSensorObservation
from .vector import SensorObservation

__all__ = [
    "ActionLatency",
    "SensorObservation",
    "SimStateExtractor",
    "SingleEnvSensorObservation",
    "make_sensor_vec",
]
