// SPDX-License-Identifier: MIT
/*
 * Runtime descriptor of the built-in VMM (vmm/kvm/kvm-desc.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/kvm/kvm-desc.h"

#define DESC_MAX_BYTES	4096

static int private_dir(const char *dir, int create)
{
	struct stat st;

	if (create && mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	if (lstat(dir, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return -EPERM;
	return 0;
}

int kvm_desc_path(pid_t pid, int create, char *out, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char dir[256];
	int n, r;

	if (geteuid() == 0)
		n = snprintf(dir, sizeof(dir), "/run/opvm");
	else if (xdg && xdg[0] == '/')
		n = snprintf(dir, sizeof(dir), "%s/opvm", xdg);
	else
		n = snprintf(dir, sizeof(dir), "/tmp/opvm-%u", (unsigned)geteuid());
	if (n < 0 || (size_t)n >= sizeof(dir))
		return -ENAMETOOLONG;
	r = private_dir(dir, create);
	if (r)
		return r;
	n = snprintf(out, len, "%s/vmm-%d", dir, (int)pid);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int kvm_desc_write(const char *path, const struct kvm_desc *d)
{
	char tmp[4200], buf[DESC_MAX_BYTES];
	size_t off = 0;
	int fd, n;

	n = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	off += (size_t)snprintf(buf + off, sizeof(buf) - off, "opvm-vmm 1\npid %d\nvcpus %u\n",
				(int)d->pid, d->nr_vcpus);
	for (unsigned i = 0; i < d->nr_ram && i < KVM_DESC_MAX_RAM; i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off,
					"ram 0x%" PRIx64 " 0x%" PRIx64 " 0x%" PRIx64 "\n",
					d->ram[i].gpa, d->ram[i].len, d->ram[i].hva);
	if (d->switch_pa)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off,
					"switch 0x%" PRIx64 " %u %u %u\n", d->switch_pa,
					d->switch_stride, d->switch_entries, d->switch_nr);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, off) != (ssize_t)off) {
		int e = errno ? errno : EIO;

		close(fd);
		unlink(tmp);
		return -e;
	}
	close(fd);
	if (rename(tmp, path)) {
		int e = errno;

		unlink(tmp);
		return -e;
	}
	return 0;
}

static int parse_line(char *line, struct kvm_desc *d)
{
	unsigned long long a, b, c;
	unsigned x, y, z;
	int pid;

	if (!strncmp(line, "opvm-vmm ", 9))
		return strcmp(line, "opvm-vmm 1") ? -EINVAL : 0;
	if (sscanf(line, "pid %d", &pid) == 1) {
		d->pid = pid;
		return pid > 0 ? 0 : -EINVAL;
	}
	if (sscanf(line, "vcpus %u", &x) == 1) {
		d->nr_vcpus = x;
		return x && x <= 1024 ? 0 : -EINVAL;
	}
	if (sscanf(line, "ram %llx %llx %llx", &a, &b, &c) == 3) {
		if (d->nr_ram == KVM_DESC_MAX_RAM || !b)
			return -EINVAL;
		d->ram[d->nr_ram].gpa = a;
		d->ram[d->nr_ram].len = b;
		d->ram[d->nr_ram].hva = c;
		d->nr_ram++;
		return 0;
	}
	if (sscanf(line, "switch %llx %u %u %u", &a, &x, &y, &z) == 4) {
		d->switch_pa = a;
		d->switch_stride = x;
		d->switch_entries = y;
		d->switch_nr = z;
		return 0;
	}
	return -EINVAL;
}

int kvm_desc_read(const char *path, struct kvm_desc *d)
{
	char buf[DESC_MAX_BYTES + 1], *line, *save = NULL;
	struct stat st;
	ssize_t n;
	int fd, r = 0;

	memset(d, 0, sizeof(*d));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_uid != geteuid() || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EPERM;
	}
	n = read(fd, buf, DESC_MAX_BYTES);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line && !r; line = strtok_r(NULL, "\n", &save))
		r = parse_line(line, d);
	if (!r && (!d->pid || !d->nr_vcpus || !d->nr_ram))
		r = -EINVAL;
	return r;
}
