"""The kiln release this package is (configure.ac's AC_INIT version; the
wheel's version, and LIBRARY_VERSION in _lib.py is its major.minor).
A literal: setuptools reads it without importing kiln."""

__version__ = "0.1.0"
