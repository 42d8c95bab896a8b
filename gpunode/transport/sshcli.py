"""The `ssh` command line for an inventory host: every value its own argv element.

OpenSSH takes the first value it obtains for an option, command line first, then the
ssh config. So gpunode's own options (multiplexing, batch mode, no forwarding) come
first and cannot be overridden; then what the inventory sets explicitly; then the
ssh config (~/.ssh/config with its Includes and /etc/ssh/ssh_config, or
ssh.config_file) decides the rest, OpenSSH's defaults after it.
"""

from __future__ import annotations

import math
import os
import pwd
from dataclasses import dataclass

from gpunode.inventory.model import SshSettings


def home_path(path: str) -> str:
    """`~` as OpenSSH expands it: the login's home from the password database, not $HOME
    (which `sudo -E` keeps), so both transports read one ssh config."""
    if path == "~" or path.startswith("~/"):
        try:
            return pwd.getpwuid(os.getuid()).pw_dir + path[1:]
        except KeyError:  # a uid without a passwd entry: $HOME is all there is
            pass
    return os.path.expanduser(path)


CONTROL_PERSIST = 600
"""Seconds an idle master stays up: close() stops it at once; this bounds what a killed
gpunode leaves behind."""

DEFAULT_CONFIG = "~/.ssh/config"


def _o(name: str, value: object) -> list[str]:
    return ["-o", f"{name}={value}"]


@dataclass(frozen=True)
class SshCommand:
    """How to call `ssh` for one host; `control_dir` is private (0700) to this transport."""

    address: str
    settings: SshSettings
    control_dir: str
    binary: str = "ssh"

    def config_args(self) -> list[str]:
        """`-F` only when the inventory names a config other than the default: with -F,
        ssh reads neither ~/.ssh/config nor /etc/ssh/ssh_config."""
        s = self.settings
        if "config_file" not in s.model_fields_set:
            return []
        if s.config_file is None:
            return ["-F", "/dev/null"]
        full = home_path(s.config_file)  # as paramiko's transport reads it: one file for both
        if full == home_path(DEFAULT_CONFIG):
            return []
        return ["-F", full]

    def options(
        self, *, login_user: str | None = None, master: str = "auto", forwards: bool = False
    ) -> list[str]:
        """Everything but the destination and the command. `login_user` is the user to
        pass when neither the inventory nor the ssh config names one; `master` is
        ControlMaster: commands use `no`, so that only connect() starts a master.
        `forwards`: the `-L`/`-R` of an `-O forward` (ClearAllForwardings would drop them)."""
        s = self.settings
        explicit = s.model_fields_set
        argv = [
            *self.config_args(),
            *_o("ControlMaster", master),
            *_o("ControlPath", os.path.join(self.control_dir, "%C")),
            *_o("ControlPersist", CONTROL_PERSIST),
            *_o("BatchMode", "yes"),
            *_o("ForwardAgent", "no"),
            *_o("ForwardX11", "no"),
            *_o("ClearAllForwardings", "no" if forwards else "yes"),
            *_o("StrictHostKeyChecking", "yes" if s.host_key_policy == "strict" else "accept-new"),
            *_o("ConnectTimeout", max(1, math.ceil(s.connect_timeout))),
        ]
        if "known_hosts_file" in explicit:
            argv += _o("UserKnownHostsFile", os.path.expanduser(s.known_hosts_file))
        if s.keepalive:
            argv += _o("ServerAliveInterval", max(1, int(s.keepalive)))
        user = s.user if "user" in explicit else login_user
        if user:
            argv += ["-l", user]
        if "port" in explicit:
            argv += ["-p", str(s.port)]
        if s.identity_file:
            argv += ["-i", os.path.expanduser(s.identity_file)]
        if s.proxy_jump:
            argv += ["-J", s.proxy_jump]
        for name, value in s.options.items():
            argv += _o(name, value)
        return argv

    def argv(
        self,
        *args: str,
        login_user: str | None = None,
        master: str = "auto",
        forwards: bool = False,
    ) -> list[str]:
        """`ssh OPTIONS [args...]`; callers append `--`, the destination and a command."""
        options = self.options(login_user=login_user, master=master, forwards=forwards)
        return [self.binary, *options, *args]

    def destination(self) -> list[str]:
        return ["--", self.address]


def parse_effective(text: str) -> dict[str, str]:
    """`ssh -G` output: one `keyword value` per line (lowercased keywords); the first
    value of a keyword that repeats."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key and key not in out:
            out[key] = value
    return out
