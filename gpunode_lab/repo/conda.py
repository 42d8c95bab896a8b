"""The stand-in Miniconda installer served by the lab repository.

It takes Miniconda's own flags (-b batch, -p PREFIX, -u update) and lays down PREFIX as a
virtual environment of the host's python3 with a small `conda` program in PREFIX/bin.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

INSTALLER = "Miniconda3-latest-Linux-x86_64.sh"

_HEAD = r"""#!/bin/sh
# Miniconda3 installer STAND-IN from gpunode's simulated lab. It installs a tiny `conda`
# whose environments are virtual environments of this host's python3.
set -eu
BATCH=0; UPDATE=0; PREFIX="$HOME/miniconda3"
while getopts "bfhp:su" x; do
    case "$x" in
        b) BATCH=1 ;;
        f) ;;
        p) PREFIX="$OPTARG" ;;
        s) ;;
        u) UPDATE=1 ;;
        h) echo "usage: $0 [-b] [-f] [-h] [-p PREFIX] [-s] [-u]  (gpunode lab stand-in)"; exit 2 ;;
        *) exit 2 ;;
    esac
done
if [ -e "$PREFIX" ] && [ "$UPDATE" = 0 ]; then
    echo "ERROR: File or directory already exists: '$PREFIX'" >&2
    echo "If you want to update an existing installation, use the -u option." >&2
    exit 1
fi
PY=$(command -v python3) || { echo "ERROR: python3 is required by this stand-in" >&2; exit 1; }
echo "PREFIX=$PREFIX"
echo "Unpacking payload ..."
mkdir -p "$PREFIX"
"$PY" -m venv "$PREFIX"
mkdir -p "$PREFIX/conda-meta" "$PREFIX/envs"
cat > "$PREFIX/bin/conda" <<'CONDA_STAND_IN_EOF'
"""

_TAIL = r"""CONDA_STAND_IN_EOF
sed -i "1s|^|#!$PREFIX/bin/python\n|" "$PREFIX/bin/conda"
chmod 755 "$PREFIX/bin/conda"
printf '==> %s <==\n# cmd: installer (gpunode lab stand-in)\n' "$(date '+%Y-%m-%d %H:%M:%S')" \
    > "$PREFIX/conda-meta/history"
echo "installation finished."
"""


def installer_text() -> str:
    program = (resources.files("gpunode_lab.repo") / "conda_standin.py").read_text()
    if "CONDA_STAND_IN_EOF" in program:
        raise ValueError("conda stand-in source contains the installer's heredoc marker")
    return _HEAD + program + _TAIL


def write_installer(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / INSTALLER
    path.write_text(installer_text())
    path.chmod(0o755)
    return path
