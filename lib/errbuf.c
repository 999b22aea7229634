// SPDX-License-Identifier: MIT
/*
 * Errors into a caller's buffer (lib/errbuf.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "lib/errbuf.h"

void errbuf_set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}
