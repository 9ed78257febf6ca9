# rblk - one Makefile for everything. See README.md.
#
#   make                 build into build/
#   make check           unit, end-to-end and guest tests (installs what they need)
#   make check-unit      unit tests only; make check-e2e: host e2e only
#   make check-vm        the guest suite only (QEMU, real kernel RDMA/nbd/ublk)
#   make demo            export a demo volume, move data through it, report
#   make install PREFIX=/usr/local DESTDIR= [UNITDIR=] [UDEVDIR=]
#   make SANITIZE=1      build with ASan + UBSan (into build/ as usual)
#   make fuzz            libFuzzer harnesses, FUZZ_TIME s each (tests/fuzz)
#   make stress          load and leak check, STRESS_TIME s (tests/stress)
#   make nbdkit-plugin   the nbdkit plugin (part of make all with nbdkit-plugin-dev)
#   make deps            install the Debian packages the build needs

PREFIX ?= /usr/local
DESTDIR ?=
UNITDIR ?= $(PREFIX)/lib/systemd/system
# udev rule (60-rblk.rules) and its namer (rblk-udev-name): /dev/rblk/...
UDEVDIR ?= $(PREFIX)/lib/udev/rules.d
UDEVHELPERDIR ?= $(PREFIX)/lib/udev
BUILD ?= build
CC ?= gcc

PKGS := libibverbs librdmacm liburing inih libnl-genl-3.0 libsodium json-c \
	libmicrohttpd gnutls
DEB_BUILD_DEPS := build-essential pkg-config libibverbs-dev librdmacm-dev \
	rdma-core liburing-dev libaio-dev libinih-dev libnl-genl-3-dev \
	libnl-3-dev libsodium-dev libcmocka-dev librbd-dev librados-dev \
	libjson-c-dev libmicrohttpd-dev libtcmalloc-minimal4 nbdkit-plugin-dev \
	libgnutls28-dev
DEB_TEST_DEPS := fio nbdkit libnbd-bin python3-libnbd qemu-utils jq curl \
	ibverbs-utils rdmacm-utils man-db groff-base clang-14 libclang-rt-14-dev \
	clang-format tcpdump gnutls-bin \
	ceph-mon ceph-osd ceph-mgr ceph-common

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wno-unused-parameter -Wformat=2
CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 -pthread -fPIC $(WARN) -D_GNU_SOURCE -Iinclude -I.
LDFLAGS += -pthread

ifeq ($(SANITIZE),1)
CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif

# rblk-target's allocator: tcmalloc, as Ceph's own daemons link it. librbd
# and librados allocate and free several objects per I/O on the worker and
# their messenger threads, where glibc malloc costs the target CPU per read
# (docs/BENCHMARKS.md, "Ceph RBD"; docs/ARCHITECTURE.md, "Libraries we
# build on"). Not under the sanitizers, which bring their own allocator.
# The runtime package has no unversioned .so, hence the file name.
ifneq ($(SANITIZE),1)
TARGET_MALLOC := -l:libtcmalloc_minimal.so.4
endif

PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# the transports' libraries: verbs for rdma, GnuTLS for tcp's TLS
PKG_LIBS_VERBS = $(shell pkg-config --libs libibverbs librdmacm gnutls)
PKG_LIBS_URING = $(shell pkg-config --libs liburing)
PKG_LIBS_INIH = $(shell pkg-config --libs inih)
PKG_LIBS_NL = $(shell pkg-config --libs libnl-genl-3.0)
PKG_LIBS_SODIUM = $(shell pkg-config --libs libsodium)
PKG_LIBS_JSON = $(shell pkg-config --libs json-c)
PKG_LIBS_MHD = $(shell pkg-config --libs libmicrohttpd)
CFLAGS += $(PKG_CFLAGS)

# common/json.c is for the programs only: librblk does not link json-c
JSON_SRC := common/json.c
COMMON_SRC := $(filter-out $(JSON_SRC),$(wildcard common/*.c))
XPORT_SRC := $(wildcard transport/*.c)
CONFIG_SRC := $(wildcard config/*.c)
TARGET_SRC := $(wildcard target/*.c)
LIB_SRC := $(wildcard initiator/lib*.c)
CLI_SRC := $(filter-out $(LIB_SRC),$(wildcard initiator/*.c))
DEVICES_SRC := tools/rblk-devices.c tools/rblk-devices-query.c

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

COMMON_OBJ := $(call obj,$(COMMON_SRC))
JSON_OBJ := $(call obj,$(JSON_SRC))
XPORT_OBJ := $(call obj,$(XPORT_SRC))
CONFIG_OBJ := $(call obj,$(CONFIG_SRC))
TARGET_OBJ := $(call obj,$(TARGET_SRC))
LIB_OBJ := $(call obj,$(LIB_SRC))
CLI_OBJ := $(call obj,$(CLI_SRC))
DEVICES_OBJ := $(call obj,$(DEVICES_SRC))

# The release number lives in one place, include/rblk/rblk.h; programs add
# `git describe` (build/gen/version-git.h, rewritten only when it changes).
RBLK_VERSION := $(shell sed -n 's/^[#]define RBLK_VERSION_STRING "\(.*\)"/\1/p' include/rblk/rblk.h)


SONAME := librblk.so.0
PROGS := $(BUILD)/rblk-target $(BUILD)/rblk $(BUILD)/rblk-devices
LIBS := $(BUILD)/librblk.so $(BUILD)/librblk.a

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))

.PHONY: FORCE all clean check check-unit check-e2e demo install deps test-deps \
	format help
all: $(PROGS) $(LIBS) $(BUILD)/rblk.pc nbdkit-plugin-maybe

help:
	@sed -n '2,14p' Makefile | sed 's/^# //'

$(BUILD)/gen/version-git.h: FORCE
	@mkdir -p $(dir $@)
	@d=$$(git describe --tags --always --dirty 2>/dev/null); \
	printf '#define RBLK_GIT_DESCRIBE "%s"\n' "$$d" > $@.tmp; \
	if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/obj/common/version.o: $(BUILD)/gen/version-git.h
$(BUILD)/obj/common/version.o: CFLAGS += -I$(BUILD)/gen
FORCE:

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

$(BUILD)/rblk-target: $(TARGET_OBJ) $(CONFIG_OBJ) $(XPORT_OBJ) $(COMMON_OBJ) $(JSON_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS_VERBS) $(PKG_LIBS_URING) \
		$(PKG_LIBS_INIH) $(PKG_LIBS_SODIUM) $(PKG_LIBS_JSON) \
		$(PKG_LIBS_MHD) -laio -lrbd -lrados $(TARGET_MALLOC)

$(BUILD)/librblk.so: $(LIB_OBJ) $(XPORT_OBJ) $(COMMON_OBJ) initiator/librblk.map
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) \
		-Wl,--version-script=initiator/librblk.map -o $@.0 \
		$(LIB_OBJ) $(XPORT_OBJ) $(COMMON_OBJ) $(PKG_LIBS_VERBS) \
		$(PKG_LIBS_SODIUM)
	ln -sf librblk.so.0 $@

# The static library is one relocatable object (ld -r) whose only global
# symbols are the ABI's, listed in librblk.map like the shared library's:
# common/ and transport/ names (log_msg, now_ns, ...) stay private, so a
# program linking librblk.a may define its own. 04-install checks it.
$(BUILD)/gen/librblk.syms: initiator/librblk.map
	@mkdir -p $(dir $@)
	sed -n 's/^[[:space:]]*\(rblk_[a-z0-9_]*\);.*/\1/p' $< > $@

$(BUILD)/librblk.a: $(LIB_OBJ) $(XPORT_OBJ) $(COMMON_OBJ) $(BUILD)/gen/librblk.syms
	$(LD) -r -o $(BUILD)/obj/librblk.o $(LIB_OBJ) $(XPORT_OBJ) $(COMMON_OBJ)
	objcopy --keep-global-symbols=$(BUILD)/gen/librblk.syms \
		$(BUILD)/obj/librblk.o
	rm -f $@ && ar rcs $@ $(BUILD)/obj/librblk.o

# The CLI links the library's objects (it uses common/ helpers that
# librblk.a keeps private), so build/rblk runs from the tree.
$(BUILD)/rblk: $(CLI_OBJ) $(LIB_OBJ) $(XPORT_OBJ) $(COMMON_OBJ) $(JSON_OBJ)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB_OBJ) $(XPORT_OBJ) $(COMMON_OBJ) \
		$(JSON_OBJ) $(PKG_LIBS_VERBS) $(PKG_LIBS_NL) $(PKG_LIBS_URING) \
		$(PKG_LIBS_SODIUM) $(PKG_LIBS_JSON)

$(BUILD)/rblk-devices: $(DEVICES_OBJ) $(COMMON_OBJ) $(JSON_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS_VERBS) $(PKG_LIBS_SODIUM) \
		$(PKG_LIBS_JSON)

$(BUILD)/rblk.pc: Makefile include/rblk/rblk.h
	@mkdir -p $(BUILD)
	printf 'prefix=%s\nincludedir=$${prefix}/include\nlibdir=$${prefix}/lib\n\nName: rblk\nDescription: rblk RDMA block storage initiator library\nVersion: %s\nCflags: -I$${includedir}\nLibs: -L$${libdir} -lrblk\nLibs.private: %s\n' \
		'$(PREFIX)' '$(RBLK_VERSION)' '$(PKG_LIBS_VERBS) $(PKG_LIBS_SODIUM)' > $@

# ---- tests ---------------------------------------------------------------

# Unit tests link the objects they test plus cmocka.
$(BUILD)/tests/test_%: tests/unit/test_%.c $(COMMON_OBJ) $(XPORT_OBJ) $(CONFIG_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(COMMON_OBJ) $(XPORT_OBJ) \
		$(CONFIG_OBJ) $(shell pkg-config --libs cmocka) \
		$(PKG_LIBS_VERBS) $(PKG_LIBS_INIH) $(PKG_LIBS_SODIUM)

# Unit tests of target/ code link the objects under test besides.
$(BUILD)/tests/test_login: tests/unit/test_login.c $(BUILD)/obj/target/login.o \
		$(COMMON_OBJ) $(XPORT_OBJ) $(CONFIG_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/obj/target/login.o \
		$(COMMON_OBJ) $(XPORT_OBJ) $(CONFIG_OBJ) \
		$(shell pkg-config --libs cmocka) $(PKG_LIBS_VERBS) \
		$(PKG_LIBS_INIH) $(PKG_LIBS_SODIUM)

$(BUILD)/tests/test_volid: tests/unit/test_volid.c $(BUILD)/obj/target/volid.o \
		$(COMMON_OBJ) $(XPORT_OBJ) $(CONFIG_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/obj/target/volid.o \
		$(COMMON_OBJ) $(XPORT_OBJ) $(CONFIG_OBJ) \
		$(shell pkg-config --libs cmocka) $(PKG_LIBS_VERBS) \
		$(PKG_LIBS_INIH) $(PKG_LIBS_SODIUM)

$(BUILD)/tests/test_pr: tests/unit/test_pr.c $(BUILD)/obj/target/pr.o \
		$(COMMON_OBJ) $(XPORT_OBJ) $(CONFIG_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/obj/target/pr.o \
		$(COMMON_OBJ) $(XPORT_OBJ) $(CONFIG_OBJ) \
		$(shell pkg-config --libs cmocka) $(PKG_LIBS_VERBS) \
		$(PKG_LIBS_INIH) $(PKG_LIBS_SODIUM)

$(BUILD)/tests/test_limits: tests/unit/test_limits.c \
		$(BUILD)/obj/target/limits.o $(COMMON_OBJ) $(CONFIG_OBJ) \
		$(XPORT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/obj/target/limits.o \
		$(COMMON_OBJ) $(CONFIG_OBJ) $(XPORT_OBJ) \
		$(shell pkg-config --libs cmocka) $(PKG_LIBS_VERBS) \
		$(PKG_LIBS_INIH) $(PKG_LIBS_SODIUM)

# librblk's queue state table (initiator/lib_reconnect.c), with its objects.
$(BUILD)/tests/test_queue_state: tests/unit/test_queue_state.c $(LIB_OBJ) \
		$(XPORT_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_OBJ) $(XPORT_OBJ) \
		$(COMMON_OBJ) $(shell pkg-config --libs cmocka) \
		$(PKG_LIBS_VERBS) $(PKG_LIBS_SODIUM)

$(BUILD)/tests/test_qos: tests/unit/test_qos.c $(BUILD)/obj/target/qos.o \
		$(COMMON_OBJ) $(CONFIG_OBJ) $(XPORT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/obj/target/qos.o \
		$(COMMON_OBJ) $(CONFIG_OBJ) $(XPORT_OBJ) \
		$(shell pkg-config --libs cmocka) $(PKG_LIBS_VERBS) \
		$(PKG_LIBS_INIH) $(PKG_LIBS_SODIUM)

# librblk against the target's objects in one process (tcp on loopback).
TARGET_LIB_OBJ := $(filter-out $(BUILD)/obj/target/main.o,$(TARGET_OBJ))
$(BUILD)/tests/test_lib: tests/unit/test_lib.c $(TARGET_LIB_OBJ) $(LIB_OBJ) \
		$(CONFIG_OBJ) $(XPORT_OBJ) $(COMMON_OBJ) $(JSON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(TARGET_LIB_OBJ) $(LIB_OBJ) \
		$(CONFIG_OBJ) $(XPORT_OBJ) $(COMMON_OBJ) $(JSON_OBJ) \
		$(shell pkg-config --libs cmocka) $(PKG_LIBS_VERBS) \
		$(PKG_LIBS_URING) $(PKG_LIBS_INIH) $(PKG_LIBS_SODIUM) \
		$(PKG_LIBS_JSON) $(PKG_LIBS_MHD) -laio -lrbd -lrados

# The backend registry with the real backends (files, ram, mmap, rbd).
$(BUILD)/tests/test_backend: tests/unit/test_backend.c $(TARGET_LIB_OBJ) \
		$(CONFIG_OBJ) $(XPORT_OBJ) $(COMMON_OBJ) $(JSON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(TARGET_LIB_OBJ) \
		$(CONFIG_OBJ) $(XPORT_OBJ) $(COMMON_OBJ) $(JSON_OBJ) \
		$(shell pkg-config --libs cmocka) $(PKG_LIBS_VERBS) \
		$(PKG_LIBS_URING) $(PKG_LIBS_INIH) $(PKG_LIBS_SODIUM) \
		$(PKG_LIBS_JSON) $(PKG_LIBS_MHD) -laio -lrbd -lrados

# Helper programs the end-to-end scripts drive.
E2E_BINS := $(BUILD)/tests/rblk_libtest $(BUILD)/tests/rblk_rawclient \
	$(BUILD)/tests/rblk_manysess $(BUILD)/tests/rblk_fleet \
	$(BUILD)/tests/rblk_fsx $(BUILD)/tests/rblk_prtest
# (its raw read-only case speaks the protocol itself: the objects, not
# librblk.a, whose internals are private)
$(BUILD)/tests/rblk_libtest: tests/e2e/rblk_libtest.c $(LIB_OBJ) $(XPORT_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_OBJ) $(XPORT_OBJ) $(COMMON_OBJ) \
		$(PKG_LIBS_VERBS) $(PKG_LIBS_SODIUM)

# A raw initiator on the transport API (security tests: 65-auth, 66-rkey).
$(BUILD)/tests/rblk_manysess: tests/e2e/rblk_manysess.c $(BUILD)/librblk.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/librblk.a \
		$(PKG_LIBS_VERBS) $(PKG_LIBS_SODIUM)

# I/O as one host, errors by name: the reservation tests (36-39).
$(BUILD)/tests/rblk_prtest: tests/e2e/rblk_prtest.c $(BUILD)/librblk.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/librblk.a \
		$(PKG_LIBS_VERBS) $(PKG_LIBS_SODIUM)

# What librblk pins with many sessions or unregistered buffers (issue 26).
$(BUILD)/tests/rblk_fleet: tests/e2e/rblk_fleet.c $(BUILD)/librblk.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/librblk.a \
		$(PKG_LIBS_VERBS) $(PKG_LIBS_SODIUM)

# rblk-target with fault injection (RBLK_FAULT=MODE, target/worker_int.h's
# target_fault()): the rogue target of the guest tests 25 and 26, where a
# rogue must speak real verbs. Only io.c and conn.c carry faults.
FAULT_SRC := target/io.c target/conn.c
FAULT_OBJ := $(patsubst %.c,$(BUILD)/obj-fault/%.o,$(FAULT_SRC))
$(BUILD)/obj-fault/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DRBLK_FAULTS -MMD -MP -c $< -o $@
-include $(shell find $(BUILD)/obj-fault -name '*.d' 2>/dev/null)
$(BUILD)/tests/rblk-target-fault: $(FAULT_OBJ) \
		$(filter-out $(call obj,$(FAULT_SRC)),$(TARGET_OBJ)) \
		$(CONFIG_OBJ) $(XPORT_OBJ) $(COMMON_OBJ) $(JSON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS_VERBS) $(PKG_LIBS_URING) \
		$(PKG_LIBS_INIH) $(PKG_LIBS_SODIUM) $(PKG_LIBS_JSON) \
		$(PKG_LIBS_MHD) -laio -lrbd -lrados $(TARGET_MALLOC)
E2E_BINS += $(BUILD)/tests/rblk-target-fault

# fsx against a model, and dm-log-writes replay and checks (issue 28).
$(BUILD)/tests/rblk_fsx: tests/e2e/rblk_fsx.c $(BUILD)/librblk.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/librblk.a \
		$(PKG_LIBS_VERBS) $(PKG_LIBS_SODIUM)

$(BUILD)/tests/rblk_rawclient: tests/e2e/rblk_rawclient.c $(XPORT_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(XPORT_OBJ) $(COMMON_OBJ) \
		$(PKG_LIBS_VERBS) $(PKG_LIBS_SODIUM)

# Protocol constants for the Python test tools (tests/e2e/rblk_raw.py,
# rblk_abuse.py, tests/fuzz/gen-corpus.py), printed by a program compiled
# against the C sources themselves (proto.h, the tcp transport's framing in
# tcp_internal.h, the completion statuses of transport.h, the target's
# login limit in worker_int.h): nothing is copied by hand.
CONST_SRC := common/proto.h transport/tcp_internal.h transport/transport.h \
	target/worker_int.h
$(BUILD)/gen/rblk_const.py: tests/gen/gen-const.sh $(CONST_SRC) \
		$(XPORT_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	tests/gen/gen-const.sh $(BUILD)/gen/gen_const.c $(CONST_SRC)
	$(CC) $(CFLAGS) -Wno-unused-function -Wno-missing-prototypes $(LDFLAGS) \
		-o $(BUILD)/gen/gen_const $(BUILD)/gen/gen_const.c \
		$(XPORT_OBJ) $(COMMON_OBJ) \
		$(PKG_LIBS_VERBS) $(PKG_LIBS_SODIUM)
	$(BUILD)/gen/gen_const > $@.tmp && mv $@.tmp $@
E2E_BINS += $(BUILD)/gen/rblk_const.py

# make check = host tests + the guest suite, one closing summary line.
check: all $(UNIT_BINS) $(E2E_BINS) test-deps fio-engine-try
	BUILD=$(BUILD) tests/check.sh $(UNIT_BINS) tests/e2e/*.sh

check-unit: all $(UNIT_BINS)
	tests/run.sh $(UNIT_BINS)

check-e2e: all $(E2E_BINS) test-deps fio-engine-try
	tests/run.sh -j "$${RBLK_TEST_JOBS:-2}" tests/e2e/*.sh

demo: deps all test-deps
	tools/demo.sh

include tools/fio/fio.mk
include tools/nbdkit/nbdkit.mk
include tests/vm/vm.mk
include tools/bench/bench.mk
include tests/fuzz/fuzz.mk
include tests/stress/stress.mk

# ---- dependencies --------------------------------------------------------

missing = $(shell for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p \
	2>/dev/null | grep -q 'install ok installed' || echo $$p; done)

deps:
	@m="$(call missing,$(DEB_BUILD_DEPS))"; if [ -n "$$m" ]; then \
		echo "installing build dependencies: $$m"; \
		tools/apt-install.sh $$m; fi

test-deps:
	@m="$(call missing,$(DEB_TEST_DEPS))"; if [ -n "$$m" ]; then \
		echo "installing test dependencies: $$m"; \
		tools/apt-install.sh $$m; fi

# ---- install -------------------------------------------------------------

install: all nbdkit-plugin-install
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/rblk \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man3 $(DESTDIR)$(PREFIX)/share/man/man5 \
		$(DESTDIR)$(PREFIX)/share/man/man8 \
		$(DESTDIR)$(PREFIX)/share/doc/rblk
	install -m 755 $(BUILD)/rblk-target $(DESTDIR)$(PREFIX)/sbin/
	sed 's|"rblk_path", "rblk"|"rblk_path", "$(PREFIX)/bin/rblk"|' \
		tools/fence_rblk > $(DESTDIR)$(PREFIX)/sbin/fence_rblk
	chmod 755 $(DESTDIR)$(PREFIX)/sbin/fence_rblk
	install -m 755 $(BUILD)/rblk $(BUILD)/rblk-devices $(DESTDIR)$(PREFIX)/bin/
	install -m 755 $(BUILD)/librblk.so.0 $(DESTDIR)$(PREFIX)/lib/
	ln -sf librblk.so.0 $(DESTDIR)$(PREFIX)/lib/librblk.so
	install -m 644 $(BUILD)/librblk.a $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/rblk/rblk.h $(DESTDIR)$(PREFIX)/include/rblk/
	sed 's|^prefix=.*|prefix=$(PREFIX)|' $(BUILD)/rblk.pc > $(DESTDIR)$(PREFIX)/lib/pkgconfig/rblk.pc
	install -m 644 docs/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 docs/man/*.3 $(DESTDIR)$(PREFIX)/share/man/man3/
	install -m 644 docs/man/*.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 644 docs/man/*.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 644 config/rblk-target.conf.example \
		tools/systemd/map-example.conf $(DESTDIR)$(PREFIX)/share/doc/rblk/
	install -d $(DESTDIR)$(UNITDIR)
	for u in tools/systemd/*.service; do \
		sed -e 's|@SBINDIR@|$(PREFIX)/sbin|g' -e 's|@BINDIR@|$(PREFIX)/bin|g' \
			$$u > $(DESTDIR)$(UNITDIR)/$$(basename $$u) && \
		chmod 644 $(DESTDIR)$(UNITDIR)/$$(basename $$u) || exit 1; \
	done
	install -d $(DESTDIR)$(UDEVDIR) $(DESTDIR)$(UDEVHELPERDIR)
	sed 's|@UDEVHELPERDIR@|$(UDEVHELPERDIR)|g' tools/udev/60-rblk.rules \
		> $(DESTDIR)$(UDEVDIR)/60-rblk.rules
	chmod 644 $(DESTDIR)$(UDEVDIR)/60-rblk.rules
	sed 's|@BINDIR@|$(PREFIX)/bin|g' tools/udev/rblk-udev-name \
		> $(DESTDIR)$(UDEVHELPERDIR)/rblk-udev-name
	chmod 755 $(DESTDIR)$(UDEVHELPERDIR)/rblk-udev-name

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD)
