// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * opvm-relay: copies records from /dev/opvm to the virtio-serial port.
 *
 * In Linux 6.1 a virtio-serial port has no write_iter, so the module cannot
 * kernel_write() to it; this tiny static program, started by the guest's init
 * after opvm.ko is loaded, does the copying.  /dev/opvm's read() returns
 * whole records only.
 *
 * Host sessions: the port reports POLLHUP while no host end is connected.
 * Records read meanwhile are dropped (no host would know what they refer
 * to), and when a host connects the relay writes "sync" to /dev/opvm: the
 * module starts again with HELLO and a walk of everything that exists, so
 * every host session, first or later, starts from a complete picture.  A
 * host already connected when the relay starts gets what the module has
 * buffered since it was loaded (HELLO first).  The port says only whether
 * a host is connected now: a host that leaves and the next that comes
 * before the guest handled the first's close (a paused guest, or one a
 * loaded host gives little CPU) look like one session.  So each host asks
 * for HELLO as it connects (OPVM_REQ_HELLO): the first ask of a session
 * the relay saw start is answered already, a later one starts a new
 * session as above (requests_read()).
 *
 * With each host session it also sends the kernel's symbols (KSYMS
 * records from /proc/kallsyms, ksyms_step()) and the files the host asks
 * for (FETCH), written into SOURCE so the module numbers them and holds
 * them back while its ring is busy.  The symbols are made in a thread of
 * their own, paced (ksyms_main()): reading /proc/kallsyms and packing it
 * cost the test guest ~300 M instructions, and done at once they took half
 * of a CPU-bound program's one vCPU for the first second of every session.
 * And only when the host needs them: it says so after each HELLO
 * (OPVM_REQ_KSYMS: all, the modules' only, or none, ksyms_decide()); a
 * host that never says gets all of them OPVM_KSYMS_WAIT_MS after the
 * session started, as hosts before that word did.
 *
 * Usage: opvm-relay [SOURCE [PORT]]
 *   SOURCE defaults to /dev/opvm; PORT defaults to the virtio port named
 *   org.opvm.0 (found through /sys/class/virtio-ports/ * /name).
 *
 * SIGTERM/SIGINT: stop after draining what the module has buffered (the
 * buffer counts as drained once a read would block for 300 ms), and in any
 * case 3 s later: the guest keeps producing records, and the host may have
 * stopped reading.
 *
 * Built with: gcc -static -O2 -o opvm-relay opvm-relay.c
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "opvm_proto.h"

#define PORT_NAME	"org.opvm.0"
#define BUF_SIZE	(256 * 1024)
/* Kernel symbols sent at most (Debian's 6.1 has ~60k text symbols). */
#define KSYMS_CAP	(1u << 20)
/* Records a job writes into /dev/opvm per step. */
#define JOB_BATCH	32
/* Bytes of /proc/kallsyms per read(): ~25 lines (ksyms_start()). */
#define KSYMS_READ	1024
/* How soon the symbols thread tries again when the module's ring is busy. */
#define KSYMS_RETRY_MS	10
/*
 * The symbols thread's CPU budget: 1/KSYMS_CPU_SHARE of the time since the
 * relay started, plus all the time the guest's CPUs were idle meanwhile,
 * less what its jobs used.  A busy guest loses at most that share (0.1 %);
 * a guest that was idle before the host came sends its symbols at once,
 * and a relay told to stop sends the rest at full speed.  The budget runs
 * from the relay's start, not the session's: counted per session, a guest
 * busy on every CPU (Debian 12 under TCG: ~1 s of CPU for its kallsyms)
 * sent nothing in a 20 s session, and 0 % of its kernel samples had names.
 * The budget alone bounds the cost: the thread runs as SCHED_BATCH, not
 * SCHED_IDLE, which a guest busy on every CPU never lets run.  Without a
 * budget, under the test guest's fork+exec+exit loop the thread took two
 * thirds of the vCPU; a 1/50 budget still showed as 2.4 % of a CPU-bound
 * loop and a 1/400 one as +0.4 % on the ping-pong's 1.5 % (icount).
 */
#define KSYMS_CPU_SHARE	1000
/* How long a trickle of records (a read under 16 KiB) gathers before the
 * next read (relay_loop()). */
#define TRICKLE_US	50000
/* FETCH requests queued; more are dropped (the host times them out). */
#define FETCH_QUEUE	16
#define FILE_CHUNK	(OPVM_REC_MAX - sizeof(struct opvm_rec_file_data))
/*
 * Files go out at most this fast (bytes/s; 0: no limit): a transfer must
 * not take the host's or the guest's CPU from sampling in bursts (under
 * TCG on a 2-core host, an unpaced 50 MiB at ~40 MB/s cut the sampler's
 * rate by a third while it lasted).  OPVM_RELAY_FILE_RATE overrides.
 */
#define FILE_RATE	(8u << 20)
/*
 * Debug files (FETCH flagged OPVM_FETCH_F_DEBUG: libc's is 4 MB, an
 * interpreter's tens of MB) are paced by CPU as well, like the symbols
 * job and at its share: a token bucket filled at 1/DEBUG_CPU_SHARE of the
 * time plus the guest's idle CPU time, at most DEBUG_CPU_BURST_NS, emptied
 * by the CPU time the job's own reads and writes take and the relay's
 * forwarding of its records to the port (a record that costs more than is
 * left leaves a debt the next windows pay; debug_fill()).  A guest
 * busy on every CPU gives them 0.1 % of one CPU; an idle one, what it does
 * not use.  The relay's time is not the whole cost (the module's ring
 * and virtio's interrupts land on whatever runs): at 1/100, and with a
 * first fill of 5 ms that let libc's whole debug file out at once,
 * kmod-overhead-debug measured switch-attached 3.34 % and cpu-attached
 * 2.67 % (icount) against 1.46 % and 0.1 % with no file sent.
 */
#define DEBUG_CPU_SHARE	1000
#define DEBUG_CPU_BURST_NS	5000000ll
#define PACE_WINDOW_NS	100000000ll	/* the pace's window: files_paced() */

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	if (sig == SIGALRM) {
		stopping = 2;		/* hard stop */
	} else if (!stopping) {
		stopping = 1;
		alarm(3);
	}
}

static int find_port(char *out, size_t outlen)
{
	DIR *d = opendir("/sys/class/virtio-ports");
	struct dirent *de;
	int ret = -ENOENT;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char path[512], name[64];
		ssize_t n;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name",
			 de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (n <= 0)
			continue;
		name[n] = '\0';
		name[strcspn(name, "\n")] = '\0';
		if (strcmp(name, PORT_NAME) == 0) {
			snprintf(out, outlen, "/dev/%s", de->d_name);
			ret = 0;
			break;
		}
	}
	closedir(d);
	return ret;
}

/*
 * Kernel symbols for the host: /proc/kallsyms's text symbols (and where
 * the ORC tables are: opvm_ksyms_table()) packed into
 * KSYMS records (opvm_proto.h) and written into /dev/opvm, which numbers
 * them and refuses them (EAGAIN) while its ring is over half full or waits
 * for a HELLO: the job then pauses and the loop retries later.  As root
 * the relay reads real addresses unless kptr_restrict is 2: then every
 * address is 0, no symbol is sent and KSYMS_END says RESTRICTED.
 */
struct ksyms_job {
	FILE *f;		/* NULL: idle */
	int modules_only;	/* vmlinux's lines skipped (an older opvm.ko) */
	int done;		/* KSYMS_END built */
	unsigned long long nr;	/* symbols sent */
	unsigned int flags;	/* OPVM_KSYMS_* */
	int have_line;		/* line[] read but not packed yet */
	char line[512];
	char rbuf[KSYMS_READ];	/* stdio's buffer for /proc/kallsyms */
	size_t len;		/* bytes of rec.r waiting to be written, 0: none */
	union {
		struct opvm_rec_ksyms k;
		struct opvm_rec_ksyms_end e;
		char buf[OPVM_REC_MAX];
	} rec;
};

static void ksyms_stop(struct ksyms_job *j)
{
	if (j->f)
		fclose(j->f);
	j->f = NULL;
}

static void ksyms_start(struct ksyms_job *j)
{
	ksyms_stop(j);
	memset(j, 0, sizeof(*j));
	j->f = fopen("/proc/kallsyms", "re");
	if (!j->f) {
		fprintf(stderr, "opvm-relay: /proc/kallsyms: %s: the host gets no kernel symbols\n",
			strerror(errno));
		return;
	}
	/*
	 * 1 KiB per read(): the kernel formats each read()'s lines without a
	 * preemption point, so a guest task waking up waits for the one under
	 * way (4 KiB of lines took ~200 us under TCG) at any priority; and
	 * each read() is a system call and a seq_file restart (128-byte
	 * reads made ~30,000 of them for the test guest's 3.9 MB).
	 */
	setvbuf(j->f, j->rbuf, _IOFBF, sizeof(j->rbuf));
}

static void rec_finish(struct opvm_rec_hdr *h, unsigned type, size_t len)
{
	size_t padded = (len + OPVM_REC_ALIGN - 1) & ~(size_t)(OPVM_REC_ALIGN - 1);

	memset((char *)h + len, 0, padded - len);
	h->magic = OPVM_PROTO_MAGIC;
	h->type = (opvm_u16)type;
	h->len = (opvm_u32)padded;
	h->seq = 0;		/* the module numbers it */
	h->reserved = 0;
}

/*
 * The hexadecimal address at the start of a kallsyms line; *end after it.
 * By hand: glibc's strtoull was the relay's costliest function in a
 * profile of the guest (locale, sign and base handling for 50,000 lines).
 */
static unsigned long long ksyms_hex(const char *s, char **end)
{
	unsigned long long v = 0;
	const char *p = s;
	int i;

	for (i = 0; i < 16; i++, p++) {
		unsigned int c = (unsigned char)*p, d;

		if (c - '0' < 10)
			d = c - '0';
		else if ((c | 0x20) - 'a' < 6)
			d = (c | 0x20) - 'a' + 10;
		else
			break;
		v = v << 4 | d;
	}
	*end = (char *)p;
	return v;
}

/*
 * Parses "ADDR TYPE NAME[\t[MODULE]]".  Returns 1 for a symbol to send (a
 * text symbol, or one of opvm_ksyms_table()'s), 0 to skip the line.
 */
static int relay_ksyms_parse(char *line, unsigned long long *addr, char *type,
			     char **name, const char **mod, struct ksyms_job *j)
{
	char *end, *tab, *nl;

	*addr = ksyms_hex(line, &end);
	if (end == line || end[0] != ' ' || !end[1] || end[2] != ' ')
		return 0;
	*type = end[1];
	*name = end + 3;
	nl = strchr(*name, '\n');
	if (nl)
		*nl = '\0';
	*mod = "";
	tab = strchr(*name, '\t');
	if (tab) {
		*tab = '\0';
		if (tab[1] == '[' && tab[strlen(tab + 1)] == ']') {
			tab[strlen(tab + 1)] = '\0';
			*mod = tab + 2;
		}
	}
	if (!**name || strlen(*name) > OPVM_KSYM_NAME_MAX || strlen(*mod) >= OPVM_MODNAME_LEN)
		return 0;
	/* text, and where vmlinux's ORC tables are (kernel stacks) */
	if (!strchr("tTwW", *type) &&
	    ((*mod)[0] || !strchr("rRdDbB", *type) || opvm_ksyms_table(*name, strlen(*name)) < 0))
		return 0;
	if (!*addr) {
		j->flags |= OPVM_KSYMS_RESTRICTED;
		return 0;
	}
	return 1;
}

/*
 * A quick look at the type letter: most of /proc/kallsyms's lines are data
 * symbols the host does not need, skipped before any parsing or copying.
 */
static int ksyms_wanted(const char *line)
{
	const char *sp = strchr(line, ' ');

	return sp && sp[1] && strchr("tTwWrRdDbB", sp[1]);
}

/* Builds the next KSYMS record (or KSYMS_END at the end) into j->rec. */
static void ksyms_build(struct ksyms_job *j)
{
	struct opvm_rec_ksyms *k = &j->rec.k;
	unsigned long used = sizeof(*k);

	memset(k, 0, sizeof(*k));
	while (j->nr + k->nr < KSYMS_CAP) {
		unsigned long long addr;
		const char *mod;
		char type, *name, copy[sizeof(j->line)];

		if (!j->have_line && !fgets(j->line, sizeof(j->line), j->f))
			break;
		j->have_line = 1;
		if (!ksyms_wanted(j->line)) {
			j->have_line = 0;
			continue;
		}
		memcpy(copy, j->line, strlen(j->line) + 1);
		if (!relay_ksyms_parse(copy, &addr, &type, &name, &mod, j) ||
		    (j->modules_only && !mod[0])) {
			j->have_line = 0;
			continue;
		}
		if (k->nr && strncmp(k->module, mod, sizeof(k->module)))
			break;	/* the line starts the next record */
		if (!k->nr)
			strncpy(k->module, mod, sizeof(k->module) - 1);
		if (opvm_ksyms_add(k, &used, addr, type, name, strlen(name)))
			break;	/* full: the line starts the next record */
		j->have_line = 0;
	}
	if (k->nr) {
		j->nr += k->nr;
		rec_finish(&k->hdr, OPVM_REC_KSYMS, used);
		j->len = k->hdr.len;
		return;
	}
	if (j->nr >= KSYMS_CAP)
		j->flags |= OPVM_KSYMS_TRUNCATED;
	if (j->modules_only)
		j->flags |= OPVM_KSYMS_MODULES_ONLY;
	memset(&j->rec.e, 0, sizeof(j->rec.e));
	j->rec.e.nr_syms = j->nr;
	j->rec.e.flags = j->flags;
	rec_finish(&j->rec.e.hdr, OPVM_REC_KSYMS_END, sizeof(j->rec.e));
	j->len = j->rec.e.hdr.len;
	j->done = 1;
}

/*
 * kptr_restrict hid every address: ask opvm.ko to send its own walk of the
 * symbols ("ksym"), which reaches the host only.  Returns 1 to try again
 * later; 0 when done: the module took it (the job is over) or refused it
 * (an older module: the RESTRICTED KSYMS_END in j->rec goes out instead).
 */
static int ksyms_hand_over(struct ksyms_job *j, int dev)
{
	if (write(dev, "ksym", 4) == 4) {
		j->len = 0;
		ksyms_stop(j);
		return 0;
	}
	if (errno == EAGAIN || errno == EINTR)
		return 1;
	j->flags &= ~OPVM_KSYMS_RESTRICTED;	/* asked once */
	return 0;
}

/*
 * One record into the module (the budget is checked between two).  Returns
 * 1 while the job has more to send (j->len set: the ring refused it), 0
 * once it is finished or idle.
 */
static int ksyms_step(struct ksyms_job *j, int dev)
{
	if (j->f) {
		if (!j->len && !j->done)
			ksyms_build(j);
		if (!j->len) {
			ksyms_stop(j);
			return 0;
		}
		if (j->done && !j->nr && (j->flags & OPVM_KSYMS_RESTRICTED)) {
			if (ksyms_hand_over(j, dev))
				return 1;	/* not taken yet: later */
			if (!j->f)
				return 0;	/* opvm.ko sends them */
		}
		if (write(dev, j->rec.buf, j->len) != (ssize_t)j->len) {
			if (errno == EAGAIN || errno == EINTR)
				return 1;	/* the ring is busy: later */
			fprintf(stderr, "opvm-relay: kernel symbols into the module: %s\n",
				strerror(errno));
			ksyms_stop(j);
			return 0;
		}
		j->len = 0;
		if (j->done)
			ksyms_stop(j);
	}
	return j->f != NULL;
}

/*
 * Guest files for the host (opvm_proto.h, FETCH): requests arrive on the
 * port, one file is streamed at a time as FILE_DATA records written into
 * /dev/opvm (paused like KSYMS while the module's ring is busy), then
 * FILE_END.  Only a regular file whose GNU build-id is the one asked for,
 * of at most max_bytes, is sent; otherwise FILE_END says why.
 */
static unsigned long long clock_ns(clockid_t id);
static unsigned long long idle_ns(unsigned long long *up);

struct fetch_req {
	opvm_u32 id;
	opvm_u8 flags;		/* OPVM_FETCH_F_* */
	opvm_u8 bid[OPVM_BUILD_ID_MAX];
	opvm_u8 bid_len;
	opvm_u64 offset, max;
	char path[OPVM_PATH_MAX + 1];
};

struct file_job {
	struct fetch_req q[FETCH_QUEUE];
	unsigned int qhead, qnr;
	struct fetch_req cur;
	int fd;			/* the file being sent, -1: none */
	int active;		/* cur is being answered */
	int ending;		/* rec holds FILE_END */
	opvm_u64 pos;
	size_t len;		/* bytes of rec waiting to be written */
	unsigned long long sent, files, refused, dropped_reqs;
	unsigned long long rate;	/* bytes/s, 0: unpaced */
	unsigned long long window_ns, window_bytes;	/* pacing */
	/* debug files' CPU bucket (DEBUG_CPU_SHARE): tokens in ns, filled
	 * from the monotonic and idle clocks last read at fill_ns, fill_idle */
	long long tokens;	/* < 0: a debt */
	unsigned long long fill_ns, fill_idle, debug_cpu;
	unsigned char in[OPVM_REC_MAX];	/* requests being framed */
	size_t have;
	union {
		struct opvm_rec_file_data d;
		struct opvm_rec_file_end e;
		char buf[OPVM_REC_MAX];
	} rec;
};

static void files_reset(struct file_job *j)
{
	if (j->active && j->fd >= 0)
		close(j->fd);
	j->fd = -1;
	j->active = j->ending = 0;
	j->qnr = j->qhead = 0;
	j->have = j->len = 0;
}

/* The GNU build-id of an ELF64 file, from its PT_NOTE segments. */
static int file_build_id(int fd, opvm_u8 *id, size_t *len)
{
	static unsigned char notes[65536];
	Elf64_Ehdr eh;
	Elf64_Phdr ph;

	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph) || eh.e_phnum > 512)
		return -ENOEXEC;
	for (unsigned int i = 0; i < eh.e_phnum; i++) {
		size_t off = 0, n;

		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != sizeof(ph))
			return -ENOEXEC;
		if (ph.p_type != PT_NOTE || ph.p_filesz > sizeof(notes))
			continue;
		if (pread(fd, notes, ph.p_filesz, (off_t)ph.p_offset) != (ssize_t)ph.p_filesz)
			continue;
		n = ph.p_filesz;
		while (off + 12 <= n) {
			Elf64_Nhdr nh;
			size_t name = off + 12, desc;

			memcpy(&nh, notes + off, 12);
			desc = name + ((nh.n_namesz + 3) & ~3u);
			if (desc > n || nh.n_descsz > n - desc)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp(notes + name, "GNU", 4) && nh.n_descsz <= OPVM_BUILD_ID_MAX) {
				memcpy(id, notes + desc, nh.n_descsz);
				*len = nh.n_descsz;
				return 0;
			}
			off = desc + ((nh.n_descsz + 3) & ~3u);
		}
	}
	return -ENODATA;
}

/* The pid of a JIT file's path, exactly "/tmp/perf-<decimal>.map" (a perf
 * map) or "/tmp/jit-<decimal>.dump" (a jitdump, *dump set): 0 or -EINVAL
 * (the host asks for nothing else without a build-id check). */
static int perfmap_pid(const char *path, unsigned long *pid, int *dump)
{
	static const char map[] = "/tmp/perf-", jit[] = "/tmp/jit-";
	const char *p;
	char *end;

	*dump = !strncmp(path, jit, sizeof(jit) - 1);
	if (!*dump && strncmp(path, map, sizeof(map) - 1))
		return -EINVAL;
	p = path + (*dump ? sizeof(jit) : sizeof(map)) - 1;
	if (*p < '1' || *p > '9')
		return -EINVAL;
	errno = 0;
	*pid = strtoul(p, &end, 10);
	if (errno || *pid > 0x7fffffff || strcmp(end, *dump ? ".dump" : ".map"))
		return -EINVAL;
	return 0;
}

/* The process's pid in its own pid namespace (the last of NSpid in its
 * status): the number a runtime in a container puts in its map's name. */
static unsigned long perfmap_nspid(unsigned long pid)
{
	char path[48], line[256];
	unsigned long ns = pid;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%lu/status", pid);
	f = fopen(path, "re");
	if (!f)
		return pid;
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 6, *end;

		if (strncmp(line, "NSpid:", 6))
			continue;
		for (;;) {
			unsigned long v = strtoul(p, &end, 10);

			if (end == p)
				break;
			ns = v;
			p = end;
		}
		break;
	}
	fclose(f);
	return ns;
}

/*
 * A jitdump as the process mapped it (perf's agents mmap their dump
 * executable so that perf record sees where it is; it need not be in
 * /tmp): the first mapping of /proc/PID/maps whose file is named
 * jit-NSPID.dump, opened through /proc/PID/map_files (the mapped file
 * itself, whatever its path).  The fd, or -1.
 */
static int jitdump_mapped(unsigned long pid, unsigned long nspid)
{
	char path[96], want[40], line[4096 + 128];
	struct stat st;
	int fd = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%lu/maps", pid);
	snprintf(want, sizeof(want), "/jit-%lu.dump", nspid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fd < 0 && fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n"), w = strlen(want);
		char *sp = strchr(line, ' ');

		line[n] = '\0';
		if (!sp || n < w || strcmp(line + n - w, want))
			continue;
		*sp = '\0';	/* "start-end", as map_files names it */
		snprintf(path, sizeof(path), "/proc/%lu/map_files/%.40s", pid, line);
		/* a regular file only, checked before open(): a device
		 * mapped under that name must not be opened */
		if (!stat(path, &st) && S_ISREG(st.st_mode))
			fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	}
	fclose(f);
	return fd;
}

/*
 * Opens a perf map or a jitdump (OPVM_FETCH_F_PERFMAP) where the process
 * sees it: a dump where the process mapped it, else
 * /proc/PID/root/tmp/perf-NSPID.map or jit-NSPID.dump (its own root and
 * mounts: the relay's unit has a private /tmp, a container has its own),
 * not a link (a user who plants /tmp/perf-1.map -> /etc/shadow gets
 * nothing), a regular file, owned by the process's owner or root, as perf
 * itself asks.  0 or -errno.
 */
static int file_open_perfmap(struct file_job *j)
{
	struct fetch_req *r = &j->cur;
	char proc[32], path[96];
	unsigned long pid, nspid;
	struct stat st, ps;
	int dump;

	if (perfmap_pid(r->path, &pid, &dump))
		return -EINVAL;
	snprintf(proc, sizeof(proc), "/proc/%lu", pid);
	if (stat(proc, &ps))
		return -ESRCH;
	nspid = perfmap_nspid(pid);
	j->fd = dump ? jitdump_mapped(pid, nspid) : -1;
	if (j->fd < 0) {
		snprintf(path, sizeof(path), dump ? "/proc/%lu/root/tmp/jit-%lu.dump" :
			 "/proc/%lu/root/tmp/perf-%lu.map", pid, nspid);
		/* not a device either (a hard link to one planted at the
		 * name): checked before open(), and again after */
		if (lstat(path, &st))
			return -errno;
		if (!S_ISREG(st.st_mode))
			return -EINVAL;
		j->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
	}
	if (j->fd < 0)
		return -errno;
	if (fstat(j->fd, &st) || !S_ISREG(st.st_mode))
		return -EINVAL;
	if (st.st_uid != ps.st_uid && st.st_uid != 0)
		return -EPERM;
	j->pos = r->offset;
	return 0;
}

/* Opens cur's file if it is the one asked for; 0 or -errno for FILE_END. */
static int file_open(struct file_job *j)
{
	struct fetch_req *r = &j->cur;
	opvm_u8 id[OPVM_BUILD_ID_MAX];
	size_t idlen = 0;
	struct stat st;
	int ret;

	if (r->flags & OPVM_FETCH_F_PERFMAP)
		return file_open_perfmap(j);
	/* a regular file only, checked before open(): opening a device can
	 * act on it (a tape rewinds, a watchdog arms) */
	if (stat(r->path, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	j->fd = open(r->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (j->fd < 0)
		return -errno;
	if (fstat(j->fd, &st) || !S_ISREG(st.st_mode))
		return -EINVAL;
	if ((opvm_u64)st.st_size > r->max)
		return -EFBIG;
	ret = file_build_id(j->fd, id, &idlen);
	if (ret)
		return ret;
	if (idlen != r->bid_len || memcmp(id, r->bid, idlen))
		return -ESTALE;
	j->pos = r->offset;
	return 0;
}

static void file_end(struct file_job *j, int status)
{
	struct opvm_rec_file_end *e = &j->rec.e;

	memset(e, 0, sizeof(*e));
	e->req_id = j->cur.id;
	e->status = status;
	e->size = j->pos;
	rec_finish(&e->hdr, OPVM_REC_FILE_END, sizeof(*e));
	j->len = e->hdr.len;
	j->ending = 1;
	if (status)
		j->refused++;
	else
		j->files++;
}

/* The next record of the current answer into j->rec. */
static void file_build(struct file_job *j)
{
	struct opvm_rec_file_data *d = &j->rec.d;
	size_t chunk;
	ssize_t n;

	if (j->fd < 0) {
		int ret = file_open(j);

		if (ret) {
			file_end(j, ret);
			return;
		}
	}
	chunk = FILE_CHUNK;
	/* a perf map grows: what fits under max goes, then -EFBIG */
	if ((j->cur.flags & OPVM_FETCH_F_PERFMAP) && j->cur.max - j->pos < chunk)
		chunk = j->pos < j->cur.max ? (size_t)(j->cur.max - j->pos) : 1;
	n = pread(j->fd, j->rec.buf + sizeof(*d), chunk, (off_t)j->pos);
	if (n <= 0 || j->pos + (opvm_u64)n > j->cur.max) {
		file_end(j, n < 0 ? -errno : n > 0 ? -EFBIG : 0);
		return;
	}
	memset(d, 0, sizeof(*d));
	d->req_id = j->cur.id;
	d->bytes = (opvm_u32)n;
	d->offset = j->pos;
	j->pos += (opvm_u64)n;
	j->sent += (unsigned long long)n;
	rec_finish(&d->hdr, OPVM_REC_FILE_DATA, sizeof(*d) + (size_t)n);
	j->len = d->hdr.len;
}

static unsigned long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/*
 * The debug files' bucket, filled once a window (DEBUG_CPU_SHARE): the
 * window's share of the time and the guest's idle time in it.  Unspent
 * tokens carry over only up to one busy window's share, and the first fill
 * after a pause (no debug file asked for) counts no idle time from before
 * it: kept for later, both were spent on a busy guest in bursts
 * (kmod-overhead-debug: the relay moved 1.68 MB within one ping-pong
 * repetition, 10 % of it, twice, after the guest had idled for a second).
 * A debt is kept, and paid by the time's share.
 */
static void debug_fill(struct file_job *j, unsigned long long now)
{
	const long long share = PACE_WINDOW_NS / DEBUG_CPU_SHARE;
	unsigned long long idle = idle_ns(NULL), add = 0;
	long long t = j->tokens;

	if (!j->fill_ns) {
		t = share;	/* one window's */
	} else if (now - j->fill_ns > 2 * PACE_WINDOW_NS) {
		t += (long long)((now - j->fill_ns) / DEBUG_CPU_SHARE);
		t = t < share ? t : share;
	} else {
		add = (now - j->fill_ns) / DEBUG_CPU_SHARE +
		      (idle > j->fill_idle ? idle - j->fill_idle : 0);
		if (add > (unsigned long long)DEBUG_CPU_BURST_NS)
			add = DEBUG_CPU_BURST_NS;
		t = (t < share ? t : share) + (long long)add;
	}
	j->tokens = t;
	j->fill_ns = now;
	j->fill_idle = idle;
}

static int files_debug(const struct file_job *j)
{
	return (j->active ? j->cur.flags : j->qnr ? j->q[j->qhead].flags : 0) &
	       (OPVM_FETCH_F_DEBUG | OPVM_FETCH_F_PERFMAP);
}

/* Whether the pace allows another chunk now: windows of 100 ms. */
static int files_paced(struct file_job *j)
{
	unsigned long long now = mono_ns();

	if (now - j->window_ns >= (unsigned long long)PACE_WINDOW_NS) {
		j->window_ns = now;
		j->window_bytes = 0;
		if (files_debug(j))
			debug_fill(j, now);
	}
	if (files_debug(j) && j->tokens <= 0)
		return 0;
	return !j->rate || j->window_bytes < j->rate / 10;
}

/* CPU time spent on a debug file, out of its bucket. */
static void files_charge(struct file_job *j, unsigned long long used)
{
	j->debug_cpu += used;
	j->tokens -= (long long)used;
}

/* The current answer's next record into the module, its CPU time out of
 * the debug files' bucket: 0, or 1 when the ring is busy (later). */
static int files_write(struct file_job *j, int dev)
{
	int debug = j->cur.flags & (OPVM_FETCH_F_DEBUG | OPVM_FETCH_F_PERFMAP), busy = 0;
	unsigned long long c0 = debug ? clock_ns(CLOCK_THREAD_CPUTIME_ID) : 0;

	if (!j->len)
		file_build(j);
	if (write(dev, j->rec.buf, j->len) != (ssize_t)j->len) {
		if (errno == EAGAIN || errno == EINTR) {
			busy = 1;
		} else {
			fprintf(stderr, "opvm-relay: file for the host into the module: %s\n",
				strerror(errno));
			j->ending = 1;	/* give this one up */
		}
	}
	if (debug)
		files_charge(j, clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0);
	return busy;
}

/* Milliseconds left of the pace's window (1 to 100). */
static int files_window_left_ms(const struct file_job *j)
{
	unsigned long long gone = (mono_ns() - j->window_ns) / 1000000ull;

	return gone >= 99 ? 1 : (int)(100 - gone);
}

/*
 * Up to JOB_BATCH records into the module.  Returns 0 when nothing is left,
 * otherwise how many milliseconds to wait before the next step: the rest of
 * the window while the pace holds the job back (waking every 10 ms then
 * cost a guest busy on every CPU 100 wake-ups a second for as long as a
 * paced debug file took: kmod-overhead-debug's switch figure rose to 4 %
 * on a loaded host), 10 while the module's ring is busy or after a batch.
 */
static int files_step(struct file_job *j, int dev)
{
	for (int i = 0; i < JOB_BATCH; i++) {
		if (!files_paced(j))
			return files_window_left_ms(j);
		if (!j->active) {
			if (!j->qnr)
				return 0;
			j->cur = j->q[j->qhead];
			j->qhead = (j->qhead + 1) % FETCH_QUEUE;
			j->qnr--;
			j->active = 1;
			j->ending = 0;
			j->fd = -1;
			j->pos = 0;
		}
		if (files_write(j, dev))
			return 10;	/* the ring is busy: later */
		j->window_bytes += j->len;
		j->len = 0;
		if (j->ending) {
			if (j->fd >= 0)
				close(j->fd);
			j->fd = -1;
			j->active = 0;
		}
	}
	return 10;
}

struct ksyms_thread;
static void ksyms_word(struct ksyms_thread *t, opvm_u32 want);

/* One framed request: queued if it is a well-formed FETCH; the host's word
 * on the kernel's symbols goes to their thread; other types are skipped.
 * Returns 1 for an ask for HELLO (the caller answers it), else 0. */
static int request_take(struct file_job *j, struct ksyms_thread *t, const unsigned char *p,
			size_t len)
{
	struct opvm_req_fetch r;
	struct fetch_req *q;

	memcpy(&r, p, sizeof(r));
	if (r.hdr.type == OPVM_REQ_HELLO)
		return 1;
	if (r.hdr.type == OPVM_REQ_KSYMS) {
		struct opvm_req_ksyms k;

		memcpy(&k, p, sizeof(k));	/* len >= sizeof(r) == sizeof(k) */
		ksyms_word(t, k.want);
		return 0;
	}
	if (r.hdr.type != OPVM_REQ_FETCH || !r.req_id || !r.build_id_len ||
	    r.build_id_len > OPVM_BUILD_ID_MAX || !r.path_len ||
	    r.path_len > OPVM_PATH_MAX || sizeof(r) + r.path_len > len)
		return 0;
	if (j->qnr == FETCH_QUEUE) {
		j->dropped_reqs++;
		return 0;
	}
	q = &j->q[(j->qhead + j->qnr++) % FETCH_QUEUE];
	q->id = r.req_id;
	q->flags = r.flags;
	memcpy(q->bid, r.build_id, r.build_id_len);
	q->bid_len = r.build_id_len;
	q->offset = r.offset;
	q->max = r.max_bytes;
	memcpy(q->path, p + sizeof(r), r.path_len);
	q->path[r.path_len] = '\0';
	return 0;
}

/*
 * Frames the requests read from the host so far (j->in), up to and
 * including the first ask for HELLO.  Returns 1 when it stopped at one
 * (what follows it stays in j->in, for the session it starts), else 0.
 */
static int requests_frame(struct file_job *j, struct ksyms_thread *t)
{
	while (j->have >= sizeof(struct opvm_rec_hdr)) {
		struct opvm_rec_hdr h;
		int hello;

		memcpy(&h, j->in, sizeof(h));
		if (h.magic != OPVM_PROTO_MAGIC || h.len < sizeof(struct opvm_req_fetch) ||
		    h.len > OPVM_REC_MAX || h.len % OPVM_REC_ALIGN) {
			memmove(j->in, j->in + 1, --j->have);	/* resync */
			continue;
		}
		if (j->have < h.len)
			break;
		hello = request_take(j, t, j->in, h.len);
		memmove(j->in, j->in + h.len, j->have - h.len);
		j->have -= h.len;
		if (hello)
			return 1;
	}
	return 0;
}

/*
 * The symbols thread: sends the kernel's symbols for each host session
 * that asks for them, as SCHED_BATCH and within its CPU budget
 * (KSYMS_CPU_SHARE).  The main thread publishes the host session in `want`
 * (a generation number, odd while a host is connected, KSYMS_QUIT to stop;
 * KSYMS_HURRY set when the relay is stopping: the budget is lifted, the
 * guest is shutting down), the host's word for it in `word` (KSYMS_NO_WORD
 * until it comes; reset before each new generation is published, so a
 * word is never taken for the wrong session), and writes a byte to a pipe
 * to wake the thread; it never waits for it (a full pipe already holds a
 * wake-up).
 */
#define KSYMS_QUIT	UINT_MAX
#define KSYMS_HURRY	0x80000000u
#define KSYMS_NO_WORD	(-1)

struct ksyms_thread {
	atomic_uint want;	/* written by the main thread */
	atomic_int word;	/* the host's OPVM_KSYMS_WANT_*, or KSYMS_NO_WORD */
	atomic_int active;	/* a job is under way: the main thread waits */
	unsigned int have;	/* the session the thread works for */
	int undecided;		/* have's session waits for the host's word */
	int kmod_pending;	/* "kmod" to write once the module takes it */
	unsigned long long since;	/* have's start (CLOCK_MONOTONIC ns) */
	/* what the host sessions asked for (the exit line) */
	unsigned long long said_all, said_modules, said_none, silent;
	int wake[2];		/* pipe: [0] the thread's, [1] the main thread's */
	int dev;		/* /dev/opvm, shared with the main thread */
	unsigned long long t0, cpu0, idle0;	/* the budget's start: the relay's */
	unsigned long long cpu;	/* the thread's CPU time, ns, once it quit */
	struct ksyms_job job;
};

static unsigned long long clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/*
 * One "SECONDS.CC" field of /proc/uptime in ns, *p moved past it.  By
 * hand: the budget reads it before every record, and sscanf's floating
 * point showed in the guest's profile of the relay.
 */
static unsigned long long uptime_field(const char **p)
{
	unsigned long long sec = 0, frac = 0, scale = 1000000000ull;
	const char *s = *p;

	while (*s == ' ')
		s++;
	for (; *s >= '0' && *s <= '9'; s++)
		sec = sec * 10 + (unsigned long long)(*s - '0');
	if (*s == '.')
		for (s++; *s >= '0' && *s <= '9'; s++) {
			if (scale > 1) {
				scale /= 10;
				frac += (unsigned long long)(*s - '0') * scale;
			}
		}
	*p = s;
	return sec * 1000000000ull + frac;
}

/*
 * The guest's CPU idle time so far (/proc/uptime, all CPUs), in ns; its
 * uptime into *up when up is not NULL.
 */
static unsigned long long idle_ns(unsigned long long *up)
{
	char b[128] = "";
	const char *p = b;
	unsigned long long u = 0, idle = 0;
	int fd = open("/proc/uptime", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, b, sizeof(b) - 1) > 0) {
			u = uptime_field(&p);
			idle = uptime_field(&p);
		}
		close(fd);
	}
	if (up)
		*up = u;
	return idle;
}

/* 0 if the budget allows the next step now, else ms to wait first. */
static int ksyms_budget_wait(struct ksyms_thread *t)
{
	unsigned long long used = clock_ns(CLOCK_THREAD_CPUTIME_ID) - t->cpu0;
	unsigned long long allowed = (clock_ns(CLOCK_MONOTONIC) - t->t0) / KSYMS_CPU_SHARE +
				     (idle_ns(NULL) - t->idle0);
	unsigned long long ms;

	if (used <= allowed || (atomic_load(&t->want) & KSYMS_HURRY))
		return 0;
	/* at most 100 ms: idle time seen meanwhile shortens the wait */
	ms = (used - allowed) * KSYMS_CPU_SHARE / 1000000 + 1;
	return ms < 100 ? (int)ms : 100;
}

/*
 * The modules' symbols only: opvm.ko walks their text ("kmod"), which
 * costs the guest little (no line of /proc/kallsyms is formatted).  An
 * older opvm.ko refuses the word: the modules' lines of /proc/kallsyms
 * then, at its full cost.  Returns 1 to try again later.
 */
static int ksyms_modules(struct ksyms_thread *t)
{
	t->kmod_pending = 0;
	if (write(t->dev, "kmod", 4) == 4)
		return 0;
	if (errno == EAGAIN || errno == EINTR) {
		t->kmod_pending = 1;
		return 1;
	}
	ksyms_start(&t->job);
	t->job.modules_only = 1;
	return 0;
}

/*
 * Starts what the host's word asks for in this session, once it came or
 * OPVM_KSYMS_WAIT_MS passed without one (a host that predates the word:
 * all, as before it), or the relay is stopping.  Returns 0, or the ms to
 * wait for the word.
 */
static int ksyms_decide(struct ksyms_thread *t)
{
	unsigned long long waited = (clock_ns(CLOCK_MONOTONIC) - t->since) / 1000000;
	int word = atomic_load(&t->word);

	if (!t->undecided)
		return 0;
	if (word == KSYMS_NO_WORD && waited < OPVM_KSYMS_WAIT_MS &&
	    !(atomic_load(&t->want) & KSYMS_HURRY))
		return (int)(OPVM_KSYMS_WAIT_MS - waited);
	t->undecided = 0;
	if (word == OPVM_KSYMS_WANT_NONE) {
		t->said_none++;
	} else if (word == OPVM_KSYMS_WANT_MODULES) {
		t->said_modules++;
		ksyms_modules(t);
	} else {
		if (word == KSYMS_NO_WORD)
			t->silent++;
		else
			t->said_all++;
		ksyms_start(&t->job);
	}
	return 0;
}

/* Follows the main thread's session; 0, or -1 to quit. */
static int ksyms_control(struct ksyms_thread *t)
{
	char drain[64];
	unsigned int want;

	while (read(t->wake[0], drain, sizeof(drain)) == (ssize_t)sizeof(drain))
		;
	want = atomic_load(&t->want);
	if (want == KSYMS_QUIT)
		return -1;
	want &= ~KSYMS_HURRY;
	if (want != t->have) {
		t->have = want;
		ksyms_stop(&t->job);
		t->kmod_pending = 0;
		t->undecided = t->have & 1;
		t->since = clock_ns(CLOCK_MONOTONIC);
	}
	return 0;
}

static void *ksyms_main(void *arg)
{
	struct sched_param sp = { .sched_priority = 0 };
	struct ksyms_thread *t = arg;
	int wait = -1, err;

	/* The budget runs from here, across sessions (KSYMS_CPU_SHARE). */
	t->t0 = clock_ns(CLOCK_MONOTONIC);
	t->cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	t->idle0 = idle_ns(NULL);
	err = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
	if (err)
		fprintf(stderr, "opvm-relay: no SCHED_BATCH for the kernel symbols: %s\n", strerror(err));
	for (;;) {
		struct pollfd pfd = { .fd = t->wake[0], .events = POLLIN };

		atomic_store(&t->active, t->job.f != NULL || t->kmod_pending);
		if (poll(&pfd, 1, wait) < 0 && errno != EINTR)
			break;
		if (ksyms_control(t))
			break;
		wait = ksyms_decide(t);
		if (wait)
			continue;	/* no word from the host yet */
		wait = -1;
		if (t->kmod_pending && ksyms_modules(t))
			wait = KSYMS_RETRY_MS;
		if (!t->job.f)
			continue;
		wait = ksyms_budget_wait(t);
		if (!wait && ksyms_step(&t->job, t->dev))
			wait = t->job.len ? KSYMS_RETRY_MS : 0;	/* refused: later */
	}
	ksyms_stop(&t->job);
	t->cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	atomic_store(&t->active, 0);
	return NULL;
}

static void ksyms_wake(struct ksyms_thread *t)
{
	if (write(t->wake[1], "", 1) != 1 && errno != EAGAIN)
		fprintf(stderr, "opvm-relay: waking the symbols thread: %s\n", strerror(errno));
}

/* Tells the symbols thread `want`. */
static void ksyms_tell(struct ksyms_thread *t, unsigned int want)
{
	atomic_store(&t->want, want);
	ksyms_wake(t);
}

/* Tells the symbols thread the host's word (OPVM_REQ_KSYMS) for this
 * session: a value it does not know reads as ALL (ksyms_decide()). */
static void ksyms_word(struct ksyms_thread *t, opvm_u32 want)
{
	atomic_store(&t->word, want > 0xffff ? OPVM_KSYMS_WANT_ALL : (int)want);
	ksyms_wake(t);
}

/* Is a host connected to the port?  virtio_console says POLLHUP if not. */
static int host_connected(int port)
{
	struct pollfd pfd = { .fd = port, .events = POLLOUT };

	if (poll(&pfd, 1, 0) < 0)
		return 1;	/* EINTR: assume nothing changed */
	return !(pfd.revents & POLLHUP);
}

/*
 * Write all of p to the (non-blocking) port.  Returns 0, -EPIPE when the
 * host went away (the rest is dropped), or another -errno.
 */
static int write_all(int port, const char *p, size_t len)
{
	while (len) {
		struct pollfd pfd = { .fd = port, .events = POLLOUT };
		ssize_t n;

		if (stopping > 1)
			return -EINTR;
		if (poll(&pfd, 1, 500) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pfd.revents & POLLHUP)
			return -EPIPE;
		if (!(pfd.revents & POLLOUT))
			continue;
		n = write(port, p, len);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Tells the symbols thread of a host session starting or ending; the
 * new session has no word from its host yet. */
static void session_set(struct ksyms_thread *t, unsigned int *gen, int connected)
{
	*gen += 1 + ((*gen & 1) == !!connected);	/* odd: connected */
	atomic_store(&t->word, KSYMS_NO_WORD);
	ksyms_tell(t, *gen);
}

struct relay {
	int in, out;		/* /dev/opvm, the port */
	char *buf;
	struct ksyms_thread ksyms;
	struct file_job files;
	int asked;		/* the session's host asked for HELLO */
	unsigned long long total, dropped, sessions, missed;
};

/*
 * A new host session: HELLO and a full walk first ("sync", unless the
 * module's buffer starts with them: sync 0), the symbols thread and the
 * file requests start again.  keep_input: what the host wrote after its
 * ask for HELLO stays, it belongs to this session.
 */
static void session_begin(struct relay *r, unsigned int *gen, int sync, int keep_input)
{
	size_t have = r->files.have;

	if (sync && write(r->in, "sync", 4) != 4)
		fprintf(stderr, "opvm-relay: cannot ask the module for a resync: %s\n",
			strerror(errno));
	r->sessions++;
	r->asked = 0;
	session_set(&r->ksyms, gen, 1);
	files_reset(&r->files);
	if (keep_input)
		r->files.have = have;
}

/*
 * Reads what the host wrote to the port and takes its requests.  An ask
 * for HELLO is the host's first request on its connection: the first in a
 * session the relay saw start was answered by its HELLO; another means
 * the port's close and open came too close together for the relay to see
 * (OPVM_REQ_HELLO): a host the session has not greeted.
 */
static void requests_read(struct relay *r, unsigned int *gen)
{
	struct file_job *j = &r->files;
	ssize_t n = read(r->out, j->in + j->have, sizeof(j->in) - j->have);

	if (n <= 0)
		return;
	j->have += (size_t)n;
	while (requests_frame(j, &r->ksyms)) {
		if (!r->asked++)
			continue;
		r->missed++;
		session_begin(r, gen, 1, 1);
		r->asked = 1;	/* this ask is answered */
	}
}

/* Copies /dev/opvm to the port until stopped or an error. */
/* What the module has, read and written to the port (or dropped with no
 * host).  Returns 1 to go on, 0 to stop. */
static int relay_forward(struct relay *r, int *connected, unsigned int *gen, int busy)
{
	ssize_t n = read(r->in, r->buf, BUF_SIZE);
	int ret;

	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 1;
		fprintf(stderr, "opvm-relay: read the module: %s\n", strerror(errno));
		return 0;
	}
	if (n == 0)
		return 0;
	if (!*connected) {
		r->dropped += (unsigned long long)n;
		return 1;
	}
	ret = write_all(r->out, r->buf, (size_t)n);
	if (ret == -EPIPE) {
		*connected = 0;
		session_set(&r->ksyms, gen, 0);
		r->dropped += (unsigned long long)n;
		return 1;
	}
	if (ret) {
		if (ret != -EINTR)
			fprintf(stderr, "opvm-relay: write the port: %s\n", strerror(-ret));
		return 0;
	}
	r->total += (unsigned long long)n;
	/*
	 * A trickle of records: let more gather before the next wake-up.
	 * Fewer, larger writes cost the guest less (each is a virtqueue kick,
	 * and under TCG the kick's exit to QEMU showed among the relay's few
	 * samples once it sent no kernel symbols: 50 ms, not 10, though the
	 * difference was not measured apart); the host holds samples of
	 * unknown mappings far longer than this.
	 */
	if (n < 16384 && !stopping && !busy)
		usleep(TRICKLE_US);
	return 1;
}

static void relay_loop(struct relay *r)
{
	unsigned int gen = 0;
	int in = r->in, out = r->out, ret, connected, busy = 0, wait_ms = 0, hurry = 0, paced;
	unsigned long long c0;

	connected = host_connected(out);
	if (connected)
		session_begin(r, &gen, 0, 0);	/* the module's buffer starts with HELLO */
	while (stopping < 2) {
		/* The port is polled for requests and POLLHUP: a host leaving. */
		struct pollfd pfd[2] = {
			{ .fd = in, .events = POLLIN },
			{ .fd = connected ? out : -1, .events = POLLIN },
		};
		int timeout = !connected ? 200 : stopping ? 300 : busy ? wait_ms : -1;

		if (stopping && !hurry) {
			/* the guest is going down: the symbols at full speed */
			hurry = 1;
			ksyms_tell(&r->ksyms, gen | KSYMS_HURRY);
		}
		ret = poll(pfd, 2, timeout);
		if (ret < 0 && errno != EINTR)
			break;
		if (connected && (pfd[1].revents & POLLHUP)) {
			connected = 0;	/* resync when a host is back */
			session_set(&r->ksyms, &gen, 0);
			files_reset(&r->files);
		}
		if (connected && (pfd[1].revents & POLLIN))
			requests_read(r, &gen);
		if (!connected) {
			if (stopping)
				break;	/* nobody to drain to */
			if (host_connected(out)) {
				/* New host session: start it with HELLO. */
				connected = 1;
				session_begin(r, &gen, 1, 0);
			}
		} else if (ret == 0 && stopping && !atomic_load(&r->ksyms.active)) {
			break;		/* drained */
		}
		wait_ms = connected && !stopping ? files_step(&r->files, in) : 0;
		busy = wait_ms > 0;
		if (!(pfd[0].revents & POLLIN))
			continue;
		/*
		 * Forwarding a debug file's records (the read from the module,
		 * the port's write) is paid from its bucket as well: it is
		 * half again what the job's own reads and writes cost (libc's
		 * debug file, kmod-overhead-debug: 5.2 ms of the relay's CPU
		 * without it, 7.7-7.9 ms with it).  What the module's own
		 * records cost meanwhile is counted with it: they are few.
		 */
		paced = connected && files_debug(&r->files);
		c0 = paced ? clock_ns(CLOCK_THREAD_CPUTIME_ID) : 0;
		if (!relay_forward(r, &connected, &gen, busy))
			break;
		if (paced)
			files_charge(&r->files, clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0);
	}
}

/* Opens SOURCE and PORT; 0, or 1 with the message printed. */
static int relay_open(struct relay *r, const char *src, const char *port)
{
	char portbuf[300];
	int ret;

	if (!port) {
		ret = find_port(portbuf, sizeof(portbuf));
		if (ret) {
			fprintf(stderr, "opvm-relay: no virtio port named %s: %s; start the VM with -device virtserialport,name=%s\n",
				PORT_NAME, strerror(-ret), PORT_NAME);
			return 1;
		}
		port = portbuf;
	}
	r->in = open(src, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (r->in < 0) {
		fprintf(stderr, "opvm-relay: %s: %s (is opvm.ko loaded?)\n",
			src, strerror(errno));
		return 1;
	}
	r->ksyms.dev = r->in;
	/* read too: the host's FETCH requests */
	r->out = open(port, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (r->out < 0) {
		fprintf(stderr, "opvm-relay: %s: %s\n", port, strerror(errno));
		return 1;
	}
	if (pipe2(r->ksyms.wake, O_CLOEXEC | O_NONBLOCK)) {
		fprintf(stderr, "opvm-relay: pipe: %s\n", strerror(errno));
		return 1;
	}
	r->buf = malloc(BUF_SIZE);
	if (!r->buf) {
		fprintf(stderr, "opvm-relay: out of memory\n");
		return 1;
	}
	return 0;
}

/*
 * What the relay cost the guest: its CPU time (both threads) against the
 * time the guest's CPUs were busy since it started.  Under QEMU -icount
 * both count guest instructions (tests/bench/guest-module-overhead.sh).
 */
static void relay_cpu_report(unsigned long long up0, unsigned long long idle0,
			     const struct ksyms_thread *t, const struct file_job *j)
{
	unsigned long long ksyms_cpu = t->cpu;
	unsigned long long up, idle = idle_ns(&up), cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	double busy = (double)(up - up0) * (double)(ncpu > 0 ? ncpu : 1) - (double)(idle - idle0);

	fprintf(stderr, "opvm-relay: used %.1f ms of CPU, %.3f %% of the %.1f ms the guest's CPUs were busy meanwhile (kernel symbols %.1f ms; hosts asked for all %llu, modules' %llu, none %llu, silent %llu)\n",
		(double)cpu / 1e6, busy > 0 ? 100.0 * (double)cpu / busy : 0.0, busy / 1e6,
		(double)ksyms_cpu / 1e6, t->said_all, t->said_modules, t->said_none, t->silent);
	if (j->debug_cpu)
		fprintf(stderr, "opvm-relay: debug files used %.1f ms of CPU (paced at 1/%d of the time and the guest's idle time)\n",
			(double)j->debug_cpu / 1e6, DEBUG_CPU_SHARE);
}

int main(int argc, char **argv)
{
	static struct relay r = {
		.in = -1, .out = -1, .ksyms.wake = { -1, -1 }, .ksyms.word = KSYMS_NO_WORD,
		.files = { .fd = -1, .rate = FILE_RATE },
	};
	const char *rate = getenv("OPVM_RELAY_FILE_RATE");
	struct sigaction sa;
	sigset_t all, old;
	unsigned long long up0, idle0;
	pthread_t thread;
	int ret = 1;

	if (rate)
		r.files.rate = strtoull(rate, NULL, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL);

	if (relay_open(&r, argc > 1 ? argv[1] : "/dev/opvm", argc > 2 ? argv[2] : NULL))
		goto out;
	/* the signals go to the main thread: its poll() must see them */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ret = pthread_create(&thread, NULL, ksyms_main, &r.ksyms);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		fprintf(stderr, "opvm-relay: symbols thread: %s\n", strerror(ret));
		ret = 1;
		goto out;
	}
	idle0 = idle_ns(&up0);
	relay_loop(&r);
	ksyms_tell(&r.ksyms, KSYMS_QUIT);
	pthread_join(thread, NULL);
	relay_cpu_report(up0, idle0, &r.ksyms, &r.files);
	fprintf(stderr, "opvm-relay: relayed %llu bytes in %llu host session(s) (%llu told by the host's ask for HELLO), dropped %llu while no host was connected; sent %llu files (%llu bytes), refused %llu, dropped %llu requests\n",
		r.total, r.sessions, r.missed, r.dropped, r.files.files, r.files.sent,
		r.files.refused, r.files.dropped_reqs);
	ret = 0;
out:
	files_reset(&r.files);
	free(r.buf);
	if (r.ksyms.wake[0] >= 0) {
		close(r.ksyms.wake[0]);
		close(r.ksyms.wake[1]);
	}
	if (r.out >= 0)
		close(r.out);
	if (r.in >= 0)
		close(r.in);
	return ret;
}
