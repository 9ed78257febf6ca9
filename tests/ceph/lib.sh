# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# For tests that need a Ceph cluster; source after tests/functions.sh.
#
#   requires_ceph             skip unless the ceph daemons and rbd exist
#   start_ceph [DIR [ARG...]] start a micro cluster (tests/ceph/micro-
#                             cluster.sh start DIR ARG..., e.g. --osds 3)
#                             under DIR (default or "": $TEST_DIR/ceph),
#                             stop it at exit, export its env (CEPH_CONF,
#                             CEPH_KEYRING, ...); sets CEPH_DIR
#   stop_ceph                 stop it now (the cluster-down cases)
#   rbd_target_conf FILE [KEY=VALUE...]
#                             write an rblk-target config with a [target]
#                             section naming this cluster (ceph_conf,
#                             ceph_id = admin) plus the KEY = VALUE lines

MICRO_CLUSTER=$RBLK_ROOT/tests/ceph/micro-cluster.sh

requires_ceph()
{
	requires ceph-mon ceph-osd ceph-mgr ceph-authtool monmaptool ceph rbd
}

start_ceph()
{
	CEPH_DIR=${1:-$TEST_DIR/ceph}
	[ $# -gt 0 ] && shift
	cleanup_fn "$MICRO_CLUSTER" stop "$CEPH_DIR"
	tmo 180 "$MICRO_CLUSTER" start "$CEPH_DIR" "$@" ||
		fail "micro cluster did not start (logs: $CEPH_DIR/log)"
	eval "$("$MICRO_CLUSTER" env "$CEPH_DIR")"
	export CEPH_DIR
}

stop_ceph()
{
	"$MICRO_CLUSTER" stop "$CEPH_DIR"
}

rbd_target_conf()
{
	local f=$1 kv
	shift
	{
		echo "[target]"
		echo "ceph_conf = $CEPH_CONF"
		echo "ceph_id = admin"
		for kv in "$@"; do
			echo "${kv%%=*} = ${kv#*=}"
		done
	} >"$f"
}
