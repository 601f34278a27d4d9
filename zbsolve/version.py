"""zbsolve's version, which every layer may read."""

__version__ = "0.1.0"
