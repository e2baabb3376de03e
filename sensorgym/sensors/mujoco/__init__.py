"""The MuJoCo sensors of the catalog, measured inside each sub-env
(see :mod:`~sensorgym.sensors.mujoco.base`).

Importable without ``mujoco`` installed; they need it only when they measure. The classes are re-exported
by :mod:`sensorgym.sensors` and by ``sensorgym``.
"""
