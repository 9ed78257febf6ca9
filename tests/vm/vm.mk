# tests/vm/vm.mk - guest tests: real kernel RDMA (rdma_rxe), nbd and ublk in a
# QEMU (TCG) guest that shares the host root read-only. See tests/vm/README.md.
# Included from the top Makefile, which defines BUILD and the target `all`.
#
#   make vm-setup                    install qemu etc., fetch + prepare the guest kernel
#   make check-vm                    build, then every tests/vm/tests/*.sh in one guest
#   make check-vm VM_TESTS="00 rxe"  only those (names as run-test.sh takes them)
#   make check-vm VM_FLAGS=-v        stream each test's output
#   make vm-shell                    interactive root shell in the guest
#   RBLK_VM_SKIP=1 make check-vm     skip the guest tests (prints why)

VM_DIR := tests/vm
VM_TESTS ?=
VM_FLAGS ?=

.PHONY: vm-setup check-vm vm-shell

vm-setup:
	$(VM_DIR)/setup.sh

ifeq ($(RBLK_VM_SKIP),1)
check-vm:
	@echo "check-vm: skipped (RBLK_VM_SKIP=1)"
else
check-vm: all vm-setup
	BUILD=$(BUILD) $(VM_DIR)/run-test.sh $(VM_FLAGS) $(VM_TESTS)
endif

vm-shell: all vm-setup
	BUILD=$(BUILD) $(VM_DIR)/run-vm.sh --shell --timeout 3600
