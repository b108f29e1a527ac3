/* The Kafka row's configuration (kiln_source_kafka's configure, settings,
 * reads_name and check): its source.* keys (brokers, topics, group,
 * options passed to librdkafka with secrets only from ${NAME} or
 * NAME_file, start, on_gap, batch, dead_letter_topic, connect_timeout),
 * each error at file:line:col with the key's path; brokers holding
 * credentials refused (shown redacted); and kiln check's probe of the
 * brokers and topics. */
#include "ingest/kafka_internal.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/error.h"
#include "core/secret.h"
#include "core/yaml_doc.h"

/* What the readers below use of the pipeline loader's state. */
typedef struct loader {
	kiln_pipeline *p;
	kiln_kafka_config *c; /* the row's settings being read */
	const kiln_yaml_doc *doc;
	kiln_config cfg;
} loader;

const char *const kiln_kafka_option_keys[] = {"kind",
                                              "name",
                                              "max_record_bytes",
                                              "max_depth",
                                              "brokers",
                                              "topics",
                                              "group",
                                              "options",
                                              "start",
                                              "on_gap",
                                              "batch",
                                              "dead_letter_topic",
                                              "connect_timeout",
                                              "format",
                                              "schema_registry",
                                              NULL};

/* A Kafka topic name: [A-Za-z0-9._-], at most 249 characters. */
static bool topic_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 249 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '.' || *s == '_' || *s == '-'))
			return false;
	return true;
}

static int add_topic(loader *l, const kiln_yaml_node *at, const char *name, size_t len)
{
	kiln_pipeline *p = l->p;
	kiln_kafka_config *c = l->c;
	char *t = kiln_arena_printf(p->arena, "%.*s", (int)len, name);
	const char **v;

	if (!topic_ok(t))
		return kiln_yaml_fail(l->doc, at, "source.topics",
		                      "\"%s\" is not a topic name (letters, digits, '.', '_', '-')", t);
	v = kiln_arena_alloc(p->arena, (c->topic_count + 1) * sizeof(*v));
	if (!v)
		return kiln_error_oom(NULL);
	if (c->topic_count)
		memcpy(v, c->topics, c->topic_count * sizeof(*v));
	v[c->topic_count++] = t;
	c->topics = v;
	return 0;
}

/* librdkafka 2.0.2 properties that hold a secret (its _RK_SENSITIVE ones,
 * less sasl.username, a path and a public CA certificate): never written
 * in a config, only ${NAME} or NAME_file: PATH. */
const char *const kiln_kafka_secret_options[] = {"sasl.password",
                                                 "sasl.oauthbearer.client.secret",
                                                 "sasl.oauthbearer.config",
                                                 "ssl.key.password",
                                                 "ssl.key.pem",
                                                 "ssl.keystore.password",
                                                 "ssl_key",
                                                 NULL};
#define SECRET_OPTION_MAX (64u << 10) /* a PEM key with its chain fits */

static bool is_secret_option(const char *name, size_t len)
{
	for (const char *const *k = kiln_kafka_secret_options; *k; k++)
		if (strlen(*k) == len && memcmp(*k, name, len) == 0)
			return true;
	return false;
}

/* A secret option's value from NAME_file: PATH (through the secret file
 * reader: owner-only regular file), trailing CR/LF removed. The value goes
 * in the arena and is wiped when the pipeline is freed. */
static int read_secret_option(loader *l, const kiln_yaml_node *at, const char *where, const char *path,
                              kiln_kafka_option *out)
{
	char *text = NULL, reason[512];
	size_t len = 0;
	int rc;

	if ((rc = kiln_secret_read_file(&text, &len, kiln_config_resolve(&l->cfg, path), "secret file",
	                                SECRET_OPTION_MAX)) < 0) {
		snprintf(reason, sizeof(reason), "%s", kiln_error_last());
		return kiln_yaml_fail(l->doc, at, where, "%s", reason);
	}
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
		len--;
	if (len == 0 || memchr(text, '\0', len))
		rc = kiln_yaml_fail(l->doc, at, where,
		                    "%s: the secret file must hold the value (no NUL byte)", path);
	else if (!(out->value = kiln_arena_strndup(l->p->arena, text, len)))
		rc = kiln_error_oom(NULL);
	else
		out->secret = true;
	kiln_secret_free(text, len);
	return rc;
}

/* source.options entry i: a librdkafka property passed through, unless kiln
 * owns it; a secret property only as ${NAME} or from NAME_file. */
static int load_kafka_option(loader *l, const kiln_yaml_node *opts, size_t i, kiln_kafka_option *out)
{
	static const char *const owned[] = {"bootstrap.servers",
	                                    "group.id",
	                                    "enable.auto.commit",
	                                    "enable.auto.offset.store",
	                                    "partition.assignment.strategy",
	                                    "auto.offset.reset",
	                                    "enable.partition.eof",
	                                    NULL};
	static const char file_suffix[] = "_file";
	const char *name = opts->keys[i]->value;
	const kiln_yaml_node *value = opts->items[i];
	const char *where = kiln_config_path(&l->cfg, "source.options", name);
	size_t len = strlen(name), base = len;

	for (const char *const *k = owned; *k; k++)
		if (strcmp(name, *k) == 0)
			return kiln_yaml_fail(l->doc, opts->keys[i], where,
			                      "kiln sets this property itself (see docs/PIPELINES.md)");
	if (value->kind != KILN_YAML_SCALAR)
		return kiln_yaml_fail(l->doc, value, where, "expected a scalar value");
	if (len > sizeof(file_suffix) - 1 && strcmp(name + len - (sizeof(file_suffix) - 1), file_suffix) == 0)
		base = len - (sizeof(file_suffix) - 1);
	if (base != len) {
		char *prop = kiln_arena_strndup(l->p->arena, name, base);
		const char *path = NULL;
		int rc;

		if (!prop)
			return kiln_error_oom(NULL);
		if (!is_secret_option(name, base))
			return kiln_yaml_fail(l->doc, opts->keys[i], where,
			                      "only a secret property takes a _file (see docs/PIPELINES.md)");
		if (kiln_yaml_get(opts, prop))
			return kiln_yaml_fail(l->doc, opts->keys[i], where, "set either %s or %s, not both",
			                      prop, name);
		if ((rc = kiln_yaml_string(l->doc, value, where, &path)) < 0)
			return rc;
		out->name = prop;
		return read_secret_option(l, value, where, path, out);
	}
	if (is_secret_option(name, len) && !value->from_env)
		return kiln_yaml_fail(
		    l->doc, value, where,
		    "a secret is never written in the config: use ${NAME} (an environment variable) "
		    "or %s_file: PATH (a file only its owner can read)",
		    name);
	out->name = name;
	out->value = value->value;
	return 0;
}

static const char *const registry_keys[] = {"url",  "credentials_file", "ca_file", "timeout",
                                            "wait", "cache_schemas",    NULL};

/* source.format and, with avro, source.schema_registry (docs/STREAMING.md). */
static int load_format(loader *l, const kiln_yaml_node *src)
{
	kiln_kafka_config *c = l->c;
	const kiln_yaml_node *reg = kiln_yaml_get(src, "schema_registry");
	const char *format = NULL;
	int64_t v;
	int rc;

	if ((rc = kiln_config_string(&l->cfg, src, "source", "format", false, &format)) < 0)
		return rc;
	if (format && strcmp(format, "avro") == 0)
		c->avro = true;
	else if (format && strcmp(format, "json") != 0)
		return kiln_yaml_fail(l->doc, kiln_yaml_get(src, "format"), "source.format",
		                      "expected json or avro");
	if (!c->avro) {
		if (reg && !kiln_yaml_is_null(reg))
			return kiln_yaml_fail(l->doc, reg, "source.schema_registry",
			                      "only with source.format: avro");
		return 0;
	}
	if (!reg || kiln_yaml_is_null(reg))
		return kiln_yaml_fail(l->doc, src, "source.schema_registry",
		                      "source.format: avro needs a schema registry (url)");
	if ((rc = kiln_config_check_keys(&l->cfg, reg, "source.schema_registry", registry_keys)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, reg, "source.schema_registry", "url", true, &c->registry.url)) <
	        0 ||
	    (rc = kiln_config_string(&l->cfg, reg, "source.schema_registry", "credentials_file", false,
	                             &c->registry.credentials_file)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, reg, "source.schema_registry", "ca_file", false,
	                             &c->registry.ca_file)) < 0)
		return rc;
	if (strncmp(c->registry.url, "http://", 7) != 0 && strncmp(c->registry.url, "https://", 8) != 0)
		return kiln_yaml_fail(l->doc, kiln_yaml_get(reg, "url"), "source.schema_registry.url",
		                      "expected an http:// or https:// URL");
	if (strchr(c->registry.url, '@'))
		return kiln_yaml_fail(l->doc, kiln_yaml_get(reg, "url"), "source.schema_registry.url",
		                      "credentials go in credentials_file, not in the URL");
	c->registry.credentials_file = kiln_config_resolve(&l->cfg, c->registry.credentials_file);
	c->registry.ca_file = kiln_config_resolve(&l->cfg, c->registry.ca_file);
	v = 10;
	if ((rc = kiln_config_int(&l->cfg, reg, "source.schema_registry", "timeout", 1, 300, &v)) < 0)
		return rc;
	c->registry.timeout_ms = (unsigned)v * 1000;
	v = 300;
	if ((rc = kiln_config_int(&l->cfg, reg, "source.schema_registry", "wait", 1, 86400, &v)) < 0)
		return rc;
	c->registry.wait_seconds = (unsigned)v;
	v = 1000;
	if ((rc = kiln_config_int(&l->cfg, reg, "source.schema_registry", "cache_schemas", 1, 100000, &v)) <
	    0)
		return rc;
	c->registry.cache_max = (size_t)v;
	return 0;
}

static int load_kafka(loader *l, const kiln_yaml_node *src)
{
	kiln_kafka_config *c = l->c;
	kiln_pipeline *p = l->p;
	const kiln_yaml_node *topics = kiln_yaml_get(src, "topics"), *opts = kiln_yaml_get(src, "options");
	const char *start = NULL, *gap = NULL;
	int64_t v = 0;
	int rc;

	if (kiln_yaml_get(src, "path"))
		return kiln_yaml_fail(l->doc, kiln_yaml_get(src, "path"), "source.path",
		                      "a kafka source has no path");
	if ((rc = kiln_config_string(&l->cfg, src, "source", "brokers", true, &c->brokers)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, src, "source", "group", true, &c->group)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, src, "source", "start", false, &start)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, src, "source", "on_gap", false, &gap)) < 0 ||
	    (rc = kiln_config_string(&l->cfg, src, "source", "dead_letter_topic", false,
	                             &c->dead_letter_topic)) < 0)
		return rc;
	if (!topics || kiln_yaml_is_null(topics))
		return kiln_yaml_fail(l->doc, src, "source.topics", "required key is missing");
	if (topics->kind == KILN_YAML_SEQUENCE) {
		for (size_t i = 0; i < topics->count; i++) {
			const char *t;
			if ((rc = kiln_yaml_string(l->doc, topics->items[i], "source.topics", &t)) < 0 ||
			    (rc = add_topic(l, topics->items[i], t, strlen(t))) < 0)
				return rc;
		}
	} else {
		const char *list, *at;
		if ((rc = kiln_yaml_string(l->doc, topics, "source.topics", &list)) < 0)
			return rc;
		for (at = list; *at;) {
			size_t len = strcspn(at, ", ");
			if (len && (rc = add_topic(l, topics, at, len)) < 0)
				return rc;
			at += len;
			at += strspn(at, ", ");
		}
	}
	if (c->topic_count == 0)
		return kiln_yaml_fail(l->doc, topics, "source.topics", "name at least one topic");
	if (c->dead_letter_topic && !topic_ok(c->dead_letter_topic))
		return kiln_yaml_fail(l->doc, kiln_yaml_get(src, "dead_letter_topic"),
		                      "source.dead_letter_topic",
		                      "not a topic name (letters, digits, '.', '_', '-')");
	for (size_t i = 0; c->dead_letter_topic && i < c->topic_count; i++)
		if (strcmp(c->topics[i], c->dead_letter_topic) == 0)
			return kiln_yaml_fail(l->doc, kiln_yaml_get(src, "dead_letter_topic"),
			                      "source.dead_letter_topic", "must not be one of source.topics");
	if (start && strcmp(start, "latest") == 0)
		c->start_latest = true;
	else if (start && strcmp(start, "earliest") != 0)
		return kiln_yaml_fail(l->doc, kiln_yaml_get(src, "start"), "source.start",
		                      "expected earliest or latest");
	if (gap && strcmp(gap, "skip") == 0)
		c->on_gap = KILN_GAP_SKIP;
	else if (gap && strcmp(gap, "stop") != 0)
		return kiln_yaml_fail(l->doc, kiln_yaml_get(src, "on_gap"), "source.on_gap",
		                      "expected stop or skip");
	if (opts && !kiln_yaml_is_null(opts)) {
		kiln_kafka_option *o;
		if (opts->kind != KILN_YAML_MAPPING)
			return kiln_yaml_fail(l->doc, opts, "source.options",
			                      "expected a mapping of librdkafka properties");
		o = kiln_arena_alloc(p->arena, (opts->count + 1) * sizeof(*o));
		if (!o)
			return kiln_error_oom(NULL);
		memset(o, 0, (opts->count + 1) * sizeof(*o));
		c->options = o;
		for (size_t i = 0; i < opts->count; i++) {
			if ((rc = load_kafka_option(l, opts, i, &o[i])) < 0)
				return rc;
			c->option_count++;
		}
	}
	if ((rc = kiln_pipeline_read_batch(p, &l->cfg, src)) < 0)
		return rc;
	v = 30;
	if ((rc = kiln_config_int(&l->cfg, src, "source", "connect_timeout", 1, 3600, &v)) < 0)
		return rc;
	c->connect_timeout = (unsigned)v;
	if ((rc = load_format(l, src)) < 0)
		return rc;
	p->source_name = c->topics[0];
	p->raw_zone = true;
	return 0;
}

int kiln_kafka_configure(kiln_pipeline *p, struct kiln_config *cfg, const struct kiln_yaml_node *src)
{
	loader l = {.p = p, .c = kiln_arena_alloc(p->arena, sizeof(*l.c)), .doc = cfg->doc, .cfg = *cfg};

	if (!l.c)
		return kiln_error_oom(NULL);
	p->source_config = l.c;

	return load_kafka(&l, src);
}

bool kiln_kafka_reads_name(const kiln_pipeline *p, const char *name)
{
	const kiln_kafka_config *c = p->source_config;
	for (size_t i = 0; i < c->topic_count; i++)
		if (strcmp(c->topics[i], name) == 0)
			return true;
	return false;
}

const char *const *kiln_kafka_names(const kiln_pipeline *p, size_t *n)
{
	const kiln_kafka_config *c = p->source_config;

	*n = c->topic_count;
	return c->topics;
}

bool kiln_kafka_starts_late(const kiln_pipeline *p)
{
	const kiln_kafka_config *c = p->source_config;

	return c->start_latest;
}

void kiln_kafka_forget(const kiln_pipeline *p)
{
	const kiln_kafka_config *c = p->source_config;

	for (size_t i = 0; c && i < c->option_count; i++)
		if (c->options[i].secret)
			sodium_memzero((char *)c->options[i].value, strlen(c->options[i].value));
}

int kiln_kafka_settings(const kiln_pipeline *p)
{
	const kiln_kafka_config *c = p->source_config;
	kiln_buf shown = KILN_BUF_INIT(0);
	int rc = 0;

	if (!c->brokers)
		return 0;
	rc = kiln_secret_redact_userinfo(&shown, c->brokers, strlen(c->brokers));
	if (rc > 0 && kiln_buf_putc(&shown, '\0') == 0)
		rc = kiln_error_set(KILN_EINVALID,
		                    "%s: source.brokers: %s holds credentials, which Kafka clients do not "
		                    "read there: set source.options sasl.username and sasl.password: ${NAME}",
		                    p->file, shown.ptr);
	else if (rc > 0)
		rc = kiln_error_set(KILN_EINVALID, "%s: source.brokers holds credentials", p->file);
	kiln_buf_free(&shown);
	return rc < 0 ? rc : 0;
}

struct check_ctx {
	const kiln_kafka_config *c;
	kiln_source_say say;
	void *ctx;
};

static int report_topic(void *ctx, const char *topic, int partitions, const char *error)
{
	struct check_ctx *c = ctx;
	bool dead_letter = c->c->dead_letter_topic && strcmp(topic, c->c->dead_letter_topic) == 0;
	char msg[1024];

	if (partitions < 0)
		snprintf(msg, sizeof(msg), "%s%s: %s", topic, dead_letter ? " (dead letters)" : "", error);
	else
		snprintf(msg, sizeof(msg), "%s%s: %d partitions", topic, dead_letter ? " (dead letters)" : "",
		         partitions);
	c->say(c->ctx, "topic", partitions >= 0, msg);
	return 0;
}

void kiln_kafka_check(const kiln_pipeline *p, int timeout_ms, kiln_source_say say, void *ctx)
{
	const kiln_kafka_config *c = p->source_config;
	struct check_ctx cc = {c, say, ctx};
	char msg[1024];
	int brokers;

	if (timeout_ms <= 0)
		timeout_ms = (int)c->connect_timeout * 1000;
	if (kiln_kafka_probe(p, timeout_ms, &brokers, report_topic, &cc) < 0) {
		say(ctx, "brokers", false, kiln_error_last());
		return;
	}
	snprintf(msg, sizeof(msg), "%s: %d brokers answered", c->brokers, brokers);
	say(ctx, "brokers", true, msg);
	if (c->avro) { /* source.format: avro: the registry answers, with the credentials */
		kiln_schema_registry *reg = NULL;
		kiln_schema_registry_config rc = c->registry;
		rc.timeout_ms = (unsigned)timeout_ms;
		if (kiln_schema_registry_new(&reg, &rc) < 0 ||
		    kiln_schema_registry_probe(reg, msg, sizeof(msg)) < 0)
			say(ctx, "schema_registry", false, kiln_error_last());
		else
			say(ctx, "schema_registry", true, msg);
		kiln_schema_registry_free(reg);
	}
}
