# gpunode facts: everything the planner needs, in one run. POSIX sh, no Python.
# Every section is independent: a missing tool leaves its section empty.
# Arguments: [--conda PREFIX]... [--file PATH]... [--df PATH]... [--package PATTERN]...
#   [--only-files]
LC_ALL=C
export LC_ALL
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/nvidia/bin:$PATH
conda_prefixes="/opt/conda /opt/miniconda3 /opt/miniforge3"
files=""
only_files=""
apt_names=""
apt_kernel=""
df_paths=""
packages=""
while [ $# -gt 0 ]; do
  case "$1" in
    --conda) conda_prefixes="$conda_prefixes $2"; shift 2 ;;
    --file) files="$files
$2"; shift 2 ;;
    --apt) apt_names="$apt_names $2"; shift 2 ;;
    --apt-kernel) apt_kernel="$apt_kernel $2"; shift 2 ;;
    --df) df_paths="$df_paths $2"; shift 2 ;;
    --package) packages="$packages $2"; shift 2 ;;
    --only-files) only_files=1; shift ;;
    *) shift ;;
  esac
done
have() { command -v "$1" >/dev/null 2>&1; }
# a file's lines as cat prints them (a last line without its newline gets one), no process
put() { while IFS= read -r line || [ -n "$line" ]; do printf '%s\n' "$line"; done < "$1"; }
section() { printf '\n### %s\n' "$1"; }
# each --file: sha256, mode, owner and ids, or why there is no sha256
hash_one() {
  if [ -r "$1" ]; then
    printf '%s\t%s\t%s\n' "$(sha256sum < "$1" | cut -d' ' -f1)" \
      "$(stat --printf '%a\t%U:%G\t%u:%g' -- "$1")" "$1"
  elif [ -e "$1" ]; then
    printf 'unreadable\t%s\t%s\n' "$(stat --printf '%a\t%U:%G\t%u:%g' -- "$1")" "$1"
  else
    printf 'absent\t%s\n' "$1"
  fi
}
# One sha256sum and one stat for all the readable files (a process per file cost more than
# the hashing); when they do not answer a line for each (a file gone or replaced meanwhile),
# each file is read alone.
hash_files() {
  ok="" n=0
  while IFS= read -r f; do
    [ -n "$f" ] || continue
    if [ -f "$f" ] && [ -r "$f" ]; then
      ok="${ok:+$ok
}$f" n=$((n + 1))
    else
      hash_one "$f"
    fi
  done <<EOF
$files
EOF
  [ "$n" -gt 0 ] || return 0
  set -f; old_ifs=$IFS; IFS='
'
  set -- $ok
  sums=$(sha256sum -- "$@" 2>/dev/null | cut -c1-64)
  attrs=$(stat --printf '%a\t%U:%G\t%u:%g\n' -- "$@" 2>/dev/null)
  set -- $sums; ns=$#
  set -- $attrs; na=$#
  IFS=$old_ifs; set +f
  if [ "$ns" -eq "$n" ] && [ "$na" -eq "$n" ]; then
    printf '%s\n' "$sums" | paste - /dev/fd/3 /dev/fd/4 3<<EOF 4<<EOF
$attrs
EOF
$ok
EOF
  else
    while IFS= read -r f; do hash_one "$f"; done <<EOF
$ok
EOF
  fi
}
# --only-files: the files a plan named after the facts were read, in the probes' round trip
if [ -n "$only_files" ]; then section files; hash_files; section end; exit 0; fi

# The slow questions no other section waits on (nvidia-smi reaching the driver, lspci's
# walk of every PCI device and its names database, dpkg's database, `dkms status`, every
# process's open files) run beside the rest from the start, into a folder only this user
# can read (`early`); their sections print what they said (`late`) and come last. Without
# that folder each runs in its own section's place.
smi_file= smi_pid= work= early_jobs=
early() {  # NAME FUNCTION
  [ -n "$work" ] || return 0
  "$2" >"$work/$1" 2>/dev/null &
  early_jobs="$early_jobs $!"
}
# every early question answered (waited for here, in the script's own shell: a pipeline's
# subshell cannot wait for them)
settle() { for job in $early_jobs; do wait "$job"; done; }
late() {  # NAME FUNCTION, after settle: with the folder, every question was asked early
  if [ -n "$work" ]; then put "$work/$1"; else "$2" 2>/dev/null; fi
}
gpu_query() {
  nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,memory.used,utilization.gpu,temperature.gpu,power.draw,power.limit,clocks.sm,persistence_mode,driver_version --format=csv,noheader,nounits 2>&1
}
nvidia_pci() { have lspci && lspci -nn -D -d 10de:; }
installed() {
  have dpkg-query || return 0
  # the stack components' patterns (gpunode.components), for dpkg to expand, not the shell
  set -f
  # shellcheck disable=SC2086
  dpkg-query -W -f '${Package}\t${Version}\t${Status}\n' $packages 2>/dev/null |
    grep -v -e '	not-installed$' -e 'ok not-installed$'
  set +f
}
dkms_status() { have dkms && dkms status; }
# the pids with a /dev/nvidia* open (one find, no psmisc)
nvidia_users() { find /proc/[0-9]*/fd -maxdepth 1 -lname '/dev/nvidia*' | cut -d/ -f3 | sort -u; }
if work=$(mktemp -d 2>/dev/null); then
  trap 'rm -rf "$work"' EXIT
  if have nvidia-smi; then
    smi_file=$work/smi
    gpu_query >"$smi_file" 2>&1 &
    smi_pid=$!
  fi
  early lspci nvidia_pci
  early packages installed
  early dkms dkms_status
  early users nvidia_users
fi
# the running kernel, asked once (a lab host's or a container's uname may be a script)
running=$(uname -r)
section hostname
# what `hostname` prints (the kernel's name for the host), without a process
if [ -r /proc/sys/kernel/hostname ] && read -r name < /proc/sys/kernel/hostname; then
  printf '%s\n' "$name"
else
  hostname 2>/dev/null
fi
section os-release
put /etc/os-release 2>/dev/null
section arch
if have dpkg; then dpkg --print-architecture; else uname -m; fi
section kernel
printf '%s\n' "$running"
section boot-id
read -r boot_id < /proc/sys/kernel/random/boot_id && printf '%s\n' "$boot_id"
section secure-boot
if have mokutil; then
  printf 'mokutil: '; mokutil --sb-state 2>&1 | head -n 2 | tr '\n' ' '; echo
fi
if [ -d /sys/firmware/efi ]; then
  for v in /sys/firmware/efi/efivars/SecureBoot-*; do
    [ -r "$v" ] && printf 'efivar: %s\n' "$(od -An -tu1 "$v" 2>/dev/null | tr -s ' \n' '  ')"
  done
  echo efi: yes
else
  echo efi: no
fi
# --- the DKMS signing key (Ubuntu's shim-signed MOK): present, and enrolled in shim ---
mok=/var/lib/shim-signed/mok/MOK.der
if [ -e "$mok" ]; then
  echo 'mok-key: present'
  have mokutil && printf 'mok-test: %s\n' "$(mokutil --test-key "$mok" 2>&1 | head -n 1)"
else
  echo 'mok-key: absent'
fi
# --- end DKMS signing key ---
section disks
# every filesystem a package change writes to (gpunode.compat.paths: apt's archives, /boot,
# /usr/local/cuda-X.Y, ...), at df's mount; a path not made yet counts on its nearest
# existing parent. The arguments were all read above: "$@" is free.
set --
for p in / /var /var/cache/apt/archives /boot $df_paths; do
  while [ ! -e "$p" ]; do p=${p%/*}; p=${p:-/}; done
  set -- "$@" "$p"
done
df -P -T -B1 -- "$@" 2>/dev/null
section pci
for d in /sys/bus/pci/devices/*; do
  [ -r "$d/vendor" ] || continue
  read -r ven < "$d/vendor"; read -r dev < "$d/device"; read -r cls < "$d/class"
  [ "$ven" = 0x10de ] && printf '%s %s %s %s\n' "${d##*/}" "$ven" "$dev" "$cls"
done
section module
[ -r /sys/module/nvidia/version ] && read -r v < /sys/module/nvidia/version && printf 'nvidia %s\n' "$v"
[ -d /sys/module/nvidia ] && echo 'nvidia loaded'
[ -d /sys/module/nouveau ] && echo 'nouveau loaded'
section proc-driver
put /proc/driver/nvidia/version 2>/dev/null
section apt-sources
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -r "$f" ] || continue
  if grep -qiE 'nvidia|cuda' "$f"; then printf '==> %s\n' "$f"; cat "$f"; echo; fi
done
section keyrings
for f in /usr/share/keyrings/*cuda* /usr/share/keyrings/*nvidia* /etc/apt/keyrings/*cuda* \
         /etc/apt/keyrings/*nvidia* /etc/apt/trusted.gpg.d/*cuda* /etc/apt/trusted.gpg.d/*nvidia*; do
  [ -e "$f" ] && echo "$f"
done
section toolkits
for d in /usr/local/cuda-*; do
  # cuda-13 -> cuda-13.0 is the cuda-13 alternative, not a toolkit of its own
  [ -d "$d" ] && [ ! -L "$d" ] || continue
  case "${d##*/cuda-}" in *[!0-9.]*) continue ;; esac
  printf 'dir %s\n' "$d"
  if [ -x "$d/bin/nvcc" ]; then
    printf 'nvcc %s %s\n' "$d" "$("$d/bin/nvcc" --version 2>/dev/null | grep -o 'V[0-9][0-9.]*' | head -n 1)"
  fi
done
section cuda-alternative
[ -e /usr/local/cuda ] && readlink -f /usr/local/cuda
# auto or manual: in auto mode a toolkit's next install may move it
[ -r /var/lib/dpkg/alternatives/cuda ] && IFS= read -r mode < /var/lib/dpkg/alternatives/cuda &&
  printf 'mode %s\n' "$mode"
section cudnn
for f in /usr/include/cudnn_version.h /usr/include/x86_64-linux-gnu/cudnn_version.h \
         /usr/include/aarch64-linux-gnu/cudnn_version.h /usr/local/cuda/include/cudnn_version.h; do
  [ -r "$f" ] && grep -E '^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ' "$f" && break
done
section nccl
for f in /usr/include/nccl.h /usr/include/x86_64-linux-gnu/nccl.h /usr/local/cuda/include/nccl.h; do
  [ -r "$f" ] && grep -E '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$f" && break
done
# The first directory of $1 (itself, then each parent up to /; the path as written, then
# after symlinks) that is not root's alone: "UID MODE DIR". A user who can write one could
# plant PREFIX/bin/conda, which root would run.
unsafe_dir() {
  # every existing directory from the prefix (and where it resolves to) up to /, in that
  # order, through one stat: the first not root's, or group/other-writable, is named
  start=$1
  set --
  # where it resolves to is the prefix itself unless a component is a symbolic link
  resolved=$start d=$start
  while [ -n "$d" ] && [ "$d" != / ]; do
    if [ -L "$d" ]; then resolved=$(readlink -f -- "$start" 2>/dev/null); break; fi
    d=${d%/*}
  done
  for path in "$start" "$resolved"; do
    d=$path
    while [ -n "$d" ]; do
      if [ -e "$d" ] || [ -L "$d" ]; then set -- "$@" "$d"; fi
      [ "$d" = / ] && break
      d=${d%/*}; d=${d:-/}
    done
  done
  [ $# -gt 0 ] || return 0
  # a directory stat cannot read is unsafe too: then each is asked alone, "x x DIR" for it
  lines=$(stat -c '%u %a %F|%n' -- "$@" 2>/dev/null) ||
    lines=$(for d in "$@"; do stat -c '%u %a %F|%n' -- "$d" 2>/dev/null || echo "x x x|$d"; done)
  printf '%s\n' "$lines" | while IFS='|' read -r info d; do
    set -- $info x x x
    if [ "$1" != 0 ]; then printf '%s %s %s\n' "$1" "$2" "$d"; break; fi
    case "$3 $2" in
      "symbolic "*) ;;
      *[2367]?|*[2367]) printf '%s %s %s\n' "$1" "$2" "$d"; break ;;
    esac
  done
}
section conda
for p in $conda_prefixes; do
  u=$(unsafe_dir "$p")
  # an unsafe prefix is named, never reported as a conda to use (nothing there is run)
  if [ -n "$u" ]; then printf 'unsafe %s %s\n' "$p" "$u"; continue; fi
  [ -x "$p/bin/conda" ] || continue
  printf 'prefix %s\n' "$p"
  for m in "$p"/conda-meta/conda-[0-9]*.json; do [ -e "$m" ] && printf 'version %s\n' "${m##*/}"; done
  for e in "$p" "$p"/envs/*; do
    [ -d "$e/conda-meta" ] || continue
    printf 'env %s\n' "$e"
    for m in "$e"/conda-meta/python-[0-9]*.json "$e"/conda-meta/pytorch-[0-9]*.json \
             "$e"/conda-meta/tensorflow-[0-9]*.json; do
      [ -e "$m" ] && printf 'meta %s\n' "${m##*/}"
    done
    for m in "$e"/lib/python*/site-packages/torch-*.dist-info \
             "$e"/lib/python*/site-packages/tensorflow-*.dist-info; do
      [ -e "$m" ] && printf 'dist %s\n' "${m##*/}"
    done
  done
done
section dpkg-lock
# /proc/locks names the holder without needing root (fuser would): the pid on each line
# whose inode is a dpkg lock's; one stat and one awk for both locks, the front end's first
# (awk: a shell loop over /proc/locks costs ms per hundred lines)
set --
for l in /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock; do [ -e "$l" ] && set -- "$@" "$l"; done
[ $# -gt 0 ] && locks=$(stat -c '%i %n' -- "$@" 2>/dev/null) && [ -n "$locks" ] &&
  locks="$locks" awk '
    BEGIN { n = split(ENVIRON["locks"], line, "\n")
            for (i = 1; i <= n; i++) { split(line[i], w, " "); ino[i] = ":" w[1]; path[i] = w[2] } }
    { for (i = 1; i <= n; i++)
        if (substr($6, length($6) - length(ino[i]) + 1) == ino[i]) held[i] = held[i] " " $5 }
    END { for (i = 1; i <= n; i++) { m = split(held[i], p, " ")
            for (j = 1; j <= m; j++) print path[i], p[j] } }' /proc/locks |
    while read -r l pid; do printf '%s %s %s\n' "$l" "$pid" "$(cat "/proc/$pid/comm" 2>/dev/null)"; done
section dpkg-audit
# its first five entries (any at all: dpkg was cut before it read its journal)
n=0
for f in /var/lib/dpkg/updates/.[!.]* /var/lib/dpkg/updates/..?* /var/lib/dpkg/updates/*; do
  [ -e "$f" ] || [ -L "$f" ] || continue
  [ "$n" -lt 5 ] || break
  printf 'updates %s\n' "${f##*/}"; n=$((n + 1))
done
# what `dpkg --audit` reports (package and state), read straight from the status file
# (a tenth of the time)
[ -r /var/lib/dpkg/status ] && awk '/^Package: /{p=$2} /^Status: /{s=$4
  if (s ~ /^(half-installed|unpacked|half-configured|triggers-awaited|triggers-pending)$/)
    print "audit", p, s}' /var/lib/dpkg/status | head -n 20
section files
hash_files
# --- kernels and DKMS: installed kernels, the next boot's, headers, `dkms status` ---
section kernels
# the running kernel counts without its /boot image: a PXE-booted (diskless) host has none
# /lib/modules/* in sorted order; the running kernel sorted in only when it is not there
kernels=
for d in /lib/modules/*; do [ -e "$d" ] && kernels="$kernels ${d##*/}"; done
case " $kernels " in
  *" $running "*) ;;
  *) kernels=$(printf '%s\n' $kernels "$running" | sort -u) ;;
esac
for k in $kernels; do
  d=/lib/modules/$k
  [ -e "/boot/vmlinuz-$k" ] || [ "$k" = "$running" ] || continue
  printf 'installed %s\n' "$k"
  if [ -d "/usr/src/linux-headers-$k" ] || [ -e "$d/build" ]; then printf 'headers %s\n' "$k"; fi
done
[ -L /boot/vmlinuz ] && printf 'next %s\n' "$(readlink /boot/vmlinuz)"
# (`dkms status`: its section is last, beside the other slow questions)
# --- end of kernels and DKMS ---
# --- holds: which holds gpunode set itself (the rest are the admin's) ---
section gpunode-holds
[ -r /var/lib/gpunode/holds ] && put /var/lib/gpunode/holds
# --- end holds ---
# --- the step journal: changes begun and not ended (KEY.json, one line; KEY.step) ---
section journal
for f in /var/lib/gpunode/journal/*.json; do
  [ -r "$f" ] || continue
  k=${f%.json}; n=$(cat "$k.step" 2>/dev/null)
  printf 'entry %s %s %s\n' "${k##*/}" "${n:-1}" "$(head -n 1 "$f")"
done
# --- end journal ---
# --- NVSwitch fabric: each GPU's fabric state, asked only where NVSwitches are (an NVIDIA
# function of class 0x0680 on the bus); an nvidia-smi without the query fields has -q's ---
section fabric
nvsw=
for d in /sys/bus/pci/devices/*; do
  [ -r "$d/class" ] || continue
  read -r ven < "$d/vendor"; read -r cls < "$d/class"
  [ "$ven" = 0x10de ] && case "$cls" in 0x0680*) nvsw=1 ;; esac
done
if [ -n "$nvsw" ] && have nvidia-smi; then
  nvidia-smi --query-gpu=pci.bus_id,fabric.state,fabric.status --format=csv,noheader 2>&1 ||
    nvidia-smi -q 2>&1 | awk '/^GPU /{print; next} /^    Fabric$/{f=1; next}
      /^    [^ ]/{f=0} f && /^        (State|Status) /{print}'
fi
# --- end fabric ---
# --- Ubuntu's archive as apt sees it: each --apt name, and each --apt-kernel prefix for the
# running kernel and the one /boot/vmlinuz boots next (driver source: ubuntu) ---
section apt-versions
if [ -n "$apt_names$apt_kernel" ] && have apt-cache; then
  next=$(readlink /boot/vmlinuz 2>/dev/null); next=${next##*/vmlinuz-}; next=${next#vmlinuz-}
  names=$apt_names
  for p in $apt_kernel; do
    names="$names $p-$running"
    [ -n "$next" ] && names="$names $p-$next"
  done
  # shellcheck disable=SC2086  # names are single words (validated package names)
  apt-cache madison $names 2>/dev/null
fi
# --- end apt-versions ---
# --- containers: the runtimes installed and the driver the CDI spec was written for ---
section containers
for r in docker containerd; do have "$r" && printf 'runtime %s\n' "$r"; done
if [ -r /etc/cdi/nvidia.yaml ]; then
  printf 'cdi-spec\n'
  sed -n 's/^.*libcuda\.so\.\([0-9][0-9.]*[0-9]\) *$/cdi-driver \1/p' /etc/cdi/nvidia.yaml | head -n 1
fi
# --- end containers ---
# --- the slow questions, last: they ran beside every section above ---
settle
section lspci
late lspci nvidia_pci
section packages
late packages installed
section dkms
late dkms dkms_status
section smi-query
# smi_idle: every GPU answered with 0 MiB in use. A CUDA context holds device memory, so
# then no process computes on them and the compute-apps query (gpu-procs) is not needed.
smi_idle=
smi=
if [ -n "$smi_file" ]; then
  wait "$smi_pid"
  rc=$?
  smi=$(put "$smi_file")
elif have nvidia-smi; then  # no temporary file could be made: run it here
  smi=$(gpu_query)
  rc=$?
else
  rc=missing
fi
[ -n "$smi" ] && printf '%s\n' "$smi"
echo "rc=$rc"
if [ "$rc" = 0 ] && [ -n "$smi" ]; then
  smi_idle=yes
  while IFS=, read -r _ _ _ _ _ used _; do
    [ "$used" = " 0" ] || smi_idle=
  done <<EOF
$smi
EOF
fi
section gpu-procs
# What uses the GPUs: nvidia-smi's compute apps (unless smi_idle), then every process
# holding /dev/nvidia* open (one find, no psmisc). nvidia-persistenced holds them by design
# and nvidia-smi only reads them; neither is a workload.
if have nvidia-smi && [ -z "$smi_idle" ]; then
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits \
    2>/dev/null | sed -n 's/^ *\([0-9]\)/app \1/p'
fi
late users nvidia_users | while read -r pid; do
    [ "$pid" = "$$" ] && continue
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
    case "$comm" in nvidia-persistenc*|nvidia-smi) continue ;; esac
    printf 'holder %s %s\n' "$pid" "$comm"
  done
# --- end of the slow questions ---
section end
