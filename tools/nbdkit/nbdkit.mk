# SPDX-License-Identifier: MIT
#
# The nbdkit plugin, $(BUILD)/nbdkit-rblk-plugin.so. Included by the top
# Makefile, whose variables (BUILD, CC, CFLAGS, LDFLAGS, PKG_LIBS_*) it uses.
#
#   make nbdkit-plugin    build it (`make all` does, where nbdkit's plugin
#                         header is installed: Debian nbdkit-plugin-dev;
#                         without it, `make all` says so and goes on)
#   make install          puts it in nbdkit's plugin directory
#                         (NBDKIT_PLUGINDIR, default from nbdkit.pc), so
#                         that `nbdkit rblk url=...` finds it
#
# It links librblk.a (librblk's objects with only the rblk_* names global)
# and exports only plugin_init (tools/nbdkit/plugin.map), so nothing of
# librblk's collides with nbdkit or its other plugins and filters.

NBDKIT_PLUGIN := $(BUILD)/nbdkit-rblk-plugin.so
NBDKIT_HAVE := $(shell pkg-config --exists nbdkit 2>/dev/null && echo yes)
NBDKIT_PLUGINDIR ?= $(shell pkg-config --variable=plugindir nbdkit 2>/dev/null)
NBDKIT_CFLAGS := $(shell pkg-config --cflags nbdkit 2>/dev/null)
NBDKIT_OBJ := $(BUILD)/obj/tools/nbdkit/plugin.o

# nbdkit loads the plugin into its own process, which has no ASan runtime:
# under SANITIZE=1 the plugin links its own uninstrumented copy of the
# library's objects, as the fio engine does (tools/fio/fio.mk).
ifeq ($(SANITIZE),1)
NBDKIT_LIB := $(patsubst %.c,$(BUILD)/obj-fio/%.o,\
	$(LIB_SRC) $(XPORT_SRC) $(COMMON_SRC))
NBDKIT_PLUGIN_CFLAGS = $(filter-out -fsanitize=%,$(CFLAGS))
NBDKIT_PLUGIN_LDFLAGS = $(filter-out -fsanitize=%,$(LDFLAGS))
else
NBDKIT_LIB := $(BUILD)/librblk.a
NBDKIT_PLUGIN_CFLAGS = $(CFLAGS)
NBDKIT_PLUGIN_LDFLAGS = $(LDFLAGS)
endif

$(NBDKIT_OBJ): tools/nbdkit/plugin.c include/rblk/rblk.h
	@mkdir -p $(dir $@)
	$(CC) $(NBDKIT_PLUGIN_CFLAGS) $(NBDKIT_CFLAGS) -MMD -MP -c $< -o $@

$(NBDKIT_PLUGIN): $(NBDKIT_OBJ) $(NBDKIT_LIB) tools/nbdkit/plugin.map
	$(CC) $(NBDKIT_PLUGIN_LDFLAGS) -shared \
		-Wl,--version-script=tools/nbdkit/plugin.map -o $@ \
		$(NBDKIT_OBJ) $(NBDKIT_LIB) $(PKG_LIBS_VERBS) $(PKG_LIBS_SODIUM)

.PHONY: nbdkit-plugin nbdkit-plugin-maybe nbdkit-plugin-install
nbdkit-plugin: $(NBDKIT_PLUGIN)

ifeq ($(NBDKIT_HAVE),yes)
nbdkit-plugin-maybe: $(NBDKIT_PLUGIN)
nbdkit-plugin-install: $(NBDKIT_PLUGIN)
	install -d $(DESTDIR)$(NBDKIT_PLUGINDIR)
	install -m 755 $(NBDKIT_PLUGIN) $(DESTDIR)$(NBDKIT_PLUGINDIR)/
else
nbdkit-plugin-maybe:
	@echo "notice: nbdkit plugin not built: nbdkit's plugin header is missing (apt-get install nbdkit-plugin-dev)" >&2
nbdkit-plugin-install:
	@echo "notice: nbdkit plugin not installed: it was not built (no nbdkit-plugin-dev)" >&2
endif
