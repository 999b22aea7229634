// SPDX-License-Identifier: MIT
/*
 * The "perf" sampler backend (vmm/perf/perf-sampler.h): host perf on another
 * process's vCPU threads, joined with the guest's task-switch rings.
 *
 * Threads: the collector's thread calls the ops and set_switch_rings(); one
 * drain thread owns the perf rings, the timeline, the pending queues and
 * the sample rings (their only producer).  The switch-ring geometry goes
 * from the first to the second through a sequence-counted set of atomics.
 *
 * One pass of the drain thread when a perf ring holds WAKE_SAMPLES samples,
 * or after DRAIN_MS (DRAIN_BUSY_MS while the guest's switch rings fill
 * fast, DRAIN_IDLE_MS while there are none and no Python reads): the cost of a pass (a thread wake-up, the ring reads) is spread
 * over many samples, and no switch ring is overwritten before it is read:
 *   1. move every new perf record into its vCPU's pending queue (guest-mode
 *      samples, with their time converted to guest TSC);
 *   2. take the guest TSC "now" and refresh the timeline: every sample
 *      read in 1 was taken before now;
 *   3. resolve each vCPU's queue in order: a sample after the timeline's
 *      horizon stays for the next pass (bounded: after PEND_WAIT_NS it
 *      is filed without a task and counted late).
 * While Python frames are read (perf-python.h), light passes between them
 * do 1 alone, soon after each sample (wait_signalled()).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "guest-kmod/opvm_proto.h"
#include "lib/channel.h"
#include "lib/ring.h"
#include "lib/sample.h"
#include "lib/fs.h"
#include "vmm/guest/guestmem.h"
#include "vmm/kvm/kvm-desc.h"
#include "vmm/perf/guest-tsc.h"
#include "vmm/perf/perf-python.h"
#include "vmm/perf/perf-sampler.h"
#include "vmm/guest/timeline.h"

#define RING_PAGES	32		/* data pages per vCPU: 128 KiB, ~3 s at 1 kHz */
/* A pass at least every DRAIN_MS or WAKE_SAMPLES samples a vCPU: that also
 * bounds the samples taken after the last read of the switch rings when a
 * guest powers itself off (its RAM goes with QEMU: they stay unnamed,
 * counted late).  500 ms / 256 left up to 189 such samples a run. */
#define DRAIN_MS	100
#define DRAIN_BUSY_MS	50		/* when a pass found a ring 1/8 rewritten */
/* No switch rings to outrun and no Python reads: a pass only moves samples
 * on, and the collector takes them once a second.  500 ms instead of
 * DRAIN_MS: a fifth of the wake-ups, the drain thread's whole cost for a
 * guest without opvm.ko (37 % of its sampler's CPU at 19 Hz). */
#define DRAIN_IDLE_MS	500
#define WAKE_SAMPLES	64		/* perf records of 40 bytes */
#define PEND_MAX	8192u		/* samples waiting per vCPU (power of two) */
#define PEND_WAIT_NS	1600000000ull	/* waiting for the rings to move */
#define TSC_REREAD_NS	1000000000ull	/* KVM's tsc-offset re-read period */
#define DEBUGFS		"/sys/kernel/debug"
#define CHAN_BUF	65536

struct pend {
	uint64_t ip, gtsc;
	uint8_t cpl;
	uint64_t read_ns;		/* CLOCK_MONOTONIC of the pass that read it */
	uint32_t py;			/* its Python read (perf-python.h), 0 */
};

struct pvcpu {
	pid_t tid;
	int fd;				/* perf event, -1 */
	void *base;			/* mmap: header page + data */
	size_t data_size;
	int time_zero;			/* 1: the page's time conversion works */
	char dbg[300];			/* kvm/PID-FD/vcpuN, "" unknown */
	struct guest_tsc tsc;		/* KVM's offset and scaling */
	struct ring *ring;
	struct pend *pend;		/* PEND_MAX, circular */
	uint32_t pfirst, pcount;
};

struct psamp {
	struct sampler s;
	unsigned nr;
	pid_t pid;
	struct pvcpu *v;
	int kernel, user;
	char event_name[32];
	struct guestmem *mem;
	struct timeline *tl;
	uint32_t tl_nr, tl_entries;
	bool busy;			/* switch rings filling fast: pass often */
	int clock_raw;			/* events timed on CLOCK_MONOTONIC_RAW */
	/* calibration for clock_raw: a base pair and the newest pair */
	uint64_t cal_tsc0, cal_ns0, cal_tsc, cal_ns;
	double cal_rate;		/* TSC ticks per ns */
	uint64_t last_tsc_read;
	int tsc_known;
	/* switch rings, published by set_switch_rings() */
	atomic_uint_fast64_t sw_seq;
	atomic_uint_fast64_t sw_pa, sw_geom, sw_nr;
	uint64_t sw_seen;
	pthread_mutex_t sw_lock;
	char *desc_path;		/* built-in VMM descriptor, or NULL */
	int chan_in, chan_out;		/* its channel copy -> the collector, -1 */
	uint8_t *chan_buf;		/* bytes read from chan_in not yet sent */
	size_t chan_have, chan_sent;
	struct timespec desc_mtime;
	uint64_t desc_checked;
	pthread_t thread;
	int started, running;
	atomic_int stop, state;
	char error[256];
	/* statistics (drain thread writes, others read) */
	_Atomic uint64_t guest_user, guest_kernel, host_mode, lost, throttle,
		filtered, attributed, unattributed, no_timeline, late,
		ring_full, pushed, records, drain_cpu_ns;
	struct timeline_stats tls;	/* copied under tls_lock */
	pthread_mutex_t tls_lock;
	/* Python frames (perf-python.h): names go to the sink's table */
	struct perf_python *py;
	struct pynames *names;
	bool py_on;			/* reads on: a pass soon after each sample */
	bool py_cur;			/* ... named by the current-task pointers */
	int sig_fd;			/* the drain thread's SIGIO (signalfd), -1 */
	bool py_wake;			/* each overflow signals sig_fd (O_ASYNC) */
	bool py_dense;			/* samples closer than PERF_PYTHON_GAP_MS */
	uint64_t last_full;		/* CLOCK_MONOTONIC of the last whole pass */
	uint64_t last_pass;		/* CLOCK_MONOTONIC of the last pass, light too */
};

/* ---- time --------------------------------------------------------------- */

uint64_t perf_sampler_time_to_tsc(uint64_t time_ns, uint64_t time_zero,
				  uint32_t time_mult, uint16_t time_shift)
{
	/* The inverse of the page's tsc -> time formula (see
	 * perf_event_mmap_page), split so that nothing overflows. */
	uint64_t t = time_ns - time_zero, quot, rem;

	if (!time_mult)
		return 0;
	quot = t / time_mult;
	rem = t % time_mult;
	return (quot << time_shift) + (rem << time_shift) / time_mult;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A (TSC, CLOCK_MONOTONIC_RAW) pair taken as close together as we can. */
static void cal_pair(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 5; i++) {
		uint64_t a = __rdtsc(), c = clock_ns(CLOCK_MONOTONIC_RAW), b = __rdtsc();

		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = c;
		}
	}
}

static void cal_update(struct psamp *p)
{
	cal_pair(&p->cal_tsc, &p->cal_ns);
	if (p->cal_ns > p->cal_ns0 + 10000000)
		p->cal_rate = (double)(p->cal_tsc - p->cal_tsc0) /
			      (double)(p->cal_ns - p->cal_ns0);
}

static uint64_t sample_host_tsc(const struct psamp *p, const struct pvcpu *v,
				uint64_t time)
{
	if (!p->clock_raw) {
		const struct perf_event_mmap_page *pg = v->base;

		return perf_sampler_time_to_tsc(time, pg->time_zero, pg->time_mult,
						pg->time_shift);
	}
	double d = (double)(int64_t)(time - p->cal_ns) * p->cal_rate;

	return p->cal_tsc + (uint64_t)(int64_t)(d < 0 ? d - 0.5 : d + 0.5);
}

/* ---- KVM's per-vCPU TSC offset and scaling (debugfs) --------------------- */

static int read_num(const char *dir, const char *name, long long *out)
{
	char path[400], buf[64];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	n = fs_read_text(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	errno = 0;
	*out = strtoll(buf, NULL, 0);
	return errno ? -errno : 0;
}

/* kvm/PID-FD for pid under root (the first VM of that process). */
static int find_kvm_dir(const char *root, pid_t pid, char *out, size_t len)
{
	char kvm[256], pfx[32];
	struct dirent *de;
	DIR *d;
	int found = -ENOENT;

	snprintf(kvm, sizeof(kvm), "%s/kvm", root);
	d = opendir(kvm);
	if (!d)
		return -errno;
	snprintf(pfx, sizeof(pfx), "%d-", (int)pid);
	while ((de = readdir(d))) {
		if (!strncmp(de->d_name, pfx, strlen(pfx))) {
			int n = snprintf(out, len, "%s/%s", kvm, de->d_name);

			found = n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
			break;
		}
	}
	closedir(d);
	return found;
}

static void tsc_read_offsets(struct psamp *p)
{
	for (unsigned i = 0; i < p->nr; i++) {
		struct pvcpu *v = &p->v[i];
		long long off = 0, ratio = 0, frac = 0;

		if (!v->dbg[0] || read_num(v->dbg, "tsc-offset", &off))
			continue;
		v->tsc.offset = off;
		if (!read_num(v->dbg, "tsc-scaling-ratio", &ratio) &&
		    !read_num(v->dbg, "tsc-scaling-ratio-frac-bits", &frac) &&
		    frac > 0 && frac < 64 && ratio != (1ll << frac)) {
			v->tsc.ratio = (uint64_t)ratio;
			v->tsc.frac = (unsigned)frac;
		}
	}
}

/* Finds the vCPUs' debugfs directories, mounting debugfs if needed.
 * Without them guest TSC = host TSC is assumed (and said in the info). */
static void tsc_setup(struct psamp *p, const char *where)
{
	char vm[256];

	if (where && !where[0])
		return;
	if (!where) {
		if (access(DEBUGFS "/kvm", F_OK) &&
		    mount("debugfs", DEBUGFS, "debugfs", 0, NULL) && errno != EBUSY)
			return;
		where = DEBUGFS;
	}
	if (find_kvm_dir(where, p->pid, vm, sizeof(vm)))
		return;
	for (unsigned i = 0; i < p->nr; i++) {
		int n = snprintf(p->v[i].dbg, sizeof(p->v[i].dbg), "%s/vcpu%u", vm, i);

		if (n < 0 || (size_t)n >= sizeof(p->v[i].dbg) || access(p->v[i].dbg, F_OK))
			p->v[i].dbg[0] = '\0';
		else
			p->tsc_known = 1;
	}
	tsc_read_offsets(p);
}

/* ---- opening the events --------------------------------------------------- */

static int sys_perf_event_open(struct perf_event_attr *a, pid_t tid)
{
	return (int)syscall(SYS_perf_event_open, a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

int perf_sampler_mediated_pmu(void)
{
	char c = 'N';
	int fd = open("/sys/module/kvm/parameters/enable_mediated_pmu", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (read(fd, &c, 1) != 1)
		c = 'N';
	close(fd);
	return c == 'Y' || c == 'y' || c == '1';
}

static void open_error(const struct perf_sampler_config *cfg, unsigned i, int e,
		       char *err, size_t errlen)
{
	const char *ev = cfg->event_name ? cfg->event_name : "the event";
	bool hw = cfg->attr.type == PERF_TYPE_HARDWARE || cfg->attr.type == PERF_TYPE_RAW ||
		  cfg->attr.type == PERF_TYPE_HW_CACHE;

	if (e == EOPNOTSUPP && hw && perf_sampler_mediated_pmu())
		snprintf(err, errlen, "KVM's mediated vPMU is on (kvm.enable_mediated_pmu=Y): "
			 "the host cannot count %s in guests while VMs with a mediated vPMU "
			 "exist; reload kvm with enable_mediated_pmu=0 (or boot with "
			 "kvm.enable_mediated_pmu=0), or sample with -e cpu-clock", ev);
	else if ((e == ENOENT || e == ENODEV || e == EOPNOTSUPP) && hw)
		snprintf(err, errlen, "%s cannot sample guest code on this host (%s): it needs "
			 "a hardware PMU that sees guest mode; use -e cpu-clock", ev, strerror(e));
	else if (e == EACCES || e == EPERM)
		snprintf(err, errlen, "perf refused to sample vCPU thread %d (%s): run as root, "
			 "or lower /proc/sys/kernel/perf_event_paranoid to -1",
			 (int)cfg->vcpu_tids[i], strerror(e));
	else if (e == ESRCH)
		snprintf(err, errlen, "vCPU %u's thread %d has gone: is the guest still running?",
			 i, (int)cfg->vcpu_tids[i]);
	else
		snprintf(err, errlen, "cannot open %s on vCPU %u (thread %d): %s", ev, i,
			 (int)cfg->vcpu_tids[i], strerror(e));
}

static int vcpu_open(struct psamp *p, const struct perf_sampler_config *cfg,
		     unsigned i, int clock_raw)
{
	struct pvcpu *v = &p->v[i];
	struct perf_event_attr a = cfg->attr;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	a.size = sizeof(a);
	a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
	a.disabled = 1;
	a.exclude_host = 1;
	a.exclude_guest = 0;
	a.exclude_hv = 1;
	/* CPL filtering is ours (by the record's misc): the exclude_user/
	 * exclude_kernel bits would apply to host modes on some kernels. */
	a.exclude_user = 0;
	a.exclude_kernel = 0;
	a.watermark = 1;
	a.wakeup_watermark = WAKE_SAMPLES * 40;
	if (clock_raw) {
		a.use_clockid = 1;
		a.clockid = CLOCK_MONOTONIC_RAW;
	}
	v->fd = sys_perf_event_open(&a, v->tid);
	if (v->fd < 0)
		return -errno;
	v->data_size = RING_PAGES * page;
	v->base = mmap(NULL, page + v->data_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (v->base == MAP_FAILED) {
		int e = errno;

		v->base = NULL;
		close(v->fd);
		v->fd = -1;
		return -e;
	}
	v->time_zero = ((struct perf_event_mmap_page *)v->base)->cap_user_time_zero;
	return 0;
}

static void vcpu_close(struct pvcpu *v)
{
	if (v->base)
		munmap(v->base, (size_t)sysconf(_SC_PAGESIZE) + v->data_size);
	v->base = NULL;
	if (v->fd >= 0)
		close(v->fd);
	v->fd = -1;
}

/* Opens every vCPU's event.  The perf clock is TSC-convertible through the
 * mmap page only where the kernel says so (cap_user_time_zero: a native,
 * stable TSC sched_clock); otherwise reopen on CLOCK_MONOTONIC_RAW, which
 * we calibrate against the TSC ourselves. */
static int open_all(struct psamp *p, const struct perf_sampler_config *cfg,
		    char *err, size_t errlen)
{
	for (int pass = 0; pass < 2; pass++) {
		bool all_tz = true;

		p->clock_raw = pass;
		for (unsigned i = 0; i < p->nr; i++) {
			int r = vcpu_open(p, cfg, i, pass);

			if (r) {
				open_error(cfg, i, -r, err, errlen);
				return r;
			}
			all_tz &= p->v[i].time_zero;
		}
		if (all_tz || pass)
			return 0;
		for (unsigned i = 0; i < p->nr; i++)
			vcpu_close(&p->v[i]);
	}
	return 0;
}

/* ---- the drain thread ------------------------------------------------------ */

/* Picks up a new switch-ring geometry published by set_switch_rings(). */
static void tl_update(struct psamp *p)
{
	uint64_t seq = atomic_load(&p->sw_seq), pa, geom, nr;

	if (seq == p->sw_seen || (seq & 1))
		return;
	pa = atomic_load(&p->sw_pa);
	geom = atomic_load(&p->sw_geom);
	nr = atomic_load(&p->sw_nr);
	if (atomic_load(&p->sw_seq) != seq)
		return;
	p->sw_seen = seq;
	timeline_free(p->tl);
	p->tl = NULL;
	if (pa && p->mem) {
		p->tl = timeline_new((uint32_t)nr, pa, (uint32_t)(geom >> 32), (uint32_t)geom);
		p->tl_nr = (uint32_t)nr;
		p->tl_entries = (uint32_t)geom;
	}
}

/* Files sample e with its task t (NULL: none) and, if it had a Python
 * read, the frames read when the task at the read's end (t_end) says they
 * are its. */
static void push(struct psamp *p, struct pvcpu *v, unsigned idx, const struct pend *e,
		 const struct timeline_task *t, const struct timeline_task *t_end)
{
	struct opvm_sample s = { .rip = e->ip, .vcpu = idx, .cpl = e->cpl };
	uint64_t w[PYFRAMES_MAX_DEPTH];

	if (e->py) {
		uint32_t tgid;

		s.nr_chain = (uint8_t)perf_python_chain(p->py, idx, e->py, t, t_end, w, &tgid);
		s.nr_py = s.nr_chain;
		s.chain = s.nr_chain ? w : NULL;
		if (s.nr_chain && tgid && !t) {
			/* whose frames these are, for the filing to confirm */
			s.flags = OPVM_SAMPLE_PYTASK;
			s.slot_tgid = tgid;
		}
	}

	if (t) {
		s.cr3 = t->cr3;
		s.slot_cr3 = t->cr3;
		s.slot_tid = t->pid;
		s.slot_tgid = t->tgid;
		s.flags = OPVM_SAMPLE_SLOT |
			  ((t->flags & OPVM_SLOT_KTHREAD) ? OPVM_SAMPLE_KTHREAD : 0);
	}
	if (ring_push(v->ring, &s))
		p->ring_full++;
	else
		p->pushed++;
}

/* The task of sample e (timeline_lookup()'s answer) and, for one with a
 * Python read, the task at the read's end into *t_end: *end 1 found, 0
 * not, -EAGAIN not yet. */
static int lookup(struct psamp *p, unsigned idx, const struct pend *e,
		  struct timeline_task *t, struct timeline_task *t_end, int *end)
{
	int r = idx < p->tl_nr ? timeline_lookup(p->tl, idx, e->gtsc, t) : -ENOENT;

	*end = 0;
	if (!r && e->py) {
		int r2 = timeline_lookup(p->tl, idx, perf_python_read_end(p->py, idx, e->py),
					 t_end);

		*end = r2 == -EAGAIN ? -EAGAIN : !r2;
	}
	return r;
}

/* A sample's wait is counted from the pass that read it, not from when
 * the one before it was filed: a queue of waiting samples drains as fast
 * as it fills (counted from the previous one's filing, a channel-less
 * guest's samples went out one per wait, windows late).  In time, not in
 * passes: passes come DRAIN_BUSY_MS to DRAIN_IDLE_MS apart. */
static bool pend_waits(const struct psamp *p, const struct pend *e, bool final)
{
	return !final && p->last_full - e->read_ns < PEND_WAIT_NS;
}

/* Files vCPU idx's waiting samples that the timeline can now answer. */
static void resolve(struct psamp *p, unsigned idx, bool final)
{
	struct pvcpu *v = &p->v[idx];

	while (v->pcount) {
		struct pend *e = &v->pend[v->pfirst];
		struct timeline_task t, te;
		int r = -ENOENT, end;

		if (!p->tl) {
			/* The rings come with HELLO, which may still be on its
			 * way (it waits in the guest until the channel is
			 * read): wait as for a late sample, then file it.  Not
			 * while the kernel's current-task pointers name the
			 * tasks (no module seen; a read is held until its
			 * sample goes, and PERF_PYTHON_HELD of them last a
			 * fraction of PEND_WAIT_NS). */
			if (!p->py_cur && pend_waits(p, e, final))
				return;
			p->no_timeline++;
			push(p, v, idx, e, NULL, NULL);
		} else {
			r = lookup(p, idx, e, &t, &te, &end);
			if ((r == -EAGAIN || end == -EAGAIN) && pend_waits(p, e, final))
				return;	/* in order: the rest is newer */
			if (!r)
				p->attributed++;
			else if (r == -EAGAIN)
				p->late++;
			else
				p->unattributed++;
			push(p, v, idx, e, r ? NULL : &t, end == 1 ? &te : NULL);
		}
		v->pfirst = (v->pfirst + 1) & (PEND_MAX - 1);
		v->pcount--;
	}
}

static void pend_add(struct psamp *p, unsigned idx, uint64_t ip, uint64_t gtsc, uint8_t cpl,
		     uint32_t py)
{
	struct pvcpu *v = &p->v[idx];
	struct pend *e;

	if (v->pcount == PEND_MAX) {
		/* Waited through a whole queue: file the oldest without a task. */
		struct pend old = v->pend[v->pfirst];

		if (p->tl)
			p->late++;
		else
			p->no_timeline++;
		push(p, v, idx, &old, NULL, NULL);
		v->pfirst = (v->pfirst + 1) & (PEND_MAX - 1);
		v->pcount--;
	}
	e = &v->pend[(v->pfirst + v->pcount++) & (PEND_MAX - 1)];
	e->ip = ip;
	e->gtsc = gtsc;
	e->cpl = cpl;
	e->read_ns = p->last_pass;
	e->py = py;
}

/* Nanoseconds of ticks of the host TSC (saturating: for a bound only). */
static uint64_t tsc_ns(const struct psamp *p, const struct pvcpu *v, uint64_t ticks)
{
	const struct perf_event_mmap_page *pg = v->base;

	if (ticks >> 32)
		return UINT64_MAX;
	if (!p->clock_raw)
		return (uint64_t)(((unsigned __int128)ticks * pg->time_mult) >> pg->time_shift);
	return p->cal_rate > 0 ? (uint64_t)((double)ticks / p->cal_rate) : UINT64_MAX;
}

/* A guest-user sample of vCPU idx taken at host TSC htsc, just read: its
 * Python frames now, if it is recent enough for them to be its own. */
static uint32_t python_read(struct psamp *p, unsigned idx, uint64_t htsc)
{
	const struct pvcpu *v = &p->v[idx];
	uint64_t now = __rdtsc();

	if (now > htsc && tsc_ns(p, v, now - htsc) > PERF_PYTHON_MAX_AGE_NS) {
		perf_python_stale(p->py);
		return 0;
	}
	return perf_python_read(p->py, p->mem, p->names, idx, &v->tsc);
}

/* One sample record (IP, TID, TIME, CPU). */
static void on_sample(struct psamp *p, unsigned idx, uint16_t misc, const uint64_t *w,
		      size_t words)
{
	struct pvcpu *v = &p->v[idx];
	uint16_t mode = misc & PERF_RECORD_MISC_CPUMODE_MASK;
	uint64_t htsc;
	uint8_t cpl;

	if (words < 4)
		return;
	if (mode == PERF_RECORD_MISC_GUEST_USER) {
		p->guest_user++;
		cpl = 3;
		if (!p->user) {
			p->filtered++;
			return;
		}
	} else if (mode == PERF_RECORD_MISC_GUEST_KERNEL) {
		p->guest_kernel++;
		cpl = 0;
		if (!p->kernel) {
			p->filtered++;
			return;
		}
	} else {
		p->host_mode++;
		return;
	}
	htsc = sample_host_tsc(p, v, w[2]);
	pend_add(p, idx, w[0], guest_tsc(&v->tsc, htsc), cpl,
		 cpl == 3 && p->py_on ? python_read(p, idx, htsc) : 0);
}

/* Reads every record of vCPU idx's perf ring. */
static void drain_vcpu(struct psamp *p, unsigned idx)
{
	struct pvcpu *v = &p->v[idx];
	struct perf_event_mmap_page *pg = v->base;
	const uint8_t *data = (const uint8_t *)v->base + pg->data_offset;
	uint64_t size = pg->data_size, head, tail = pg->data_tail;
	uint64_t buf[64];

	if (!size)
		return;
	head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	while (tail < head) {
		struct perf_event_header h;
		uint64_t off = tail % size;

		memcpy(&h, data + off, sizeof(h));	/* headers are 8-aligned: no wrap */
		if (h.size < sizeof(h) || h.size > head - tail)
			break;
		if (h.size <= sizeof(buf)) {
			uint64_t first = size - off < h.size ? size - off : h.size;

			memcpy(buf, data + off, first);
			memcpy((uint8_t *)buf + first, data, h.size - first);
			p->records++;
			if (h.type == PERF_RECORD_SAMPLE)
				on_sample(p, idx, h.misc, buf + 1, (h.size - sizeof(h)) / 8);
			else if (h.type == PERF_RECORD_LOST && h.size >= 24)
				p->lost += buf[2];
			else if (h.type == PERF_RECORD_THROTTLE)
				p->throttle++;
		}
		tail += h.size;
	}
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
}

/* The guest TSC now, as low as any vCPU's (conservative for the horizon). */
static uint64_t guest_now(const struct psamp *p)
{
	uint64_t h = __rdtsc(), now = UINT64_MAX;

	for (unsigned i = 0; i < p->nr; i++) {
		uint64_t g = guest_tsc(&p->v[i].tsc, h);

		if (g < now)
			now = g;
	}
	return now;
}

static uint64_t thread_cpu_ns(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* A built-in VMM publishes its guest's switch rings in its descriptor once
 * the guest said HELLO (and again after a reboot): look twice a second. */
static void desc_poll(struct psamp *p)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	struct kvm_desc d;
	struct stat st;

	if (!p->desc_path || now - p->desc_checked < 500000000ull)
		return;
	p->desc_checked = now;
	if (stat(p->desc_path, &st) ||
	    (st.st_mtim.tv_sec == p->desc_mtime.tv_sec &&
	     st.st_mtim.tv_nsec == p->desc_mtime.tv_nsec))
		return;
	p->desc_mtime = st.st_mtim;
	if (!kvm_desc_read(p->desc_path, &d) && d.pid == p->pid)
		perf_sampler_set_switch_rings(&p->s, d.switch_pa, d.switch_stride,
					      d.switch_entries, d.switch_nr);
}

/* Forwards what the built-in VMM appended to its channel copy, without
 * blocking: what the socket does not take now goes next pass. */
static void chan_tail(struct psamp *p)
{
	if (p->chan_in < 0)
		return;
	for (int i = 0; i < 16; i++) {
		ssize_t n;

		if (p->chan_sent == p->chan_have) {
			n = read(p->chan_in, p->chan_buf, CHAN_BUF);
			if (n <= 0)
				return;
			p->chan_have = (size_t)n;
			p->chan_sent = 0;
		}
		n = write(p->chan_out, p->chan_buf + p->chan_sent, p->chan_have - p->chan_sent);
		if (n <= 0)
			return;
		p->chan_sent += (size_t)n;
	}
}

/*
 * While Python reads are on, each guest-user sample is read within about
 * PERF_PYTHON_GAP_MS of being taken.  The perf ring's own wake-up comes
 * every WAKE_SAMPLES samples (fixed when the event was opened), so each
 * overflow also signals the drain thread: an event with O_ASYNC and an
 * owner gets SIGIO at every overflow, here routed to the drain thread,
 * which blocks it and waits on a signalfd.  A wake-up a sample, not a
 * millisecond: at 19 Hz, 19 a second instead of 1000.  Off (and the
 * signals with it) while the reads are off.
 */
static int fds_async(struct psamp *p, bool on)
{
	struct f_owner_ex owner = { .type = F_OWNER_TID, .pid = (pid_t)syscall(SYS_gettid) };
	int err = 0;

	for (unsigned i = 0; i < p->nr; i++) {
		int fd = p->v[i].fd, fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;

		if (fl < 0 || (on && fcntl(fd, F_SETOWN_EX, &owner) < 0) ||
		    fcntl(fd, F_SETFL, on ? fl | O_ASYNC : fl & ~O_ASYNC) < 0)
			err = -EIO;
	}
	return err;
}

static void py_wake_set(struct psamp *p, bool on)
{
	if (p->sig_fd < 0 || on == p->py_wake)
		return;
	if (fds_async(p, on) && on) {
		/* no signals: wait_next() polls every PERF_PYTHON_GAP_MS */
		fds_async(p, false);
		close(p->sig_fd);
		p->sig_fd = -1;
		return;
	}
	p->py_wake = on;
	p->py_dense = false;
}

/* Python reads are on when a CPython process is known, the collector
 * takes names, and either the slots and the switch rings (to confirm each
 * read) or, without the module, the kernel's current-task pointers are. */
static void python_take(struct psamp *p)
{
	int how = p->py && p->names && p->mem ? perf_python_take(p->py, p->mem) :
						  PERF_PYTHON_OFF;

	p->py_cur = how == PERF_PYTHON_CURRENT;
	p->py_on = p->py_cur || (how == PERF_PYTHON_SLOT && p->tl);
	py_wake_set(p, p->py_on);
}

/* The drain thread's SIGIO, blocked and read from a signalfd (-1: none,
 * then Python reads poll). */
static void sig_setup(struct psamp *p)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGIO);
	p->sig_fd = -1;
	if (!pthread_sigmask(SIG_BLOCK, &set, NULL))
		p->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

static void sig_close(struct psamp *p)
{
	py_wake_set(p, false);
	if (p->sig_fd >= 0)
		close(p->sig_fd);
	p->sig_fd = -1;
}

/* Takes the pending SIGIO (not queued: one stands for any number of
 * overflows): true when a sample came since the last take. */
static bool sig_take(struct psamp *p)
{
	struct signalfd_siginfo si;

	return p->sig_fd >= 0 && read(p->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si);
}

static void drain_pass(struct psamp *p, bool final)
{
	p->last_full = p->last_pass = clock_ns(CLOCK_MONOTONIC);
	python_take(p);
	desc_poll(p);
	chan_tail(p);
	if (p->clock_raw)
		cal_update(p);
	if (p->tsc_known && clock_ns(CLOCK_MONOTONIC) - p->last_tsc_read > TSC_REREAD_NS) {
		tsc_read_offsets(p);
		p->last_tsc_read = clock_ns(CLOCK_MONOTONIC);
	}
	tl_update(p);
	for (unsigned i = 0; i < p->nr; i++)
		drain_vcpu(p, i);
	if (p->tl) {
		uint64_t before = p->tls.switches + p->tls.overrun + p->tls.torn;

		timeline_refresh(p->tl, p->mem, guest_now(p));
		pthread_mutex_lock(&p->tls_lock);
		timeline_get_stats(p->tl, &p->tls);
		pthread_mutex_unlock(&p->tls_lock);
		/* Busy: an eighth of the rings' room used since the last pass. */
		p->busy = (p->tls.switches + p->tls.overrun + p->tls.torn - before) * 8 >
			  (uint64_t)p->tl_entries * p->tl_nr;
	}
	for (unsigned i = 0; i < p->nr; i++)
		resolve(p, i, final);
	if (p->py)
		perf_python_publish_stats(p->py);
}

static unsigned full_period_ms(const struct psamp *p)
{
	if (p->busy)
		return DRAIN_BUSY_MS;
	return p->tl || p->py_on ? DRAIN_MS : DRAIN_IDLE_MS;
}

static uint64_t full_period_ns(const struct psamp *p)
{
	return full_period_ms(p) * 1000000ull;
}

/* While Python reads are on, between whole passes: the new samples only,
 * each read as soon as it is seen (filed at the next whole pass). */
static bool light_pass(struct psamp *p)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);

	if (!p->py_on || now - p->last_full >= full_period_ns(p))
		return false;
	p->last_pass = now;
	python_take(p);
	for (unsigned i = 0; i < p->nr; i++)
		drain_vcpu(p, i);
	return true;
}

/* Milliseconds (rounded up) until the next whole pass is due. */
static int full_due_ms(const struct psamp *p)
{
	uint64_t gone = clock_ns(CLOCK_MONOTONIC) - p->last_full, period = full_period_ns(p);

	return gone >= period ? 0 : (int)((period - gone + 999999) / 1000000);
}

/*
 * Python reads on, each overflow signalled: waits for the next sample or
 * the next whole pass.  While samples come closer than PERF_PYTHON_GAP_MS
 * (dense: many vCPUs, a high rate), the signal is not waited on before
 * the gap since the last pass is over, and then one pass reads all that
 * came: no more wake-ups than a 1 ms poll, however many samples.
 */
static void wait_signalled(struct psamp *p, struct pollfd *pf)
{
	const uint64_t gap = PERF_PYTHON_GAP_MS * 1000000ull;
	uint64_t now = clock_ns(CLOCK_MONOTONIC);

	if (p->py_dense) {
		if (now - p->last_pass < gap) {
			struct timespec ts = { 0, (long)(gap - (now - p->last_pass)) };

			ppoll(pf, p->nr, &ts, NULL);
		}
		if (sig_take(p))
			return;		/* still dense */
		p->py_dense = false;
	}
	pf[p->nr] = (struct pollfd){ .fd = p->sig_fd, .events = POLLIN };
	poll(pf, p->nr + 1, full_due_ms(p));
	p->py_dense = sig_take(p) && clock_ns(CLOCK_MONOTONIC) - p->last_pass < gap;
}

/* Until the next pass: a ring's WAKE_SAMPLES, the pass period, or (Python
 * reads on) the next sample. */
static void wait_next(struct psamp *p, struct pollfd *pf)
{
	if (!pf) {
		usleep(DRAIN_BUSY_MS * 1000);
		return;
	}
	for (unsigned i = 0; i < p->nr; i++)
		pf[i] = (struct pollfd){ .fd = p->v[i].fd, .events = POLLIN };
	if (p->py_wake)
		wait_signalled(p, pf);
	else
		poll(pf, p->nr, p->py_on ? PERF_PYTHON_GAP_MS : (int)full_period_ms(p));
}

static bool vcpu_gone(const struct psamp *p, const struct pollfd *pf)
{
	for (unsigned i = 0; pf && i < p->nr; i++)
		if (pf[i].revents & POLLHUP)
			return true;
	return false;
}

static void *drain_main(void *arg)
{
	struct psamp *p = arg;
	struct pollfd *pf = calloc(p->nr + 1, sizeof(*pf));	/* + sig_fd */
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d", (int)p->pid);
	sig_setup(p);
	while (!atomic_load(&p->stop)) {
		uint64_t c0 = thread_cpu_ns();
		bool hup;

		wait_next(p, pf);
		/* A vCPU thread that exits reports POLLHUP: the guest is gone
		 * (QEMU does not end vCPU threads of a running guest).  At
		 * once, not after light passes: POLLHUP ends every poll at
		 * once, which spun them until the next whole pass was due. */
		hup = vcpu_gone(p, pf);
		if (!hup && light_pass(p)) {
			p->drain_cpu_ns += thread_cpu_ns() - c0;
			continue;
		}
		drain_pass(p, false);
		p->drain_cpu_ns += thread_cpu_ns() - c0;
		if (hup || access(path, F_OK)) {
			atomic_store(&p->state, SAMPLER_TARGET_GONE);
			break;
		}
	}
	/* Everything read so far is filed, the last ones as well as can be;
	 * no signal outlives the thread it was routed to. */
	drain_pass(p, true);
	sig_close(p);
	free(pf);
	return NULL;
}

/* ---- ops -------------------------------------------------------------------- */

static int ps_start(struct sampler *s, const struct sampler_sink *sink)
{
	struct psamp *p = s->priv;
	int err;

	if (p->started)
		return -EALREADY;
	if (sink->nr_rings < p->nr)
		return -EINVAL;
	for (unsigned i = 0; i < p->nr; i++) {
		if (!sink->rings[i])
			return -EINVAL;
		p->v[i].ring = sink->rings[i];
	}
	p->names = sink->py;
	if (p->clock_raw) {
		/* a base pair for the TSC rate; refined at every pass */
		cal_pair(&p->cal_tsc0, &p->cal_ns0);
		usleep(20000);
		cal_update(p);
	}
	p->last_tsc_read = clock_ns(CLOCK_MONOTONIC);
	for (unsigned i = 0; i < p->nr; i++)
		if (ioctl(p->v[i].fd, PERF_EVENT_IOC_ENABLE, 0) < 0)
			return -errno;
	err = -pthread_create(&p->thread, NULL, drain_main, p);
	if (err)
		return err;
	p->started = p->running = 1;
	return 0;
}

static void ps_stop(struct sampler *s)
{
	struct psamp *p = s->priv;

	if (!p->running)
		return;
	atomic_store(&p->stop, 1);
	pthread_join(p->thread, NULL);
	p->running = 0;
	for (unsigned i = 0; i < p->nr; i++)
		if (p->v[i].fd >= 0)
			ioctl(p->v[i].fd, PERF_EVENT_IOC_DISABLE, 0);
}

static int ps_status(struct sampler *s)
{
	struct psamp *p = s->priv;

	return atomic_load(&p->state);
}

static const char *ps_last_error(struct sampler *s)
{
	struct psamp *p = s->priv;

	return p->error[0] ? p->error : NULL;
}

static void ps_get_stats(struct sampler *s, struct sampler_stats *out)
{
	struct psamp *p = s->priv;

	memset(out, 0, sizeof(*out));
	out->ticks = p->records;
	out->samples = p->pushed;
	out->throttled = p->throttle;
	out->cost_ns_total = p->drain_cpu_ns;
	out->exits = 0;		/* the guest is never stopped */
	if (p->py) {
		struct perf_python_stats ps;

		perf_python_get_stats(p->py, &ps);
		out->py_samples = ps.py.samples;
		out->py_kept = ps.kept;
		out->py_changed = ps.py.fr.changed;
		out->py_switched = ps.switched + ps.unconfirmed;
		out->py_stale = ps.stale;
		out->py_bytes = ps.py.fr.bytes;
		out->py_cost_ns = ps.cost_ns;
		out->cur_bad = ps.task_bad;	/* no slot: pointers naming no task */
	}
}

static void __attribute__((format(printf, 4, 5)))
bprintf(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + *off, len - *off, fmt, ap);
	va_end(ap);
	if (n > 0)
		*off += (size_t)n < len - *off ? (size_t)n : len - *off - 1;
}

/* The Python reads (perf-python.h), when a sample was in CPython. */
static void describe_python(struct psamp *p, char *buf, size_t len, size_t *off)
{
	struct perf_python_stats ps;
	double reads;

	perf_python_get_stats(p->py, &ps);
	if (!ps.py.samples && !ps.py.spaces)
		return;
	reads = ps.reads ? (double)ps.reads : 1.0;
	bprintf(buf, len, off, "  python: %llu of %llu samples in CPython processes filed "
		"with Python\n  frames, read right after the sample (%llu reads, %.1f us and "
		"%.0f B each);\n  dropped: %llu frames changed under the read, %llu samples "
		"whose task\n  switched before the read ended, %llu with no task; not read: "
		"%llu seen\n  too late, %llu slots busy, %llu reads waiting\n",
		(unsigned long long)ps.kept, (unsigned long long)ps.py.samples,
		(unsigned long long)ps.reads, (double)ps.cost_ns / 1e3 / reads,
		(double)ps.py.fr.bytes / reads, (unsigned long long)ps.py.fr.changed,
		(unsigned long long)ps.switched, (unsigned long long)ps.unconfirmed,
		(unsigned long long)ps.stale, (unsigned long long)ps.slot_busy,
		(unsigned long long)ps.held_full);
	if (ps.task_bad)
		bprintf(buf, len, off, "  %llu current-task pointers named no task\n",
			(unsigned long long)ps.task_bad);
}

static void ps_describe(struct sampler *s, char *buf, size_t len)
{
	struct psamp *p = s->priv;
	struct perf_sampler_info in;
	size_t off = 0;

#define OUT(...) bprintf(buf, len, &off, __VA_ARGS__)
	if (!len)
		return;
	buf[0] = '\0';
	perf_sampler_get_info(s, &in);
	OUT("  sampler perf, event %s; the guest was never stopped\n", p->event_name);
	OUT("  perf samples: %llu guest user, %llu guest kernel; %llu host-mode not "
	    "filed;\n  lost %llu, throttled %llu, ring full %llu\n",
	    (unsigned long long)in.guest_user, (unsigned long long)in.guest_kernel,
	    (unsigned long long)in.host_mode, (unsigned long long)in.lost,
	    (unsigned long long)in.throttle, (unsigned long long)in.ring_full);
	OUT("  tasks by time from the guest's switch rings: %llu named, %llu in no "
	    "known\n  interval, %llu late, %llu before any rings (%llu switches read)\n",
	    (unsigned long long)in.attributed, (unsigned long long)in.unattributed,
	    (unsigned long long)in.late, (unsigned long long)in.no_timeline,
	    (unsigned long long)in.switches);
	OUT("  opvm's drain thread: %.1f us CPU per sample\n",
	    in.drain_cpu_ns / 1e3 / (double)(in.guest_user + in.guest_kernel + in.host_mode ?
					      in.guest_user + in.guest_kernel + in.host_mode : 1));
	OUT("  time: perf clock by %s; guest TSC %s\n", in.time_source,
	    in.tsc_offset_known ? "from KVM's\n  tsc-offset and scaling (debugfs)" :
	    "assumed\n  = host TSC (no KVM debugfs entry for its vCPUs)");
	if (p->py)
		describe_python(p, buf, len, &off);
	if (!in.attributed && in.no_timeline)
		OUT("  note: the guest module announced no task-switch rings, so user "
		    "samples\n  are shared per vCPU, not per process\n");
#undef OUT
}

static void ps_free(struct sampler *s)
{
	struct psamp *p;

	if (!s)
		return;
	p = s->priv;
	ps_stop(s);
	for (unsigned i = 0; p->v && i < p->nr; i++) {
		vcpu_close(&p->v[i]);
		free(p->v[i].pend);
	}
	free(p->v);
	free(p->desc_path);
	free(p->chan_buf);
	if (p->chan_in >= 0)
		close(p->chan_in);
	if (p->chan_out >= 0)
		close(p->chan_out);
	timeline_free(p->tl);
	perf_python_free(p->py);
	guestmem_close(p->mem);
	pthread_mutex_destroy(&p->tls_lock);
	pthread_mutex_destroy(&p->sw_lock);
	free(p);
}

/* The guest module's HELLO, from the collector: where its switch rings are. */
static void ps_guest_hello(struct sampler *s, const struct chan_hello *h)
{
	struct psamp *p = s->priv;

	perf_sampler_set_switch_rings(s, h->switch_pa, h->switch_stride, h->switch_entries,
				      h->nr_cpus);
	if (p->py)
		perf_python_set_slots(p->py, h->slot_pa, h->slot_size, h->nr_cpus);
}

/* Introspection found the guest CPUs' current-task pointers: without the
 * module's slots, they name the task whose Python frames are read. */
static void ps_guest_current(struct sampler *s, const struct kcurrent_info *ci)
{
	struct psamp *p = s->priv;

	if (p->py)
		perf_python_set_current(p->py, ci);
}

/* The collector's CPython processes: their frames are read at each user
 * sample in them (perf-python.h). */
static void ps_guest_python(struct sampler *s, const struct sampler_python *set)
{
	struct psamp *p = s->priv;

	if (p->py)
		perf_python_publish(p->py, set);
}

static const struct sampler_ops perf_sampler_ops = {
	.name = "perf",
	.start = ps_start,
	.stop = ps_stop,
	.status = ps_status,
	.last_error = ps_last_error,
	.get_stats = ps_get_stats,
	.guest_hello = ps_guest_hello,
	.guest_current = ps_guest_current,
	.guest_python = ps_guest_python,
	.describe = ps_describe,
	.free = ps_free,
};

int perf_sampler_set_chan_copy(struct sampler *s, int file_fd, int sock_fd)
{
	struct psamp *p = s->priv;

	if (p->started || p->chan_in >= 0 || !(p->chan_buf = malloc(CHAN_BUF))) {
		close(file_fd);
		close(sock_fd);
		return p->chan_buf ? -EALREADY : -ENOMEM;
	}
	p->chan_in = file_fd;
	p->chan_out = sock_fd;
	return 0;
}

int perf_sampler_set_switch_rings(struct sampler *s, uint64_t switch_pa,
				  uint32_t stride, uint32_t entries, uint32_t nr)
{
	struct psamp *p = s->priv;

	if (nr > p->nr)
		nr = p->nr;
	if (switch_pa && timeline_check_geometry(nr, switch_pa, stride, entries))
		return -EINVAL;
	/* Writers (the collector's guest_hello, the drain thread's look at a
	 * built-in VMM's descriptor) take turns; the drain thread reads
	 * without a lock: odd while changing. */
	pthread_mutex_lock(&p->sw_lock);
	atomic_fetch_add(&p->sw_seq, 1);
	atomic_store(&p->sw_pa, switch_pa);
	atomic_store(&p->sw_geom, ((uint64_t)stride << 32) | entries);
	atomic_store(&p->sw_nr, nr);
	atomic_fetch_add(&p->sw_seq, 1);
	pthread_mutex_unlock(&p->sw_lock);
	return 0;
}

struct guestmem *perf_sampler_guestmem(struct sampler *s)
{
	struct psamp *p = s ? s->priv : NULL;

	return p ? p->mem : NULL;
}

void perf_sampler_get_info(struct sampler *s, struct perf_sampler_info *out)
{
	struct psamp *p = s->priv;
	struct timeline_stats st;

	memset(out, 0, sizeof(*out));
	out->guest_user = p->guest_user;
	out->guest_kernel = p->guest_kernel;
	out->host_mode = p->host_mode;
	out->lost = p->lost;
	out->throttle = p->throttle;
	out->filtered = p->filtered;
	out->attributed = p->attributed;
	out->unattributed = p->unattributed;
	out->no_timeline = p->no_timeline;
	out->late = p->late;
	out->ring_full = p->ring_full;
	out->drain_cpu_ns = p->drain_cpu_ns;
	out->time_source = p->clock_raw ? "clock-monotonic-raw" : "perf-time-zero";
	out->tsc_offset_known = p->tsc_known;
	out->tsc_offset = p->nr ? p->v[0].tsc.offset : 0;
	pthread_mutex_lock(&p->tls_lock);
	st = p->tls;
	pthread_mutex_unlock(&p->tls_lock);
	out->switches = st.switches;
	out->switch_overrun = st.overrun;
	out->switch_torn = st.torn;
}

struct sampler *perf_sampler_new(const struct perf_sampler_config *cfg,
				 char *err, size_t errlen)
{
	struct psamp *p;
	int r;

	if (!cfg->nr_vcpus || cfg->nr_vcpus > PERF_SAMPLER_MAX_VCPUS || !cfg->vcpu_tids ||
	    cfg->pid <= 0) {
		snprintf(err, errlen, "bad perf sampler configuration");
		guestmem_close(cfg->mem);
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		guestmem_close(cfg->mem);
		return NULL;
	}
	pthread_mutex_init(&p->tls_lock, NULL);
	pthread_mutex_init(&p->sw_lock, NULL);
	p->chan_in = p->chan_out = p->sig_fd = -1;
	p->s.ops = &perf_sampler_ops;
	p->s.priv = p;
	p->nr = cfg->nr_vcpus;
	p->pid = cfg->pid;
	snprintf(p->event_name, sizeof(p->event_name), "%s",
		 cfg->event_name ? cfg->event_name : "?");
	p->kernel = cfg->kernel;
	p->user = cfg->user;
	p->mem = cfg->mem;
	if (cfg->desc_path && !(p->desc_path = strdup(cfg->desc_path)))
		goto fail_nomem;
	p->v = calloc(p->nr, sizeof(*p->v));
	if (!p->v)
		goto fail_nomem;
	for (unsigned i = 0; i < p->nr; i++) {
		p->v[i].fd = -1;
		p->v[i].tid = cfg->vcpu_tids[i];
		p->v[i].pend = calloc(PEND_MAX, sizeof(struct pend));
		if (!p->v[i].pend)
			goto fail_nomem;
	}
	r = open_all(p, cfg, err, errlen);
	if (r) {
		ps_free(&p->s);
		errno = -r;
		return NULL;
	}
	tsc_setup(p, cfg->kvm_debugfs);
	/* without guest RAM there is nothing to read the frames from */
	if (p->mem && !(p->py = perf_python_new(p->nr)))
		goto fail_nomem;
	return &p->s;
fail_nomem:
	snprintf(err, errlen, "out of memory");
	ps_free(&p->s);
	errno = ENOMEM;
	return NULL;
}
