"""Validators for inventory values that leave gpunode: URLs, addresses, install paths.

Each returns the value (an address without its IPv6 brackets) or raises ValueError with
what is wrong and what to write; pydantic turns that into a file:line message.
"""

from __future__ import annotations

import ipaddress
import os
import posixpath
import re
import stat
from pathlib import Path
from urllib.parse import urlsplit

from gpunode.inventory import sshcommands

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"\A{_LABEL}(?:\.{_LABEL})*\.?\Z")
# RFC 3986's characters: no space, quote, backslash, backtick, braces or controls.
_URL_CHARS = re.compile(r"\A[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+\Z")
# A conda install over one of these (or inside a virtual file system) wrecks the host.
_SYSTEM = {
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
    "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/snap", "/srv", "/sys",
    "/tmp", "/usr", "/var", "/usr/bin", "/usr/lib", "/usr/lib64", "/usr/libexec",
    "/usr/local", "/usr/sbin", "/usr/share", "/usr/include", "/usr/src", "/var/lib",
    "/var/log", "/var/cache", "/var/tmp",
}  # fmt: skip
_VIRTUAL = ("/proc/", "/sys/", "/dev/", "/run/", "/boot/")


def hostname_or_ip(value: str) -> str | None:
    """`value` as a connectable host (IPv6 without brackets), or None."""
    if value.startswith("[") and value.endswith("]"):
        inner = value[1:-1]
        return inner if ":" in inner and _ip(inner) else None
    if _ip(value):
        return value
    last = value.rstrip(".").rsplit(".", 1)[-1]
    # An all-digit last label is a mistyped IPv4 address, not a name (RFC 3696).
    if len(value) <= 253 and _HOSTNAME.match(value) and not last.isdigit():
        return value
    return None


def _ip(value: str) -> bool:
    if "%" in value:  # a scope id (fe80::1%eth0): `%` is an ssh_config expansion
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def host_address(value: str) -> str:
    found = hostname_or_ip(value)
    if found is None:
        raise ValueError(
            f"{value!r} is not a hostname, IPv4 or IPv6 address: write e.g. gpu-01.lab, "
            "192.0.2.10 or 2001:db8::10 (no spaces, quotes, `%`, `$` or a leading `-`)"
        )
    return found


def http_url(value: str, query: bool = True) -> str:
    shown = re.sub(r"//[^/@]*@", "//***@", value)  # never echo a password
    if not _URL_CHARS.match(value):
        raise ValueError(
            f"{shown!r} is not a URL: no whitespace, quotes or control characters "
            "(percent-encode them)"
        )
    if not value.startswith(("https://", "http://")):
        raise ValueError(f"{shown!r}: write an absolute URL starting with https://")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError as exc:
        raise ValueError(f"{shown!r} is not a URL ({exc})") from None
    if "@" in parts.netloc:
        raise ValueError(
            "the URL holds credentials (user:password@), which would end up in logs and "
            "apt sources: remove them and give the mirror its credentials another way "
            "(e.g. /etc/apt/auth.conf.d)"
        )
    netloc = parts.netloc
    host = netloc[: netloc.find("]") + 1] if netloc.startswith("[") else netloc.split(":")[0]
    if hostname_or_ip(host) is None:
        raise ValueError(f"{shown!r}: the URL needs a valid host name or address")
    if not query and ("?" in value or "#" in value):
        raise ValueError(
            f"{shown!r}: a repository URL takes no ?query or #fragment (paths are appended)"
        )
    return value


def conda_prefix(value: str) -> str:
    if not value.startswith("/") or value.startswith("//") or posixpath.normpath(value) != value:
        raise ValueError(
            f"{value!r}: write an absolute, normalized path such as /opt/conda "
            "(no trailing /, `.` or `..`)"
        )
    if not re.fullmatch(r"[A-Za-z0-9._+/-]+", value):
        raise ValueError(f"{value!r}: use letters, digits and . _ + - / only (conda needs it)")
    if value in _SYSTEM or value.startswith(_VIRTUAL):
        raise ValueError(
            f"{value!r} is a system directory: a conda install there would wreck the host; "
            "use a directory of its own such as /opt/conda"
        )
    return value


def conda_channel(value: str) -> str:
    """A conda channel: a name (conda-forge, nvidia, defaults, pytorch/label/nightly) or an
    http(s) URL; never an option to conda."""
    if "://" in value:
        return http_url(value, query=False)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)*", value):
        raise ValueError(f"{value!r}: write a channel name such as conda-forge, or an https:// URL")
    return value


SPEC_FILE_MAX = 256 * 1024


def spec_file(value: str) -> str:
    """A file next to the inventory (environment.yml, requirements.txt): a relative,
    normalized path of plain names."""
    if (
        value.startswith("/")
        or posixpath.normpath(value) != value
        or value.split("/")[0] == ".."
        or not re.fullmatch(r"[A-Za-z0-9._+/-]+", value)
    ):
        raise ValueError(
            f"{value!r}: write a path relative to the inventory's folder, such as "
            "envs/torch.yml (letters, digits, . _ + - /, no `..`)"
        )
    return value


ALLOW_FILE_DIRS_ENV = "GPUNODE_ALLOW_FILE_DIRS"


def _allowed_dirs(base: Path) -> list[Path]:
    """The inventory's folder and those the controller's user allows (their gpunode.toml's
    allow_file_dirs, or GPUNODE_ALLOW_FILE_DIRS), each after symlinks."""
    extra = os.environ.get(ALLOW_FILE_DIRS_ENV, "").split(os.pathsep)
    return [base.resolve(), *(Path(os.path.expanduser(d)).resolve() for d in extra if d)]


def local_file(base: Path, rel: str, *, secret: bool = False) -> Path:
    """The controller file an inventory names, after symlinks: under the inventory's folder
    or an allowed one, a regular file, and world-readable unless declared secret (a file
    only its owner may read is a credential, and would go to every host)."""
    real = (base / rel).resolve()
    dirs = _allowed_dirs(base)
    if not any(real == d or d in real.parents for d in dirs):
        raise ValueError(
            f"{rel!r} is {real}, outside the inventory's folder {dirs[0]}: copy it beside the "
            f"inventory, or allow its folder in your own gpunode.toml (allow_file_dirs)"
        )
    try:
        st = real.stat()
    except OSError as exc:
        raise ValueError(f"{rel!r}: cannot read {real}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{rel!r}: {real} is not a regular file")
    if not secret and not st.st_mode & stat.S_IROTH:
        raise ValueError(
            f"{rel!r}: {real} is not world-readable (mode {stat.S_IMODE(st.st_mode):04o}), "
            "a private file gpunode would copy to every host: if it is meant to go there, "
            "declare the env `secret: true` (written 0600 on the hosts, never shown or "
            "recorded); if not, name another file"
        )
    return real


def spec_file_text(base: Path, rel: str, *, secret: bool = False) -> str:
    """The file's text, checked: UTF-8, no control characters but tabs and newlines."""
    path = local_file(base, rel, secret=secret)
    try:
        data = path.read_bytes()[: SPEC_FILE_MAX + 1]
    except OSError as exc:
        raise ValueError(f"{rel!r}: cannot read {path}: {exc.strerror}") from None
    if len(data) > SPEC_FILE_MAX:
        raise ValueError(f"{rel!r}: larger than {SPEC_FILE_MAX} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{rel!r}: not UTF-8 text") from None
    if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text):
        raise ValueError(f"{rel!r}: holds control characters (only tabs and newlines allowed)")
    return text


# One ProxyJump hop: [user@]host[:port], host a name, an ssh_config alias or [IPv6]; no `%`
# (ssh's token expansion), `-` first (an option), whitespace or quotes.
_JUMP_HOP = re.compile(
    r"\A(?:[A-Za-z_][A-Za-z0-9_.-]{0,31}@)?"
    r"(?:[A-Za-z0-9][A-Za-z0-9_.-]*|\[[0-9A-Fa-f:.]+\])"
    r"(?::[0-9]{1,5})?\Z"
)


def proxy_jump(value: str) -> str:
    """A `-J` spec: comma-separated hops, each `[user@]host[:port]`."""
    if value.lower() == "none":
        return value
    for hop in value.split(","):
        if not _JUMP_HOP.match(hop):
            raise ValueError(
                f"{value!r} is not a ProxyJump spec: write [user@]host[:port] hops separated "
                "by commas, e.g. admin@bastion.lab:2222 (no spaces, quotes, `%` or leading `-`)"
            )
    return value


# Options gpunode sets itself: multiplexing and batch mode keep it working, and the host
# key policy has settings of its own.
_RESERVED_OPTIONS = {
    "batchmode": "gpunode always runs ssh with BatchMode=yes",
    "controlmaster": "gpunode manages the connection's ControlMaster itself",
    "controlpath": "gpunode keeps its control sockets in a private directory",
    "controlpersist": "gpunode manages the connection's ControlPersist itself",
    "stricthostkeychecking": "set ssh.host_key_policy (strict or accept-new) instead",
    "userknownhostsfile": "set ssh.known_hosts_file instead",
}


def ssh_option_name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9]+", value) or not value[0].isalpha():
        raise ValueError(f"{value!r} is not an ssh option name: letters only, as ssh_config(5)")
    why = _RESERVED_OPTIONS.get(value.lower())
    if why:
        raise ValueError(f"{value} cannot be set in ssh.options: {why}")
    runs = sshcommands.COMMAND_KEYWORDS.get(value.lower())
    if runs and not sshcommands.allowed():
        raise ValueError(f"{value} cannot be set in ssh.options: it {runs}: {sshcommands.FIX}")
    return value


def ssh_options(options: dict[str, str | int]) -> dict[str, str | int]:
    """The options together: a ProxyJump is a `-J` spec like ssh.proxy_jump (OpenSSH hands
    it to a shell as part of its own proxy command)."""
    for name, value in options.items():
        if name.lower() == "proxyjump":
            proxy_jump(str(value))
    return options


def ssh_config_file(value: str) -> str:
    """A controller file whose lines (and Includes) run no command on the controller."""
    why = sshcommands.refusal(value)
    if why:
        raise ValueError(why)
    return value


def ssh_option_value(value: str | int) -> str | int:
    if isinstance(value, str) and (not value.strip() or value.startswith("-")):
        raise ValueError(f"{value!r}: an ssh option value cannot be empty or start with `-`")
    return value


def bin_dir(value: str) -> str:
    """A folder of programs on the host, written into a shell command (quoted as well)."""
    if not value.startswith("/") or value.startswith("//") or posixpath.normpath(value) != value:
        raise ValueError(f"{value!r}: write an absolute, normalized path such as /opt/torch/bin")
    if not re.fullmatch(r"[A-Za-z0-9._+/-]+", value):
        raise ValueError(f"{value!r}: use letters, digits and . _ + - / only")
    return value


def env_value(value: str | int) -> str | int:
    """An environment value written into a shell command (quoted as well)."""
    if isinstance(value, str) and not re.fullmatch(r"[A-Za-z0-9_.,:=/@+^%-]{0,256}", value):
        raise ValueError(
            f"{value!r}: use at most 256 letters, digits and _ . , : = / @ + ^ % - "
            "(an interface or device list such as ^docker,lo or mlx5_0:1,mlx5_1:1)"
        )
    return value
