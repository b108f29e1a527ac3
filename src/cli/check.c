/* `kiln check PIPELINE`: what `kiln run` would refuse, found without
 * running it (ingest/check.h), one line per check, then the resolved
 * configuration with every secret redacted. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "config.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/secret.h"
#include "core/yaml_doc.h"
#include "ingest/check.h"
#include "ingest/pipeline.h"
#include "ingest/source.h"
#include "openlineage/openlineage.h"

static const char usage_text[] =
    "usage: kiln check PIPELINE [--set dotted.key=value]... [--sample FILE [-n N]] [--json]\n"
    "\n"
    "Finds what `kiln run PIPELINE` would refuse, without running it, and\n"
    "reports every problem, not only the first: the pipeline and its contract\n"
    "parse (file:line:col), the split key is in the contract, the key file and\n"
    "the signing key are readable and owner-only, the store answers, the\n"
    "manifest repository opens (or its folder can hold the one the first run\n"
    "creates), the dataset branch was made with the same key, split and\n"
    "contract major version, the source file is readable, and for a Kafka\n"
    "source the brokers answer and list every topic (its partition count).\n"
    "Nothing is kept: no repository, store folder, topic or object is created\n"
    "(where one is missing, an empty folder is made and removed at once in the\n"
    "folder that would hold it, to see that it can be).\n"
    "\n"
    "One line per check (\"ok\", \"PROBLEM\" or \"skipped\", its name, a message),\n"
    "then, with --sample, the first N records of FILE as kiln run would curate\n"
    "them (personal data as tokens; a rejected record as its reasons and field\n"
    "paths, never its values), then the resolved configuration (after ${NAME}\n"
    "expansion and --set) with every secret redacted.\n"
    "\n"
    "Options:\n"
    "  -s, --set KEY=VALUE   override a config value, as kiln run does\n"
    "      --sample FILE     curate the first records of FILE (JSON Lines)\n"
    "  -n, --records N       how many sample records (default 5)\n"
    "  -j, --json            one JSON document: pipeline, ok, problems, checks[]\n"
    "                        {check, status, message}, sample[] {line, split,\n"
    "                        record} or {line, rejected[] {reason, path}},\n"
    "                        config (docs/JSON.md)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 when kiln run would start, 1 when a problem was found (the\n"
    "pipeline does not parse, or a check failed), 2 on bad usage.\n";

#define REDACTED "<redacted>"

typedef struct check_out {
	bool json;
	kiln_buf checks, sample; /* JSON: the arrays' members so far */
} check_out;

static const char *status_word(kiln_check_status s, bool json)
{
	switch (s) {
	case KILN_CHECK_OK:
		return "ok";
	case KILN_CHECK_PROBLEM:
		return json ? "problem" : "PROBLEM";
	default:
		return "skipped";
	}
}

static void on_check(void *ctx, const char *check, kiln_check_status status, const char *message)
{
	check_out *o = ctx;

	if (!o->json) {
		printf("%-8s %-9s %s\n", status_word(status, false), check, message);
		return;
	}
	kiln_buf_puts(&o->checks, o->checks.len ? ",\n{\"check\":" : "\n{\"check\":");
	kiln_buf_put_json_text(&o->checks, check, strlen(check));
	kiln_buf_printf(&o->checks, ",\"status\":\"%s\",\"message\":", status_word(status, true));
	kiln_buf_put_json_text(&o->checks, message, strlen(message));
	kiln_buf_putc(&o->checks, '}');
}

static void on_sample(void *ctx, uint64_t line, const char *curated, size_t len, kiln_split split,
                      const kiln_report *rejected)
{
	check_out *o = ctx;

	if (!o->json) {
		if (!o->sample.len) {
			printf("sample (personal data as tokens):\n");
			kiln_buf_putc(&o->sample, 1); /* the heading is out */
		}
		if (!rejected) {
			printf("  line %llu %-5s %.*s\n", (unsigned long long)line, kiln_split_name(split),
			       (int)len, curated);
			return;
		}
		printf("  line %llu rejected:", (unsigned long long)line);
		for (size_t i = 0; i < rejected->kept; i++)
			printf("%s %s at %s", i ? ";" : "", kiln_reject_name(rejected->v[i].code),
			       rejected->v[i].path);
		if (rejected->count > rejected->kept)
			printf("; %zu more", rejected->count - rejected->kept);
		putchar('\n');
		return;
	}
	kiln_buf_printf(&o->sample, "%s{\"line\":%llu,", o->sample.len ? ",\n" : "\n",
	                (unsigned long long)line);
	if (!rejected) {
		kiln_buf_printf(&o->sample, "\"split\":\"%s\",\"record\":", kiln_split_name(split));
		kiln_buf_put(&o->sample, curated, len);
		kiln_buf_putc(&o->sample, '}');
		return;
	}
	kiln_buf_puts(&o->sample, "\"rejected\":[");
	for (size_t i = 0; i < rejected->kept; i++) {
		kiln_buf_printf(&o->sample, "%s{\"reason\":\"%s\",\"path\":", i ? "," : "",
		                kiln_reject_name(rejected->v[i].code));
		kiln_buf_put_json_text(&o->sample, rejected->v[i].path, strlen(rejected->v[i].path));
		kiln_buf_putc(&o->sample, '}');
	}
	kiln_buf_printf(&o->sample, "],\"violations\":%zu}", rejected->count);
}

/* ---- the resolved configuration --------------------------------------------- */

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A key whose value is a secret: librdkafka's sensitive properties and any
 * key naming a password, secret or token (a *_file or *_env key names
 * where one is, and is shown). */
static bool secret_key(const char *key)
{
	static const char *const words[] = {"password", "secret", "token", "credential", "passphrase"};
	char low[128];
	size_t i;

	if (!key || ends_with(key, "_file") || ends_with(key, "_env"))
		return false;
	if (kiln_source_secret_key(key))
		return true;
	for (i = 0; key[i] && i + 1 < sizeof(low); i++)
		low[i] = (char)tolower((unsigned char)key[i]);
	low[i] = '\0';
	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strstr(low, words[i]))
			return true;
	return false;
}

/* value with each address's user:password@ replaced (kiln_secret_redact_userinfo). */
static void put_value(kiln_buf *b, const char *v, size_t len, bool json)
{
	kiln_buf tmp = KILN_BUF_INIT(0);
	int redacted = kiln_secret_redact_userinfo(&tmp, v, len);

	if (redacted < 0) {
		v = REDACTED; /* out of memory: nothing of it */
		len = strlen(REDACTED);
	} else if (redacted > 0) {
		v = tmp.ptr;
		len = tmp.len;
	}
	if (json) {
		kiln_buf_put_json_text(b, v, len);
	} else {
		bool plain = len > 0;

		for (size_t i = 0; i < len && plain; i++)
			plain = isalnum((unsigned char)v[i]) || strchr("_./:,+-=<>@", v[i]);
		if (plain)
			kiln_buf_put(b, v, len);
		else
			kiln_buf_put_json_text(b, v, len); /* a JSON string is a YAML scalar too */
	}
	kiln_buf_free(&tmp);
}

/* A plain scalar that YAML reads as a number, a boolean or null, as JSON
 * writes it; NULL for a string. */
static const char *json_literal(const kiln_yaml_node *n)
{
	char *end;

	if (n->quoted)
		return NULL;
	if (kiln_yaml_is_null(n))
		return "null";
	if (strcasecmp(n->value, "true") == 0)
		return "true";
	if (strcasecmp(n->value, "false") == 0)
		return "false";
	if (n->len && (isdigit((unsigned char)n->value[0]) || n->value[0] == '-')) {
		strtod(n->value, &end);
		if (*end == '\0')
			return n->value;
	}
	return NULL;
}

static void put_node(kiln_buf *b, const kiln_yaml_node *n, const char *key, int indent, bool json)
{
	if (!n) {
		kiln_buf_puts(b, json ? "null" : "");
		return;
	}
	if (n->kind == KILN_YAML_SCALAR) {
		const char *lit = json ? json_literal(n) : NULL;

		if (secret_key(key) && !kiln_yaml_is_null(n))
			kiln_buf_puts(b, json ? "\"" REDACTED "\"" : REDACTED);
		else if (lit)
			kiln_buf_puts(b, lit);
		else
			put_value(b, n->value, n->len, json);
		return;
	}
	if (json) {
		bool map = n->kind == KILN_YAML_MAPPING;

		kiln_buf_putc(b, map ? '{' : '[');
		for (size_t i = 0; i < n->count; i++) {
			if (i)
				kiln_buf_putc(b, ',');
			if (map) {
				kiln_buf_put_json_text(b, n->keys[i]->value, n->keys[i]->len);
				kiln_buf_putc(b, ':');
			}
			put_node(b, n->items[i], map ? n->keys[i]->value : key, indent, true);
		}
		kiln_buf_putc(b, map ? '}' : ']');
		return;
	}
	for (size_t i = 0; i < n->count; i++) {
		const kiln_yaml_node *item = n->items[i];
		bool nested = item && item->kind != KILN_YAML_SCALAR && item->count > 0;
		const char *k = n->kind == KILN_YAML_MAPPING ? n->keys[i]->value : key;

		kiln_buf_printf(b, "%*s", indent, "");
		if (n->kind == KILN_YAML_MAPPING) {
			put_value(b, n->keys[i]->value, n->keys[i]->len, false);
			kiln_buf_putc(b, ':');
		} else {
			kiln_buf_putc(b, '-');
		}
		if (nested) {
			kiln_buf_putc(b, '\n');
			put_node(b, item, k, indent + 2, false);
			continue;
		}
		kiln_buf_putc(b, ' ');
		if (item && item->kind != KILN_YAML_SCALAR)
			kiln_buf_puts(b, item->kind == KILN_YAML_MAPPING ? "{}" : "[]");
		else
			put_node(b, item, k, indent, false);
		kiln_buf_putc(b, '\n');
	}
}

/* ---- the command -------------------------------------------------------------- */

static int print_json(const check_out *o, const char *file, int problems, const kiln_buf *config)
{
	kiln_buf b = KILN_BUF_INIT(0);
	int rc;

	kiln_buf_puts(&b, "{\"pipeline\":");
	kiln_buf_put_json_text(&b, file, strlen(file));
	kiln_buf_printf(&b, ",\"ok\":%s,\"problems\":%d,\"checks\":[", problems ? "false" : "true", problems);
	kiln_buf_put(&b, o->checks.ptr, o->checks.len);
	kiln_buf_puts(&b, "],\"sample\":[");
	kiln_buf_put(&b, o->sample.ptr, o->sample.len);
	kiln_buf_puts(&b, "],\n\"config\":");
	if (config->len)
		kiln_buf_put(&b, config->ptr, config->len);
	else
		kiln_buf_puts(&b, "null");
	rc = kiln_buf_puts(&b, "}\n");
	rc = kiln_cli_write_buf("check", &b, rc);
	kiln_buf_free(&b);
	return rc;
}

/* The openlineage: section (docs/LINEAGE.md) as the commands read it,
 * its token file included; nothing is sent. 1 for a problem, else 0. */
static int check_openlineage(check_out *out, const kiln_pipeline *p)
{
	kiln_openlineage *ol = NULL;

	if (kiln_openlineage_open(&ol, p, PACKAGE_VERSION) < 0) {
		on_check(out, "openlineage", KILN_CHECK_PROBLEM, kiln_error_last());
		return 1;
	}
	if (ol)
		on_check(out, "openlineage", KILN_CHECK_OK, "the section and its token file read");
	kiln_openlineage_close(ol);
	return 0;
}

int kiln_cmd_check(int argc, char **argv)
{
	kiln_cli_sets sets = {0};
	const char *sample = NULL;
	size_t records = 0;
	bool json = false;
	const kiln_cli_option rows[] = {
	    {.name = "set", .letter = 's', .kind = KILN_CLI_SETS, .out = &sets},
	    {.name = "sample", .kind = KILN_CLI_STRING, .out = &sample},
	    {.name = "records",
	     .letter = 'n',
	     .kind = KILN_CLI_COUNT,
	     .out = &records,
	     .bad = "-n wants a positive number"},
	    {.name = "json", .letter = 'j', .kind = KILN_CLI_FLAG, .out = &json},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = "check",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one pipeline file (see kiln check --help)",
	};
	check_out out = {.checks = KILN_BUF_INIT(0), .sample = KILN_BUF_INIT(0)};
	kiln_check_options co = {.report = on_check, .sample = on_sample, .ctx = &out};
	kiln_pipeline *pipeline = NULL;
	kiln_buf config = KILN_BUF_INIT(0);
	int first, status, problems;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	out.json = json;
	co.sample_path = sample;
	co.sample_records = records;
	if (kiln_pipeline_load(&pipeline, argv[first], sets.v, sets.n) < 0) {
		on_check(&out, "pipeline", KILN_CHECK_PROBLEM, kiln_error_last());
		problems = 1;
	} else {
		on_check(&out, "pipeline", KILN_CHECK_OK, "parses");
		problems = kiln_check_pipeline(pipeline, &co);
		if (problems < 0) {
			status = kiln_cli_fail("check", "%s", kiln_error_last());
			goto cleanup;
		}
		problems += check_openlineage(&out, pipeline);
		put_node(&config, kiln_yaml_root(pipeline->doc), NULL, json ? 0 : 2, json);
	}
	if (json) {
		if ((status = print_json(&out, argv[first], problems, &config)) != 0)
			goto cleanup;
	} else {
		if (config.len)
			printf("resolved configuration (secrets redacted):\n%.*s", (int)config.len,
			       config.ptr);
		printf("%d problem%s found\n", problems, problems == 1 ? "" : "s");
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		status = kiln_cli_fail("check", "stdout: write error");
		goto cleanup;
	}
	status = problems ? KILN_EXIT_INVALID : KILN_EXIT_OK;
cleanup:
	kiln_pipeline_free(pipeline);
	kiln_buf_free(&out.checks);
	kiln_buf_free(&out.sample);
	kiln_buf_free(&config);
	free(sets.v);
	return status;
}
