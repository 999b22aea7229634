// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel's symbols for the host when kptr_restrict hides them.
 *
 * The relay sends /proc/kallsyms as KSYMS records.  At kptr_restrict=2 that
 * file shows every address as 0, even to root; the relay then writes "ksym"
 * to /dev/opvm and this file walks the symbols itself and puts the same
 * records into the ring.  The addresses go to the host only, never to guest
 * user space: the guest admin's choice still holds inside the guest, and
 * the host sees the guest's kernel addresses in every sample anyway.
 *
 * The walk needs only sprint_symbol() (exported): for an address it gives
 * "name+off/size [module]", so each symbol's start and the next one's
 * follow.  It covers vmlinux's text [_stext, _etext), its init text and
 * each module's core text, a record at a time, paced like the relay's bulk writes: while the
 * ring is over half full the work item comes back later.  Types are not
 * known this way: every symbol is sent as 'T' (the host only needs text).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kallsyms.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>
#include "opvm.h"

#define KSYMS_RETRY_MS	20	/* the ring is busy: look again then */
#define KSYMS_BATCH	16	/* records per work run */

static struct {
	struct mutex lock;	/* everything below; the work holds it */
	bool active;
	bool modules_only;	/* "kmod": no vmlinux regions */
	unsigned long addr;	/* next address to look at */
	unsigned long end;	/* end of the current region */
	unsigned int region;	/* next_region(): 0 text, 1 init, 2.. modules */
	char module[OPVM_MODNAME_LEN];	/* the region's, "" for vmlinux */
	u64 nr;			/* symbols sent */
	ktime_t t0;		/* when the walk started */
	bool pending;		/* buf holds a record the ring refused */
	union {
		struct opvm_rec_ksyms k;
		struct opvm_rec_ksyms_end e;
		char buf[OPVM_REC_MAX];
	} rec;
} walk = { .lock = __MUTEX_INITIALIZER(walk.lock) };

static void ksyms_work_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(ksyms_work, ksyms_work_fn);

/*
 * Parses sprint_symbol()'s "name+0xoff/0xsize[ [module]]" in place.
 * Returns the name, or NULL when no symbol covers the address.
 */
static char *parse_symbol(char *s, unsigned long *off, unsigned long *size)
{
	char *plus, *slash, *sp = strchr(s, ' ');

	if (sp)
		*sp = '\0';
	slash = strrchr(s, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	plus = strrchr(s, '+');
	if (!plus || plus == s)
		return NULL;
	*plus = '\0';
	if (kstrtoul(plus + 1, 16, off) || kstrtoul(slash + 1, 16, size))
		return NULL;
	return s;
}

/* [start, end) of vmlinux text named by two symbols, empty if unknown. */
static void kernel_region(const char *start, const char *end)
{
	walk.addr = opvm_lookup_name(start);
	walk.end = opvm_lookup_name(end);
	if (!walk.addr || walk.end < walk.addr)
		walk.end = walk.addr;
}

/*
 * The region after the current one.  0: vmlinux's text; 1: its init text
 * (freed after boot, but samples taken during boot fall in it and kallsyms
 * still names it); n >= 2: the (n-1)-th formed module of the list at the
 * time.  A module loaded or freed during the walk may be missed or sent
 * twice: both are harmless to the host.
 */
static bool next_region(void)
{
	struct list_head *head = (void *)opvm_lookup_name("modules");
	struct mutex *lock = (void *)opvm_lookup_name("module_mutex");
	struct module *mod;
	unsigned int n = 1;
	bool found = false;

	if (++walk.region == 1) {
		kernel_region("_sinittext", "_einittext");
		return true;
	}
	if (!head || !lock)
		return false;
	mutex_lock(lock);
	list_for_each_entry(mod, head, list) {
		if (mod->state == MODULE_STATE_UNFORMED || ++n != walk.region)
			continue;
		strscpy(walk.module, mod->name, sizeof(walk.module));
		walk.addr = (unsigned long)mod->core_layout.base;
		walk.end = walk.addr + mod->core_layout.text_size;
		found = true;
		break;
	}
	mutex_unlock(lock);
	return found;
}

/* The next symbol starting at or after walk.addr in this region, or false. */
static bool next_symbol(char *sym, unsigned long *start)
{
	while (walk.addr < walk.end) {
		unsigned long off, size, at = walk.addr;
		char *name;

		sprint_symbol(sym, at);
		name = parse_symbol(sym, &off, &size);
		if (!name || size <= off) {
			walk.addr = at + 16;	/* no symbol here: look further */
			continue;
		}
		walk.addr = at - off + size;
		if (off)
			continue;	/* started before the region */
		memmove(sym, name, strlen(name) + 1);
		*start = at;
		return true;
	}
	return false;
}

/* Fills walk.rec with the next KSYMS record, or KSYMS_END when done. */
static void build_record(void)
{
	static char sym[KSYM_SYMBOL_LEN];
	struct opvm_rec_ksyms *k = &walk.rec.k;
	unsigned long used = sizeof(*k), start, save;

	memset(k, 0, sizeof(*k));
	strscpy(k->module, walk.module, sizeof(k->module));
	for (;;) {
		save = walk.addr;
		if (!next_symbol(sym, &start)) {
			if (k->nr || !next_region())
				break;
			strscpy(k->module, walk.module, sizeof(k->module));
			continue;
		}
		if (opvm_ksyms_add(k, &used, start, 'T', sym, strlen(sym)) && k->nr) {
			walk.addr = save;	/* full: it starts the next one */
			break;
		}
	}
	if (k->nr) {
		walk.nr += k->nr;
		k->hdr.type = OPVM_REC_KSYMS;
		k->hdr.len = ALIGN(used, OPVM_REC_ALIGN);
		memset((char *)k + used, 0, k->hdr.len - used);
		return;
	}
	memset(&walk.rec.e, 0, sizeof(walk.rec.e));
	walk.rec.e.nr_syms = walk.nr;
	walk.rec.e.flags = OPVM_KSYMS_MODULE_WALK |
			   (walk.modules_only ? OPVM_KSYMS_MODULES_ONLY : 0);
	walk.rec.e.hdr.type = OPVM_REC_KSYMS_END;
	walk.rec.e.hdr.len = sizeof(walk.rec.e);
	walk.active = false;	/* once this record is in */
	pr_info("%s symbols: %llu sent in %lld ms\n", walk.modules_only ? "module" : "kernel",
		walk.nr, ktime_ms_delta(ktime_get(), walk.t0));
}

static void ksyms_work_fn(struct work_struct *work)
{
	int i;

	mutex_lock(&walk.lock);
	for (i = 0; i < KSYMS_BATCH && (walk.active || walk.pending); i++) {
		if (!walk.pending)
			build_record();
		walk.pending = true;
		if (opvm_ring_put_bulk(&walk.rec.k.hdr)) {
			queue_delayed_work(system_long_wq, &ksyms_work,
					   msecs_to_jiffies(KSYMS_RETRY_MS));
			goto out;
		}
		walk.pending = false;
	}
	if (walk.active)
		queue_delayed_work(system_long_wq, &ksyms_work, 0);
out:
	mutex_unlock(&walk.lock);
}

void opvm_ksyms_start(bool modules_only)
{
	opvm_ksyms_cancel();
	mutex_lock(&walk.lock);
	walk.modules_only = modules_only;
	walk.module[0] = '\0';
	if (modules_only) {
		/* the next region is the first module's */
		walk.region = 1;
		walk.addr = walk.end = 0;
	} else {
		walk.region = 0;
		kernel_region("_stext", "_etext");
	}
	walk.nr = 0;
	walk.t0 = ktime_get();
	walk.pending = false;
	walk.active = true;
	mutex_unlock(&walk.lock);
	if (!modules_only)
		pr_info("sending the kernel's symbols to the host (kptr_restrict hides them from the relay)\n");
	queue_delayed_work(system_long_wq, &ksyms_work, 0);
}

/* Also at unload (main.c): no work item may outlive the module. */
void opvm_ksyms_cancel(void)
{
	cancel_delayed_work_sync(&ksyms_work);
	mutex_lock(&walk.lock);
	walk.active = walk.pending = false;
	mutex_unlock(&walk.lock);
}
