/* SPDX-License-Identifier: MIT */
/*
 * librblk's persistent reservations (include/rblk/rblk.h): each call is
 * one reservation command (RBLK_OP_PR_*, docs/PROTOCOL.md
 * "Reservations") sent on queue 0 through the ordinary command path
 * (lib_pr_io()), so it has the deadline, reconnect and multipath of any
 * I/O.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/proto.h"
#include "lib_internal.h"
#include "lib_queue.h"

_Static_assert((int)RBLK_PR_WRITE_EXCLUSIVE == RBLK_PRT_WRITE_EXCLUSIVE &&
		   (int)RBLK_PR_EXCLUSIVE_ACCESS_ALL_REGS ==
		       RBLK_PRT_EXCLUSIVE_ACCESS_ALL_REGS &&
		   RBLK_PR_MAX_REGISTRANTS == RBLK_PR_MAX_REGS,
	       "public reservation types are the wire's");

/* A REPORT's buffer: room for every registrant, in whole blocks. */
static uint32_t report_len(const struct rblk *r)
{
	uint32_t bs = r->info.block_size;
	uint32_t len = (RBLK_PR_REPORT_MAX + bs - 1) / bs * bs;

	return len <= r->info.max_io ? len : r->info.max_io / bs * bs;
}

static int pr_run(struct rblk *r, const char *what, const struct lib_pr *pr,
		  void *buf, uint32_t len)
{
	int ret;

	if (!(r->info.features & RBLK_FEAT_PR))
		return lib_set_error(
		    -EOPNOTSUPP,
		    "%s: the target does not offer reservations on this volume (an older target, or direct access)",
		    what);
	ret = lib_pr_io(&r->queues[0], pr, buf, len);
	if (ret == -EBADE)
		return lib_set_error(ret, "%s: reservation conflict", what);
	if (ret)
		return lib_set_error(ret, "%s: %s", what, strerror(-ret));
	return 0;
}

static bool type_ok(int type)
{
	return type >= RBLK_PR_WRITE_EXCLUSIVE &&
	       type <= RBLK_PR_EXCLUSIVE_ACCESS_ALL_REGS;
}

int rblk_pr_register(struct rblk *r, uint64_t old_key, uint64_t new_key,
		     unsigned int flags)
{
	unsigned int fl = (flags & RBLK_PR_IGNORE_KEY) ? RBLK_PR_F_IEKEY : 0;
	struct lib_pr pr = {.opcode = RBLK_OP_PR_REGISTER, .crkey = old_key};

	if (flags & ~RBLK_PR_IGNORE_KEY)
		return lib_set_error(-EINVAL, "pr register: unknown flags");
	if (!new_key) {
		pr.arg = RBLK_PR_ARG(RBLK_PR_REG_UNREGISTER, 0, fl);
	} else if (!old_key && !fl) {
		pr.crkey = 0;
		pr.key2 = new_key;
		pr.arg = RBLK_PR_ARG(RBLK_PR_REG_REGISTER, 0, 0);
	} else {
		pr.key2 = new_key;
		pr.arg = RBLK_PR_ARG(RBLK_PR_REG_REPLACE, 0, fl);
	}
	return pr_run(r, "pr register", &pr, NULL, 0);
}

int rblk_pr_reserve(struct rblk *r, uint64_t key, enum rblk_pr_type type)
{
	struct lib_pr pr = {
	    .opcode = RBLK_OP_PR_ACQUIRE,
	    .crkey = key,
	    .arg = RBLK_PR_ARG(RBLK_PR_ACQ_ACQUIRE, type, 0),
	};

	if (!type_ok(type))
		return lib_set_error(-EINVAL, "pr reserve: unknown type %d",
				     type);
	return pr_run(r, "pr reserve", &pr, NULL, 0);
}

int rblk_pr_release(struct rblk *r, uint64_t key, enum rblk_pr_type type)
{
	struct lib_pr pr = {
	    .opcode = RBLK_OP_PR_RELEASE,
	    .crkey = key,
	    .arg = RBLK_PR_ARG(RBLK_PR_REL_RELEASE, type, 0),
	};

	if (!type_ok(type))
		return lib_set_error(-EINVAL, "pr release: unknown type %d",
				     type);
	return pr_run(r, "pr release", &pr, NULL, 0);
}

int rblk_pr_preempt(struct rblk *r, uint64_t key, uint64_t victim_key,
		    enum rblk_pr_type type, int abort)
{
	struct lib_pr pr = {
	    .opcode = RBLK_OP_PR_ACQUIRE,
	    .crkey = key,
	    .key2 = victim_key,
	    .arg = RBLK_PR_ARG(abort ? RBLK_PR_ACQ_PREEMPT_ABORT
				     : RBLK_PR_ACQ_PREEMPT,
			       type, 0),
	};

	if (!type_ok(type))
		return lib_set_error(-EINVAL, "pr preempt: unknown type %d",
				     type);
	return pr_run(r, abort ? "pr preempt-abort" : "pr preempt", &pr, NULL,
		      0);
}

int rblk_pr_clear(struct rblk *r, uint64_t key)
{
	struct lib_pr pr = {
	    .opcode = RBLK_OP_PR_RELEASE,
	    .crkey = key,
	    .arg = RBLK_PR_ARG(RBLK_PR_REL_CLEAR, 0, 0),
	};

	return pr_run(r, "pr clear", &pr, NULL, 0);
}

int rblk_pr_report(struct rblk *r, struct rblk_pr_status *out)
{
	struct lib_pr pr = {.opcode = RBLK_OP_PR_REPORT};
	uint32_t len = report_len(r);
	struct rblk_pr_report *rep;
	void *buf;
	int ret;

	memset(out, 0, sizeof(*out));
	buf = calloc(1, len);
	rep = malloc(sizeof(*rep));
	if (!buf || !rep) {
		free(buf);
		free(rep);
		return lib_set_error(-ENOMEM, "pr report: out of memory");
	}
	ret = pr_run(r, "pr report", &pr, buf, len);
	if (!ret && rblk_pr_report_decode(buf, len, rep))
		ret = lib_set_error(
		    -EPROTO, "pr report: malformed report from the target");
	if (!ret) {
		out->generation = rep->generation;
		out->type = rep->type;
		out->nr_registrants = rep->nr_given;
		for (unsigned int i = 0; i < rep->nr_given; i++) {
			out->registrants[i].key = rep->regs[i].key;
			out->registrants[i].holder = rep->regs[i].holder;
			memcpy(out->registrants[i].host, rep->regs[i].host,
			       sizeof(out->registrants[i].host));
		}
	}
	free(buf);
	free(rep);
	return ret;
}

const char *rblk_pr_type_name(int type)
{
	if (type < 0 || type > RBLK_PRT_TYPE_MAX_)
		return NULL;
	return rblk_pr_type_str(type);
}
