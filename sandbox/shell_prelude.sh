# shellcheck shell=bash
# The persistent shell's prelude (see shell.py): sent once on the shell's stdin when it starts.
# It defines the functions every command calls, so that each command sends little more than
# itself (bash reads a pipe one byte at a time; comment lines are left out when it is sent).
# stdin carries the protocol, so commands get </dev/null.
#
# $1: 1 to end the user's other processes after each command (a shell alone in its container),
# else 0; the host sends `set -- N` first. Root never does it.
#
# Time limits: a timer process, started once and restarted only when gone, is told each
# command's limit over a FIFO (fd 8) and signals the shell with USR1 when it runs out; the
# shell's trap then kills the command's process group, so a command that exhausts the process
# limit is still stopped without a new process, and no process is started per command. The trap
# kills only once the running command's own deadline has passed, so a late signal meant for an
# earlier command, or one sent by a command, stops nothing. fd 9 is a FIFO that nothing ever
# writes to: a `read -t` on it is a sleep that needs no process. The timer polls for the shell
# once a second while idle, so it does not outlive a shell that was killed.
#
# Unquoted $$, $__rg_pid, $d... are pids and numbers: no word splitting or globbing can happen
# on them, and the quotes would cost bytes sent per command.
# shellcheck disable=SC2086
exec 2>&1
set +o history
__rg_reap=${1:-0}
set --
[ "$EUID" = 0 ] && __rg_reap=0
__rg_state="${TMPDIR:-/tmp}/.repogym-state-$$"
: > "$__rg_state"
__rg_save() { local f=$__rg_state v; for v in "${!__rg_@}"; do unset -v "$v"; done 2>/dev/null
  { printf 'cd -- %q\n' "$PWD"; export -p; } > "$f" 2>/dev/null; }
__rg_pid=
__rg_to=0
__rg_end=0
__rg_tpid=
__rg_now() { __rg_t=${EPOCHREALTIME//[!0-9]/}; }
trap '[ -n "$__rg_pid" ] && __rg_now && [ $__rg_t -ge $__rg_end ] \
  && { __rg_to=1; kill -KILL -- -$__rg_pid; } 2>/dev/null' USR1
trap '[ -n "$__rg_tpid" ] && kill -KILL $__rg_tpid 2>/dev/null' EXIT
{ __rg_fifo="${TMPDIR:-/tmp}/.repogym-fifo-$$"
  for __rg_fd in 8 9; do command rm -f -- "$__rg_fifo"
    command mkfifo -m 600 -- "$__rg_fifo" && eval "exec $__rg_fd<>\"\$__rg_fifo\""; done
  command rm -f -- "$__rg_fifo"; } 2>/dev/null
__rg_timer() { local t='' r; trap - USR1 EXIT
  while :; do
    if [ -n "$t" ]; then read -r -t "$t" -u 8 t; r=$?; [ $r -gt 128 ] && { kill -USR1 $$ || exit; }
    else read -r -t 1 -u 8 t; r=$?; [ $r -gt 128 ] && { kill -0 $$ || exit; }; fi
    [ $r -gt 128 ] && t=; [ $r != 0 ] && [ $r -le 128 ] && exit
  done; }
# Whether a process of this user other than the shell and its timer is left; builtins only, no
# fork. (`kill -0 -1` cannot tell: it succeeds while any process at all is visible.)
__rg_left() { local d; for d in /proc/[0-9]*; do d=${d#/proc/}
  [ $d != $$ ] && [ "$d" != "$__rg_tpid" ] && [ -O /proc/$d ] && return 0; done; return 1; }
# One command, read from stdin; $1 is its time limit in seconds, $2 the same in microseconds,
# $3 whether to save its state, $4 whether it is one program (see runs_one_program). When the
# shell runs unprivileged and a process of its user outlives the command, `kill -KILL -1` ends
# every other process of that user (kill(-1) spares the caller), timer included: nothing a
# command started outlives it, not even what left the process group (setsid, nohup, a second
# job-control shell). It repeats until no process of the user is left, zombies included (for at
# most about 3 s): a fork bomb's orphans hold process slots until the container's init reaps
# them, and the next command needs free slots to start. The state file is read back at the top
# level: sourced in a function, `export -p`'s `declare -x` lines would make locals.
__rg_run() {
IFS= read -r -d '' __rg_cmd; __rg_cmd=${__rg_cmd%$'\n'}
__rg_pid=
__rg_to=0
__rg_now; __rg_end=$((__rg_t + $2))
kill -0 "$__rg_tpid" 2>/dev/null || { __rg_timer </dev/null >/dev/null 2>&1 9>&- & __rg_tpid=$!; }
printf '%s\n' "$1" >&8 2>/dev/null
set -m
( [ "$3" = 1 ] && trap __rg_save EXIT
  [ "$4" = 1 ] && hash -- "${__rg_cmd%% *}" 2>/dev/null && __rg_cmd="exec $__rg_cmd"
  set --; eval "$__rg_cmd" ) </dev/null 8>&- 9>&- &
__rg_pid=$!
set +m
{ wait $__rg_pid; __rg_rc=$?
while kill -0 $__rg_pid; do wait $__rg_pid; __rg_rc=$?; done
echo >&8
kill -KILL -- -$__rg_pid
[ $__rg_reap = 1 ] && __rg_left && { kill -KILL -1; wait; __rg_tpid=; __rg_n=0
while __rg_left && [ $((__rg_n+=1)) -lt 300 ]; do kill -KILL -1; read -r -t 0.01 -u 9; done; }
} 2>/dev/null
__rg_pid=
}
__rg_fin() { printf '\n__RG_END_%s %d %d %s\n' "$1" "$__rg_rc" "$__rg_to" "$PWD"; }
printf '__RG_READY %d\n' "$$"
