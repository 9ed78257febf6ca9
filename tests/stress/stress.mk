# Load and leak check (tests/stress/load.sh; see docs/RELIABILITY.md):
#
#   make stress                     STRESS_TIME=60 s, 32 sessions x QD64
#   make stress STRESS_TIME=300 STRESS_QUEUES=16
#
# Needs the fio engine ($(BUILD)/rblk-fio.so), built here if it can be.

STRESS_TIME ?= 60
STRESS_QUEUES ?= 32
STRESS_QD ?= 64

.PHONY: stress
stress: all fio-engine-try
	RBLK_BUILD=$(abspath $(BUILD)) STRESS_TIME=$(STRESS_TIME) \
		STRESS_QUEUES=$(STRESS_QUEUES) STRESS_QD=$(STRESS_QD) \
		tests/stress/load.sh

# make soak: the long form of every test that has one (a "# soak:" line;
# see tests/soak.sh), then the load and leak check above.
.PHONY: soak
soak: all $(UNIT_BINS) $(E2E_BINS) test-deps fio-engine-try
	BUILD=$(BUILD) tests/soak.sh
