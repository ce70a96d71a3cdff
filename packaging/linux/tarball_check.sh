#!/bin/sh
# Unpack a nexttoken tarball on this (clean) Debian or Ubuntu system as an ordinary user, check it, run it.
#
#   sh packaging/linux/tarball_check.sh ./nexttoken-0.1.0-linux-x86_64.tar.gz
#
# Run as root inside the system under test (packaging/clean_root_test.sh runs it in debootstrap roots).
# 1. root installs only LIBRARIES below, the system libraries packaging/README.md names for the tarball
#    (the .deb's Depends, without the .deb);
# 2. a new ordinary user, "pupil", unpacks the tarball into their home;
# 3. every ELF file in the folder must find its libraries (ldd);
# 4. as pupil, without network (a network namespace of its own: no interface but a down loopback), the
#    folder's nexttoken runs --smoke-test on Qt's xcb platform ($DISPLAY: clean_root_test.sh's Xvfb
#    outside the root): the bundled SmolLM2-135M-Instruct's greedy token after "The capital of France
#    is" must be " Paris";
# 5. pupil's first window (no --model) must open SmolLM2, saved to /tmp/nexttoken-tarball-first-window.png;
# 6. deleting the folder removes the app: nothing of it is left outside pupil's home.
# Prints one "tarball_check: ..." line per stage; exits non-zero on the first failure.
set -eu
# the model a new user's first window must open (remembered as its name, or its folder): the bundle's default
# (the classroom variant's: gpt2)
first_model=${NEXTTOKEN_FIRST_MODEL:-SmolLM2-135M-Instruct}
tarball=$1
LIBRARIES="libegl1 libgl1 libfontconfig1 libfreetype6 libxcb1 libxcb-icccm4 libxcb-keysyms1 libwayland-client0 libwayland-cursor0 libwayland-egl1"
export DEBIAN_FRONTEND=noninteractive
say() { echo "tarball_check: $*"; }
fail() { echo "tarball_check: FAILED: $*" >&2; exit 1; }
[ -n "${DISPLAY:-}" ] || fail "no DISPLAY: run it from packaging/clean_root_test.sh (its Xvfb runs outside the root)"

say "system: $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -n1)"
# shellcheck disable=SC2086  # one word per package
apt-get install -y -q --no-install-recommends $LIBRARIES > /tmp/tarball_check-apt.log 2>&1 ||
    { tail -n 30 /tmp/tarball_check-apt.log; fail "apt-get install $LIBRARIES"; }
say "installed the libraries: $LIBRARIES; packages pulled in: $(grep -c '^Setting up' /tmp/tarball_check-apt.log)"

useradd --create-home --shell /bin/sh pupil
home=/home/pupil
as_pupil() {  # command...: as pupil, with no network
    unshare --net setpriv --reuid=pupil --regid=pupil --init-groups \
        env -i PATH=/usr/bin:/bin HOME="$home" LANG=C.UTF-8 DISPLAY="$DISPLAY" QT_QPA_PLATFORM=xcb "$@"
}
cp "$tarball" /tmp/nexttoken.tar.gz
chmod 644 /tmp/nexttoken.tar.gz
as_pupil tar -xzf /tmp/nexttoken.tar.gz -C "$home" || fail "tar -xzf as pupil"
app=$home/nexttoken
[ -x "$app/nexttoken" ] || fail "no $app/nexttoken after unpacking"
say "unpacked by pupil into $app: $(du -sh "$app" | cut -f1)"

missing=$(find "$app" -type f \( -name '*.so' -o -name '*.so.*' -o -name nexttoken \) -print |
    while read -r f; do
        LD_LIBRARY_PATH=$app/_internal ldd "$f" 2>/dev/null | sed -n "s|^\s*\(\S*\) => not found|\1 (needed by ${f#"$app"/})|p"
    done | sort -u)
[ -z "$missing" ] || fail "libraries not found after installing the libraries: $missing"
say "every library under $app resolves"

interfaces=$(as_pupil sed -n 's/^ *\([^:]*\):.*/\1/p' /proc/net/dev | tr '\n' ' ')
[ "$interfaces" = "lo " ] || fail "pupil's commands see the network interfaces '$interfaces', not only lo"
start=$(date +%s)
out=$(as_pupil timeout 300 "$app/nexttoken" --smoke-test --model SmolLM2-135M-Instruct --prompt "The capital of France is" \
      --steps 1 2>&1) || { echo "$out" | tail -n 40; fail "$app/nexttoken --smoke-test"; }
line=$(echo "$out" | grep '^{' | tail -n 1)
echo "$line" | grep -q '"ok": true' || { echo "$out" | tail -n 40; fail "no ok JSON line"; }
echo "$line" | grep -q '"greedy": "␣Paris"' || fail "the greedy token is not ␣Paris: $line"
say "pupil, no network: nexttoken --smoke-test on xcb in $(( $(date +%s) - start )) s: $(echo "$line" | cut -c 1-220)"

start=$(date +%s)
as_pupil timeout 300 "$app/nexttoken" --prompt "The capital of France is" --steps 1 --size 1280x800 \
    --screenshot "$home/first-window.png" > /tmp/tarball_check-first.log 2>&1 ||
    { tail -n 40 /tmp/tarball_check-first.log; fail "nexttoken --screenshot"; }
cp "$home/first-window.png" /tmp/nexttoken-tarball-first-window.png
remembered=$(sed -n 's/^last=//p' "$home/.config/nexttoken/nexttoken.conf" 2>/dev/null | head -n 1)
case "$remembered" in "$first_model" | */"$first_model") ;; *) fail "pupil's first window opened '$remembered', not $first_model";; esac
say "pupil's first window opened $first_model in $(( $(date +%s) - start )) s ($remembered)"

written=$(find "$app" -newer /tmp/nexttoken.tar.gz -type f | head -n 5)
[ -z "$written" ] || fail "the app wrote into its own folder: $written"
rm -rf "$app"
left=$(find / -xdev -path /proc -prune -o -path "$home" -prune -o -path /tmp -prune -o -name 'nexttoken*' -print 2>/dev/null | head -n 5)
[ -z "$left" ] || fail "left outside pupil's home after deleting the folder: $left"
say "deleted the folder: nothing of the app is left outside pupil's home (its settings and log stay there)"
say "PASS"
