# shellcheck shell=bash
# The root runner's loop (see root_runner.py): started once per container with `bash -c` (its
# one argument: the container's process slots, see end_user), it reads
# requests on stdin: a header line (nonce, script bytes, input bytes, seconds, and a uid whose
# processes end first, if any, as `uid` or `uid:pid` with the one pid spared), the script, then
# the bytes the script gets on its stdin.
#
# The script travels in a variable, read by a builtin (bytes, whatever the locale), and input
# reaches a file only when there is some (staging, before any of the agent's code ran here): a
# script sent after the tests needs no free space in folders the tests could have filled, and
# reading it forks nothing.
#
# A request may first end every process of one user (the tests' user, before the results are
# read), but one process it names (a waiting process of the harness's own, started before any
# of the agent's code ran). That must work when the tests' processes took every process slot
# the container has (a fork bomb), so it forks nothing: builtins only. `kill -STOP -1` holds
# every process but init and the runner at once (a process forking then stops in its child
# too), the user's processes die while none can fork, and the rest go on; passes repeat until
# init reaped the last one, for the request's seconds at most (a time, not a count of passes:
# on a loaded machine init reaps a few hundred processes slower than 200 passes ran, a fork for
# the next script then failed, and bash, which exits when it cannot fork, took the runner with
# it). Root needs CAP_KILL for it, as grading containers have.
#
# The spared process has run the agent's code when it is a decoy run under way: should it fork
# on its own, its children die in each pass and stay, unreaped, in the slots the next script
# needs. So where the container's slots are counted ($slots, the runner's argument: the engine's
# process limit, 0 where it sets none), a pass that finds fewer than $reserve of them free takes
# the spared process too (threads count: the limit counts them).
slots=${1:-0}
reserve=$((slots / 4 < 32 ? slots / 4 : 32))
end_user() {
  local p k v left spare=$2 until=$((SECONDS + $3)) tasks
  while :; do
    left=0
    kill -STOP -1 2>/dev/null
    for p in /proc/[0-9]*; do
      [ -n "$spare" ] && [ "${p#/proc/}" = "$spare" ] && continue
      while read -r k v _; do
        [ "$k" = Uid: ] || continue
        if [ "$v" = "$1" ]; then kill -KILL "${p#/proc/}" 2>/dev/null; left=1; fi
        break
      done 2>/dev/null < "$p/status"
    done
    kill -CONT -1 2>/dev/null
    [ "$left" = 0 ] && return
    ((SECONDS < until)) || return
    if [ -n "$spare" ] && ((slots > 0)); then
      tasks=(/proc/[0-9]*/task/[0-9]*)
      ((${#tasks[@]} + reserve <= slots)) || spare=
    fi
  done
}
# Nothing is printed before the host's first line: what the engine sends together with the
# headers of its answer to the exec's start is read into the engine client's HTTP buffer, not
# the socket the host reads, and would be lost (the ready line with it).
IFS= read -r _ || exit 1
d=$(mktemp -d) || exit 1
printf '__RG_RUNNER_READY\n'
while IFS=' ' read -r n s b t u; do
  if [ -n "$u" ]; then
    spare=; [ "${u#*:}" = "$u" ] || spare=${u#*:}
    end_user "${u%%:*}" "$spare" "$t"
  fi
  LC_ALL=C IFS= read -r -N "$s" script || [ "$s" = 0 ] || exit 1
  in=/dev/null
  if [ "$b" != 0 ]; then in=$d/in; head -c "$b" > "$in" || exit 1; fi
  timeout -k 5 "$t" bash -c "$script" repogym-runner < "$in" 2>&1
  printf '\n__RG_DONE_%s %d\n' "$n" $?
done
