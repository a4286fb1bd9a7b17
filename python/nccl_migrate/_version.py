"""The package version; the C++ CLI reports the same number (CMake project version)."""

__version__ = "0.1.0"
