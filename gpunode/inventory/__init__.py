"""The inventory: what each host should have, validated and merged."""

from gpunode.inventory.errors import InventoryError, Problem
from gpunode.inventory.loader import Inventory, deep_merge, load, loads
from gpunode.inventory.model import Host, Stack
from gpunode.inventory.patterns import PatternError, select

__all__ = [
    "Host",
    "Inventory",
    "InventoryError",
    "PatternError",
    "Problem",
    "Stack",
    "deep_merge",
    "load",
    "loads",
    "select",
]
