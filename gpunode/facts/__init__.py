"""Facts: what each host has, gathered in one round trip."""

from gpunode.facts.model import HostFacts

__all__ = ["HostFacts"]
