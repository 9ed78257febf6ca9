/* SPDX-License-Identifier: MIT */
/*
 * Persistent reservations (pr.h): NVMe's rules, their store, and the
 * access each connection computes from them.
 */
#include "pr.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"
#include "backend.h"
#include "conn.h"
#include "export.h"
#include "target.h"

#define PR_TEXT_MAX                                                            \
	(64 + RBLK_PR_MAX_REGS * (RBLK_NAME_MAX + 32) + RBLK_NAME_MAX + 64)
#define PR_MAGIC "rblk-pr 1"
/* where block devices keep theirs unless pr_file= says (rblk-target.conf.5) */
#define PR_STATE_DIR "/var/lib/rblk/pr"
/* a compare-and-set store lost to another gateway this often: give up */
#define PR_STORE_TRIES 8

/* ---- the rules ---------------------------------------------------------- */

static bool all_regs(uint8_t type)
{
	return type == RBLK_PRT_WRITE_EXCLUSIVE_ALL_REGS ||
	       type == RBLK_PRT_EXCLUSIVE_ACCESS_ALL_REGS;
}

static struct pr_reg *reg_find(struct pr_data *d, const char *host)
{
	for (unsigned int i = 0; i < d->nr; i++)
		if (!strcmp(d->regs[i].host, host))
			return &d->regs[i];
	return NULL;
}

static void reg_remove(struct pr_data *d, struct pr_reg *g)
{
	unsigned int i = (unsigned int)(g - d->regs);

	memmove(g, g + 1, (d->nr - i - 1) * sizeof(*g));
	d->nr--;
}

static void reg_add(struct pr_data *d, const char *host, uint64_t key)
{
	struct pr_reg *g = &d->regs[d->nr++];

	snprintf(g->host, sizeof(g->host), "%s", host);
	g->key = key;
}

static void resv_set(struct pr_data *d, uint8_t type, const char *host)
{
	d->type = type;
	snprintf(d->holder, sizeof(d->holder), "%s",
		 type == RBLK_PRT_NONE || all_regs(type) ? "" : host);
}

bool pr_is_holder(const struct pr_data *d, const char *host)
{
	if (d->type == RBLK_PRT_NONE)
		return false;
	if (all_regs(d->type))
		return reg_find((struct pr_data *)d, host) != NULL;
	return !strcmp(d->holder, host);
}

/*
 * A host's registration goes: with it the reservation where it was the
 * holder (the last registrant, for the all-registrants types).
 */
static void reg_drop(struct pr_data *d, struct pr_reg *g)
{
	bool held = d->type != RBLK_PRT_NONE && !all_regs(d->type) &&
		    !strcmp(d->holder, g->host);

	reg_remove(d, g);
	if (held || (all_regs(d->type) && !d->nr))
		resv_set(d, RBLK_PRT_NONE, "");
}

/* Unregister every host but me whose key is key; how many went. */
static unsigned int drop_key(struct pr_data *d, uint64_t key, const char *me)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < d->nr;) {
		if (d->regs[i].key == key && strcmp(d->regs[i].host, me)) {
			reg_remove(d, &d->regs[i]);
			n++;
			continue;
		}
		i++;
	}
	return n;
}

static int do_register(struct pr_data *d, const char *host,
		       const struct rblk_cmd *c)
{
	struct pr_reg *me = reg_find(d, host);
	bool iekey = RBLK_PR_FLAGS(c->rkey) & RBLK_PR_F_IEKEY;

	switch (RBLK_PR_ACTION(c->rkey)) {
	case RBLK_PR_REG_REGISTER:
		if (me) /* registering again with the same key is no change */
			return me->key == c->addr ? RBLK_S_OK
						  : RBLK_S_RESV_CONFLICT;
		break;
	case RBLK_PR_REG_UNREGISTER:
		if (!me || (!iekey && me->key != c->offset))
			return RBLK_S_RESV_CONFLICT;
		reg_drop(d, me);
		d->generation++;
		return RBLK_S_OK;
	default: /* REPLACE; an unregistered host with IEKEY registers */
		if (me && !iekey && me->key != c->offset)
			return RBLK_S_RESV_CONFLICT;
		if (me) {
			me->key = c->addr;
			d->generation++;
			return RBLK_S_OK;
		}
		if (!iekey)
			return RBLK_S_RESV_CONFLICT;
		break;
	}
	if (d->nr == RBLK_PR_MAX_REGS)
		return RBLK_S_NO_RESOURCES;
	reg_add(d, host, c->addr);
	d->generation++;
	return RBLK_S_OK;
}

static int do_preempt(struct pr_data *d, const char *host, uint8_t type,
		      uint64_t prkey)
{
	const struct pr_reg *h = d->type != RBLK_PRT_NONE && !all_regs(d->type)
				     ? reg_find(d, d->holder)
				     : NULL;

	if (d->type != RBLK_PRT_NONE && all_regs(d->type) && !prkey) {
		/* every other registrant goes; ours is a new reservation */
		for (unsigned int i = 0; i < d->nr;) {
			if (strcmp(d->regs[i].host, host)) {
				reg_remove(d, &d->regs[i]);
				continue;
			}
			i++;
		}
		resv_set(d, type, host);
	} else if (h && h->key == prkey) {
		/* the holder (and those sharing its key) go; we hold it */
		drop_key(d, prkey, host);
		resv_set(d, type, host);
	} else {
		if (!prkey)
			return RBLK_S_INVALID;
		if (!drop_key(d, prkey, host))
			return RBLK_S_RESV_CONFLICT;
	}
	d->generation++;
	return RBLK_S_OK;
}

int pr_apply(struct pr_data *d, const char *host, const struct rblk_cmd *c)
{
	uint8_t type = (uint8_t)RBLK_PR_TYPE(c->rkey);
	struct pr_reg *me;

	if (c->opcode == RBLK_OP_PR_REGISTER)
		return do_register(d, host, c);
	me = reg_find(d, host);
	if (!me || me->key != c->offset)
		return RBLK_S_RESV_CONFLICT;
	if (c->opcode == RBLK_OP_PR_ACQUIRE) {
		if (RBLK_PR_ACTION(c->rkey) != RBLK_PR_ACQ_ACQUIRE)
			return do_preempt(d, host, type, c->addr);
		if (d->type == RBLK_PRT_NONE) {
			resv_set(d, type, host);
			return RBLK_S_OK;
		}
		return pr_is_holder(d, host) && d->type == type
			   ? RBLK_S_OK
			   : RBLK_S_RESV_CONFLICT;
	}
	if (RBLK_PR_ACTION(c->rkey) == RBLK_PR_REL_CLEAR) {
		d->nr = 0;
		resv_set(d, RBLK_PRT_NONE, "");
		d->generation++;
		return RBLK_S_OK;
	}
	/* RELEASE: a host that holds nothing releases nothing, and succeeds */
	if (!pr_is_holder(d, host))
		return RBLK_S_OK;
	if (d->type != type)
		return RBLK_S_INVALID;
	resv_set(d, RBLK_PRT_NONE, "");
	return RBLK_S_OK;
}

unsigned int pr_deny_of(const struct pr_data *d, const char *host)
{
	bool reg;

	if (d->type == RBLK_PRT_NONE || pr_is_holder(d, host))
		return 0;
	reg = reg_find((struct pr_data *)d, host) != NULL;
	switch (d->type) {
	case RBLK_PRT_WRITE_EXCLUSIVE:
		return PR_DENY_WRITE;
	case RBLK_PRT_EXCLUSIVE_ACCESS:
		return PR_DENY_READ | PR_DENY_WRITE;
	case RBLK_PRT_WRITE_EXCLUSIVE_REG_ONLY:
	case RBLK_PRT_WRITE_EXCLUSIVE_ALL_REGS:
		return reg ? 0 : PR_DENY_WRITE;
	default: /* the exclusive-access registrants-only and all forms */
		return reg ? 0 : PR_DENY_READ | PR_DENY_WRITE;
	}
}

void pr_fill_report(const struct pr_data *d, struct rblk_pr_report *r)
{
	memset(r, 0, sizeof(*r));
	r->generation = d->generation;
	r->type = d->type;
	r->nr_regs = (uint16_t)d->nr;
	r->nr_given = (uint16_t)d->nr;
	for (unsigned int i = 0; i < d->nr; i++) {
		r->regs[i].key = d->regs[i].key;
		r->regs[i].holder = pr_is_holder(d, d->regs[i].host);
		snprintf(r->regs[i].host, sizeof(r->regs[i].host), "%s",
			 d->regs[i].host);
	}
}

/* ---- the stored form -------------------------------------------------------
 *
 *   rblk-pr 1
 *   seq 12
 *   generation 5
 *   type 3
 *   holder nodeA          (the rest of the line; absent: none)
 *   reg 0x1a nodeA        (key, then the host: the rest of the line)
 */

int pr_format(const struct pr_data *d, char *buf, size_t len)
{
	size_t n = 0;
	int w;

#define PUT(...)                                                               \
	do {                                                                   \
		w = snprintf(buf + n, len - n, __VA_ARGS__);                   \
		if (w < 0 || (size_t)w >= len - n)                             \
			return -ENOSPC;                                        \
		n += (size_t)w;                                                \
	} while (0)
	PUT("%s\nseq %" PRIu64 "\ngeneration %" PRIu32 "\ntype %u\n", PR_MAGIC,
	    d->seq, d->generation, d->type);
	if (d->holder[0])
		PUT("holder %s\n", d->holder);
	for (unsigned int i = 0; i < d->nr; i++)
		PUT("reg 0x%" PRIx64 " %s\n", d->regs[i].key, d->regs[i].host);
#undef PUT
	return (int)n;
}

/* A host name as HELLO allows it: printable, non-empty, fits. */
static bool host_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n >= RBLK_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

int pr_parse(const char *text, struct pr_data *d)
{
	char *copy = strdup(text), *line, *save = NULL;
	bool magic = false;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	memset(d, 0, sizeof(*d));
	for (line = strtok_r(copy, "\n", &save); line && !ret;
	     line = strtok_r(NULL, "\n", &save)) {
		unsigned long long v;
		char *end;

		if (!magic) {
			magic = !strcmp(line, PR_MAGIC);
			ret = magic ? 0 : -EINVAL;
		} else if (!strncmp(line, "seq ", 4)) {
			d->seq = strtoull(line + 4, &end, 10);
			ret = *end ? -EINVAL : 0;
		} else if (!strncmp(line, "generation ", 11)) {
			v = strtoull(line + 11, &end, 10);
			ret = *end || v > UINT32_MAX ? -EINVAL : 0;
			d->generation = (uint32_t)v;
		} else if (!strncmp(line, "type ", 5)) {
			v = strtoull(line + 5, &end, 10);
			ret = *end || v > RBLK_PRT_TYPE_MAX_ ? -EINVAL : 0;
			d->type = (uint8_t)v;
		} else if (!strncmp(line, "holder ", 7)) {
			ret = host_ok(line + 7) ? 0 : -EINVAL;
			snprintf(d->holder, sizeof(d->holder), "%s", line + 7);
		} else if (!strncmp(line, "reg ", 4)) {
			v = strtoull(line + 4, &end, 16);
			if (*end != ' ' || !v || !host_ok(end + 1) ||
			    d->nr == RBLK_PR_MAX_REGS || reg_find(d, end + 1))
				ret = -EINVAL;
			else
				reg_add(d, end + 1, v);
		} else {
			ret = -EINVAL;
		}
	}
	free(copy);
	if (!ret && !magic)
		ret = -EINVAL;
	/* a holder must be a registrant; the all-registrants types name none */
	if (!ret && d->type != RBLK_PRT_NONE &&
	    (all_regs(d->type) ? d->holder[0] != 0 || !d->nr
			       : !reg_find(d, d->holder)))
		ret = -EINVAL;
	if (!ret && d->type == RBLK_PRT_NONE && d->holder[0])
		ret = -EINVAL;
	return ret;
}

/* ---- the sidecar --------------------------------------------------------- */

/* mkdir -p of dir, 0700 for what it makes. 0 or -errno. */
static int mkdirs(const char *dir)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", dir);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/*
 * Write text to path atomically: a temporary beside it, fsync, rename
 * over, fsync of the directory, so a crash leaves the old state or the
 * new one, whole. 0 or -errno.
 */
static int file_store(const char *path, const char *text)
{
	char tmp[PATH_MAX + 16], copy[PATH_MAX], dir[PATH_MAX];
	size_t len = strlen(text), off = 0;
	int fd, dfd, ret = 0;

	snprintf(copy, sizeof(copy), "%s", path);
	snprintf(dir, sizeof(dir), "%s", dirname(copy));
	ret = mkdirs(dir);
	if (ret)
		return ret;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			break;
		}
		off += (size_t)n;
	}
	if (!ret && fsync(fd))
		ret = -errno;
	close(fd);
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		unlink(tmp);
		return ret;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (fsync(dfd))
		ret = -errno;
	close(dfd);
	return ret;
}

/* The sidecar's text into buf; its length, 0 when there is none. */
static int file_load(const char *path, char *buf, size_t len)
{
	size_t off = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	for (;;) {
		ssize_t n = read(fd, buf + off, len - 1 - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int ret = -errno;

			close(fd);
			return ret;
		}
		if (n == 0)
			break;
		off += (size_t)n;
		if (off == len - 1) {
			close(fd);
			return -EFBIG;
		}
	}
	close(fd);
	buf[off] = 0;
	return (int)off;
}

/*
 * The sidecar of a file export: .NAME.rblk-pr in its directory (as the
 * volume id's .NAME.rblk-uuid); of a block device, PR_STATE_DIR/EXPORT.
 */
static int sidecar_path(const struct export *e, const struct cfg_export *cfg,
			char *out, size_t len)
{
	char dir[PATH_MAX], base[PATH_MAX];
	struct stat st;

	if (cfg->pr_file[0]) {
		snprintf(out, len, "%s", cfg->pr_file);
		return 0;
	}
	if (stat(e->path, &st))
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		snprintf(out, len, "%s/%s", PR_STATE_DIR, e->name);
		return 0;
	}
	snprintf(dir, sizeof(dir), "%s", e->path);
	snprintf(base, sizeof(base), "%s", e->path);
	if ((size_t)snprintf(out, len, "%s/.%s.rblk-pr", dirname(dir),
			     basename(base)) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* ---- load and store, whichever the export uses ------------------------ */

/* The stored state into d (an empty one when nothing is stored). */
static int pr_load(struct export *e, struct pr_data *d)
{
	struct pr *p = e->pr;
	char *buf = malloc(PR_TEXT_MAX);
	int ret;

	if (!buf)
		return -ENOMEM;
	if (e->ops->pr_load)
		ret = e->ops->pr_load(e, buf, PR_TEXT_MAX);
	else if (p->file[0])
		ret = file_load(p->file, buf, PR_TEXT_MAX);
	else
		ret = 0;
	if (ret > 0)
		ret = pr_parse(buf, d);
	else if (ret == 0)
		memset(d, 0, sizeof(*d));
	free(buf);
	return ret;
}

/* Store d (its seq already advanced). -ECANCELED: lost a race (rbd). */
static int pr_store(struct export *e, const struct pr_data *d)
{
	struct pr *p = e->pr;
	char *buf = malloc(PR_TEXT_MAX);
	int ret;

	if (!buf)
		return -ENOMEM;
	ret = pr_format(d, buf, PR_TEXT_MAX);
	if (ret >= 0) {
		if (e->ops->pr_store)
			ret = e->ops->pr_store(e, buf);
		else if (p->file[0])
			ret = file_store(p->file, buf);
		else
			ret = 0;
	}
	free(buf);
	return ret;
}

/* Under io_lock: d becomes the state, and sessions recompute. */
static void pr_publish(struct pr *p, const struct pr_data *d)
{
	pthread_mutex_lock(&p->lock);
	p->d = *d;
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	pthread_mutex_unlock(&p->lock);
}

/* Under io_lock: read the backend's store; publish it if it changed. */
static void pr_reload_locked(struct export *e, struct pr_data *tmp)
{
	if (!pr_load(e, tmp) && tmp->seq != e->pr->d.seq)
		pr_publish(e->pr, tmp);
}

static void *pr_poll_main(void *arg)
{
	struct export *e = arg;
	struct pr *p = e->pr;
	struct timespec ts;

	pthread_setname_np(pthread_self(), "rblk-prpoll");
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)(PR_POLL_MS % 1000) * 1000000L;
		ts.tv_sec += PR_POLL_MS / 1000 + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&p->cond, &p->lock, &ts);
		if (p->stop)
			break;
		pthread_mutex_unlock(&p->lock);
		pr_reload(e);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int pr_open(struct export *e, const struct cfg_export *cfg, char *err,
	    size_t errlen)
{
	struct pr *p;
	int ret;

	if (e->direct)
		return 0;
	p = calloc(1, sizeof(*p));
	if (!p)
		return open_fail(err, errlen, -ENOMEM, "out of memory");
	pthread_mutex_init(&p->io_lock, NULL);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	atomic_init(&p->gen, 1);
	e->pr = p;
	if (e->ops->flags & BACKEND_F_VOLATILE) { /* ram: dies with the run */
		p->volatile_only = true;
		return 0;
	}
	if (!e->ops->pr_load) {
		ret = sidecar_path(e, cfg, p->file, sizeof(p->file));
		if (ret)
			goto out_free;
	}
	ret = pr_load(e, &p->d);
	if (ret) {
		open_fail(err, errlen, ret,
			  "reservations of export %s: reading %s: %s", e->name,
			  p->file[0] ? p->file : "the backend's store",
			  ret == -EINVAL ? "not a reservation state (corrupt?)"
					 : strerror(-ret));
		goto out_free;
	}
	if (p->d.type != RBLK_PRT_NONE || p->d.nr)
		log_info("export %s: reservations restored: %u registrant(s), "
			 "%s%s%s",
			 e->name, p->d.nr, rblk_pr_type_str(p->d.type),
			 p->d.holder[0] ? " held by " : "", p->d.holder);
	if (e->ops->pr_load && !e->read_only) {
		ret = -pthread_create(&p->poller, NULL, pr_poll_main, e);
		if (ret) {
			open_fail(err, errlen, ret, "pthread_create: %s",
				  strerror(-ret));
			goto out_free;
		}
		p->polling = true;
	}
	return 0;

out_free:
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->io_lock);
	free(p);
	e->pr = NULL;
	return ret;
}

void pr_close(struct export *e)
{
	struct pr *p = e->pr;

	if (!p)
		return;
	if (p->polling) {
		pthread_mutex_lock(&p->lock);
		p->stop = true;
		pthread_cond_signal(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->poller, NULL);
	}
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->io_lock);
	free(p);
	e->pr = NULL;
}

void pr_reload(struct export *e)
{
	struct pr *p = e->pr;
	struct pr_data *d;

	if (!p || !e->ops->pr_load)
		return;
	d = malloc(sizeof(*d));
	if (!d)
		return;
	pthread_mutex_lock(&p->io_lock);
	pr_reload_locked(e, d);
	pthread_mutex_unlock(&p->io_lock);
	free(d);
}

void pr_refresh(struct tconn *c)
{
	struct pr *p = c->exp->pr;

	pthread_mutex_lock(&p->lock);
	c->pr_seen = atomic_load_explicit(&p->gen, memory_order_relaxed);
	c->pr_deny = (uint8_t)pr_deny_of(&p->d, c->host);
	pthread_mutex_unlock(&p->lock);
}

void pr_execute(struct treq *r)
{
	struct tconn *c = r->conn;
	struct export *e = c->exp;
	struct pr *p = e->pr;
	struct pr_data *d = malloc(sizeof(*d));
	int st = RBLK_S_IO_ERROR, ret = 0;

	if (!d) {
		r->status = RBLK_S_NO_RESOURCES;
		return;
	}
	if (!c->host[0]) { /* a registrant is a host name: there is none */
		r->status = RBLK_S_INVALID;
		free(d);
		return;
	}
	pthread_mutex_lock(&p->io_lock);
	for (int tries = 0; tries < PR_STORE_TRIES; tries++) {
		/* another gateway may have changed it: start from the store */
		if (e->ops->pr_load) {
			ret = pr_load(e, d);
			if (ret)
				break;
			if (d->seq != p->d.seq)
				pr_publish(p, d);
		}
		*d = p->d; /* io_lock held: nobody else changes it */
		st = pr_apply(d, c->host, &r->cmd);
		if (st || !memcmp(d, &p->d, sizeof(*d)))
			break; /* refused, or nothing changed: nothing to store
				*/
		d->seq++;
		ret = pr_store(e, d);
		if (ret == -ECANCELED)
			continue;
		if (!ret)
			pr_publish(p, d);
		break;
	}
	pthread_mutex_unlock(&p->io_lock);
	if (ret) {
		log_err("export %s: host '%s': %s not stored (%s); the "
			"reservations are unchanged",
			e->name, c->host, rblk_opcode_str(r->cmd.opcode),
			ret == -ECANCELED ? "raced another gateway too often"
					  : strerror(-ret));
		st = RBLK_S_IO_ERROR;
	} else if (!st) {
		log_info("export %s: host '%s': %s action %u type %s: done",
			 e->name, c->host, rblk_opcode_str(r->cmd.opcode),
			 RBLK_PR_ACTION(r->cmd.rkey),
			 rblk_pr_type_str((int)RBLK_PR_TYPE(r->cmd.rkey)));
	} else {
		log_info("export %s: host '%s': %s action %u: %s", e->name,
			 c->host, rblk_opcode_str(r->cmd.opcode),
			 RBLK_PR_ACTION(r->cmd.rkey), rblk_status_str(st));
	}
	r->status = st;
	free(d);
}

void pr_report(struct treq *r)
{
	struct export *e = r->conn->exp;
	struct pr *p = e->pr;
	struct rblk_pr_report *rep = malloc(sizeof(*rep));

	if (!rep) {
		r->status = RBLK_S_NO_RESOURCES;
		return;
	}
	pthread_mutex_lock(&p->io_lock);
	if (e->ops->pr_load) {
		struct pr_data *d = malloc(sizeof(*d));

		if (d)
			pr_reload_locked(e, d);
		free(d);
	}
	pr_fill_report(&p->d, rep);
	pthread_mutex_unlock(&p->io_lock);
	rblk_pr_report_encode(r->slot, r->cmd.length, rep);
	r->status = RBLK_S_OK;
	free(rep);
}
