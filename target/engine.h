/* SPDX-License-Identifier: MIT */
/*
 * I/O engines: a worker's asynchronous file I/O (engine.c, engine_*.c).
 */
#ifndef RBLK_TARGET_ENGINE_H
#define RBLK_TARGET_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct treq;
struct worker;

/*
 * An engine does asynchronous file I/O for one worker. All ops are
 * required and run on the worker thread, except init() and fini() and
 * what worker_start() registers between them and the thread's start
 * (main thread).
 */
struct engine_ops {
	const char *name; /* "io_uring", "libaio" */
	int (*init)(struct worker *w, unsigned int depth);
	/*
	 * On the worker's thread, first: init() and register_buf() ran on
	 * the main thread, and io_uring enables its ring here so that the
	 * worker is its only issuer (no submission or registration from
	 * another thread after this). 0 or -errno.
	 */
	int (*enable)(struct worker *w);
	void (*fini)(struct worker *w);
	/* Readable (eventfd) when completions are ready. */
	int (*fd)(struct worker *w);
	/*
	 * Register a buffer the engine may use for I/O without pinning per
	 * request (io_uring fixed buffers). Returns an index >= 0, or -errno
	 * when unsupported/exhausted (callers then pass index -1).
	 */
	int (*register_buf)(struct worker *w, void *addr, size_t len);
	void (*unregister_buf)(struct worker *w, int index);
	/*
	 * Queue ops for r; nothing reaches the kernel before submit().
	 * 0, -EBUSY when the engine's queue is full (nothing queued: the
	 * backend returns -EBUSY from its own submit), or another -errno.
	 */
	int (*queue_rw)(struct worker *w, struct treq *r, int fd, bool write,
			void *buf, uint32_t len, uint64_t off, int rw_flags,
			int buf_index);
	int (*queue_fdatasync)(struct worker *w, struct treq *r, int fd);
	int (*submit)(struct worker *w);
	/* Complete finished ops through treq_backend_done(); returns count. */
	int (*reap)(struct worker *w);
	/*
	 * Optional: are completions waiting, seen without a system call (the
	 * io_uring CQ ring)? Lets the worker complete I/O the kernel finished
	 * inside submit() in the same turn. NULL: the worker waits for fd().
	 */
	bool (*ready)(struct worker *w);
};

extern const struct engine_ops engine_uring_ops;
extern const struct engine_ops engine_aio_ops;
const struct engine_ops *engine_find(const char *name);

#endif
