/* Unit tests for src/ingest/pipeline.c: source.options of a Kafka source.
 * Secret librdkafka properties are refused when written in the config
 * (naming file:line:col and the key, never the value) and accepted as
 * ${NAME} or NAME_file: PATH (an owner-only regular file); a dotted
 * property is addressed with --set source.options."NAME"=VALUE. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "core/error.h"
#include "ingest/dir_source.h"
#include "ingest/kafka_run.h"
#include "ingest/pipeline.h"

static char tmpdir[PATH_MAX];
static char pipeline_path[PATH_MAX + 32];

static int setup(void **state)
{
	(void)state;
	snprintf(pipeline_path, sizeof(pipeline_path), "%s/p.yaml", tmpdir);
	return 0;
}

/* A Kafka pipeline whose source.options block is `options` (lines indented
 * by four spaces); the first option is on line 9. */
static void write_pipeline(const char *options)
{
	char text[4096];

	snprintf(text, sizeof(text),
	         "dataset: ev\n"
	         "contract: c.yaml\n"
	         "source:\n"
	         "  kind: kafka\n"
	         "  brokers: 127.0.0.1:9092\n"
	         "  topics: [ev]\n"
	         "  group: g\n"
	         "  options:\n"
	         "%s"
	         "pseudonymise: {key_file: key}\n"
	         "split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}\n"
	         "store: {url: file://store}\n"
	         "manifest: {repo: m.git}\n",
	         options);
	kiln_test_write_file(pipeline_path, text, 0600);
}

static kiln_pipeline *load_ok(char *const *sets, size_t n)
{
	kiln_pipeline *p = NULL;

	if (kiln_pipeline_load(&p, pipeline_path, sets, n) != 0)
		fail_msg("unexpected failure: %s", kiln_error_last());
	return p;
}

/* The Kafka row's settings (the pipeline's source_config). */
static const kiln_kafka_config *kafka(const kiln_pipeline *p)
{
	return p->source_config;
}

/* The directory row's settings. */
static const kiln_dir_config *dir(const kiln_pipeline *p)
{
	return p->source_config;
}

static const kiln_kafka_option *option(const kiln_pipeline *p, const char *name)
{
	for (size_t i = 0; i < kafka(p)->option_count; i++)
		if (strcmp(kafka(p)->options[i].name, name) == 0)
			return &kafka(p)->options[i];
	return NULL;
}

/* Loading fails with a message that starts with `prefix` (after the
 * pipeline path when `positioned`), holds `part`, and never HUNTER2. */
static void load_fails(char *const *sets, size_t n, bool positioned, const char *prefix, const char *part)
{
	kiln_pipeline *p = (kiln_pipeline *)1;
	char want[PATH_MAX + 256];

	assert_int_equal(kiln_pipeline_load(&p, pipeline_path, sets, n), KILN_EINVALID);
	assert_null(p);
	snprintf(want, sizeof(want), "%s%s", positioned ? pipeline_path : "", prefix);
	if (strncmp(kiln_error_last(), want, strlen(want)) != 0)
		fail_msg("expected \"%s...\", got \"%s\"", want, kiln_error_last());
	if (!strstr(kiln_error_last(), part))
		fail_msg("expected \"%s\" in \"%s\"", part, kiln_error_last());
	assert_null(strstr(kiln_error_last(), "HUNTER2"));
}

static void test_plain_options(void **state)
{
	kiln_pipeline *p;

	(void)state;
	write_pipeline("    session.timeout.ms: \"6000\"\n    sasl.username: kiln\n");
	p = load_ok(NULL, 0);
	assert_int_equal(kafka(p)->option_count, 2);
	assert_string_equal(option(p, "session.timeout.ms")->value, "6000");
	assert_string_equal(option(p, "sasl.username")->value, "kiln");
	assert_false(option(p, "sasl.username")->secret);
	kiln_pipeline_free(p);
}

/* Every secret property of librdkafka 2.0.2 written literally is refused at
 * its value's position, naming the key. */
static void test_literal_secret_refused(void **state)
{
	static const char *const secrets[] = {"sasl.password",
	                                      "ssl.key.password",
	                                      "ssl.keystore.password",
	                                      "ssl.key.pem",
	                                      "sasl.oauthbearer.client.secret",
	                                      "sasl.oauthbearer.config",
	                                      "ssl_key",
	                                      NULL};
	char options[256], prefix[128];

	(void)state;
	for (const char *const *s = secrets; *s; s++) {
		snprintf(options, sizeof(options), "    session.timeout.ms: \"6000\"\n    %s: HUNTER2\n", *s);
		write_pipeline(options);
		snprintf(prefix, sizeof(prefix),
		         ":10:%zu: source.options.%s: a secret is never written in the config",
		         strlen(*s) + 7, *s);
		load_fails(NULL, 0, true, prefix, "use ${NAME}");
	}
	/* quoted, or with a default from the file: still written in the config */
	write_pipeline("    sasl.password: \"HUNTER2\"\n");
	load_fails(NULL, 0, true, ":9:20: source.options.sasl.password: ", "never written in the config");
	unsetenv("KILN_T_PW_UNSET");
	write_pipeline("    sasl.password: ${KILN_T_PW_UNSET:-HUNTER2}\n");
	load_fails(NULL, 0, true, ":9:20: source.options.sasl.password: ", "never written in the config");
	setenv("KILN_T_PW", "HUNTER2", 1);
	write_pipeline("    sasl.password: pre${KILN_T_PW}\n");
	load_fails(NULL, 0, true, ":9:20: source.options.sasl.password: ", "never written in the config");
	/* a literal block scalar (a PEM key pasted in) */
	write_pipeline("    ssl.key.pem: |\n      -----BEGIN PRIVATE KEY-----\n      HUNTER2\n");
	load_fails(NULL, 0, true, ":9:18: source.options.ssl.key.pem: ", "never written in the config");
}

static void test_env_secret_accepted(void **state)
{
	kiln_pipeline *p;

	(void)state;
	setenv("KILN_T_PW", "from-env", 1);
	write_pipeline("    sasl.password: ${KILN_T_PW}\n    ssl.key.password: \"${KILN_T_PW}\"\n");
	p = load_ok(NULL, 0);
	assert_string_equal(option(p, "sasl.password")->value, "from-env");
	assert_string_equal(option(p, "ssl.key.password")->value, "from-env");
	kiln_pipeline_free(p);
}

static void test_file_secret(void **state)
{
	char key_path[PATH_MAX + 32], options[PATH_MAX + 128];
	kiln_pipeline *p;

	(void)state;
	snprintf(key_path, sizeof(key_path), "%s/kafka-pw", tmpdir);
	kiln_test_write_file(key_path, "s3cret\r\n", 0600);
	/* relative to the pipeline's folder */
	write_pipeline("    sasl.password_file: kafka-pw\n");
	p = load_ok(NULL, 0);
	assert_int_equal(kafka(p)->option_count, 1);
	assert_string_equal(option(p, "sasl.password")->value, "s3cret");
	assert_true(option(p, "sasl.password")->secret);
	assert_null(option(p, "sasl.password_file"));
	kiln_pipeline_free(p);

	/* group-readable: refused, naming the position, the file and the mode */
	assert_int_equal(chmod(key_path, 0640), 0);
	load_fails(NULL, 0, true,
	           ":9:25: source.options.sasl.password_file: ", "mode 0640 lets group or others read it");
	assert_int_equal(chmod(key_path, 0600), 0);
	/* a FIFO: refused at once */
	unlink(key_path);
	assert_int_equal(mkfifo(key_path, 0600), 0);
	alarm(30);
	load_fails(NULL, 0, true, ":9:25: source.options.sasl.password_file: ", "is not a regular file");
	alarm(0);
	unlink(key_path);
	load_fails(NULL, 0, true, ":9:25: source.options.sasl.password_file: ", "secret file not found");
	/* empty */
	kiln_test_write_file(key_path, "\n", 0600);
	load_fails(NULL, 0, true, ":9:25: source.options.sasl.password_file: ", "must hold the value");
	/* both, and a _file for a property that is no secret */
	kiln_test_write_file(key_path, "HUNTER2\n", 0600);
	snprintf(options, sizeof(options), "    sasl.password_file: %s\n    sasl.password: ${KILN_T_PW}\n",
	         key_path);
	write_pipeline(options);
	load_fails(NULL, 0, true, ":9:5: source.options.sasl.password_file: ", "set either sasl.password or");
	write_pipeline("    sasl.username_file: kafka-pw\n");
	load_fails(NULL, 0, true,
	           ":9:5: source.options.sasl.username_file: ", "only a secret property takes a _file");
	unlink(key_path);
}

/* --set source.options."NAME"=VALUE addresses a dotted property; a secret
 * given that way is refused (it would show in the process list). */
static void test_set_dotted_option(void **state)
{
	char set1[] = "source.options.\"sasl.mechanism\"=PLAIN",
	     set2[] = "source.options.\"sasl.username\"=kiln";
	char set3[] = "source.options.\"sasl.password\"=HUNTER2";
	char *sets[] = {set1, set2}, *bad[] = {set3};
	kiln_pipeline *p;

	(void)state;
	write_pipeline("    sasl.mechanism: GSSAPI\n");
	p = load_ok(sets, 2);
	assert_int_equal(kafka(p)->option_count, 2);
	assert_string_equal(option(p, "sasl.mechanism")->value, "PLAIN");
	assert_string_equal(option(p, "sasl.username")->value, "kiln");
	kiln_pipeline_free(p);
	load_fails(bad, 1, false, "--set source.options.sasl.password: a secret is never written",
	           "use ${NAME}");
}

/* A directory pipeline whose source block (after kind) is `source`. */
static void write_directory(const char *source)
{
	char text[4096];

	snprintf(text, sizeof(text),
	         "dataset: ev\n"
	         "contract: c.yaml\n"
	         "source:\n"
	         "  kind: directory\n"
	         "%s"
	         "pseudonymise: {key_file: key}\n"
	         "split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}\n"
	         "store: {url: file://store}\n"
	         "manifest: {repo: m.git}\n",
	         source);
	kiln_test_write_file(pipeline_path, text, 0600);
}

/* kind: directory: path relative to the pipeline, glob *.jsonl, the
 * folder's name, done relative to path; a glob with '/', done the folder
 * itself and a key of another kind are refused at their line. */
static void test_directory_source(void **state)
{
	char want[PATH_MAX + 64];
	kiln_pipeline *p;

	(void)state;
	write_directory("  path: in.d/\n");
	p = load_ok(NULL, 0);
	snprintf(want, sizeof(want), "%s/in.d", tmpdir);
	assert_string_equal(p->source_path, want);
	assert_string_equal(dir(p)->glob, "*.jsonl");
	assert_string_equal(p->source_name, "in.d");
	assert_null(dir(p)->done);
	kiln_pipeline_free(p);

	write_directory("  path: /data/in\n  glob: \"*.jsonl*\"\n  name: ev\n  done: done/\n");
	p = load_ok(NULL, 0);
	assert_string_equal(dir(p)->glob, "*.jsonl*");
	assert_string_equal(p->source_name, "ev");
	assert_string_equal(dir(p)->done, "/data/in/done");
	kiln_pipeline_free(p);

	write_directory("  path: /data/in\n  done: /data/in/\n");
	load_fails(NULL, 0, true, ":6:", "source.done: must be a folder other than source.path");
	write_directory("  path: /data/in\n  done: ./\n");
	load_fails(NULL, 0, true, ":6:", "source.done: must be a folder other than source.path");
	write_directory("  path: /data/in\n  glob: a/*.jsonl\n");
	load_fails(NULL, 0, true, ":6:", "source.glob: a pattern of file names");
	write_directory("  path: /data/in\n  topics: [a]\n");
	load_fails(NULL, 0, true, ":6:", "only a kafka source has this key");
	write_directory("  glob: \"*\"\n");
	load_fails(NULL, 0, true, ":", "source.path");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plain_options),       cmocka_unit_test(test_literal_secret_refused),
	    cmocka_unit_test(test_env_secret_accepted), cmocka_unit_test(test_file_secret),
	    cmocka_unit_test(test_set_dotted_option),   cmocka_unit_test(test_directory_source),
	};

	return kiln_test_main(tests, tmpdir, "pipeline", setup, NULL);
}
