# SPDX-License-Identifier: MIT
#
# tools/bench/bench.mk - guest benchmark: rblk (fio engine, ublk, nbd) vs
# the kernel's nvme-rdma -> nvmet-rdma over rdma_rxe, in one QEMU guest
# (tests/vm). Included from the top Makefile (BUILD, `all`, vm-setup from
# tests/vm/vm.mk).
#
#   make bench-vm                              build, run, print the table
#   make bench-vm BENCH_VM_ARGS="--runtime 5"  arguments for vm-bench.sh
#   make bench-vm BENCH_VM_TIMEOUT=2400        guest wall-clock limit (s)
#
# The guest's out directory is $(BUILD)/vm-bench-out (fio JSON, logs,
# output.log); the table is copied to $(BUILD)/vm-bench.md.

BENCH_VM_ARGS ?=
BENCH_VM_TIMEOUT ?= 1500
BENCH_VM_OUT := $(BUILD)/vm-bench-out

.PHONY: bench-vm

bench-vm: all $(BUILD)/rblk-fio.so vm-setup
	rm -rf $(BENCH_VM_OUT)
	BUILD=$(BUILD) tests/vm/run-vm.sh --out $(BENCH_VM_OUT) \
		--timeout $(BENCH_VM_TIMEOUT) -- tools/bench/vm-bench.sh $(BENCH_VM_ARGS); \
	rc=$$?; \
	if [ -s $(BENCH_VM_OUT)/vm-bench.md ]; then \
		cp $(BENCH_VM_OUT)/vm-bench.md $(BUILD)/vm-bench.md; \
		echo; echo "== $(BUILD)/vm-bench.md"; cat $(BUILD)/vm-bench.md; \
	else echo "bench-vm: no table (see $(BENCH_VM_OUT)/output.log)"; fi; \
	exit $$rc
