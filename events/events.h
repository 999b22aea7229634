/* SPDX-License-Identifier: MIT */
/*
 * Events database: what a CPU family can count, how to program it with
 * perf_event_open(), and the smallest sample period ("minimum count") that
 * is safe to ask for — OProfile's events/ and unit_masks files, one pair per
 * family under events/data/ (docs/events.md describes the format).
 *
 * A database is loaded for one family (normally the host's, found by CPUID)
 * and, unless OPVM_EVDB_FAMILY_ONLY is given, also holds the "generic" perf
 * hardware events and the "software" events (TIMER, cpu-clock, task-clock),
 * so one lookup answers for everything a user may type after -e.
 *
 * Files are looked up in order: $OPVM_EVENTS_DIR, <exe>/../share/opvm/events
 * (installed), <exe>/../events/data (build tree), then a copy compiled into
 * the binary, so opvm works from anywhere.
 *
 * Counts: for hardware events a count is a number of events between two
 * samples (perf's sample_period).  For TIMER the count is the sampling
 * period in microseconds (TIMER:4000 = 250 samples/s per vCPU); for
 * cpu-clock and task-clock it is nanoseconds, as in perf.  The minimum is
 * enforced by events_parse_spec(); a smaller count is refused, never
 * silently raised.
 *
 * Nothing here prints.  Functions that can fail for a reason worth telling
 * the user take (err, errlen) and write one line there, which already says
 * what to do next.  Objects returned from a database stay valid until
 * events_db_free().  The library is not thread-safe per database, but
 * read-only use of a loaded database from several threads is fine.
 */
#ifndef OPVM_EVENTS_H
#define OPVM_EVENTS_H

#include <stddef.h>
#include <stdint.h>

struct perf_event_attr;

#define OPVM_EVENT_NAME_MAX	32	/* including NUL; = store_event.name */
#define OPVM_EVENT_SPEC_MAX	128	/* events_spec_format() output */

enum opvm_event_flags {
	OPVM_EV_HARDWARE = 1u << 0,	/* counted by the CPU's PMU: needs one */
	OPVM_EV_SOFTWARE = 1u << 1,	/* perf software event: no PMU needed */
	OPVM_EV_TIMER	 = 1u << 2,	/* the TIMER pseudo-event (also SOFTWARE) */
	OPVM_EV_DEFAULT	 = 1u << 3,	/* its file's default event (flags:default) */
};

/* What a count of this event measures. */
enum opvm_count_unit {
	OPVM_UNIT_EVENTS = 0,		/* occurrences of the event */
	OPVM_UNIT_US	 = 1,		/* microseconds (TIMER) */
	OPVM_UNIT_NS	 = 2,		/* nanoseconds (cpu-clock, task-clock) */
};

enum opvm_um_type {
	OPVM_UM_MANDATORY = 0,		/* only the default value is allowed */
	OPVM_UM_EXCLUSIVE = 1,		/* exactly one of the listed values */
	OPVM_UM_BITMASK	  = 2,		/* any OR of the listed values */
};

struct opvm_um_value {
	uint32_t value;
	const char *name;		/* may be NULL: select by number only */
	const char *desc;
};

struct opvm_unit_mask {
	const char *name;		/* group name, e.g. "zero", "l2_miss" */
	enum opvm_um_type type;
	uint32_t default_value;
	size_t nr_values;
	const struct opvm_um_value *values;
};

struct opvm_event {
	const char *name;		/* e.g. "INST_RETIRED"; < OPVM_EVENT_NAME_MAX */
	uint32_t code;			/* event select (raw events), else 0 */
	uint64_t min_count;		/* smallest count events_parse_spec() accepts */
	uint64_t default_count;		/* used when a spec gives no count */
	const struct opvm_unit_mask *um;	/* never NULL ("zero" group at least) */
	unsigned flags;			/* enum opvm_event_flags */
	enum opvm_count_unit unit;
	/* perf_event_attr.type and .config.  For PERF_TYPE_RAW this is the
	 * event select alone; the unit mask goes in with
	 * events_perf_config(). */
	uint32_t perf_type;
	uint64_t perf_config;
	const char *family;		/* id of the file it came from */
	const char *desc;
};

/* One parsed -e argument, NAME[:count[:unitmask[:kernel[:user]]]]. */
struct opvm_event_spec {
	const struct opvm_event *event;	/* points into the database */
	uint64_t count;			/* >= event->min_count */
	uint32_t unit_mask;
	int kernel;			/* 1: sample guest kernel mode (CPL 0) */
	int user;			/* 1: sample guest user mode (CPL 3) */
};

/* CPU identity as CPUID leaves 0 and 1 report it (display family/model). */
struct opvm_cpu_id {
	char vendor[13];		/* "GenuineIntel", "AuthenticAMD", ... */
	unsigned family;		/* base + extended family */
	unsigned model;			/* (extended model << 4) + model */
	unsigned stepping;
	int arch_perfmon_version;	/* Intel CPUID 0xA EAX[7:0]; 0 if none */
};

/* Every family this build knows, for --all and --family. */
struct opvm_event_family {
	const char *id;			/* file stem: "x86-intel-arch" */
	const char *desc;		/* "Intel architectural performance events" */
};
/* Returns the number of families and points *out at a static table. */
size_t events_families(const struct opvm_event_family **out);

/* ---- the database --------------------------------------------------------- */

struct events_db;

enum events_db_flags {
	OPVM_EVDB_FAMILY_ONLY = 1u << 0, /* do not add generic + software */
	OPVM_EVDB_BUILTIN     = 1u << 1, /* ignore files on disk */
};

/* Loads family's events (NULL: the host's family by CPUID).  Returns NULL
 * and sets errno (ENOENT: unknown family or no file; EINVAL: a malformed
 * file, err says "path:line: what").  err may be NULL. */
struct events_db *events_db_load(const char *family, unsigned flags,
				 char *err, size_t errlen);
/* Same, from the files in dir only (no search, no built-in copy). */
struct events_db *events_db_load_dir(const char *dir, const char *family,
				     unsigned flags, char *err, size_t errlen);
/* Parses one family from memory: the text of its .events and .unit_masks
 * files (NUL-terminated); *_name label error messages.  For tests and
 * fuzzing.  Returns NULL and sets errno. */
struct events_db *events_db_parse(const char *family,
				  const char *events_text, const char *events_name,
				  const char *um_text, const char *um_name,
				  char *err, size_t errlen);
void events_db_free(struct events_db *db);	/* NULL-safe */

const char *events_db_family(const struct events_db *db);
/* Where the files came from: a directory, or "built-in". */
const char *events_db_source(const struct events_db *db);
size_t events_db_count(const struct events_db *db);
const struct opvm_event *events_db_get(const struct events_db *db, size_t i);
/* Case-insensitive lookup by name; NULL if absent. */
const struct opvm_event *events_find(const struct events_db *db,
				     const char *name);

/* ---- the host ------------------------------------------------------------- */

/* CPUID of the CPU we run on.  Returns 0, or -ENOTSUP off x86. */
int events_host_cpu(struct opvm_cpu_id *out);
/* Family id for a CPU ("x86-intel-arch", "x86-amd-fam17h", ...); "generic"
 * when nothing more specific fits.  Never NULL. */
const char *events_family_for_cpu(const struct opvm_cpu_id *id);
/* 1 if the host has a hardware PMU perf can use (a cpu, cpu_core or cpu_atom
 * event source, and a test perf_event_open() of cycles succeeds), else 0.
 * $OPVM_NO_PMU=1 forces 0 (to try timer mode on a machine with a PMU). */
int events_host_has_pmu(void);

/* ---- events and specs ----------------------------------------------------- */

/* 1 if ev can be sampled here: hardware events need has_pmu. */
int events_usable(const struct opvm_event *ev, int has_pmu);

/* Parses "NAME[:count[:unitmask[:kernel[:user]]]]" (OProfile's -e syntax;
 * empty fields take defaults; unitmask is a number or a value name, names
 * joined with '+' for bitmask groups; kernel/user are 0 or 1).  Refuses a
 * count below the event's minimum.  Does not check usability on this host:
 * call events_usable().  Returns 0, or -ENOENT (unknown event), -EINVAL
 * (bad field, count too small) with a message in err. */
int events_parse_spec(const struct events_db *db, const char *spec,
		      struct opvm_event_spec *out, char *err, size_t errlen);

/* The event to use when the user gave none: the family's cycles event with
 * its default count when has_pmu, else TIMER.  Returns 0 or -ENOENT. */
int events_default(const struct events_db *db, int has_pmu,
		   struct opvm_event_spec *out);

/* perf_event_attr.config for spec (raw events: event select, unit mask in
 * bits 8-15, AMD's extended select in bits 32-35). */
uint64_t events_perf_config(const struct opvm_event_spec *spec);

/* Fills attr->type, config, sample_period, exclude_kernel, exclude_user
 * (and size); the caller sets everything else (exclude_host, wakeup, ...).
 * TIMER becomes a task-clock event with a period of count µs.  Returns 0. */
int events_spec_perf_attr(const struct opvm_event_spec *spec,
			  struct perf_event_attr *attr);

/* Timer events: sampling period in ns, and rate in Hz (rounded, >= 1).
 * 0 for non-time events. */
uint64_t events_spec_period_ns(const struct opvm_event_spec *spec);
unsigned events_spec_rate_hz(const struct opvm_event_spec *spec);

/* A TIMER spec from a rate (-F HZ): count = 1000000 / hz microseconds.
 * Refuses a rate above TIMER's minimum period (err names the highest
 * rate allowed) or hz == 0.  Returns 0, -EINVAL or -ENOENT (no TIMER). */
int events_timer_spec(const struct events_db *db, unsigned hz,
		      struct opvm_event_spec *out, char *err, size_t errlen);

/* Writes the canonical form "NAME:count:0xUM:kernel:user" into buf
 * (OPVM_EVENT_SPEC_MAX is enough).  Returns buf. */
char *events_spec_format(const struct opvm_event_spec *spec, char *buf,
			 size_t len);

#endif /* OPVM_EVENTS_H */
