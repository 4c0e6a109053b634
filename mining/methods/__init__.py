"""Retrieval methods as plug-ins: see `mining.methods.base` for the interface."""

from mining.methods.base import (GLOBAL, Method, Param, WhitenedGlobal, get_method, method_class, method_names,
                                 shared_groups)

__all__ = ["GLOBAL", "Method", "Param", "WhitenedGlobal", "get_method", "method_class", "method_names",
           "shared_groups"]
