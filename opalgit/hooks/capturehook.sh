#!/bin/sh
# opal capture: what an agent's hook runs (written into its settings by 'opal capture install').
#
#   sh capturehook.sh PYTHON AGENT EVENT  < the event's JSON
#
# An agent waits for its hooks, so this does the least it can, in sh (a Python start
# would cost more than the whole of it): it finds the git repository of the current
# folder (the agents run hooks in the session's folder), puts the event in the
# repository's capture queue (<git common dir>/opal/capture/queue/, one file: the agent
# and the folder on two lines, then the event as the agent gave it), starts opal's
# worker (opalgit/hooks/capturework.py) in the background with its standard streams
# away from the agent's pipes (an agent waits until the hook's stdout and stderr close)
# and returns. Before a compaction (PreCompact, PreCompress) it waits, 20 s at most,
# until the worker has committed the event, so the turns the agent is about to drop
# from its context are held. It prints nothing (stdout is the agent's protocol) and
# exits 0 whatever happens; what goes wrong is in the capture log ('opal capture
# status'). In a repository without opal nothing is created there: the worker only
# notes the skip in the user's state folder.
py=$1 agent=$2 event=$3
worker="import sys; del sys.path[0]; from opalgit.hooks.capturework import main; sys.exit(main(sys.argv[1:]))"

d=$PWD common=
while [ -n "$d" ]; do
    if [ -d "$d/.git" ]; then
        common=$d/.git
        break
    fi
    if [ -f "$d/.git" ]; then
        # a linked worktree or a submodule: "gitdir: PATH", whose commondir names the common one
        IFS= read -r line <"$d/.git" || line=
        case $line in
            "gitdir: "*) gd=${line#gitdir: } ;;
            *) break ;;
        esac
        case $gd in /*) ;; *) gd=$d/$gd ;; esac
        common=$gd
        if [ -f "$gd/commondir" ]; then
            IFS= read -r c <"$gd/commondir" || c=
            case $c in /*) common=$c ;; ?*) common=$gd/$c ;; esac
        fi
        break
    fi
    [ "$d" = / ] && break
    d=${d%/*}
    [ -n "$d" ] || d=/
done

opal=$common/opal
if [ -z "$common" ] || [ ! -f "$opal/config" ]; then
    (trap '' HUP INT QUIT TERM; exec "$py" -c "$worker" skip "$agent" "$PWD" "$common") </dev/null >/dev/null 2>&1 &
    exit 0
fi

q=$opal/capture/queue
[ -d "$q" ] || mkdir -p "$q" 2>/dev/null || exit 0
i=0
set -C  # a name another hook run took is never written over
while :; do
    n=$$.$i
    if [ ! -e "$q/$n.json" ] && { printf '%s\n%s\n' "$agent" "$PWD" >"$q/.$n.part"; } 2>/dev/null; then
        break
    fi
    i=$((i + 1))
    [ $i -lt 100 ] || exit 0
done
set +C
cat >>"$q/.$n.part" 2>/dev/null
mv -f "$q/.$n.part" "$q/$n.json" 2>/dev/null || exit 0  # whole or absent: the worker never reads half

# The worker must outlive the agent: Gemini CLI ends its hooks' process group when it
# exits (the last turn's events were lost that way). So the signals an agent sends on
# its way out are ignored from the start (an ignored signal stays ignored across exec,
# and Python keeps it so) and the worker gets a session of its own, at once where
# setsid(1) is there, else in its first lines (opalgit/hooks/capturework.py).
(
    trap '' HUP INT QUIT TERM
    if command -v setsid >/dev/null 2>&1; then
        exec setsid "$py" -c "$worker" drain "$opal"
    fi
    exec "$py" -c "$worker" drain "$opal"
) </dev/null >/dev/null 2>>"$opal/capture/crash" &

case $event in
    PreCompact | PreCompress)
        i=0
        while [ -e "$q/$n.json" ] && [ $i -lt 400 ]; do
            sleep 0.05 2>/dev/null || { sleep 1; i=$((i + 19)); }
            i=$((i + 1))
        done
        ;;
esac
exit 0
