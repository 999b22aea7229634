// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the text parsers of the QEMU side, fed arbitrary bytes:
 * the gdbstub target-description walker (register layout) and the libvirt
 * domain-XML channel lookup.  Neither may read outside its input or write
 * outside its output, whatever the bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/qemu/gdbstub.h"
#include "vmm/libvirt/virt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gdbstub_layout l;
	char *copy, path[64];

	/* Exact-size copy: ASan catches any read past the end. */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	gdbstub_layout_init(&l);
	if (gdbstub_layout_parse(&l, copy, size) == 0 && l.next_off < 0)
		abort();
	free(copy);

	copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	if (virt_xml_channel_path(copy, "org.opvm.0", path, sizeof(path)) == 0 &&
	    (path[0] != '/' || strlen(path) >= sizeof(path)))
		abort();
	free(copy);
	return 0;
}
