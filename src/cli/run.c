/* `kiln run PIPELINE`: the curate path. A file or stdin source ends in one
 * snapshot commit; a Kafka source runs as a consumer-group member, a
 * directory source picks up new files, until SIGTERM (or, with
 * --stop-at-end, until it has read every partition or file there is),
 * committing snapshots as it goes. Prints the dataset version it made. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "cli/progress.h"
#include "cli/version.h"
#include "config.h"
#include "core/error.h"
#include "core/log.h"
#include "ingest/curate_run.h"
#include "ingest/engine.h"
#include "ingest/pipeline.h"
#include "ingest/source.h"
#include "openlineage/openlineage.h"

static const char usage_text[] =
    "usage: kiln run PIPELINE [--set dotted.key=value]... [--stop-at-end] [--json]\n"
    "\n"
    "Reads the pipeline's source (a JSON Lines file, a folder of them, stdin,\n"
    "or Kafka topics), validates each record against the contract,\n"
    "pseudonymises personal data, assigns train/dev/test, packs zstd shards into\n"
    "the store, puts rejected records in quarantine, and commits snapshots to\n"
    "refs/heads/<dataset>/<branch> of the manifest repository. Every key is\n"
    "described in docs/PIPELINES.md.\n"
    "\n"
    "A file source is read to its end and committed once; it resumes after the\n"
    "records earlier runs read. A directory source reads each file of its folder\n"
    "that no earlier run committed (.gz and .zst decompressed), in name order,\n"
    "and keeps picking up new ones (write a file aside, then rename it in).\n"
    "A Kafka source runs as a member of its consumer group and lands every\n"
    "batch in the raw zone. Both commit a snapshot every snapshot.records\n"
    "records, every snapshot.seconds seconds, on SIGUSR1 or `kiln snapshot`,\n"
    "and on SIGTERM/SIGINT (then they exit 0). Each resumes from\n"
    "lineage.json, so every record is committed exactly once (docs/STREAMING.md).\n"
    "SIGHUP reads the pipeline file again and applies log.* and snapshot.*;\n"
    "under systemd it speaks the notify protocol (docs/OPERATIONS.md).\n"
    "\n"
    "Options:\n"
    "  -s, --set KEY=VALUE   override a config value, e.g. --set split.salt=v2\n"
    "                        (after ${NAME} / ${NAME:-default} expansion)\n"
    "      --stop-at-end     kafka: commit and exit once every assigned partition\n"
    "                        is read to its end (for batch jobs, tests, benchmarks);\n"
    "                        exit 2 when no broker answers within\n"
    "                        source.connect_timeout seconds (default 30);\n"
    "                        directory: read the files there are, commit, exit\n"
    "  -j, --json            the run's summary as one JSON document on stdout\n"
    "                        (docs/JSON.md) instead of its lines\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on a commit (or nothing new to read), 2 on a config, key,\n"
    "store or manifest error, a gap under source.on_gap: stop, (--stop-at-end)\n"
    "no broker answering within source.connect_timeout, or (--stop-at-end) a\n"
    "directory's file that does not decompress whole (the other files are\n"
    "committed).\n";

static volatile sig_atomic_t stop_requested, snapshot_requested, reload_requested;

/* A one-shot run's progress line on a terminal (stderr). */
typedef struct progress_line {
	kiln_cli_rate rate;
	char label[160];
} progress_line;

static void on_progress(void *ctx, uint64_t bytes, uint64_t total, uint64_t records)
{
	progress_line *l = ctx;

	kiln_cli_rate_draw(&l->rate, bytes, total, records, l->label);
}

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void on_snapshot(int sig)
{
	(void)sig;
	snapshot_requested = 1;
}

static void on_reload(int sig)
{
	(void)sig;
	reload_requested = 1;
}

static void on_commit(void *ctx, const char *commit, const kiln_stats *delta, size_t shards,
                      const kiln_lineage_entry *positions, size_t count)
{
	kiln_openlineage_run_commit(ctx, commit, delta, shards, positions, count);
}

static int on_metrics(void *ctx, kiln_metrics *m)
{
	return kiln_openlineage_metrics(ctx, m);
}

/* A streaming source runs until SIGTERM/SIGINT, snapshots on SIGUSR1 and
 * reloads on SIGHUP; a one-shot one commits at its end. ol: the run's
 * OpenLineage events (NULL: none). */
static int run(const kiln_pipeline *p, bool stop_at_end, const kiln_cli_sets *sets, kiln_openlineage *ol,
               kiln_run_result *r)
{
	struct sigaction sa = {0};
	kiln_build_info build;
	progress_line line = {.rate = {.tty = isatty(STDERR_FILENO) == 1}};
	kiln_run_progress progress = {.fn = on_progress, .ctx = &line};
	kiln_engine_options o = {.progress = &progress,
	                         .stop_at_end = stop_at_end,
	                         .stop = &stop_requested,
	                         .snapshot = &snapshot_requested,
	                         .reload = &reload_requested,
	                         .sets = sets->v,
	                         .set_count = sets->n,
	                         .build_info = &build,
	                         .committed = ol ? on_commit : NULL,
	                         .metrics = ol ? on_metrics : NULL,
	                         .hook_ctx = ol};

	if (!kiln_engine_streams(p)) {
		int rc;

		snprintf(line.label, sizeof(line.label), "kiln run: %s", p->source_name);
		rc = kiln_engine_run(p, &o, r);
		kiln_cli_rate_clear(&line.rate);
		return rc;
	}
	kiln_cli_build_info(&build);
	if (kiln_openlineage_start_sender(ol) < 0)
		return KILN_EIO;

	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_snapshot;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_reload;
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return kiln_engine_run(p, &o, r);
}

/* A directory run: the files it committed (over all its snapshots) and
 * those that changed after their commit (each also logged as a warning),
 * then the last version. */
static void print_folder(const kiln_pipeline *p, const kiln_run_result *r)
{
	if (!r->commit[0])
		printf("%s@%s: nothing new in %s", p->dataset, p->branch, p->source_path);
	else
		printf("%s@%.12s: +%llu records (%llu valid, %llu quarantined) in %zu shards from %llu "
		       "file%s of %s",
		       p->dataset, r->commit, (unsigned long long)r->delta.records_in,
		       (unsigned long long)r->delta.valid, (unsigned long long)r->delta.quarantined,
		       r->shards, (unsigned long long)r->files_read, r->files_read == 1 ? "" : "s",
		       p->source_path);
	if (r->files_changed)
		printf("; %llu file%s changed after %s committed, not read again: %s",
		       (unsigned long long)r->files_changed, r->files_changed == 1 ? "" : "s",
		       r->files_changed == 1 ? "it was" : "they were", r->changed);
	printf("\n");
	if (r->commit[0]) {
		char *repo = realpath(p->manifest_repo, NULL);
		printf("version: %s (refs/heads/%s/%s in %s)\n", r->commit, p->dataset, p->branch,
		       repo ? repo : p->manifest_repo);
		free(repo);
	}
}

/* --json: the run's summary as one document (docs/JSON.md). */
static int print_json(const kiln_pipeline *p, const kiln_run_result *r)
{
	kiln_buf b = KILN_BUF_INIT(0);
	char *repo = realpath(p->manifest_repo, NULL);
	bool one_shot = !kiln_engine_streams(p) && !p->source->reads_files;
	int rc = kiln_buf_puts(&b, "{\"dataset\":") | kiln_cli_json_string(&b, p->dataset) |
	         kiln_buf_puts(&b, ",\"branch\":") | kiln_cli_json_string(&b, p->branch) |
	         kiln_buf_puts(&b, ",\"source\":") | kiln_cli_json_string(&b, p->source->kind) |
	         kiln_buf_puts(&b, ",\"source_name\":") | kiln_cli_json_string(&b, p->source_name) |
	         kiln_buf_puts(&b, ",\"commit\":") | kiln_cli_json_string_or_null(&b, r->commit) |
	         kiln_buf_printf(&b, ",\"ref\":\"refs/heads/%s/%s\",\"manifest\":", p->dataset, p->branch) |
	         kiln_cli_json_string(&b, repo ? repo : p->manifest_repo) |
	         kiln_buf_printf(&b,
	                         ",\"records_in\":%llu,\"valid\":%llu,\"quarantined\":%llu,\"shards\":%zu,"
	                         "\"splits\":{\"train\":%llu,\"dev\":%llu,\"test\":%llu}",
	                         (unsigned long long)r->delta.records_in, (unsigned long long)r->delta.valid,
	                         (unsigned long long)r->delta.quarantined, r->shards,
	                         (unsigned long long)r->delta.splits[KILN_SPLIT_TRAIN].records,
	                         (unsigned long long)r->delta.splits[KILN_SPLIT_DEV].records,
	                         (unsigned long long)r->delta.splits[KILN_SPLIT_TEST].records);

	if (one_shot && r->commit[0])
		rc |=
		    kiln_buf_printf(&b, ",\"first_offset\":%llu,\"next_offset\":%llu",
		                    (unsigned long long)r->first_offset, (unsigned long long)r->next_offset);
	else if (one_shot)
		rc |= kiln_buf_printf(&b, ",\"first_offset\":null,\"next_offset\":%llu",
		                      (unsigned long long)r->next_offset);
	if (one_shot)
		rc |= kiln_buf_printf(&b, ",\"serial_cpu_s\":%.3f", (double)r->serial_turns_ns / 1e9);
	if (p->source->reads_files)
		rc |=
		    kiln_buf_printf(&b, ",\"files_read\":%llu,\"files_changed\":%llu,\"changed\":",
		                    (unsigned long long)r->files_read, (unsigned long long)r->files_changed) |
		    kiln_cli_json_string_or_null(&b, r->changed);
	rc |= kiln_buf_puts(&b, "}\n");
	free(repo);
	rc = kiln_cli_write_buf("run", &b, rc);
	kiln_buf_free(&b);
	return rc;
}

int kiln_cmd_run(int argc, char **argv)
{
	kiln_cli_sets sets = {0};
	bool stop_at_end = false, json = false;
	const kiln_cli_option rows[] = {
	    {.name = "set", .letter = 's', .kind = KILN_CLI_SETS, .out = &sets},
	    {.name = "stop-at-end", .kind = KILN_CLI_FLAG, .out = &stop_at_end},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &json},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "run",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one pipeline file (see kiln run --help)",
	};
	kiln_pipeline *pipeline = NULL;
	kiln_openlineage *ol = NULL;
	kiln_run_result r;
	char why[1024];
	int first, rc, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (kiln_pipeline_load(&pipeline, argv[first], sets.v, sets.n) < 0) {
		kiln_cli_fail("run", "%s", kiln_error_last());
		goto cleanup;
	}
	kiln_log_setup(pipeline->log_json, pipeline->log_level);
	if (stop_at_end && !kiln_engine_stops_at_end(pipeline)) {
		kiln_cli_fail("run",
		              "--stop-at-end is for kafka and directory sources (a file source always stops "
		              "at its end)");
		goto cleanup;
	}
	if (kiln_openlineage_open(&ol, pipeline, PACKAGE_VERSION) < 0) {
		kiln_cli_fail("run", "%s", kiln_error_last());
		goto cleanup;
	}
	kiln_openlineage_begin(ol, "RUN", kiln_engine_streams(pipeline));
	rc = run(pipeline, stop_at_end, &sets, ol, &r);
	snprintf(why, sizeof(why), "%s", rc < 0 ? kiln_error_last() : "");
	kiln_openlineage_run_end(ol, &r, kiln_engine_streams(pipeline), rc, why);
	if (rc < 0) {
		kiln_cli_fail("run", "%s", why);
		goto cleanup;
	}
	if (json) {
		if ((status = print_json(pipeline, &r)) != 0)
			goto cleanup;
	} else if (pipeline->source->reads_files) {
		print_folder(pipeline, &r);
	} else if (kiln_engine_streams(pipeline)) {
		printf("%s@%s: +%llu records (%llu valid, %llu quarantined) in %zu shards this run\n",
		       pipeline->dataset, pipeline->branch, (unsigned long long)r.delta.records_in,
		       (unsigned long long)r.delta.valid, (unsigned long long)r.delta.quarantined, r.shards);
		if (r.commit[0]) {
			char *repo = realpath(pipeline->manifest_repo, NULL);
			printf("version: %s (refs/heads/%s/%s in %s)\n", r.commit, pipeline->dataset,
			       pipeline->branch, repo ? repo : pipeline->manifest_repo);
			free(repo);
		}
	} else if (!r.commit[0]) {
		printf("%s@%s: nothing new in %s (already read up to offset %llu)\n", pipeline->dataset,
		       pipeline->branch, pipeline->source_name, (unsigned long long)r.next_offset);
	} else {
		printf("%s@%.12s: +%llu records (%llu valid, %llu quarantined) in %zu shards",
		       pipeline->dataset, r.commit, (unsigned long long)r.delta.records_in,
		       (unsigned long long)r.delta.valid, (unsigned long long)r.delta.quarantined, r.shards);
		printf(" [train %llu, dev %llu, test %llu], offsets %llu-%llu of %s\n",
		       (unsigned long long)r.delta.splits[KILN_SPLIT_TRAIN].records,
		       (unsigned long long)r.delta.splits[KILN_SPLIT_DEV].records,
		       (unsigned long long)r.delta.splits[KILN_SPLIT_TEST].records,
		       (unsigned long long)r.first_offset, (unsigned long long)r.next_offset - 1,
		       pipeline->source_name);
		char *repo =
		    realpath(pipeline->manifest_repo, NULL); /* "pipelines/../x" reads better resolved */
		printf("version: %s (refs/heads/%s/%s in %s)\n", r.commit, pipeline->dataset,
		       pipeline->branch, repo ? repo : pipeline->manifest_repo);
		free(repo);
	}
	status = KILN_EXIT_OK;
cleanup:
	kiln_openlineage_close(ol); /* sends what is queued, within openlineage.timeout_ms */
	kiln_pipeline_free(pipeline);
	free(sets.v);
	return status;
}
