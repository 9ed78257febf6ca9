/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by every part of rblk. No I/O here.
 */
#ifndef RBLK_COMMON_UTIL_H
#define RBLK_COMMON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define container_of(ptr, type, member)                                        \
	((type *)((char *)(ptr)-offsetof(type, member)))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((__typeof__(x))(a)-1))
#define IS_POW2(x) ((x) != 0 && ((x) & ((x)-1)) == 0)

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Monotonic clock in nanoseconds / milliseconds. */
uint64_t now_ns(void);
static inline uint64_t now_ms(void)
{
	return now_ns() / 1000000u;
}

/*
 * Parse a size with an optional binary suffix (K, M, G, T; "KiB" and "k"
 * accepted). Returns 0 or -EINVAL / -ERANGE.
 */
int parse_size(const char *s, uint64_t *out);

/* Parse an unsigned decimal integer within [min, max]. 0 or -EINVAL/-ERANGE. */
int parse_uint(const char *s, unsigned long min, unsigned long max,
	       unsigned long *out);

/* Write/read exactly len bytes on a blocking fd; 0 or -errno (-EPIPE on EOF).
 */
int write_full(int fd, const void *buf, size_t len);
int read_full(int fd, void *buf, size_t len);

/*
 * Parse a duration in seconds ("3", "0.25"; "-1" for "forever" when
 * allow_forever) into milliseconds (-1 for forever). 0 or -EINVAL/-ERANGE.
 */
int parse_seconds_ms(const char *s, bool allow_forever, int *out_ms);

/*
 * Format an error message into err (errlen bytes; nothing when err is NULL
 * or errlen 0) and return ret: the "char *err, size_t errlen" convention
 * of the parsers and checkers.
 */
__attribute__((format(printf, 4, 5))) int
errbuf_printf(char *err, size_t errlen, int ret, const char *fmt, ...);

struct stat;
/*
 * Open a path a user named (an export, a secret or key file, a
 * configuration file) without waiting: O_NONBLOCK so that a FIFO or a tty
 * opens at once, cleared again before returning, and fstat() into *st so
 * the caller checks the type before reading. O_CLOEXEC and O_NOCTTY are
 * added to flags. The descriptor, or -errno.
 */
int open_user_path(const char *path, int flags, struct stat *st);

/*
 * Read a small file (sysfs, procfs: they hand over their whole content in
 * one read) into buf: at most len - 1 bytes, NUL-terminated, one trailing
 * newline dropped. The length of the string left in buf, or -errno.
 */
ssize_t read_small_file(const char *path, char *buf, size_t len);

/* Fill buf with cryptographically strong random bytes (getrandom). */
void random_bytes(void *buf, size_t len);

/*
 * Peer-supplied text (a unix client's bind path, an address or name that
 * came from the wire) made fit for a log line or a listing: the first
 * srclen bytes of src (up to a NUL) into dst (len > 0 bytes, always
 * terminated), every byte outside printable ASCII 0x20..0x7e written as
 * \xNN, so it can neither start a new log line nor carry a terminal
 * escape. Printable text is kept as it is (a backslash too), so sanitizing
 * twice changes nothing. Cut short on a whole character. Returns dst.
 */
char *str_sanitize(char *dst, size_t len, const char *src, size_t srclen);

#endif
