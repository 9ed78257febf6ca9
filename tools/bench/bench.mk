# SPDX-License-Identifier: MIT
#
# tools/bench/bench.mk - the benchmarks (not tests). Included from the top
# Makefile (BUILD, `all`, fio-engine, vm-setup from tests/vm/vm.mk).
#
#   make bench                                 host: tools/bench/host-bench.sh
#   make bench BENCH_RUNTIME=10                seconds per cell (default 5)
#   make bench BENCH_ARGS="--paths ..."        arguments for host-bench.sh
#   make bench-vm                              guest: tools/bench/vm-bench.sh
#   make bench-vm BENCH_VM_ARGS="--runtime 5"  arguments for vm-bench.sh
#   make bench-vm BENCH_VM_TIMEOUT=2400        guest wall-clock limit (s)
#
# Both write their table into docs/BENCHMARKS.md (between the
# host-bench / vm-bench markers) with a chart beside it (docs/bench-host.png,
# docs/bench-vm.png, gnuplot). The guest's out directory is
# $(BUILD)/vm-bench-out (fio JSON, logs, results, output.log); the table is
# also copied to $(BUILD)/vm-bench.md.

DEB_BENCH_DEPS := fio nbdkit jq python3 gnuplot-nox linux-perf
BENCH_ARGS ?=
BENCH_RUNTIME ?=
BENCH_VM_ARGS ?=
BENCH_VM_TIMEOUT ?= 3300
BENCH_VM_OUT := $(BUILD)/vm-bench-out

.PHONY: bench bench-vm bench-deps

bench-deps:
	@m="$(call missing,$(DEB_BENCH_DEPS))"; if [ -n "$$m" ]; then \
		echo "installing benchmark dependencies: $$m"; \
		tools/apt-install.sh $$m; fi

# The full set on a file (disk), then the QD32 random reads and the
# sequential reads again on tmpfs: the software paths without the disk.
bench: all $(BUILD)/rblk-fio.so bench-deps
	BUILD=$(BUILD) BENCH_RUNTIME=$(BENCH_RUNTIME) \
		tools/bench/host-bench.sh --doc docs/BENCHMARKS.md \
		--chart docs/bench-host.png $(BENCH_ARGS)
	BUILD=$(BUILD) BENCH_RUNTIME=$(BENCH_RUNTIME) \
		tools/bench/host-bench.sh --doc docs/BENCHMARKS.md \
		--marker host-bench-tmpfs --dir /dev/shm \
		--only 'randread QD32|randread QD1|randwrite QD32|seq read' $(BENCH_ARGS)

bench-vm: all $(BUILD)/rblk-fio.so vm-setup bench-deps
	rm -rf $(BENCH_VM_OUT)
	BUILD=$(BUILD) tests/vm/run-vm.sh --out $(BENCH_VM_OUT) \
		--timeout $(BENCH_VM_TIMEOUT) -- tools/bench/vm-bench.sh $(BENCH_VM_ARGS); \
	rc=$$?; \
	if [ -s $(BENCH_VM_OUT)/vm-bench-results.txt ]; then \
		tools/bench/vm-bench.sh --report $(BENCH_VM_OUT) \
			--chart docs/bench-vm.png --doc docs/BENCHMARKS.md && \
		cp $(BENCH_VM_OUT)/vm-bench.md $(BUILD)/vm-bench.md; \
		echo; echo "== $(BUILD)/vm-bench.md"; cat $(BUILD)/vm-bench.md; \
	else echo "bench-vm: no results (see $(BENCH_VM_OUT)/output.log)"; fi; \
	exit $$rc
