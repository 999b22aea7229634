// SPDX-License-Identifier: GPL-2.0
/*
 * Hooks: where opvm learns what the guest does.
 *
 * sched_switch only updates this CPU's slot and appends to this CPU's
 * task-switch ring (a handful of stores, one barrier, no lock, no
 * allocation): it runs on every context switch.  Every other hook copies
 * what it needs into an event, takes references on the mm or file the worker
 * will describe, and kicks the worker.
 *
 * Linux 6.1 has no mmap tracepoint: a kretprobe on do_mmap() reports new
 * executable file mappings (ld.so mapping libc, dlopen), and a kprobe on the
 * munmap syscall reports removed ones.  Mappings made by execve() itself are
 * skipped here (in_execve) because the host drops a process's mappings on
 * EXEC: the worker walks the new address space after the EXEC record instead.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kprobes.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/module.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/binfmts.h>
#include <linux/tracepoint.h>
#include "opvm.h"

static struct tracepoint *tp_switch, *tp_fork, *tp_exec, *tp_exit, *tp_cgroup;
static bool cgroup_hooked;

static bool cgroup_hook = true;
module_param(cgroup_hook, bool, 0444);
MODULE_PARM_DESC(cgroup_hook,
		 "hook cgroup_attach_task for cgroup moves without exec (default on; off: seen at exec)");

static void notrace opvm_probe_switch(void *data, bool preempt,
				      struct task_struct *prev,
				      struct task_struct *next,
				      unsigned int prev_state)
{
	struct opvm_slot *s = &opvm_slots[raw_smp_processor_id()];
	struct mm_struct *mm = next->mm;
	u32 seq = s->seq;

	WRITE_ONCE(s->seq, seq + 1);
	smp_wmb();
	s->pid = next->pid;
	s->tgid = next->tgid;
	if (mm) {
		s->flags = 0;
		s->cr3 = opvm_mm_cr3(mm);
	} else {
		s->flags = OPVM_SLOT_KTHREAD;
		s->cr3 = 0;
	}
	smp_wmb();
	WRITE_ONCE(s->seq, seq + 2);
	opvm_switch_log(next, s->cr3, s->flags);
}

static void copy_comm(char *dst, struct task_struct *p)
{
	/* Racy against prctl(PR_SET_NAME) but always terminated. */
	memcpy(dst, p->comm, OPVM_COMM_LEN);
	dst[OPVM_COMM_LEN - 1] = '\0';
}

static void opvm_probe_fork(void *data, struct task_struct *parent,
			    struct task_struct *child)
{
	struct opvm_event *ev;
	unsigned long flags;

	ev = opvm_event_reserve(&flags);
	if (!ev)
		return;
	ev->pid = child->pid;
	ev->tgid = child->tgid;
	ev->ppid = parent->tgid;
	copy_comm(ev->name, child);
	if (child->pid != child->tgid) {
		ev->type = OPVM_EV_THREAD;
	} else {
		ev->type = OPVM_EV_FORK;
		if (child->mm) {
			mmget(child->mm);
			ev->mm = child->mm;
			ev->cr3 = opvm_mm_cr3(child->mm);
		}
	}
	opvm_event_commit(ev, flags);
}

static void opvm_probe_exec(void *data, struct task_struct *p, pid_t old_pid,
			    struct linux_binprm *bprm)
{
	struct opvm_event *ev;
	unsigned long flags;

	ev = opvm_event_reserve(&flags);
	if (!ev)
		return;
	ev->type = OPVM_EV_EXEC;
	ev->pid = p->pid;
	ev->tgid = p->tgid;
	rcu_read_lock();
	ev->ppid = task_tgid_nr(rcu_dereference(p->real_parent));
	rcu_read_unlock();
	copy_comm(ev->name, p);
	if (p->mm) {
		mmget(p->mm);
		ev->mm = p->mm;
		ev->cr3 = opvm_mm_cr3(p->mm);
	}
	if (bprm && bprm->file)
		ev->file = get_file(bprm->file);
	opvm_event_commit(ev, flags);
}

static void opvm_probe_exit(void *data, struct task_struct *p)
{
	struct opvm_event *ev;
	unsigned long flags;

	ev = opvm_event_reserve(&flags);
	if (!ev)
		return;
	/*
	 * do_exit() decremented signal->live before this tracepoint, but
	 * another thread of the group may still be on its way here: several
	 * may see 0.  The worker sends PROC_EXIT once.
	 */
	ev->type = OPVM_EV_EXIT;
	ev->group_dead = atomic_read(&p->signal->live) == 0;
	ev->pid = p->pid;
	ev->tgid = p->tgid;
	opvm_event_commit(ev, flags);
}

/*
 * cgroup_attach_task: a process (or thread) was moved, e.g. by a write to
 * cgroup.procs, which happens after fork, so fork and exec alone would
 * miss it.  Fires once per move, for every hierarchy; the worker reads
 * the default hierarchy's path and sends it (the host ignores repeats).
 * Called under cgroup_mutex and a spinlock: only an event is queued.
 */
struct cgroup;
static void opvm_probe_cgroup(void *data, struct cgroup *dst, const char *path,
			      struct task_struct *task, bool threadgroup)
{
	struct opvm_event *ev;
	unsigned long flags;

	ev = opvm_event_reserve(&flags);
	if (!ev)
		return;
	ev->type = OPVM_EV_CGROUP;
	ev->pid = task->pid;
	ev->tgid = task->tgid;
	opvm_event_commit(ev, flags);
}

static int opvm_module_notify(struct notifier_block *nb, unsigned long action,
			      void *data)
{
	struct module *mod = data;
	struct opvm_event *ev;
	unsigned long flags;

	if (action != MODULE_STATE_COMING && action != MODULE_STATE_GOING)
		return NOTIFY_DONE;
	ev = opvm_event_reserve(&flags);
	if (!ev)
		return NOTIFY_DONE;
	ev->type = action == MODULE_STATE_COMING ? OPVM_EV_MODULE :
						   OPVM_EV_MODULE_FREE;
	ev->mod.base = (unsigned long)mod->core_layout.base;
	ev->mod.size = mod->core_layout.text_size;
	strscpy(ev->name, mod->name, sizeof(ev->name));
	opvm_event_commit(ev, flags);
	return NOTIFY_DONE;
}

static struct notifier_block opvm_module_nb = {
	.notifier_call = opvm_module_notify,
};

static void find_tp(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "sched_switch"))
		tp_switch = tp;
	else if (!strcmp(tp->name, "sched_process_fork"))
		tp_fork = tp;
	else if (!strcmp(tp->name, "sched_process_exec"))
		tp_exec = tp;
	else if (!strcmp(tp->name, "sched_process_exit"))
		tp_exit = tp;
	else if (!strcmp(tp->name, "cgroup_attach_task"))
		tp_cgroup = tp;
}

int opvm_hooks_register(void)
{
	int ret;

	for_each_kernel_tracepoint(find_tp, NULL);
	if (!tp_switch || !tp_fork || !tp_exec || !tp_exit) {
		pr_err("sched tracepoints not found (kernel built without CONFIG_TRACEPOINTS?)\n");
		return -ENOENT;
	}
	ret = tracepoint_probe_register(tp_exit, opvm_probe_exit, NULL);
	if (ret)
		goto err;
	ret = tracepoint_probe_register(tp_exec, opvm_probe_exec, NULL);
	if (ret)
		goto err_exit;
	ret = tracepoint_probe_register(tp_fork, opvm_probe_fork, NULL);
	if (ret)
		goto err_exec;
	ret = tracepoint_probe_register(tp_switch, opvm_probe_switch, NULL);
	if (ret)
		goto err_fork;
	ret = register_module_notifier(&opvm_module_nb);
	if (ret)
		goto err_switch;
	/* optional: without it a move is seen at the process's next exec */
	cgroup_hooked = cgroup_hook && tp_cgroup &&
			!tracepoint_probe_register(tp_cgroup, opvm_probe_cgroup, NULL);
	return 0;

err_switch:
	tracepoint_probe_unregister(tp_switch, opvm_probe_switch, NULL);
err_fork:
	tracepoint_probe_unregister(tp_fork, opvm_probe_fork, NULL);
err_exec:
	tracepoint_probe_unregister(tp_exec, opvm_probe_exec, NULL);
err_exit:
	tracepoint_probe_unregister(tp_exit, opvm_probe_exit, NULL);
err:
	tracepoint_synchronize_unregister();
	pr_err("registering tracepoint probes failed: %d\n", ret);
	return ret;
}

void opvm_hooks_unregister(void)
{
	if (cgroup_hooked)
		tracepoint_probe_unregister(tp_cgroup, opvm_probe_cgroup, NULL);
	cgroup_hooked = false;
	unregister_module_notifier(&opvm_module_nb);
	tracepoint_probe_unregister(tp_switch, opvm_probe_switch, NULL);
	tracepoint_probe_unregister(tp_fork, opvm_probe_fork, NULL);
	tracepoint_probe_unregister(tp_exec, opvm_probe_exec, NULL);
	tracepoint_probe_unregister(tp_exit, opvm_probe_exit, NULL);
	tracepoint_synchronize_unregister();
}

/* ---- executable mappings ------------------------------------------------- */

struct opvm_mmap_ctx {
	struct file *file;
	unsigned long len;
	unsigned long prot;
	unsigned long pgoff;
};

/*
 * do_mmap(file, addr, len, prot, flags, pgoff, populate, uf): the file is
 * held by do_mmap()'s caller until it returns, so the return handler may
 * take its own reference.
 */
static int opvm_mmap_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct opvm_mmap_ctx *c = (struct opvm_mmap_ctx *)ri->data;
	struct file *file = (struct file *)regs->di;
	unsigned long prot = regs->cx;

	if (!file || !(prot & PROT_EXEC) || current->in_execve || !current->mm ||
	    (current->flags & PF_KTHREAD))
		return 1;	/* not interesting: skip the return handler */
	c->file = file;
	c->len = regs->dx;
	c->prot = prot;
	c->pgoff = regs->r9;
	return 0;
}

static int opvm_mmap_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct opvm_mmap_ctx *c = (struct opvm_mmap_ctx *)ri->data;
	unsigned long addr = regs_return_value(regs);
	struct opvm_event *ev;
	unsigned long flags;

	if (IS_ERR_VALUE(addr))
		return 0;
	ev = opvm_event_reserve(&flags);
	if (!ev)
		return 0;
	ev->type = OPVM_EV_MMAP;
	ev->pid = current->pid;
	ev->tgid = current->tgid;
	ev->prot = c->prot & (PROT_READ | PROT_WRITE | PROT_EXEC);
	ev->map.start = addr;
	ev->map.end = addr + PAGE_ALIGN(c->len);
	ev->map.pgoff = (u64)c->pgoff << PAGE_SHIFT;
	ev->file = get_file(c->file);
	opvm_event_commit(ev, flags);
	return 0;
}

static struct kretprobe opvm_mmap_krp = {
	.kp.symbol_name = "do_mmap",
	.entry_handler = opvm_mmap_entry,
	.handler = opvm_mmap_ret,
	.data_size = sizeof(struct opvm_mmap_ctx),
	.maxactive = 64,
};

static bool range_has_exec_file(struct mm_struct *mm, unsigned long start,
				unsigned long end)
{
	struct vm_area_struct *vma;
	int n = 0;

	for (vma = find_vma_intersection(mm, start, end); vma && n < 64;
	     vma = find_vma_intersection(mm, vma->vm_end, end), n++)
		if ((vma->vm_flags & VM_EXEC) && vma->vm_file)
			return true;
	return n >= 64;
}

/*
 * munmap(2) entry.  Only ranges that hold an executable file mapping are
 * reported, so malloc's munmap() of anonymous memory costs nothing on the
 * channel.  The VMA tree may only be looked at with mmap_lock held: if the
 * trylock fails, report the range anyway.
 */
static int opvm_munmap_pre(struct kprobe *kp, struct pt_regs *regs)
{
	struct pt_regs *uregs = (struct pt_regs *)regs->di;
	struct mm_struct *mm = current->mm;
	unsigned long start, len, end;
	struct opvm_event *ev;
	unsigned long flags;
	bool hit = true;

	if (!mm || !uregs)
		return 0;
	start = uregs->di;
	len = PAGE_ALIGN(uregs->si);
	if (offset_in_page(start) || !len || start + len < start)
		return 0;
	end = start + len;
	if (mmap_read_trylock(mm)) {
		hit = range_has_exec_file(mm, start, end);
		mmap_read_unlock(mm);
	}
	if (!hit)
		return 0;
	ev = opvm_event_reserve(&flags);
	if (!ev)
		return 0;
	ev->type = OPVM_EV_MUNMAP;
	ev->pid = current->pid;
	ev->tgid = current->tgid;
	ev->map.start = start;
	ev->map.end = end;
	opvm_event_commit(ev, flags);
	return 0;
}

static struct kprobe opvm_munmap_kp = {
	.symbol_name = "__x64_sys_munmap",
	.pre_handler = opvm_munmap_pre,
};

static bool mmap_krp_on, munmap_kp_on;

int opvm_hooks_mmap_register(void)
{
	int ret;

	ret = register_kretprobe(&opvm_mmap_krp);
	if (ret)
		pr_warn("kretprobe on do_mmap failed (%d): libraries mapped after exec are found by rescans\n",
			ret);
	else
		mmap_krp_on = true;
	ret = register_kprobe(&opvm_munmap_kp);
	if (ret)
		pr_warn("kprobe on munmap failed (%d): unmaps are not reported\n",
			ret);
	else
		munmap_kp_on = true;
	return mmap_krp_on ? 0 : -ENOENT;
}

void opvm_hooks_mmap_unregister(void)
{
	if (munmap_kp_on)
		unregister_kprobe(&opvm_munmap_kp);
	if (mmap_krp_on) {
		unregister_kretprobe(&opvm_mmap_krp);
		if (opvm_mmap_krp.nmissed)
			pr_info("do_mmap kretprobe missed %d calls\n",
				opvm_mmap_krp.nmissed);
	}
	munmap_kp_on = false;
	mmap_krp_on = false;
}
