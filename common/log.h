/* SPDX-License-Identifier: MIT */
/*
 * Leveled logging to stderr. Thread-safe (one write(2) per line).
 */
#ifndef RBLK_COMMON_LOG_H
#define RBLK_COMMON_LOG_H

#include <stdint.h>

enum log_level {
	LOG_ERR = 0,
	LOG_WARN = 1,
	LOG_INFO = 2,
	LOG_DEBUG = 3,
};

extern int rblk_log_level;

void log_set_level(int level);
/* Parse "error|warn|info|debug" or a digit; returns level or -EINVAL. */
int log_parse_level(const char *s);
void log_set_prefix(const char *prefix);
/*
 * Call fn(level, message, arg) for every line logged at LOG_ERR, after it
 * is written (the message without time and prefix); NULL: none. Set it
 * before threads that log start. fn runs on the logging thread and must
 * not log errors itself (such lines are written, not passed to it).
 */
void log_set_error_hook(void (*fn)(const char *msg, void *arg), void *arg);

void log_msg(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Rate limiting for lines an outsider can trigger at will (refused
 * accesses, accept failures): at most LOG_RL_BURST lines per LOG_RL_MS per
 * call site, then one line saying how many were suppressed. The state is
 * per call site (a static in the macro) and shared by all threads.
 */
#define LOG_RL_BURST 10
#define LOG_RL_MS 5000

struct log_ratelimit {
	uint64_t start_ms; /* start of the current interval */
	unsigned int printed;
	unsigned int suppressed;
};

void log_msg_rl(struct log_ratelimit *rl, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_ratelimited(level, ...)                                            \
	do {                                                                   \
		static struct log_ratelimit log_rl_state_;                     \
		if ((level) <= rblk_log_level)                                 \
			log_msg_rl(&log_rl_state_, level, __VA_ARGS__);        \
	} while (0)

#define log_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)                                                          \
	do {                                                                   \
		if (rblk_log_level >= LOG_INFO)                                \
			log_msg(LOG_INFO, __VA_ARGS__);                        \
	} while (0)
#define log_debug(...)                                                         \
	do {                                                                   \
		if (rblk_log_level >= LOG_DEBUG)                               \
			log_msg(LOG_DEBUG, __VA_ARGS__);                       \
	} while (0)

#endif
