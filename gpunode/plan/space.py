"""Room for a plan's packages on every filesystem they write to, counted from the index.

After the changes are planned: each version apt will be asked for, and what it installs with
it (gpunode.plan.aptcheck.closure), costs its Installed-Size where the package writes
(gpunode.compat.paths) and its .deb's Size in apt's archives; summed per filesystem (the
facts' `df` of each path: paths on one mount count together), plus a margin. A filesystem
with less free is refused before anything runs: dpkg stopped by a full disk mid-unpack
leaves packages half-installed. Without an index to count from, the guess made before
planning stands (gpunode.plan.refuse.guessed_space_refusal).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpunode.changes import Change
from gpunode.compat.paths import Written, written
from gpunode.facts.model import Disk, HostFacts
from gpunode.inventory.model import Host
from gpunode.plan.aptcheck import Target, closure, taken_version, targets
from gpunode.plan.refuse import guessed_space_refusal
from gpunode.resolve.packages import Catalog
from gpunode.resolve.resolver import Sizes

SizesOf = Callable[[str, str], Sizes | None]

# Added to the packages' sizes on each filesystem: dpkg's database, its .dpkg-new files and
# maintainer scripts, rounding in Installed-Size
MARGIN_BYTES = 32 << 20
MARGIN_SHARE = 0.05
NAMED = 4  # packages named per filesystem


@dataclass
class _Need:
    disk: Disk
    bytes: int = 0  # the packages' sizes: the margin is added to these
    fixed: int = 0  # estimates of their own (an initramfs)
    by: dict[str, int] = field(default_factory=dict)  # what apt is asked for -> bytes


def space_refusal(
    host: Host, changes: Sequence[Change], catalogs: Sequence[Catalog], facts: HostFacts
) -> str | None:
    """Why the filesystems the plan's packages write to are too small; or None."""
    sized = [(c, f) for c in catalogs if (f := getattr(c, "sizes", None)) is not None]
    if not sized:
        return guessed_space_refusal(host, facts)
    needs: dict[str, _Need] = {}
    counted: set[tuple[str, str]] = set()  # a package two targets share counts once
    once: set[str] = set()
    for change in changes:
        for t in targets(change):
            asked = f"{t.name}={t.version}" if t.version else t.name
            for w in _writes(t, sized, facts, counted):
                disk = facts.disk(w.path)
                if disk is None or not w.bytes or (w.once and w.path in once):
                    continue  # not measured (an older facts script): apt's check then
                once.update([w.path] if w.once else [])
                need = needs.setdefault(disk.path, _Need(disk))
                if w.once:
                    need.fixed += w.bytes
                else:
                    need.bytes += w.bytes
                need.by[asked] = need.by.get(asked, 0) + w.bytes
    short = [_refusal(n) for _, n in sorted(needs.items()) if n.disk.free_bytes < _total(n)]
    return "; ".join(short) or None


def _writes(
    t: Target,
    sized: Sequence[tuple[Catalog, SizesOf]],
    facts: HostFacts,
    counted: set[tuple[str, str]],
) -> list[Written]:
    """What apt writes when asked for `t`: the packages the index carries, at their sizes;
    one it does not carry (Ubuntu's archive), its fixed writes alone (an initramfs)."""
    found = next(((c, f) for c, f in sized if c.versions(t.name)), None)
    taken = taken_version(found[0], t) if found else None
    if found is None or taken is None:
        return written(t.name, None, None)
    cat, sizes_of = found
    out: list[Written] = []
    for pkg, ver in closure(cat, t.name, taken, facts):
        have = facts.package(pkg)
        if (pkg, ver) in counted or (have is not None and have.version == ver):
            continue  # installed at that version already: apt leaves it
        counted.add((pkg, ver))
        sizes = sizes_of(pkg, ver)
        out += written(pkg, *(sizes if sizes else (None, None)))
    return out


def _total(need: _Need) -> int:
    margin = int(need.bytes * MARGIN_SHARE) + MARGIN_BYTES if need.bytes else 0
    return need.bytes + margin + need.fixed


def _refusal(need: _Need) -> str:
    d = need.disk
    kind = f"a {d.fstype}" if d.fstype else "a filesystem"
    ranked = sorted(need.by, key=lambda a: -need.by[a])
    named = ", ".join(ranked[:NAMED]) + (
        f" and {len(ranked) - NAMED} more" if len(ranked) > NAMED else ""
    )
    return (
        f"too little disk on {d.path} ({kind} of {_mib(d.total_bytes)} MiB): "
        f"{d.free_bytes >> 20} MiB free, {_mib(_total(need))} MiB needed by {named}: "
        "free space or mount a larger filesystem"
    )


def _mib(n: int) -> int:
    return -(-n // (1 << 20))
