"""Plan and apply agree, as a property over stacks, starting states and repositories.

Each example resets a lab host, gives it a starting state (fresh; an older release
installed by hand; the same held by the admin; a process on the GPUs), points it at a full
repository or one caught mid-sync, and runs `plan` then `apply` through the CLI:
- plan refuses <=> apply refuses, and then the host's /etc, dpkg database and gpunode's
  state are byte-identical to before and no change started;
- plan accepts => apply exits 0 and a second apply starts no change.
The number of examples is GPUNODE_AGREEMENT_EXAMPLES (CI: 8); the soak's result is in
docs/reliability.md."""

from __future__ import annotations

import os
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.apply.labhelpers import Lab, apply, fresh, of, start_lab
from tests.conftest import SLOT, slot_net

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-01"
EXAMPLES = int(os.environ.get("GPUNODE_AGREEMENT_EXAMPLES", "8"))
WATCHED = ("etc/", "var/lib/dpkg/status", "var/lib/gpunode/")
OLDER = ("nvidia-open-570=570.133.20-1", "libnvidia-compute-570=570.133.20-0ubuntu1")
BASE: dict[str, Any] = {"cuda": None, "cudnn": None, "nccl": None, "cuda_env": False,
                        "smoke": []}  # fmt: skip

drivers = st.one_of(
    st.fixed_dictionaries({"branch": st.sampled_from(["570", "580"]),
                           "update": st.sampled_from(["keep", "latest"]),
                           "hold": st.booleans()}),
    st.fixed_dictionaries({"version": st.sampled_from(["570.133.20", "570.195.03", "580.95.05"]),
                           "hold": st.booleans()}),
)  # fmt: skip
toolkits = st.sampled_from([None, {"toolkits": ["12.8"]}, {"toolkits": ["13.0"]}])
stacks = st.fixed_dictionaries({"driver": drivers, "cuda": toolkits,
                                "cudnn": st.sampled_from([None, "9"])})  # fmt: skip
starts = st.sampled_from(["fresh", "older", "admin-hold", "busy"])
mirrors = st.sampled_from(["full", "mid-sync"])


@pytest.fixture(scope="module")
def labs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Lab]]:
    """One host behind a full repository and one behind a mirror caught mid-sync."""
    full = start_lab(tmp_path_factory, "--hosts", "1", "--ubuntu", "22.04",
                     "--net", str(slot_net(237)), "--port", str(2237 + 1000 * SLOT))  # fmt: skip
    mid = start_lab(tmp_path_factory, "--hosts", "1", "--ubuntu", "22.04", "--mirror",
                    "mid-sync", "--net", str(slot_net(239)), "--port",
                    str(2239 + 1000 * SLOT))  # fmt: skip
    yield {"full": next(full), "mid-sync": next(mid)}
    for gen in (full, mid):
        next(gen, None)


def watched(lab: Lab) -> dict[str, str]:
    tree = lab.tree(HOST).items()
    return {k: v for k, v in tree if k.startswith(WATCHED) and "gpunode/locks/" not in k}


def start(lab: Lab, how: str) -> None:
    fresh(lab, HOST)
    if how in ("older", "admin-hold"):
        hold = ("--hold",) if how == "admin-hold" else ()
        out = lab.gpunode("lab", "install", HOST, *OLDER, *hold, "--reboot")
        assert out.returncode == 0, out.stderr
    if how == "busy":
        out = lab.gpunode("lab", "install", HOST, *OLDER, "--reboot")
        assert out.returncode == 0, out.stderr
        out = lab.gpunode("lab", "fault", HOST, "gpu-busy", "1024")
        assert out.returncode == 0, out.stderr


_n = count()


SLOW = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@pytest.mark.timeout(max(600, 60 * EXAMPLES))
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=SLOW)  # fmt: skip
@given(stack=stacks, how=starts, mirror=mirrors)
def test_plan_and_apply_agree(
    labs: dict[str, Lab], tmp_path: Path, stack: dict[str, Any], how: str, mirror: str
) -> None:
    lab = labs[mirror]
    start(lab, how)
    inv = lab.inventory(tmp_path / f"ex{next(_n)}", **{**BASE, **stack})
    example = f"{mirror}, {how}, {stack}"
    before = watched(lab)
    plan = lab.gpunode("plan", str(inv))
    assert plan.returncode in (0, 4), example + plan.stdout + plan.stderr
    code, evs = apply(lab, inv, "--no-smoke")
    event(f"{mirror}, {how}: plan {plan.returncode}, apply {code}")
    finished = [(e["status"], e["message"]) for e in of(evs, "host-finished")]
    if plan.returncode == 4:
        assert code == 4, (example, plan.stdout, finished)
        assert of(evs, "change-started") == [], example
        assert watched(lab) == before, example
    else:
        assert code == 0, (example, plan.stdout, finished)
        again, evs = apply(lab, inv, "--no-smoke")
        assert again == 0 and of(evs, "change-started") == [], (example, of(evs, "plan-ready"))
