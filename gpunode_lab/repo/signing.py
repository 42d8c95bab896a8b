"""The repository's signing key: generated once with gpg, kept beside the build, reused."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

KEY_UID = "gpunode lab repository signing key (stand-in for NVIDIA's) <lab@gpunode.invalid>"


_PREFIX = "gpunode-lab-gpg-"


class SigningError(RuntimeError):
    pass


def _sweep(tmp: Path) -> None:
    """Remove the gpg homes of builds whose process is gone (killed before `__exit__`)."""
    for home in tmp.glob(f"{_PREFIX}*"):
        pid = home.name.removeprefix(_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(home, ignore_errors=True)
        elif not pid.isdigit() and time.time() - home.stat().st_mtime > 3600:
            shutil.rmtree(home, ignore_errors=True)  # named without a pid, an hour old


def _gpg(home: Path, *args: str, stdin: bytes | None = None) -> bytes:
    cmd = ["gpg", "--homedir", str(home), "--batch", "--quiet", "--no-tty", *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, check=False)
    if proc.returncode != 0:
        raise SigningError(
            f"gpg {' '.join(args[:2])} failed ({proc.returncode}): "
            f"{proc.stderr.decode(errors='replace').strip()}"
        )
    return proc.stdout


class Signer:
    """Signs Release files with a key stored (unprotected) under `keydir`."""

    def __init__(self, keydir: Path) -> None:
        self.keydir = keydir
        self._home: Path | None = None

    def __enter__(self) -> Signer:
        # A private GNUPGHOME per build: gpg-agent sockets never outlive the build. Its
        # name carries the builder's pid, so the homes of a killed build are swept later.
        _sweep(Path(tempfile.gettempdir()))
        self._home = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
        os.chmod(self._home, 0o700)
        secret = self.keydir / "secret.asc"
        if not secret.exists():
            self._generate(secret)
        _gpg(self._home, "--import", str(secret))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._home is not None:
            subprocess.run(
                ["gpgconf", "--homedir", str(self._home), "--kill", "all"],
                capture_output=True,
                check=False,
            )
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    @property
    def home(self) -> Path:
        if self._home is None:
            raise SigningError("Signer used outside its `with` block")
        return self._home

    def _generate(self, secret: Path) -> None:
        self.keydir.mkdir(parents=True, exist_ok=True)
        _gpg(
            self.home,
            "--passphrase",
            "",
            "--quick-gen-key",
            KEY_UID,
            "rsa3072",
            "sign",
            "never",
        )
        armored = _gpg(self.home, "--armor", "--export-secret-keys")
        tmp = secret.with_suffix(".tmp")
        tmp.write_bytes(armored)
        os.chmod(tmp, 0o600)
        tmp.replace(secret)

    def public_keyring(self) -> bytes:
        """The binary keyring apt's signed-by= reads (like cuda-archive-keyring.gpg)."""
        return _gpg(self.home, "--export")

    def public_key_armored(self) -> bytes:
        """The key as NVIDIA serves libnvidia-container's `gpgkey`: ASCII-armoured."""
        return _gpg(self.home, "--armor", "--export")

    def fingerprint(self) -> str:
        """The primary key's fingerprint (40 hex digits)."""
        out = _gpg(self.home, "--with-colons", "--list-keys").decode()
        return next(ln.split(":")[9] for ln in out.splitlines() if ln.startswith("fpr:"))

    def sign_release(self, folder: Path) -> None:
        release = folder / "Release"
        for name in ("InRelease", "Release.gpg"):
            (folder / name).unlink(missing_ok=True)
        _gpg(
            self.home, "--digest-algo", "SHA256", "--clearsign", "-o",
            str(folder / "InRelease"), str(release),
        )  # fmt: skip
        _gpg(
            self.home, "--digest-algo", "SHA256", "--armor", "--detach-sign", "-o",
            str(folder / "Release.gpg"), str(release),
        )  # fmt: skip
