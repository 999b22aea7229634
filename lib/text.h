/* SPDX-License-Identifier: MIT */
/*
 * Text for terminals and for other tools: guest strings escaped for a
 * line of text, UTF-8 checked and mended for JSON and protobuf, and
 * paragraphs wrapped at the terminal's width.
 */
#ifndef OPVM_TEXT_H
#define OPVM_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Copies the NUL-terminated s into out[outlen] for text output: bytes
 * that would break a line or a column (newline, tab), drive a terminal
 * (other controls, DEL, C1) or are not UTF-8 become \n, \t, \xNN, and a
 * backslash becomes \\; valid UTF-8 text is kept.  Cut at outlen, never
 * inside an escape or a character.  For every string that came from a
 * guest (or a file a guest wrote).  Returns out. */
const char *text_escape(char *out, size_t outlen, const char *s);

/* Length of the UTF-8 character at s (at most avail bytes): 1 for ASCII
 * but NUL, 2-4 for a valid multibyte character that is not a C1 control,
 * 0 for anything else (overlongs, surrogates, truncated). */
size_t text_utf8_char(const char *s, size_t avail);
/* 1 if the NUL-terminated s is UTF-8 throughout (text_utf8_char()), else 0:
 * JSON and protobuf strings must be. */
int text_utf8_valid(const char *s);

/* Copies s into out[outlen] as UTF-8: each byte text_utf8_char() refuses
 * becomes U+FFFD, everything else (controls too) is kept; cut at outlen,
 * never inside a character.  For bytes that name something (a guest's
 * -name) and must stay one string in every output, JSON and Prometheus
 * included; text output still escapes it (text_escape()).  Returns
 * out. */
const char *text_utf8_fix(char *out, size_t outlen, const char *s);

/* Terminal output fits this many columns (reports, summaries, help). */
#define TEXT_COLUMNS	80

/* Prints fmt as one paragraph word-wrapped at TEXT_COLUMNS: lines break at
 * spaces, continuation lines start with indent spaces, a '\n' in the text
 * ends a line.  A word longer than a line (a long path) is kept whole, on a
 * line of its own.  Ends with a newline. */
void text_fprintf_wrapped(FILE *f, unsigned indent, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* OPVM_TEXT_H */
