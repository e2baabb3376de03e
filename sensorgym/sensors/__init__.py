"""The sensor catalog."""

from .state import StateSensor, StateSensorOptions

__all__ = ["StateSensor", "StateSensorOptions"]
