#!/bin/bash
# Install the .deb into minimal Debian roots (debootstrap) and run it there: the proof that its Depends
# are complete, which the build machine (whose own libraries hide a missing one) cannot give. Given the
# tarball instead, unpack it there as an ordinary user after only the libraries packaging/README.md names.
#
#   sudo packaging/clean_root_test.sh dist/nexttoken_0.1.0_amd64.deb [bookworm trixie]
#   sudo packaging/clean_root_test.sh dist/nexttoken-0.1.0-linux-x86_64.tar.gz [bookworm trixie]
#
# Needs root, debootstrap, Xvfb (apt-get install debootstrap xvfb) and Debian's archive. For each
# release (default: bookworm = Debian 12, trixie = Debian 13, whose t64 renames the Depends must survive):
#   1. a minbase root, made once with debootstrap and kept in $NEXTTOKEN_ROOTS (default
#      /var/cache/nexttoken-roots/<release>), never changed afterwards;
#   2. a throwaway overlay on it with /proc, /dev, /dev/shm, /sys bind-mounted (the engine runs in a
#      child process and needs /dev/shm), and the downloaded packages kept in <release>-apt/;
#   3. packaging/linux/install_check.sh inside: apt-get install ./the.deb, ldd check, the installed
#      command's --smoke-test of SmolLM2 on Qt's xcb platform against an Xvfb that runs out here (so
#      no X server libraries enter the root), a new user's first window, apt-get remove, then purge;
#      the first windows' pictures are kept as $NEXTTOKEN_SHOTS/<release>-first-window.png (default:
#      the roots' folder).
#   NEXTTOKEN_FIRST_MODEL names the model a new user's first window must open (default
#   SmolLM2-135M-Instruct; the classroom variant's: gpt2).
#   3'. for a tarball (*.tar.gz), packaging/linux/tarball_check.sh instead: the named libraries, a user
#      "pupil" who unpacks it, ldd, pupil's smoke test of SmolLM2 without network and first window
#      (kept as <release>-tarball-first-window.png), the folder deleted.
# Time here (2 shared cores): debootstrap about 3 min per release the first time; then about
# 1-3 min per release (apt, the 870 MB unpack, the smoke test).
set -euo pipefail
deb=$(realpath "$1")
shift
releases=("$@")
[ $# -gt 0 ] || releases=(bookworm trixie)
roots=${NEXTTOKEN_ROOTS:-/var/cache/nexttoken-roots}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
shots=${NEXTTOKEN_SHOTS:-$roots}
here=$(cd "$(dirname "$0")" && pwd)
case "$deb" in
    *.tar.gz) check=tarball_check.sh ;;
    *.deb) check=install_check.sh ;;
    *) echo "clean_root_test: $deb is neither a .deb nor a .tar.gz" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "clean_root_test: run as root (debootstrap, chroot, mount)" >&2; exit 2; }
for tool in debootstrap Xvfb xvfb-run; do
    command -v "$tool" > /dev/null || { echo "clean_root_test: $tool missing: apt-get install debootstrap xvfb" >&2; exit 2; }
done
mkdir -p "$roots"

base_root() {  # release: the cached minbase root's path, made when missing
    local base=$roots/$1
    if [ ! -x "$base/usr/bin/apt-get" ]; then
        # to stderr: the caller reads this function's stdout as the root's path (a fresh machine's first
        # run mounted "clean_root_test: debootstrap ..." as the overlay's lower folder and failed)
        echo "clean_root_test: debootstrap --variant=minbase $1 (once; cached in $base)" >&2
        rm -rf "$base.tmp"
        debootstrap --variant=minbase "$1" "$base.tmp" "$mirror" > "$roots/$1-debootstrap.log" 2>&1 ||
            { tail -n 20 "$roots/$1-debootstrap.log" >&2; exit 1; }
        mv "$base.tmp" "$base"
    fi
    echo "$base"
}

mounted=()
cleanup() {
    local m
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        m=${mounted[i]}
        umount -l "$m" 2> /dev/null || true
    done
    mounted=()
    [ -z "${xvfb_pid:-}" ] || kill "$xvfb_pid" 2> /dev/null || true
    [ -z "${work:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

mount_on() {  # mount arguments... target: mount and remember for cleanup
    mount "$@"
    mounted+=("${@: -1}")
}

# One X server for every root, outside them; -ac: no auth file to carry into the root.
display=:$((RANDOM % 400 + 100))
Xvfb "$display" -ac -nolisten tcp -screen 0 1280x800x24 > /dev/null 2>&1 &
xvfb_pid=$!
sleep 2
kill -0 "$xvfb_pid" || { echo "clean_root_test: Xvfb did not start" >&2; exit 1; }

status=0
for release in "${releases[@]}"; do
    start=$(date +%s)
    base=$(base_root "$release")
    work=$(mktemp -d /var/tmp/nexttoken-root.XXXXXX)
    mkdir -p "$work/upper" "$work/work" "$work/root" "$roots/$release-apt"
    mount_on -t overlay overlay -o "lowerdir=$base,upperdir=$work/upper,workdir=$work/work" "$work/root"
    root=$work/root
    for fs in proc dev dev/shm sys tmp/.X11-unix; do
        mkdir -p "$root/$fs"
        mount_on --bind "/$fs" "$root/$fs"
    done
    mount_on --bind "$roots/$release-apt" "$root/var/cache/apt/archives"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    cp "$deb" "$here/linux/$check" "$root/tmp/"
    echo "clean_root_test: $release: $(du -sh --apparent-size "$base" | cut -f1) minbase root, $(chroot "$root" dpkg -l | grep -c '^ii') packages"
    chroot "$root" apt-get update -q > /dev/null
    if chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DISPLAY="$display" LANG=C.UTF-8 \
            NEXTTOKEN_FIRST_MODEL="${NEXTTOKEN_FIRST_MODEL:-SmolLM2-135M-Instruct}" \
            sh "/tmp/$check" "/tmp/$(basename "$deb")"; then
        echo "clean_root_test: $release: PASS in $(($(date +%s) - start)) s"
    else
        echo "clean_root_test: $release: FAIL after $(($(date +%s) - start)) s"
        status=1
    fi
    for shot in "$root"/tmp/nexttoken-*-window.png; do
        [ ! -f "$shot" ] || { mkdir -p "$shots" && cp "$shot" "$shots/$release-$(basename "$shot" | sed 's/^nexttoken-//')"; }
    done
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || umount -l "${mounted[i]}"; done
    mounted=()
    rm -rf "$work"
    work=
done
exit $status
