// SPDX-License-Identifier: MIT
/*
 * opvm exporter: opvm top's figures as Prometheus metrics over HTTP
 * (libmicrohttpd; text exposition format 0.0.4; GET /metrics).
 *
 * It listens only where the user says: ADDR:PORT (default 127.0.0.1:9864,
 * loopback) or unix:PATH (a socket file, mode 0660).  The socket is made
 * here and handed to libmicrohttpd, so both kinds go through one path.
 * Every scrape takes a fresh reading (at most one per --min-interval); the
 * metrics are counters, so Prometheus' rate() gives the per-second figures.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "host/cli/commands.h"
#include "host/hoststats/hoststats.h"
#include "lib/log.h"
#include "lib/util.h"

#define EXPORTER_DEFAULT_LISTEN	"127.0.0.1:9864"

struct exporter {
	struct hoststats *h;
	double min_interval, last;
	char *text;		/* the last exposition */
	unsigned long scrapes, errors;
};

static volatile sig_atomic_t exp_stop;

static void exporter_usage(FILE *f)
{
	fprintf(f,
"usage: opvm exporter [--listen ADDR:PORT | --listen unix:PATH] [options]\n"
"\n"
"Serves opvm top's figures for Prometheus at http://ADDR:PORT/metrics:\n"
"opvm_guest_cpu_seconds_total, opvm_guest_vcpu_steal_seconds_total,\n"
"opvm_guest_exits_total{reason=...} and more (docs/usage.md).\n"
"\n"
"  --listen ADDR:PORT  default " EXPORTER_DEFAULT_LISTEN " (loopback only);\n"
"                      [::1]:PORT for IPv6\n"
"  --listen unix:PATH  a unix socket instead (created mode 0660)\n"
"  --min-interval S    scrapes closer than S seconds share one reading\n"
"                      (default 1)\n"
"  -c, --connect URI   libvirt URI (default $LIBVIRT_DEFAULT_URI, else\n"
"                      qemu:///system)\n"
"  --no-libvirt        only QEMU processes found in /proc\n");
}

static int send_text(struct MHD_Connection *c, unsigned status, const char *text,
		     const char *type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text,
								 MHD_RESPMEM_MUST_COPY);
	int ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* A fresh exposition, or the last one when the previous reading is younger
 * than min_interval (bounded cost under many scrapers). */
static const char *exporter_text(struct exporter *e)
{
	double t = ((double)util_now_ns() / 1e9);
	char *s;

	if (e->text && t - e->last < e->min_interval)
		return e->text;
	if (hoststats_refresh(e->h)) {
		e->errors++;
		return NULL;
	}
	s = hoststats_prometheus(e->h);
	if (!s) {
		e->errors++;
		return NULL;
	}
	free(e->text);
	e->text = s;
	e->last = t;
	return s;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload, size_t *upload_size, void **con_cls)
{
	struct exporter *e = cls;
	const char *text;

	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return send_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET /metrics\n", "text/plain");
	if (strcmp(url, "/metrics"))
		return send_text(c, MHD_HTTP_NOT_FOUND,
				 "opvm exporter: the metrics are at /metrics\n", "text/plain");
	e->scrapes++;
	text = exporter_text(e);
	if (!text)
		return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
				 "opvm exporter: cannot read the guests of this host\n", "text/plain");
	return send_text(c, MHD_HTTP_OK, text, "text/plain; version=0.0.4; charset=utf-8");
}

static int listen_unix(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Only a stale socket is replaced; any other file is left alone. */
	{
		struct stat st;

		if (!lstat(path, &st) && S_ISSOCK(st.st_mode))
			unlink(path);
	}
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || chmod(path, 0660) ||
	    listen(fd, 16)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* "ADDR:PORT" or "[V6]:PORT" -> a listening TCP socket, or -errno. */
static int listen_tcp(const char *spec, char *why, size_t whylen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST },
			*ai = NULL;
	char host[128];
	const char *colon = strrchr(spec, ':'), *h = spec;
	size_t hl;
	int fd, one = 1, r;

	if (!colon || !colon[1])
		return -EINVAL;
	hl = (size_t)(colon - spec);
	if (hl >= 2 && spec[0] == '[' && spec[hl - 1] == ']') {
		h = spec + 1;
		hl -= 2;
	}
	if (!hl || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	r = getaddrinfo(host, colon + 1, &hints, &ai);
	if (r) {
		snprintf(why, whylen, "%s", gai_strerror(r));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 16)) {
		int err = -errno;

		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return err;
	}
	freeaddrinfo(ai);
	return fd;
}

/* Parses argv; -1 usage error, 1 help, 0 run. */
static int exporter_parse(int argc, char **argv, const char **listen_on, double *min_iv,
			  struct hs_config *cfg)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end;

		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return 1;
		if (!strcmp(a, "--no-libvirt")) {
			cfg->no_libvirt = 1;
			continue;
		}
		if (!v) {
			pr_err("missing value for '%s'; 'opvm exporter --help' lists the options", a);
			return -1;
		}
		i++;
		if (!strcmp(a, "--listen") || !strcmp(a, "-l")) {
			*listen_on = v;
		} else if (!strcmp(a, "-c") || !strcmp(a, "--connect")) {
			cfg->uri = v;
		} else if (!strcmp(a, "--min-interval")) {
			*min_iv = strtod(v, &end);
			if (*end || !(*min_iv >= 0 && *min_iv <= 3600)) {
				pr_err("--min-interval wants seconds (0 to 3600), not '%s'", v);
				return -1;
			}
		} else {
			pr_err("unknown option '%s'; 'opvm exporter --help' lists them", a);
			return -1;
		}
	}
	return 0;
}

static int exporter_socket(const char *listen_on)
{
	char why[128] = "";
	int fd;

	if (!strncmp(listen_on, "unix:", 5))
		fd = listen_unix(listen_on + 5);
	else
		fd = listen_tcp(listen_on, why, sizeof(why));
	if (fd == -EINVAL)
		pr_err("--listen wants ADDR:PORT (e.g. 127.0.0.1:9864, [::1]:9864) or unix:PATH, "
		       "not '%s'%s%s", listen_on, why[0] ? ": " : "", why);
	else if (fd < 0)
		pr_err("cannot listen on %s: %s%s", listen_on, strerror(-fd),
		       fd == -EADDRINUSE ? " (another exporter? pick another port)" : "");
	return fd;
}

int cmd_exporter(int argc, char **argv)
{
	const char *listen_on = EXPORTER_DEFAULT_LISTEN;
	struct exporter e = { .min_interval = 1 };
	struct hs_config cfg = { 0 };
	struct MHD_Daemon *d = NULL;
	int r, fd, ret = 1;

	r = exporter_parse(argc, argv, &listen_on, &e.min_interval, &cfg);
	if (r) {
		exporter_usage(r > 0 ? stdout : stderr);
		return r > 0 ? 0 : 2;
	}
	fd = exporter_socket(listen_on);
	if (fd < 0)
		return fd == -EINVAL ? 2 : 1;
	util_stop_on_signals(&exp_stop);
	signal(SIGPIPE, SIG_IGN);	/* a client that hangs up is not a reason to stop */
	e.h = hoststats_new(&cfg);
	if (e.h)
		d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
				     NULL, on_request, &e, MHD_OPTION_LISTEN_SOCKET, fd,
				     MHD_OPTION_CONNECTION_LIMIT, 64u,
				     MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
	if (!d) {
		pr_err("cannot start the HTTP server on %s", listen_on);
		close(fd);
		goto out;
	}
	pr_info("exporter: serving http://%s/metrics (Ctrl-C stops)", listen_on);
	while (!exp_stop)
		pause();
	MHD_stop_daemon(d);
	pr_info("exporter: %lu scrapes, %lu failed", e.scrapes, e.errors);
	ret = 0;
out:
	if (!strncmp(listen_on, "unix:", 5))
		unlink(listen_on + 5);
	hoststats_free(e.h);
	free(e.text);
	return ret;
}
