"""apt_repository and apt_packages: NVIDIA's signed repository and exact, held versions."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import replace
from typing import Annotated, Any

from pydantic import AfterValidator, Field, field_validator

from gpunode.changes import LOCK_SAY_EVERY, Change, Step
from gpunode.roles.ops.base import (
    DEB_NAME,
    Args,
    DebVersion,
    FilePath,
    OpContext,
    Operation,
    PackageName,
    Url,
    Word,
    file_hash,
    q,
    sha256,
    shaped,
)
from gpunode.roles.ops.fetch import PRIVATE_DIR, verified, verified_key
from gpunode.versions import compare_debian


def apt_get(lock_timeout: int) -> str:
    return (
        "env DEBIAN_FRONTEND=noninteractive apt-get -y -q"
        f" -o DPkg::Lock::Timeout={int(lock_timeout)}"
        " -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
    )


def install_step(lock_timeout: int, targets: list[str]) -> Step:
    """One apt transaction; `targets` are quoted ("pkg=1.2-1", "old-pkg-" to remove), after
    `--` so that none is ever read as an option."""
    return Step(
        f"{apt_get(lock_timeout)} --no-install-recommends --allow-downgrades"
        f" --allow-change-held-packages install -- {' '.join(targets)}",
        installs=tuple(targets),
    )


LISTS_LOCK = "/var/lib/apt/lists/lock"
LISTS_WHAT = "apt's list lock"
DPKG_LOCKS = ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")


def lock_wait(what: str, paths: tuple[str, ...], lock_timeout: int) -> str:
    """Shell that waits while another process holds one of `paths` (fcntl locks, as apt
    and dpkg take them; /proc/locks names the holder without root), `$n` counting the
    seconds waited up to `lock_timeout`, and says every LOCK_SAY_EVERY s who holds it, on
    stderr (which also keeps an apt step whose stdout is not shown from reading as a silent
    host). Defines `holder`; needs `n=0`."""
    return (
        'holder() { for l in "$@"; do'
        ' i=$(stat -c %i "$l" 2>/dev/null) || continue;'
        ' while read -r _n _k _a _m p id _r; do case "$id" in *:"$i")'
        ' echo "pid $p ($(cat /proc/$p/comm 2>/dev/null))"; return 0;; esac;'
        " done < /proc/locks; done; return 1; };"
        f" while h=$(holder {' '.join(q(p) for p in paths)}) && [ $n -lt {int(lock_timeout)} ];"
        f' do [ $((n % {LOCK_SAY_EVERY})) -eq 0 ] && echo "waiting for {what}, held by $h" >&2;'
        " n=$((n + 1)); sleep 1; done;"
    )


def apt_update(lock_timeout: int) -> str:
    """`apt-get update`, waiting for apt's list lock as for dpkg's: DPkg::Lock::Timeout
    covers only the dpkg locks, and apt-get update (apt 2.6, 2.7) fails at once while a
    background update holds the lists lock. A race lost after the wait is retried; the
    lock named in the failure is the one apt could not take (gpunode.execute.aptmessages)."""
    t = int(lock_timeout)
    return (
        "( d=$(mktemp -d) || exit 1; trap 'rm -rf \"$d\"' EXIT; n=0; while :;"
        f" do {lock_wait(LISTS_WHAT, (LISTS_LOCK,), t)}"
        f" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout={t} update"
        ' 2> "$d/err"; rc=$?;'
        f' if [ $rc -ne 0 ] && [ $n -lt {t} ] && grep -q {q(LISTS_LOCK)} "$d/err";'
        " then n=$((n + 1)); sleep 1; continue; fi;"
        ' cat "$d/err" >&2; exit $rc; done )'
    )


class KeyringPackage(Args):
    """The Debian package that installs the repository's keyring (NVIDIA's cuda-keyring)."""

    name: PackageName = Field(description="Its Debian package name, e.g. cuda-keyring.")
    version: DebVersion = Field(
        description="The exact version wanted; another installed version is replaced."
    )
    url: Url = Field(description="Where the .deb is downloaded from (https unless insecure_http).")
    sha256: str = Field(
        description="The .deb's sha256 (64 hex digits): the trust anchor of every later"
        " package, checked before it is installed; planning refuses the task without it."
    )


# a path inside `[signed-by=...]`: a space or bracket would add options to the sources line
KeyringPath = Annotated[
    str, AfterValidator(shaped(r"/[^\s\[\]\x00-\x1f\x7f]*", "a keyring path (no spaces)"))
]


class AptRepositoryArgs(Args):
    path: FilePath = Field(
        description="The sources file written. NVIDIA's keyring package ships one at the same"
        " path, which this replaces so that a mirror (or an air-gapped host) never points back"
        " at the internet."
    )
    uri: Url = Field(description="The repository's URL, as the `deb` line names it.")
    suite: Word = Field("/", description="The suite (`/` for a flat repository like NVIDIA's).")
    components: tuple[Word, ...] = Field((), description="Components after the suite, if any.")
    keyring: KeyringPath = Field(
        description="The keyring file the line's `[signed-by=...]` names; no spaces or brackets."
    )
    keyring_package: KeyringPackage | None = Field(
        None, description="Install the keyring from this package (name, version, url, sha256)."
    )
    keyring_url: Url | None = Field(
        None,
        description="Or download the keyring file from here when it is absent"
        " (with keyring_sha256).",
    )
    keyring_sha256: str | None = Field(
        None, description="The sha256 the file at keyring_url must have."
    )
    keyring_fingerprint: str | None = Field(
        None,
        description="Or: the file at keyring_url is an ASCII-armoured key that must hold"
        " exactly one key, with this fingerprint (40 hex digits); it is installed dearmoured.",
    )
    insecure_http: bool = Field(
        False, description="Allow plain http downloads (labs only): repos.insecure_http."
    )


def source_line(a: AptRepositoryArgs) -> str:
    parts = ["deb", f"[signed-by={a.keyring}]", a.uri, a.suite, *a.components]
    return " ".join(parts) + "\n"


class AptRepository(Operation):
    """A signed apt repository: its keyring, and one `deb [signed-by=KEYRING] URI SUITE
    COMPONENTS` line alone in its own sources file.

    Changes only what differs: the keyring package is installed (downloaded into a private
    directory, its sha256 checked) when it is missing or at another version, and the
    sources file is then written again, since the package ships its own at the same path;
    a keyring file from `keyring_url` is fetched when it is absent (checked by its sha256,
    or an armoured key by its fingerprint, then dearmoured); the sources file is
    written when its sha256 differs from the line wanted (or, unreadable, when the entry
    apt lists for it differs). A host that has all of it yields nothing.

    ```yaml
    - name: NVIDIA CUDA repository, signed by its keyring
      op: apt_repository
      path: /etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list
      uri: https://mirror.example/cuda/repos/ubuntu2404/x86_64/
      suite: /
      keyring: /usr/share/keyrings/cuda-archive-keyring.gpg
      keyring_package:
        name: cuda-keyring
        version: "1.1-1"
        url: https://mirror.example/cuda/repos/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb
        sha256: "{{ repos.cuda_keyring_sha256.get(facts.os.repo_slug, '') }}"
    ```
    """

    name = "apt_repository"
    changes_apt_sources = True
    long_running = True
    args_model = AptRepositoryArgs
    path_args = ("path", "keyring")

    def paths(self, args: Any) -> list[str]:
        a: AptRepositoryArgs = args
        return [a.path, a.keyring]

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: AptRepositoryArgs = args
        facts = ctx.facts
        out: list[Change] = []
        kp = a.keyring_package
        if kp is not None:
            have = facts.package(kp.name)
            if have is None or have.version != kp.version:
                why = f"{kp.name} {have.version} installed" if have else f"{kp.name} missing"
                out.append(
                    ctx.change(
                        self,
                        f"{why}, {kp.version} wanted",
                        [keyring_install(kp, ctx.apt_lock_timeout, a.insecure_http)],
                        path=a.keyring,
                    )
                )
        elif a.keyring_url is not None and not _keyring_present(a.keyring, ctx):
            out.append(
                ctx.change(self, f"keyring {a.keyring} missing", [keyring_fetch(a)], path=a.keyring)
            )
        want = source_line(a)
        problem = _source_problem(a, want, ctx)
        # The keyring package ships its own sources file at the same path, pointing at
        # NVIDIA's site: ours is written after it, so mirrors and air-gapped hosts work.
        if out or problem:
            out.append(
                ctx.change(
                    self,
                    problem or f"{a.path} replaced after the keyring package",
                    [write_file_step(a.path, want, "0644")],
                    path=a.path,
                    after=want,
                )
            )
        return out


def keyring_install(kp: KeyringPackage, lock_timeout: int, insecure_http: bool = False) -> str:
    """Download, verify and install the keyring package in one root step, from a directory
    only root can write (no other user can plant or swap the file), through apt so that a
    held dpkg lock is waited for; the directory goes away however the step ends."""
    deb = f'"$d"/{q(f"{kp.name}_{kp.version}_all.deb")}'
    return (
        f"{PRIVATE_DIR}"
        ' && chmod 0755 "$d"'  # apt's download user reads it; only root writes
        f" && {verified(kp.url, kp.sha256, deb, insecure_http=insecure_http)}"
        f" && {apt_get(lock_timeout)} --allow-downgrades install {deb}"
    )


def keyring_fetch(a: AptRepositoryArgs) -> str:
    """Download the keyring file into a private directory, check it, install it."""
    url = a.keyring_url or ""
    if a.keyring_fingerprint is not None:
        fetched = verified_key(
            url, a.keyring_fingerprint, '"$d"/key.gpg', insecure_http=a.insecure_http
        )
        return f'{PRIVATE_DIR} && {fetched} && install -D -m 0644 "$d"/key.gpg {q(a.keyring)}'
    fetched = verified(url, a.keyring_sha256 or "", '"$d"/key', insecure_http=a.insecure_http)
    return f'{PRIVATE_DIR} && {fetched} && install -D -m 0644 "$d"/key {q(a.keyring)}'


def _keyring_present(path: str, ctx: OpContext) -> bool:
    return path in ctx.facts.keyrings or file_hash(ctx.facts, path) is not None


def _source_problem(a: AptRepositoryArgs, want: str, ctx: OpContext) -> str | None:
    facts = ctx.facts
    digest = file_hash(facts, a.path)
    if digest is not None:
        return None if digest == sha256(want) else f"{a.path} differs"
    entries = [s for s in facts.apt_sources if s.path == a.path]
    if not entries:
        return f"{a.path} missing"
    ok = (
        len(entries) == 1
        and entries[0].uri.rstrip("/") == a.uri.rstrip("/")
        and entries[0].suite == a.suite
        and entries[0].signed_by == a.keyring
    )
    return None if ok else f"{a.path} differs from {want.strip()!r}"


def write_file_step(path: str, content: str, mode: str, owner: str = "root:root") -> Step:
    """Atomic, private write: the content (on stdin) goes into a new file that mktemp makes
    beside the target (O_EXCL, so never a name someone planted, and 0600 under umask 077,
    so no other user reads it before its mode is set), which gets its owner and mode and is
    renamed over the target (`mv -T`: a symlink or directory there is not followed)."""
    directory, _, name = path.rpartition("/")
    template = f"{directory}/.{name}.XXXXXX"
    return Step(
        f"mkdir -p -- {q(directory or '/')} && umask 077 && tmp=$(mktemp -- {q(template)})"
        f' && {{ cat > "$tmp" && chown -h -- {q(owner)} "$tmp" && chmod -- {q(mode)} "$tmp"'
        f' && mv -fT -- "$tmp" {q(path)} || {{ rm -f -- "$tmp"; false; }}; }}',
        stdin=content,
    )


class PackageSpec(Args):
    """One package: `{name, version}`, or the string `name` or `name=version`."""

    name: PackageName = Field(description="The Debian package name.")
    version: DebVersion | None = Field(
        None,
        description='Exact Debian version, or a glob ("550.163.01-*") that apt also'
        " understands; none: any installed version will do.",
    )


class AptPackagesArgs(Args):
    packages: list[PackageSpec] = Field(
        description="The packages, each `name`, `name=version` or `{name, version}`."
    )
    hold: bool | list[PackageName] = Field(
        False,
        description="true: hold every package listed; a list: hold just those (a library,"
        " not its headers), so that upgrades cannot move them.",
    )
    never: tuple[PackageName, ...] = Field(
        (),
        description="Names the task refuses to install (a meta package that would pull in a"
        " driver): planning fails if `packages` lists one.",
    )
    replace_held: str | None = Field(
        None,
        description="Regex: installed, held packages it matches that `packages` does not"
        " list (another driver branch) are unheld and removed in the same apt transaction;"
        " apt cannot resolve a switch while they are held.",
    )

    @field_validator("packages", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if not isinstance(value, (list, tuple)):  # a tuple: from Python data (DriverPin)
            return value
        out: list[Any] = []
        for item in value:
            if isinstance(item, str):
                name, _, version = item.partition("=")
                out.append({"name": name, "version": version or None})
            else:
                out.append(item)
        return out


def version_matches(installed: str, wanted: str | None) -> bool:
    if wanted is None:
        return True
    if "*" in wanted or "?" in wanted:
        return fnmatch.fnmatchcase(installed, wanted)
    return installed == wanted


class AptPackages(Operation):
    """Debian packages installed at exact versions (or version globs), held when asked, in
    one apt transaction.

    Changes only what differs: a package that is missing or whose installed version does
    not match is installed (`apt-get install -- name=version ...`, after `--` so no name
    is read as an option), a package to hold that is not held yet is held, and held
    packages matching `replace_held` are unheld and removed in the same transaction. A
    host with every package at its version, and held where asked, yields nothing.

    The holds it sets are recorded in /var/lib/gpunode/holds (and forgotten when it unholds
    them). A held package the change must install at another version or remove, and whose
    hold is not recorded there, is the admin's: the host is refused, naming it, unless
    `--allow-change-held` is given, and then the change's reason says whose hold it moves.

    apt's lists are read before the first install, waiting for apt's list lock as apt waits
    for dpkg's (`apt.lock_timeout`, the holder named). On a host whose dpkg a run left
    half-done, the plan first finishes it: `dpkg --configure -a`, then `apt-get -f install`
    while packages stay unpacked with a dependency missing.

    ```yaml
    - name: cuDNN 9
      op: apt_packages
      packages: [libcudnn9-cuda-12=9.10.2.21-1, libcudnn9-dev-cuda-12=9.10.2.21-1]
      hold: [libcudnn9-cuda-12]
      never: [cuda]
    ```
    """

    name = "apt_packages"
    long_running = True
    args_model = AptPackagesArgs

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: AptPackagesArgs = args
        refused = sorted({p.name for p in a.packages} & set(a.never))
        if refused:
            raise ValueError(f"refusing to install {', '.join(refused)}: listed under never")
        missing: list[str] = []
        install: list[PackageSpec] = []
        for spec in a.packages:
            have = ctx.facts.package(spec.name)
            if have is None:
                missing.append(f"{spec.name} missing")
                install.append(spec)
            elif not version_matches(have.version, spec.version):
                missing.append(
                    f"{spec.name} {have.version} installed, {spec.version} wanted"
                    + (": a downgrade" if _older(spec.version, have.version) else "")
                )
                install.append(spec)
        to_hold = {p.name for p in a.packages} if a.hold is True else set(a.hold or ())
        unheld = [
            p.name
            for p in a.packages
            if p.name in to_hold and (p in install or not ctx.facts.packages[p.name].held)
        ]
        wanted = {p.name for p in a.packages}
        stale = sorted(
            p.name
            for p in ctx.facts.packages.values()
            if a.replace_held
            and p.held
            and p.installed
            and p.name not in wanted
            and re.fullmatch(a.replace_held, p.name)
        )
        if not install and not unheld and not stale:
            return []
        odd = [n for n in stale if not re.fullmatch(DEB_NAME, n)]
        if odd:  # dpkg's own names always fit; these came from somewhere else
            raise ValueError(f"held package {odd[0]!r} is not a Debian package name")
        admins = _admin_holds([p.name for p in install] + stale, ctx)
        steps: list[str | Step] = []
        if stale:
            steps.append("apt-mark unhold -- " + " ".join(q(n) for n in stale))
            missing.append(f"replaces held {', '.join(stale)}")
        if install or stale:
            targets = [q(f"{p.name}={p.version}" if p.version else p.name) for p in install]
            targets += [q(f"{n}-") for n in stale]
            steps.append(install_step(ctx.apt_lock_timeout, targets))
        if unheld:
            steps.append("apt-mark hold -- " + " ".join(q(n) for n in unheld))
        if unheld or stale:
            steps.append(record_holds_step(unheld, stale))
        if admins:
            missing.append(f"changes the admin's hold on {', '.join(admins)}")
        reason = "; ".join(missing) if missing else f"{', '.join(unheld)} not held"
        return [ctx.change(self, reason, steps, apt=bool(install or stale))]


def _older(wanted: str | None, have: str) -> bool:
    """A version older than the installed one: exact, or a release with any revision
    (`550.127.05-*`, compared with the installed release); another pattern is not compared."""
    if wanted is None:
        return False
    release = wanted.removesuffix("-*")
    if "*" in release or "?" in release:
        return False
    if release != wanted:
        have = have.rsplit("-", 1)[0]
    return compare_debian(release, have) < 0


def _admin_holds(changed: list[str], ctx: OpContext) -> list[str]:
    """Held packages among those the change installs, upgrades or removes that gpunode did
    not hold itself: the admin's. Changing one needs --allow-change-held; without it the
    host is refused, naming them."""
    facts = ctx.facts
    admins = sorted(
        n
        for n in set(changed)
        if (p := facts.packages.get(n)) is not None
        and p.held
        and p.installed
        and n not in facts.gpunode_holds
    )
    if admins and not ctx.allow_change_held:
        s = "s" * (len(admins) > 1)
        raise ValueError(
            f"{', '.join(admins)} held by the admin (a hold gpunode did not set), and this"
            f" change would move it: release the hold{s} (apt-mark unhold) or pass"
            " --allow-change-held to let gpunode change it"
        )
    return admins


HOLDS_FILE = "/var/lib/gpunode/holds"


def record_holds_step(add: list[str], drop: list[str]) -> Step:
    """Record in HOLDS_FILE (one name a line, 0644) the packages gpunode has just held, and
    forget those it unheld: merged with what the file says on the host, so that the holds of
    several tasks in one transaction all stay, and replaced atomically (mktemp beside it,
    then rename). The names to add come on stdin; those to drop are Debian names, quoted."""
    directory = HOLDS_FILE.rsplit("/", 1)[0]
    keep = "".join(f" -e {q(n)}" for n in drop)
    keep = f" | grep -vxF{keep}" if drop else ""
    return Step(
        f"mkdir -p -- {directory} && umask 077 && tmp=$(mktemp -- {directory}/.holds.XXXXXX)"
        f' && {{ {{ cat -- {HOLDS_FILE} 2>/dev/null; cat; }}{keep} | sort -u > "$tmp"'
        f' && chmod 0644 "$tmp" && mv -fT -- "$tmp" {HOLDS_FILE}'
        ' || { rm -f -- "$tmp"; false; }; }',
        stdin="".join(f"{n}\n" for n in add),
    )


def apt_transactions(changes: list[Change], lock_timeout: int) -> list[Change]:
    """Refresh apt's lists before the first install and after any change to its sources;
    join package changes that follow each other into one."""
    out: list[Change] = []
    stale = True
    for c in changes:
        if c.apt_sources:
            stale = True
        if c.apt and stale:
            c = replace(c, steps=(Step(apt_update(lock_timeout)), *c.steps))
            stale = False
        if out and _installs(out[-1]) and _installs(c) and out[-1].sudo == c.sudo:
            out[-1] = _one_transaction(out[-1], c, lock_timeout)
        else:
            out.append(c)
    return out


def _installs(c: Change) -> bool:
    return any(s.installs for s in c.steps)


def _one_transaction(a: Change, b: Change, lock_timeout: int) -> Change:
    """Two package changes as one apt transaction: apt reads its lists and dpkg runs its
    triggers once, not once per role. Unholds go first, holds and handlers last."""
    before: list[Step] = []
    after: list[Step] = []
    targets: list[str] = []
    for c in (a, b):
        i = next(n for n, s in enumerate(c.steps) if s.installs)
        before += c.steps[:i]
        targets += c.steps[i].installs
        after += c.steps[i + 1 :]
    return replace(
        a,
        role=a.role if a.role == b.role else f"{a.role}+{b.role}",
        task=f"{a.task}; {b.task}",
        reason=f"{a.reason}; {b.reason}",
        steps=(
            *_joined(before, "apt-mark unhold -- "),
            install_step(lock_timeout, targets),
            *_joined_records(_joined(after, "apt-mark hold -- ")),
        ),
        tags=tuple(dict.fromkeys(a.tags + b.tags)),
    )


def _joined(steps: list[Step], prefix: str) -> list[Step]:
    """`apt-mark hold -- a` and `apt-mark hold -- b c` as one `apt-mark hold -- a b c`, in
    place of the first."""
    args = [s.command[len(prefix) :] for s in steps if s.command.startswith(prefix)]
    out: list[Step] = []
    for s in steps:
        if not s.command.startswith(prefix):
            out.append(s)
        elif args:
            out.append(Step(prefix + " ".join(args)))
            args = []
    return out


def _joined_records(steps: list[Step]) -> list[Step]:
    """The holds several tasks record (and forget none of) as one record, in place of the
    first: one rewrite of HOLDS_FILE per transaction."""
    plain = record_holds_step([], []).command
    names = "".join(s.stdin or "" for s in steps if s.command == plain)
    out: list[Step] = []
    for s in steps:
        if s.command != plain:
            out.append(s)
        elif names:
            out.append(Step(plain, stdin=names))
            names = ""
    return out
