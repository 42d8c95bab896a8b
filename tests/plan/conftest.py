"""Fixtures for planner tests: facts in, commands out (no host needed)."""

from __future__ import annotations

import pytest

from gpunode.facts.model import HostFacts
from gpunode.inventory import Host
from tests.plan.planhelpers import STACK, fresh_facts, host_from


@pytest.fixture
def host() -> Host:
    return host_from(STACK)


@pytest.fixture
def fresh() -> HostFacts:
    return fresh_facts()
