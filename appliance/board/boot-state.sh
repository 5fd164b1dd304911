#!/bin/sh
# RAUC's custom boot loader backend (system.conf: bootloader-custom-backend=this file).
# RAUC calls it several times for each status or mark: the reads (get-primary, get-state,
# get-current) are answered here from the two files boot-state.mjs describes, because starting
# Node for each of them took seconds on a busy board and pushed RAUC's D-Bus calls past their 25 s.
# The writes (set-primary, set-state) and anything else go to boot-state.mjs.
# test/boot-state-backend.test.ts proves both answer alike, with HARBOR_BOOT_DIR and
# HARBOR_CMDLINE_FILE (read by both) pointing at its own files instead of the board's.
set -u
set -f
export LC_ALL=C
boot=${HARBOR_BOOT_DIR:-/boot/firmware}
cmdline=${HARBOR_CMDLINE_FILE:-/proc/cmdline}

fail() {
  echo "boot-state: $1" >&2
  exit 1
}

# The last KEY=value line's value in FILE, trimmed, NUL padding dropped (parseEnvFile). The echo
# ends a last line cut short: sed prints such a line without a newline, and an empty value so
# printed would vanish before tail, which would then name the line before it.
value() {
  [ -f "$2" ] || return 0
  { tr -d '\000' <"$2" && echo; } | sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*//p" | tail -n 1 | sed 's/[[:space:]]*$//'
}

is_slot() {
  [ "$1" = A ] || [ "$1" = B ]
}

# Whether HARBOR_TRY_LEFT counts at least one boot, read as parseInt(text, 16) reads it.
attempts_left() {
  left=$1
  case $left in
  -*) return 1 ;;
  +*) left=${left#+} ;;
  esac
  case $left in
  0[xX]*) left=${left#??} ;;
  esac
  left=${left%%[!0-9a-fA-F]*}
  case $left in
  *[1-9a-fA-F]*) return 0 ;;
  *) return 1 ;;
  esac
}

committed=$(value HARBOR_SLOT "$boot/harbor-slot.env")
is_slot "$committed" || committed=A
try_slot=$(value HARBOR_TRY "$boot/harbor-try.env")
is_slot "$try_slot" || try_slot=
trying=no
if [ -n "$try_slot" ] && attempts_left "$(value HARBOR_TRY_LEFT "$boot/harbor-try.env")"; then trying=yes; fi

# The slot the kernel was started with (rauc.slot=), empty when it names none.
booted() {
  [ -f "$cmdline" ] || return 0
  for word in $(cat "$cmdline"); do
    case $word in
    rauc.slot=A | rauc.slot=B)
      echo "${word#rauc.slot=}"
      return 0
      ;;
    esac
  done
}

slot_arg() {
  is_slot "${2-}" || fail "$1 needs a slot, A or B (got ${2-undefined})"
}

case ${1-} in
get-primary)
  if [ "$trying" = yes ]; then echo "$try_slot"; else echo "$committed"; fi
  ;;
get-current)
  current=$(booted)
  [ -n "$current" ] || fail 'the kernel command line names no rauc.slot'
  echo "$current"
  ;;
get-state)
  slot_arg "$@"
  current=$(booted)
  # A slot whose trial was spent without being confirmed, while another is committed.
  if [ "$2" = "$try_slot" ] && [ "$trying" = no ] && [ "$2" != "$current" ] && [ "$2" != "$committed" ]; then
    echo bad
  else
    echo good
  fi
  ;;
*)
  exec node "$(dirname "$0")/boot-state.mjs" "$@"
  ;;
esac
