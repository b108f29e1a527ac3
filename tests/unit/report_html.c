/* Unit tests for the report page (src/report/): every text from the
 * repository is escaped (a field named <script>, a category that closes an
 * attribute, bytes that are not UTF-8), a field's element id is stable and
 * safe, a flagged field's figure comes first with class "flagged", and a
 * personal field is drawn by counts only. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "report/report_internal.h"

#define HOSTILE_FIELD "<script>alert(1)</script>"
#define HOSTILE_CAT   "\"><img src=x onerror=alert(2)>"

static char *render(kiln_buf *b, const kiln_report_doc *r)
{
	assert_int_equal(kiln_report_html(b, r), 0);
	assert_int_equal(kiln_buf_putc(b, '\0'), 0);
	return b->ptr;
}

/* A profile of n records: a number field, an enum-like field with one
 * category, a tokens field, each named by the caller. */
static void make_profile(kiln_profile *p, const char *num_path, const char *cat_path, const char *cat,
                         double scale)
{
	kiln_profile_field *f;

	memset(p, 0, sizeof(*p));
	p->records = 100;
	p->count = p->cap = 3;
	p->fields = calloc(3, sizeof(*p->fields));
	assert_non_null(p->fields);
	f = &p->fields[1]; /* after the categories: flagged first must move it */
	f->path = strdup(num_path);
	f->present = 100;
	f->types[KILN_PTYPE_INTEGER] = 100;
	for (int i = 1; i <= 100; i++) {
		kiln_moments_add(&f->num, i * scale);
		assert_int_equal(kiln_dd_add(&f->dd, i * scale), 0);
	}
	f = &p->fields[0];
	f->path = strdup(cat_path);
	f->present = 100;
	f->types[KILN_PTYPE_STRING] = 100;
	f->cat_names = calloc(1, sizeof(char *));
	f->cat_counts = calloc(1, sizeof(uint64_t));
	f->cat_names[0] = strdup(cat);
	f->cat_counts[0] = 100;
	f->cat_count = f->cat_cap = 1;
	f = &p->fields[2];
	f->path = strdup("email");
	f->tokens = true;
	f->present = 90;
	f->types[KILN_PTYPE_STRING] = 90;
}

static void test_escapes_foreign_text(void **state)
{
	kiln_report_doc r = {0};
	kiln_buf b = KILN_BUF_INIT(0);
	char *page;

	(void)state;
	snprintf(r.spec, sizeof(r.spec), "ds@main");
	snprintf(r.version.dataset, sizeof(r.version.dataset), "ds");
	snprintf(r.version.ref, sizeof(r.version.ref), "refs/heads/ds/main");
	r.verify.name_ok = true;
	make_profile(&r.profile, HOSTILE_FIELD, "country", HOSTILE_CAT, 1);
	r.have_profile = true;
	snprintf(r.qpaths_note, sizeof(r.qpaths_note), "not read");
	/* verify's problems: lines in a buffer without a NUL after them */
	r.problems = (kiln_buf)KILN_BUF_INIT(0);
	assert_int_equal(kiln_buf_puts(&r.problems, "ds@main: <one>\nds@main: two\n"), 0);
	r.verify.problems = 2;
	page = render(&b, &r);
	assert_non_null(strstr(page, "<li>ds@main: &lt;one&gt;</li><li>ds@main: two</li></ul>"));
	assert_null(strstr(page, "<script"));
	assert_null(strstr(page, "<img"));
	assert_non_null(strstr(page, "&lt;script&gt;alert(1)&lt;/script&gt;"));
	assert_non_null(strstr(page, "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;"));
	/* the id: every byte outside [A-Za-z0-9_.-] as -XX */
	assert_non_null(strstr(page, "id=\"field--3cscript-3ealert-281-29-3c-2fscript-3e\""));
	/* the tokens field: counts only, no plot of values */
	assert_non_null(strstr(page, "id=\"field-email\""));
	assert_non_null(strstr(page, "personal: tokens only"));
	kiln_buf_free(&b);
	kiln_buf_free(&r.problems);
	kiln_profile_free(&r.profile);
}

static void test_escape_bytes(void **state)
{
	kiln_buf b = KILN_BUF_INIT(0);

	(void)state;
	assert_int_equal(kiln_report_escape(&b, "a&b\x01\xff\xc3\xa9'"), 0);
	assert_int_equal(kiln_buf_putc(&b, '\0'), 0);
	assert_string_equal(b.ptr, "a&amp;b\\x01\xef\xbf\xbd\xc3\xa9&#39;");
	kiln_buf_free(&b);
}

static void test_flagged_first(void **state)
{
	kiln_report_doc r = {0};
	kiln_buf b = KILN_BUF_INIT(0);
	char *page, *flagged, *calm;

	(void)state;
	snprintf(r.spec, sizeof(r.spec), "ds@main");
	snprintf(r.version.dataset, sizeof(r.version.dataset), "ds");
	r.verify.name_ok = true;
	make_profile(&r.profile, "session_ms", "country", "de", 10);
	make_profile(&r.baseline_profile, "session_ms", "country", "de", 1);
	r.have_profile = r.have_baseline = true;
	snprintf(r.baseline_spec, sizeof(r.baseline_spec), "ds@v1");
	assert_int_equal(
	    kiln_drift_compare(&r.drift, &r.baseline_profile, &r.profile, &(kiln_drift_thresholds){0}), 0);
	assert_int_equal(r.drift.flagged, 1);
	page = render(&b, &r);
	flagged = strstr(page, "<figure class=\"field flagged\" id=\"field-session_ms\"");
	calm = strstr(page, "<figure class=\"field\" id=\"field-country\"");
	assert_non_null(flagged);
	assert_non_null(calm);
	assert_true(flagged < calm);
	assert_non_null(strstr(page, "<polyline class=\"base\"")); /* the baseline drawn over the version */
	kiln_buf_free(&b);
	kiln_drift_free(&r.drift);
	kiln_profile_free(&r.profile);
	kiln_profile_free(&r.baseline_profile);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_escapes_foreign_text),
	    cmocka_unit_test(test_escape_bytes),
	    cmocka_unit_test(test_flagged_first),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
