"""The solver backends zbsolve ships, one line each; a backend's folder registers it."""
# ruff: noqa: I001

from . import cpsat  # noqa: F401
from . import cbc  # noqa: F401
from . import listsched  # noqa: F401
