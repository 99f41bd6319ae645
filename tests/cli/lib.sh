# Shared by the CLI test scripts (sourced after they set $tmp): counting
# failures, and checking a command fails cleanly.
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error DESCRIPTION NEEDLE COMMAND...: exit status 1 or 2 (not a
# signal), and stderr contains NEEDLE (a fixed string).
expect_error() {
    desc=$1 needle=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 0 ]; then
        fail "$desc: exited 0"
    elif [ "$rc" -gt 2 ]; then
        fail "$desc: exit status $rc (a crash?)"; cat "$tmp/err"
    elif ! grep -qF -- "$needle" "$tmp/err"; then
        fail "$desc: stderr lacks \"$needle\":"; cat "$tmp/err"
    else
        echo "ok: $desc: $(head -n 1 "$tmp/err")"
    fi
}

# expect_exit DESCRIPTION STATUS NEEDLE COMMAND...: exactly that exit status
# (2: a bad command line, 1: a failure), and stderr contains NEEDLE.
expect_exit() {
    desc=$1 want=$2 needle=$3
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$desc: exit status $rc, expected $want"; cat "$tmp/err"
    elif ! grep -qF -- "$needle" "$tmp/err"; then
        fail "$desc: stderr lacks \"$needle\":"; cat "$tmp/err"
    else
        echo "ok: $desc: $(head -n 1 "$tmp/err")"
    fi
}
