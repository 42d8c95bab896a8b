"""A stand-in conda channel (pkgs/main/, as repo.anaconda.com serves it): linux-64/ and
noarch/ with repodata.json in conda's format and tiny .tar.bz2 packages (info/index.json).

Python and what it needs, with the real names and the shape of their `depends`
(version ranges, a build-string match on python_abi); the stand-in conda takes an env's
Python from here when it is given the channel's URL.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

FOLDER = "pkgs/main"

# (subdir, name, version, build, depends), oldest first
RECORDS: list[tuple[str, str, str, str, list[str]]] = [
    ("linux-64", "ca-certificates", "2025.2.25", "h06a4308_0", []),
    ("linux-64", "libzlib", "1.3.1", "hb9d3cd8_2", []),
    ("linux-64", "openssl", "3.0.15", "h5eee18b_0", ["ca-certificates"]),
    ("linux-64", "openssl", "3.0.16", "h5eee18b_0", ["ca-certificates"]),
    ("noarch", "tzdata", "2025a", "h04d1e81_0", []),
    *(
        (
            "linux-64",
            "python",
            version,
            "h5148396_0",
            ["libzlib >=1.3.1,<2.0a0", "openssl >=3.0.15,<4.0a0", "tzdata", "pip"],
        )
        for version in ("3.10.16", "3.11.10", "3.11.11", "3.12.9")
    ),
    *(
        ("linux-64", "python_abi", minor, f"2_cp{minor.replace('.', '')}", [f"python {minor}.*"])
        for minor in ("3.10", "3.11", "3.12")
    ),
    ("noarch", "pip", "25.0", "pyhc872135_0", ["python >=3.9", "setuptools", "wheel"]),
    ("noarch", "setuptools", "75.8.0", "pyhd8ed1ab_0", ["python >=3.9"]),
    ("noarch", "wheel", "0.45.1", "pyhd8ed1ab_0", ["python >=3.8"]),
]


def _package(subdir: str, name: str, version: str, build: str, depends: list[str]) -> bytes:
    index = {"name": name, "version": version, "build": build, "build_number": 0,
             "depends": depends, "subdir": subdir, "license": "stand-in"}  # fmt: skip
    if subdir == "noarch":
        index["noarch"] = "python" if name != "tzdata" else "generic"
    data = json.dumps(index, indent=2).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:bz2") as tar:
        info = tarfile.TarInfo("info/index.json")
        info.size, info.mtime = len(data), 1704067200
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def build(root: Path) -> None:
    """<root>/pkgs/main/{linux-64,noarch}/ with repodata.json and the packages."""
    repodata: dict[str, dict[str, dict[str, object]]] = {"linux-64": {}, "noarch": {}}
    for subdir, name, version, build_, depends in RECORDS:
        folder = root / FOLDER / subdir
        folder.mkdir(parents=True, exist_ok=True)
        data = _package(subdir, name, version, build_, depends)
        filename = f"{name}-{version}-{build_}.tar.bz2"
        (folder / filename).write_bytes(data)
        record: dict[str, object] = {
            "name": name, "version": version, "build": build_, "build_number": 0,
            "depends": depends, "subdir": subdir, "size": len(data),
            "md5": hashlib.md5(data).hexdigest(), "sha256": hashlib.sha256(data).hexdigest(),
        }  # fmt: skip
        if subdir == "noarch":
            record["noarch"] = "python" if name != "tzdata" else "generic"
        repodata[subdir][filename] = record
    for subdir, packages in repodata.items():
        doc = {"info": {"subdir": subdir}, "packages": packages, "packages.conda": {},
               "removed": [], "repodata_version": 1}  # fmt: skip
        (root / FOLDER / subdir / "repodata.json").write_text(json.dumps(doc, indent=1))
