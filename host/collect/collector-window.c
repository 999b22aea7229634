// SPDX-License-Identifier: MIT
/*
 * Windows of a collector (collector_config.window_ms, `opvm attach
 * --window`): each guest's samples/current is closed every window and
 * renamed samples/w-<start>-<end> (host/collect/store.h), and a new one
 * opened where it ended, so that a reader (`opvm exporter --continuous`,
 * `opvm report --since`) takes any run of windows and gets what one long
 * session of that time would hold.  Window ends fall on multiples of the
 * window in wall-clock time, so that every guest's windows line up; the
 * first one is shorter.
 *
 * A session that ended by itself seals its last window; one that was
 * killed leaves its current/, which the next session of that guest seals
 * from the times the last session.json wrote (its counts are those of the
 * last store_sync(), which that write follows).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host/collect/collector-priv.h"
#include "host/collect/attribution.h"
#include "host/collect/stats.h"
#include "host/collect/store.h"
#include "lib/clock.h"
#include "lib/fs.h"

static int64_t boundary_after(const struct collector *c, int64_t t)
{
	int64_t w = (int64_t)c->cfg.window_ms;

	return (t / w + 1) * w;
}

/* The times a killed session's current/session.json gave its window:
 * 0, or -1 if it gave none. */
static int leftover_times(const struct collector *c, const char *guest, int64_t *s,
			  int64_t *e)
{
	char mg[OPVM_MANGLE_MAX], path[PATH_MAX];
	json_error_t jerr;
	json_t *root;
	int fd, ret = -1;

	store_mangle(guest, strlen(guest), mg);
	if (snprintf(path, sizeof(path), "%s/guests/%s/samples/current/session.json",
		     c->session_dir, mg) >= (int)sizeof(path))
		return -1;
	fd = fs_open_regular(path, O_NOFOLLOW);
	if (fd < 0)
		return -1;
	root = stats_json_loadfd(fd, 0, &jerr);
	close(fd);
	if (json_is_integer(json_object_get(root, "window_start_ms")) &&
	    json_is_integer(json_object_get(root, "window_end_ms"))) {
		*s = json_integer_value(json_object_get(root, "window_start_ms"));
		*e = json_integer_value(json_object_get(root, "window_end_ms"));
		ret = *s > 0 && *e >= *s && *e < 10000000000000LL ? 0 : -1;
	}
	json_decref(root);
	return ret;
}

void cguest_window_begin(struct cguest *g)
{
	struct collector *c = g->c;
	char name[STORE_WINDOW_NAME_MAX];
	int64_t s, e;

	if (!c->cfg.window_ms)
		return;
	/* a killed session's last window: sealed, else store_open() keeps
	 * it as previous/ as any session would */
	if (!leftover_times(c, g->name, &s, &e)) {
		store_window_name(name, s, e);
		store_seal_window(c->session_dir, g->name, name);
	}
	g->win_start = clk_wall_ms();
	g->win_end = boundary_after(c, g->win_start);
}

/* Closes g's window at wall time now and opens the next.  0 or -errno
 * (the guest has no store then: fatal for the session). */
static int rotate(struct collector *c, struct cguest *g, int64_t now)
{
	char name[STORE_WINDOW_NAME_MAX];
	int err, sealed = 0;

	store_window_name(name, g->win_start, now);
	err = store_rotate(g->st, name, &sealed);
	if (sealed)
		g->last_err = sealed;	/* kept as previous/ */
	else
		g->windows++;
	if (err) {
		store_close(g->st);
		g->st = NULL;
		return err;
	}
	err = attribution_set_store(g->sy, g->st);
	if (err)
		return err;
	g->win_start = now;
	g->win_end = boundary_after(c, now);
	return 0;
}

bool cguest_window_due(const struct cguest *g, int64_t now)
{
	return g->c->cfg.window_ms && now >= g->win_end && g->st;
}

int cguest_window_rotate(struct cguest *g)
{
	return rotate(g->c, g, clk_wall_ms());
}

unsigned collector_window_wait_ms(const struct collector *c, unsigned max)
{
	int64_t now = clk_wall_ms();

	if (!c->cfg.window_ms)
		return max;
	for (size_t i = 0; i < c->nr_guests; i++) {
		int64_t left = c->guests[i]->win_end - now;

		if (left < (int64_t)max)
			max = left > 0 ? (unsigned)left : 0;
	}
	return max;
}

void cguest_window_seal(struct cguest *g)
{
	char name[STORE_WINDOW_NAME_MAX];

	if (!g->c->cfg.window_ms || !g->win_start)
		return;
	store_window_name(name, g->win_start, clk_wall_ms());
	store_seal_window(g->c->session_dir, g->name, name);
}
