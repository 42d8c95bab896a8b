"""Desired state minus facts: each host's ordered changes, or why it is refused."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from pathlib import Path

from gpunode.changes import Change, HostPlan, Step
from gpunode.facts.model import HostFacts, OsRelease
from gpunode.inventory.model import Host
from gpunode.plan.refuse import NVIDIA_RELEASES, refusal
from gpunode.resolve import CatalogFor, IndexNeeded, Resolved, Unresolvable, resolve
from gpunode.roles.loader import RoleError, search_path
from gpunode.roles.ops import OpContext, Probe
from gpunode.roles.ops.apt import apt_transactions
from gpunode.roles.walk import walk


# dpkg has no lock timeout of its own: an apt run that is still going (its controller may
# have been killed) holds the lock, so wait for it as apt's DPkg::Lock::Timeout would.
def dpkg_configure(lock_timeout: int) -> str:
    return (
        "( n=0; while :; do"
        " out=$(env DEBIAN_FRONTEND=noninteractive dpkg --force-confold --configure -a 2>&1);"
        f" rc=$?; if [ $rc -ne 0 ] && [ $n -lt {int(lock_timeout)} ]"
        ' && printf %s "$out" | grep -q lock;'
        " then n=$((n + 1)); sleep 1; continue; fi;"
        " printf '%s\\n' \"$out\"; exit $rc; done )"
    )


def _shape(host: Host) -> str:
    """What the roles see of a host before its facts are known: hosts alike share it."""
    return host.model_dump_json(include={"stack", "repos", "gpus", "connection", "become"})


# Before facts are known the roles see only a host's shape: hosts alike share the results.
_PATHS: dict[tuple[str, tuple[Path, ...]], tuple[str, ...]] = {}
_GUESSED: dict[tuple[str, tuple[Path, ...]], tuple[Probe, ...]] = {}


def managed_paths(host: Host, search: tuple[Path, ...] | None = None) -> list[str]:
    """Files the facts round trip should hash for this host's roles (errors surface later)."""
    key = (_shape(host), search or search_path(None))
    if key not in _PATHS:
        _PATHS[key] = _managed_paths(host, key[1])
    return list(_PATHS[key])


def _managed_paths(host: Host, search: tuple[Path, ...]) -> tuple[str, ...]:
    out: list[str] = []
    # Paths may name the release (NVIDIA's sources file does): ask for each one's.
    for release in NVIDIA_RELEASES:
        guess = HostFacts(os=OsRelease(id="ubuntu", version_id=release))
        try:
            for st in walk(host, guess, search, guess=True):
                out += [p for p in st.op.paths(st.args) if p not in out]
        except (RoleError, ValueError, TypeError, AttributeError):
            pass
    return tuple(out)


def probes_for(
    host: Host,
    facts: HostFacts | None,
    search: tuple[Path, ...] | None = None,
    *,
    role_shell: bool = False,
) -> list[Probe]:
    """The probes the roles need; with `facts` None, a guess made before reading the host.

    Shell that a role wrote (Probe.role_shell: a command's `unless:`) is left out unless
    `role_shell`, and then only with facts that do not refuse the host: `plan` and
    `apply --check` run none of it, `apply` only on a host it is going to change."""
    if facts is None:
        key = (_shape(host), search or search_path(None))
        if key not in _GUESSED:
            _GUESSED[key] = tuple(_probes(host, None, key[1]))
        return [p for p in _GUESSED[key] if not p.role_shell]
    probes = _probes(host, facts, search or search_path(None))
    shell = role_shell and refusal(host, facts) is None
    return [p for p in probes if shell or not p.role_shell]


def _probes(host: Host, facts: HostFacts | None, search: tuple[Path, ...]) -> list[Probe]:
    out: dict[str, Probe] = {}
    try:
        for st in walk(host, facts or HostFacts(), search, guess=not facts):
            for p in st.op.probes(st.args):
                out.setdefault(p.key, p)
    except (RoleError, ValueError):
        pass
    return list(out.values())


def plan_host(
    host: Host,
    facts: HostFacts,
    *,
    probes: dict[str, bool] | None = None,
    tags: Collection[str] | None = None,
    search: tuple[Path, ...] | None = None,
    catalog: CatalogFor | None = None,
    allow_change_held: bool = False,
) -> HostPlan:
    """`catalog` reads the host's repository index, when a spec is not satisfied by what
    the host has installed (gpunode.resolve). `allow_change_held`: a change may move a
    package the admin held (else the host is refused, naming it)."""
    why = refusal(host, facts)
    if why:
        return HostPlan(host.name, refused=why)
    only: set[str] | None = None
    pending: tuple[str, ...] = ()
    try:
        resolved = resolve(host, facts, catalog)
    except IndexNeeded as exc:
        # Plan the repository alone; the host's apt then says which versions it offers.
        resolved, only = (
            Resolved(notes=[f"{exc}; reading versions from the host's apt"]),
            {"nvidia_repo"},
        )
        pending = exc.names
    except Unresolvable as exc:
        return HostPlan(host.name, refused=str(exc))
    changes: list[Change] = []
    notes: list[str] = list(resolved.notes)
    try:
        for st in walk(host, facts, search or search_path(None), resolved=resolved, only=only):
            ctx = OpContext(
                role=st.role.name,
                task=st.title,
                facts=facts,
                tags=(st.role.name, *st.task.tags),
                apt_lock_timeout=host.apt.lock_timeout,
                on_change=st.task.on_change,
                probes=probes or {},
                notes=notes,
                allow_change_held=allow_change_held,
            )
            try:
                changes += st.op.plan(st.args, ctx)
            except ValueError as exc:
                return HostPlan(host.name, refused=f"{st.where}: {exc}")
    except RoleError as exc:
        return HostPlan(host.name, refused=str(exc))
    if tags:
        changes = [c for c in changes if set(c.tags) & set(tags)]
    if facts.dpkg_interrupted:
        changes.insert(
            0,
            Change(
                "",
                "finish an interrupted dpkg run",
                "dpkg",
                "dpkg was interrupted",
                (Step(dpkg_configure(host.apt.lock_timeout)),),
            ),
        )
    return HostPlan(
        host.name,
        tuple(_order(changes, host.apt.lock_timeout)),
        notes=tuple(notes),
        versions_on_host=pending,
    )


def _order(changes: list[Change], lock_timeout: int) -> list[Change]:
    """Package changes as apt transactions (gpunode.roles.ops.apt); every reboot reason
    gathered into one reboot, last."""
    reasons = [c for c in changes if c.reboot]
    out = apt_transactions(
        [replace(c, reboot=False) for c in changes if not c.only_reboot], lock_timeout
    )
    if reasons:
        out.append(
            Change(
                reasons[0].role,
                "reboot",
                "reboot",
                "; ".join(r.reason for r in reasons),
                (),
                reboot=True,
                tags=tuple(sorted({t for r in reasons for t in r.tags})),
            )
        )
    return out
