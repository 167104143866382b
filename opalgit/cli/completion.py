"""Shell completion: the scripts ``opal completion bash|zsh|fish`` prints, and the candidates a TAB gets.

The shells ask ``opal`` for candidates on every TAB by running it with
``_OPAL_COMPLETE`` set (click's protocol: ``bash_complete``, ``zsh_complete``,
``fish_complete``; ``SHELL_source`` prints the script). :func:`main` answers that, in
the process the shell started: :mod:`opalgit.server.client` hands it here before anything
else, so completion never goes through the command server (whose process would
print a traceback for click's ``SystemExit``), and it says nothing on stderr, which
would land in the middle of the user's prompt. Outside a repository a TAB simply
finds no branch names.

Commands, subcommands and options come from click. The values click cannot know
(branch names, revisions, remotes, agents, sessions) are listed in :data:`VALUES` by command
and parameter, and computed from the ref files (no libgit2, no scan of the history):
``HEAD``, branches and remote-tracking branches; ``REV~N`` for the first parents of
REV, bounded by :data:`MAX_PARENTS`; ``REV:N`` for the turns of REV's state (one
header read); ``A..B`` completes its B.

Part of the CLI layer.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Callable, Iterable

import click
from click.shell_completion import BashComplete, CompletionItem, FishComplete, ZshComplete, split_arg_string

from opalgit.cli.main import cli

#: The environment variable the shell scripts set (click's ``_{PROG}_COMPLETE``).
COMPLETE_VAR = "_OPAL_COMPLETE"
PROG = "opal"
#: How many first parents ``REV~`` offers: enough to pick from, bounded so that a TAB
#: never walks a long history.
MAX_PARENTS = 20

# ------------------------------------------------------------------------------ the scripts

# bash splits words at COMP_WORDBREAKS (':' and '=' among them), so COMP_WORDS would
# cut HEAD:12 or --to=HEAD:3 in pieces. The script hands opal the line up to the
# cursor instead, which opal splits as a shell does, and opal trims each candidate to
# the piece of the word bash replaces (see _BashComplete.format_completion).
_SOURCE_BASH = r"""# opal shell completion for bash: eval "$(opal completion bash)"
_opal_completion() {
    local IFS=$'\n' response completion
    COMPREPLY=()
    response=$(env %(complete_var)s=bash_complete COMP_LINE="${COMP_LINE:0:COMP_POINT}" \
COMP_WORDBREAKS="$COMP_WORDBREAKS" "$1" 2>/dev/null) || return 0
    for completion in $response; do
        case ${completion%%%%,*} in
            dir) COMPREPLY=(); compopt -o dirnames; return 0 ;;
            file) COMPREPLY=(); compopt -o default; return 0 ;;
            plain) COMPREPLY+=("${completion#*,}")
                # REV: is half a word (the turn number follows): no space after it
                [[ $completion == *: ]] && compopt -o nospace 2>/dev/null ;;
        esac
    done
    return 0
}
complete -o nosort -F _opal_completion %(prog_name)s 2>/dev/null || complete -F _opal_completion %(prog_name)s
"""

# click's script, with the answer's stderr discarded, and no space after REV: (a turn
# number follows).
_SOURCE_ZSH = r"""#compdef %(prog_name)s
# opal shell completion for zsh: opal completion zsh > "${fpath[1]}/_opal"
_opal_completion() {
    local -a completions completions_with_descriptions completions_nospace response
    (( ! $+commands[%(prog_name)s] )) && return 1
    response=("${(@f)$(env COMP_WORDS="${words[*]}" COMP_CWORD=$((CURRENT-1)) \
%(complete_var)s=zsh_complete %(prog_name)s 2>/dev/null)}")
    for type key descr in ${response}; do
        if [[ "$type" == "plain" ]]; then
            if [[ "$key" == *: ]]; then
                completions_nospace+=("$key")
            elif [[ "$descr" == "_" ]]; then
                completions+=("$key")
            else
                completions_with_descriptions+=("$key":"$descr")
            fi
        elif [[ "$type" == "dir" ]]; then
            _path_files -/
        elif [[ "$type" == "file" ]]; then
            _path_files -f
        fi
    done
    if [ -n "$completions_with_descriptions" ]; then
        _describe -V unsorted completions_with_descriptions -U
    fi
    if [ -n "$completions" ]; then
        compadd -U -V unsorted -a completions
    fi
    if [ -n "$completions_nospace" ]; then
        compadd -U -S '' -V unsorted -a completions_nospace
    fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _opal_completion "$@"
else
    compdef _opal_completion %(prog_name)s
fi
"""

# click's script, but a help text with a comma in it is not cut at the comma.
_SOURCE_FISH = r"""# opal shell completion for fish: opal completion fish > ~/.config/fish/completions/opal.fish
function _opal_completion
    set -l response (env %(complete_var)s=fish_complete COMP_WORDS=(commandline -cp) \
COMP_CWORD=(commandline -t) %(prog_name)s 2>/dev/null)
    for completion in $response
        set -l metadata (string split -m 1 "," -- $completion)
        if test $metadata[1] = "dir"
            __fish_complete_directories $metadata[2]
        else if test $metadata[1] = "file"
            __fish_complete_path $metadata[2]
        else if test $metadata[1] = "plain"
            echo $metadata[2]
        end
    end
end
complete --no-files --command %(prog_name)s --arguments "(_opal_completion)"
"""


class _BashComplete(BashComplete):
    source_template = _SOURCE_BASH

    def source(self) -> str:
        # (click's runs bash to check its version: a subprocess, and a warning on stderr)
        return self.source_template % self.source_vars()

    def get_completion_args(self) -> tuple[list[str], str]:
        line = os.environ.get("COMP_LINE", "")
        words = split_arg_string(line)
        if len(words) < 2 or (line[-1:].isspace() and _closed(line)):
            words.append("")  # the cursor is after a blank: a new, empty word
        self._word = words[-1] if len(words) > 1 else ""
        return words[1:-1], self._word

    def format_completion(self, item: CompletionItem) -> str:
        value = str(item.value)
        word = getattr(self, "_word", "")
        if item.type == "plain":
            # The candidate replaces the whole word; bash replaces only its part after
            # the last COMP_WORDBREAKS character. For --opt=VALUE, click gave VALUE.
            if _starts_option(word) and "=" in word and not value.startswith(word.partition("=")[0] + "="):
                value = word.partition("=")[0] + "=" + value
            breaks = os.environ.get("COMP_WORDBREAKS", "")
            cut = max((word.rfind(c) for c in set(breaks) if not c.isspace()), default=-1)
            if cut >= 0 and value.startswith(word[: cut + 1]):
                value = value[cut + 1 :]
        return f"{item.type},{value}"


def _closed(line: str) -> bool:
    """Whether ``line`` has no quote left open (so a trailing blank ends a word)."""
    import shlex

    try:
        shlex.split(line)
    except ValueError:
        return False
    return not line.endswith("\\ ")


def _starts_option(word: str) -> bool:
    return word.startswith("-")


class _ZshComplete(ZshComplete):
    source_template = _SOURCE_ZSH


class _FishComplete(FishComplete):
    source_template = _SOURCE_FISH


SHELLS: dict[str, type] = {"bash": _BashComplete, "zsh": _ZshComplete, "fish": _FishComplete}


# ------------------------------------------------------------------------------ values


def _repo(ctx: click.Context):
    """The repository the command line is about (``-C DIR`` honoured), or None."""
    from opalgit.store.repo import Repository

    directory = ctx.find_root().params.get("directory")
    try:
        return Repository.discover(os.path.abspath(os.path.expanduser(directory)) if directory else os.getcwd())
    except Exception:
        return None


def _branch_items(repo, incomplete: str, *, remote: bool = True) -> list[CompletionItem]:
    current = repo.refs.head_branch()
    out = [
        CompletionItem(name, help="current branch" if name == current else "branch")
        for name in sorted(repo.refs.branches())
        if name.startswith(incomplete)
    ]
    if remote:
        from opalgit.store.refs import REMOTE_PREFIX

        out += [
            CompletionItem(ref[len(REMOTE_PREFIX) :], help="remote-tracking branch")
            for ref in repo.refs.all()
            if ref.startswith(REMOTE_PREFIX) and ref[len(REMOTE_PREFIX) :].startswith(incomplete)
        ]
    return out


def branches(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Local branch names."""
    repo = _repo(ctx)
    return [] if repo is None else _branch_items(repo, incomplete, remote=False)


#: ``A..B`` / ``A...B``: the part being completed is B.
_RANGE = re.compile(r"^(.*?\.\.\.?)(.*)$")


def revisions(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``HEAD``, branches, ``REV~N`` and ``REV:N``; in ``A..B`` the B."""
    repo = _repo(ctx)
    if repo is None:
        return []
    prefix, word = "", incomplete
    m = _RANGE.match(incomplete)
    if m:
        prefix, word = m.group(1), m.group(2)
    if ":" in word:
        items = _turn_items(repo, *word.rsplit(":", 1))
    elif "~" in word:
        items = _parent_items(repo, *word.rsplit("~", 1))
    else:
        items = [CompletionItem("HEAD", help="the current branch")] if "HEAD".startswith(word) else []
        items += _branch_items(repo, word)
    return [CompletionItem(prefix + i.value, help=i.help) for i in items]


def _turn_items(repo, rev: str, number: str) -> list[CompletionItem]:
    from opalgit.history.states import load_state, resolve

    if number.lstrip("-") and not number.lstrip("-").isdigit():
        return []
    found = resolve(repo, rev or "HEAD")
    if found.turn is not None:
        return []
    turns = load_state(repo, found.oid).header.turns
    return [CompletionItem(f"{rev}:{n}") for n in range(1, turns + 1) if str(n).startswith(number)]


def _parent_items(repo, rev: str, number: str) -> list[CompletionItem]:
    from opalgit.history.states import resolve

    if number and not number.isdigit():
        return []
    found = resolve(repo, rev)
    if found.turn is not None:
        return []
    out = []
    commit = repo.store.read_commit(found.oid)
    for n in range(1, MAX_PARENTS + 1):
        if not commit.parents:
            break
        commit = repo.store.read_commit(commit.parents[0])
        if str(n).startswith(number):
            out.append(CompletionItem(f"{rev}~{n}", help=_first_line(commit.message)))
    return out


def _first_line(message: bytes | str) -> str:
    text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
    return text.strip().splitlines()[0] if text.strip() else ""


def turn_ranges(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``FROM..TO`` of turns: both ends are ``REV:N``."""
    if ":" not in incomplete.rpartition("..")[2]:
        return [CompletionItem(i.value + ":") for i in revisions(ctx, param, incomplete) if ":" not in i.value and "~" not in i.value]
    return revisions(ctx, param, incomplete)


def remotes(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The git remotes of the repository and opal's own (read from the config files)."""
    from opalgit.store.gitfiles import configfile

    repo = _repo(ctx)
    if repo is None:
        return []
    names: set[str] = set()
    for path in (os.path.join(repo.common_dir, "config"), os.path.join(repo.opal_dir, "config")):
        try:
            names.update(sub for section, sub, key, _raw in configfile.entries(path) if section == "remote" and sub and key == "url")
        except configfile.Unsupported:
            continue
    return [CompletionItem(n, help="remote") for n in sorted(names) if n.startswith(incomplete)]


def sessions(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The agent sessions of this folder (as 'opal status' finds them), newest first."""
    from opalgit import agents as adapters
    from opalgit.porcelain.sessions import search_dirs

    repo = _repo(ctx)
    if repo is None:
        return []
    cwd = os.path.abspath(os.path.expanduser(ctx.find_root().params.get("directory") or os.getcwd()))
    found = []
    for directory in search_dirs(repo, cwd):
        for ad in adapters.all_adapters().values():
            found += [(f, ad) for f in ad.find_sessions(directory, os.environ)]
        if found:
            break
    found.sort(key=lambda fa: fa[0].mtime, reverse=True)
    return [CompletionItem(f.id, help=f"{ad.title or ad.name} session") for f, ad in found if f.id.startswith(incomplete)]


def agents(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The agents opal has an adapter for."""
    from opalgit import agents as adapters

    return [CompletionItem(n, help="agent") for n in adapters.names() if n.startswith(incomplete)]


def commands(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """opal's command names (``opal help COMMAND``)."""
    from opalgit.cli.main import cli

    root = ctx.find_root().command
    names = root.list_commands(ctx) if isinstance(root, click.Group) else list(cli.commands)
    return [CompletionItem(n, help="command") for n in names if n.startswith(incomplete)]


Values = Callable[[click.Context, click.Parameter, str], list[CompletionItem]]

#: The values of each parameter click cannot complete by itself, by command path and
#: parameter name. Every parameter that takes a value is either here or in :data:`FREE`
#: (tests/cli/test_completion.py checks), so a new one is a decision, not an omission.
VALUES: dict[tuple[str, str], Values] = {
    ("at", "rev"): revisions,
    ("branch", "name"): branches,
    ("branch", "start"): revisions,
    ("commit", "agent"): agents,
    ("commit", "session_id"): sessions,
    ("diff", "a"): revisions,
    ("diff", "b"): revisions,
    ("drop", "turns"): turn_ranges,
    ("export", "rev"): revisions,
    ("export", "to"): agents,
    ("fetch", "remote_name"): remotes,
    ("handoff", "to"): agents,
    ("handoff", "agent"): agents,
    ("handoff", "session_id"): sessions,
    ("help", "command"): commands,
    ("log", "revs"): revisions,
    ("merge", "rev"): revisions,
    ("pull", "remote_name"): remotes,
    ("pull", "branch"): branches,
    ("push", "remote_name"): remotes,
    ("push", "branch"): branches,
    ("resume", "rev"): revisions,
    ("resume", "to"): agents,
    ("rewind", "to"): revisions,
    ("secrets purge", "branches"): branches,
    ("secrets scan", "rev"): revisions,
    ("show", "rev"): revisions,
    ("squash", "turns"): turn_ranges,
    ("stats", "rev"): revisions,
    ("switch", "name"): branches,
    ("switch", "start"): revisions,
    ("grep", "revs"): revisions,
}

#: Parameters whose values are the user's own words (a message, a size, a URL, a
#: code revision of the user's git history, an id from another command's output).
FREE: frozenset[tuple[str, str]] = frozenset({
    ("clone-state", "url"), ("web", "port"), ("clone-state", "name"), ("commit", "message"),
    ("config", "key"), ("config", "value"), ("export", "at"), ("export", "budget"), ("resume", "at"),
    ("resume", "budget"), ("hook post-rewrite", "kind"), ("hook pre-push", "remote_name"),
    ("hook pre-push", "url"), ("log", "max_count"), ("merge", "takes"), ("merge", "message"),
    ("op log", "max_count"), ("rewind", "count"), ("squash", "message"), ("stats", "top"),
    ("trim", "over"), ("trim", "keep"), ("undo", "op_id"),
    ("gc", "expire"), ("gc", "prune"), ("log", "skip"), ("log", "since"), ("log", "until"), ("log", "fmt"),
    ("secrets purge", "literals"),
    ("blame", "code_rev"), ("blame", "lines"), ("export", "at_line"), ("resume", "at_line"),
    ("trace export", "code_range"),
    ("grep", "pattern"), ("grep", "tools"), ("handoff", "message"),
})


def _quiet(values: Values) -> Values:
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        try:
            return values(ctx, param, incomplete)
        except Exception:  # a TAB never fails: an unknown revision simply has no candidates
            return []

    return complete


def _command_path(ctx: click.Context) -> str:
    names = []
    while ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(names))


def walk(group: click.Group, path: tuple[str, ...] = ()) -> Iterable[tuple[str, click.Command]]:
    """Every command under ``group``, with its path (``"op log"``)."""
    for name, cmd in sorted(group.commands.items()):
        yield " ".join((*path, name)), cmd
        if isinstance(cmd, click.Group):
            yield from walk(cmd, (*path, name))


def _attach(ctx: click.Context, obj: click.Command | click.Parameter) -> None:
    """Give the parameter being completed its values from :data:`VALUES`.

    click calls a parameter's ``shell_complete=`` function; the parameters here are
    declared in the command modules, so it is set at completion time only, and only
    where a command module did not declare one."""
    if not isinstance(obj, click.Parameter) or obj.name is None:
        return
    values = VALUES.get((_command_path(ctx), obj.name))
    if values is not None and getattr(obj, "_custom_shell_complete", None) is None:
        obj._custom_shell_complete = _quiet(values)


def _completions(comp, args: list[str], incomplete: str) -> list[CompletionItem]:
    from click.shell_completion import _resolve_context, _resolve_incomplete

    ctx = _resolve_context(comp.cli, comp.ctx_args, comp.prog_name, args)
    obj, incomplete = _resolve_incomplete(ctx, args, incomplete)
    _attach(ctx, obj)
    return obj.shell_complete(ctx, incomplete)


def answer(instruction: str) -> str | None:
    """What the shell gets for ``_OPAL_COMPLETE=instruction``: the script for
    ``SHELL_source``, the candidates for ``SHELL_complete``; None for anything else."""
    shell, _, what = instruction.partition("_")
    cls = SHELLS.get(shell)
    if cls is None:
        return None
    comp = cls(cli, {}, PROG, COMPLETE_VAR)
    if what == "source":
        return comp.source()
    if what != "complete":
        return None
    args, incomplete = comp.get_completion_args()
    return "\n".join(comp.format_completion(item) for item in _completions(comp, args, incomplete))


def main() -> int:
    """Answer the shell (``_OPAL_COMPLETE`` is set). Errors make no candidates, never noise."""
    instruction = os.environ.get(COMPLETE_VAR, "")
    if instruction.endswith("_complete"):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)  # nothing may reach the user's prompt
            os.close(devnull)
        except OSError:
            pass
    try:
        text = answer(instruction)
    except Exception:
        return 1
    if text is None:
        return 1
    sys.stdout.write(text if instruction.endswith("_source") else text + "\n")
    sys.stdout.flush()
    return 0


__all__ = ["COMPLETE_VAR", "FREE", "SHELLS", "VALUES", "answer", "main", "walk"]
