"""apt's own resolver, asked before anything changes: `apt-get -s` of a plan's packages,
under the apt preferences as the plan will leave them.

The preferences a plan writes (the driver's release pin) are laid into a private copy of
/etc/apt/preferences.d that `Dir::Etc::PreferencesParts` points apt at, so the host's own
files stay as they are until the simulation has passed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from shlex import quote as q

from gpunode.changes import Change
from gpunode.roles.ops.apt import apt_update

PREFERENCES_D = "/etc/apt/preferences.d/"
# What apt says when it gives up: its errors, and the dependency lines that explain them
# (" nvidia-driver-570-open : Depends: nvidia-dkms-570-open (= ...) but it is not ...").
_REASON = re.compile(
    r"^(E: .*|\s*\S+ : (Pre-)?Depends: .*|\s+(Pre-)?Depends: .*|\s*\S+ : (Conflicts|Breaks): .*)$"
)


def installs(changes: Sequence[Change]) -> list[str]:
    """Every target of the plan's apt transactions (quoted), the last word for a name."""
    by_name: dict[str, str] = {}
    for c in changes:
        for s in c.steps:
            for t in s.installs:
                name = shlex.split(t)[0].split("=", 1)[0].rstrip("-")
                by_name.pop(name, None)
                by_name[name] = t
    return list(by_name.values())


def preferences(changes: Sequence[Change]) -> dict[str, str | None]:
    """The files of /etc/apt/preferences.d the plan writes (content) or removes (None)."""
    out: dict[str, str | None] = {}
    for c in changes:
        if c.path and c.path.startswith(PREFERENCES_D) and "/" not in c.path[len(PREFERENCES_D) :]:
            out[c.path[len(PREFERENCES_D) :]] = c.after
    return out


def configures_sources(changes: Sequence[Change]) -> bool:
    """The plan changes apt's sources before its packages: the host's apt cannot answer
    for them yet, and the transaction asks it then."""
    for c in changes:
        if c.apt_sources:
            return True
        if c.apt:
            return False
    return False


def command(changes: Sequence[Change], lock_timeout: int, *, update: bool) -> str | None:
    """One shell command that exits 0 when apt would take the plan's packages; None for a
    plan with no packages. `update`: read the lists first, as the transaction will."""
    targets = installs(changes)
    if not targets or any(c.op == "dpkg" for c in changes):
        # dpkg is mid-run (the plan finishes it first): apt would judge its half-done
        # packages, not the plan's
        return None
    lines = ["set -e", "umask 077", "d=$(mktemp -d)", "trap 'rm -rf \"$d\"' EXIT"]
    lines.append(f'cp -a {PREFERENCES_D}. "$d"/ 2>/dev/null || true')
    for name, content in preferences(changes).items():
        if content is None:
            lines.append(f'rm -f -- "$d"/{q(name)}')
        else:
            lines.append(f'printf %s {q(content)} > "$d"/{q(name)}')
    if update:
        lines.append(f"{apt_update(lock_timeout)} >/dev/null")  # waits for the list lock
    lines.append(
        'LC_ALL=C apt-get -s -q -o Dir::Etc::PreferencesParts="$d"'
        " --no-install-recommends --allow-downgrades --allow-change-held-packages"
        f" install -- {' '.join(targets)}"
    )
    return "\n".join(lines) + "\n"


def reasons(stdout: str, stderr: str) -> list[str]:
    """apt's lines that say why it refused: every `Depends: ... but ...` and `E:` line."""
    out = [
        line.rstrip()
        for line in (stdout + "\n" + stderr).splitlines()
        if _REASON.match(line) and line.strip()
    ]
    return list(dict.fromkeys(out)) or [
        line for line in (stderr or stdout).strip().splitlines()[-3:] if line.strip()
    ]


# What apt says when its lists predate what the plan asks for: `apt-get update` may mend it.
_STALE = ("was not found", "Unable to locate package", "has no installation candidate")


def stale_lists(reasons: list[str]) -> bool:
    """apt refused only for versions or packages its lists do not have (yet)."""
    errors = [r for r in reasons if r.startswith("E:")]
    return (
        bool(errors)
        and all(any(s in r for s in _STALE) for r in errors)
        and not any(": Depends:" in r or ": Conflicts:" in r or ": Breaks:" in r for r in reasons)
    )
