// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the sample-file reader: the input is written to a
 * memfd and opened by path, as `opvm report` opens files from a session
 * directory it did not write.  sfile_reader_open() must reject anything
 * malformed with a message, and foreach must stay in bounds.
 *
 * Seeds: tests/fuzz/corpus/sfile/ (real small sample files).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "host/collect/store.h"

struct acc {
	uint64_t n, sum;
};

static int acc_cb(uint64_t offset, uint64_t count, void *arg)
{
	struct acc *a = arg;

	(void)offset;
	a->n++;
	if (__builtin_add_overflow(a->sum, count, &a->sum))
		a->sum = UINT64_MAX;
	return 0;
}

/* The input as a guest path: store_mangle() must give one safe component
 * that store_unmangle() turns back into the same bytes (unless the name was
 * long enough to be cut and hashed). */
static void fuzz_mangle(const uint8_t *data, size_t size)
{
	char m[OPVM_MANGLE_MAX], u[16384];
	size_t n;
	int r;

	store_mangle((const char *)data, size, m);
	n = strlen(m);
	if (n == 0 || n > 200 || strchr(m, '/') || !strcmp(m, ".") ||
	    !strcmp(m, "..") || m[0] == '.' || m[0] == '{')
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)m[i] < 0x20 || m[i] == 0x7f)
			abort();
	r = store_unmangle(m, u, sizeof(u));
	if (r < 0)
		abort();
	if (!strstr(m, "%~") && ((size_t)r != size || memcmp(u, data, size)))
		abort();
	/* and unmangling arbitrary text never overruns */
	if (size < sizeof(u)) {
		char in[16384];

		memcpy(in, data, size);
		in[size] = '\0';
		store_unmangle(in, u, sizeof(u));
		store_unmangle(in, u, 8);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char path[64], err[256];
	struct sfile_reader *r;

	fuzz_mangle(data, size);
	if (fd < 0) {
		fd = memfd_create("fuzz-sfile", MFD_CLOEXEC);
		if (fd < 0)
			abort();
	}
	if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	r = sfile_reader_open(path, err, sizeof(err));
	if (!r) {
		/* A reason is always given, on one line. */
		if (!err[0] || strchr(err, '\n'))
			abort();
		return 0;
	}
	const struct sfile_info *inf = sfile_reader_info(r);
	struct acc a = { 0, 0 };

	if (sfile_reader_foreach(r, acc_cb, &a))
		abort();
	/* The info the reader reports is what foreach yields. */
	if (a.n != inf->nr_entries)
		abort();
	if (a.sum != inf->total)
		abort();
	if (!memchr(inf->event, 0, sizeof(inf->event)) ||
	    !memchr(inf->guest, 0, sizeof(inf->guest)) ||
	    inf->build_id_len > sizeof(inf->build_id))
		abort();
	sfile_reader_close(r);
	return 0;
}
