#!/usr/bin/env bash
# The short form of `make stress` (tests/stress/load.sh): 8 sessions x QD64
# with crc32c verification for 10 s after 2 warm-up rounds; the target's
# open fd count must not grow and its VmRSS must stay flat.
# runs-alone: load and leak check, the machine its load
exec env STRESS_TIME="${STRESS_TIME:-10}" STRESS_QUEUES="${STRESS_QUEUES:-8}" \
	STRESS_QD="${STRESS_QD:-64}" STRESS_WARMUP="${STRESS_WARMUP:-2}" \
	"$(dirname "$0")/../stress/load.sh"
