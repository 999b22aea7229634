// SPDX-License-Identifier: MIT
/*
 * Guest memory reader (vmm/guest/guestmem.h): guest-physical reads of a running
 * guest through the /proc/PID/mem of the process that maps its RAM.
 *
 * Why /proc/PID/mem and pread: one open file, one syscall per read, no
 * iovec set-up, and a read that crosses into an unmapped host page comes
 * back short instead of faulting us.  process_vm_readv needs the same ptrace
 * permission and gives nothing more here.
 *
 * The range table is filled once (guestmem_add_range, add_qemu_ranges) and
 * only read afterwards, so reads from several threads are safe once set-up
 * is over.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/x86.h"
#include "lib/sort.h"
#include "vmm/guest/guestmem.h"
#include "vmm/guest/qmp.h"

#define GUESTMEM_MAX_RANGES	64	/* QEMU's x86 machines use < 10 */
#define QMP_TIMEOUT_MS		5000

struct guestmem_range {
	uint64_t gpa, len, hva;
	const uint8_t *local;		/* our own view of it, or NULL: pread */
};

/* Shared file mappings of the VMM's RAM mapped into opvm too
 * (guestmem_map_shared()), unmapped at close. */
struct guestmem_map {
	void *addr;
	size_t len;
};

struct guestmem {
	int fd;				/* /proc/PID/mem, -1 never */
	unsigned nr;
	unsigned levels;		/* paging levels: 4 or 5 */
	pid_t pid;
	struct guestmem_range r[GUESTMEM_MAX_RANGES];	/* sorted by gpa */
	struct guestmem_map maps[GUESTMEM_MAX_RANGES];
	unsigned nr_maps;
};

struct guestmem *guestmem_open(pid_t pid)
{
	struct guestmem *m;
	char path[64];

	if (pid <= 0) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	m->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (m->fd < 0) {
		int e = errno;

		free(m);
		errno = e;
		return NULL;
	}
	m->levels = 4;
	m->pid = pid;
	return m;
}

void guestmem_close(struct guestmem *m)
{
	if (!m)
		return;
	for (unsigned i = 0; i < m->nr_maps; i++)
		munmap(m->maps[i].addr, m->maps[i].len);
	close(m->fd);
	free(m);
}

int guestmem_add_range(struct guestmem *m, uint64_t gpa, uint64_t len,
		       uint64_t hva)
{
	uint64_t end, hend;
	unsigned i;

	if (!len || __builtin_add_overflow(gpa, len - 1, &end) ||
	    __builtin_add_overflow(hva, len - 1, &hend) || hend > INT64_MAX)
		return -EINVAL;	/* pread's offset is signed */
	if (m->nr == GUESTMEM_MAX_RANGES)
		return -ENOSPC;
	for (i = 0; i < m->nr; i++) {
		if (gpa <= m->r[i].gpa + (m->r[i].len - 1) && m->r[i].gpa <= end)
			return -EEXIST;
		if (m->r[i].gpa > gpa)
			break;
	}
	memmove(&m->r[i + 1], &m->r[i], (m->nr - i) * sizeof(m->r[0]));
	m->r[i] = (struct guestmem_range){ gpa, len, hva, NULL };
	m->nr++;
	return 0;
}

int guestmem_map_self(struct guestmem *m)
{
	if (m->pid != getpid())
		return -EINVAL;
	for (unsigned i = 0; i < m->nr; i++)
		m->r[i].local = (const uint8_t *)(uintptr_t)m->r[i].hva;
	return (int)m->nr;
}

unsigned guestmem_nr_ranges(const struct guestmem *m)
{
	return m->nr;
}

int guestmem_range(const struct guestmem *m, unsigned i, uint64_t *gpa, uint64_t *len)
{
	if (i >= m->nr)
		return -ERANGE;
	*gpa = m->r[i].gpa;
	*len = m->r[i].len;
	return 0;
}

/* The range holding [gpa, gpa + len), or NULL.  Binary search: the table
 * is sorted and its ranges do not overlap, so only the last range that
 * starts at or below gpa can hold it. */
static const struct guestmem_range *range_find(const struct guestmem *m,
					       uint64_t gpa, size_t len)
{
	size_t i = SORT_UPPER(m->r, m->nr, gpa, gpa);
	const struct guestmem_range *r = i ? &m->r[i - 1] : NULL;

	/* Inside r: the whole read must be, too. */
	if (!r || gpa - r->gpa >= r->len || len > r->len - (gpa - r->gpa))
		return NULL;
	return r;
}

int guestmem_read(struct guestmem *m, uint64_t gpa, void *buf, size_t len)
{
	const struct guestmem_range *r;
	size_t done = 0;

	if (!len)
		return 0;
	r = range_find(m, gpa, len);
	if (!r)
		return -EFAULT;
	if (r->local) {
		memcpy(buf, r->local + (gpa - r->gpa), len);
		return 0;
	}
	while (done < len) {
		ssize_t n = pread(m->fd, (char *)buf + done, len - done,
				  (off_t)(r->hva + (gpa - r->gpa) + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EIO ? -EFAULT : -errno;
		if (n == 0)
			return -EFAULT;	/* the host mapping went away */
		done += (size_t)n;
	}
	return 0;
}

/* One line of /proc/PID/maps: a shared mapping of a file (QEMU's RAM
 * with memory-backend-memfd or -file share=on) holding [hva, hva + len)?
 * Then its bounds and file offset. */
static int maps_line(const char *line, uint64_t hva, uint64_t len, uint64_t *start,
		     uint64_t *end, uint64_t *off)
{
	char perms[8];
	unsigned long long ino;

	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %llu", start, end, perms,
		   off, &ino) != 5)
		return 0;
	return perms[3] == 's' && ino && hva >= *start && hva - *start < *end - *start &&
	       len <= *end - hva;
}

/* Maps the file behind [start, end) of the VMM (its /proc/PID/map_files
 * entry, root only) into opvm; NULL if it cannot. */
static void *map_file(struct guestmem *m, uint64_t start, uint64_t end, uint64_t off)
{
	char path[96];
	void *p;
	int fd;

	if (m->nr_maps == GUESTMEM_MAX_RANGES)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)m->pid,
		 start, end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	p = mmap(NULL, end - start, PROT_READ, MAP_SHARED, fd, (off_t)off);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	m->maps[m->nr_maps++] = (struct guestmem_map){ p, end - start };
	return p;
}

int guestmem_map_shared(struct guestmem *m)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	unsigned mapped = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)m->pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		uint64_t start, end, off;

		for (unsigned i = 0; i < m->nr; i++) {
			struct guestmem_range *r = &m->r[i];
			uint8_t *base;

			if (r->local || !maps_line(line, r->hva, r->len, &start, &end, &off))
				continue;
			base = map_file(m, start, end, off);
			if (!base)
				continue;
			/* every range this mapping holds reads from it */
			for (unsigned j = 0; j < m->nr; j++)
				if (!m->r[j].local && m->r[j].hva >= start &&
				    m->r[j].hva - start < end - start &&
				    m->r[j].len <= end - m->r[j].hva) {
					m->r[j].local = base + (m->r[j].hva - start);
					mapped++;
				}
		}
	}
	free(line);
	fclose(f);
	return (int)mapped;
}

void guestmem_set_paging_levels(struct guestmem *m, unsigned levels)
{
	m->levels = levels == 5 ? 5 : 4;
}

/*
 * x86-64 page-table walk.  Entry bits: 0 present, 7 page size (at the
 * PDPT and PD levels), 51:12 the next table or page frame.  Each level
 * indexes 9 bits of va, from bit 48 (5 levels) or 39 (4 levels) down.
 */

int guestmem_virt_to_phys(struct guestmem *m, uint64_t cr3, uint64_t va,
			  uint64_t *gpa)
{
	uint64_t table = cr3 & OPVM_PTE_ADDR;
	int level;

	for (level = (int)m->levels; level >= 1; level--) {
		unsigned shift = 12 + 9 * (unsigned)(level - 1);
		uint64_t idx = (va >> shift) & 511, pte;
		int rc = guestmem_read(m, table + idx * 8, &pte, sizeof(pte));

		if (rc)
			return rc;
		if (!(pte & OPVM_PTE_PRESENT))
			return -ENOENT;
		/* A large page: 1 GiB at level 3, 2 MiB at level 2. */
		if (level == 1 || ((level == 2 || level == 3) && (pte & OPVM_PTE_PS))) {
			uint64_t off = va & ((1ull << shift) - 1);

			*gpa = ((pte & OPVM_PTE_ADDR) & ~((1ull << shift) - 1)) + off;
			return 0;
		}
		table = pte & OPVM_PTE_ADDR;
	}
	return -ENOENT;	/* not reached: level 1 always returns */
}

int guestmem_read_virt(struct guestmem *m, uint64_t cr3, uint64_t va, void *buf,
		       size_t len)
{
	uint8_t *out = buf;

	while (len) {
		size_t chunk = opvm_page_rest(va);
		uint64_t gpa;
		int rc;

		if (chunk > len)
			chunk = len;
		rc = guestmem_virt_to_phys(m, cr3, va, &gpa);
		if (!rc)
			rc = guestmem_read(m, gpa, out, chunk);
		if (rc)
			return rc;
		out += chunk;
		va += chunk;
		len -= chunk;
	}
	return 0;
}

/* ---- a cached view of one address space, for the stack walkers --------- */

void guestmem_view_init(struct guestmem_view *v, struct guestmem *m)
{
	v->m = m;
	v->fetches = 0;
	guestmem_view_reset(v, 0, 0);
}

void guestmem_view_reset(struct guestmem_view *v, uint64_t cr3, unsigned max_pages)
{
	/* PCID and bit 63 are dropped by the walk; the PTI bit 12 stays: a
	 * user CR3 maps the user half, which is all a user sample reads. */
	v->cr3 = cr3 & ~OPVM_PAGE_MASK;
	v->budget = max_pages;
	v->next = 0;
	for (unsigned i = 0; i < GUESTMEM_VIEW_PAGES; i++)
		v->page[i].va = 1;
}

/* The cached page at va (page-aligned), fetched if need be; NULL if it
 * cannot be read or the budget is spent. */
static const uint8_t *view_page(struct guestmem_view *v, uint64_t va)
{
	struct guestmem_view_page *p;

	for (unsigned i = 0; i < GUESTMEM_VIEW_PAGES; i++)
		if (v->page[i].va == va)
			return v->page[i].data;
	if (!v->budget || !v->m)
		return NULL;
	v->budget--;
	p = &v->page[v->next];
	v->next = (v->next + 1) % GUESTMEM_VIEW_PAGES;
	p->va = 1;
	if (guestmem_read_virt(v->m, v->cr3, va, p->data, sizeof(p->data)))
		return NULL;
	v->fetches++;
	p->va = va;
	return p->data;
}

int guestmem_view_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct guestmem_view *v = arg;
	uint8_t *out = buf;

	if (len > sizeof(v->page[0].data) * GUESTMEM_VIEW_PAGES || gva + len < gva)
		return -EFAULT;
	while (len) {
		uint64_t va = gva & ~OPVM_PAGE_MASK, off = gva - va;
		size_t chunk = OPVM_PAGE_SIZE - off < len ? OPVM_PAGE_SIZE - off : len;
		const uint8_t *p = view_page(v, va);

		if (!p)
			return -EFAULT;
		memcpy(out, p + off, chunk);
		out += chunk;
		gva += chunk;
		len -= chunk;
	}
	return 0;
}

/*
 * One line of `info mtree -f`:
 *   "  0000000000100000-0000000001ffffff (prio 0, ram): pc.ram @..."
 * Returns 1 with [start, end] for a RAM or ROM region, 0 for anything else.
 */
static int mtree_line(const char *line, uint64_t *start, uint64_t *end)
{
	char kind[16];
	int prio;

	if (sscanf(line, " %" SCNx64 "-%" SCNx64 " (prio %d, %15[a-z])",
		   start, end, &prio, kind) != 4)
		return 0;
	if (strcmp(kind, "ram") && strcmp(kind, "rom") && strcmp(kind, "romd"))
		return 0;
	return *end >= *start;
}

/* The host address of gpa from `gpa2hva`: "Host virtual address for 0x0
 * (pc.ram) is 0x7f...".  Returns 0 or -errno. */
static int monitor_gpa2hva(guestmem_hmp_fn hmp, void *arg, uint64_t gpa, uint64_t *hva)
{
	char cmd[64], *out = NULL, *is;
	int rc;

	snprintf(cmd, sizeof(cmd), "gpa2hva 0x%" PRIx64, gpa);
	rc = hmp(arg, cmd, &out);
	if (rc)
		return rc;
	is = out ? strstr(out, " is 0x") : NULL;
	rc = is && sscanf(is, " is 0x%" SCNx64, hva) == 1 ? 0 : -ENXIO;
	free(out);
	return rc;
}

/* A range the monitor gave, and how far from its host address on the VMM's
 * own mappings cover it (maps_cover()). */
struct mon_range {
	uint64_t gpa, len, hva, covered;
};

/*
 * Marks how far each range's [hva, hva + len) is covered by the mappings of
 * the VMM process, in one pass over /proc/PID/maps (ascending, so a range
 * split over adjacent mappings, as madvise() splits QEMU's RAM, is covered
 * as a whole).  0 or -errno.
 */
static int maps_cover(pid_t pid, struct mon_range *c, unsigned n)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		uint64_t start, end;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64, &start, &end) != 2)
			continue;
		for (unsigned i = 0; i < n; i++)
			if (start <= c[i].covered && end > c[i].covered)
				c[i].covered = end;
	}
	free(line);
	fclose(f);
	return 0;
}

/* The RAM and ROM regions of `info mtree -f`'s system view ("AS
 * \"memory\"", the flat view), each with its host address, into c (up to
 * GUESTMEM_MAX_RANGES).  A region whose host address QEMU will not give
 * (none mapped) is left out.  The count, or -errno. */
static int monitor_regions(guestmem_hmp_fn hmp, void *arg, struct mon_range *c)
{
	char *out = NULL, *line, *save = NULL;
	int rc, in_memory = 0, n = 0;

	rc = hmp(arg, "info mtree -f", &out);
	if (rc)
		return rc;
	if (!out)
		return -ENXIO;
	for (line = strtok_r(out, "\n", &save); line && n < GUESTMEM_MAX_RANGES;
	     line = strtok_r(NULL, "\n", &save)) {
		uint64_t start, end, hva;

		if (!strncmp(line, "FlatView", 8)) {
			if (in_memory)
				break;	/* the system view is over */
			continue;
		}
		if (strstr(line, " AS \"memory\""))
			in_memory = 1;
		if (!in_memory || !mtree_line(line, &start, &end) ||
		    monitor_gpa2hva(hmp, arg, start, &hva))
			continue;
		c[n++] = (struct mon_range){ start, end - start + 1, hva, hva };
	}
	free(out);
	return n;
}

/*
 * The regions, each at its host address.  What the monitor says is its
 * owner's to choose: a host range that is not wholly inside the VMM's own
 * mappings (/proc/PID/maps) is no guest RAM of that process, and the whole
 * answer is refused (-EFAULT), nothing added.
 */
int guestmem_add_monitor_ranges(struct guestmem *m, guestmem_hmp_fn hmp, void *arg)
{
	struct mon_range *c = calloc(GUESTMEM_MAX_RANGES, sizeof(*c));
	int n = c ? monitor_regions(hmp, arg, c) : -ENOMEM, rc = 0, added = 0;

	if (n > 0)
		rc = maps_cover(m->pid, c, (unsigned)n);
	for (int i = 0; !rc && i < n; i++)
		if (c[i].covered - c[i].hva < c[i].len)
			rc = -EFAULT;	/* outside QEMU's mappings */
	for (int i = 0; !rc && i < n; i++) {
		rc = guestmem_add_range(m, c[i].gpa, c[i].len, c[i].hva);
		added += !rc;
		if (rc == -EEXIST || rc == -EINVAL)
			rc = 0;
	}
	free(c);
	if (n < 0)
		return n;
	if (rc)
		return rc;
	return added ? 0 : -ENXIO;
}

int guestmem_qmp_hmp(void *qmp, const char *cmd, char **out)
{
	return qmp_hmp(qmp, cmd, out, QMP_TIMEOUT_MS);
}

int guestmem_add_qemu_ranges(struct guestmem *m, struct qmp *q)
{
	return guestmem_add_monitor_ranges(m, guestmem_qmp_hmp, q);
}
