"""Small programs installed into every lab host in place of the machine's own.

They are the host's view of the simulated hardware: the power button (reboot and
friends ask the host's init, PID 1 of its namespace, to end), the PCI bus, the
firmware's Secure Boot state and the kernel it booted.
"""

from __future__ import annotations

from gpunode_lab.hostinit import MOK_LIST_VAR

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

PERSISTENCED_PID = "/run/nvidia-persistenced/nvidia-persistenced.pid"
SYSTEMCTL = (
    """\
#!/bin/sh
# gpunode lab stand-in for systemctl. Power verbs act on the simulated host. A unit whose
# file a lab package ships (marked "# gpunode lab unit"; ExecStart=, PIDFile=) is run:
# enable links it into
# multi-user.target.wants (the lab's init starts those at boot), start runs ExecStart and
# fails as systemd does when that exits non-zero, is-active reads the PIDFile's process.
# Every other unit and verb is accepted and ignored; restarts are counted.
verb=; units=; quiet=
for arg in "$@"; do
    case "$arg" in
        reboot|kexec) exec /usr/sbin/reboot ;;
        poweroff|halt) exec /usr/sbin/poweroff ;;
        is-system-running) echo running; exit 0 ;;
        -q|--quiet) quiet=1 ;;
        -*) ;;
        *) if [ -z "$verb" ]; then verb=$arg; else units="$units ${arg%.service}"; fi ;;
    esac
done
# a restart is counted per unit (/var/lib/gpunode-lab/restarts/UNIT, one line each)
case "$verb" in
    restart|try-restart|reload-or-restart)
        mkdir -p /var/lib/gpunode-lab/restarts
        for u in $units; do
            case "$u" in */*) continue ;; esac
            echo restart >> "/var/lib/gpunode-lab/restarts/$u"
        done ;;
esac
# nvidia-persistenced runs as a daemon with no unit file of the lab's: it needs the
# package's binary and a loaded nvidia module (the module's users cannot unload it)
"""
    + "pidf="
    + PERSISTENCED_PID
    + "\n"
    + """\
p_alive() { [ -f "$pidf" ] && [ -d "/proc/$(cat "$pidf")" ]; }
if [ "${units# }" = nvidia-persistenced ]; then
    case "$verb" in
        is-active)
            if p_alive; then [ -n "$quiet" ] || echo active; exit 0; fi
            [ -n "$quiet" ] || echo inactive; exit 3 ;;
        stop)
            if p_alive; then kill "$(cat "$pidf")"; fi
            rm -f "$pidf"; exit 0 ;;
        start|restart)
            [ "$verb" = restart ] && "$0" stop nvidia-persistenced
            p_alive && exit 0
            if [ ! -x /usr/bin/nvidia-persistenced ]; then
                echo "Failed to start nvidia-persistenced.service:" \\
                    "Unit nvidia-persistenced.service not found." >&2
                exit 5
            fi
            if [ ! -d /sys/module/nvidia ]; then
                echo "Job for nvidia-persistenced.service failed because the control" \\
                    "process exited with error code." >&2
                exit 1
            fi
            mkdir -p "${pidf%/*}"
            setsid sh -c 'echo $$ > "$0"; exec sleep infinity' "$pidf" </dev/null >/dev/null 2>&1 &
            for i in $(seq 50); do p_alive && exit 0; sleep 0.1; done
            exit 1 ;;
    esac
fi
wants=/etc/systemd/system/multi-user.target.wants
unit_file() {
    for d in /etc/systemd/system /lib/systemd/system /usr/lib/systemd/system; do
        f=$d/$1.service
        [ -f "$f" ] && grep -qx '# gpunode lab unit' "$f" && { echo "$f"; return 0; }
    done
    return 1
}
key() { sed -n "s/^$2=//p" "$1" | head -n 1; }
alive() {
    pidfile=$(key "$1" PIDFile)
    # /proc, not kill -0: `is-active` answers any user, as systemd's does
    [ -n "$pidfile" ] && [ -s "$pidfile" ] && [ -d "/proc/$(cat "$pidfile")" ]
}
say() { [ -n "$quiet" ] || echo "$@"; }
rc=0
for u in $units; do
    if ! f=$(unit_file "$u"); then
        echo "systemctl (gpunode lab): no lab unit $u, ignoring: $verb" >&2
        continue
    fi
    case "$verb" in
        enable) mkdir -p "$wants" && ln -sfn "$f" "$wants/$u.service"
                say "Created symlink $wants/$u.service -> $f." ;;
        disable) rm -f "$wants/$u.service" ;;
        is-enabled) if [ -e "$wants/$u.service" ]; then say enabled; else say disabled; rc=1; fi ;;
        is-active) if alive "$f"; then say active; else say inactive; rc=3; fi ;;
        start|restart)
            if [ "$verb" = restart ] && alive "$f"; then
                kill "$(cat "$(key "$f" PIDFile)")"; rm -f "$(key "$f" PIDFile)"
            fi
            alive "$f" && continue
            if ! sh -c "$(key "$f" ExecStart)" </dev/null >/dev/null 2>&1; then
                echo "Job for $u.service failed because the control process exited with" \\
                    "error code." >&2
                echo "See \\"systemctl status $u.service\\" and \\"journalctl -xeu" \\
                    "$u.service\\" for details." >&2
                rc=1
            fi ;;
        stop) if alive "$f"; then kill "$(cat "$(key "$f" PIDFile)")"; fi
              rm -f "$(key "$f" PIDFile)" ;;
        status) if alive "$f"; then echo "     Active: active (running)"
                else echo "     Active: inactive (dead)"; rc=3; fi ;;
        *) ;;
    esac
done
exit $rc
"""
)

LSPCI = """\
#!/bin/sh
# gpunode lab stand-in for lspci: lists the simulated GPUs and NVSwitches (like `lspci -nn`).
for dev in /sys/bus/pci/devices/*; do
    [ -f "$dev/vendor" ] || continue
    slot=${dev##*/}
    vendor=$(cut -c3- "$dev/vendor")
    device=$(cut -c3- "$dev/device")
    class=$(cut -c3-6 "$dev/class")
    label=$(cat "$dev/label" 2>/dev/null)
    case "$class" in
        0300) cname="VGA compatible controller" ;;
        0680) cname="Bridge" ;;
        *) cname="3D controller" ;;
    esac
    echo "${slot#0000:} $cname [$class]: NVIDIA Corporation $label [$vendor:$device] (rev a1)"
done
"""

# The firmware variable as efivarfs shows it: 4 attribute bytes, then 1 data byte.
SECURE_BOOT_VAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

MOKUTIL = f"""\
#!/bin/sh
# gpunode lab stand-in for mokutil: --sb-state, and --test-key against shim's enrolled keys
# (the lab's MokListRT holds the sha256 of each enrolled key's file).
var=/sys/firmware/efi/efivars/{SECURE_BOOT_VAR}
moks=/sys/firmware/efi/efivars/{MOK_LIST_VAR}
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
    --test-key|-t)
        key=${{2:-}}
        if [ -z "$key" ] || [ ! -r "$key" ]; then
            echo "Failed to open $key" >&2; exit 255
        fi
        sum=$(sha256sum < "$key" | cut -d' ' -f1)
        if [ -f "$moks" ] && tail -c +5 "$moks" | grep -qx "$sum"; then
            echo "$key is already enrolled"; exit 1
        fi
        echo "$key is not enrolled" ;;
    *) echo "mokutil (gpunode lab): only --sb-state and --test-key are simulated" >&2; exit 1 ;;
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


def _modprobe() -> str:
    from gpunode_lab.hostinit import nvrm_line

    nvrm = {f: nvrm_line("%s", f).replace("\n", "\\n") for f in ("open", "proprietary")}
    return (
        """\
#!/bin/sh
# gpunode lab stand-in for modprobe: the nvidia modules of the simulated GPUs. Loading nvidia
# loads what DKMS installed for the running kernel, at the installed driver's release, as the
# lab's boot does; unloading is refused while a process holds /dev/nvidia* (or the persistence
# daemon runs, which holds them), and for a module another loaded one uses, as the kernel does.
"""
        + _NEED_ROOT.replace("$1", "modprobe")
        + "pidf="
        + PERSISTENCED_PID
        + f"\nnvrm_open='{nvrm['open']}'\nnvrm_proprietary='{nvrm['proprietary']}'\n"
        + r"""state=/etc/gpunode-lab/module.json
k=$(uname -r)
remove=0; mods=
for a in "$@"; do
    case "$a" in
        -r|--remove) remove=1 ;;
        -*) ;;
        *) mods="$mods $a" ;;
    esac
done
[ -n "$mods" ] || { echo "modprobe: ERROR: missing parameters. See -h." >&2; exit 1; }
holds() { # whether a process holds a matching /dev/nvidia* file open; a GPU job's private
    # /dev (the gpu-busy knob's) reads from this namespace as a longer path ending so
    find /proc/[0-9]*/fd -maxdepth 1 -lname "*$1" 2>/dev/null | cut -d/ -f3 | grep -qvx "$$"
}
in_use() {
    case "$1" in
        nvidia) [ -d /sys/module/nvidia_uvm ] || [ -d /sys/module/nvidia_modeset ] && return 0
                { [ -f "$pidf" ] && [ -d "/proc/$(cat "$pidf")" ]; } && return 0
                holds '/dev/nvidia[0-9c]*' ;;
        nvidia_uvm) holds '/dev/nvidia-uvm*' ;;
        nvidia_modeset) [ -d /sys/module/nvidia_drm ] || holds '/dev/nvidia-modeset' ;;
        *) return 1 ;;
    esac
}
load() {
    [ -d "/sys/module/$1" ] && return 0
    case "$1" in
        nvidia) ;;
        nvidia_uvm|nvidia_modeset|nvidia_drm) load nvidia || return 1 ;;
        *) echo "modprobe: FATAL: Module $1 not found in directory /lib/modules/$k" >&2; return 1 ;;
    esac
    if [ ! -f "/lib/modules/$k/updates/dkms/nvidia.ko" ]; then
        echo "modprobe: FATAL: Module $1 not found in directory /lib/modules/$k" >&2; return 1
    fi
    if [ "$1" = nvidia ]; then
        if [ -d /sys/module/nouveau ]; then
            echo "modprobe: ERROR: could not insert 'nvidia': No such device" >&2; return 1
        fi
        read -r v f < /usr/share/gpunode-lab/driver-version || return 1
        [ "$f" = open ] || f=proprietary
        mkdir -p /sys/module/nvidia /proc/driver/nvidia
        echo "$v" > /sys/module/nvidia/version
        if [ "$f" = open ]; then fmt=$nvrm_open; else fmt=$nvrm_proprietary; fi
        printf "$fmt" "$v" > /proc/driver/nvidia/version
        printf '{"loaded": true, "version": "%s", "flavor": "%s", "kernel": "%s"}
'             "$v" "$f" "$k" > "$state"
        # the GPUs' device stand-ins, as the boot writes them (gpunode_lab/slurm.py)
        n=0; for c in /sys/bus/pci/devices/*/class; do
            case "$(cat "$c")" in 0x03*) mkdir -p /run/gpunode-lab-dev
                : > "/run/gpunode-lab-dev/nvidia$n"; n=$((n + 1)) ;; esac
        done
    fi
    mkdir -p "/sys/module/$1" && echo live > "/sys/module/$1/initstate"
}
unload() {
    if [ ! -d "/sys/module/$1" ]; then
        echo "modprobe: FATAL: Module $1 is not in kernel." >&2; return 1
    fi
    if in_use "$1"; then echo "modprobe: FATAL: Module $1 is in use." >&2; return 1; fi
    rm -rf "/sys/module/$1"
    if [ "$1" = nvidia ]; then
        rm -rf /proc/driver/nvidia /run/gpunode-lab-dev
        printf '{"loaded": false, "version": null, "flavor": null, "kernel": "%s"}
' "$k"             > "$state"
    fi
}
rc=0
for m in $mods; do
    if [ $remove = 1 ]; then unload "$m" || rc=1; else load "$m" || exit 1; fi
done
exit $rc
"""
    )


MODPROBE = _modprobe()

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
    "usr/sbin/modprobe": MODPROBE,
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
