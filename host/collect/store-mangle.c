// SPDX-License-Identifier: MIT
/*
 * Name mangling (host/collect/store.h): a guest path becomes one path component
 * that names no parent, hides nothing and fits a file name, and back.
 * "/" becomes "^"; control bytes, "%", "^", braces and a leading dot become
 * %XX; a name too long keeps a prefix and ends in %~ and a 128-bit hash of
 * the whole name, so two long names never share a component.  The braces
 * are escaped so that no mangled name can be one of the store's own
 * directories ({root}, {dep}, {kern}, {overflow}).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "host/collect/store-priv.h"
#include "lib/hash.h"
#include "lib/hex.h"

#define MANGLE_LIMIT		200u	/* longest mangled component */
#define MANGLE_HASH_HEX		32u

static const char hexd[] = "0123456789abcdef";
static const char hexu[] = "0123456789ABCDEF";

static bool mangle_escape(unsigned char c, size_t pos)
{
	if (c < 0x20 || c == 0x7f)
		return true;
	if (c == '%' || c == '^' || c == '{' || c == '}')
		return true;
	/* A leading dot would allow "." and "..", and hide the entry. */
	if (c == '.' && pos == 0)
		return true;
	return false;
}

char *store_mangle(const char *in, size_t in_len, char *out)
{
	size_t o = 0, i;

	if (!in || in_len == 0) {
		strcpy(out, "%-");
		return out;
	}
	for (i = 0; i < in_len; i++) {
		unsigned char c = (unsigned char)in[i];
		size_t need = mangle_escape(c, i) ? 3 : 1;

		if (o + need > MANGLE_LIMIT)
			break;
		if (c == '/') {
			out[o++] = '^';
		} else if (need == 3) {
			out[o++] = '%';
			out[o++] = hexu[c >> 4];
			out[o++] = hexu[c & 15];
		} else {
			out[o++] = (char)c;
		}
	}
	if (i < in_len) {
		/* Too long: keep a prefix and make it unique with a hash of the
		 * whole name.  Cut only at an escape boundary. */
		size_t keep = MANGLE_LIMIT - 2 - MANGLE_HASH_HEX;
		uint64_t h1 = hash_bytes(in, in_len, 0);
		uint64_t h2 = hash_bytes(in, in_len, 0x5bd1e9955bd1e995ULL);

		if (o > keep)
			o = keep;
		if (o >= 1 && out[o - 1] == '%')
			o -= 1;
		else if (o >= 2 && out[o - 2] == '%')
			o -= 2;
		out[o++] = '%';
		out[o++] = '~';
		for (int k = 60; k >= 0; k -= 4)
			out[o++] = hexd[(h1 >> k) & 15];
		for (int k = 60; k >= 0; k -= 4)
			out[o++] = hexd[(h2 >> k) & 15];
	}
	out[o] = '\0';
	return out;
}

int store_unmangle(const char *in, char *out, size_t outlen)
{
	size_t o = 0;

	if (!in || !out || outlen == 0)
		return -EINVAL;
	if (strcmp(in, "%-") == 0) {
		out[0] = '\0';
		return 0;
	}
	for (const char *p = in; *p; p++) {
		char c = *p;

		if (c == '%') {
			if (p[1] == '~') {
				/* Truncated name: "<prefix>...~<hash>". */
				const char *h = p + 2;
				size_t hl = strlen(h);

				if (hl != MANGLE_HASH_HEX)
					return -EINVAL;
				for (size_t k = 0; k < hl; k++)
					if (hex_val(h[k]) < 0)
						return -EINVAL;
				if (o + 4 + hl >= outlen)
					return -ENAMETOOLONG;
				memcpy(out + o, "...~", 4);
				memcpy(out + o + 4, h, hl);
				o += 4 + hl;
				break;
			}
			int a = hex_val(p[1]), b = a < 0 ? -1 : hex_val(p[2]);

			if (a < 0 || b < 0)
				return -EINVAL;
			c = (char)(a << 4 | b);
			p += 2;
		} else if (c == '^') {
			c = '/';
		}
		if (o + 1 >= outlen)
			return -ENAMETOOLONG;
		out[o++] = c;
	}
	out[o] = '\0';
	return (int)o;
}
