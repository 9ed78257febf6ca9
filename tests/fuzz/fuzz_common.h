/* SPDX-License-Identifier: MIT */
/*
 * Shared bits of the libFuzzer harnesses in tests/fuzz/. A harness checks
 * properties of the code under test and stops the run with CHECK() when
 * one does not hold, so a wrong answer is a finding just as a crash is.
 */
#ifndef RBLK_FUZZ_COMMON_H
#define RBLK_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: property violated: %s\n",      \
				__FILE__, __LINE__, #cond);                    \
			abort();                                               \
		}                                                              \
	} while (0)

/* Little-endian reads from fuzz input, zero past the end. */
static inline uint64_t fz_le(const uint8_t *p, size_t avail, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n && i < avail; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
