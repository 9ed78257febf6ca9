/* SPDX-License-Identifier: MIT */
/*
 * Volume identity: the vol_id LOGIN reports, taken from the backing store
 * so that two different volumes never share one and one volume keeps its
 * own across target restarts (docs/PROTOCOL.md, "LOGIN": vol_id).
 *
 *   uuid =               the operator's (VOL_IDENT_CONFIG)
 *   rbd:POOL/IMAGE       the image's (backend_rbd.c, VOL_IDENT_BACKEND)
 *   a regular file       a random UUID stored with the file: its
 *                        user.rblk.uuid extended attribute, or where the
 *                        file system has no user xattrs a sidecar file
 *                        .NAME.rblk-uuid beside it (VOL_IDENT_XATTR,
 *                        VOL_IDENT_SIDECAR)
 *   a block device       the device's own: wwid, serial, dm or md uuid
 *                        in sysfs, a partition adding its start sector
 *                        (VOL_IDENT_DEVICE)
 *   ram:SIZE             random for this run: the data does not survive a
 *                        restart either (VOL_IDENT_RUN)
 *
 * Where none of these can be had (a read-only file without a stored id, a
 * loop device, a disk without serial) the export gets a stand-in, unique
 * on this host (machine id, device and inode) but tied to nothing that
 * travels with the data, and is marked VOL_IDENT_NONE: LOGIN says so
 * (RBLK_F_NO_IDENTITY) and initiators refuse it as a multipath volume.
 *
 * Runs on the thread that opens the export (startup or the control
 * thread); nothing here is on the data path.
 */
#include "export.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../config/config.h"

#include "backend.h"

#define UUID_TEXT_LEN 36

void volid_format(const uint8_t id[EXPORT_VOL_ID_LEN], char out[37])
{
	for (unsigned int i = 0; i < EXPORT_VOL_ID_LEN; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*out++ = '-';
		out += sprintf(out, "%02x", id[i]);
	}
}

/* An RFC 9562 version 4 UUID: 122 random bits. */
void volid_random(uint8_t id[EXPORT_VOL_ID_LEN])
{
	random_bytes(id, EXPORT_VOL_ID_LEN);
	id[6] = (uint8_t)((id[6] & 0x0f) | 0x40);
	id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);
}

/*
 * SHA-256 over tag and the n strings (each with its NUL), cut to 16 bytes
 * and marked as an RFC 9562 version 8 UUID.
 */
static void hash_id(uint8_t id[EXPORT_VOL_ID_LEN], const char *tag,
		    const char *const *s, unsigned int n)
{
	crypto_hash_sha256_state st;
	uint8_t h[crypto_hash_sha256_BYTES];

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, (const uint8_t *)tag, strlen(tag) + 1);
	for (unsigned int i = 0; i < n; i++)
		crypto_hash_sha256_update(&st, (const uint8_t *)s[i],
					  strlen(s[i]) + 1);
	crypto_hash_sha256_final(&st, h);
	memcpy(id, h, EXPORT_VOL_ID_LEN);
	id[6] = (uint8_t)((id[6] & 0x0f) | 0x80);
	id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);
}

/* A stored id: 36 characters of UUID text, optionally then whitespace. */
static int parse_stored(const char *buf, size_t len,
			uint8_t id[EXPORT_VOL_ID_LEN])
{
	char text[UUID_TEXT_LEN + 1];

	if (len < UUID_TEXT_LEN)
		return -EINVAL;
	for (size_t i = UUID_TEXT_LEN; i < len; i++)
		if (!isspace((unsigned char)buf[i]))
			return -EINVAL;
	memcpy(text, buf, UUID_TEXT_LEN);
	text[UUID_TEXT_LEN] = '\0';
	return cfg_parse_uuid(text, id) ? -EINVAL : 0;
}

int volid_xattr(int fd, uint8_t id[EXPORT_VOL_ID_LEN], bool *created)
{
	char buf[64], text[37];
	ssize_t n;

	*created = false;
	for (int tries = 0; tries < 2; tries++) {
		n = fgetxattr(fd, VOLID_XATTR, buf, sizeof(buf));
		if (n >= 0)
			return parse_stored(buf, (size_t)n, id);
		if (errno == ERANGE)
			return -EINVAL; /* longer than any UUID text */
		if (errno != ENODATA)
			return -errno; /* ENOTSUP: no user xattrs here */
		volid_random(id);
		volid_format(id, text);
		/* XATTR_CREATE: two targets opening it at once agree */
		if (!fsetxattr(fd, VOLID_XATTR, text, UUID_TEXT_LEN,
			       XATTR_CREATE)) {
			*created = true;
			return 0;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EAGAIN;
}

int volid_sidecar_path(const char *path, char *out, size_t outlen)
{
	const char *base = strrchr(path, '/');
	int n;

	if (base)
		n = snprintf(out, outlen, "%.*s.%s.rblk-uuid",
			     (int)(base + 1 - path), path, base + 1);
	else
		n = snprintf(out, outlen, ".%s.rblk-uuid", path);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

static int read_sidecar(const char *side, uint8_t id[EXPORT_VOL_ID_LEN])
{
	char buf[64];
	struct stat st;
	ssize_t n;
	int fd = open_user_path(side, O_RDONLY, &st);

	if (fd < 0)
		return fd;
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		return -errno;
	return parse_stored(buf, (size_t)n, id);
}

/*
 * Write a new id to a temporary file and link it in as side: link() fails
 * with EEXIST when another target was first, and then its id is the one.
 */
static int create_sidecar(const char *side, uint8_t id[EXPORT_VOL_ID_LEN])
{
	char tmp[PATH_MAX], text[40];
	int fd, ret = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.XXXXXX", side) >=
	    sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	volid_random(id);
	volid_format(id, text);
	text[UUID_TEXT_LEN] = '\n';
	if (write(fd, text, UUID_TEXT_LEN + 1) != UUID_TEXT_LEN + 1 ||
	    fsync(fd))
		ret = errno ? -errno : -EIO;
	close(fd);
	if (!ret && link(tmp, side))
		ret = -errno;
	unlink(tmp);
	return ret;
}

int volid_sidecar(const char *path, uint8_t id[EXPORT_VOL_ID_LEN],
		  bool *created, char *side, size_t sidelen)
{
	int ret = volid_sidecar_path(path, side, sidelen);

	*created = false;
	if (ret)
		return ret;
	ret = read_sidecar(side, id);
	if (ret != -ENOENT)
		return ret;
	ret = create_sidecar(side, id);
	if (ret == -EEXIST)
		return read_sidecar(side, id);
	*created = !ret;
	return ret;
}

/* sysfs attribute dir/name, trimmed of surrounding blanks: its length or
 * -errno. */
static int read_attr(const char *dir, const char *name, char *buf, size_t len)
{
	char p[PATH_MAX];
	ssize_t n;
	size_t s = 0;
	int fd;

	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, name) >= sizeof(p))
		return -ENAMETOOLONG;
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	while (n > 0 && (isspace((unsigned char)buf[n - 1]) || !buf[n - 1]))
		n--;
	while ((ssize_t)s < n && isspace((unsigned char)buf[s]))
		s++;
	memmove(buf, buf + s, (size_t)n - s);
	buf[n - (ssize_t)s] = '\0';
	return (int)(n - (ssize_t)s);
}

/* Attributes that name a device itself, most specific first. */
static const char *const dev_attrs[] = {
    "wwid", "device/wwid", "serial", "device/serial", "dm/uuid", "md/uuid",
};

int volid_device(const char *sysroot, unsigned int major, unsigned int minor,
		 uint8_t id[EXPORT_VOL_ID_LEN], char *src, size_t srclen)
{
	char dir[PATH_MAX], val[256], start[32] = "";
	const char *parts[3];

	if ((size_t)snprintf(dir, sizeof(dir), "%s/dev/block/%u:%u", sysroot,
			     major, minor) >= sizeof(dir))
		return -ENAMETOOLONG;
	/* a partition: its disk's identity and where on the disk it starts */
	if (read_attr(dir, "partition", val, sizeof(val)) > 0) {
		if (read_attr(dir, "start", start, sizeof(start)) <= 0)
			return -ENOENT;
		if (strlen(dir) + 4 > sizeof(dir))
			return -ENAMETOOLONG;
		strcat(dir, "/..");
	}
	for (unsigned int i = 0; i < ARRAY_SIZE(dev_attrs); i++) {
		if (read_attr(dir, dev_attrs[i], val, sizeof(val)) <= 0)
			continue;
		parts[0] = dev_attrs[i];
		parts[1] = val;
		parts[2] = start;
		hash_id(id, "rblk-vol-id-dev-v1", parts, 3);
		snprintf(src, srclen, "%s '%s'%s%s", dev_attrs[i], val,
			 start[0] ? ", partition at sector " : "", start);
		return 0;
	}
	return -ENOENT;
}

void volid_local(const char *machine, const struct stat *st,
		 uint8_t id[EXPORT_VOL_ID_LEN])
{
	char a[64], b[64];
	const char *parts[3] = {machine, a, b};

	if (S_ISBLK(st->st_mode)) {
		snprintf(a, sizeof(a), "bdev %u:%u", major(st->st_rdev),
			 minor(st->st_rdev));
		b[0] = '\0';
	} else {
		snprintf(a, sizeof(a), "dev %u:%u", major(st->st_dev),
			 minor(st->st_dev));
		snprintf(b, sizeof(b), "ino %llu",
			 (unsigned long long)st->st_ino);
	}
	hash_id(id, "rblk-vol-id-local-v1", parts, 3);
}

/* This host's machine id, else its host name. */
static void machine_id(char *out, size_t len)
{
	if (read_attr("/etc", "machine-id", out, len) > 0)
		return;
	if (gethostname(out, len))
		snprintf(out, len, "?");
	out[len - 1] = '\0';
}

/* The identity of a file export: stored with the file, else none. */
static void identify_file(struct export *e, const struct stat *st)
{
	char side[PATH_MAX];
	bool created;
	int ret;

	ret = volid_xattr(e->fd, e->vol_id, &created);
	if (!ret) {
		e->ident = VOL_IDENT_XATTR;
		snprintf(e->ident_src, sizeof(e->ident_src), "%s its %s xattr",
			 created ? "new, stored in" : "from", VOLID_XATTR);
		return;
	}
	if (ret == -EINVAL) {
		log_warn(
		    "export %s: the %s xattr of %s is not a UUID; not using it",
		    e->name, VOLID_XATTR, e->path);
	} else {
		/* no user xattrs here (ENOTSUP), or not ours to set */
		int r2 = volid_sidecar(e->path, e->vol_id, &created, side,
				       sizeof(side));

		if (!r2) {
			e->ident = VOL_IDENT_SIDECAR;
			snprintf(e->ident_src, sizeof(e->ident_src),
				 "%s the sidecar file %.200s (%s xattr: %s)",
				 created ? "new, stored in" : "from", side,
				 VOLID_XATTR, strerror(-ret));
			return;
		}
		log_warn(
		    "export %s: cannot store a volume id with %s: %s xattr: %s; sidecar %s: %s",
		    e->name, e->path, VOLID_XATTR, strerror(-ret), side,
		    strerror(-r2));
	}
	volid_none(e, st);
}

void volid_none(struct export *e, const struct stat *st)
{
	char m[128];

	machine_id(m, sizeof(m));
	volid_local(m, st, e->vol_id);
	e->ident = VOL_IDENT_NONE;
	snprintf(
	    e->ident_src, sizeof(e->ident_src),
	    "NO IDENTITY of its own: a stand-in from this host and the %s; initiators refuse it as a multipath volume (give it uuid= to name it)",
	    S_ISBLK(st->st_mode) ? "device number" : "inode");
}

void volid_identify(struct export *e, const struct cfg_export *cfg)
{
	struct stat st;
	char id[37];

	if (cfg->has_uuid) {
		memcpy(e->vol_id, cfg->uuid, EXPORT_VOL_ID_LEN);
		e->ident = VOL_IDENT_CONFIG;
		snprintf(e->ident_src, sizeof(e->ident_src), "uuid =");
	} else if (export_vol_id(e, e->vol_id)) {
		e->ident = VOL_IDENT_BACKEND;
		snprintf(e->ident_src, sizeof(e->ident_src), "the %s image",
			 e->ops->name);
	} else if (e->ops->flags & BACKEND_F_VOLATILE) {
		volid_random(e->vol_id);
		e->ident = VOL_IDENT_RUN;
		snprintf(
		    e->ident_src, sizeof(e->ident_src),
		    "random for this run: RAM keeps nothing across a restart");
	} else if (fstat(e->fd, &st)) {
		memset(&st, 0, sizeof(st));
		volid_none(e, &st);
	} else if (S_ISBLK(st.st_mode)) {
		if (volid_device("/sys", major(st.st_rdev), minor(st.st_rdev),
				 e->vol_id, e->ident_src, sizeof(e->ident_src)))
			volid_none(e, &st);
		else
			e->ident = VOL_IDENT_DEVICE;
	} else {
		identify_file(e, &st);
	}
	volid_format(e->vol_id, id);
	if (e->ident == VOL_IDENT_NONE)
		log_warn("export %s: WARNING: volume id %s: %s", e->name, id,
			 e->ident_src);
	else
		log_info("export %s: volume id %s (%s)", e->name, id,
			 e->ident_src);
}
