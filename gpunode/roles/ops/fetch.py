"""What runs as root is fetched into a directory only root can write, checked against a
pinned sha256, used, and removed, all in one step: no other user can plant, swap or read
it, and nothing unverified runs."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from gpunode.roles.ops.base import q

SHA256 = re.compile(r"\A[0-9a-f]{64}\Z")
FINGERPRINT = re.compile(r"\A[0-9A-F]{40}\Z")

# One shell fragment: $d is the private directory, removed however the step ends.
PRIVATE_DIR = "d=$(mktemp -d /tmp/gpunode.XXXXXXXXXX) && trap 'rm -rf \"$d\"' EXIT"


def curl(url: str, dest: str, *, insecure_http: bool = False) -> str:
    """curl that refuses plain http (and redirects to it) unless the inventory allows it."""
    protocols = "=http,https" if insecure_http else "=https"
    return (
        f"curl -fsSL --retry 3 --proto {protocols} --proto-redir {protocols} -o {dest} -- {q(url)}"
    )


def pip_trusted(urls: Iterable[str | None], *, insecure_http: bool) -> list[str]:
    """The plain-http indexes' HOST[:PORT]s, when the inventory allows plain http: pip
    ignores an http index that is not on loopback ("not a trusted or secure host") unless
    it is named with --trusted-host, as a mirror served by `gpunode mirror serve` is.
    pip still checks each wheel against the sha256 its index link carries."""
    if not insecure_http:
        return []
    hosts = (urlsplit(u).netloc.rpartition("@")[2] for u in urls if u and u.startswith("http://"))
    return list(dict.fromkeys(h for h in hosts if h))


def verified(url: str, sha256: str, dest: str, *, insecure_http: bool = False) -> str:
    """Download `url` to `dest` (a path under $d) and stop unless its sha256 is `sha256`."""
    if not SHA256.match(sha256):
        raise ValueError(
            f"no sha256 pinned for {url} (got {sha256!r}): gpunode runs it as root, so it"
            " needs the file's sha256 (repos.conda_installer_sha256, repos.cuda_keyring_sha256)"
        )
    return (
        f"{curl(url, dest, insecure_http=insecure_http)}"
        f' && {{ [ "$(sha256sum < {dest} | cut -d" " -f1)" = {sha256} ]'
        f" || {{ echo {q(f'{url}: sha256 is not the pinned {sha256}')} >&2; exit 1; }}; }}"
    )


def verified_key(url: str, fingerprint: str, dest: str, *, insecure_http: bool = False) -> str:
    """Download an ASCII-armoured OpenPGP key to $d/key and write its binary form to `dest`
    (under $d), stopping unless it holds exactly one key, whose primary fingerprint is
    `fingerprint`. gpg reads it in $d, a home of its own: no keyring of the host changes."""
    if not FINGERPRINT.match(fingerprint):
        raise ValueError(
            f"no key fingerprint pinned for {url} (got {fingerprint!r}): apt trusts every"
            " package it signs, so it needs the key's 40-digit fingerprint"
            " (repos.nvidia_container_key_fingerprint)"
        )
    gpg = 'gpg --batch --quiet --no-tty --homedir "$d"'
    primaries = 'awk -F: \'$1 == "pub" { p = 1; next } p && $1 == "fpr" { print $10; p = 0 }\''
    return (
        f"{curl(url, chr(34) + '$d' + chr(34) + '/key', insecure_http=insecure_http)}"
        f' && {{ [ "$({gpg} --with-colons --show-keys "$d"/key | {primaries})" = {fingerprint} ]'
        f" || {{ echo {q(f'{url}: the key is not the pinned {fingerprint}')} >&2; exit 1; }}; }}"
        f' && {gpg} --dearmor -o {dest} "$d"/key'
    )
