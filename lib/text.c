// SPDX-License-Identifier: MIT
/*
 * Text for terminals and other tools (lib/text.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/text.h"

size_t text_utf8_char(const char *str, size_t avail)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char c = avail ? s[0] : 0;
	size_t n;

	if (!c)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > avail)
		return 0;
	for (size_t k = 1; k < n; k++)
		if ((s[k] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xc2 && s[1] < 0xa0) ||		/* C1 controls */
	    (c == 0xe0 && s[1] < 0xa0) ||		/* overlong */
	    (c == 0xed && s[1] > 0x9f) ||		/* surrogates */
	    (c == 0xf0 && s[1] < 0x90) ||		/* overlong */
	    (c == 0xf4 && s[1] > 0x8f))		/* past U+10FFFF */
		return 0;
	return n;
}

int text_utf8_valid(const char *s)
{
	size_t len = strlen(s), i = 0;

	while (i < len) {
		size_t n = text_utf8_char(s + i, len - i);

		if (!n)
			return 0;
		i += n;
	}
	return 1;
}

const char *text_utf8_fix(char *out, size_t outlen, const char *s)
{
	static const char fffd[] = "\xef\xbf\xbd";
	size_t o = 0, len = strlen(s), i = 0;

	if (!outlen)
		return out;
	while (i < len) {
		size_t n = text_utf8_char(s + i, len - i);
		const char *from = n ? s + i : fffd;
		size_t k = n ? n : 3;

		if (o + k >= outlen)
			break;
		memcpy(out + o, from, k);
		o += k;
		i += n ? n : 1;
	}
	out[o] = '\0';
	return out;
}

const char *text_escape(char *out, size_t outlen, const char *s)
{
	size_t o = 0, len = s ? strlen(s) : 0, i = 0;

	if (!outlen)
		return out;
	while (i < len) {
		unsigned char c = (unsigned char)s[i];
		size_t n, el;
		char esc[5];

		/* Printable ASCII, the whole of most names: copied as a run,
		 * without the UTF-8 decoder's call per byte. */
		if (c >= 0x20 && c < 0x7f && c != '\\') {
			size_t j = i + 1;

			while (j < len && (unsigned char)s[j] >= 0x20 &&
			       (unsigned char)s[j] < 0x7f && s[j] != '\\')
				j++;
			if (o + (j - i) >= outlen)
				j = i + (outlen - 1 - o);	/* what fits, as below */
			memcpy(out + o, s + i, j - i);
			o += j - i;
			i = j;
			if (o + 1 >= outlen)
				break;
			continue;
		}
		n = text_utf8_char(s + i, len - i);
		if (n && c >= 0x20 && c != 0x7f && c != '\\') {
			if (o + n >= outlen)
				break;
			memcpy(out + o, s + i, n);
			o += n;
			i += n;
			continue;
		}
		if (c == '\n')
			el = (size_t)snprintf(esc, sizeof(esc), "\\n");
		else if (c == '\t')
			el = (size_t)snprintf(esc, sizeof(esc), "\\t");
		else if (c == '\\')
			el = (size_t)snprintf(esc, sizeof(esc), "\\\\");
		else
			el = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", c);
		if (o + el >= outlen)
			break;
		memcpy(out + o, esc, el);
		o += el;
		i++;
	}
	out[o] = '\0';
	return out;
}

/* One line of text (no '\n') out, broken at spaces to fit. */
static void wrap_line(FILE *f, const char *p, size_t len, unsigned indent)
{
	size_t col = 0;

	while (len) {
		size_t sp = 0, w;

		while (sp < len && p[sp] == ' ')
			sp++;
		for (w = sp; w < len && p[w] != ' '; w++)
			;
		/* the word from p + sp to p + w, after sp spaces */
		if (col && col + w > TEXT_COLUMNS) {
			fprintf(f, "\n%*s", (int)indent, "");
			col = indent;
			p += sp;
			len -= sp;
			w -= sp;
			sp = 0;
		}
		fwrite(p, 1, w, f);
		col += w;
		p += w;
		len -= w;
	}
}

void text_fprintf_wrapped(FILE *f, unsigned indent, const char *fmt, ...)
{
	char buf[4096];
	const char *p = buf;
	va_list ap;

	if (indent > TEXT_COLUMNS / 2)
		indent = TEXT_COLUMNS / 2;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (;;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		wrap_line(f, p, len, indent);
		fputc('\n', f);
		if (!nl || !nl[1])
			break;
		p = nl + 1;
	}
}
