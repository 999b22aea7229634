/* SPDX-License-Identifier: MIT */
/*
 * `opvm run --disk IMAGE`: a guest booted from its own disk.  The kernel and
 * initrd are the ones in the image's /boot (Debian's vmlinuz-RELEASE and
 * initrd.img-RELEASE, the newest complete release), copied out with
 * e2fsprogs' debugfs: no mount, no root.  The image is an ext2/3/4 file
 * system over the whole disk, its root (/dev/vda), as `make images-disk`
 * makes it.
 *
 * The image is hostile input: a release counts only when both of its files
 * are regular files whose sizes, as the image's directory listing gives
 * them, are at most the limit (a sparse 50 GB vmlinuz in a 64 MiB image is
 * never copied); each copy is bounded to that size and to a time, debugfs
 * killed past either; a broken newest release gives way to the next
 * complete one, with a note saying so.
 */
#ifndef OPVM_VMM_QEMU_DISK_BOOT_H
#define OPVM_VMM_QEMU_DISK_BOOT_H

#include <stddef.h>
#include <stdint.h>

#define DISK_BOOT_MAX_DEFAULT	(256ull << 20)	/* per file: --disk-boot-max */
#define DISK_BOOT_MAX_LIMIT	(16ull << 30)
#define DISK_BOOT_COPY_MS	120000		/* per file, then debugfs is killed */
#define DISK_BOOT_RELEASES	16

/* The complete releases of an image's /boot, newest first. */
struct disk_boot {
	unsigned n;
	struct {
		char rel[72];			/* letters, digits, . _ + - */
		uint64_t ksize, isize;		/* vmlinuz, initrd.img bytes */
	} r[DISK_BOOT_RELEASES];
};

/* Whether IMAGE may be a disk image: a regular file (a FIFO, a device or a
 * directory is refused before anything blocks on it).  1 if it starts with
 * a qcow2 header, 0 if raw, -errno with err set. */
int disk_boot_probe(const char *image, char *err, size_t errlen);

/* The releases in IMAGE's /boot whose vmlinuz-REL and initrd.img-REL are
 * both there, regular, non-empty and at most max bytes, into b (newest
 * first).  Each newer release skipped adds a line to notes (its reason).
 * 0, or -errno with err set (-ENOENT: none complete, the newest's reason). */
int disk_boot_find(const char *image, uint64_t max, struct disk_boot *b, char *notes,
		   size_t noteslen, char *err, size_t errlen);

/* What disk_boot_find() makes of debugfs's `ls -p /boot` output list
 * (NUL-ended, hostile): the same results.  For the fuzz target. */
int disk_boot_pick(char *list, const char *image, uint64_t max, struct disk_boot *b,
		   char *notes, size_t noteslen, char *err, size_t errlen);

/* Copies the first release of b that copies whole (each file exactly its
 * listed size, within DISK_BOOT_COPY_MS) out of IMAGE to "vmlinuz" and
 * "initrd.img" in the directory fd dirfd (a private directory: made from
 * the fd, never through a link); a release that fails adds a line to
 * notes and the next is tried.  The index of the release copied, or
 * -errno with err set. */
int disk_boot_extract(const char *image, const struct disk_boot *b, int dirfd, char *notes,
		      size_t noteslen, char *err, size_t errlen);

#endif
