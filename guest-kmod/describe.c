// SPDX-License-Identifier: GPL-2.0
/*
 * The worker: turns events into channel records.
 *
 * Runs on an ordered workqueue, so records leave in the order the hooks saw
 * the events, and the cookie table needs no lock (only this worker touches
 * it).  Everything that may sleep happens here: d_path(), reading build-ids
 * with kernel_read(), mmap_read_lock() for VMA walks, mmput()/fput().
 *
 * The first run sends HELLO, describes every existing process and module,
 * then SYNC; events queued meanwhile wait behind it.  A resync request
 * (the relay saw a host connect) drops the unread records and cookies and
 * does the same again.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cgroup.h>
#include <linux/dcache.h>
#include <linux/kernfs.h>
#include <linux/elf.h>
#include <linux/file.h>
#include <linux/hashtable.h>
#include <linux/io.h>
#include <linux/kprobes.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/module.h>
#include <linux/path.h>
#include <linux/rculist.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/utsname.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <asm/tsc.h>
#include "opvm.h"

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID		3
#endif

#define OPVM_MAX_COOKIES	4096
#define OPVM_VMA_BATCH		64

struct opvm_cookie {
	struct hlist_node node;
	struct path path;	/* reference held: keeps the dentry unique */
	u64 id;
};

struct opvm_vma {
	u64 start, end, pgoff;
	u32 prot;
	struct file *file;	/* reference or NULL */
};

static struct workqueue_struct *opvm_wq;
static struct delayed_work opvm_work;
static struct delayed_work opvm_rescan_work;
bool opvm_rescan_on;	/* no do_mmap kretprobe: rescan after exec */
static bool opvm_synced;
static atomic_t opvm_resync = ATOMIC_INIT(0);
static DEFINE_HASHTABLE(cookies, 10);
static unsigned int nr_cookies;
static u64 next_cookie = 1;
/* Worker-only scratch space. */
static u8 *rec_buf;		/* OPVM_REC_MAX bytes */
static char *path_buf;		/* PATH_MAX bytes */
static struct opvm_vma *vma_buf;	/* OPVM_VMA_BATCH entries */

/*
 * Events are handled in batches, one jiffy after the first of them: a fork
 * storm then wakes the worker once per tick instead of once per event.
 */
void opvm_kick(void)
{
	if (opvm_wq)
		queue_delayed_work(opvm_wq, &opvm_work, 1);
}

/* Load and resync: no reason to wait. */
static void opvm_kick_now(void)
{
	if (opvm_wq)
		mod_delayed_work(opvm_wq, &opvm_work, 0);
}

void opvm_request_resync(void)
{
	atomic_set(&opvm_resync, 1);
	opvm_kick_now();
}

/*
 * kallsyms_lookup_name() is not exported; a kprobe registered by name
 * resolves its address for us.
 */
unsigned long opvm_lookup_name(const char *name)
{
	static unsigned long (*lookup)(const char *name);

	if (!lookup) {
		struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };

		if (register_kprobe(&kp) < 0)
			return 0;
		lookup = (unsigned long (*)(const char *))kp.addr;
		unregister_kprobe(&kp);
	}
	return lookup ? lookup(name) : 0;
}

#define REC_INIT(rec, t) do {					\
	memset(&(rec), 0, sizeof(rec));				\
	(rec).hdr.type = (t);					\
	(rec).hdr.len = sizeof(rec);				\
} while (0)

/* ---- build-id ------------------------------------------------------------ */

/*
 * Read the GNU build-id note of an ELF file through its page cache.
 * build_id_parse() is not exported in 6.1, and it only looks at the first
 * page anyway.  The file is guest data, but a root-owned one: still, every
 * offset and size is bounded before use.
 */
static int read_build_id(struct file *file, u8 *id, u8 *id_len)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	loff_t pos = 0;
	u8 *note;
	int i, ret = -ENOENT;

	*id_len = 0;
	if (kernel_read(file, &eh, sizeof(eh), &pos) != sizeof(eh))
		return -EIO;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 64)
		return -ENOEXEC;
	note = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!note)
		return -ENOMEM;
	for (i = 0; i < eh.e_phnum && ret; i++) {
		size_t off = 0, len;

		pos = eh.e_phoff + (u64)i * sizeof(ph);
		if (kernel_read(file, &ph, sizeof(ph), &pos) != sizeof(ph))
			break;
		if (ph.p_type != PT_NOTE)
			continue;
		len = min_t(u64, ph.p_filesz, PAGE_SIZE);
		pos = ph.p_offset;
		if (kernel_read(file, note, len, &pos) != len)
			continue;
		while (off + sizeof(Elf64_Nhdr) <= len) {
			Elf64_Nhdr *nh = (Elf64_Nhdr *)(note + off);
			size_t namesz = ALIGN((size_t)nh->n_namesz, 4);
			size_t descsz = ALIGN((size_t)nh->n_descsz, 4);
			size_t name_off = off + sizeof(*nh);

			if (nh->n_namesz > len || nh->n_descsz > len ||
			    name_off + namesz + descsz > len)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(note + name_off, "GNU", 4) &&
			    nh->n_descsz > 0 &&
			    nh->n_descsz <= OPVM_BUILD_ID_MAX) {
				memcpy(id, note + name_off + namesz,
				       nh->n_descsz);
				*id_len = nh->n_descsz;
				ret = 0;
				break;
			}
			off = name_off + namesz + descsz;
		}
	}
	kfree(note);
	return ret;
}

/* ---- cookies ------------------------------------------------------------- */

static void cookies_flush(void)
{
	struct opvm_cookie *c;
	struct hlist_node *tmp;
	int bkt;

	hash_for_each_safe(cookies, bkt, tmp, c, node) {
		hash_del(&c->node);
		path_put(&c->path);
		kfree(c);
	}
	nr_cookies = 0;
}

/* Cookie of file, sending its COOKIE record first if it is new.  0 on error. */
static u64 cookie_get(struct file *file)
{
	struct opvm_rec_cookie *rec = (struct opvm_rec_cookie *)rec_buf;
	struct dentry *key = file->f_path.dentry;
	struct opvm_cookie *c;
	size_t len;
	char *p;

	hash_for_each_possible(cookies, c, node, (unsigned long)key)
		if (c->path.dentry == key && c->path.mnt == file->f_path.mnt)
			return c->id;
	/* A full table starts over: ids are never reused, only resent. */
	if (nr_cookies >= OPVM_MAX_COOKIES)
		cookies_flush();
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return 0;
	c->path = file->f_path;
	path_get(&c->path);
	c->id = next_cookie++;
	hash_add(cookies, &c->node, (unsigned long)key);
	nr_cookies++;

	memset(rec, 0, sizeof(*rec));
	rec->hdr.type = OPVM_REC_COOKIE;
	rec->cookie = c->id;
	read_build_id(file, rec->build_id, &rec->build_id_len);
	p = d_path(&file->f_path, path_buf, PATH_MAX);
	if (IS_ERR(p))
		p = "[unknown]";
	len = min_t(size_t, strlen(p), OPVM_REC_MAX - sizeof(*rec));
	len = min_t(size_t, len, OPVM_PATH_MAX);
	memcpy(rec + 1, p, len);
	rec->path_len = len;
	rec->hdr.len = ALIGN(sizeof(*rec) + len, OPVM_REC_ALIGN);
	memset((u8 *)(rec + 1) + len, 0, rec->hdr.len - sizeof(*rec) - len);
	opvm_ring_put(rec);
	return c->id;
}

/* ---- records ------------------------------------------------------------- */

static void send_mmap(u32 tgid, u64 start, u64 end, u64 pgoff, u32 prot,
		      struct file *file)
{
	struct opvm_rec_mmap rec;

	REC_INIT(rec, OPVM_REC_MMAP);
	rec.tgid = tgid;
	rec.prot = prot;
	rec.start = start;
	rec.end = end;
	rec.pgoff = pgoff;
	rec.cookie = file ? cookie_get(file) : 0;
	opvm_ring_put(&rec);
}

static u32 vm_prot(unsigned long vm_flags)
{
	return (vm_flags & VM_READ ? PROT_READ : 0) |
	       (vm_flags & VM_WRITE ? PROT_WRITE : 0) |
	       (vm_flags & VM_EXEC ? PROT_EXEC : 0);
}

/*
 * MMAP every executable mapping of mm, in batches: the VMAs are collected
 * under mmap_read_lock, then described (reading build-ids) without it.
 */
static void describe_mm(u32 tgid, struct mm_struct *mm)
{
	unsigned long next = 0;
	int n, i;

	do {
		struct vm_area_struct *vma;

		n = 0;
		if (mmap_read_lock_killable(mm))
			return;
		{
			VMA_ITERATOR(vmi, mm, next);

			for_each_vma(vmi, vma) {
				next = vma->vm_end;
				if (!(vma->vm_flags & VM_EXEC))
					continue;
				vma_buf[n].start = vma->vm_start;
				vma_buf[n].end = vma->vm_end;
				vma_buf[n].pgoff = (u64)vma->vm_pgoff << PAGE_SHIFT;
				vma_buf[n].prot = vm_prot(vma->vm_flags);
				vma_buf[n].file = vma->vm_file ?
						  get_file(vma->vm_file) : NULL;
				if (!vma_buf[n].file)
					vma_buf[n].pgoff = 0;
				if (++n == OPVM_VMA_BATCH)
					break;
			}
		}
		mmap_read_unlock(mm);
		for (i = 0; i < n; i++) {
			send_mmap(tgid, vma_buf[i].start, vma_buf[i].end,
				  vma_buf[i].pgoff, vma_buf[i].prot,
				  vma_buf[i].file);
			if (vma_buf[i].file)
				fput(vma_buf[i].file);
		}
		cond_resched();
	} while (n == OPVM_VMA_BATCH);
}

static struct file *mm_exe_file(struct mm_struct *mm)
{
	struct file *f;

	rcu_read_lock();
	f = rcu_dereference(mm->exe_file);
	if (f && !get_file_rcu(f))
		f = NULL;
	rcu_read_unlock();
	return f;
}

static void send_proc(u16 type, u32 tgid, u32 ppid, u64 cr3, const char *comm,
		      struct file *exe)
{
	struct opvm_rec_proc rec;

	REC_INIT(rec, type);
	rec.tgid = tgid;
	rec.ppid = ppid;
	rec.cr3 = cr3;
	rec.exe_cookie = exe ? cookie_get(exe) : 0;
	strscpy(rec.comm, comm, sizeof(rec.comm));
	opvm_ring_put(&rec);
}

static void send_exit(u16 type, u32 tid, u32 tgid)
{
	struct opvm_rec_exit rec;

	REC_INIT(rec, type);
	rec.tid = tid;
	rec.tgid = tgid;
	opvm_ring_put(&rec);
}

static void send_thread(u32 tid, u32 tgid, const char *comm)
{
	struct opvm_rec_thread rec;

	REC_INIT(rec, OPVM_REC_THREAD);
	rec.tid = tid;
	rec.tgid = tgid;
	strscpy(rec.comm, comm, sizeof(rec.comm));
	opvm_ring_put(&rec);
}

/*
 * CGROUP for t's process: its default-hierarchy (v2) cgroup path, as
 * /proc/PID/cgroup's "0::" line shows it, cut at OPVM_CGROUP_PATH_MAX.
 * Under RCU the css_set and its cgroup stay (both are freed after a grace
 * period) and so does the cgroup's kernfs node (put when it is freed);
 * kernfs_path() only takes a spinlock.  Only the worker calls this, so one
 * static buffer does.
 */
static void send_cgroup(struct task_struct *t)
{
	static struct {
		struct opvm_rec_cgroup c;
		char path[OPVM_CGROUP_PATH_MAX + OPVM_REC_ALIGN];
	} rec;
	struct cgroup *cgrp;
	int len;

	memset(&rec, 0, sizeof(rec));
	rcu_read_lock();
	cgrp = task_dfl_cgroup(t);
	rec.c.id = cgroup_id(cgrp);
	len = kernfs_path(cgrp->kn, rec.path, OPVM_CGROUP_PATH_MAX + 1);
	rcu_read_unlock();
	if (len <= 0)
		return;
	if (len > OPVM_CGROUP_PATH_MAX) {
		len = OPVM_CGROUP_PATH_MAX;
		rec.c.flags = OPVM_CGROUP_TRUNCATED;
	}
	memset(rec.path + len, 0, sizeof(rec.path) - len);
	rec.c.hdr.type = OPVM_REC_CGROUP;
	rec.c.hdr.len = ALIGN(sizeof(rec.c) + len, OPVM_REC_ALIGN);
	rec.c.tgid = t->tgid;
	rec.c.path_len = len;
	opvm_ring_put(&rec);
}

/* send_cgroup() for process tgid, if it still exists. */
static void send_cgroup_of(pid_t tgid)
{
	struct pid *pid = find_get_pid(tgid);
	struct task_struct *task = get_pid_task(pid, PIDTYPE_PID);

	put_pid(pid);
	if (!task)
		return;
	send_cgroup(task);
	put_task_struct(task);
}

static void send_module(u16 type, const char *name, u64 base, u64 size)
{
	struct opvm_rec_module rec;

	REC_INIT(rec, type);
	rec.base = base;
	rec.size = size;
	strscpy(rec.name, name, sizeof(rec.name));
	opvm_ring_put(&rec);
}

/* ---- initial walk -------------------------------------------------------- */

/* HELLO and its switch-ring tail (opvm_proto.h). */
static void send_hello(void)
{
	struct {
		struct opvm_rec_hello h;
		struct opvm_hello_switch sw;
	} rec;

	REC_INIT(rec.h, OPVM_REC_HELLO);
	rec.h.hdr.len = sizeof(rec);
	rec.h.version = OPVM_PROTO_VERSION;
	rec.h.nr_cpus = nr_cpu_ids;
	rec.h.slot_pa = virt_to_phys(opvm_slots);
	rec.h.slot_size = sizeof(struct opvm_slot);
	rec.h.anchor_addr = (unsigned long)_printk;
	strscpy(rec.h.anchor_name, "_printk", sizeof(rec.h.anchor_name));
	rec.h.text_addr = opvm_lookup_name("_text");
	strscpy(rec.h.release, utsname()->release, sizeof(rec.h.release));
	memset(&rec.sw, 0, sizeof(rec.sw));
	if (opvm_switch_block) {
		rec.sw.switch_pa = virt_to_phys(opvm_switch_block);
		rec.sw.switch_stride = opvm_switch_stride;
		rec.sw.switch_entries = opvm_switch_entries;
		rec.sw.tsc_khz = tsc_khz;
	}
	opvm_ring_put(&rec);
}

static void describe_task(struct task_struct *p)
{
	struct mm_struct *mm = get_task_mm(p);
	struct file *exe = mm ? mm_exe_file(mm) : NULL;
	struct task_struct *t;
	char comm[TASK_COMM_LEN];
	u32 ppid;

	get_task_comm(comm, p);
	rcu_read_lock();
	ppid = task_tgid_nr(rcu_dereference(p->real_parent));
	rcu_read_unlock();
	send_proc(OPVM_REC_PROC, p->tgid, ppid, mm ? opvm_mm_cr3(mm) : 0, comm,
		  exe);
	send_cgroup(p);
	if (exe)
		fput(exe);
	/* Threads: records go into the ring, which does not sleep. */
	rcu_read_lock();
	for_each_thread(p, t) {
		if (t == p)
			continue;
		send_thread(t->pid, t->tgid, t->comm);
	}
	rcu_read_unlock();
	if (mm) {
		describe_mm(p->tgid, mm);
		mmput(mm);
	}
}

static u64 walk_processes(void)
{
	struct task_struct **tasks, *p;
	unsigned int cap, n = 0, i;

	cap = 64;
	rcu_read_lock();
	for_each_process(p)
		cap++;
	rcu_read_unlock();
	tasks = kvmalloc_array(cap, sizeof(*tasks), GFP_KERNEL);
	if (!tasks) {
		opvm_ring_lost(1);
		return 0;
	}
	rcu_read_lock();
	for_each_process(p) {
		if (n == cap)
			break;
		get_task_struct(p);
		tasks[n++] = p;
	}
	rcu_read_unlock();
	for (i = 0; i < n; i++) {
		describe_task(tasks[i]);
		put_task_struct(tasks[i]);
		cond_resched();
	}
	kvfree(tasks);
	return n;
}

/*
 * The module list head and its mutex are not exported; both are found
 * through kallsyms.  Without them only modules loaded from now on are seen.
 */
static u64 walk_modules(void)
{
	struct list_head *head = (void *)opvm_lookup_name("modules");
	struct mutex *lock = (void *)opvm_lookup_name("module_mutex");
	struct module *mod;
	u64 n = 0;

	if (!head || !lock) {
		pr_warn("module list not found: modules loaded before opvm are not reported\n");
		send_module(OPVM_REC_MODULE, THIS_MODULE->name,
			    (unsigned long)THIS_MODULE->core_layout.base,
			    THIS_MODULE->core_layout.text_size);
		return 1;
	}
	mutex_lock(lock);
	list_for_each_entry(mod, head, list) {
		if (mod->state == MODULE_STATE_UNFORMED)
			continue;
		send_module(OPVM_REC_MODULE, mod->name,
			    (unsigned long)mod->core_layout.base,
			    mod->core_layout.text_size);
		n++;
	}
	mutex_unlock(lock);
	return n;
}

/*
 * Events queued before the walk starts describe history the walk already
 * sees in its newer state (a fork and exec replayed after the walk would
 * briefly rename a process): they are dropped.  Events queued during the
 * walk are kept; replaying them is at worst redundant.
 */
static void initial_walk(void)
{
	unsigned int stale = opvm_events_pending();
	struct opvm_rec_sync rec;
	struct opvm_event ev;

	send_hello();
	REC_INIT(rec, OPVM_REC_SYNC);
	rec.nr_procs = walk_processes();
	rec.nr_modules = walk_modules();
	opvm_ring_put(&rec);
	while (stale-- && opvm_event_pop(&ev))
		opvm_event_release(&ev);
}

/* ---- rescans (without the do_mmap kretprobe) --------------------------- */

/*
 * Without the kretprobe, libraries ld.so maps after exec would stay unknown:
 * each exec'd process is walked again 50 ms, 200 ms, 800 ms and 3.2 s later.
 * The table is small; when it is full the oldest entry is replaced.
 * Runs on the same ordered workqueue as everything else.
 */
#define OPVM_RESCANS		64
#define OPVM_RESCAN_STEPS	4

static struct {
	pid_t tgid;		/* 0: free */
	unsigned int step;
	unsigned long due;	/* jiffies */
} rescans[OPVM_RESCANS];

static void rescan_add(pid_t tgid)
{
	unsigned int i, victim = 0;

	for (i = 0; i < OPVM_RESCANS; i++) {
		if (!rescans[i].tgid || rescans[i].tgid == tgid) {
			victim = i;
			break;
		}
		if (time_before(rescans[i].due, rescans[victim].due))
			victim = i;
	}
	rescans[victim].tgid = tgid;
	rescans[victim].step = 0;
	rescans[victim].due = jiffies + msecs_to_jiffies(50);
	queue_delayed_work(opvm_wq, &opvm_rescan_work, msecs_to_jiffies(50));
}

static void opvm_rescan_fn(struct work_struct *work)
{
	unsigned long next = 0;
	bool pending = false;
	unsigned int i;

	for (i = 0; i < OPVM_RESCANS; i++) {
		struct task_struct *task;
		struct mm_struct *mm = NULL;
		struct pid *pid;

		if (!rescans[i].tgid)
			continue;
		if (time_before(jiffies, rescans[i].due)) {
			if (!pending || time_before(rescans[i].due, next))
				next = rescans[i].due;
			pending = true;
			continue;
		}
		pid = find_get_pid(rescans[i].tgid);
		task = get_pid_task(pid, PIDTYPE_PID);
		put_pid(pid);
		if (task) {
			mm = get_task_mm(task);
			put_task_struct(task);
		}
		if (mm) {
			describe_mm(rescans[i].tgid, mm);
			mmput(mm);
		}
		if (!mm || ++rescans[i].step == OPVM_RESCAN_STEPS) {
			rescans[i].tgid = 0;
			continue;
		}
		rescans[i].due = jiffies + msecs_to_jiffies(50 << (2 * rescans[i].step));
		if (!pending || time_before(rescans[i].due, next))
			next = rescans[i].due;
		pending = true;
	}
	if (pending)
		queue_delayed_work(opvm_wq, &opvm_rescan_work,
				   time_after(next, jiffies) ? next - jiffies : 0);
}

/* ---- events -------------------------------------------------------------- */

/*
 * Thread groups whose PROC_EXIT went out recently: the threads of a group
 * that exit together may each see signal->live at 0.  A tgid leaves the
 * table when it is announced again (pid reuse) or is pushed out.
 */
#define OPVM_EXITED	64
static pid_t exited[OPVM_EXITED];
static unsigned int exited_next;

static bool exited_test_and_set(pid_t tgid)
{
	unsigned int i;

	for (i = 0; i < OPVM_EXITED; i++)
		if (exited[i] == tgid)
			return true;
	exited[exited_next++ % OPVM_EXITED] = tgid;
	return false;
}

static void exited_clear(pid_t tgid)
{
	unsigned int i;

	for (i = 0; i < OPVM_EXITED; i++)
		if (exited[i] == tgid)
			exited[i] = 0;
}

static void handle_event(struct opvm_event *ev)
{
	switch (ev->type) {
	case OPVM_EV_FORK:
	case OPVM_EV_EXEC: {
		struct file *exe = ev->file;

		exited_clear(ev->tgid);
		if (!exe && ev->mm)
			exe = mm_exe_file(ev->mm);
		send_proc(ev->type == OPVM_EV_FORK ? OPVM_REC_PROC :
						     OPVM_REC_EXEC,
			  ev->tgid, ev->ppid, ev->cr3, ev->name, exe);
		send_cgroup_of(ev->tgid);
		if (exe && exe != ev->file)
			fput(exe);
		/*
		 * Only our reference left: the process exec'd (its EXEC
		 * follows, with the new mappings) or exited.  Describing the
		 * dead address space would only be undone.
		 */
		if (ev->mm && atomic_read(&ev->mm->mm_users) > 1)
			describe_mm(ev->tgid, ev->mm);
		if (ev->type == OPVM_EV_EXEC && opvm_rescan_on)
			rescan_add(ev->tgid);
		break;
	}
	case OPVM_EV_THREAD:
		send_thread(ev->pid, ev->tgid, ev->name);
		break;
	case OPVM_EV_CGROUP:
		send_cgroup_of(ev->tgid);
		break;
	case OPVM_EV_EXIT:
		if (ev->pid != ev->tgid || !ev->group_dead)
			send_exit(OPVM_REC_THREAD_EXIT, ev->pid, ev->tgid);
		if (ev->group_dead && !exited_test_and_set(ev->tgid))
			send_exit(OPVM_REC_PROC_EXIT, ev->tgid, ev->tgid);
		break;
	case OPVM_EV_MMAP:
		send_mmap(ev->tgid, ev->map.start, ev->map.end, ev->map.pgoff,
			  ev->prot, ev->file);
		break;
	case OPVM_EV_MUNMAP: {
		struct opvm_rec_munmap rec;

		REC_INIT(rec, OPVM_REC_MUNMAP);
		rec.tgid = ev->tgid;
		rec.start = ev->map.start;
		rec.end = ev->map.end;
		opvm_ring_put(&rec);
		break;
	}
	case OPVM_EV_MODULE:
	case OPVM_EV_MODULE_FREE:
		send_module(ev->type == OPVM_EV_MODULE ? OPVM_REC_MODULE :
							 OPVM_REC_MODULE_FREE,
			    ev->name, ev->mod.base, ev->mod.size);
		break;
	}
}

static void opvm_work_fn(struct work_struct *work)
{
	struct opvm_event ev;
	unsigned int n = 0;

	if (atomic_xchg(&opvm_resync, 0)) {
		/*
		 * The ring was reset by the writer; a new host session knows
		 * no cookie: send them again.
		 */
		cookies_flush();
		opvm_synced = false;
	}
	if (!opvm_synced) {
		initial_walk();
		opvm_synced = true;
	}
	while (opvm_event_pop(&ev)) {
		handle_event(&ev);
		opvm_event_release(&ev);
		if (!(++n % 64))
			cond_resched();
	}
}

int opvm_describe_init(void)
{
	rec_buf = kmalloc(OPVM_REC_MAX, GFP_KERNEL);
	path_buf = kmalloc(PATH_MAX, GFP_KERNEL);
	vma_buf = kcalloc(OPVM_VMA_BATCH, sizeof(*vma_buf), GFP_KERNEL);
	INIT_DELAYED_WORK(&opvm_work, opvm_work_fn);
	INIT_DELAYED_WORK(&opvm_rescan_work, opvm_rescan_fn);
	opvm_wq = alloc_ordered_workqueue("opvm", 0);
	if (!rec_buf || !path_buf || !vma_buf || !opvm_wq) {
		opvm_describe_exit();
		return -ENOMEM;
	}
	return 0;
}

/* Call after the hooks are gone: flushes pending work, drops all references. */
void opvm_describe_exit(void)
{
	if (opvm_wq) {
		/* Pending events may still ask for rescans: flush, then cancel. */
		flush_delayed_work(&opvm_work);
		flush_workqueue(opvm_wq);
		cancel_delayed_work_sync(&opvm_rescan_work);
		destroy_workqueue(opvm_wq);
		opvm_wq = NULL;
	}
	cookies_flush();
	kfree(vma_buf);
	kfree(path_buf);
	kfree(rec_buf);
	vma_buf = NULL;
	path_buf = NULL;
	rec_buf = NULL;
}
