"""The engine: torch (and numpy) only, no Gymnasium, no simulator.

:class:`~sensorgym.core.manager.SensorManager` runs the pipeline; :mod:`~sensorgym.core.sensor` holds the
hook contract (``Sensor``, ``SimpleSensor``); :mod:`~sensorgym.core.options` the options; the rest are the
components the manager is built from (storage, rings, parameters, random numbers, the sampler, the
imperfection kernel). The user-facing names are re-exported by ``sensorgym`` itself.
"""
