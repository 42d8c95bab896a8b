#!/bin/sh
# gpunode lab stand-in for dkms(8): add, build, install, autoinstall, remove and status of
# DKMS modules in DKMS's own tree (/var/lib/dkms/<module>/<version>/<kernel>/<arch>/module).
# A build needs the kernel's headers (/lib/modules/<kernel>/build or
# /usr/src/linux-headers-<kernel>); without them it fails and make.log says why.
set -u
tree=/var/lib/dkms
arch=x86_64
cmd=${1:-}
[ $# -gt 0 ] && shift
mod="" ver="" kern="" all=0
while [ $# -gt 0 ]; do
    case "$1" in
        -m) mod=$2; shift 2 ;;
        -v) ver=$2; shift 2 ;;
        -k) kern=$2; shift 2 ;;
        --all) all=1; shift ;;
        -*) shift ;;
        */*) mod=${1%%/*}; ver=${1#*/}; shift ;;
        *) [ -z "$mod" ] && mod=$1; shift ;;
    esac
done

headers() { [ -e "/lib/modules/$1/build" ] || [ -d "/usr/src/linux-headers-$1" ]; }

need_added() {
    if [ ! -e "$tree/$1/$2/source" ]; then
        echo "Error! The module/version combo: $1-$2 is not located in the DKMS tree." >&2
        exit 3
    fi
}

build() { # module version kernel
    need_added "$1" "$2"
    b="$tree/$1/$2/build"
    mkdir -p "$b"
    log="$b/make.log"
    {
        echo "DKMS make.log for $1-$2 for kernel $3 ($arch)"
        echo "make -j$(nproc 2>/dev/null || echo 1) KERNEL_UNAME=$3 modules"
    } > "$log"
    if ! headers "$3"; then
        {
            echo "make[1]: Entering directory '/usr/src/linux-headers-$3'"
            echo "make[1]: *** /lib/modules/$3/build: No such file or directory.  Stop."
            echo "Kernel headers for kernel $3 cannot be found at /lib/modules/$3/build or /lib/modules/$3/source."
            echo "make: *** [Makefile:52: modules] Error 2"
        } >> "$log"
        echo "Error! Your kernel headers for kernel $3 cannot be found at /lib/modules/$3/build or /lib/modules/$3/source." >&2
        echo "Error! Bad return status for module build on kernel: $3 ($arch)" >&2
        echo "Consult $log for more information." >&2
        return 10
    fi
    out="$tree/$1/$2/$3/$arch/module"
    mkdir -p "$out"
    printf 'gpunode lab stand-in %s.ko %s for %s\n' "$1" "$2" "$3" > "$out/$1.ko"
    # As Ubuntu's dkms: sign with the MOK that update-secureboot-policy made, if there is one
    mok=/var/lib/shim-signed/mok
    if [ -r "$mok/MOK.der" ] && [ -r "$mok/MOK.priv" ]; then
        printf 'signer: MOK %s\n' "$(sha256sum < "$mok/MOK.der" | cut -d' ' -f1)" >> "$out/$1.ko"
        echo "Signing module $out/$1.ko"
    fi
    echo "  CC [M]  $1/$1.o" >> "$log"
    echo "  LD [M]  $1.ko" >> "$log"
    echo "make[1]: Leaving directory '/usr/src/linux-headers-$3'" >> "$log"
    echo "Building module(s)... done."
}

install_for() { # module version kernel
    ko="$tree/$1/$2/$3/$arch/module/$1.ko"
    dest="/lib/modules/$3/updates/dkms/$1.ko"
    if [ -f "$dest" ] && cmp -s "$ko" "$dest"; then
        echo "Module $1/$2 already installed on kernel $3 ($arch), skip."
        return 0
    fi
    [ -f "$ko" ] || build "$1" "$2" "$3" || return $?
    mkdir -p "/lib/modules/$3/updates/dkms"
    cp "$ko" "$dest"
    echo "Installing /lib/modules/$3/updates/dkms/$1.ko"
    echo "depmod... done."
}

status() {
    for d in "$tree"/*/*; do
        [ -e "$d/source" ] || continue
        v=${d##*/}; m=${d%/*}; m=${m##*/}
        [ -z "$mod" ] || [ "$mod" = "$m" ] || continue
        [ -z "$ver" ] || [ "$ver" = "$v" ] || continue
        any=0
        for kd in "$d"/*/"$arch"/module/"$m.ko"; do
            [ -f "$kd" ] || continue
            k=${kd#"$d"/}; k=${k%%/*}
            any=1
            [ -z "$kern" ] || [ "$kern" = "$k" ] || continue
            if cmp -s "$kd" "/lib/modules/$k/updates/dkms/$m.ko"; then
                echo "$m/$v, $k, $arch: installed"
            else
                echo "$m/$v, $k, $arch: built"
            fi
        done
        [ "$any" = 1 ] || [ -n "$kern" ] || echo "$m/$v: added"
    done
}

case "$cmd" in
    add)
        mkdir -p "$tree/$mod/$ver"
        ln -sfn "/usr/src/$mod-$ver" "$tree/$mod/$ver/source"
        echo "Creating symlink $tree/$mod/$ver/source -> /usr/src/$mod-$ver" ;;
    build) build "$mod" "$ver" "${kern:-$(uname -r)}" ;;
    install) need_added "$mod" "$ver"; install_for "$mod" "$ver" "${kern:-$(uname -r)}" ;;
    autoinstall)
        rc=0
        for d in "$tree"/*/*; do
            [ -e "$d/source" ] || continue
            v=${d##*/}; m=${d%/*}; m=${m##*/}
            install_for "$m" "$v" "${kern:-$(uname -r)}" || rc=11
        done
        exit $rc ;;
    remove)
        need_added "$mod" "$ver"
        for ko in "$tree/$mod/$ver"/*/"$arch"/module/"$mod.ko"; do
            [ -f "$ko" ] || continue
            k=${ko#"$tree/$mod/$ver"/}; k=${k%%/*}
            if [ "$all" = 1 ] || [ "$k" = "$kern" ]; then
                cmp -s "$ko" "/lib/modules/$k/updates/dkms/$mod.ko" \
                    && rm -f "/lib/modules/$k/updates/dkms/$mod.ko"
                rm -rf "${tree:?}/$mod/$ver/$k"
            fi
        done
        [ "$all" = 1 ] && rm -rf "${tree:?}/$mod/$ver"
        echo "Module $mod/$ver removed." ;;
    status|"") status ;;
    --version) echo "dkms-3.0.11 (gpunode lab stand-in)" ;;
    *) echo "dkms (gpunode lab): unsupported command $cmd" >&2; exit 2 ;;
esac
