"""A torchrun for lab hosts: the machine's real torchrun (CPU torch, gloo) behind a front.

Lab hosts share the machine's network and see its files, so a real torchrun started on
each host really meets the others at a rendezvous on their loopback addresses. What the
lab cannot give is NCCL: the front records the argv and environment it was started with
(for tests to read), prints the INFO lines NCCL prints when it picks its network, and
then hands over to the real torchrun. The network it reports is the host's fabric, read
from FABRIC_FILE (`Socket` unless that file says `IB`): the lab has no InfiniBand, so a
host reports IB only when a test says it has one.
"""

from __future__ import annotations

import os
import shlex

PREFIX = "/opt/gpunode-lab-torch"
BIN = f"{PREFIX}/bin"
RECORD = "/var/tmp/gpunode-lab-torchrun"
FABRIC_FILE = f"{PREFIX}/fabric"

_FRONT = """\
#!/bin/sh
# gpunode lab stand-in for torchrun: record, print NCCL's network lines, run the real one.
printf '%s\\n' "$@" > {record}.argv
env > {record}.env
net=$(cat {fabric} 2>/dev/null || echo Socket)
case "$net" in IB) dev="[0]mlx5_0:1/IB" ;; *) net=Socket; dev="[0]lo:127.0.0.1<0>" ;; esac
host=$(hostname)
echo "$host:$$:$$ [0] NCCL INFO NET/$net : Using $dev"
echo "$host:$$:$$ [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/$net/0"
echo "$host:$$:$$ [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/$net/0"
exec {real} "$@"
"""


def front(real_torchrun: str) -> str:
    """The stand-in's text, handing over to `real_torchrun`."""
    return _FRONT.format(record=RECORD, fabric=FABRIC_FILE, real=shlex.quote(real_torchrun))


def install_command(real_torchrun: str, fabric: str = "Socket") -> str:
    """Shell text (run as root on the host) that installs the stand-in and the fabric, with
    the real torchrun's python beside it (gpunode runs the rendezvous store's launcher with
    the python in torchrun's folder)."""
    text = front(real_torchrun)
    # a front, not a link: a venv's python finds its packages from the path it was run by
    python = (
        "#!/bin/sh\nexec " + shlex.quote(os.path.dirname(real_torchrun) + "/python") + ' "$@"\n'
    )
    return (
        f"mkdir -p {BIN} && rm -f {BIN}/python && "
        f"printf %s {shlex.quote(python)} > {BIN}/python && "
        f"chmod 755 {BIN}/python && "
        f"printf %s {shlex.quote(text)} > {BIN}/torchrun && "
        f"chmod 755 {BIN}/torchrun && printf %s {shlex.quote(fabric)} > {FABRIC_FILE} && "
        f"rm -f {RECORD}.argv {RECORD}.env"
    )
