/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * opvm channel protocol: records the guest module sends to the host over the
 * virtio-serial port "org.opvm.0", and the per-CPU current-task slot the host
 * reads from guest memory at sample time.
 *
 * Shared, byte for byte, by guest-kmod/opvm.ko and the host decoder
 * (host/collect/decoder.c).  The full specification is docs/protocol.md.
 *
 * Wire rules:
 *  - every field is little-endian, every record starts with struct opvm_rec_hdr;
 *  - hdr.len is the whole record (header + payload), a multiple of 8, between
 *    sizeof(struct opvm_rec_hdr) and OPVM_REC_MAX;
 *  - hdr.seq increases by one per record sent; a gap means records were lost
 *    in transit, a LOST record means the guest dropped them itself;
 *  - strings are fixed-size, NUL-padded arrays or length-prefixed byte runs;
 *    the host never trusts either to be terminated;
 *  - the first record after the module loads is HELLO; a second HELLO means
 *    the guest rebooted or the module was reloaded: the host resets its model
 *    of that guest (samples already filed stay).
 *
 * The guest is untrusted: the host checks every length, offset and count.
 */
#ifndef OPVM_PROTO_H
#define OPVM_PROTO_H

#ifdef __KERNEL__
#include <linux/types.h>
typedef __u8 opvm_u8;
typedef __u16 opvm_u16;
typedef __u32 opvm_u32;
typedef __u64 opvm_u64;
typedef __s32 opvm_s32;
#else
#include <stdint.h>
typedef uint8_t opvm_u8;
typedef uint16_t opvm_u16;
typedef uint32_t opvm_u32;
typedef uint64_t opvm_u64;
typedef int32_t opvm_s32;
#endif

#define OPVM_PORT_NAME		"org.opvm.0"
#define OPVM_PROTO_MAGIC	0x564f		/* "OV" on the wire */
#define OPVM_PROTO_VERSION	1
#define OPVM_REC_ALIGN		8
#define OPVM_REC_MAX		8192		/* largest legal record */
#define OPVM_PATH_MAX		4096		/* longest path carried */
#define OPVM_BUILD_ID_MAX	32		/* bytes (SHA-1 ids are 20) */
#define OPVM_COMM_LEN		16		/* TASK_COMM_LEN */
#define OPVM_MODNAME_LEN	56		/* MODULE_NAME_LEN */
#define OPVM_RELEASE_LEN	65		/* __NEW_UTS_LEN + 1 */
#define OPVM_SYMNAME_LEN	64

enum opvm_rec_type {
	OPVM_REC_HELLO		= 1,	/* struct opvm_rec_hello */
	OPVM_REC_LOST		= 2,	/* struct opvm_rec_lost */
	OPVM_REC_PROC		= 3,	/* process exists/forked: struct opvm_rec_proc */
	OPVM_REC_EXEC		= 4,	/* process exec'd: struct opvm_rec_proc */
	OPVM_REC_PROC_EXIT	= 5,	/* struct opvm_rec_exit (tid == tgid) */
	OPVM_REC_THREAD		= 6,	/* struct opvm_rec_thread */
	OPVM_REC_THREAD_EXIT	= 7,	/* struct opvm_rec_exit */
	OPVM_REC_COOKIE		= 8,	/* struct opvm_rec_cookie + path bytes */
	OPVM_REC_MMAP		= 9,	/* struct opvm_rec_mmap */
	OPVM_REC_MUNMAP		= 10,	/* struct opvm_rec_munmap */
	OPVM_REC_MODULE		= 11,	/* struct opvm_rec_module */
	OPVM_REC_MODULE_FREE	= 12,	/* struct opvm_rec_module */
	OPVM_REC_SYNC		= 13,	/* struct opvm_rec_sync: initial walk done */
	OPVM_REC_KSYMS		= 14,	/* struct opvm_rec_ksyms + entries */
	OPVM_REC_KSYMS_END	= 15,	/* struct opvm_rec_ksyms_end */
	OPVM_REC_FILE_DATA	= 16,	/* struct opvm_rec_file_data + bytes */
	OPVM_REC_FILE_END	= 17,	/* struct opvm_rec_file_end */
	OPVM_REC_CGROUP		= 18,	/* struct opvm_rec_cgroup + path bytes */
	OPVM_REC_TYPE_MAX
};

/* Requests the host writes to the port (host to guest, read by the relay). */
enum opvm_req_type {
	OPVM_REQ_FETCH		= 64,	/* struct opvm_req_fetch + path */
	OPVM_REQ_KSYMS		= 65,	/* struct opvm_req_ksyms */
	OPVM_REQ_HELLO		= 66,	/* struct opvm_req_hello */
};

struct opvm_rec_hdr {
	opvm_u16 magic;		/* OPVM_PROTO_MAGIC */
	opvm_u16 type;		/* enum opvm_rec_type */
	opvm_u32 len;		/* whole record, header included */
	opvm_u32 seq;		/* per-channel record counter, starts at 0 */
	opvm_u32 reserved;	/* 0 */
};

/*
 * Per-CPU current-task slot.  The guest keeps one per possible CPU in a
 * physically contiguous array whose guest-physical address HELLO announces;
 * slot i belongs to the guest CPU with smp_processor_id() == i, which under
 * QEMU and the built-in VMM is vCPU index i.
 *
 * Writer (sched_switch, on that CPU): seq++ (odd), store pid/tgid/cr3,
 * smp_wmb(), seq++ (even).  Reader (host, vCPU stopped): accept only an even
 * seq; an odd one means the vCPU stopped mid-update and the slot is ignored.
 */
struct opvm_slot {
	opvm_u32 seq;
	opvm_u32 pid;		/* kernel pid == thread id; 0 for idle */
	opvm_u32 tgid;		/* thread group id; 0 for idle */
	opvm_u32 flags;		/* OPVM_SLOT_KTHREAD */
	opvm_u64 cr3;		/* __pa(mm->pgd) of the task's mm; 0 for kthreads */
};
#define OPVM_SLOT_KTHREAD	0x1	/* no mm: runs on a borrowed CR3 */

struct opvm_rec_hello {
	struct opvm_rec_hdr hdr;
	opvm_u32 version;	/* OPVM_PROTO_VERSION */
	opvm_u32 nr_cpus;	/* number of slots */
	opvm_u64 slot_pa;	/* guest-physical address of slot[0] */
	opvm_u32 slot_size;	/* sizeof(struct opvm_slot) */
	opvm_u32 page_offset_bits; /* reserved, 0 */
	opvm_u64 anchor_addr;	/* run-time address of anchor_name */
	opvm_u64 text_addr;	/* run-time address of _text (0 if unknown) */
	char anchor_name[OPVM_SYMNAME_LEN];
	char release[OPVM_RELEASE_LEN];	/* utsname()->release */
	char pad[7];
};

/*
 * Optional tail of HELLO: the per-vCPU task-switch rings.  Present when
 * hdr.len >= sizeof(struct opvm_rec_hello) + sizeof(struct opvm_hello_switch);
 * it starts at byte sizeof(struct opvm_rec_hello).  A host that predates it
 * reads the first 192 bytes and ignores the rest (HELLO may be longer).
 *
 * Why: a host that samples a running vCPU through host perf gets a guest RIP
 * and a time, but no CR3 and no task.  The rings give, per vCPU, which task
 * ran from which guest TSC on; the host joins each sample with them by time.
 */
struct opvm_hello_switch {
	opvm_u64 switch_pa;	/* guest-physical address of ring 0; 0: none */
	opvm_u32 switch_stride;	/* bytes from ring i to ring i+1, multiple of 8 */
	opvm_u32 switch_entries;/* entries per ring, a power of two */
	opvm_u32 tsc_khz;	/* the guest's TSC frequency, 0 if unknown */
	opvm_u32 flags;		/* 0 */
};

/*
 * One ring per possible CPU, ring i at switch_pa + i * switch_stride, in one
 * physically contiguous block: a header, then switch_entries entries.
 *
 * Writer (sched_switch on that CPU, preemption off), for entry n = head:
 *   e = &entries[n & (switch_entries - 1)];
 *   e->seq = 2n + 1; smp_mb(); e->tsc = rdtsc_ordered();
 *   store pid/tgid/cr3/flags; smp_wmb();
 *   e->seq = 2n + 2; smp_wmb(); head = n + 1;
 * (a full barrier before the TSC read: a host that sees seq < 2n + 1 after
 * taking its own time T knows switch n is stamped later than T.)
 * Reader (host, vCPU running): read head; for each n it has not read yet,
 * with n >= head - switch_entries: read seq, the fields, seq again; accept
 * only seq == 2n + 2 both times.  Anything else was overwritten or is being
 * written: count it, never guess.  Entry n means "from tsc on, this task ran
 * on this CPU" until entry n + 1's tsc.
 */
#define OPVM_SWITCH_MAX_CPUS	8192	/* rings a HELLO may announce */
#define OPVM_SWITCH_MAX_ENTRIES	65536	/* entries per ring, at most */

struct opvm_switch_ring_hdr {
	opvm_u64 head;		/* entries ever written on this CPU */
	opvm_u64 reserved[3];
};

struct opvm_switch {
	opvm_u64 seq;		/* 2n + 1 while entry n is written, 2n + 2 after */
	opvm_u64 tsc;		/* guest TSC (rdtsc) when the task started running */
	opvm_u32 pid;		/* next task: pid (thread id); 0 for idle */
	opvm_u32 tgid;		/* 0 for idle */
	opvm_u64 cr3;		/* __pa(mm->pgd); 0 for kernel threads */
	opvm_u32 flags;		/* OPVM_SLOT_KTHREAD */
	opvm_u32 pad;
};

struct opvm_rec_lost {
	struct opvm_rec_hdr hdr;
	opvm_u64 count;		/* records the guest dropped since the last LOST */
};

struct opvm_rec_proc {
	struct opvm_rec_hdr hdr;
	opvm_u32 tgid;
	opvm_u32 ppid;
	opvm_u64 cr3;		/* __pa(mm->pgd); 0 for kernel threads */
	opvm_u64 exe_cookie;	/* cookie of the executable, 0 if none */
	char comm[OPVM_COMM_LEN];
};

struct opvm_rec_exit {
	struct opvm_rec_hdr hdr;
	opvm_u32 tid;
	opvm_u32 tgid;
};

struct opvm_rec_thread {
	struct opvm_rec_hdr hdr;
	opvm_u32 tid;
	opvm_u32 tgid;
	char comm[OPVM_COMM_LEN];
};

/*
 * A cookie names one distinct file (OProfile's dcookie).  Sent once, before
 * the first MMAP that uses it.  path_len bytes of path follow the fixed part
 * (not NUL-terminated), then padding to OPVM_REC_ALIGN.
 */
struct opvm_rec_cookie {
	struct opvm_rec_hdr hdr;
	opvm_u64 cookie;	/* nonzero */
	opvm_u8 build_id[OPVM_BUILD_ID_MAX];
	opvm_u8 build_id_len;	/* 0 when the file has none */
	opvm_u8 pad;
	opvm_u16 path_len;	/* <= OPVM_PATH_MAX */
	opvm_u32 pad2;
	/* char path[path_len]; */
};

/* An executable mapping of a file in address space tgid. */
struct opvm_rec_mmap {
	struct opvm_rec_hdr hdr;
	opvm_u32 tgid;
	opvm_u32 prot;		/* PROT_* bits */
	opvm_u64 start;		/* [start, end) */
	opvm_u64 end;
	opvm_u64 pgoff;		/* file offset of start, in bytes */
	opvm_u64 cookie;	/* 0: anonymous executable memory */
};

struct opvm_rec_munmap {
	struct opvm_rec_hdr hdr;
	opvm_u32 tgid;
	opvm_u32 pad;
	opvm_u64 start;
	opvm_u64 end;
};

/*
 * The cgroup (v2, the default hierarchy) process tgid is in: sent after
 * its PROC or EXEC, and again when it moves (the cgroup_attach_task
 * tracepoint).  path_len bytes of path follow the fixed part (not
 * terminated), as the kernel prints it ("/", "/system.slice/x.service"),
 * cut at OPVM_CGROUP_PATH_MAX (flags OPVM_CGROUP_TRUNCATED).  A new type:
 * hosts that predate it skip it by its length (docs/protocol.md).
 */
#define OPVM_CGROUP_PATH_MAX	1024
#define OPVM_CGROUP_TRUNCATED	0x1

struct opvm_rec_cgroup {
	struct opvm_rec_hdr hdr;
	opvm_u32 tgid;
	opvm_u16 path_len;	/* <= OPVM_CGROUP_PATH_MAX */
	opvm_u16 flags;		/* OPVM_CGROUP_* */
	opvm_u64 id;		/* the cgroup's id (its kernfs node's), 0 unknown */
	/* char path[path_len]; */
};

struct opvm_rec_module {
	struct opvm_rec_hdr hdr;
	opvm_u64 base;		/* core text start */
	opvm_u64 size;		/* core text size */
	char name[OPVM_MODNAME_LEN];
};

struct opvm_rec_sync {
	struct opvm_rec_hdr hdr;
	opvm_u64 nr_procs;	/* processes described by the initial walk */
	opvm_u64 nr_modules;
};

/*
 * Kernel symbols, so the host needs no System.map: the relay reads the
 * guest's /proc/kallsyms (as root) after each host connects and writes
 * these records into /dev/opvm, which numbers them like its own records and
 * takes them only while its ring is at most half full (docs/protocol.md 4):
 * process and mapping records always find room.
 *
 * KSYMS carries up to nr text symbols of one image (module[] empty for
 * vmlinux, else the module's name), packed after the fixed part in
 * `bytes` bytes: per symbol a little-endian u64 run-time address, a u8
 * kallsyms type letter, a u8 name length (1..OPVM_KSYM_NAME_MAX), the name
 * (not terminated).  KSYMS_END closes one transfer.
 */
#define OPVM_KSYM_NAME_MAX	127	/* longest symbol name carried (KSYM_NAME_LEN - 1) */
#define OPVM_KSYMS_RESTRICTED	0x1	/* kptr_restrict hid the addresses */
#define OPVM_KSYMS_TRUNCATED	0x2	/* the relay stopped at its cap */
#define OPVM_KSYMS_MODULE_WALK	0x4	/* kptr_restrict hid them from the relay:
					 * opvm.ko walked its kernel's symbols */
#define OPVM_KSYMS_MODULES_ONLY	0x8	/* the modules' symbols only (the host
					 * asked for OPVM_KSYMS_WANT_MODULES) */

struct opvm_rec_ksyms {
	struct opvm_rec_hdr hdr;
	opvm_u32 nr;		/* symbols in this record */
	opvm_u16 bytes;		/* bytes of entries after the fixed part */
	opvm_u16 flags;		/* 0 */
	char module[OPVM_MODNAME_LEN];	/* "" for vmlinux */
	/* entries: { u64 addr; u8 type; u8 name_len; char name[name_len]; } */
};

/*
 * Appends one entry to the KSYMS record being built at rec (a buffer of
 * OPVM_REC_MAX bytes, *used of them taken: sizeof(struct opvm_rec_ksyms)
 * when empty).  Returns 0, or -1 when it does not fit: the entry then
 * starts the next record.  Shared by the relay and opvm.ko's own walk.
 */
static inline int opvm_ksyms_add(struct opvm_rec_ksyms *rec, unsigned long *used,
				 opvm_u64 addr, char type, const char *name,
				 unsigned long nlen)
{
	unsigned char *p = (unsigned char *)rec + *used;
	int b;

	if (!nlen || nlen > OPVM_KSYM_NAME_MAX || *used + 10 + nlen > OPVM_REC_MAX)
		return -1;
	for (b = 0; b < 8; b++)
		p[b] = (unsigned char)(addr >> (8 * b));	/* little-endian */
	p[8] = (unsigned char)type;
	p[9] = (unsigned char)nlen;
	__builtin_memcpy(p + 10, name, nlen);
	*used += 10 + nlen;
	rec->nr++;
	rec->bytes = (opvm_u16)(*used - sizeof(*rec));
	return 0;
}

/*
 * Data symbols KSYMS also carries, with their own kallsyms type letter
 * (one of "rRdDbB"): where the kernel's ORC tables are, so the host walks
 * kernel stacks without a System.map.  Index i of the name is its slot
 * (OPVM_KSYMS_ORC_*).  Returns the index, or -1 for any other name.
 */
#define OPVM_KSYMS_ORC_IP_START	0	/* __start_orc_unwind_ip */
#define OPVM_KSYMS_ORC_IP_STOP	1	/* __stop_orc_unwind_ip */
#define OPVM_KSYMS_ORC_START	2	/* __start_orc_unwind */
#define OPVM_KSYMS_ORC_STOP	3	/* __stop_orc_unwind */
#define OPVM_KSYMS_TABLES	4
static inline int opvm_ksyms_table(const char *name, unsigned long nlen)
{
	static const char *const names[OPVM_KSYMS_TABLES] = {
		"__start_orc_unwind_ip", "__stop_orc_unwind_ip",
		"__start_orc_unwind", "__stop_orc_unwind",
	};
	int i;

	for (i = 0; i < OPVM_KSYMS_TABLES; i++)
		if (__builtin_strlen(names[i]) == nlen &&
		    !__builtin_memcmp(names[i], name, nlen))
			return i;
	return -1;
}

struct opvm_rec_ksyms_end {
	struct opvm_rec_hdr hdr;
	opvm_u64 nr_syms;	/* symbols sent in KSYMS records */
	opvm_u32 flags;		/* OPVM_KSYMS_* */
	opvm_u32 pad;
};

/*
 * The host's word on the kernel's symbols, once per host session (after
 * each HELLO): reading /proc/kallsyms costs the guest ~300 M instructions
 * (the kernel formats every line), and a host that found vmlinux's symbols
 * elsewhere (introspection of guest memory, a System.map) needs at most the
 * modules'.  The relay sends no KSYMS until it has the word; a host that
 * says nothing (one that predates it) gets everything, as before, once
 * OPVM_KSYMS_WAIT_MS have passed since the session started.  72 bytes like
 * FETCH's fixed part: relays that predate this record frame nothing shorter
 * than that, and skip it as a request of an unknown type.
 */
#define OPVM_KSYMS_WANT_NONE	0	/* nothing: the host has them all */
#define OPVM_KSYMS_WANT_ALL	1	/* /proc/kallsyms, as without a word */
#define OPVM_KSYMS_WANT_MODULES	2	/* the modules' text symbols only */
#define OPVM_KSYMS_WAIT_MS	10000	/* a silent host: ALL after this */

struct opvm_req_ksyms {
	struct opvm_rec_hdr hdr;	/* type OPVM_REQ_KSYMS, seq: the host's */
	opvm_u32 want;		/* OPVM_KSYMS_WANT_*; others read as ALL */
	opvm_u32 flags;		/* 0 */
	opvm_u64 reserved[6];	/* 0 */
};

/*
 * The host's ask for HELLO, once at the start of each connection.  The
 * relay starts a host session with HELLO when it sees the port open, but
 * virtio_console reports only whether a host is connected now: a host that
 * leaves and a next one that comes before the guest handled the first's
 * close (a guest paused meanwhile, or given little CPU by a loaded host)
 * look like one session, and the next host would get no HELLO.  The relay
 * takes the first ask of a session it saw open as answered already (its
 * own HELLO), and any later one as a new host: HELLO and a full walk.  72
 * bytes like FETCH's fixed part (relays that predate it skip it).
 */
struct opvm_req_hello {
	struct opvm_rec_hdr hdr;	/* type OPVM_REQ_HELLO, seq: the host's */
	opvm_u64 reserved[7];		/* 0 */
};

/*
 * Guest files by build-id, so reports need no copy of the guest's disk.
 * The host writes FETCH (host to guest: the only records that way) for an
 * image that has samples and is not in its cache; the relay opens the path,
 * checks that the file is a regular file of at most max_bytes whose GNU
 * build-id is the one asked for, and streams it from offset as FILE_DATA
 * records written through /dev/opvm (flow-controlled like KSYMS), then
 * FILE_END.  The host checks everything again (offsets in order, sizes,
 * its caps, ELF and build-id) before the file enters its cache.
 */
/* A debug file (/usr/lib/debug/.build-id/xx/yyyy.debug, the host's
 * path from the build-id): the relay paces it by CPU too (opvm-relay.c). */
#define OPVM_FETCH_F_DEBUG	0x01
/*
 * A JIT runtime's perf map (perf's jit interface: /tmp/perf-PID.map, text
 * lines "START SIZE name"), not an ELF: the path must be exactly
 * /tmp/perf-<decimal pid>.map, a regular file of the process's owner (or
 * root), not a link; no build-id is checked (build_id_len is 1 and
 * build_id[0] 0, so relays that predate the flag answer -ENOEXEC at
 * once).  It grows while the runtime runs: the host asks again from the
 * offset it has, the relay sends what is there up to max_bytes (not a
 * size limit at open) and ends with FILE_END 0, or -EFBIG when the file
 * goes on past max_bytes.  Paced by CPU like debug files.
 *
 * The same flag asks for a runtime's jitdump (perf's binary format) with
 * the path exactly /tmp/jit-<decimal pid>.dump: the relay opens the file
 * the process mapped under the name jit-<its pid>.dump (perf's agents map
 * it executable wherever they wrote it, /proc/PID/map_files), else that
 * path in the process's root, with the same checks and the same growth.
 * Relays that predate it answer -EINVAL (the path's shape): the perf map
 * still comes.
 */
#define OPVM_FETCH_F_PERFMAP	0x02

struct opvm_req_fetch {
	struct opvm_rec_hdr hdr;	/* type OPVM_REQ_FETCH, seq: the host's */
	opvm_u32 req_id;	/* echoed in FILE_DATA/FILE_END, nonzero */
	opvm_u8 build_id_len;	/* 1..OPVM_BUILD_ID_MAX */
	opvm_u8 flags;		/* OPVM_FETCH_F_*; 0 from older hosts */
	opvm_u16 path_len;	/* 1..OPVM_PATH_MAX */
	opvm_u64 offset;	/* resume from this byte */
	opvm_u64 max_bytes;	/* refuse larger files (FILE_END -EFBIG) */
	opvm_u8 build_id[OPVM_BUILD_ID_MAX];
	/* char path[path_len]; the guest path of the cookie, not terminated */
};

struct opvm_rec_file_data {
	struct opvm_rec_hdr hdr;
	opvm_u32 req_id;
	opvm_u32 bytes;		/* data bytes after the fixed part */
	opvm_u64 offset;	/* file offset of the first byte */
	/* u8 data[bytes]; */
};

struct opvm_rec_file_end {
	struct opvm_rec_hdr hdr;
	opvm_u32 req_id;
	opvm_s32 status;	/* 0, or -errno: -ESTALE build-id differs,
				 * -EFBIG over max_bytes, -ENOENT, -EBUSY ... */
	opvm_u64 size;		/* the file's size */
};

#endif /* OPVM_PROTO_H */
