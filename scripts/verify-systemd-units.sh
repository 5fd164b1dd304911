#!/usr/bin/env bash
# Runs `systemd-analyze verify` on unit files and fails on any complaint, also on the warnings that
# verify prints without failing (an unknown key, a value it ignores).
#   scripts/verify-systemd-units.sh systemd/*.service
#
# verify insists that the programs of Exec* lines exist. The appliance has them (Node, Java,
# Grafana); a developer's machine or CI may not. Each missing one gets an empty stand-in, visible
# only inside a private mount namespace (an overlay on its nearest existing directory): nothing
# changes on the machine, and verify still reads the real unit files, every directive included.
set -euo pipefail

if [ "$#" -eq 0 ]; then
  echo "usage: $0 UNIT_FILE..." >&2
  exit 64
fi

if ! command -v systemd-analyze >/dev/null 2>&1; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends systemd
fi

missing=()
for unit in "$@"; do
  while IFS= read -r program; do
    [ -x "$program" ] || missing+=("$program")
  done < <(sed -n -E 's/^Exec[A-Za-z]*=[-@+!:|]*([^ ]+).*/\1/p' "$unit")
done

verify() {
  local output
  if ! output=$(systemd-analyze verify "$@" 2>&1) || [ -n "$output" ]; then
    printf '%s\n' "$output" >&2
    return 1
  fi
}

if [ "${#missing[@]}" -eq 0 ]; then
  verify "$@"
  exit
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "stand-ins for ${missing[*]} need a private mount namespace: run as root" >&2
  exit 1
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
declare -A mounts=()
for program in "${missing[@]}"; do
  base=$(dirname "$program")
  while [ ! -d "$base" ]; do base=$(dirname "$base"); done
  if [ "$base" = / ]; then
    echo "no directory to lay a stand-in for $program over" >&2
    exit 1
  fi
  upper="$stage/upper$base"
  mkdir -p "$upper" "$stage/work$base" "$(dirname "$upper${program#"$base"}")"
  printf '#!/bin/sh\nexit 0\n' >"$upper${program#"$base"}"
  chmod 0755 "$upper${program#"$base"}"
  mounts[$base]=1
done

# Inside the namespace: one overlay per directory, then verify. Arguments: stage, directories, --, units.
unshare --mount --propagation private bash -euo pipefail -c '
  stage=$1; shift
  while [ "$1" != -- ]; do
    mount -t overlay overlay -o "lowerdir=$1,upperdir=$stage/upper$1,workdir=$stage/work$1" "$1"
    shift
  done
  shift
  output=$(systemd-analyze verify "$@" 2>&1) || { printf "%s\n" "$output" >&2; exit 1; }
  if [ -n "$output" ]; then printf "%s\n" "$output" >&2; exit 1; fi
' verify-units "$stage" "${!mounts[@]}" -- "$@"
