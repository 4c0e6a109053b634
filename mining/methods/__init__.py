"""Retrieval methods as plug-ins: see `mining.methods.base` for the interface."""

from mining.methods.base import GLOBAL, Method, get_method, method_names

__all__ = ["GLOBAL", "Method", "get_method", "method_names"]
