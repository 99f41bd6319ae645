#!/bin/sh
# Distributed training across two "hosts": two Linux network namespaces on
# this machine joined by a veth pair (10.77.X.1/24 and 10.77.X.2/24), one
# MPI rank in each, talking TCP over the veth (Open MPI's tcp and self
# transports only, on that subnet only; no shared memory, no loopback).
# mpirun runs in namespace A and starts the rank in B through Open MPI's
# rsh launcher with a generated agent that plays ssh: it runs the command
# it is given inside the namespace that owns the host's address.
#   - the two ranks are in different network namespaces (each prints its
#     namespace and address), and the bench's bytes went over the veth
#     (its counters);
#   - test_dist passes across the two hosts (collectives, training against
#     one process, reruns);
#   - `chutney train --distributed` (2 ranks x batch 32) ends with the final
#     loss of one process with batch 64 (within 1e-3 relative);
#   - bench_dist: allreduce latency and bandwidth over the veth, and its
#     alpha-beta line (printed); with `tc` and netem, again with 1 ms of
#     delay on one side, where latency dominates.
# Every step is bounded by a timeout; the namespaces (and every process in
# them) are removed on exit, failure or interrupt.
# Needs root, `ip`, network namespaces, mpirun and a build with MPI;
# without one of them it prints "skipped: <why>" and exits 77.
#   dist_netns.sh path/to/chutney path/to/test_dist path/to/bench_dist
set -u
if [ $# -ne 3 ]; then
    echo "usage: $0 path/to/chutney path/to/test_dist path/to/bench_dist" >&2
    exit 2
fi
CHUTNEY=$1 TEST_DIST=$2 BENCH_DIST=$3

skip() { echo "skipped: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "not root (network namespaces need root)"
command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2)"
command -v mpirun >/dev/null 2>&1 || skip "no mpirun"
command -v timeout >/dev/null 2>&1 || skip "no timeout command"
"$CHUTNEY" devices 2>/dev/null | grep -q '+mpi' || skip "chutney built without MPI (no +mpi in chutney devices)"
for b in "$TEST_DIST" "$BENCH_DIST"; do
    [ -x "$b" ] || skip "$b is not an executable"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-dist-netns.XXXXXX") || exit 1
. "$(dirname "$0")/lib.sh" # fail

# Unique per run ($$): ctest -j runs tests side by side.
NS_A=chutney-netns-a-$$ NS_B=chutney-netns-b-$$
X=$(($$ % 250 + 1))
SUBNET=10.77.$X.0/24 IP_A=10.77.$X.1 IP_B=10.77.$X.2
made_a=0 made_b=0 bgpid=

# Every process in the namespaces was started by this script (mpirun, the
# daemon, the ranks): end them, then delete the namespaces (which deletes
# the veth pair, created inside them).
cleanup() {
    trap - EXIT INT TERM HUP PIPE
    [ -n "$bgpid" ] && kill "$bgpid" 2>/dev/null
    made=
    [ $made_a -eq 1 ] && made=$NS_A
    [ $made_b -eq 1 ] && made="$made $NS_B"
    for ns in $made; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 130' INT
trap 'echo "terminated"; exit 143' TERM
trap 'exit 129' HUP
trap 'exit 141' PIPE # output closed (| head)

# A run killed with -9 (no trap) leaves its namespaces: remove those of
# this test whose run is gone (its pid dead, no process inside, made more
# than 10 minutes ago).
for ns in $(find /run/netns /var/run/netns -maxdepth 1 -name 'chutney-netns-[ab]-*' -mmin +10 2>/dev/null |
    sed 's|.*/||' | sort -u); do
    pid=${ns##*-}
    case $pid in '' | *[!0-9]*) continue ;; esac
    if ! kill -0 "$pid" 2>/dev/null && [ -z "$(ip netns pids "$ns" 2>/dev/null)" ]; then
        ip netns del "$ns" 2>/dev/null && echo "note: removed $ns, left by an earlier run"
    fi
done

# run_bounded SECONDS COMMAND...: the command under a timeout (SECONDS, or
# less when the whole test's budget of 200 s would run out), in the
# background so that a signal reaches the traps at once. $why says how it
# ended, for messages.
t_start=$(date +%s)
run_bounded() {
    secs=$1
    shift
    left=$((200 - ($(date +%s) - t_start)))
    [ "$secs" -gt "$left" ] && secs=$left
    if [ "$secs" -lt 5 ]; then
        why="not run: the test's 200 s are spent"
        return 124
    fi
    timeout -k 5 "$secs" "$@" &
    bgpid=$!
    wait "$bgpid"
    rc=$?
    bgpid=
    case $rc in
    124 | 137) why="timed out after $secs s" ;;
    *) why="exit $rc" ;;
    esac
    return $rc
}

# 1. Two hosts.
ip netns add "$NS_A" 2>"$tmp/err" || skip "ip netns add failed (no permission or no kernel support): $(head -n 1 "$tmp/err")"
made_a=1
ip netns add "$NS_B" 2>"$tmp/err" || skip "ip netns add failed: $(head -n 1 "$tmp/err")"
made_b=1
ip netns exec "$NS_A" true 2>"$tmp/err" || skip "ip netns exec failed: $(head -n 1 "$tmp/err")"
ip -n "$NS_A" link add veth-a type veth peer name veth-b netns "$NS_B" 2>"$tmp/err" ||
    skip "no veth pair (kernel without veth?): $(head -n 1 "$tmp/err")"
if ! { ip -n "$NS_A" addr add "$IP_A/24" dev veth-a && ip -n "$NS_B" addr add "$IP_B/24" dev veth-b &&
    ip -n "$NS_A" link set lo up && ip -n "$NS_B" link set lo up &&
    ip -n "$NS_A" link set veth-a up && ip -n "$NS_B" link set veth-b up; } 2>"$tmp/err"; then
    fail "setting up the veth pair: $(cat "$tmp/err")"
    exit 1
fi
echo "ok: namespaces $NS_A ($IP_A, veth-a) and $NS_B ($IP_B, veth-b)"

# The remote shell agent: ssh's calling convention (options, [user@]host,
# then the command's words, joined by spaces and run by a shell).
cat >"$tmp/agent" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do
    case \$1 in
    -[bcDEeFIiJLlmOoPpQRSWw]) shift 2 ;;
    -*) shift ;;
    *) break ;;
    esac
done
[ \$# -ge 1 ] || { echo "agent: no host" >&2; exit 255; }
host=\${1##*@}
shift
case \$host in
$IP_A) ns=$NS_A ;;
$IP_B) ns=$NS_B ;;
*) echo "agent: unknown host \$host" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$tmp/agent"
printf '%s slots=1\n%s slots=1\n' "$IP_A" "$IP_B" >"$tmp/hosts"

# Root is allowed (CI runs as root). --bind-to none: each "host" would
# bind its rank to its core 0, the same core here, and two busy-polling
# ranks on one core see each other only every scheduler tick (4 ms).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="ip netns exec $NS_A mpirun -np 2 --hostfile $tmp/hosts --bind-to none
 --mca plm_rsh_agent $tmp/agent --mca plm_rsh_no_tree_spawn 1 --mca orte_keep_fqdn_hostnames 1
 --mca orte_tmpdir_base $tmp --mca btl tcp,self --mca btl_tcp_if_include $SUBNET
 --mca oob_tcp_if_include $SUBNET"

json_field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" "$1" | tail -n 1; }
veth_bytes() { ip netns exec "$NS_A" cat /sys/class/net/veth-a/statistics/tx_bytes /sys/class/net/veth-a/statistics/rx_bytes 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
show_err() { tail -n 20 "$1" | sed 's/^/  | /'; }

# 2. One rank in each namespace.
# shellcheck disable=SC2086,SC2016 # options are words; $... for the ranks' shell
run_bounded 30 $MPIRUN sh -c 'echo "$OMPI_COMM_WORLD_RANK $(readlink /proc/self/ns/net) $(ip -o -4 addr show scope global | awk "{ print \$4 }" | tr "\n" " ")"' \
    >"$tmp/where" 2>"$tmp/err"
rc=$?
here=$(readlink /proc/self/ns/net)
ns0=$(awk '$1 == 0 { print $2 }' "$tmp/where") ns1=$(awk '$1 == 1 { print $2 }' "$tmp/where")
ip0=$(awk '$1 == 0 { print $3 }' "$tmp/where") ip1=$(awk '$1 == 1 { print $3 }' "$tmp/where")
if [ "$rc" -ne 0 ]; then
    fail "mpirun across the namespaces ($why)"; show_err "$tmp/err"
    exit 1 # nothing else can work
elif [ -z "$ns0" ] || [ -z "$ns1" ] || [ "$ns0" = "$ns1" ] || [ "$ns0" = "$here" ] || [ "$ns1" = "$here" ] ||
    [ "$ip0" != "$IP_A/24" ] || [ "$ip1" != "$IP_B/24" ]; then
    fail "the ranks are not one in each namespace:"; sed 's/^/  | /' "$tmp/where"
    exit 1
else
    echo "ok: rank 0 in $ns0 ($ip0), rank 1 in $ns1 ($ip1); this shell in $here"
fi

# 3. test_dist across the two hosts.
# shellcheck disable=SC2086
run_bounded 60 $MPIRUN "$TEST_DIST" >"$tmp/t.out" 2>"$tmp/t.err"
rc=$?
if [ "$rc" -ne 0 ]; then
    fail "test_dist over the veth ($why)"; show_err "$tmp/t.out"; show_err "$tmp/t.err"
else
    echo "ok: test_dist over the veth: $(cat "$tmp/t.out" "$tmp/t.err" | grep -m1 'checks')"
fi

# 4. chutney train --distributed across the two hosts against one process
#    with the global batch.
common="--model mlp --limit 2048 --epochs 1 --threads 1 --json"
# shellcheck disable=SC2086
run_bounded 60 $MPIRUN "$CHUTNEY" train $common --batch 32 --distributed >"$tmp/d.out" 2>"$tmp/d.err"
rc=$? why_d=$why
# shellcheck disable=SC2086
run_bounded 60 "$CHUTNEY" train $common --batch 64 >"$tmp/s.out" 2>"$tmp/s.err"
rc1=$?
if [ "$rc" -ne 0 ] || [ "$rc1" -ne 0 ]; then
    fail "train: 2 hosts ($why_d) or one process ($why) failed"; show_err "$tmp/d.err"; show_err "$tmp/s.err"
else
    ld=$(json_field "$tmp/d.out" final_loss) ls=$(json_field "$tmp/s.out" final_loss)
    nr=$(json_field "$tmp/d.out" ranks)
    if [ "$nr" != 2 ]; then
        fail "train over the veth: the JSON says ranks=$nr"
    elif [ -n "$ld" ] && [ -n "$ls" ] && awk -v a="$ld" -v b="$ls" 'BEGIN {
            d = a - b; if (d < 0) d = -d; exit !(d <= 1e-3 * (b < 0 ? -b : b)) }'; then
        echo "ok: train over the veth, 2 ranks x batch 32 = 1 process x batch 64: final loss $ld vs $ls"
    else
        fail "train over the veth: final loss '$ld', one process '$ls'"
    fi
fi

# 5. bench_dist over the veth; its bytes must show on the veth's counters.
before=$(veth_bytes)
# shellcheck disable=SC2086
run_bounded 60 $MPIRUN "$BENCH_DIST" >"$tmp/b.out" 2>"$tmp/b.err"
rc=$?
moved=$(($(veth_bytes) - before))
if [ "$rc" -ne 0 ] || ! grep -q '^alpha-beta:' "$tmp/b.out"; then
    fail "bench_dist over the veth ($why)"; show_err "$tmp/b.out"; show_err "$tmp/b.err"
else
    echo "ok: bench_dist over the veth ($IP_A <-> $IP_B, TCP):"
    sed 's/^/  | /' "$tmp/b.out"
    # Its largest allreduce alone (64 MiB, 10 times) crosses the veth.
    if [ "$moved" -lt $((64 * 1024 * 1024)) ]; then
        fail "bench_dist: only $moved bytes crossed the veth (shared memory or loopback used?)"
    else
        echo "ok: $((moved / 1048576)) MiB crossed the veth during bench_dist"
    fi
fi

# 6. The same with 1 ms of delay on veth-a (netem): latency dominates the
#    small sizes.
if ! command -v tc >/dev/null 2>&1; then
    echo "skipped part: bench_dist with 1 ms delay (no tc command)"
elif ! ip netns exec "$NS_A" tc qdisc add dev veth-a root netem delay 1ms 2>"$tmp/err"; then
    echo "skipped part: bench_dist with 1 ms delay (no netem: $(head -n 1 "$tmp/err"))"
else
    # shellcheck disable=SC2086
    run_bounded 60 $MPIRUN "$BENCH_DIST" >"$tmp/n.out" 2>"$tmp/n.err"
    rc=$?
    ip netns exec "$NS_A" tc qdisc del dev veth-a root 2>/dev/null
    small=$(awk '$1 == 4 { print $2 }' "$tmp/n.out")
    if [ "$rc" -ne 0 ] || [ -z "$small" ]; then
        fail "bench_dist with 1 ms delay ($why)"; show_err "$tmp/n.out"; show_err "$tmp/n.err"
    else
        echo "ok: bench_dist with netem delay 1ms on veth-a:"
        sed 's/^/  | /' "$tmp/n.out"
        # Timed between barriers (which absorb one crossing), the ring's 2
        # steps still wait about 1 ms for a message from A to B: half of
        # that is a safe floor (20 to 25 us without the delay).
        if awk -v t="$small" 'BEGIN { exit !(t >= 500) }'; then
            echo "ok: with 1 ms delay a 4-byte allreduce takes $small us (latency dominates)"
        else
            fail "with 1 ms delay a 4-byte allreduce takes only $small us"
        fi
    fi
fi

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "all passed"
