/* Unit tests for push targets (src/push/target.c): a targets file's target
 * with its store options, defaults and a URL taken as a target; and the
 * one-line errors for a missing file, an unknown target, a missing store,
 * an unknown key, a secret in the file, a negative price, a bad
 * concurrency and a manifest prefix that is not a key. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "core/error.h"
#include "push/push.h"

static char tmpdir[64];

static int load(const char *yaml, const char *name, kiln_push_target **out)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/targets.yaml", tmpdir);
	kiln_test_write_file(path, yaml, 0644);
	return kiln_push_target_load(out, path, name, NULL, 0);
}

static void test_target_read(void **state)
{
	kiln_push_target *t = NULL;
	char want[256];

	(void)state;
	assert_int_equal(load("targets:\n"
	                      "  burst:\n"
	                      "    store:\n"
	                      "      url: s3://kiln-burst/prod\n"
	                      "      region: eu-west-3\n"
	                      "      style: virtual\n"
	                      "      credentials_file: burst.credentials\n"
	                      "      part_size_mb: 8\n"
	                      "    price_per_gb: 0.09\n"
	                      "    currency: USD\n"
	                      "    concurrency: 8\n"
	                      "  other:\n"
	                      "    store: {url: file:///srv/other}\n",
	                      "burst", &t),
	                 0);
	assert_string_equal(t->name, "burst");
	assert_string_equal(t->url, "s3://kiln-burst/prod");
	assert_string_equal(t->store.region, "eu-west-3");
	assert_true(t->store.virtual_host);
	assert_int_equal(t->store.part_size_mb, 8);
	snprintf(want, sizeof(want), "%s/burst.credentials", tmpdir);
	assert_string_equal(t->store.credentials_file, want); /* relative to the file */
	assert_true(t->price_per_gb > 0.089 && t->price_per_gb < 0.091);
	assert_string_equal(t->currency, "USD");
	assert_int_equal(t->concurrency, 8);
	assert_string_equal(t->manifest_prefix, KILN_PUSH_MANIFEST_PREFIX);
	kiln_push_target_free(t);

	assert_int_equal(kiln_push_target_load(&t, NULL, "s3://bucket/p", NULL, 0), 0);
	assert_string_equal(t->url, "s3://bucket/p");
	assert_int_equal(t->concurrency, KILN_PUSH_DEFAULT_CONCURRENCY);
	kiln_push_target_free(t);
}

static void expect_error(const char *yaml, const char *name, int code, const char *message)
{
	kiln_push_target *t = (kiln_push_target *)1;

	assert_int_equal(load(yaml, name, &t), code);
	assert_null(t);
	if (!strstr(kiln_error_last(), message))
		fail_msg("error '%s' lacks '%s'", kiln_error_last(), message);
	assert_null(strchr(kiln_error_last(), '\n'));
}

static void test_target_errors(void **state)
{
	kiln_push_target *t = NULL;

	(void)state;
	assert_int_equal(kiln_push_target_load(&t, NULL, "burst", NULL, 0), KILN_EINVALID);
	assert_non_null(
	    strstr(kiln_error_last(), "no targets file (give --targets FILE or set KILN_TARGETS)"));
	assert_int_equal(kiln_push_target_load(&t, NULL, "ftp://x/y", NULL, 0), KILN_EINVALID);
	expect_error("targets:\n  a:\n    store: {url: file:///x}\n", "b", KILN_EINVALID,
	             "no target named 'b'");
	expect_error("targets:\n  a:\n    price_per_gb: 1\n", "a", KILN_EINVALID,
	             "targets.yaml:3:5: targets.a.store: required key is missing");
	expect_error("targets:\n  a:\n    store: {url: file:///x}\n    colour: red\n", "a", KILN_EINVALID,
	             "targets.a.colour");
	expect_error("targets:\n  a:\n    store: {url: s3://b/p, secret_access_key: XYZ}\n", "a",
	             KILN_EINVALID, "targets.a.store");
	expect_error("targets:\n  a:\n    store: {url: file:///x}\n    price_per_gb: -1\n", "a",
	             KILN_EINVALID, "targets.yaml:4:19: targets.a.price_per_gb: must not be negative");
	expect_error("targets:\n  a:\n    store: {url: file:///x}\n    concurrency: 0\n", "a", KILN_EINVALID,
	             "targets.a.concurrency");
	expect_error("targets:\n  a:\n    store: {url: file:///x}\n    manifest_prefix: ../up\n", "a",
	             KILN_EINVALID, "targets.a.manifest_prefix: expected a store key prefix");
	assert_null(strstr(kiln_error_last(), "XYZ"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_target_read),
	    cmocka_unit_test(test_target_errors),
	};

	return kiln_test_main(tests, tmpdir, "push-target", NULL, NULL);
}
