"""What ``sensorgym inspect`` reads of a sensor's options: one component of an option, as a number.

Example:
    >>> from sensorgym.app.inspect_options import as_number, option_component
    >>> option_component((0.1, 0.2), 1), option_component(0.5, 3), as_number("fast")
    (0.2, 0.5, None)
"""

from __future__ import annotations

from typing import Any

__all__ = ["as_number", "option_component"]


def option_component(value: Any, i: int) -> Any:
    """Component ``i`` of an option (a number, a per-component sequence or a distribution)."""
    if isinstance(value, (list, tuple)):
        return value[i] if i < len(value) else value[-1]
    return value


def as_number(value: Any) -> float | None:
    """``value`` as a float, or None (a distribution, None, ...)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
