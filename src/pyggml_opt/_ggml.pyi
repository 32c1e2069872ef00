"""Types of the cffi extension compiled from ``_ffi_build.py``: cffi makes its objects at run time
from the C declarations, so mypy sees them as Any."""
from typing import Any

ffi: Any
lib: Any
