#!/usr/bin/env bash
# The main step of action.yml: run one loop with the action's inputs (INPUT_* variables), then
# write the step's outputs, the job summary, the pull-request body and the memory folder.
# It exits 0 whatever the loop did: the outcome is in the outputs, and the action's last step
# fails the job when the checks do not pass, after the memory is uploaded and the branch pushed.
set -uo pipefail

work="${RUNNER_TEMP:-$(mktemp -d)}/ralph"
rm -rf "$work" && mkdir -p "$work"

base=$(git rev-parse --abbrev-ref HEAD 2>/dev/null || echo HEAD)
if [ "$base" = HEAD ]; then base="${GITHUB_BASE_REF:-${GITHUB_REF_NAME:-}}"; fi

args=(run "$INPUT_TASK" --json)
actor="${INPUT_ACTOR:-}"
if [ -n "${INPUT_MODEL:-}" ]; then
  case "$actor" in
    openai | anthropic | ollama) actor="$actor:$INPUT_MODEL" ;;
    openai:* | anthropic:* | ollama:*) echo "::warning::model ignored: the actor $actor names one" ;;
    *) export RALPH_ACTOR_ARGS="--model $INPUT_MODEL" ;;
  esac
fi
if [ -n "$actor" ]; then args+=(--actor "$actor"); fi
if [ -n "${INPUT_TEST:-}" ]; then args+=(--test "$INPUT_TEST"); fi
while IFS= read -r check; do
  check="${check#"${check%%[![:space:]]*}"}"
  if [ -n "$check" ]; then args+=(--check "$check"); fi
done <<< "${INPUT_CHECKS:-}"
if [ -n "${INPUT_MAX_ITERATIONS:-}" ]; then args+=(--max-iterations "$INPUT_MAX_ITERATIONS"); fi
if [ -n "${INPUT_BUDGET_USD:-}" ]; then args+=(--budget-usd "$INPUT_BUDGET_USD"); fi
if [ -n "${INPUT_TIMEOUT:-}" ]; then args+=(--timeout "$INPUT_TIMEOUT"); fi
if [ -n "${INPUT_ARGS:-}" ]; then
  mapfile -d '' -t extra < <(python -c \
    'import shlex, sys; sys.stdout.write("".join(a + "\0" for a in shlex.split(sys.argv[1])))' \
    "$INPUT_ARGS")
  args+=("${extra[@]}")
fi

# ralph's own step summary is replaced by the fuller one below
GITHUB_STEP_SUMMARY="" ralph "${args[@]}" > "$work/result.json"
code=$?

loop_id=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["loop_id"])' \
  "$work/result.json" 2> /dev/null || true)
{
  echo "exit-code=$code"
  echo "base=$base"
} >> "$GITHUB_OUTPUT"
if [ -z "$loop_id" ]; then
  echo "::error title=ralph::the loop did not start (exit code $code); see the log above"
  exit 0
fi

ralph status "$loop_id" --json > "$work/status.json"
python - "$work/status.json" >> "$GITHUB_OUTPUT" << 'PY'
import json, sys

status = json.load(open(sys.argv[1]))
best = status["best_reward"]
print(f"loop-id={status['loop_id']}")
print(f"status={status['status']}")
print(f"branch={status['branch'] or ''}")
print(f"best-reward={'' if best is None else best}")
PY
ralph status "$loop_id" --markdown > "$work/summary.md"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$work/summary.md" >> "$GITHUB_STEP_SUMMARY"; fi
echo "summary-file=$work/summary.md" >> "$GITHUB_OUTPUT"
# an already green repository makes a loop without records: nothing to upload then
if ralph reflections export "$loop_id" --dir "$work/memory" 2> /dev/null; then
  echo "memory-dir=$work/memory" >> "$GITHUB_OUTPUT"
fi
exit 0
