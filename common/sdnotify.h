/* SPDX-License-Identifier: MIT */
/*
 * systemd readiness notification without libsystemd: one datagram to the
 * AF_UNIX socket named by $NOTIFY_SOCKET (the sd_notify(3) protocol).
 */
#ifndef RBLK_COMMON_SDNOTIFY_H
#define RBLK_COMMON_SDNOTIFY_H

/*
 * Send state ("READY=1", "STOPPING=1", ...). Returns 1 when sent, 0 when
 * not started by systemd ($NOTIFY_SOCKET unset), or -errno.
 */
int sd_notify_send(const char *state);

#endif
