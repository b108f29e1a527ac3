/* The schema registry client and its cache (schema_registry.h). Workers
 * share one cache under a mutex; fetches run outside it, one at a time
 * (a worker that wants an id being fetched waits, then finds it). An
 * entry is held (refs) while a worker decodes with it, and only entries
 * nobody holds are evicted, least recently used first, once cache_max are
 * kept. A 404 is cached too (the id is unknown: schema_unknown); a registry
 * that does not answer is retried with backoff for wait_seconds, one log
 * line per try naming the endpoint, and never turns a record into a
 * reject. */
#include "ingest/schema_registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "contract/avro.h"
#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "core/secret.h"
#include "store/curl.h"

#define BODY_MAX (4u << 20) /* a schema's answer */

struct entry {
	uint32_t id;
	kiln_avro_schema *schema; /* NULL: the registry does not know the id */
	unsigned refs;
	uint64_t used;
};

struct kiln_schema_registry {
	kiln_schema_registry_config cfg;
	char *userpwd; /* "user:password" or NULL */
	size_t userpwd_len;
	kiln_curl_pool curl;
	pthread_mutex_t lock;
	pthread_mutex_t fetch_lock; /* one fetch at a time: each id is asked for once */
	struct entry **entries;
	size_t count, cap;
	uint64_t clock, fetches;
};

int kiln_schema_registry_new(kiln_schema_registry **out, const kiln_schema_registry_config *cfg)
{
	kiln_schema_registry *reg;
	int rc;

	*out = NULL;
	if ((rc = kiln_curl_init()) < 0)
		return rc;
	if (!(reg = calloc(1, sizeof(*reg))))
		return kiln_error_oom(NULL);
	reg->cfg = *cfg;
	if (!reg->cfg.timeout_ms)
		reg->cfg.timeout_ms = 10000;
	if (!reg->cfg.wait_seconds)
		reg->cfg.wait_seconds = 300;
	if (!reg->cfg.cache_max)
		reg->cfg.cache_max = 1000;
	kiln_curl_pool_init(&reg->curl);
	pthread_mutex_init(&reg->lock, NULL);
	pthread_mutex_init(&reg->fetch_lock, NULL);
	if (cfg->credentials_file) {
		if ((rc = kiln_secret_read_file(&reg->userpwd, &reg->userpwd_len, cfg->credentials_file,
		                                "schema registry credentials file", 4096)) < 0) {
			kiln_schema_registry_free(reg);
			return rc;
		}
		/* one line: user:password (a trailing newline is not part of it) */
		while (reg->userpwd_len && (reg->userpwd[reg->userpwd_len - 1] == '\n' ||
		                            reg->userpwd[reg->userpwd_len - 1] == '\r'))
			reg->userpwd[--reg->userpwd_len] = '\0';
		if (!memchr(reg->userpwd, ':', reg->userpwd_len) ||
		    strlen(reg->userpwd) != reg->userpwd_len) {
			rc = kiln_error_set(KILN_EINVALID, "%s: expected one line user:password",
			                    cfg->credentials_file);
			kiln_schema_registry_free(reg);
			return rc;
		}
	}
	*out = reg;
	return 0;
}

void kiln_schema_registry_free(kiln_schema_registry *reg)
{
	if (!reg)
		return;
	for (size_t i = 0; i < reg->count; i++) {
		kiln_avro_schema_free(reg->entries[i]->schema);
		free(reg->entries[i]);
	}
	free(reg->entries);
	kiln_secret_free(reg->userpwd, reg->userpwd_len);
	kiln_curl_pool_free(&reg->curl);
	pthread_mutex_destroy(&reg->lock);
	pthread_mutex_destroy(&reg->fetch_lock);
	free(reg);
}

void kiln_schema_registry_stats(kiln_schema_registry *reg, uint64_t *fetches, size_t *cached)
{
	pthread_mutex_lock(&reg->lock);
	*fetches = reg->fetches;
	*cached = reg->count;
	pthread_mutex_unlock(&reg->lock);
}

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
	kiln_buf *b = ctx;

	if (b->len + size * n > BODY_MAX || kiln_buf_put(b, data, size * n) < 0)
		return 0;
	return size * n;
}

/* {"schema": "<the schema's JSON, as a string>", "schemaType"?: "AVRO"}:
 * the schema's text unescaped into text. */
static int schema_text(const kiln_buf *body, kiln_buf *text, const char *url)
{
	kiln_json_limits lim = {.max_bytes = BODY_MAX};
	kiln_json_scanner *sc = kiln_json_scanner_new(&lim);
	kiln_json_token tok;
	int found, rc = 0;

	if (!sc)
		return kiln_error_oom(NULL);
	found = kiln_json_lookup(sc, body->ptr ? body->ptr : "", body->len, "schemaType", &tok);
	if (found == 1 && (tok.type != KILN_JSON_STRING || tok.len != 4 || memcmp(tok.ptr, "AVRO", 4) != 0))
		rc = kiln_error_set(KILN_EINVALID, "%s: not an Avro schema (schemaType)", url);
	else if (found < 0 ||
	         (found = kiln_json_lookup(sc, body->ptr ? body->ptr : "", body->len, "schema", &tok)) != 1 ||
	         tok.type != KILN_JSON_STRING)
		rc = kiln_error_set(KILN_EINVALID, "%s: the answer has no \"schema\" string", url);
	else if ((rc = kiln_buf_reserve(text, tok.len + 1)) == 0)
		text->len = kiln_json_unescape(text->ptr, text->cap, &tok);
	kiln_json_scanner_free(sc);
	return rc;
}

/* One GET of url into body: 0 with *status, or KILN_EIO (the error set,
 * naming the endpoint) when no answer came; *cc for kiln_curl_retriable. */
static int get(kiln_schema_registry *reg, const char *url, kiln_buf *body, long *status, CURLcode *cc)
{
	char err[CURL_ERROR_SIZE] = "";
	CURL *c = kiln_curl_take(&reg->curl);

	*status = 0;
	if (!c)
		return kiln_error_oom(NULL);
	kiln_curl_request(c, url, err);
	curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)reg->cfg.timeout_ms);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
	if (reg->cfg.ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, reg->cfg.ca_file);
	if (reg->userpwd) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_USERPWD, reg->userpwd);
	}
	*cc = curl_easy_perform(c);
	if (*cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	if (reg->userpwd)
		curl_easy_setopt(c, CURLOPT_USERPWD, NULL);
	kiln_curl_give(&reg->curl, c);
	pthread_mutex_lock(&reg->lock);
	reg->fetches++;
	pthread_mutex_unlock(&reg->lock);
	if (*cc != CURLE_OK)
		return kiln_error_set(KILN_EIO, "schema registry %s: %s", url,
		                      err[0] ? err : curl_easy_strerror(*cc));
	return 0;
}

/* One GET: 0 with the schema (or NULL on 404), 1 when worth a retry (the
 * error set), another negative code when not. */
static int fetch_once(kiln_schema_registry *reg, const char *url, kiln_avro_schema **out)
{
	kiln_buf body = KILN_BUF_INIT(BODY_MAX), text = {0};
	long status = 0;
	CURLcode cc = CURLE_OK;
	int rc;

	*out = NULL;
	rc = get(reg, url, &body, &status, &cc);
	if (rc == 0 && status != 200 && status != 404)
		rc = kiln_error_set(KILN_EIO, "schema registry %s: HTTP %ld", url, status);
	if (rc == 0 && status == 200 && (rc = schema_text(&body, &text, url)) == 0)
		rc = kiln_avro_schema_parse(out, url, text.ptr ? text.ptr : "", text.len);
	if (rc < 0 && rc != KILN_ENOMEM && kiln_curl_retriable(cc, status))
		rc = 1;
	kiln_buf_free(&body);
	kiln_buf_free(&text);
	return rc;
}

/* The registry's base URL without its trailing slashes: n bytes of it. */
static size_t base_len(const kiln_schema_registry *reg)
{
	size_t n = strlen(reg->cfg.url);

	while (n && reg->cfg.url[n - 1] == '/')
		n--;
	return n;
}

int kiln_schema_registry_probe(kiln_schema_registry *reg, char *msg, size_t cap)
{
	char url[2048];
	kiln_buf body = KILN_BUF_INIT(BODY_MAX);
	long status;
	CURLcode cc;
	int rc;

	snprintf(url, sizeof(url), "%.*s/subjects", (int)base_len(reg), reg->cfg.url);
	if ((rc = get(reg, url, &body, &status, &cc)) == 0 && status != 200)
		rc = kiln_error_set(KILN_EIO, "schema registry %s: HTTP %ld", url, status);
	if (rc == 0)
		snprintf(msg, cap, "%s: answered", url);
	kiln_buf_free(&body);
	return rc;
}

/* The schema for id, retried while the registry does not answer. */
static int fetch(kiln_schema_registry *reg, uint32_t id, kiln_avro_schema **out)
{
	char url[2048];
	struct timespec start, now;
	unsigned delay_ms = 100;
	int rc;

	snprintf(url, sizeof(url), "%.*s/schemas/ids/%u", (int)base_len(reg), reg->cfg.url, id);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (int attempt = 1;; attempt++) {
		if ((rc = fetch_once(reg, url, out)) != 1)
			return rc;
		clock_gettime(CLOCK_MONOTONIC, &now);
		KILN_LOG(KILN_LOG_WARN, "schema_registry_unavailable", kiln_error_last(),
		         KILN_F_STR("endpoint", url), KILN_F_INT("attempt", attempt));
		if (now.tv_sec - start.tv_sec >= (time_t)reg->cfg.wait_seconds)
			return kiln_error_set(KILN_EIO, "schema registry %s: no answer for %u s", url,
			                      reg->cfg.wait_seconds);
		struct timespec d = {.tv_sec = delay_ms / 1000,
		                     .tv_nsec = (long)(delay_ms % 1000) * 1000000L};
		nanosleep(&d, NULL);
		delay_ms = delay_ms < 5000 ? delay_ms * 2 : 5000;
	}
}

static struct entry *find(kiln_schema_registry *reg, uint32_t id)
{
	for (size_t i = 0; i < reg->count; i++)
		if (reg->entries[i]->id == id)
			return reg->entries[i];
	return NULL;
}

/* Lock held: room for one more (evicts the least recently used unheld). */
static int make_room(kiln_schema_registry *reg)
{
	if (reg->count >= reg->cfg.cache_max) {
		size_t victim = SIZE_MAX;
		for (size_t i = 0; i < reg->count; i++)
			if (!reg->entries[i]->refs &&
			    (victim == SIZE_MAX || reg->entries[i]->used < reg->entries[victim]->used))
				victim = i;
		if (victim != SIZE_MAX) {
			kiln_avro_schema_free(reg->entries[victim]->schema);
			free(reg->entries[victim]);
			reg->entries[victim] = reg->entries[--reg->count];
		}
	}
	if (reg->count == reg->cap) {
		size_t cap = reg->cap ? reg->cap * 2 : 16;
		struct entry **p = realloc(reg->entries, cap * sizeof(*p));
		if (!p)
			return kiln_error_oom(NULL);
		reg->entries = p;
		reg->cap = cap;
	}
	return 0;
}

/* Lock held: the cached entry for id, held, or NULL. */
static struct entry *take(kiln_schema_registry *reg, uint32_t id)
{
	struct entry *e = find(reg, id);

	if (e) {
		e->refs++;
		e->used = ++reg->clock;
	}
	return e;
}

/* The entry for id, held (release it), fetched when not cached: one fetch
 * at a time, so workers that want the same id wait for the first's answer. */
static int acquire(kiln_schema_registry *reg, uint32_t id, struct entry **out)
{
	kiln_avro_schema *schema;
	struct entry *e;
	int rc = 0;

	pthread_mutex_lock(&reg->lock);
	e = take(reg, id);
	pthread_mutex_unlock(&reg->lock);
	if ((*out = e))
		return 0;
	pthread_mutex_lock(&reg->fetch_lock);
	pthread_mutex_lock(&reg->lock);
	e = take(reg, id); /* fetched while this worker waited */
	pthread_mutex_unlock(&reg->lock);
	if (!e && (rc = fetch(reg, id, &schema)) == 0) {
		pthread_mutex_lock(&reg->lock);
		if ((rc = make_room(reg)) < 0 || !(e = calloc(1, sizeof(*e)))) {
			kiln_avro_schema_free(schema);
			rc = rc < 0 ? rc : kiln_error_oom(NULL);
		} else {
			*e = (struct entry){.id = id, .schema = schema};
			reg->entries[reg->count++] = e;
			take(reg, id);
		}
		pthread_mutex_unlock(&reg->lock);
	}
	pthread_mutex_unlock(&reg->fetch_lock);
	*out = e;
	return rc;
}

static void release(kiln_schema_registry *reg, struct entry *e)
{
	pthread_mutex_lock(&reg->lock);
	e->refs--;
	pthread_mutex_unlock(&reg->lock);
}

static int reject(kiln_report *report, kiln_reject code, size_t offset, const char *path)
{
	kiln_report_single(report, code, offset);
	snprintf(report->v[0].path, sizeof(report->v[0].path), "%s", path);
	return 1;
}

int kiln_schema_registry_decode(kiln_schema_registry *reg, const char *rec, size_t len, size_t max_out,
                                kiln_buf *out, kiln_report *report)
{
	const unsigned char *b = (const unsigned char *)rec;
	kiln_avro_error err;
	struct entry *e;
	int rc;

	if (len < 5)
		return reject(report, KILN_REJECT_AVRO_DECODE, 0, "$");
	if (b[0] != 0) /* not the Confluent framing (magic byte 0) */
		return reject(report, KILN_REJECT_AVRO_DECODE, 0, "$");
	uint32_t id = (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4];
	if ((rc = acquire(reg, id, &e)) < 0)
		return rc;
	if (!e->schema) {
		release(reg, e);
		return reject(report, KILN_REJECT_SCHEMA_UNKNOWN, 1, "$");
	}
	rc = kiln_avro_decode(kiln_avro_schema_root(e->schema), b + 5, len - 5, max_out, out, &err);
	release(reg, e);
	if (rc == KILN_EINVALID)
		return reject(report, err.code, err.offset + 5, err.path);
	return rc;
}
