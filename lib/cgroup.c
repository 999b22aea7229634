// SPDX-License-Identifier: MIT
/*
 * Pod and container ids in a cgroup path (lib/cgroup.h).  One pass over
 * the components; each is matched against the fixed forms, never a
 * pattern of the guest's choosing, and copied only when it matched whole.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "lib/array.h"
#include "lib/cgroup.h"

static bool hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!hex(s[i]))
			return false;
	return true;
}

/* s[0..36) is a uid with sep ('-' or '_') between its groups: into out. */
static bool uid_copy(const char *s, char sep, char out[CGROUP_POD_LEN + 1])
{
	char u[CGROUP_POD_LEN + 1];

	for (size_t i = 0; i < CGROUP_POD_LEN; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? s[i] != sep : !hex(s[i]))
			return false;	/* out keeps an earlier match */
		u[i] = dash ? '-' : s[i];
	}
	u[CGROUP_POD_LEN] = '\0';
	memcpy(out, u, sizeof(u));
	return true;
}

static bool ends_with(const char *s, size_t n, const char *tail)
{
	size_t t = strlen(tail);

	return n >= t && !memcmp(s + n - t, tail, t);
}

/* A pod component: "kubepods[-<qos>]-pod<uid_>.slice" or "pod<uid>". */
static bool pod_match(const char *c, size_t n, struct cgroup_ids *out)
{
	const size_t sl = sizeof(".slice") - 1;

	if (n == 3 + CGROUP_POD_LEN && !memcmp(c, "pod", 3))
		return uid_copy(c + 3, '-', out->pod);
	if (n < 3 + CGROUP_POD_LEN + sl || !ends_with(c, n, ".slice") ||
	    memcmp(c, "kubepods", 8))
		return false;
	c += n - sl - CGROUP_POD_LEN - 4;
	return !memcmp(c, "-pod", 4) && uid_copy(c + 4, '_', out->pod);
}

/* A container component: "<runtime prefix><id>.scope" or the id alone. */
static bool container_match(const char *c, size_t n, struct cgroup_ids *out)
{
	static const struct { const char *prefix, *runtime; } scopes[] = {
		{ "cri-containerd-", "containerd" }, { "crio-", "crio" },
		{ "docker-", "docker" }, { "libpod-", "podman" },
	};
	const size_t sc = sizeof(".scope") - 1;

	if (n == CGROUP_CONTAINER_LEN && all_hex(c, n)) {
		memcpy(out->container, c, n);
		out->container[n] = '\0';
		out->runtime = "";
		return true;
	}
	for (size_t i = 0; i < ARRAY_SIZE(scopes); i++) {
		size_t p = strlen(scopes[i].prefix);

		if (n != p + CGROUP_CONTAINER_LEN + sc || memcmp(c, scopes[i].prefix, p) ||
		    !ends_with(c, n, ".scope") || !all_hex(c + p, CGROUP_CONTAINER_LEN))
			continue;
		memcpy(out->container, c + p, CGROUP_CONTAINER_LEN);
		out->container[CGROUP_CONTAINER_LEN] = '\0';
		out->runtime = scopes[i].runtime;
		return true;
	}
	return false;
}

int cgroup_ids_parse(const char *path, size_t len, struct cgroup_ids *out)
{
	size_t i = 0;

	memset(out, 0, sizeof(*out));
	out->runtime = "";
	while (i < len) {
		const char *c = path + i, *slash = memchr(c, '/', len - i);
		size_t n = slash ? (size_t)(slash - c) : len - i;

		if (n && !pod_match(c, n, out))
			container_match(c, n, out);
		i += n + 1;
	}
	return out->pod[0] || out->container[0] ? 0 : -ENOENT;
}
