"""Helpers for the MPI point-to-point performance course."""

__version__ = "0.1.0"
