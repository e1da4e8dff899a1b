#!/bin/sh
# The memoryrouter hook: start one debt-triggered consolidation run in the background, with the
# host's own model writing the reflections, and return at once.
#
#   consolidate.sh check [HOST]        `mcp-memoryrouter auto` reads the vault's debt and runs
#                                      only if the server suggests consolidation (at the end of
#                                      a session, or of a turn)
#   consolidate.sh tool-result [HOST]  the same, only when the tool result (the hook's JSON on
#                                      stdin) carries the server's suggestion
#
# HOST names the model command: claude (default; Claude Code's print mode), codex (codex exec)
# or gemini (Gemini CLI's headless mode). "MEMORYROUTER_MODEL_CMD", when set, is used instead.
#
# `auto` does the rest as every connector must: the server's suggestion is the only trigger, at
# most 3 batches with a fresh debt check between them, the machine-wide lock
# (~/.memoryrouter/consolidate.lock), the 30-minute cooldown, and autoConsolidate false in
# ~/.memoryrouter/config.json. The Claude Code plugin's own autoConsolidate option (false)
# stops it here.
#
# Nothing ever reaches the session: the hook prints nothing and exits 0; what the run does and
# why it failed goes to ~/.memoryrouter/consolidate.log (MEMORYROUTER_HOME moves the directory).
# The vault is MEMORYROUTER_API_URL (default http://127.0.0.1:8787) with MEMORYROUTER_KEY or
# MEMORYROUTER_KEY_FILE, the variables the plugin's MCP server entry reads too.

event=${1:-check}
host=${2:-claude}
input=$(cat 2>/dev/null)

# The model command's own session (or anything it starts) never consolidates again.
[ "${MEMORYROUTER_AUTO_RUN:-}" = 1 ] && exit 0

case ${CLAUDE_PLUGIN_OPTION_AUTOCONSOLIDATE:-true} in
  false | False | FALSE | 0 | no | off) exit 0 ;;
esac

if [ "$event" = tool-result ]; then
  # The server's words (limits.RAW_SUGGESTED, limits.TIER2_SUGGESTED); no suggestion, no run.
  printf '%s' "$input" |
    grep -qiE 'raw consolidation suggested|tier 2 consolidation suggested' || exit 0
fi

umask 077
home=${MEMORYROUTER_HOME:-${HOME:-.}/.memoryrouter}
mkdir -p "$home" 2>/dev/null && chmod 700 "$home" 2>/dev/null
log=$home/consolidate.log
[ -d "$home" ] || log=/dev/null

program=${CLAUDE_PLUGIN_OPTION_PROGRAM:-${MEMORYROUTER_PROGRAM:-mcp-memoryrouter}}

# The host's own model, reading the consolidation input on stdin and answering on stdout.
# claude: print mode with no tools, no plugins, hooks, MCP servers or CLAUDE.md (--safe-mode keeps
# the sign-in and the model), and no saved session. codex: exec without hooks or a saved session,
# in a read-only sandbox. gemini: headless, the prompt being stdin alone.
model=${CLAUDE_PLUGIN_OPTION_MODEL:-}
case $host in
  codex) model_cmd="codex exec --disable hooks --ephemeral --skip-git-repo-check"
    model_cmd="$model_cmd --sandbox read-only -" ;;
  gemini) model_cmd="gemini -p ''" ;;
  *) model_cmd="claude -p --safe-mode --tools '' --strict-mcp-config --no-session-persistence"
    model_cmd="$model_cmd --disable-slash-commands --output-format text"
    case $model in
      '') ;;
      *[!A-Za-z0-9._:@/-]*) printf '%s hook: model %s ignored (not a model name)\n' \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "'$model'" >>"$log" 2>/dev/null ;;
      *) model_cmd="$model_cmd --model $model" ;;
    esac ;;
esac
model_cmd=${MEMORYROUTER_MODEL_CMD:-$model_cmd}

# Detached: its own session where setsid exists, stdin and output away from the host's pipes
# (which it waits on), so the run outlives the session that ends. The line is logged and the
# environment set here, before the run starts, and the one process started in the background
# is the detached run itself: a host that ends the hook's processes when the hook exits cannot
# catch the run half-started (a loaded CI run once showed the log folder made, no line logged).
detach=
command -v setsid >/dev/null 2>&1 && detach=setsid
MEMORYROUTER_AUTO_RUN=1
export MEMORYROUTER_AUTO_RUN
unset CLAUDECODE CLAUDE_CODE_SESSION_ID CLAUDE_CODE_CHILD_SESSION CLAUDE_CODE_ENTRYPOINT
printf '%s hook (%s, %s): %s auto\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$host" "$event" \
  "$program" >>"$log" 2>/dev/null
$detach nohup "$program" auto --model-cmd "$model_cmd" </dev/null >>"$log" 2>&1 &

exit 0
