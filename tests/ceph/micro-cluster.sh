#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A throw-away Ceph cluster for tests: one mon, one mgr and one memstore
# OSD on 127.0.0.1, cephx on, a pool "rbd" of size 1. Everything lives
# under DIR; two clusters run side by side with different --port-base.
#
#   tests/ceph/micro-cluster.sh start DIR [--port-base N] [--mem SIZE]
#                                          [--osds N] [--pool-size N]
#       create and start it, wait (at most 60 s) for HEALTH_OK; exit 0
#       when healthy. N: the mon listens on N (v2) and N+1 (v1), the other
#       daemons bind in N+2..N+40 (default: a free range chosen at random).
#       SIZE: memstore capacity per OSD (default 2G; RSS grows with data).
#       --osds (default 1) OSDs, --pool-size (default 1) replicas of the
#       pool "rbd" (min size 1); more than one OSD also shortens failure
#       detection (heartbeats every 1 s, grace 4 s) for thrash tests.
#   tests/ceph/micro-cluster.sh stop DIR
#       stop the daemons (OSDs first, then mgr, then mon) and wait for them.
#   tests/ceph/micro-cluster.sh kill-osd DIR ID | start-osd DIR ID
#       kill -9 osd.ID (its memstore loses what it held; peers backfill
#       it) / start it again (no wait for health)
#   tests/ceph/micro-cluster.sh restart-mon DIR
#       stop the mon (SIGTERM) and start it again (no wait)
#   tests/ceph/micro-cluster.sh env DIR
#       print shell assignments: CEPH_CONF, CEPH_KEYRING, CEPH_ID (admin),
#       CEPH_MON_ADDR, CEPH_POOL; `eval "$(micro-cluster.sh env DIR)"`.
#
# Keys: DIR/keyring holds client.admin (all caps) and client.rblk (the
# `profile rbd` caps a gateway needs, blocklisting included); the daemons'
# keys are made with ceph-authtool up front. Logs: DIR/log/.
set -euo pipefail
# a test's client settings (start_ceph exports them) must not reach the
# daemons: CEPH_KEYRING would make a revived OSD look for its key in the
# admin keyring
unset CEPH_KEYRING CEPH_ID CEPH_ARGS

usage()
{
	sed -n '4,30p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

die()
{
	echo "micro-cluster: $*" >&2
	exit 1
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$2
shift 2
osd_id=
case $cmd in kill-osd | start-osd) [ $# -ge 1 ] || usage; osd_id=$1; shift ;; esac
port_base=
mem=2G
osds=1
pool_size=1
while [ $# -gt 0 ]; do
	case $1 in
	--port-base) port_base=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--osds) osds=$2; shift 2 ;;
	--pool-size) pool_size=$2; shift 2 ;;
	*) usage ;;
	esac
done

# A base port whose range N..N+40 is free on 127.0.0.1 right now.
pick_port_base()
{
	python3 - <<'EOF'
import random, socket
for _ in range(200):
    base = random.randrange(20000, 60000 - 64)
    ok = True
    for p in range(base, base + 41):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            ok = False
        finally:
            s.close()
        if not ok:
            break
    if ok:
        print(base)
        break
EOF
}

# Wait up to $1 s for `ceph health` to say HEALTH_OK.
wait_healthy()
{
	local end=$((SECONDS + $1)) h=
	while [ $SECONDS -lt $end ]; do
		h=$(timeout 10 ceph -c "$dir/ceph.conf" health 2>/dev/null || true)
		case $h in HEALTH_OK*) return 0 ;; esac
		sleep 0.3
	done
	echo "micro-cluster: not healthy after ${secs}s: $h" >&2
	timeout 10 ceph -c "$dir/ceph.conf" -s >&2 || true
	return 1
}

# Start daemon $1 (mon, mgr, osd) with id $2; it daemonizes and writes
# DIR/run/TYPE.ID.pid.
start_daemon()
{
	"ceph-$1" -c "$dir/ceph.conf" -i "$2" 2>>"$dir/log/start.log" ||
		die "ceph-$1 -i $2 failed to start (see $dir/log/$1.$2.log)"
}

authtool()
{
	ceph-authtool "$@" >/dev/null
}

stop_daemon()
{
	local pidf=$dir/run/$1.pid pid i
	[ -f "$pidf" ] || return 0
	pid=$(cat "$pidf")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	fi
	rm -f "$pidf"
}

# Heartbeat settings for clusters that lose OSDs on purpose: a killed
# OSD is marked down after ~4 s instead of 20, so I/O waiting on it
# stalls for seconds, not half a minute.
fast_failover()
{
	[ "$osds" -gt 1 ] || return 0
	echo "osd heartbeat interval = 1"
	echo "osd heartbeat grace = 4"
	echo "mon osd min down reporters = 1"
	echo "osd mon report interval = 1"
}

# Create osd.$1 (keyring already made) and start it.
make_osd()
{
	local id=$1 uuid
	uuid=$(cat /proc/sys/kernel/random/uuid)
	# a file, not <(...): the test guest has no /dev/fd
	printf '{"cephx_secret": "%s"}' \
		"$(ceph-authtool "$dir/osd.$id.keyring" -p -n "osd.$id")" \
		>"$dir/osd.$id.json"
	timeout 20 ceph -c "$dir/ceph.conf" osd new "$uuid" "$id" \
		-i "$dir/osd.$id.json" >/dev/null || die "ceph osd new $id failed"
	ceph-osd -c "$dir/ceph.conf" -i "$id" --mkfs --osd-uuid "$uuid" \
		>/dev/null 2>&1 || die "ceph-osd --mkfs failed (see $dir/log/osd.$id.log)"
	start_daemon osd "$id"
}

cmd_start()
{
	local fsid keys mon v2 v1 i
	for t in ceph-mon ceph-osd ceph-mgr ceph-authtool monmaptool ceph rbd; do
		command -v "$t" >/dev/null ||
			die "$t not found (make test-deps installs the ceph packages)"
	done
	[ -e "$dir/ceph.conf" ] && die "$dir already holds a cluster (stop it, remove the directory)"
	case $osds in '' | *[!0-9]* | 0) die "bad --osds $osds" ;; esac
	case $pool_size in '' | *[!0-9]* | 0) die "bad --pool-size $pool_size" ;; esac
	[ "$pool_size" -le "$osds" ] || die "--pool-size $pool_size > --osds $osds"
	mkdir -p "$dir"/{run,log,mon.a,mgr.x}
	for ((i = 0; i < osds; i++)); do mkdir -p "$dir/osd.$i"; done
	dir=$(cd "$dir" && pwd)
	[ -n "$port_base" ] || port_base=$(pick_port_base)
	[ -n "$port_base" ] || die "no free port range on 127.0.0.1"
	v2=$port_base
	v1=$((port_base + 1))
	mon="[v2:127.0.0.1:$v2,v1:127.0.0.1:$v1]"
	fsid=$(cat /proc/sys/kernel/random/uuid)

	cat >"$dir/ceph.conf" <<EOF
# micro cluster for rblk tests (tests/ceph/micro-cluster.sh)
[global]
fsid = $fsid
mon host = $mon
mon initial members = a
public network = 127.0.0.0/8
ms bind port min = $((port_base + 2))
ms bind port max = $((port_base + 40))
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $dir/keyring
run dir = $dir/run
log file = $dir/log/\$name.log
crash dir = $dir/crash
osd pool default size = $pool_size
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim allowed = false
auth allow insecure global id reclaim = false
mon data avail warn = 1
mon data avail crit = 0
$(fast_failover)
# no admin socket for clients: two clients of the same name (fio jobs,
# two targets) would fight over one path
admin socket =

[mon]
mon data = $dir/mon.\$id
pid file = $dir/run/\$name.pid
admin socket = $dir/run/\$name.asok

[mgr]
mgr data = $dir/mgr.\$id
pid file = $dir/run/\$name.pid
admin socket = $dir/run/\$name.asok
keyring = $dir/\$name.keyring

[osd]
osd data = $dir/osd.\$id
osd objectstore = memstore
memstore device bytes = $(numfmt --from=iec "$mem")
memstore page set = true
pid file = $dir/run/\$name.pid
admin socket = $dir/run/\$name.asok
keyring = $dir/\$name.keyring
osd crush update on start = true
EOF

	keys=$dir/keyring
	authtool "$dir/mon.a.keyring" --create-keyring --gen-key -n mon. \
		--cap mon 'allow *'
	authtool "$keys" --create-keyring --gen-key -n client.admin \
		--cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' \
		--cap mds 'allow *'
	authtool "$keys" --gen-key -n client.rblk \
		--cap mon 'profile rbd' --cap osd 'profile rbd' \
		--cap mgr 'profile rbd'
	for ((i = 0; i < osds; i++)); do
		authtool "$dir/osd.$i.keyring" --create-keyring --gen-key -n "osd.$i" \
			--cap mon 'allow profile osd' --cap osd 'allow *' \
			--cap mgr 'allow profile osd'
	done
	authtool "$dir/mgr.x.keyring" --create-keyring --gen-key -n mgr.x \
		--cap mon 'allow profile mgr' --cap osd 'allow *' \
		--cap mds 'allow *'
	# the mon's keyring seeds its auth database with every key
	for k in "$keys" "$dir"/osd.*.keyring "$dir/mgr.x.keyring"; do
		authtool "$dir/mon.a.keyring" --import-keyring "$k" >/dev/null
	done
	monmaptool --create --fsid "$fsid" --addv a "$mon" "$dir/monmap" >/dev/null
	ceph-mon -c "$dir/ceph.conf" --mkfs -i a --monmap "$dir/monmap" \
		--keyring "$dir/mon.a.keyring" ||
		die "ceph-mon --mkfs failed (see $dir/log/mon.a.log)"
	start_daemon mon a
	# devicehealth would create a pool a few seconds in; nothing to monitor
	timeout 20 ceph -c "$dir/ceph.conf" config set mgr \
		mgr/devicehealth/enable_monitoring false --force >/dev/null ||
		die "the mon does not answer (see $dir/log/mon.a.log)"
	start_daemon mgr x

	for ((i = 0; i < osds; i++)); do make_osd "$i"; done

	timeout 20 ceph -c "$dir/ceph.conf" osd pool create rbd 8 8 >/dev/null 2>&1 ||
		die "pool create failed"
	timeout 20 rbd -c "$dir/ceph.conf" pool init rbd || die "rbd pool init failed"
	wait_healthy 60 || exit 1
	echo "micro-cluster: $dir healthy, mon $mon"
}

cmd_stop()
{
	[ -f "$dir/ceph.conf" ] || return 0
	# the OSD first: a mon gone before it leaves it retrying for a while
	local f
	for f in "$dir"/run/osd.*.pid; do
		[ -e "$f" ] || continue
		f=${f##*/}
		stop_daemon "${f%.pid}"
	done
	stop_daemon mgr.x
	stop_daemon mon.a
}

cmd_env()
{
	[ -f "$dir/ceph.conf" ] || die "no cluster in $dir"
	dir=$(cd "$dir" && pwd)
	echo "CEPH_CONF=$dir/ceph.conf"
	echo "CEPH_KEYRING=$dir/keyring"
	echo "CEPH_ID=admin"
	echo "CEPH_MON_ADDR='$(sed -n 's/^mon host = //p' "$dir/ceph.conf")'"
	echo "CEPH_POOL=rbd"
	echo "export CEPH_CONF CEPH_KEYRING CEPH_ID CEPH_MON_ADDR CEPH_POOL"
}

cmd_kill_osd()
{
	local pidf=$dir/run/osd.$1.pid
	local pid i
	[ -f "$pidf" ] || die "osd.$1 is not running"
	pid=$(cat "$pidf")
	kill -KILL "$pid" 2>/dev/null || true
	# gone for good before a revival can take its store and ports
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	rm -f "$pidf"
}

# A revived OSD may find its old instance's store lock or ports not yet
# released (kill -9 under load): try a few times, then show why.
cmd_start_osd()
{
	local i
	for ((i = 0; i < 5; i++)); do
		"ceph-osd" -c "$dir/ceph.conf" -i "$1" 2>>"$dir/log/start.log" &&
			return 0
		sleep 1
	done
	tail -n 5 "$dir/log/start.log" "$dir/log/osd.$1.log" >&2
	die "ceph-osd -i $1 failed to start 5 times"
}

case $cmd in
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
kill-osd) cmd_kill_osd "$osd_id" ;;
start-osd) cmd_start_osd "$osd_id" ;;
restart-mon) stop_daemon mon.a; start_daemon mon a ;;
*) usage ;;
esac
