# libFuzzer harnesses (tests/fuzz/README in docs/RELIABILITY.md):
#
#   make fuzz               build, then run each harness FUZZ_TIME seconds
#                           (default 600) from its seed corpus
#   make fuzz FUZZ_TIME=60 FUZZ_HARNESS=fuzz_login
#   make fuzz-build         build only ($(BUILD)/fuzz/fuzz_*)
#
# clang with libFuzzer (Debian: clang-14 + libclang-rt-14-dev), ASan and
# UBSan. The harnesses compile the sources they test directly, so they
# never mix with the gcc objects of $(BUILD)/obj.

FUZZ_CC ?= $(firstword $(shell command -v clang clang-14 2>/dev/null) clang)
FUZZ_TIME ?= 600
FUZZ_HARNESS ?= fuzz_proto fuzz_login
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -std=gnu11 -D_GNU_SOURCE \
	-Wall -Wextra -Werror -Wno-unused-parameter -Iinclude -I.
FUZZ_BINS := $(patsubst %,$(BUILD)/fuzz/%,$(FUZZ_HARNESS))

$(BUILD)/fuzz/fuzz_proto: tests/fuzz/fuzz_proto.c tests/fuzz/fuzz_common.h \
		common/proto.c common/proto.h common/util.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< common/proto.c common/util.c

FUZZ_LOGIN_SRCS := target/login.c common/proto.c common/util.c \
	common/auth.c config/config.c common/url.c common/log.c \
	common/slot_pool.c

$(BUILD)/fuzz/fuzz_login: tests/fuzz/fuzz_login.c tests/fuzz/fuzz_common.h \
		target/export.h target/login.h common/proto.h common/auth.h \
		config/config.h \
		$(FUZZ_LOGIN_SRCS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(PKG_CFLAGS) -o $@ $< $(FUZZ_LOGIN_SRCS) \
		$(PKG_LIBS_INIH) $(PKG_LIBS_SODIUM)

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	BUILD=$(BUILD) tests/fuzz/run.sh $(FUZZ_TIME) $(FUZZ_HARNESS)
