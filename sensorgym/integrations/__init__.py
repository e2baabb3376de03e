"""RL-library integrations, built on the Gymnasium layer (:mod:`sensorgym.wrappers`).

* :mod:`~sensorgym.integrations.sb3`: a Stable-Baselines3 ``VecEnv`` and asymmetric actor-critic policies;
  :mod:`~sensorgym.integrations.sb3_checkpoint` saves and restores them with the sensor state.
* :mod:`~sensorgym.integrations.rsl_rl`, :mod:`~sensorgym.integrations.skrl`,
  :mod:`~sensorgym.integrations.rl_games`: each library's critic-input convention.
* :mod:`~sensorgym.integrations.adapters`: the autoreset stepper and episode clock they share.

Each module imports its library only when used, so ``import sensorgym`` never needs them.
"""
