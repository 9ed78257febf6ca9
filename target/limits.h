/* SPDX-License-Identifier: MIT */
/*
 * Caps on pending logins and sessions (limits.c).
 */
#ifndef RBLK_TARGET_LIMITS_H
#define RBLK_TARGET_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cfg_target;
struct lim_conn;
struct worker;

/*
 * Any thread. limits_admit(): may a connection from peer (xp_peer_name())
 * be accepted on worker w? Its admission
 * (counted as pending), or NULL: refuse it BUSY. A full pending table
 * evicts an older pending connection for it (the comment in limits.c
 * says which): marked for its worker, which is told by
 * worker_kick_evicted() and closes the ones limits_evicted() says.
 * limits_talking(): c sent its first message. limits_login(): turn c's
 * pending count into a session, or RBLK_S_BUSY with why set.
 * limits_release(): give back what c held and free it (NULL: nothing).
 * limits_pressure(): the pending table is three quarters full; pending
 * connections get LOGIN_PRESSURE_MS, not the full login limit.
 */
struct lim_conn *limits_admit(const struct cfg_target *cfg, const char *peer,
			      struct worker *w);
void limits_talking(struct lim_conn *c);
bool limits_evicted(const struct lim_conn *c);
bool limits_pressure(void);
uint64_t limits_evictions(void); /* since start */
int limits_login(const struct cfg_target *cfg, struct lim_conn *c, char *why,
		 size_t whylen);
void limits_release(const struct cfg_target *cfg, struct lim_conn *c);
/* The host part of a peer name ("tcp 192.0.2.1:41234" -> "192.0.2.1",
 * a unix peer -> "unix uid U"). */
void limits_host_of(const char *peer, char *out, size_t len);

#endif
