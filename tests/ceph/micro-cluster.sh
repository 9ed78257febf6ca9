#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A throw-away Ceph cluster for tests: one mon, one mgr and one memstore
# OSD on 127.0.0.1, cephx on, a pool "rbd" of size 1. Everything lives
# under DIR; two clusters run side by side with different --port-base.
#
#   tests/ceph/micro-cluster.sh start DIR [--port-base N] [--mem SIZE]
#       create and start it, wait (at most 60 s) for HEALTH_OK; exit 0
#       when healthy. N: the mon listens on N (v2) and N+1 (v1), the other
#       daemons bind in N+2..N+40 (default: a free range chosen at random).
#       SIZE: memstore capacity (default 2G; RSS grows with data written).
#   tests/ceph/micro-cluster.sh stop DIR
#       stop the daemons (OSD first, then mgr, then mon) and wait for them.
#   tests/ceph/micro-cluster.sh env DIR
#       print shell assignments: CEPH_CONF, CEPH_KEYRING, CEPH_ID (admin),
#       CEPH_MON_ADDR, CEPH_POOL; `eval "$(micro-cluster.sh env DIR)"`.
#
# Keys: DIR/keyring holds client.admin (all caps) and client.rblk (the
# `profile rbd` caps a gateway needs, blocklisting included); the daemons'
# keys are made with ceph-authtool up front. Logs: DIR/log/.
set -euo pipefail

usage()
{
	sed -n '4,21p' "$0" | sed 's/^# \{0,1\}//' >&2
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
port_base=
mem=2G
while [ $# -gt 0 ]; do
	case $1 in
	--port-base) port_base=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
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

cmd_start()
{
	local fsid osd_uuid keys mon v2 v1
	for t in ceph-mon ceph-osd ceph-mgr ceph-authtool monmaptool ceph rbd; do
		command -v "$t" >/dev/null ||
			die "$t not found (make test-deps installs the ceph packages)"
	done
	[ -e "$dir/ceph.conf" ] && die "$dir already holds a cluster (stop it, remove the directory)"
	mkdir -p "$dir"/{run,log,mon.a,mgr.x,osd.0}
	dir=$(cd "$dir" && pwd)
	[ -n "$port_base" ] || port_base=$(pick_port_base)
	[ -n "$port_base" ] || die "no free port range on 127.0.0.1"
	v2=$port_base
	v1=$((port_base + 1))
	mon="[v2:127.0.0.1:$v2,v1:127.0.0.1:$v1]"
	fsid=$(cat /proc/sys/kernel/random/uuid)
	osd_uuid=$(cat /proc/sys/kernel/random/uuid)

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
osd pool default size = 1
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
	authtool "$dir/osd.0.keyring" --create-keyring --gen-key -n osd.0 \
		--cap mon 'allow profile osd' --cap osd 'allow *' \
		--cap mgr 'allow profile osd'
	authtool "$dir/mgr.x.keyring" --create-keyring --gen-key -n mgr.x \
		--cap mon 'allow profile mgr' --cap osd 'allow *' \
		--cap mds 'allow *'
	# the mon's keyring seeds its auth database with every key
	for k in "$keys" "$dir/osd.0.keyring" "$dir/mgr.x.keyring"; do
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

	# a file, not <(...): the test guest has no /dev/fd
	printf '{"cephx_secret": "%s"}' \
		"$(ceph-authtool "$dir/osd.0.keyring" -p -n osd.0)" \
		>"$dir/osd.0.json"
	timeout 20 ceph -c "$dir/ceph.conf" osd new "$osd_uuid" 0 \
		-i "$dir/osd.0.json" >/dev/null || die "ceph osd new failed"
	ceph-osd -c "$dir/ceph.conf" -i 0 --mkfs --osd-uuid "$osd_uuid" \
		>/dev/null 2>&1 || die "ceph-osd --mkfs failed (see $dir/log/osd.0.log)"
	start_daemon osd 0

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
	stop_daemon osd.0
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

case $cmd in
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
*) usage ;;
esac
