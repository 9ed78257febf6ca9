/* SPDX-License-Identifier: MIT */
/*
 * The RAM backend: ram:SIZE, a volume of anonymous memory that lives as
 * long as the target. Commands are copies on the worker; connections may
 * map the memory for direct access (unless the export says nodirect).
 */
#include "backend.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/util.h"
#include "../config/config.h"

#include "conn.h"

/* Bytes of all open RAM exports (their pages are reserved lazily). */
static _Atomic uint64_t ram_total;

/* A /proc/meminfo field in bytes, or 0 when it cannot be read. */
static uint64_t meminfo(const char *key)
{
	unsigned long long kib = 0;
	size_t klen = strlen(key);
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			if (sscanf(line + klen + 1, "%llu", &kib) != 1)
				kib = 0;
			break;
		}
	fclose(f);
	return (uint64_t)kib * 1024;
}

/*
 * RAM volumes are mapped MAP_NORESERVE and filled as written, so an
 * oversized one is accepted and then gets the target OOM-killed mid-way.
 * Refuse one larger than MemAvailable, or RAM volumes adding up to more
 * than MemTotal, unless the export says `overcommit`.
 */
static int ram_check_size(const struct cfg_export *cfg, uint64_t size,
			  char *err, size_t errlen)
{
	uint64_t avail = meminfo("MemAvailable"), total = meminfo("MemTotal");
	uint64_t others = atomic_load(&ram_total);

	if (cfg->overcommit || !avail || !total)
		return 0;
	if (size > avail)
		return open_fail(
		    err, errlen, -ENOMEM,
		    "%s is more than the %llu MiB of memory available; give a smaller size, or add 'overcommit' to accept the risk",
		    cfg->path, (unsigned long long)(avail >> 20));
	if (others + size > total)
		return open_fail(
		    err, errlen, -ENOMEM,
		    "%s with the %llu MiB of RAM exports already open is more than the %llu MiB of memory; give a smaller size, or add 'overcommit' to accept the risk",
		    cfg->path, (unsigned long long)(others >> 20),
		    (unsigned long long)(total >> 20));
	return 0;
}

static int ram_open(struct export *e, const struct cfg_export *cfg, char *err,
		    size_t errlen)
{
	uint64_t size;
	int ret;

	if (parse_size(cfg->path + strlen("ram:"), &size) || size == 0 ||
	    size % 4096)
		return open_fail(
		    err, errlen, -EINVAL,
		    "bad RAM size '%s' (want ram:SIZE, a multiple of 4 KiB)",
		    cfg->path);
	ret = ram_check_size(cfg, size, err, errlen);
	if (ret)
		return ret;
	/*
	 * Address space for growth is reserved now (PROT_NONE, no memory),
	 * so a resize never moves the volume: workers and registrations
	 * keep their pointers.
	 */
	e->mem_len = MAX(size, MIN(RAM_GROW_FACTOR * size, RAM_GROW_CAP));
	e->mem = mmap(NULL, e->mem_len, PROT_NONE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (e->mem == MAP_FAILED) {
		e->mem = NULL;
		return open_fail(err, errlen, -ENOMEM, "mmap %llu bytes: %s",
				 (unsigned long long)e->mem_len,
				 strerror(errno));
	}
	if (mprotect(e->mem, size, PROT_READ | PROT_WRITE)) {
		ret = -errno;
		munmap(e->mem, e->mem_len);
		e->mem = NULL;
		return open_fail(err, errlen, ret, "mprotect %llu bytes: %s",
				 (unsigned long long)size, strerror(-ret));
	}
	e->size = size;
	atomic_fetch_add(&ram_total, size);
	e->block_size =
	    cfg->block_size ? cfg->block_size : BACKEND_DEFAULT_BLOCK_SIZE;
	/* no volatile cache: FLUSH and FUA are not offered */
	e->features = RBLK_F_TRIM | RBLK_F_ZEROES;
	return 0;
}

static void ram_close(struct export *e)
{
	if (e->mem) {
		munmap(e->mem, e->mem_len);
		atomic_fetch_sub(&ram_total, e->size);
	}
	e->mem = NULL;
}

/* Grow into the reservation made at open; RAM never shrinks. */
static int ram_resize(struct export *e, uint64_t *size, char *err,
		      size_t errlen)
{
	const struct cfg_export *cfg = atomic_load(&e->cfg);
	uint64_t old = e->size;
	int ret;

	if (!*size || *size == old) {
		*size = old;
		return 0;
	}
	if (*size < old)
		return open_fail(err, errlen, -EINVAL,
				 "RAM export %s does not shrink", e->name);
	if (*size % 4096 || *size > e->mem_len)
		return open_fail(
		    err, errlen, -EINVAL,
		    "RAM export %s grows in multiples of 4 KiB up to %llu bytes (the address space reserved at its start: %u times its size then, at most %llu GiB)",
		    e->name, (unsigned long long)e->mem_len, RAM_GROW_FACTOR,
		    (unsigned long long)(RAM_GROW_CAP >> 30));
	if (cfg && (ret = ram_check_size(cfg, *size - old, err, errlen)))
		return ret;
	if (mprotect((char *)e->mem + old, *size - old, PROT_READ | PROT_WRITE))
		return open_fail(err, errlen, -errno, "mprotect %llu bytes: %s",
				 (unsigned long long)(*size - old),
				 strerror(errno));
	atomic_fetch_add(&ram_total, *size - old);
	return 0;
}

int backend_mem_submit(struct worker *w, struct treq *r)
{
	struct export *e = r->conn->exp;
	char *p = (char *)e->mem + r->cmd.offset;

	switch (r->cmd.opcode) {
	case RBLK_OP_READ:
		memcpy(r->slot, p, r->cmd.length);
		break;
	case RBLK_OP_WRITE:
		memcpy(p, r->slot, r->cmd.length);
		break;
	case RBLK_OP_TRIM:
	case RBLK_OP_WRITE_ZEROES:
		memset(p, 0, r->cmd.length);
		break;
	default:
		r->result = -EOPNOTSUPP;
		return 1;
	}
	r->result = 0;
	return 1;
}

const struct backend_ops backend_ram_ops = {
    .name = "ram",
    .prefix = "ram:",
    .flags = BACKEND_F_DIRECT | BACKEND_F_MEM_WRITABLE | BACKEND_F_VOLATILE |
	     BACKEND_F_PROCESS_CACHE,
    .open = ram_open,
    .close = ram_close,
    .submit = backend_mem_submit,
    .resize = ram_resize,
};
