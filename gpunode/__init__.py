"""gpunode: converge Ubuntu GPU machines to a declared stack, and prove it works."""

__version__ = "0.1.0"
