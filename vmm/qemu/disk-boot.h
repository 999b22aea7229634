/* SPDX-License-Identifier: MIT */
/*
 * `opvm run --disk IMAGE`: a guest booted from its own disk.  The kernel and
 * initrd are the ones in the image's /boot (Debian's vmlinuz-RELEASE and
 * initrd.img-RELEASE, the newest release), copied out with e2fsprogs'
 * debugfs: no mount, no root.  The image is an ext2/3/4 file system over
 * the whole disk, its root (/dev/vda), as `make images-disk` makes it.
 */
#ifndef OPVM_VMM_QEMU_DISK_BOOT_H
#define OPVM_VMM_QEMU_DISK_BOOT_H

#include <stddef.h>

/* The newest kernel release in IMAGE's /boot that has both files, into
 * rel (letters, digits and . _ + - only); 0 or -errno with err set. */
int disk_boot_find(const char *image, char *rel, size_t rellen, char *err, size_t errlen);

/* Copies /boot/vmlinuz-REL and /boot/initrd.img-REL out of IMAGE to
 * DIR/vmlinuz and DIR/initrd.img (DIR: a private directory); 0 or -errno. */
int disk_boot_extract(const char *image, const char *rel, const char *dir,
		      char *err, size_t errlen);

/* 1 if the file starts with a qcow2 header, 0 if not (raw), -errno. */
int disk_boot_is_qcow2(const char *image);

#endif
