"""Small programs installed into every lab host in place of the machine's own.

They are the host's view of the simulated hardware: the power button (reboot and
friends ask the host's init, PID 1 of its namespace, to end), the PCI bus, the
firmware's Secure Boot state and the kernel it booted.
"""

from __future__ import annotations

_NEED_ROOT = """\
if [ "$(id -u)" != 0 ]; then
    echo "Call to $1 failed: Access denied" >&2
    exit 1
fi
"""

# SIGINT to PID 1 is ctrl-alt-del (reboot); SIGTERM to our init is power-off.
REBOOT = (
    "#!/bin/sh\n# gpunode lab stand-in: ask the host's init to reboot.\n"
    + _NEED_ROOT.replace("$1", "Reboot")
    + "sync\nkill -INT 1\nsleep 30\n"
)

POWEROFF = (
    "#!/bin/sh\n# gpunode lab stand-in: ask the host's init to power off.\n"
    + _NEED_ROOT.replace("$1", "PowerOff")
    + "sync\nkill -TERM 1\nsleep 30\n"
)

SHUTDOWN = """\
#!/bin/sh
# gpunode lab stand-in for shutdown(8): -r reboots, anything else powers off.
action=poweroff
for arg in "$@"; do
    case "$arg" in
        -r|--reboot) action=reboot ;;
        -c) echo "No scheduled shutdown to cancel." >&2; exit 0 ;;
    esac
done
exec /usr/sbin/$action
"""

SYSTEMCTL = """\
#!/bin/sh
# gpunode lab stand-in for systemctl: the lab's hosts have no systemd.
# Power verbs act on the simulated host; a restart is counted per unit (in
# /var/lib/gpunode-lab/restarts/UNIT, one line each); every other verb is ignored.
case "$1" in
    restart|try-restart|reload-or-restart)
        shift
        mkdir -p /var/lib/gpunode-lab/restarts
        for unit in "$@"; do
            case "$unit" in -*|*/*) continue ;; esac
            echo restart >> "/var/lib/gpunode-lab/restarts/${unit%.service}"
        done
        exit 0 ;;
esac
for arg in "$@"; do
    case "$arg" in
        reboot|kexec) exec /usr/sbin/reboot ;;
        poweroff|halt) exec /usr/sbin/poweroff ;;
        -*) ;;
        is-system-running) echo running; exit 0 ;;
        *) echo "systemctl (gpunode lab, no systemd): ignoring: $*" >&2; exit 0 ;;
    esac
done
exit 0
"""

LSPCI = """\
#!/bin/sh
# gpunode lab stand-in for lspci: lists the simulated GPUs (like `lspci -nn`).
for dev in /sys/bus/pci/devices/*; do
    [ -f "$dev/vendor" ] || continue
    slot=${dev##*/}
    vendor=$(cut -c3- "$dev/vendor")
    device=$(cut -c3- "$dev/device")
    class=$(cut -c3-6 "$dev/class")
    label=$(cat "$dev/label" 2>/dev/null)
    case "$class" in
        0300) cname="VGA compatible controller" ;;
        *) cname="3D controller" ;;
    esac
    echo "${slot#0000:} $cname [$class]: NVIDIA Corporation $label [$vendor:$device] (rev a1)"
done
"""

# The firmware variable as efivarfs shows it: 4 attribute bytes, then 1 data byte.
SECURE_BOOT_VAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

MOKUTIL = f"""\
#!/bin/sh
# gpunode lab stand-in for mokutil: only --sb-state.
var=/sys/firmware/efi/efivars/{SECURE_BOOT_VAR}
case "$1" in
    --sb-state)
        if [ ! -f "$var" ]; then
            echo "EFI variables are not supported on this system" >&2; exit 1
        fi
        if [ "$(od -An -tu1 -j4 -N1 "$var" | tr -d ' ')" = 1 ]; then
            echo "SecureBoot enabled"
        else
            echo "SecureBoot disabled"
        fi ;;
    *) echo "mokutil (gpunode lab): only --sb-state is simulated" >&2; exit 1 ;;
esac
"""

# Holds apt's frontend lock the way a running unattended-upgrade does (fcntl, not flock).
DPKG_LOCKER = """\
import fcntl, os, signal, time
os.makedirs("/var/lib/dpkg", exist_ok=True)
fds = []
for path in ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock"):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    fds.append(fd)
with open("/run/gpunode-lab-dpkg-lock.pid", "w") as f:
    f.write(str(os.getpid()))
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
while True:
    time.sleep(3600)
"""

# A GPU job: holds /dev/nvidia0 open (a file on a tmpfs over /dev in a mount namespace of its
# own, so the controller's /dev is untouched) and says who it is for nvidia-smi's stand-in.
GPU_BUSY_PY = """\
import json, os, signal, sys, time
fd = os.open("/dev/nvidia0", os.O_RDWR)
with open("/run/gpunode-lab-gpu-busy.json", "w") as f:
    json.dump({"pid": os.getpid(), "memory_mib": int(sys.argv[1])}, f)
with open("/run/gpunode-lab-gpu-busy.pid", "w") as f:
    f.write(str(os.getpid()))
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
while True:
    time.sleep(3600)
"""
# $GPU_BUSY_PY and $GPU_BUSY_MIB in the environment
GPU_BUSY_SH = """\
setsid unshare -m \\
  sh -c 'mount -t tmpfs gpu-busy /dev && : > /dev/nvidia0 && exec python3 -c "$0" "$1"' \\
  "$GPU_BUSY_PY" "$GPU_BUSY_MIB" </dev/null >/dev/null 2>&1 &
for i in $(seq 50); do [ -f /run/gpunode-lab-gpu-busy.pid ] && exit 0; sleep 0.1; done
echo 'the GPU job did not start' >&2; exit 1
"""
GPU_IDLE_SH = (
    "f=/run/gpunode-lab-gpu-busy; [ -f $f.pid ] && kill $(cat $f.pid); rm -f $f.pid $f.json; true"
)
# The kernel release is the machine's for every namespace; a lab host reports the kernel it
# booted (hostinit writes it), so that installing a newer kernel and rebooting shows.
UNAME = """\
#!/bin/sh
# gpunode lab stand-in for uname: the kernel release is the one this host booted.
k=$(cat /run/gpunode-lab-kernel 2>/dev/null)
[ -n "$k" ] || exec /bin/uname "$@"
case "$*" in
    -r|--kernel-release) echo "$k" ;;
    -a|--all) /bin/uname -a | awk -v k="$k" '{ $3 = k; print }' ;;
    *) exec /bin/uname "$@" ;;
esac
"""
# The lab's initramfs is text: the kernel it is for and the `blacklist` lines of modprobe.d
# it carries, the same for the same configuration (so runs can be compared file by file). The
# lab's boot reads it: nouveau loads from the initramfs unless the image blacklists it, as
# on Ubuntu, where a blacklist written after the image was built has no effect at boot.
UPDATE_INITRAMFS = (
    """\
#!/bin/sh
# gpunode lab stand-in for update-initramfs: -c/-u write, -d removes /boot/initrd.img-VERSION.
"""
    + _NEED_ROOT.replace("$1", "update-initramfs")
    + r"""
mode=; version=
while [ $# -gt 0 ]; do
    case "$1" in
        -c|-u|-d) mode=$1 ;;
        -k) shift; version=$1 ;;
        -v|-t) ;;
        -b) shift ;;
        *) echo "Usage: update-initramfs {-c|-d|-u} [-k version] [-v] [-b directory]" >&2
           exit 2 ;;
    esac
    shift
done
[ -n "$mode" ] || { echo "Usage: update-initramfs {-c|-d|-u} [-k version]" >&2; exit 2; }
if [ "$version" = all ]; then
    versions=$(ls /boot | sed -n 's/^initrd\.img-//p')
else
    versions=${version:-$(uname -r)}
fi
for v in $versions; do
    img=/boot/initrd.img-$v
    if [ "$mode" = -d ]; then
        rm -f "$img"; continue
    fi
    echo "update-initramfs: Generating $img"
    tmp=$(mktemp /boot/.initrd.XXXXXX) || exit 1
    {
        echo "gpunode lab initramfs for $v"
        cat /etc/modprobe.d/*.conf /usr/lib/modprobe.d/*.conf 2>/dev/null \
            | awk '$1 == "blacklist" && $2 ~ /^[A-Za-z0-9_-]+$/ { print "blacklist " $2 }' \
            | sort -u
    } > "$tmp" && chmod 0644 "$tmp" && mv -f "$tmp" "$img" || { rm -f "$tmp"; exit 1; }
done
"""
)

STANDINS: dict[str, str] = {
    "usr/sbin/reboot": REBOOT,
    "usr/sbin/poweroff": POWEROFF,
    "usr/sbin/halt": POWEROFF,
    "usr/sbin/shutdown": SHUTDOWN,
    "usr/bin/systemctl": SYSTEMCTL,
    "usr/local/bin/lspci": LSPCI,
    "usr/local/bin/mokutil": MOKUTIL,
    "usr/local/bin/uname": UNAME,
    "usr/sbin/update-initramfs": UPDATE_INITRAMFS,
}


# A container engine for the container toolkit: `docker run` starts a GPU container only
# through the nvidia runtime (--gpus, as daemon.json names it) or a CDI device the spec
# lists, and only from an image the host already has (the lab pulls nothing).
DOCKER = """\
#!/bin/sh
# gpunode lab stand-in for docker: images are names in /var/lib/docker/gpunode-lab-images.
images=/var/lib/docker/gpunode-lab-images
case "$1" in
    --version) echo "Docker version 27.5.1, build 9f9e405 (gpunode lab)"; exit 0 ;;
    image)
        [ "$2" = inspect ] && grep -qxF -- "$3" "$images" 2>/dev/null && { echo "[{}]"; exit 0; }
        echo "Error response from daemon: No such image: $3" >&2; exit 1 ;;
    run) shift ;;
    *) echo "docker (gpunode lab): unsupported: $*" >&2; exit 1 ;;
esac
gpus=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rm) shift ;;
        --gpus) gpus=runtime; shift 2 ;;
        --gpus=*) gpus=runtime; shift ;;
        --device) gpus="cdi:$2"; shift 2 ;;
        --device=*) gpus="cdi:${1#--device=}"; shift ;;
        -*) echo "docker (gpunode lab): unsupported option $1" >&2; exit 125 ;;
        *) break ;;
    esac
done
image=$1; shift
grep -qxF -- "$image" "$images" 2>/dev/null || {
    echo "docker: Error response from daemon: No such image: $image" >&2; exit 125; }
case "$gpus" in
    runtime)
        grep -qs '"nvidia-container-runtime"' /etc/docker/daemon.json || {
            printf '%s%s\\n' 'docker: Error response from daemon: could not select device' \\
                ' driver "" with capabilities: [[gpu]].' >&2
            exit 125; } ;;
    cdi:*)
        nvidia-ctk cdi list 2>/dev/null | grep -qxF -- "${gpus#cdi:}" || {
            printf '%s%s\\n' 'docker: Error response from daemon: CDI device injection' \\
                " failed: unresolvable CDI devices ${gpus#cdi:}." >&2
            exit 125; } ;;
esac
exec "$@"
"""

CONTAINERD = """\
#!/bin/sh
# gpunode lab stand-in for containerd.
case "$1" in
    --version|-v) echo "containerd github.com/containerd/containerd 1.7.27 (gpunode lab)" ;;
    *) echo "containerd (gpunode lab): not a daemon here" >&2; exit 1 ;;
esac
"""
