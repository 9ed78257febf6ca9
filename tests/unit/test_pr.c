/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the reservation rules of target/pr.c (linked as it is):
 * NVMe's register / unregister / replace (keys checked, IEKEY), acquire
 * (a second holder or type refused), release (type checked, a non-holder
 * changes nothing), clear, preempt (the holder's key: the reservation
 * moves; another key: registrants go; all-registrants with key 0), what
 * each of the six types forbids holder, registrant and stranger, and the
 * stored text (round trip; corrupt or inconsistent text refused).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "target/backend.h"
#include "target/pr.h"
#include "target/target.h"

/* pr.c's open reports through backend.c's open_fail(): not linked here */
int open_fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	(void)fmt;
	if (errlen)
		snprintf(err, errlen, "failed");
	return ret;
}

static int cmd(struct pr_data *d, const char *host, uint8_t op,
	       unsigned int action, unsigned int type, unsigned int flags,
	       uint64_t crkey, uint64_t key2)
{
	struct rblk_cmd c = {
	    .opcode = op,
	    .offset = crkey,
	    .addr = key2,
	    .rkey = RBLK_PR_ARG(action, type, flags),
	};

	return pr_apply(d, host, &c);
}

#define REG(d, h, k)                                                           \
	cmd(d, h, RBLK_OP_PR_REGISTER, RBLK_PR_REG_REGISTER, 0, 0, 0, k)
#define ACQ(d, h, k, t)                                                        \
	cmd(d, h, RBLK_OP_PR_ACQUIRE, RBLK_PR_ACQ_ACQUIRE, t, 0, k, 0)

static void test_register(void **state)
{
	struct pr_data d = {0};

	(void)state;
	assert_int_equal(REG(&d, "a", 1), RBLK_S_OK);
	assert_int_equal(d.generation, 1);
	assert_int_equal(REG(&d, "a", 1), RBLK_S_OK); /* same key: no change */
	assert_int_equal(d.generation, 1);
	assert_int_equal(REG(&d, "a", 2), RBLK_S_RESV_CONFLICT);
	/* replace: the current key must match, unless IEKEY */
	assert_int_equal(
	    cmd(&d, "a", RBLK_OP_PR_REGISTER, RBLK_PR_REG_REPLACE, 0, 0, 9, 3),
	    RBLK_S_RESV_CONFLICT);
	assert_int_equal(
	    cmd(&d, "a", RBLK_OP_PR_REGISTER, RBLK_PR_REG_REPLACE, 0, 0, 1, 3),
	    RBLK_S_OK);
	assert_int_equal(cmd(&d, "a", RBLK_OP_PR_REGISTER, RBLK_PR_REG_REPLACE,
			     0, RBLK_PR_F_IEKEY, 0, 4),
			 RBLK_S_OK);
	assert_int_equal(d.regs[0].key, 4);
	/* an unregistered host: replace only with IEKEY, then registered */
	assert_int_equal(
	    cmd(&d, "b", RBLK_OP_PR_REGISTER, RBLK_PR_REG_REPLACE, 0, 0, 0, 5),
	    RBLK_S_RESV_CONFLICT);
	assert_int_equal(cmd(&d, "b", RBLK_OP_PR_REGISTER, RBLK_PR_REG_REPLACE,
			     0, RBLK_PR_F_IEKEY, 0, 5),
			 RBLK_S_OK);
	assert_int_equal(d.nr, 2);
	/* unregister: key checked */
	assert_int_equal(cmd(&d, "b", RBLK_OP_PR_REGISTER,
			     RBLK_PR_REG_UNREGISTER, 0, 0, 6, 0),
			 RBLK_S_RESV_CONFLICT);
	assert_int_equal(cmd(&d, "b", RBLK_OP_PR_REGISTER,
			     RBLK_PR_REG_UNREGISTER, 0, 0, 5, 0),
			 RBLK_S_OK);
	assert_int_equal(d.nr, 1);
	assert_int_equal(cmd(&d, "b", RBLK_OP_PR_REGISTER,
			     RBLK_PR_REG_UNREGISTER, 0, RBLK_PR_F_IEKEY, 0, 0),
			 RBLK_S_RESV_CONFLICT); /* not registered */
}

static void test_full(void **state)
{
	struct pr_data d = {0};
	char h[16];

	(void)state;
	for (int i = 0; i < RBLK_PR_MAX_REGS; i++) {
		snprintf(h, sizeof(h), "h%d", i);
		assert_int_equal(REG(&d, h, 1), RBLK_S_OK);
	}
	assert_int_equal(REG(&d, "one-more", 1), RBLK_S_NO_RESOURCES);
}

static void test_acquire_release(void **state)
{
	struct pr_data d = {0};

	(void)state;
	assert_int_equal(ACQ(&d, "a", 1, RBLK_PRT_WRITE_EXCLUSIVE),
			 RBLK_S_RESV_CONFLICT); /* not registered */
	REG(&d, "a", 1);
	REG(&d, "b", 2);
	assert_int_equal(ACQ(&d, "a", 2, RBLK_PRT_WRITE_EXCLUSIVE),
			 RBLK_S_RESV_CONFLICT); /* wrong key */
	assert_int_equal(ACQ(&d, "a", 1, RBLK_PRT_WRITE_EXCLUSIVE), RBLK_S_OK);
	assert_string_equal(d.holder, "a");
	assert_int_equal(ACQ(&d, "a", 1, RBLK_PRT_WRITE_EXCLUSIVE), RBLK_S_OK);
	assert_int_equal(ACQ(&d, "a", 1, RBLK_PRT_EXCLUSIVE_ACCESS),
			 RBLK_S_RESV_CONFLICT);
	assert_int_equal(ACQ(&d, "b", 2, RBLK_PRT_WRITE_EXCLUSIVE),
			 RBLK_S_RESV_CONFLICT);
	/* a non-holder's release: success, nothing changes */
	assert_int_equal(cmd(&d, "b", RBLK_OP_PR_RELEASE, RBLK_PR_REL_RELEASE,
			     RBLK_PRT_WRITE_EXCLUSIVE, 0, 2, 0),
			 RBLK_S_OK);
	assert_int_equal(d.type, RBLK_PRT_WRITE_EXCLUSIVE);
	assert_int_equal(cmd(&d, "a", RBLK_OP_PR_RELEASE, RBLK_PR_REL_RELEASE,
			     RBLK_PRT_EXCLUSIVE_ACCESS, 0, 1, 0),
			 RBLK_S_INVALID); /* not its type */
	assert_int_equal(cmd(&d, "a", RBLK_OP_PR_RELEASE, RBLK_PR_REL_RELEASE,
			     RBLK_PRT_WRITE_EXCLUSIVE, 0, 1, 0),
			 RBLK_S_OK);
	assert_int_equal(d.type, RBLK_PRT_NONE);
	assert_int_equal(d.nr, 2);
	/* the holder's unregistration ends its reservation */
	ACQ(&d, "b", 2, RBLK_PRT_EXCLUSIVE_ACCESS);
	cmd(&d, "b", RBLK_OP_PR_REGISTER, RBLK_PR_REG_UNREGISTER, 0, 0, 2, 0);
	assert_int_equal(d.type, RBLK_PRT_NONE);
	/* clear: everything, by any registrant with its key */
	ACQ(&d, "a", 1, RBLK_PRT_WRITE_EXCLUSIVE);
	assert_int_equal(
	    cmd(&d, "a", RBLK_OP_PR_RELEASE, RBLK_PR_REL_CLEAR, 0, 0, 1, 0),
	    RBLK_S_OK);
	assert_int_equal(d.nr, 0);
	assert_int_equal(d.type, RBLK_PRT_NONE);
}

static void test_preempt(void **state)
{
	struct pr_data d = {0};
	uint32_t g;

	(void)state;
	REG(&d, "a", 1);
	REG(&d, "b", 2);
	REG(&d, "c", 3);
	ACQ(&d, "b", 2, RBLK_PRT_WRITE_EXCLUSIVE);
	g = d.generation;
	/* the holder's key: b goes, a holds, with the new type */
	assert_int_equal(cmd(&d, "a", RBLK_OP_PR_ACQUIRE,
			     RBLK_PR_ACQ_PREEMPT_ABORT,
			     RBLK_PRT_EXCLUSIVE_ACCESS, 0, 1, 2),
			 RBLK_S_OK);
	assert_string_equal(d.holder, "a");
	assert_int_equal(d.type, RBLK_PRT_EXCLUSIVE_ACCESS);
	assert_int_equal(d.nr, 2);
	assert_int_equal(d.generation, g + 1);
	/* another key: c goes, the reservation stays */
	assert_int_equal(cmd(&d, "a", RBLK_OP_PR_ACQUIRE, RBLK_PR_ACQ_PREEMPT,
			     RBLK_PRT_WRITE_EXCLUSIVE, 0, 1, 3),
			 RBLK_S_OK);
	assert_int_equal(d.nr, 1);
	assert_int_equal(d.type, RBLK_PRT_EXCLUSIVE_ACCESS);
	/* a key nobody has, or 0 under a single-holder type */
	assert_int_equal(cmd(&d, "a", RBLK_OP_PR_ACQUIRE, RBLK_PR_ACQ_PREEMPT,
			     RBLK_PRT_WRITE_EXCLUSIVE, 0, 1, 7),
			 RBLK_S_RESV_CONFLICT);
	REG(&d, "x", 8);
	assert_int_equal(cmd(&d, "x", RBLK_OP_PR_ACQUIRE, RBLK_PR_ACQ_PREEMPT,
			     RBLK_PRT_WRITE_EXCLUSIVE, 0, 8, 0),
			 RBLK_S_INVALID);
	/* all registrants: key 0 takes it over, everyone else goes */
	cmd(&d, "a", RBLK_OP_PR_RELEASE, RBLK_PR_REL_CLEAR, 0, 0, 1, 0);
	REG(&d, "a", 1);
	REG(&d, "b", 2);
	REG(&d, "c", 3);
	ACQ(&d, "a", 1, RBLK_PRT_WRITE_EXCLUSIVE_ALL_REGS);
	assert_true(pr_is_holder(&d, "b"));
	assert_int_equal(cmd(&d, "c", RBLK_OP_PR_ACQUIRE, RBLK_PR_ACQ_PREEMPT,
			     RBLK_PRT_WRITE_EXCLUSIVE, 0, 3, 0),
			 RBLK_S_OK);
	assert_int_equal(d.nr, 1);
	assert_string_equal(d.holder, "c");
	assert_int_equal(d.type, RBLK_PRT_WRITE_EXCLUSIVE);
}

/* What each type forbids the holder a, registrant b and stranger s. */
static void test_deny(void **state)
{
	static const struct {
		uint8_t type;
		unsigned int holder, reg, stranger;
	} t[] = {
	    {RBLK_PRT_WRITE_EXCLUSIVE, 0, PR_DENY_WRITE, PR_DENY_WRITE},
	    {RBLK_PRT_EXCLUSIVE_ACCESS, 0, PR_DENY_READ | PR_DENY_WRITE,
	     PR_DENY_READ | PR_DENY_WRITE},
	    {RBLK_PRT_WRITE_EXCLUSIVE_REG_ONLY, 0, 0, PR_DENY_WRITE},
	    {RBLK_PRT_EXCLUSIVE_ACCESS_REG_ONLY, 0, 0,
	     PR_DENY_READ | PR_DENY_WRITE},
	    {RBLK_PRT_WRITE_EXCLUSIVE_ALL_REGS, 0, 0, PR_DENY_WRITE},
	    {RBLK_PRT_EXCLUSIVE_ACCESS_ALL_REGS, 0, 0,
	     PR_DENY_READ | PR_DENY_WRITE},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct pr_data d = {0};

		REG(&d, "a", 1);
		REG(&d, "b", 2);
		assert_int_equal(pr_deny_of(&d, "s"), 0); /* none yet */
		assert_int_equal(ACQ(&d, "a", 1, t[i].type), RBLK_S_OK);
		assert_int_equal(pr_deny_of(&d, "a"), t[i].holder);
		assert_int_equal(pr_deny_of(&d, "b"), t[i].reg);
		assert_int_equal(pr_deny_of(&d, "s"), t[i].stranger);
	}
	assert_int_equal(pr_class(RBLK_OP_FLUSH), PR_DENY_WRITE);
	assert_int_equal(pr_class(RBLK_OP_TRIM), PR_DENY_WRITE);
	assert_int_equal(pr_class(RBLK_OP_WRITE_ZEROES), PR_DENY_WRITE);
	assert_int_equal(pr_class(RBLK_OP_READ), PR_DENY_READ);
	assert_int_equal(pr_class(RBLK_OP_KEEPALIVE), 0);
	assert_int_equal(pr_class(RBLK_OP_PR_REPORT), 0);
}

static void test_text(void **state)
{
	struct pr_data d = {0}, back;
	char buf[16384];

	(void)state;
	REG(&d, "node a", 0x1a);
	REG(&d, "b", 0xffffffffffffffffull);
	ACQ(&d, "node a", 0x1a, RBLK_PRT_WRITE_EXCLUSIVE_REG_ONLY);
	d.seq = 42;
	assert_true(pr_format(&d, buf, sizeof(buf)) > 0);
	assert_int_equal(pr_parse(buf, &back), 0);
	assert_int_equal(back.seq, 42);
	assert_int_equal(back.generation, d.generation);
	assert_int_equal(back.type, d.type);
	assert_string_equal(back.holder, "node a");
	assert_int_equal(back.nr, 2);
	assert_string_equal(back.regs[0].host, "node a");
	assert_true(back.regs[1].key == 0xffffffffffffffffull);
	assert_int_equal(pr_format(&d, buf, 20), -ENOSPC);

	assert_int_equal(pr_parse("", &back), -EINVAL);
	assert_int_equal(pr_parse("rblk-pr 2\n", &back), -EINVAL);
	assert_int_equal(pr_parse("rblk-pr 1\ntype 9\n", &back), -EINVAL);
	/* a holder that is no registrant; a type without a holder */
	assert_int_equal(
	    pr_parse("rblk-pr 1\ntype 1\nholder x\nreg 0x1 y\n", &back),
	    -EINVAL);
	assert_int_equal(pr_parse("rblk-pr 1\ntype 1\nreg 0x1 y\n", &back),
			 -EINVAL);
	assert_int_equal(pr_parse("rblk-pr 1\nreg 0x0 y\n", &back), -EINVAL);
	assert_int_equal(pr_parse("rblk-pr 1\nreg 0x1 y\nreg 0x2 y\n", &back),
			 -EINVAL);
	assert_int_equal(pr_parse("rblk-pr 1\nbogus\n", &back), -EINVAL);
	assert_int_equal(pr_parse("rblk-pr 1\ntype 5\nreg 0x1 y\n", &back), 0);
}

static void test_report(void **state)
{
	struct pr_data d = {0};
	struct rblk_pr_report r, back;
	char buf[RBLK_PR_HDR_SIZE + 2 * RBLK_PR_ENTRY_SIZE];

	(void)state;
	REG(&d, "a", 1);
	REG(&d, "b", 2);
	REG(&d, "c", 3);
	ACQ(&d, "b", 2, RBLK_PRT_EXCLUSIVE_ACCESS);
	pr_fill_report(&d, &r);
	/* room for two entries of three: nr_regs says three */
	rblk_pr_report_encode(buf, sizeof(buf), &r);
	assert_int_equal(rblk_pr_report_decode(buf, sizeof(buf), &back),
			 RBLK_S_OK);
	assert_int_equal(back.nr_regs, 3);
	assert_int_equal(back.nr_given, 2);
	assert_false(back.regs[0].holder);
	assert_true(back.regs[1].holder);
	assert_string_equal(back.regs[1].host, "b");
	buf[RBLK_PR_HDR_SIZE + 9] = 1; /* a reserved byte */
	assert_int_equal(rblk_pr_report_decode(buf, sizeof(buf), &back),
			 RBLK_S_INVALID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_register),
	    cmocka_unit_test(test_full),
	    cmocka_unit_test(test_acquire_release),
	    cmocka_unit_test(test_preempt),
	    cmocka_unit_test(test_deny),
	    cmocka_unit_test(test_text),
	    cmocka_unit_test(test_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
