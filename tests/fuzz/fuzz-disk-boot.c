// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for what `opvm run --disk` makes of an image's /boot
 * listing (disk_boot_pick(): debugfs's `ls -p /boot` output, which the
 * image's file names and sizes fill): every release it keeps has a name
 * of letters, digits and . _ + - only, both files non-empty and within
 * the limit, newest first; nothing is read past the listing; the notes
 * and the message are NUL-ended.
 *
 * Seeds: corpus/disk-boot (a Debian /boot, a sparse kernel, a release
 * without its initrd, a link).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/qemu/disk-boot.h"

#define MAX	(256ull << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *list = malloc(size + 1), notes[1024] = "", err[1024] = "";
	struct disk_boot b;

	if (!list)
		return 0;
	memcpy(list, data, size);
	list[size] = '\0';
	memset(&b, 0xa5, sizeof(b));
	if (!disk_boot_pick(list, "img", MAX, &b, notes, sizeof(notes), err, sizeof(err))) {
		if (!b.n || b.n > DISK_BOOT_RELEASES)
			abort();
		for (unsigned i = 0; i < b.n; i++) {
			size_t n = strnlen(b.r[i].rel, sizeof(b.r[i].rel));

			if (!n || n == sizeof(b.r[i].rel) ||
			    strspn(b.r[i].rel, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "0123456789._+-") != n)
				abort();
			if (!b.r[i].ksize || b.r[i].ksize > MAX || !b.r[i].isize ||
			    b.r[i].isize > MAX)
				abort();
			if (i && strverscmp(b.r[i - 1].rel, b.r[i].rel) < 0)
				abort();
		}
	}
	if (!memchr(notes, '\0', sizeof(notes)) || !memchr(err, '\0', sizeof(err)))
		abort();
	free(list);
	return 0;
}
