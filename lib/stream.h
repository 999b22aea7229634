/* SPDX-License-Identifier: MIT */
/*
 * Copying a stream (a guest's console) to one or two outputs, line by
 * line to a callback as well.
 */
#ifndef OPVM_STREAM_H
#define OPVM_STREAM_H

/* Copies in to out and (if >= 0) also to out2 until EOF or a read error,
 * retrying EINTR.  A failed or short write to either output is ignored and
 * copying goes on: for a console, a full disk or a closed stdout loses
 * text, and must not stall the guest writing into in.  With line set, each
 * line copied is also handed to line(arg, text): without its '\n' and any
 * '\r', a longer one cut every STREAM_LINE_MAX - 1 bytes (the text is the
 * guest's: bounded here, never trusted by the callee). */
#define STREAM_LINE_MAX	256
void stream_copy(int in, int out, int out2,
		 void (*line)(void *arg, const char *text), void *arg);

#endif /* OPVM_STREAM_H */
