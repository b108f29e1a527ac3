/* Unit tests for the curate pool (src/ingest/curate_pool.c) through a whole
 * file-source run (kiln_curate_run): a record whose free-text value a PII
 * detector cannot decide within kiln's PCRE2 limits is quarantined as
 * pattern_limit with the field's path and counted like any other reject;
 * the run goes on and commits the other records.
 *
 * None of the shipped detector patterns was seen to reach a limit (see
 * docs/CONTRACTS.md), so this program stands in front of libpcre2: its own
 * pcre2_match_8 / pcre2_jit_match_8 (which the static libkiln resolves to)
 * answer PCRE2_ERROR_MATCHLIMIT, as PCRE2 does at the limit, for a subject
 * holding LIMIT_MARKER and pass every other call to the real library. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <pcre2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "fixture.h"
#include "core/error.h"
#include "ingest/curate_run.h"
#include "ingest/pipeline.h"

#define LIMIT_MARKER "limit-marker-7f3a"

static char tmpdir[PATH_MAX];
static atomic_int limit_answers;

typedef int (*match_fn)(const pcre2_code *, PCRE2_SPTR, PCRE2_SIZE, PCRE2_SIZE, uint32_t, pcre2_match_data *,
                        pcre2_match_context *);

static bool hostile(PCRE2_SPTR subject, PCRE2_SIZE length)
{
	return memmem(subject, length, LIMIT_MARKER, strlen(LIMIT_MARKER)) != NULL;
}

int pcre2_match(const pcre2_code *code, PCRE2_SPTR subject, PCRE2_SIZE length, PCRE2_SIZE start,
                uint32_t options, pcre2_match_data *data, pcre2_match_context *context)
{
	static match_fn real;

	if (hostile(subject, length)) {
		atomic_fetch_add(&limit_answers, 1);
		return PCRE2_ERROR_MATCHLIMIT;
	}
	if (!real)
		real = (match_fn)dlsym(RTLD_NEXT, "pcre2_match_8");
	return real(code, subject, length, start, options, data, context);
}

int pcre2_jit_match(const pcre2_code *code, PCRE2_SPTR subject, PCRE2_SIZE length, PCRE2_SIZE start,
                    uint32_t options, pcre2_match_data *data, pcre2_match_context *context)
{
	static match_fn real;

	if (hostile(subject, length)) {
		atomic_fetch_add(&limit_answers, 1);
		return PCRE2_ERROR_MATCHLIMIT;
	}
	if (!real)
		real = (match_fn)dlsym(RTLD_NEXT, "pcre2_jit_match_8");
	return real(code, subject, length, start, options, data, context);
}

/* kiln_test_write_file for a name in tmpdir. */
static void write_file(const char *name, const char *text, mode_t mode)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	kiln_test_write_file(path, text, mode);
}

/* Every quarantine line of the run, decompressed, back to back. */
static char *quarantine_text(void)
{
	char pattern[PATH_MAX + 64], *text = calloc(1, 1);
	size_t len = 0;
	glob_t g;

	snprintf(pattern, sizeof(pattern), "%s/store/quarantine/*/*/*/*/*.jsonl.zst", tmpdir);
	assert_int_equal(glob(pattern, 0, NULL, &g), 0);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		FILE *f = fopen(g.gl_pathv[i], "rb");
		char frame[65536];
		size_t n, size;

		assert_non_null(f);
		n = fread(frame, 1, sizeof(frame), f);
		fclose(f);
		size = ZSTD_getFrameContentSize(frame, n);
		assert_true(size < (1u << 20));
		text = realloc(text, len + size + 1);
		assert_int_equal(ZSTD_decompress(text + len, size, frame, n), size);
		len += size;
		text[len] = '\0';
	}
	globfree(&g);
	return text;
}

#define RECORD(id, user, message)                                                                            \
	"{\"event_id\":\"" id "\",\"event_type\":\"search\",\"occurred_at\":\"2025-09-14T09:00:36Z\","       \
	"\"user_id\":\"" user "\",\"consent\":true,\"message\":\"" message                                   \
	"\",\"device\":{\"os\":\"ios\"}}\n"

/* The record is quarantined, not the run stopped. Without the fix the run
 * fails with "email detector: PCRE2 gave up" and commits nothing. */
static void test_detector_limit_quarantines_the_record(void **state)
{
	char yaml[4096], path[PATH_MAX + 64];
	kiln_pipeline *p = NULL;
	kiln_run_result r;
	char *q;

	(void)state;
	write_file("key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", 0600);
	write_file("in.jsonl",
	           RECORD("1d2a44de-2d05-4d7e-a873-a6cff2672335", "u-1", "write to ann@example.com")
	               RECORD("02a38d4f-c920-4e6c-911f-cdb21477dc67", "u-2",
	                      "mail me at x@hostile.example " LIMIT_MARKER)
	                   RECORD("0f3dbb11-6e1f-4f65-ae5e-b61942d75726", "u-3", "Great service, thanks!"),
	           0644);
	snprintf(yaml, sizeof(yaml),
	         "dataset: ev\n"
	         "contract: %s/contracts/user-events.yaml\n"
	         "source: {kind: file, path: in.jsonl, name: ev}\n"
	         "pseudonymise: {key_file: key}\n"
	         "split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}\n"
	         "store: {url: file://store}\n"
	         "manifest: {repo: m.git}\n",
	         KILN_SRCDIR);
	write_file("p.yaml", yaml, 0644);
	snprintf(path, sizeof(path), "%s/p.yaml", tmpdir);
	if (kiln_pipeline_load(&p, path, NULL, 0) != 0)
		fail_msg("pipeline: %s", kiln_error_last());
	memset(&r, 0, sizeof(r));
	if (kiln_curate_run(p, NULL, &r) != 0)
		fail_msg("run: %s", kiln_error_last());
	assert_true(atomic_load(&limit_answers) > 0); /* the detectors did meet the limit */
	assert_int_not_equal(r.commit[0], '\0');
	assert_int_equal(r.delta.records_in, 3);
	assert_int_equal(r.delta.valid, 2);
	assert_int_equal(r.delta.quarantined, 1);
	assert_int_equal(r.delta.quarantined_by_code[KILN_REJECT_PATTERN_LIMIT], 1);

	q = quarantine_text();
	assert_non_null(strstr(q, "{\"topic\":\"ev\",\"partition\":0,\"offset\":1,\"code\":\"pattern_limit\","
	                          "\"path\":\"message\",\"violations\":[{\"code\":\"pattern_limit\",\"path\":"
	                          "\"message\"}],\"count\":1,"));
	assert_null(strstr(q, "\"offset\":0,"));
	assert_null(strstr(q, "\"offset\":2,"));
	free(q);
	kiln_pipeline_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_detector_limit_quarantines_the_record),
	};

	return kiln_test_main(tests, tmpdir, "curate-pool", NULL, NULL);
}
