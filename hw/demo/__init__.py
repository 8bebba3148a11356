from .config import DemoConfig
from .mac_array import MacArray
from .engine import DemoEngine

__all__ = ["DemoConfig", "MacArray", "DemoEngine"]
