"""The sensor catalog."""

from .attribute import EnvAttributeOptions, EnvAttributeSensor
from .state import StateSensor, StateSensorOptions

__all__ = ["EnvAttributeOptions", "EnvAttributeSensor", "StateSensor", "StateSensorOptions"]
