# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# For the multipath tests (tests/e2e/51-multipath*.sh); source after
# tests/functions.sh. Two targets, "a" and "b", export one volume with the
# same arguments; fio drives it through the rblk engine with both paths.
#
#   mp_start_targets ARGS...  start targets a and b with ARGS; sets
#                             MP_PORT[t], MP_PID[t], MP_LOG[t] (the latest
#                             log), URL_A and URL_B
#   mp_restart T              start target T again on its own port (after
#                             kill -9 the port is free at once:
#                             SO_REUSEADDR); updates MP_PID[T], MP_LOG[T]
#   mp_fio_start OUT ARGS...  start fio ARGS in the background with verify
#                             writes checked as they go and a per-I/O
#                             latency log ($TEST_DIR/lat_lat.1.log, unix
#                             ms); output to OUT; sets MP_FIO_PID
#   mp_fio_wait OUT           wait (120 s) for it; fail unless it passed
#   mp_wait_moves LOG N       wait (10 s) until fio's output LOG says N times
#                             that the session moved to another path
#   mp_cycles FIO_PID LOG N   N cycles: kill -9 the active target (a, b,
#                             a, ...), wait for the move, restart it; the
#                             kill times (unix ms) go to MP_KILLS
#   mp_pauses LATLOG          print the failover pause of each cycle in ms:
#                             the longest latency of an I/O completing
#                             between that kill and the next (fio's per-I/O
#                             log with --log_unix_epoch=1); -1 when no I/O
#                             completed after a kill
#   mp_check_pauses PAUSES    fail unless each is 0..5000 ms

declare -A MP_PORT MP_PID MP_LOG
MP_ARGS=()
MP_KILLS=()

mp_start_targets()
{
	MP_ARGS=("$@")
	start_target "$@"
	MP_PORT[a]=$RBLK_PORT MP_PID[a]=$RBLK_TARGET_PID MP_LOG[a]=$RBLK_TARGET_LOG
	mkdir -p "$TEST_DIR/b"
	TEST_DIR=$TEST_DIR/b start_target "$@"
	MP_PORT[b]=$RBLK_PORT MP_PID[b]=$RBLK_TARGET_PID MP_LOG[b]=$RBLK_TARGET_LOG
	URL_A=tcp://127.0.0.1:${MP_PORT[a]}/vol0
	URL_B=tcp://127.0.0.1:${MP_PORT[b]}/vol0
}

mp_restart()
{
	local t=$1 log=$TEST_DIR/restart.$1.$RANDOM.log
	"$RBLK_TARGET_BIN" --listen "tcp://127.0.0.1:${MP_PORT[$t]}" \
		--allow-any-host --log-level info \
		--ctl-socket "$TEST_DIR/restart.$t.sock" "${MP_ARGS[@]}" \
		>"$log" 2>&1 &
	MP_PID[$t]=$!
	MP_LOG[$t]=$log
	cleanup_fn stop_pid "${MP_PID[$t]}"
	_wait_for_line "$log" "listening on" "${MP_PID[$t]}" 10 ||
		{ cat "$log"; fail "target $t did not restart"; }
}

mp_fio_start()
{
	local out=$1
	shift
	fio "$@" --verify_backlog=256 --write_lat_log="$TEST_DIR/lat" \
		--log_unix_epoch=1 >"$out" 2>&1 &
	MP_FIO_PID=$!
	cleanup_fn _kill_quiet "$MP_FIO_PID"
}

mp_fio_wait()
{
	wait_pid 120 "$MP_FIO_PID" || { cat "$1"; fail "fio verify failed"; }
	grep -q "err= 0" "$1" || { cat "$1"; fail "fio reported an error"; }
}

mp_wait_moves()
{
	local i
	for ((i = 0; i < 200; i++)); do
		[ "$(grep -c ': now on path' "$1" || true)" -ge "$2" ] && return 0
		sleep 0.05
	done
	cat "$1"
	fail "the session did not move to another path (want $2 moves)"
}

mp_cycles()
{
	local fio_pid=$1 log=$2 n=$3 c active=a
	for ((c = 1; c <= n; c++)); do
		kill -0 "$fio_pid" 2>/dev/null ||
			{ cat "$log"; fail "fio ended before cycle $c"; }
		kill -9 "${MP_PID[$active]}"
		wait "${MP_PID[$active]}" 2>/dev/null || true
		MP_KILLS+=("$(date +%s%3N)")
		mp_wait_moves "$log" "$c"
		mp_restart "$active"
		echo "cycle $c: killed $active, I/O moved on"
		[ $active = a ] && active=b || active=a
		sleep 1.5
	done
}

mp_pauses()
{
	awk -F', *' -v kills="${MP_KILLS[*]}" '
	BEGIN { n = split(kills, k, " "); k[n + 1] = 1e15 }
	{ for (i = 1; i <= n; i++)
		if ($1 >= k[i] && $1 < k[i + 1]) {
			c[i]++
			if ($2 / 1e6 > m[i])
				m[i] = $2 / 1e6
		} }
	END { for (i = 1; i <= n; i++) printf "%d ", c[i] ? m[i] : -1 }' "$1"
}

mp_check_pauses()
{
	local p
	echo "failover pause per cycle (ms): $*"
	for p in "$@"; do
		[ "$p" -ge 0 ] || fail "no I/O completed after a kill (pauses: $*)"
		[ "$p" -le 5000 ] || fail "a failover paused I/O for $p ms (> 5 s)"
	done
}
