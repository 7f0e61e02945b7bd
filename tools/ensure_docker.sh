#!/usr/bin/env bash
# Makes sure a Docker engine answers and debootstrap is there (for the local base image).
# As root on Debian it installs docker.io and starts dockerd when no engine answers.
set -euo pipefail

engine_up() { docker info >/dev/null 2>&1; }

need_pkgs=()
command -v docker >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v dockerd >/dev/null 2>&1 || engine_up || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "missing: ${need_pkgs[*]}; install them (as root: apt-get install -y ${need_pkgs[*]})" >&2
    engine_up && exit 0 || exit 1
  fi
  echo "installing ${need_pkgs[*]}" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

if engine_up; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "no Docker engine answers: start one (sudo dockerd &) or set DOCKER_HOST" >&2
  exit 1
fi
echo "starting dockerd (log: /var/log/repogym-dockerd.log)" >&2
nohup dockerd >/var/log/repogym-dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  if engine_up; then exit 0; fi
  sleep 1
done
echo "dockerd did not come up; see /var/log/repogym-dockerd.log" >&2
tail -20 /var/log/repogym-dockerd.log >&2 || true
exit 1
