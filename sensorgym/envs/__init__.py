"""Reference environments, registered with Gymnasium under ``sensorgym/...``.

* ``sensorgym/BatchedPendulum-v0``: :class:`BatchedPendulumEnv`, a natively batched torch pendulum
  (``gym.make_vec("sensorgym/BatchedPendulum-v0", num_envs=..., vectorization_mode="vector_entry_point")``).
"""

import gymnasium as gym

from .batched_pendulum import BatchedPendulumEnv

__all__ = ["BatchedPendulumEnv"]

if "sensorgym/BatchedPendulum-v0" not in gym.registry:
    gym.register("sensorgym/BatchedPendulum-v0",
                 vector_entry_point="sensorgym.envs.batched_pendulum:BatchedPendulumEnv")
