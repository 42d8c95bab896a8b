"""Desired state minus facts: each host's ordered changes, or why it is refused."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from shlex import quote as q

from gpunode.changes import Change, HostPlan, Step
from gpunode.components import REPOSITORIES
from gpunode.facts.model import HostFacts, OsRelease
from gpunode.inventory.model import Host
from gpunode.memo import Memo
from gpunode.plan.aptcheck import loaded, moved_dependencies, targets, unavailable
from gpunode.plan.mirrorcheck import Manifest, unmirrored
from gpunode.plan.refuse import NVIDIA_RELEASES, refusal
from gpunode.plan.rerun import put_back, with_journal_holds
from gpunode.plan.space import space_refusal
from gpunode.resolve.packages import Catalog, Unresolvable
from gpunode.resolve.resolver import CatalogFor, IndexNeeded, Resolved, resolve
from gpunode.roles.loader import RoleError, search_path
from gpunode.roles.ops import OpContext, Probe
from gpunode.roles.ops.apt import DPKG_LOCKS, apt_get, apt_transactions, install_step, lock_wait
from gpunode.roles.render import render
from gpunode.roles.tags import selected
from gpunode.roles.walk import walk

# dpkg states a run left half-done (what `dpkg --audit` reports)
BROKEN_STATES = "half-installed|unpacked|half-configured|triggers-awaited|triggers-pending"


def dpkg_configure(lock_timeout: int) -> str:
    """Finish an interrupted dpkg run: `dpkg --configure -a`; then, while packages are still
    half-done (unpacked with a dependency missing, as a full disk leaves them), `apt-get -f
    install`, with the host's own pins and preferences and no held package moved. Exits 0
    once dpkg's database has no half-done package; else prints each one with its state and
    the commands to run (as `gpunode:` lines, which the failure's message keeps).

    dpkg has no lock timeout of its own: an apt run that is still going (its controller may
    have been killed) holds the lock, so wait for it as apt's DPkg::Lock::Timeout would,
    saying every few seconds who holds it; dpkg's output streams (a DKMS build may take minutes)."""
    t = int(lock_timeout)
    state = (
        "dpkg-query -W -f '${binary:Package} ${db:Status-Status}\\n' 2>/dev/null"
        f" | grep -E ' ({BROKEN_STATES})$'"
    )
    return (
        "( d=$(mktemp -d) || exit 1; trap 'rm -rf \"$d\"' EXIT; n=0;"
        f" while :; do {lock_wait('the dpkg lock', DPKG_LOCKS, t)}"
        " { env DEBIAN_FRONTEND=noninteractive dpkg --force-confold --configure -a;"
        ' echo $? > "$d/rc"; } 2>&1 | tee "$d/out";'
        f' if [ "$(cat "$d/rc")" -ne 0 ] && [ $n -lt {t} ] && grep -q lock "$d/out";'
        " then n=$((n + 1)); sleep 1; continue; fi; break; done;"
        # still locked after the timeout: say so (dpkg named the holder), apt would wait again
        f' if [ "$(cat "$d/rc")" -ne 0 ] && [ $n -ge {t} ] && grep -q lock "$d/out";'
        " then exit 1; fi;"
        f' if [ -n "$({state})" ]; then'
        f" {apt_get(t)} --no-install-recommends -f install; fi;"
        f" left=$({state});"
        ' [ -z "$left" ] && exit 0;'
        ' echo "gpunode: dpkg --configure -a and apt-get -f install left these packages'
        ' half-done:" >&2;'
        " printf '%s\\n' \"$left\" | sed 's/^/gpunode:   /' >&2;"
        ' echo "gpunode: run on the host: sudo dpkg --configure -a'
        ' && sudo apt-get -f install (dpkg --audit says why)" >&2; exit 1 )'
    )


# Before facts are known the roles see only a host's shape: hosts alike share the results,
# made once even when every host of a run asks at the same moment.
_PATHS: Memo[tuple[str, tuple[Path, ...]], tuple[str, ...]] = Memo()
_GUESSED: Memo[tuple[str, tuple[Path, ...]], tuple[Probe, ...]] = Memo()


def managed_paths(host: Host, search: tuple[Path, ...] | None = None) -> list[str]:
    """Files the facts round trip should hash for this host's roles: each file task's path,
    its content never rendered. A path only the facts can name is hashed once the plan
    names it (HostPlan.reads); a role that cannot render raises RoleError (file:line)."""
    key = (host.shape(), search or search_path(None))
    return list(_PATHS.get(key, lambda: _managed_paths(host, key[1])))


def _managed_paths(host: Host, search: tuple[Path, ...]) -> tuple[str, ...]:
    out: list[str] = []
    # Paths may name the release (NVIDIA's sources file does): ask for each one's.
    for release in NVIDIA_RELEASES:
        guess = HostFacts(os=OsRelease(id="ubuntu", version_id=release))
        for st in walk(host, guess, search, guess=True, paths_only=True):
            out += [p for p in st.op.paths(st.args) if p not in out]
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
        key = (host.shape(), search or search_path(None))
        guessed = _GUESSED.get(key, lambda: tuple(_probes(host, None, key[1])))
        return [p for p in guessed if not p.role_shell]
    probes = _probes(host, facts, search or search_path(None))
    shell = role_shell and refusal(host, facts) is None
    return [p for p in probes if shell or not p.role_shell]


def _probes(host: Host, facts: HostFacts | None, search: tuple[Path, ...]) -> list[Probe]:
    out: dict[str, Probe] = {}
    try:
        for st in walk(host, facts or HostFacts(), search, guess=not facts, probes_only=True):
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
    containers: CatalogFor | None = None,
    skip_tags: Collection[str] | None = None,
    allow_busy: bool = False,
    allow_change_held: bool = False,
    mirror_files: Manifest | None = None,
) -> HostPlan:
    """`catalog` reads the host's repository index, when a spec is not satisfied by what
    the host has installed (gpunode.resolve); `containers` the libnvidia-container
    repository's. `tags`: keep only changes with one of these;
    `skip_tags`: drop changes with any of these. A plan that disrupts the GPUs (`disrupts`)
    is refused while processes use them, unless `allow_busy`, and carries the host's hooks.
    `allow_change_held`: a change may move a package the admin held (else the host is
    refused, naming it). `mirror_files` reads a gpunode mirror's manifest of a folder the
    plan fetches from outside apt (the Miniconda installer, pip's index)."""
    why = refusal(host, facts)
    if why:
        return HostPlan(host.name, refused=why)
    as_read, facts = facts, with_journal_holds(facts)  # holds a cut change set are gpunode's
    only: set[str] | None = None
    pending: tuple[str, ...] = ()
    catalog, containers = _once(catalog), _once(containers)  # resolve and the apt check
    try:
        resolved = resolve(host, facts, catalog, containers)
    except IndexNeeded as exc:
        # Plan the repositories alone; the host's apt then says which versions they offer.
        resolved, only = (
            Resolved(notes=[f"{exc}; reading versions from the host's apt"]),
            {r.role for r in REPOSITORIES},
        )
        pending = exc.names
    except Unresolvable as exc:
        return HostPlan(host.name, refused=str(exc))
    changes: list[Change] = []
    notes: list[str] = list(resolved.notes)
    reads: dict[str, None] = {}  # the files the plan compares: the facts must have hashed them
    walked: dict[tuple[str, str], int] = {}  # each task's place, for the journal's changes
    try:
        for st in walk(host, facts, search or search_path(None), resolved=resolved, only=only):
            reads.update(dict.fromkeys(st.op.paths(st.args)))
            walked.setdefault((st.role.name, st.title), len(walked))
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
    if tags or skip_tags:
        changes = [c for c in changes if selected(c.tags, tags, skip_tags)]
    if facts.dpkg_interrupted:
        half = ", ".join(f"{n} {s}" for n, s in sorted(facts.dpkg_broken.items()))
        changes.insert(
            0,
            Change(
                "",
                "finish an interrupted dpkg run",
                "dpkg",
                f"dpkg was interrupted: {half}" if half else "dpkg was interrupted",
                (Step(dpkg_configure(host.apt.lock_timeout)),),
                long_running=True,
            ),
        )
    ordered = tuple(_order(changes, host.apt.lock_timeout))
    if facts.journal:  # changes begun and never ended run again, whole
        kw = {"tags": tags, "skip_tags": skip_tags, "roles": only}
        ordered = tuple(put_back(list(ordered), as_read, walked, **kw))
    catalogs: list[Catalog] | None = None  # read once, by the first check that needs them
    if any(t.version for c in ordered for t in targets(c)):
        # What apt will be asked for at a version (a resolved one) must be there, before
        # anything on the host changes; unversioned names (Ubuntu's kernel headers) are
        # left to apt's simulation on the host, so a converged stack reads no index.
        catalogs = loaded(catalog, containers)
        why = unavailable(ordered, catalogs, facts)
        if why:
            return HostPlan(host.name, refused=why)
        moved = moved_dependencies(ordered, catalogs, facts)
        ordered = tuple(
            _also_install(c, more, host.apt.lock_timeout) if more else c
            for c, more in zip(ordered, moved, strict=True)
        )
    if any(targets(c) for c in ordered):  # each filesystem apt writes to, by the index's sizes
        if catalogs is None:
            catalogs = loaded(catalog, containers)
        why = space_refusal(host, ordered, catalogs, facts)
        if why:
            return HostPlan(host.name, refused=why)
    if mirror_files is not None and (why := unmirrored(host, ordered, mirror_files)):
        return HostPlan(host.name, refused=why)
    hooks: tuple[tuple[str, str], ...] = ()
    if disrupts(ordered, facts):
        if facts.gpu_processes and not allow_busy:
            return HostPlan(host.name, refused=busy_refusal(ordered, facts))
        try:
            hooks = disrupt_hooks(host)
        except Exception as exc:  # a template error names the hook
            return HostPlan(host.name, refused=f"hooks: {exc}")
    return HostPlan(
        host.name,
        ordered,
        notes=tuple(notes),
        hooks=hooks,
        versions_on_host=pending,
        reads=tuple(reads),
    )


def _also_install(change: Change, more: list[str], lock_timeout: int) -> Change:
    """`change` with `more` (`name=version`) added to its apt transaction."""
    steps = tuple(
        install_step(lock_timeout, [*s.installs, *(q(m) for m in more)]) if s.installs else s
        for s in change.steps
    )
    return replace(change, steps=steps, reason=f"{change.reason}; with {', '.join(more)}")


def _once(get: CatalogFor | None) -> CatalogFor | None:
    """`get`, read at most once however often it is asked (a failure is asked again)."""
    if get is None:
        return None
    got: list[Catalog] = []

    def once() -> Catalog:
        if not got:
            got.append(get())
        return got[0]

    return once


def disrupts(changes: Collection[Change], facts: HostFacts) -> bool:
    """A reboot, or a change to the driver's packages while a driver module is loaded: what
    stops the GPUs' work."""
    return any(c.reboot or c.reload is not None
               or (c.apt and "driver" in c.roles and facts.module.loaded)
               for c in changes)  # fmt: skip


def busy_refusal(changes: Collection[Change], facts: HostFacts) -> str:
    what = "a reboot" if any(c.reboot for c in changes) else "a driver change"
    if any(c.reload is not None for c in changes):
        what = "a module reload"
    procs = "; ".join(p.shown() for p in facts.gpu_processes)
    return (
        f"GPUs in use, and the plan has {what}: {procs}; stop them (or drain the host), "
        "or pass --allow-busy"
    )


def disrupt_hooks(host: Host) -> tuple[tuple[str, str], ...]:
    """The inventory's hooks, rendered with the host's validated name and address only."""
    ctx = {"host": host.name, "address": host.address or ""}
    out = []
    for name in ("before_disrupt", "after_disrupt"):
        text = getattr(host.hooks, name)
        if text:
            try:
                out.append((name, str(render(text, ctx))))
            except Exception as exc:
                raise ValueError(f"{name}: {type(exc).__name__}: {exc}") from exc
    return tuple(out)


def _order(changes: list[Change], lock_timeout: int) -> list[Change]:
    """Package changes as apt transactions (gpunode.roles.ops.apt); every reboot reason
    gathered into one reboot, last, after the checks that must pass before it. A module
    reload runs last too, or is folded into the reboot when the plan has one anyway."""
    reasons = [c for c in changes if c.reboot]
    reloads = [c for c in changes if c.reload is not None]
    changes = [c for c in changes if c.reload is None]
    if reasons:
        reasons += [replace(c, reason=f"{c.reload}: reboot needed") for c in reloads]
        reloads = []
    changes = [c for c in changes if not c.before_reboot] + [c for c in changes if c.before_reboot]
    out = apt_transactions(
        [replace(c, reboot=False) for c in changes if not c.only_reboot], lock_timeout
    )
    out += reloads
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
