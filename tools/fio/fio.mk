# SPDX-License-Identifier: MIT
#
# The fio ioengine, $(BUILD)/rblk-fio.so. Included by the top Makefile,
# whose variables (BUILD, CC, CFLAGS, LDFLAGS, PKG_LIBS_*) it uses.
#
#   make fio-engine               build $(BUILD)/rblk-fio.so
#   make fio-engine FIO_SRC=DIR   ... against the fio source tree DIR (the
#                                 installed fio's version; ./configure is
#                                 run there if config-host.h is missing)
#   make fio-engine-try           the same, but when the fio source cannot
#                                 be fetched (offline), warn, write the
#                                 reason to $(BUILD)/rblk-fio.skip and
#                                 succeed: `make check` then skips the
#                                 engine's smoke test instead of failing
#
# Without FIO_SRC, tools/fio/get-fio-src.sh fetches the installed fio's
# Debian source package (downloads cached in ${RBLK_CACHE:-~/.cache/rblk})
# and configures it in $(BUILD)/fio-src. fio's headers need its
# config-host.h; fio finds the engine by the symbol `ioengine`, the only
# one the version script exports.

FIO_SRC ?=
ifeq ($(strip $(FIO_SRC)),)
FIO_SRC_DIR := $(BUILD)/fio-src
$(FIO_SRC_DIR)/config-host.h:
	tools/fio/get-fio-src.sh $(FIO_SRC_DIR)
else
FIO_SRC_DIR := $(FIO_SRC)
$(FIO_SRC_DIR)/config-host.h:
	cd $(FIO_SRC_DIR) && ./configure
endif

# fio's headers build clean under the project's warnings; sanitizers stay
# off (see below).
FIO_ENGINE_CFLAGS = $(filter-out -fsanitize=%,$(CFLAGS)) \
	-include $(FIO_SRC_DIR)/config-host.h -DFIO_EXTERNAL_ENGINE \
	-I$(FIO_SRC_DIR)
FIO_ENGINE_LDFLAGS = $(filter-out -fsanitize=%,$(LDFLAGS))
FIO_ENGINE_OBJ := $(BUILD)/obj/tools/fio/rblk-fio.o

$(FIO_ENGINE_OBJ): tools/fio/rblk-fio.c $(FIO_SRC_DIR)/config-host.h
	@mkdir -p $(dir $@)
	$(CC) $(FIO_ENGINE_CFLAGS) -MMD -MP -c $< -o $@

# The engine runs inside the installed fio, which has no ASan runtime to
# load first: with SANITIZE=1 it links its own uninstrumented copy of the
# library's objects instead of $(BUILD)/librblk.a.
ifeq ($(SANITIZE),1)
FIO_ENGINE_LIB := $(patsubst %.c,$(BUILD)/obj-fio/%.o,\
	$(LIB_SRC) $(XPORT_SRC) $(COMMON_SRC))
$(BUILD)/obj-fio/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -fsanitize=%,$(CFLAGS)) -c $< -o $@
# (common/version.c includes the generated git description)
$(BUILD)/obj-fio/common/version.o: $(BUILD)/gen/version-git.h
$(BUILD)/obj-fio/common/version.o: CFLAGS += -I$(BUILD)/gen
else
FIO_ENGINE_LIB := $(BUILD)/librblk.a
endif

$(BUILD)/rblk-fio.so: $(FIO_ENGINE_OBJ) $(FIO_ENGINE_LIB) tools/fio/rblk-fio.map
	$(CC) $(FIO_ENGINE_LDFLAGS) -shared \
		-Wl,--version-script=tools/fio/rblk-fio.map -o $@ \
		$(FIO_ENGINE_OBJ) $(FIO_ENGINE_LIB) $(PKG_LIBS_VERBS) \
		$(PKG_LIBS_SODIUM)

.PHONY: fio-engine fio-engine-try
fio-engine: $(BUILD)/rblk-fio.so

# Only a failure to get the fio source is forgiven; a compile error is not.
fio-engine-try:
	@mkdir -p $(BUILD) && rm -f $(BUILD)/rblk-fio.skip
	@if [ -f $(FIO_SRC_DIR)/config-host.h ] || \
	    GET_FIO_SRC_ERROR=$(BUILD)/rblk-fio.skip \
	    tools/fio/get-fio-src.sh $(FIO_SRC_DIR); then \
		$(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) \
			$(BUILD)/rblk-fio.so; \
	else \
		echo "warning: fio engine not built: $$(cat $(BUILD)/rblk-fio.skip)" >&2; \
	fi
