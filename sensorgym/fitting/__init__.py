"""``sensorgym fit``: from a real sensor's log to the error-model options that reproduce it
(docs/fit.md).

Readers (:mod:`.readers`, :mod:`.log_formats`), time stamps (:mod:`.timing`), the static window
(:mod:`.static`), the Allan deviation (:mod:`.allan`), the closed-form model (:mod:`.model`) and its fit
(:mod:`.estimate`), the quantization lattice (:mod:`.lattice`), the delay (:mod:`.delay`), the
simulation through :class:`~sensorgym.SensorManager` (:mod:`.simulate`), the outputs (:mod:`.config_out`,
:mod:`.report`, :mod:`.plots`) and the entry point :func:`fit` (:mod:`.api`). Numpy only at import;
allantools and scipy (the ``fit`` extra) load when a fit runs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FitError", "FitResult", "MissingExtra", "fit"]


def __getattr__(name: str) -> Any:
    if name in ("fit", "FitResult"):
        from . import api

        return getattr(api, name)
    if name in ("FitError", "MissingExtra"):
        from . import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'sensorgym.fitting' has no attribute {name!r}")
