#!/usr/bin/env bash
# Makes sure rootless Podman's Docker-compatible API answers (the podman backend) and that
# bubblewrap and its unprivileged user are there (the bwrap backend).
#
# As root on Debian: installs podman, uidmap, slirp4netns, fuse-overlayfs, bubblewrap and runc
# (apt-get); makes the unprivileged users repogym-podman (with subordinate ids) and
# repogym-sandbox (the bwrap backend's, none needed); configures Podman's
# engine (native overlay storage, cgroupfs without systemd, runc where crun refuses a hybrid
# cgroup layout); starts `podman system service` as that user. Its socket is
# /run/user/UID/podman/podman.sock, where repogym looks for it (sandbox/podman.py).
# As another user: starts the user's own service when podman is there, else says what is missing.
set -euo pipefail

PODMAN_USER=repogym-podman
SANDBOX_USER=repogym-sandbox  # the bwrap backend's sandboxes run as it when repogym is root
pkgs=(podman uidmap slirp4netns fuse-overlayfs bubblewrap runc catatonit)

answers() { curl -sf --max-time 5 --unix-socket "$1" http://d/_ping >/dev/null 2>&1; }

start_service() {  # $1: the socket; runs as the current user; its pid goes beside it
  # the service (and every conmon it starts) keeps this working directory: a checkout that is
  # later deleted would leave it unable to start containers ("Failed to get working directory")
  cd "$HOME" || return 1
  mkdir -p "$(dirname "$1")"
  nohup podman system service --time=0 "unix://$1" >"$HOME/podman-service.log" 2>&1 &
  echo $! >"$1.pid"
  for _ in $(seq 1 30); do
    if answers "$1"; then return 0; fi
    sleep 1
  done
  echo "podman system service did not answer at $1; see $HOME/podman-service.log" >&2
  tail -20 "$HOME/podman-service.log" >&2 || true
  return 1
}

if [ "$(id -u)" != 0 ]; then
  sock="${XDG_RUNTIME_DIR:-/run/user/$(id -u)}/podman/podman.sock"
  if answers "$sock"; then exit 0; fi
  missing=()
  for cmd in podman newuidmap curl bwrap; do command -v "$cmd" >/dev/null || missing+=("$cmd"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "missing: ${missing[*]}; as root: apt-get install -y ${pkgs[*]} curl" >&2
    exit 1
  fi
  grep -q "^$(id -un):" /etc/subuid || echo "warning: no subordinate ids for $(id -un) in" \
    "/etc/subuid (as root: usermod --add-subuids 100000-165535 $(id -un)): images whose" \
    "files belong to other users will not load" >&2
  start_service "$sock"
  exit
fi

need=()
for pkg in "${pkgs[@]}" curl; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  }
fi

if ! id -u "$PODMAN_USER" >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash --comment "repogym rootless Podman" "$PODMAN_USER"
fi
if ! id -u "$SANDBOX_USER" >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash --comment "repogym daemonless sandboxes" "$SANDBOX_USER"
fi
# subordinate ids: the container's users other than root (the images' repogym is uid 1000)
for file in /etc/subuid /etc/subgid; do
  if ! grep -q "^$PODMAN_USER:" "$file" 2>/dev/null; then
    start=$(awk -F: 'BEGIN { m = 100000 } { if ($2 + $3 > m) m = $2 + $3 } END { print m }' \
      "$file" 2>/dev/null || echo 100000)
    flag=--add-subuids; [ "$file" = /etc/subgid ] && flag=--add-subgids
    usermod "$flag" "$start-$((start + 65535))" "$PODMAN_USER"
  fi
done

# rootless networking (image builds) opens the tun device: Debian's udev makes it 0666, a
# machine without udev may have left it to root alone
if [ -c /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
  chmod 0666 /dev/net/tun
fi

uid=$(id -u "$PODMAN_USER")
home=$(getent passwd "$PODMAN_USER" | cut -d: -f6)
run_dir=/run/user/$uid
install -d -m 700 -o "$PODMAN_USER" -g "$PODMAN_USER" "$run_dir"

# crun refuses a hybrid layout (cgroup v1 controllers with one bound to the v2 hierarchy too);
# runc runs there, with no cgroups for a rootless user either way
runtime=crun
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ] \
    && [ -n "$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]; then
  runtime=runc
fi
conf="$home/.config/containers"
install -d -o "$PODMAN_USER" -g "$PODMAN_USER" "$home/.config" "$conf"
want_storage=$'[storage]\ndriver = "overlay"\n'
want_engine=$'[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'"runtime = \"$runtime\""$'\n'
changed=0
if [ "$(cat "$conf/storage.conf" 2>/dev/null)"$'\n' != "$want_storage" ]; then
  printf '%s' "$want_storage" >"$conf/storage.conf"; changed=1
fi
if [ "$(cat "$conf/containers.conf" 2>/dev/null)"$'\n' != "$want_engine" ]; then
  printf '%s' "$want_engine" >"$conf/containers.conf"; changed=1
fi
chown "$PODMAN_USER:" "$conf/storage.conf" "$conf/containers.conf"

sock=$run_dir/podman/podman.sock
as_user=(runuser -u "$PODMAN_USER" -- env "XDG_RUNTIME_DIR=$run_dir" "HOME=$home")
if answers "$sock"; then
  [ "$changed" = 0 ] && exit 0
  echo "the engine's configuration changed: restarting podman system service" >&2
  kill "$(cat "$sock.pid" 2>/dev/null)" 2>/dev/null || true
  for _ in $(seq 1 20); do answers "$sock" || break; sleep 0.5; done
fi
echo "starting rootless podman system service as $PODMAN_USER ($sock)" >&2
"${as_user[@]}" bash -c "$(declare -f answers start_service); start_service $sock"
