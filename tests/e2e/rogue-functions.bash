# SPDX-License-Identifier: MIT
# Sourced by the e2e tests that face tests/e2e/rblk_rogue.py (76-79),
# after tests/functions.sh.

# start_rogue MODE [SIZE]: a rogue target misbehaving as MODE says, on a
# free port, its volume SIZE bytes (default 4 MiB); sets ROGUE_PID,
# ROGUE_LOG (its "conn N T" lines) and ROGUE_URL.
start_rogue()
{
	ROGUE_LOG=$TEST_DIR/rogue.$1.log
	python3 "$RBLK_ROOT/tests/e2e/rblk_rogue.py" 0 "$1" ${2:+"$2"} \
		>"$ROGUE_LOG" 2>&1 &
	ROGUE_PID=$!
	cleanup_fn stop_pid "$ROGUE_PID"
	_wait_for_line "$ROGUE_LOG" '^listening ' "$ROGUE_PID" 20 ||
		fail "rogue target ($1) did not start: $(cat "$ROGUE_LOG")"
	ROGUE_URL=tcp://127.0.0.1:$(awk '/^listening /{ print $2; exit }' \
		"$ROGUE_LOG")/vol
}

# rogue_conns: connections the rogue target has accepted so far.
rogue_conns()
{
	grep -c '^conn ' "$ROGUE_LOG" || true
}

# field NAME LINE: the value of NAME=VALUE in LINE.
field()
{
	sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"
}
