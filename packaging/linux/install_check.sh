#!/bin/sh
# Install a nexttoken .deb on this (clean) Debian or Ubuntu system, check it, run it, remove it.
#
#   sh packaging/linux/install_check.sh ./nexttoken_0.1.0_amd64.deb [APPIMAGE]
#
# Run as root inside the system under test: packaging/clean_root_test.sh runs it in debootstrap roots,
# .github/workflows/installers.yml in ubuntu:22.04, ubuntu:24.04 and debian:12 containers.
# 1. apt-get installs the .deb, so its Depends resolve from the distribution's archive;
# 2. every ELF file under /opt/nexttoken must find its libraries (ldd) with only what that pulled in;
# 3. the installed command runs --smoke-test on Qt's xcb platform: on $DISPLAY when one is given (the
#    clean-root script runs Xvfb outside the root, so the X server's libraries cannot hide a missing
#    Depends), else under xvfb-run, installed after step 2 for that reason: the bundled
#    SmolLM2-135M-Instruct, whose greedy token after "The capital of France is" must be " Paris";
# 4. a new user's first window (no --model): it must open SmolLM2 (the model it remembers), saved to
#    /tmp/nexttoken-first-window.png; then with /etc/nexttoken/defaults.conf naming the demo model, a
#    second new user's first window must open the demo instead;
# 5. with a second argument, the AppImage runs the same smoke test (--appimage-extract-and-run: no FUSE);
# 6. apt-get removes the package: nothing of it may be left but its conffile /etc/nexttoken/defaults.conf,
#    which apt-get purge then removes.
# Prints one "install_check: ..." line per stage; exits non-zero on the first failure.
set -eu
# the model a new user's first window must open (remembered as its name, or its folder): the bundle's default
# (the classroom variant's: gpt2)
first_model=${NEXTTOKEN_FIRST_MODEL:-SmolLM2-135M-Instruct}
deb=$1
appimage=${2:-}
export DEBIAN_FRONTEND=noninteractive
say() { echo "install_check: $*"; }
fail() { echo "install_check: FAILED: $*" >&2; exit 1; }

say "system: $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -n1)"
apt-get install -y -q --no-install-recommends "$deb" > /tmp/install_check-apt.log 2>&1 ||
    { tail -n 30 /tmp/install_check-apt.log; fail "apt-get install $deb"; }
say "installed $(dpkg-query -W -f '${Package} ${Version}' nexttoken); Depends: $(dpkg-query -W -f '${Depends}' nexttoken)"
say "packages pulled in: $(grep -c '^Setting up' /tmp/install_check-apt.log)"

missing=$(find /opt/nexttoken -type f \( -name '*.so' -o -name '*.so.*' -o -name nexttoken \) -print |
    while read -r f; do
        LD_LIBRARY_PATH=/opt/nexttoken/_internal ldd "$f" 2>/dev/null | sed -n "s|^\s*\(\S*\) => not found|\1 (needed by ${f#/opt/nexttoken/})|p"
    done | sort -u)
[ -z "$missing" ] || fail "libraries not found after installing the Depends: $missing"
say "every library under /opt/nexttoken resolves"

home=$(mktemp -d)
[ -n "${DISPLAY:-}" ] ||
    apt-get install -y -q --no-install-recommends xvfb xauth > /dev/null 2>&1 || fail "apt-get install xvfb"
on_x() {  # command...: on $DISPLAY, else on a new Xvfb
    if [ -n "${DISPLAY:-}" ]; then "$@"; else xvfb-run -a -s "-screen 0 1280x800x24" "$@"; fi
}
paris='"greedy": "␣Paris"'
smoke() {  # command... : the smoke test of SmolLM2 on xcb, with a time limit; prints its JSON line
    start=$(date +%s)
    out=$(on_x env HOME="$home" QT_QPA_PLATFORM=xcb timeout 300 "$@" --smoke-test --model SmolLM2-135M-Instruct \
          --prompt "The capital of France is" --steps 1 2>&1) || { echo "$out" | tail -n 40; fail "$* --smoke-test"; }
    line=$(echo "$out" | grep '^{' | tail -n 1)
    echo "$line" | grep -q '"ok": true' || { echo "$out" | tail -n 40; fail "no ok JSON line from $*"; }
    echo "$line" | grep -q "$paris" || fail "$* --smoke-test: the greedy token is not ␣Paris: $line"
    say "$1 --smoke-test on xcb in $(( $(date +%s) - start )) s: $(echo "$line" | cut -c 1-220)"
}
first_window() {  # home picture: a new user's first window after one step; prints the model it remembers
    mkdir -p "$1"
    on_x env HOME="$1" QT_QPA_PLATFORM=xcb timeout 300 nexttoken --prompt "The capital of France is" --steps 1 \
        --size 1280x800 --screenshot "$2" > "$1/out.log" 2>&1 || { tail -n 40 "$1/out.log"; fail "nexttoken --screenshot $2"; }
    sed -n 's/^last=//p' "$1/.config/nexttoken/nexttoken.conf" 2>/dev/null | head -n 1
}
smoke nexttoken
start=$(date +%s)
remembered=$(first_window "$home/first" /tmp/nexttoken-first-window.png)
case "$remembered" in "$first_model" | */"$first_model") ;; *) fail "a new user's first window opened '$remembered', not $first_model";; esac
say "a new user's first window opened $first_model in $(( $(date +%s) - start )) s ($remembered)"
sed -i 's/^# model = .*/model = gpt2-tiny-demo/' /etc/nexttoken/defaults.conf
remembered=$(first_window "$home/site" /tmp/nexttoken-site-window.png)
[ -z "$remembered" ] || fail "with model = gpt2-tiny-demo in /etc/nexttoken/defaults.conf, the first window opened '$remembered'"
say "with /etc/nexttoken/defaults.conf naming gpt2-tiny-demo, a new user's first window opened the demo"
[ -z "$appimage" ] || smoke "$appimage" --appimage-extract-and-run

apt-get remove -y -q nexttoken > /dev/null 2>&1 || fail "apt-get remove nexttoken"
left=$(for p in /opt/nexttoken /usr/bin/nexttoken /usr/share/applications/nexttoken.desktop /usr/share/doc/nexttoken \
           /usr/share/icons/hicolor/256x256/apps/nexttoken.png; do [ -e "$p" ] || [ -L "$p" ] && echo "$p"; done; true)
[ -z "$left" ] || fail "left after apt-get remove: $left"
[ -f /etc/nexttoken/defaults.conf ] || fail "apt-get remove took the conffile /etc/nexttoken/defaults.conf"
say "removed; nothing of it is left but its conffile /etc/nexttoken/defaults.conf"
apt-get purge -y -q nexttoken > /dev/null 2>&1 || fail "apt-get purge nexttoken after remove (exit $?)"
[ ! -e /etc/nexttoken ] || fail "left after apt-get purge: /etc/nexttoken"
say "purged after remove: /etc/nexttoken is gone"
say "PASS"
