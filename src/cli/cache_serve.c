/* `kiln cache serve CONFIG`: a cache node's long-running process. Opens the
 * cache, serves it over HTTP (src/cache/serve.c) from the start, and syncs
 * the pinned versions on the main thread at start-up and then every
 * sync_seconds; a failed pass is logged and retried, never fatal. SIGTERM
 * or SIGINT stops it after the pass in progress (a second one kills).
 * SIGHUP reads CONFIG again and applies watermarks and log.level between
 * passes. Under systemd it speaks the notify protocol (core/notify.h): READY
 * once listening, WATCHDOG kicks from the main thread's waits and passes. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "cache/serve.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/version.h"
#include "core/buf.h"
#include "core/config.h"
#include "core/daemon_metrics.h"
#include "core/error.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/notify.h"
#include "core/yaml_doc.h"

#define RETRY_FIRST_S 5u /* after a failed pass, doubling up to sync_seconds */

static const char usage_text[] =
    "usage: kiln cache serve CONFIG [--set key=value]...\n"
    "\n"
    "Runs a cache node: opens the cache directory of CONFIG (docs/CACHE.md),\n"
    "serves it on `listen` and syncs its pins now and every sync_seconds.\n"
    "  GET|HEAD /v1/shards/<hash>           a shard (Range, If-None-Match); a miss\n"
    "                                       is fetched from peers, then the store\n"
    "  GET /v1/datasets/<ds>/<ref>/<split>  a version's shards, JSON Lines\n"
    "  GET /metrics, /healthz\n"
    "With a token (token_file or token_env) every route but /healthz wants\n"
    "\"Authorization: Bearer TOKEN\". Logs are JSON lines on stderr; the first\n"
    "says \"listening\" with the port (listen: 127.0.0.1:0 picks a free one).\n"
    "\n"
    "Options:\n"
    "  -s, --set KEY=VALUE   override a config value\n"
    "  -h, --help            show this help\n"
    "\n"
    "SIGHUP reads CONFIG again and applies watermarks and log.level (other\n"
    "changes need a restart); under systemd it speaks the notify protocol\n"
    "(docs/OPERATIONS.md).\n"
    "\n"
    "Exit status: 0 after SIGTERM or SIGINT, 2 on a config, cache or listen error.\n";

static volatile sig_atomic_t stop_requested, reload_requested;

/* What the main thread keeps between passes. */
typedef struct serve_state {
	const char *path; /* CONFIG, loaded again on SIGHUP with the same --set values */
	char *const *sets;
	size_t set_count;
	const kiln_cache_config *started; /* what the cache was opened with (outlives it) */
	kiln_cache_config *reloaded;      /* the last reload's config, NULL: none */
	kiln_cache *cache;
	kiln_notify_watchdog watchdog; /* kicked from this thread only */
	bool stopping;                 /* STOPPING=1 sent */
} serve_state;

/* What a reload applies while serving: these sections, whole. */
static const char *const live_sections[] = {"watermarks", "log", NULL};

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void on_reload(int sig)
{
	(void)sig;
	reload_requested = 1;
}

/* The main thread's turn: a watchdog kick, STOPPING=1 once a stop is asked for. */
static void tick(serve_state *s)
{
	kiln_notify_watchdog_kick(&s->watchdog);
	if (stop_requested && !s->stopping) {
		s->stopping = true;
		kiln_notify("STOPPING=1\nSTATUS=stopping after the sync pass in progress");
	}
}

static void reload(serve_state *s)
{
	const kiln_cache_config *last = s->reloaded ? s->reloaded : s->started;
	kiln_cache_config *next = NULL;
	kiln_buf report = KILN_BUF_INIT(0);
	const char *applied, *ignored;

	reload_requested = 0;
	kiln_notify_reloading();
	if (kiln_cache_config_load(&next, s->path, s->sets, s->set_count) < 0) {
		KILN_LOG(KILN_LOG_ERROR, "reload_failed", kiln_error_last(),
		         KILN_F_STR("keeping", "the configuration in force"));
		kiln_notify("READY=1\nSTATUS=reload refused: the config does not load (see the log)");
		return;
	}
	kiln_config_reload_report(kiln_yaml_root(s->started->doc), kiln_yaml_root(last->doc),
	                          kiln_yaml_root(next->doc), live_sections, &report, &applied, &ignored);
	kiln_log_setup(true, next->log_level);
	kiln_cache_set_watermarks(s->cache, next->high, next->low);
	KILN_LOG(KILN_LOG_INFO, "reloaded",
	         *ignored ? "applied what changed; the keys ignored need a restart" : "applied what changed",
	         KILN_F_STR("config", s->path), KILN_F_STR("applied", applied),
	         KILN_F_STR("ignored", ignored));
	kiln_buf_free(&report);
	kiln_cache_config_free(s->reloaded);
	s->reloaded = next;
	kiln_notify("READY=1\nSTATUS=serving: reloaded");
}

static void on_progress(void *ctx, const kiln_cache_progress *p)
{
	tick(ctx); /* the sync pass reports on this thread every 200 ms while it downloads */
	KILN_LOG_EVERY(10, KILN_LOG_INFO, "sync_progress", NULL, KILN_F_STR("version", p->version),
	               KILN_F_INT("shards_done", p->shards_done), KILN_F_INT("shards_total", p->shards_total),
	               KILN_F_INT("bytes_done", p->bytes_done), KILN_F_INT("bytes_total", p->bytes_total));
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleeps until `seconds` have passed or a stop is asked for, reloading on SIGHUP. */
static void wait_for(serve_state *s, double seconds)
{
	const struct timespec step = {0, 200 * 1000 * 1000};
	double until = now_s() + seconds;

	while (!stop_requested && now_s() < until) {
		tick(s);
		if (reload_requested)
			reload(s);
		nanosleep(&step, NULL);
	}
	tick(s);
}

static void sync_loop(serve_state *s, unsigned sync_seconds)
{
	kiln_cache *cache = s->cache;
	unsigned retry = RETRY_FIRST_S;

	while (!stop_requested) {
		double t0 = now_s();
		int rc;

		if (reload_requested)
			reload(s);
		rc = kiln_cache_sync(cache, on_progress, s);
		double next = sync_seconds;

		if (rc == 0 || rc == KILN_ELIMIT) {
			/* KILN_ELIMIT: full; the views made so far are served */
			KILN_LOG(rc ? KILN_LOG_WARN : KILN_LOG_INFO, rc ? "sync_full" : "synced",
			         rc ? kiln_error_last() : NULL,
			         KILN_F_INT("ms", (long long)((now_s() - t0) * 1000)));
			kiln_notify(rc ? "STATUS=serving: the last sync pass stopped, the cache is full"
			               : "STATUS=serving: the last sync pass succeeded");
			retry = RETRY_FIRST_S;
		} else {
			KILN_LOG(KILN_LOG_WARN, "sync_failed", kiln_error_last(), KILN_F_INT("code", rc),
			         KILN_F_INT("retry_s", retry < sync_seconds ? retry : sync_seconds));
			kiln_notify("STATUS=serving: the last sync pass failed; retrying (see the log)");
			if (retry < sync_seconds)
				next = retry;
			retry = retry > sync_seconds / 2 ? sync_seconds : retry * 2;
		}
		if (sync_seconds == 0)
			break; /* once */
		wait_for(s, next);
	}
	while (!stop_requested)
		wait_for(s, 3600);
}

int kiln_cmd_cache_serve(int argc, char **argv)
{
	kiln_cli_sets sets = {0};
	const kiln_cli_option rows[] = {
	    {.name = "set", .letter = 's', .kind = KILN_CLI_SETS, .out = &sets},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "cache serve",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one config file (see kiln cache serve --help)",
	};
	kiln_cache_config *config = NULL;
	kiln_build_info build;
	kiln_metrics *metrics = NULL;
	kiln_cache *cache = NULL;
	kiln_cache_server *server = NULL;
	struct sigaction sa = {0};
	serve_state state = {0};
	int first, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (kiln_cache_config_load(&config, argv[first], sets.v, sets.n) < 0) {
		kiln_cli_fail("cache serve", "%s", kiln_error_last());
		goto cleanup;
	}
	kiln_log_setup(true, config->log_level);
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop;
	sa.sa_flags = SA_RESETHAND; /* a second signal ends the process at once */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_reload;
	sa.sa_flags = 0;
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* sendfile to a client gone */
	kiln_cli_build_info(&build);
	if (kiln_metrics_new(&metrics) < 0 || kiln_cache_open(&cache, config, metrics) < 0 ||
	    kiln_cache_serve_start(&server, cache, config, metrics) < 0 ||
	    kiln_daemon_metrics_register(metrics, &build) < 0 || kiln_cache_scrub_start(cache) < 0) {
		KILN_LOG(KILN_LOG_ERROR, "start_failed", kiln_error_last());
		kiln_cli_fail("cache serve", "%s", kiln_error_last());
		goto cleanup;
	}
	KILN_LOG(KILN_LOG_INFO, "listening", NULL, KILN_F_STR("listen", config->listen),
	         KILN_F_INT("port", kiln_cache_serve_port(server)), KILN_F_STR("dir", config->dir),
	         KILN_F_STR("auth", config->token ? "bearer" : "none"));
	state = (serve_state){
	    .path = argv[first], .sets = sets.v, .set_count = sets.n, .started = config, .cache = cache};
	kiln_notify_watchdog_init(&state.watchdog);
	kiln_notifyf("READY=1\nSTATUS=serving on port %u; syncing the pins",
	             (unsigned)kiln_cache_serve_port(server));
	sync_loop(&state, config->sync_seconds);
	tick(&state);
	KILN_LOG(KILN_LOG_INFO, "stopping", NULL);
	status = KILN_EXIT_OK;

cleanup:
	kiln_cache_serve_stop(server);
	kiln_cache_close(cache);
	kiln_metrics_free(metrics);
	kiln_cache_config_free(config);
	kiln_cache_config_free(state.reloaded);
	free(sets.v);
	if (status == KILN_EXIT_OK)
		KILN_LOG(KILN_LOG_INFO, "stopped", NULL);
	return status;
}
