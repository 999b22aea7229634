/* SPDX-License-Identifier: MIT */
/*
 * kmodhash [seconds]: kernel time in a loadable module's text.  Loads the
 * modules listed in /etc/opvm/work-modules (af_alg, algif_hash, wp512:
 * the host's Debian kernel's own .ko files, mkroot.sh), then hashes a
 * buffer with the kernel's Whirlpool (wp512.ko) through an AF_ALG socket
 * for `seconds` (default 4): nearly all of its time is the module's
 * wp512_process_buffer().  Prints "OPVM-TRUTH kmodhash module=wp512
 * bytes=N" (or "... failed=WHAT").
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/if_alg.h>

#include "common.h"

/* finit_module() of each listed file; one already loaded is fine. */
static void load_modules(void)
{
	FILE *f = fopen("/etc/opvm/work-modules", "r");
	char path[512];

	while (f && fgets(path, sizeof(path), f)) {
		int fd;

		path[strcspn(path, "\n")] = '\0';
		fd = path[0] ? open(path, O_RDONLY | O_CLOEXEC) : -1;
		if (fd < 0)
			continue;
		if (syscall(SYS_finit_module, fd, "", 0) && errno != EEXIST)
			fprintf(stderr, "kmodhash: %s: %s\n", path, strerror(errno));
		close(fd);
	}
	if (f)
		fclose(f);
}

int main(int argc, char **argv)
{
	struct sockaddr_alg sa = { .salg_family = AF_ALG, .salg_type = "hash",
				   .salg_name = "wp512" };
	double secs = arg_double(argc, argv, 1, 4.0);
	static char buf[65536];
	unsigned char digest[64];
	uint64_t t0, bytes = 0;
	int s, c;

	load_modules();
	s = socket(AF_ALG, SOCK_SEQPACKET, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) || (c = accept(s, NULL, 0)) < 0) {
		TRUTH("kmodhash module=wp512 failed=%s\n", strerror(errno));
		return 1;
	}
	memset(buf, 0x5a, sizeof(buf));
	t0 = now_ns();
	while (now_ns() - t0 < (uint64_t)(secs * 1e9)) {
		if (send(c, buf, sizeof(buf), MSG_MORE) != (ssize_t)sizeof(buf))
			break;
		bytes += sizeof(buf);
	}
	if (read(c, digest, sizeof(digest)) != (ssize_t)sizeof(digest)) {
		TRUTH("kmodhash module=wp512 failed=digest\n");
		return 1;
	}
	TRUTH("kmodhash module=wp512 bytes=%llu\n", (unsigned long long)bytes);
	return 0;
}
