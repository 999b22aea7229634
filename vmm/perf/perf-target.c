// SPDX-License-Identifier: MIT
/*
 * Where a perf sampler's vCPUs are (vmm/perf/perf-sampler.h): a QEMU found by
 * its QMP socket or its libvirt monitor, or a built-in VMM (`opvm run --vmm=kvm`) found by its
 * process id and runtime descriptor (vmm/kvm/kvm-desc.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/procfs.h"
#include "vmm/guest/guestmem.h"
#include "vmm/kvm/kvm-desc.h"
#include "vmm/perf/perf-sampler.h"
#include "vmm/guest/qmp.h"

#define QMP_MS	5000

int perf_target_qmp_kvm(struct qmp *q)
{
	json_t *ret = NULL;
	int r = qmp_execute(q, "query-kvm", NULL, &ret, NULL, 0, QMP_MS);

	if (r)
		return r;
	r = json_is_true(json_object_get(ret, "enabled")) ? 1 : 0;
	json_decref(ret);
	return r;
}

/* Whether every tids[i] is a thread of pid; 0, or -EPERM with err set. */
static int threads_of(pid_t pid, const pid_t *tids, unsigned n, char *err, size_t errlen)
{
	for (unsigned i = 0; i < n; i++) {
		if (procfs_thread_of(pid, tids[i]) == 1)
			continue;
		snprintf(err, errlen, "vCPU thread %d is not a thread of QEMU process %d "
			 "(any more): refusing to sample another process", (int)tids[i], (int)pid);
		return -EPERM;
	}
	return 0;
}

struct sampler *perf_target_threads(struct perf_sampler_config *cfg, pid_t pid,
				    const pid_t *tids, unsigned n, struct guestmem *mem,
				    char *err, size_t errlen)
{
	struct sampler *s;

	cfg->mem = mem;
	if (!n || n > PERF_SAMPLER_MAX_VCPUS) {
		snprintf(err, errlen, "the monitor gave no vCPU threads");
		guestmem_close(mem);
		errno = EPROTO;
		return NULL;
	}
	if (threads_of(pid, tids, n, err, errlen)) {
		guestmem_close(mem);
		errno = EPERM;
		return NULL;
	}
	cfg->pid = pid;
	cfg->nr_vcpus = n;
	cfg->vcpu_tids = tids;
	s = perf_sampler_new(cfg, err, errlen);
	/* A thread that ended between the check and perf_event_open() may
	 * have left its id to another process's: the events opened are on
	 * pid's threads only if every id is still one of them. */
	if (s && threads_of(pid, tids, n, err, errlen)) {
		s->ops->free(s);
		errno = EPERM;
		return NULL;
	}
	return s;
}

struct sampler *perf_target_monitor(struct perf_sampler_config *cfg, pid_t pid,
				    const pid_t *tids, unsigned n, guestmem_hmp_fn hmp,
				    void *arg, char *err, size_t errlen)
{
	struct guestmem *mem = n ? guestmem_open(pid) : NULL;

	/* Guest RAM for the switch rings; without it samples still come, with
	 * no task (the summary says so). */
	if (mem && guestmem_add_monitor_ranges(mem, hmp, arg)) {
		guestmem_close(mem);
		mem = NULL;
	}
	return perf_target_threads(cfg, pid, tids, n, mem, err, errlen);
}

/* The vCPU threads of a built-in VMM, by their names. */
static int vmm_threads(pid_t pid, pid_t *tids, unsigned nr)
{
	char path[64], comm[32];
	struct dirent *de;
	unsigned found = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -errno;
	for (unsigned i = 0; i < nr; i++)
		tids[i] = 0;
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);
		size_t pl = strlen(KVM_DESC_VCPU_COMM);
		ssize_t n;
		unsigned idx;
		int fd;

		if (tid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (n <= 0)
			continue;
		comm[n] = '\0';
		comm[strcspn(comm, "\n")] = '\0';
		if (strncmp(comm, KVM_DESC_VCPU_COMM, pl) || sscanf(comm + pl, "%u", &idx) != 1 ||
		    idx >= nr || tids[idx])
			continue;
		tids[idx] = tid;
		found++;
	}
	closedir(d);
	return found == nr ? 0 : -ENOENT;
}

/* The channel copy as a socket for the collector (the sampler forwards). */
static void vmm_chan(struct sampler *s, const char *desc_path, int *chan_fd)
{
	char path[4200];
	int sv[2], fd;
	struct stat st;

	*chan_fd = -1;
	if (snprintf(path, sizeof(path), "%s.chan", desc_path) >= (int)sizeof(path))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	if (fstat(fd, &st) || st.st_uid != geteuid() || !S_ISREG(st.st_mode) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		close(fd);
		return;
	}
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	if (perf_sampler_set_chan_copy(s, fd, sv[1])) {
		close(sv[0]);
		return;
	}
	*chan_fd = sv[0];
}

struct sampler *perf_target_vmm(struct perf_sampler_config *cfg, pid_t pid,
				char *desc_path, size_t desc_len, int *chan_fd,
				char *err, size_t errlen)
{
	pid_t tids[PERF_SAMPLER_MAX_VCPUS];
	struct kvm_desc d;
	struct sampler *s;
	int r;

	cfg->mem = NULL;
	r = kvm_desc_path(pid, 0, desc_path, desc_len);
	if (!r)
		r = kvm_desc_read(desc_path, &d);
	if (r || d.pid != pid || d.nr_vcpus > PERF_SAMPLER_MAX_VCPUS) {
		snprintf(err, errlen, "process %d publishes no built-in VMM descriptor (%s): is it "
			 "`opvm run --vmm=kvm`, run by this user?", (int)pid,
			 r ? strerror(-r) : "it names another process");
		errno = r ? -r : EINVAL;
		return NULL;
	}
	r = vmm_threads(pid, tids, d.nr_vcpus);
	if (r) {
		snprintf(err, errlen, "process %d has not all of its %u vCPU threads (%s*) running",
			 (int)pid, d.nr_vcpus, KVM_DESC_VCPU_COMM);
		errno = -r;
		return NULL;
	}
	cfg->mem = guestmem_open(pid);
	for (unsigned i = 0; cfg->mem && i < d.nr_ram; i++) {
		if (guestmem_add_range(cfg->mem, d.ram[i].gpa, d.ram[i].len, d.ram[i].hva)) {
			guestmem_close(cfg->mem);
			cfg->mem = NULL;
		}
	}
	cfg->pid = pid;
	cfg->nr_vcpus = d.nr_vcpus;
	cfg->vcpu_tids = tids;
	cfg->desc_path = desc_path;
	s = perf_sampler_new(cfg, err, errlen);
	*chan_fd = -1;
	if (!s)
		return NULL;
	if (d.switch_pa)
		perf_sampler_set_switch_rings(s, d.switch_pa, d.switch_stride, d.switch_entries,
					      d.switch_nr);
	vmm_chan(s, desc_path, chan_fd);
	return s;
}
