/* SPDX-License-Identifier: MIT */
/*
 * ublk uapi constants that the installed <linux/ublk_cmd.h> may lack.
 *
 * Debian 12's linux-libc-dev (6.1) ships the legacy opcodes only: no
 * UBLK_U_* ioctl encodings, no GET_FEATURES, no UBLK_F_CMD_IOCTL_ENCODE.
 * Kernels from 6.4 on speak the ioctl encodings, and accept the legacy
 * numbers only with CONFIG_BLKDEV_UBLK_LEGACY_OPCODES. Everything here is
 * guarded with #ifndef, so a newer header wins where it has the constant;
 * the values are the kernel's ABI (include/uapi/linux/ublk_cmd.h) and
 * never change.
 *
 * Structure layouts: struct ublksrv_ctrl_cmd changed its tail between 6.1
 * (data[2]) and 6.5 (data[1], dev_path_len, pad, reserved) without changing
 * its size or the meaning of data[0], so either header's struct works for
 * privileged devices (dev_path_len stays 0). ublksrv_ctrl_dev_info likewise
 * turned pad fields into owner_uid/owner_gid at the same offsets. The
 * asserts in ublk.c pin the sizes the ioctl encodings below are built on.
 */
#ifndef RBLK_INITIATOR_UBLK_COMPAT_H
#define RBLK_INITIATOR_UBLK_COMPAT_H

#include <linux/ioctl.h>
#include <linux/ublk_cmd.h>

/* ---- control commands (/dev/ublk-control, SQE128) ---------------------- */

#ifndef UBLK_CMD_GET_DEV_INFO2
#define UBLK_CMD_GET_DEV_INFO2 0x12
#endif

#ifndef UBLK_U_CMD_GET_QUEUE_AFFINITY
#define UBLK_U_CMD_GET_QUEUE_AFFINITY                                          \
	_IOR('u', UBLK_CMD_GET_QUEUE_AFFINITY, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_GET_DEV_INFO
#define UBLK_U_CMD_GET_DEV_INFO                                                \
	_IOR('u', UBLK_CMD_GET_DEV_INFO, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_ADD_DEV
#define UBLK_U_CMD_ADD_DEV _IOWR('u', UBLK_CMD_ADD_DEV, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_DEL_DEV
#define UBLK_U_CMD_DEL_DEV _IOWR('u', UBLK_CMD_DEL_DEV, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_START_DEV
#define UBLK_U_CMD_START_DEV                                                   \
	_IOWR('u', UBLK_CMD_START_DEV, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_STOP_DEV
#define UBLK_U_CMD_STOP_DEV                                                    \
	_IOWR('u', UBLK_CMD_STOP_DEV, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_SET_PARAMS
#define UBLK_U_CMD_SET_PARAMS                                                  \
	_IOWR('u', UBLK_CMD_SET_PARAMS, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_GET_PARAMS
#define UBLK_U_CMD_GET_PARAMS                                                  \
	_IOR('u', UBLK_CMD_GET_PARAMS, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_START_USER_RECOVERY
#define UBLK_U_CMD_START_USER_RECOVERY                                         \
	_IOWR('u', UBLK_CMD_START_USER_RECOVERY, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_END_USER_RECOVERY
#define UBLK_U_CMD_END_USER_RECOVERY                                           \
	_IOWR('u', UBLK_CMD_END_USER_RECOVERY, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_GET_DEV_INFO2
#define UBLK_U_CMD_GET_DEV_INFO2                                               \
	_IOR('u', UBLK_CMD_GET_DEV_INFO2, struct ublksrv_ctrl_cmd)
#endif
/* 6.5+: the features the driver supports, UBLK_FEATURES_LEN bytes at addr */
#ifndef UBLK_U_CMD_GET_FEATURES
#define UBLK_U_CMD_GET_FEATURES _IOR('u', 0x13, struct ublksrv_ctrl_cmd)
#endif
/* 6.9+: DEL_DEV that does not wait for the last opener of the disk */
#ifndef UBLK_U_CMD_DEL_DEV_ASYNC
#define UBLK_U_CMD_DEL_DEV_ASYNC _IOR('u', 0x14, struct ublksrv_ctrl_cmd)
#endif
/* 6.16+: set a live device's size (data[0]: sectors); UBLK_F_UPDATE_SIZE */
#ifndef UBLK_U_CMD_UPDATE_SIZE
#define UBLK_U_CMD_UPDATE_SIZE _IOWR('u', 0x15, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_FEATURES_LEN
#define UBLK_FEATURES_LEN 8
#endif

/* ---- I/O commands (/dev/ublkcN) ----------------------------------------- */

#ifndef UBLK_U_IO_FETCH_REQ
#define UBLK_U_IO_FETCH_REQ _IOWR('u', UBLK_IO_FETCH_REQ, struct ublksrv_io_cmd)
#endif
#ifndef UBLK_U_IO_COMMIT_AND_FETCH_REQ
#define UBLK_U_IO_COMMIT_AND_FETCH_REQ                                         \
	_IOWR('u', UBLK_IO_COMMIT_AND_FETCH_REQ, struct ublksrv_io_cmd)
#endif

/* ---- device flags (ublksrv_ctrl_dev_info.flags, GET_FEATURES) ----------- */

#ifndef UBLK_F_UNPRIVILEGED_DEV
#define UBLK_F_UNPRIVILEGED_DEV (1ULL << 5)
#endif
#ifndef UBLK_F_CMD_IOCTL_ENCODE
#define UBLK_F_CMD_IOCTL_ENCODE (1ULL << 6)
#endif
#ifndef UBLK_F_USER_COPY
#define UBLK_F_USER_COPY (1ULL << 7)
#endif
#ifndef UBLK_F_ZONED
#define UBLK_F_ZONED (1ULL << 8)
#endif
#ifndef UBLK_F_UPDATE_SIZE
#define UBLK_F_UPDATE_SIZE (1ULL << 10)
#endif

#endif
