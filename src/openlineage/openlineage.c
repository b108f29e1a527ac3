/* OpenLineage (see openlineage.h): the pipeline's `openlineage:` section,
 * the handle, and the events of run, promote, push and erase built from
 * what each command has at hand (event.c renders them, queue.c delivers). */
#include "openlineage/openlineage.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "ingest/source.h"
#include "openlineage/event.h"
#include "openlineage/internal.h"
#include "quality/profile.h"

#define TOKEN_MAX 4096 /* as the http source's */

static const char *const section_keys[] = {
    "url", "token_file", "file", "kafka_topic", "namespace", "queue_dir", "queue_max_mb", "timeout_ms", NULL};

/* "file://<host><absolute path>" */
static void file_namespace(char *out, size_t cap, const char *path)
{
	char host[256] = "localhost", *abs = realpath(path, NULL);

	gethostname(host, sizeof(host) - 1);
	snprintf(out, cap, "file://%s%s", host, abs ? abs : path);
	free(abs);
}

static int read_section(kiln_openlineage *ol, const kiln_yaml_node *sec, kiln_config *cfg)
{
	kiln_ol_config *c = &ol->cfg;
	int64_t mb = 64, timeout = 2000;
	int rc;

	if ((rc = kiln_config_check_keys(cfg, sec, "openlineage", section_keys)) < 0 ||
	    (rc = kiln_config_string(cfg, sec, "openlineage", "url", false, &c->url)) < 0 ||
	    (rc = kiln_config_string(cfg, sec, "openlineage", "file", false, &c->file)) < 0 ||
	    (rc = kiln_config_string(cfg, sec, "openlineage", "token_file", false, &c->token_file)) < 0 ||
	    (rc = kiln_config_string(cfg, sec, "openlineage", "kafka_topic", false, &c->kafka_topic)) < 0 ||
	    (rc = kiln_config_string(cfg, sec, "openlineage", "namespace", false, &c->namespace_)) < 0 ||
	    (rc = kiln_config_string(cfg, sec, "openlineage", "queue_dir", false, &c->queue_dir)) < 0 ||
	    (rc = kiln_config_int(cfg, sec, "openlineage", "queue_max_mb", 1, 1 << 20, &mb)) < 0 ||
	    (rc = kiln_config_int(cfg, sec, "openlineage", "timeout_ms", 1, 600000, &timeout)) < 0)
		return rc;
	if (!!c->url + !!c->file + !!c->kafka_topic != 1)
		return kiln_yaml_fail(cfg->doc, sec, "openlineage",
		                      "set exactly one of url, file and kafka_topic");
	if (c->kafka_topic && (!ol->p->source || strcmp(ol->p->source->kind, "kafka") != 0))
		return kiln_yaml_fail(
		    cfg->doc, kiln_yaml_get(sec, "kafka_topic"), "openlineage.kafka_topic",
		    "the events go to the pipeline's Kafka brokers: its source must be kafka");
	if (c->url && strncmp(c->url, "http://", 7) != 0 && strncmp(c->url, "https://", 8) != 0)
		return kiln_yaml_fail(cfg->doc, kiln_yaml_get(sec, "url"), "openlineage.url",
		                      "an http:// or https:// URL is expected");
	if (c->token_file && !c->url)
		return kiln_yaml_fail(cfg->doc, kiln_yaml_get(sec, "token_file"), "openlineage.token_file",
		                      "a token is for the url transport");
	c->file = kiln_config_resolve(cfg, c->file);
	c->token_file = kiln_config_resolve(cfg, c->token_file);
	c->queue_dir = c->queue_dir ? kiln_config_resolve(cfg, c->queue_dir)
	                            : kiln_arena_printf(cfg->arena, "%s.openlineage", ol->p->manifest_repo);
	c->queue_max_bytes = (uint64_t)mb << 20;
	c->timeout_ms = timeout;
	return c->queue_dir ? 0 : kiln_error_oom(NULL);
}

/* The input datasets' namespace, as OpenLineage names them: kafka://<first
 * broker>, file://<host> (the name is then the file's path). */
static void input_namespace(kiln_openlineage *ol, kiln_config *cfg)
{
	const kiln_yaml_node *src = kiln_yaml_get(kiln_yaml_root(ol->p->doc), "source");
	const char *brokers = NULL, *kind = ol->p->source ? ol->p->source->kind : "file";
	char host[256] = "localhost";

	gethostname(host, sizeof(host) - 1);
	if (strcmp(kind, "kafka") == 0 &&
	    kiln_config_string(cfg, src, "source", "brokers", false, &brokers) == 0 && brokers)
		snprintf(ol->input_ns, sizeof(ol->input_ns), "kafka://%.*s", (int)strcspn(brokers, ","),
		         brokers);
	else if (strcmp(kind, "file") == 0 || strcmp(kind, "directory") == 0 || strcmp(kind, "stdin") == 0)
		snprintf(ol->input_ns, sizeof(ol->input_ns), "file://%s", host);
	else
		snprintf(ol->input_ns, sizeof(ol->input_ns), "kiln-source://%s", kind);
}

/* The contract's facets, rendered once ("" when the contract does not load:
 * the command fails on it anyway, and says why). */
static int render_schema(kiln_openlineage *ol)
{
	kiln_contract_options copts = {.schema = ol->p->schema};
	kiln_contract *c = NULL;
	kiln_buf b = KILN_BUF_INIT(0);

	if (ol->p->contract && kiln_contract_load(&c, ol->p->contract, &copts) == 0)
		kiln_ol_schema_facets(&b, ol->producer, c);
	kiln_contract_free(c);
	if (kiln_buf_putc(&b, '\0') < 0)
		return kiln_error_oom(NULL);
	ol->schema_facets = b.ptr;
	return 0;
}

int kiln_openlineage_open(kiln_openlineage **out, const kiln_pipeline *p, const char *version)
{
	const kiln_yaml_node *sec = kiln_yaml_get(kiln_yaml_root(p->doc), "openlineage");
	kiln_config cfg = {.doc = p->doc, .arena = p->arena, .docs = "docs/LINEAGE.md"};
	kiln_openlineage *ol;
	const char *base;
	int rc;

	*out = NULL;
	if (!sec || kiln_yaml_is_null(sec))
		return 0;
	if (!(cfg.dir = kiln_arena_dirname(p->arena, p->file)) || !(ol = calloc(1, sizeof(*ol))))
		return kiln_error_oom(NULL);
	ol->p = p;
	pthread_mutex_init(&ol->lock, NULL);
	pthread_cond_init(&ol->wake, NULL);
	if ((rc = read_section(ol, sec, &cfg)) < 0)
		goto fail;
	if (ol->cfg.token_file) {
		if ((rc = kiln_secret_read_file(&ol->token, &ol->token_len, ol->cfg.token_file, "token file",
		                                TOKEN_MAX)) < 0)
			goto fail;
		while (ol->token_len &&
		       (ol->token[ol->token_len - 1] == '\n' || ol->token[ol->token_len - 1] == '\r'))
			ol->token[--ol->token_len] = '\0';
		if (!ol->token_len || memchr(ol->token, '\n', ol->token_len) ||
		    memchr(ol->token, '\r', ol->token_len)) {
			rc = kiln_error_set(KILN_EINVALID, "%s: token file: one line expected",
			                    ol->cfg.token_file);
			goto fail;
		}
	}
	if (ol->cfg.url) {
		kiln_buf shown = KILN_BUF_INIT(0);

		if (kiln_secret_redact_userinfo(&shown, ol->cfg.url, strlen(ol->cfg.url)) < 0) {
			rc = kiln_error_oom(NULL);
			goto fail;
		}
		snprintf(ol->url_shown, sizeof(ol->url_shown), "%.*s", (int)shown.len, shown.ptr);
		kiln_buf_free(&shown);
	}
	snprintf(ol->producer, sizeof(ol->producer), KILN_OL_HOME "/releases/tag/v%s", version);
	base = strrchr(p->file, '/') ? strrchr(p->file, '/') + 1 : p->file;
	snprintf(ol->job_name, sizeof(ol->job_name), "kiln.%.*s", (int)strcspn(base, "."), base);
	file_namespace(ol->repo_ns, sizeof(ol->repo_ns), p->manifest_repo);
	if (!ol->cfg.namespace_)
		ol->cfg.namespace_ = ol->repo_ns;
	input_namespace(ol, &cfg);
	if ((rc = render_schema(ol)) < 0)
		goto fail;
	*out = ol;
	return 0;
fail:
	kiln_openlineage_close(ol);
	return rc;
}

static void free_positions(kiln_openlineage *ol)
{
	for (size_t i = 0; i < ol->pos_count; i++) {
		free(ol->pos[i].topic);
		free(ol->pos[i].path);
	}
	free(ol->pos);
	ol->pos = NULL;
	ol->pos_count = 0;
}

void kiln_openlineage_close(kiln_openlineage *ol)
{
	if (!ol)
		return;
	if (ol->thread_started) {
		pthread_mutex_lock(&ol->lock);
		ol->stop = true;
		atomic_store(&ol->stopping, true);
		pthread_cond_signal(&ol->wake);
		pthread_mutex_unlock(&ol->lock);
		pthread_join(ol->thread, NULL);
	}
	if (ol->job_type) /* a command that emitted: send what there is */
		kiln_ol_flush(ol);
	kiln_ol_producer_close(ol);
	kiln_secret_free(ol->token, ol->token_len);
	free(ol->schema_facets);
	free_positions(ol);
	kiln_manifest_close(ol->manifest);
	pthread_mutex_destroy(&ol->lock);
	pthread_cond_destroy(&ol->wake);
	free(ol);
}

int kiln_openlineage_start_sender(kiln_openlineage *ol)
{
	if (!ol || ol->thread_started)
		return 0;
	if (pthread_create(&ol->thread, NULL, kiln_ol_sender, ol) != 0)
		return kiln_error_set(KILN_EIO, "openlineage: cannot start the sender thread");
	ol->thread_started = true;
	return 0;
}

#define COUNTER_FN(field)                                                                                    \
	static double read_##field(void *ctx)                                                                \
	{                                                                                                    \
		return (double)atomic_load(&((kiln_openlineage *)ctx)->field);                               \
	}
COUNTER_FN(queued)
COUNTER_FN(sent)
COUNTER_FN(dropped_full)
COUNTER_FN(refused)
COUNTER_FN(failed_sends)

int kiln_openlineage_metrics(kiln_openlineage *ol, kiln_metrics *m)
{
	if (!ol)
		return 0;
	return kiln_metrics_counter_fn(m, "kiln_openlineage_events_queued_total",
	                               "OpenLineage events written to the queue", NULL, read_queued, ol) |
	       kiln_metrics_counter_fn(m, "kiln_openlineage_events_sent_total",
	                               "OpenLineage events delivered (and removed from the queue)", NULL,
	                               read_sent, ol) |
	       kiln_metrics_counter_fn(
	           m, "kiln_openlineage_events_dropped_total",
	           "OpenLineage events dropped: the queue full (the oldest), or refused by the "
	           "endpoint with a 4xx",
	           "reason=\"queue_full\"", read_dropped_full, ol) |
	       kiln_metrics_counter_fn(m, "kiln_openlineage_events_dropped_total", NULL, "reason=\"refused\"",
	                               read_refused, ol) |
	       kiln_metrics_counter_fn(m, "kiln_openlineage_send_failures_total",
	                               "OpenLineage sends that failed transiently (retried later)", NULL,
	                               read_failed_sends, ol);
}
