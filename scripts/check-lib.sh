# Shared by the check scripts (sourced, not run): counting steps and results.
#   step TEXT            a heading
#   ok TEXT / bad TEXT   count a passed / failed check
#   check TEXT CMD...    run CMD, count it as passed or failed
#   expect TEXT WANT GOT compare two strings
# The caller ends with: echo "NAME: $passed passed, $failed failed"; [ "$failed" = 0 ]
passed=0
failed=0
step() { printf '\n==> %s\n' "$*"; }
ok() { passed=$((passed + 1)); printf 'ok: %s\n' "$*"; }
bad() { failed=$((failed + 1)); printf 'FAIL: %s\n' "$*" >&2; }
check() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
expect() {
    if [ "$2" = "$3" ]; then ok "$1: $3"; else bad "$1: expected '$2', got '$3'"; fi
}
