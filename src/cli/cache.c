/* `kiln cache SUBCOMMAND CONFIG`: a cache node's commands. sync (once,
 * with a progress bar on a terminal, or every sync_seconds until SIGTERM),
 * status, verify; serve lives in cache_serve.c. The cache itself is
 * src/cache/ (docs/CACHE.md). */
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/units.h"
#include "cache/cache.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "cli/progress.h"
#include "core/error.h"
#include "core/log.h"

static const char usage_text[] =
    "usage: kiln cache sync [--once] CONFIG [--set key=value]...\n"
    "       kiln cache status CONFIG [--set key=value]... [--json]\n"
    "       kiln cache verify CONFIG [--set key=value]...\n"
    "       kiln cache serve CONFIG [--set key=value]...\n"
    "\n"
    "A cache node keeps pinned dataset versions on local disk (docs/CACHE.md):\n"
    "  sync     fetch the manifest, resolve the pins, download the shards they\n"
    "           lack (peers first, then the store; each verified), build the views\n"
    "           views/<ds>/<ref>/<split>/NNNNN.jsonl.zst, evict unpinned shards\n"
    "           above the high watermark. With --once one pass (a progress bar on\n"
    "           a terminal), else a pass every sync_seconds until SIGTERM/SIGINT.\n"
    "  status   size used, shards, pins and their views, the last sync; with\n"
    "           --json one JSON document: sizes in bytes, each pin's dataset,\n"
    "           ref, commit and view, the last sync (docs/JSON.md)\n"
    "  verify   hash every cached shard; corrupt ones are removed (the next sync\n"
    "           fetches them again)\n"
    "  serve    serve the cache over HTTP and sync it (kiln cache serve --help)\n"
    "\n"
    "Options:\n"
    "      --once            sync: one pass, then exit\n"
    "  -j, --json            status: one JSON document (docs/JSON.md)\n"
    "  -s, --set KEY=VALUE   override a config value (dotted key)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on success; 1 when filling stopped (cache full), a shard could\n"
    "not be fetched, or verify found corrupt shards; 2 on a usage, config or\n"
    "manifest error.\n";

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* ---- the progress bar -------------------------------------------------------------- */

static void on_progress(void *ctx, const kiln_cache_progress *p)
{
	kiln_cli_bar_draw(ctx, p->shards_done, p->shards_total, "shards", p->bytes_done, p->bytes_total,
	                  p->version);
}

/* ---- sync -------------------------------------------------------------------------- */

static int sync_once(kiln_cache *cache, bool tty)
{
	kiln_cli_bar b = {.tty = tty};
	kiln_cache_sync_stats st;
	kiln_buf report = KILN_BUF_INIT(0);
	char fetched[32], peers[32], origin[32], total[32], evicted[32];
	int rc = kiln_cache_sync(cache, on_progress, &b);
	char msg[1024];

	snprintf(msg, sizeof(msg), "%s", rc < 0 ? kiln_error_last() : "");
	kiln_cli_bar_end(&b);
	if (!tty && kiln_cache_sync_report(cache, &report) == 0 && report.len)
		fwrite(report.ptr, 1, report.len, stderr);
	kiln_buf_free(&report);
	kiln_cache_last_sync(cache, &st);
	kiln_size_human(total, sizeof(total), st.bytes, false);
	kiln_size_human(fetched, sizeof(fetched), st.fetched_bytes, false);
	kiln_size_human(peers, sizeof(peers), st.peer_bytes, false);
	kiln_size_human(origin, sizeof(origin), st.origin_bytes, false);
	kiln_size_human(evicted, sizeof(evicted), st.evicted_bytes, false);
	printf("synced %" PRIu64 "/%" PRIu64 " pins: %" PRIu64 " shards (%s); fetched %" PRIu64
	       " (%s: %s from peers, %s from the store); evicted %" PRIu64 " (%s)%s\n",
	       st.pins_ready, st.pins, st.shards, total, st.fetched, fetched, peers, origin, st.evicted,
	       evicted, st.failed ? "; some shards failed" : "");
	fflush(stdout);
	if (rc == 0)
		return KILN_EXIT_OK;
	fprintf(stderr, "kiln cache sync: %s\n", msg);
	if (st.manifest_errors || rc == KILN_EINVALID || rc == KILN_ENOMEM)
		return KILN_EXIT_USAGE;
	return KILN_EXIT_INVALID; /* filling stopped, or shards could not be fetched */
}

static int sync_loop(kiln_cache *cache, unsigned seconds)
{
	struct sigaction sa = {0};

	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop;
	sa.sa_flags = SA_RESETHAND; /* a second signal ends the process at once */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	while (!stop_requested) {
		const struct timespec tick = {0, 200 * 1000 * 1000};
		time_t until;

		if (kiln_cache_sync(cache, NULL, NULL) < 0)
			KILN_LOG(KILN_LOG_WARN, "sync_failed", kiln_error_last());
		until = time(NULL) + (time_t)seconds;
		while (!stop_requested && time(NULL) < until)
			nanosleep(&tick, NULL);
	}
	KILN_LOG(KILN_LOG_INFO, "stopped", NULL);
	return KILN_EXIT_OK;
}

/* ---- the command ------------------------------------------------------------------- */

/* The subcommand and its --once. */
typedef struct cache_sub {
	const char *name;
	bool once, json;
} cache_sub;

static int parse_once(const char *cmd, const char *arg, void *out)
{
	cache_sub *sub = out;

	if (strcmp(sub->name, "sync") != 0)
		return kiln_cli_fail(cmd, "--once is an option of sync");
	sub->once = true;
	return 0;
}

static int parse_json(const char *cmd, const char *arg, void *out)
{
	cache_sub *sub = out;

	(void)arg;
	if (strcmp(sub->name, "status") != 0)
		return kiln_cli_fail(cmd, "--json is an option of status");
	sub->json = true;
	return 0;
}

int kiln_cmd_cache(int argc, char **argv)
{
	cache_sub sub = {0};
	kiln_cli_sets sets = {0};
	const kiln_cli_option rows[] = {
	    {.name = "once", .kind = KILN_CLI_CUSTOM, .out = &sub, .parse = parse_once, .custom_flag = true},
	    {.name = "json",
	     .letter = 'j',
	     .kind = KILN_CLI_CUSTOM,
	     .out = &sub,
	     .parse = parse_json,
	     .custom_flag = true},
	    {.name = "set", .letter = 's', .kind = KILN_CLI_SETS, .out = &sets},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "cache",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one config file (see kiln cache --help)",
	};
	kiln_cache_config *config = NULL;
	kiln_cache *cache = NULL;
	kiln_buf out = KILN_BUF_INIT(0);
	uint64_t bad = 0;
	int first, status;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? KILN_EXIT_USAGE : KILN_EXIT_OK;
	}
	sub.name = argv[1];
	if (strcmp(sub.name, "serve") == 0)
		return kiln_cmd_cache_serve(argc - 1, argv + 1);
	if (strcmp(sub.name, "sync") != 0 && strcmp(sub.name, "status") != 0 &&
	    strcmp(sub.name, "verify") != 0)
		return kiln_cli_fail("cache", "unknown subcommand '%s' (sync, status, verify, serve)",
		                     sub.name);
	if ((status = kiln_cli_parse(&first, &spec, argc - 1, argv + 1)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (kiln_cache_config_load(&config, argv[1 + first], sets.v, sets.n) < 0) {
		kiln_cli_fail("cache", "%s", kiln_error_last());
		goto cleanup;
	}
	if (strcmp(sub.name, "sync") == 0 && !sub.once)
		kiln_log_setup(true, KILN_LOG_INFO);
	else
		kiln_log_setup(false, KILN_LOG_WARN);
	if (kiln_cache_open(&cache, config, NULL) < 0) {
		kiln_cli_fail("cache", "%s", kiln_error_last());
		goto cleanup;
	}
	if (strcmp(sub.name, "sync") == 0) {
		/* a long-running sync scrubs in the background like serve */
		if (!sub.once && kiln_cache_scrub_start(cache) < 0) {
			kiln_cli_fail("cache", "%s", kiln_error_last());
			goto cleanup;
		}
		status = sub.once ? sync_once(cache, isatty(2)) : sync_loop(cache, config->sync_seconds);
	} else if (strcmp(sub.name, "status") == 0) {
		if ((sub.json ? kiln_cache_status_json(cache, &out) : kiln_cache_status(cache, &out)) < 0) {
			kiln_cli_fail("cache", "%s", kiln_error_last());
			goto cleanup;
		}
		if (kiln_cli_write_buf("cache", &out, 0) != 0)
			goto cleanup;
		status = KILN_EXIT_OK;
	} else {
		if (kiln_cache_verify(cache, &bad) < 0) {
			kiln_cli_fail("cache", "%s", kiln_error_last());
			goto cleanup;
		}
		printf("verified the cache: %" PRIu64 " corrupt shard%s%s\n", bad, bad == 1 ? "" : "s",
		       bad ? " removed (the next sync fetches them again)" : "");
		status = bad ? KILN_EXIT_INVALID : KILN_EXIT_OK;
	}
cleanup:
	kiln_buf_free(&out);
	kiln_cache_close(cache);
	kiln_cache_config_free(config);
	free(sets.v);
	return status;
}
