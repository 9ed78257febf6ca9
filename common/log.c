/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

int rblk_log_level = LOG_WARN;
static const char *log_prefix = "rblk";
static void (*error_hook)(const char *msg, void *arg);
static void *error_hook_arg;
static __thread bool in_error_hook;

void log_set_error_hook(void (*fn)(const char *msg, void *arg), void *arg)
{
	error_hook = fn;
	error_hook_arg = arg;
}

void log_set_level(int level)
{
	rblk_log_level = level;
}

void log_set_prefix(const char *prefix)
{
	log_prefix = prefix;
}

int log_parse_level(const char *s)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};

	for (int i = 0; i < 4; i++)
		if (!strcasecmp(s, names[i]))
			return i;
	if (s[0] >= '0' && s[0] <= '3' && !s[1])
		return s[0] - '0';
	return -EINVAL;
}

static void log_vmsg(int level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

void log_msg(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

void log_msg_rl(struct log_ratelimit *rl, int level, const char *fmt, ...)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	unsigned int dropped = 0;
	struct timespec ts;
	uint64_t now;
	bool print;
	va_list ap;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	pthread_mutex_lock(&lock);
	if (!rl->start_ms || now - rl->start_ms >= LOG_RL_MS) {
		dropped = rl->suppressed;
		rl->start_ms = now ? now : 1;
		rl->printed = 0;
		rl->suppressed = 0;
	}
	print = rl->printed < LOG_RL_BURST;
	if (print)
		rl->printed++;
	else
		rl->suppressed++;
	pthread_mutex_unlock(&lock);
	if (dropped)
		log_msg(level, "(%u similar lines suppressed)", dropped);
	if (!print)
		return;
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

static void log_vmsg(int level, const char *fmt, va_list ap)
{
	static const char *const tags[] = {"error", "warning", "info", "debug"};
	char line[1024];
	struct timespec ts;
	struct tm tm;
	int n, msg;

	if (level > rblk_log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line),
		     "%02d:%02d:%02d.%03ld %s: %s: ", tm.tm_hour, tm.tm_min,
		     tm.tm_sec, ts.tv_nsec / 1000000, log_prefix,
		     tags[level < 0   ? 0
			  : level > 3 ? 3
				      : level]);
	msg = n;
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* one write per line so concurrent threads do not interleave */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		(void)0;
	if (level == LOG_ERR && error_hook && !in_error_hook) {
		line[n - 1] = 0;
		in_error_hook = true;
		error_hook(line + msg, error_hook_arg);
		in_error_hook = false;
	}
}
