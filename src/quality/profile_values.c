/* The figures of a profile field beyond counts and sketches (see
 * profile.h): categories from the data for string fields without an enum,
 * instants of date and timestamp fields, and the clamped quantiles and
 * distinct counts every reader of a profile shows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "contract/format.h"
#include "core/error.h"
#include "quality/profile_internal.h"

/* ---- figures ---- */

double kiln_profile_quantile(const kiln_profile_field *f, double q)
{
	double v;

	if (!f->num.count)
		return 0;
	v = kiln_dd_quantile(&f->dd, q);
	return v < f->num.min ? f->num.min : v > f->num.max ? f->num.max : v;
}

uint64_t kiln_profile_distinct(const kiln_profile_field *f)
{
	uint64_t hashed =
	    f->types[KILN_PTYPE_STRING] + f->types[KILN_PTYPE_INTEGER] + f->types[KILN_PTYPE_NUMBER];
	uint64_t est = kiln_hll_estimate(&f->distinct), counted = 0, names = 0;

	for (size_t i = 0; i < f->cat_count; i++) {
		counted += f->cat_counts[i];
		names += f->cat_counts[i] > 0;
	}
	if (f->cat_count && hashed && counted == hashed)
		return names;
	return est < hashed ? est : hashed;
}

/* ---- categories from the data ---- */

void kiln_profile_drop_categories(kiln_profile_field *f)
{
	for (size_t i = 0; i < f->cat_count; i++)
		free(f->cat_names[i]);
	free(f->cat_index);
	f->cat_index = NULL;
	f->cat_count = 0;
}

static void go_over(kiln_profile_field *f)
{
	kiln_profile_drop_categories(f);
	f->cat_over = true;
}

int kiln_profile_infer_add(kiln_profile_field *f, kiln_profile_screen_fn screen, void *ctx, const char *v,
                           size_t len)
{
	size_t at;
	long i;
	int rc;

	if (f->cat_over)
		return 0;
	if ((i = kiln_profile_category_at(f, v, len, &at)) >= 0) {
		f->cat_counts[i]++;
		return 0;
	}
	if (f->cat_count && !f->cat_index)
		return kiln_error_oom(NULL); /* the lookup could not build its index */
	/* a new name: the k + 1st, one with a NUL (not a C string) or a
	 * personal one ends the field's categories */
	if (f->cat_count >= f->cat_k || memchr(v, '\0', len)) {
		go_over(f);
		return 0;
	}
	if ((rc = screen(ctx, v, len)) < 0)
		return rc;
	if (rc > 0) {
		go_over(f);
		return 0;
	}
	return kiln_profile_insert_category(f, v, len, 1, at);
}

int kiln_profile_infer_merge(kiln_profile_field *a, const kiln_profile_field *b,
                             int (*merge)(kiln_profile_field *a, const kiln_profile_field *b))
{
	uint32_t k = !a->cat_k ? b->cat_k : !b->cat_k || a->cat_k < b->cat_k ? a->cat_k : b->cat_k;
	int rc;

	a->cat_k = k;
	if (a->cat_over || b->cat_over) {
		go_over(a);
		return 0;
	}
	if ((rc = merge(a, b)) < 0)
		return rc;
	if (k && a->cat_count > k)
		go_over(a);
	return 0;
}

static _Thread_local const kiln_profile_field *ranking;

static int by_count_cmp(const void *x, const void *y)
{
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
	uint64_t ci = ranking->cat_counts[i], cj = ranking->cat_counts[j];

	if (ci != cj)
		return ci > cj ? -1 : 1;
	return strcmp(ranking->cat_names[i], ranking->cat_names[j]);
}

int kiln_profile_render_inferred(kiln_buf *out, const kiln_profile_field *f)
{
	uint32_t *order = malloc(f->cat_count * sizeof(*order));
	int rc;

	if (!order)
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < f->cat_count; i++)
		order[i] = (uint32_t)i;
	ranking = f;
	qsort(order, f->cat_count, sizeof(*order), by_count_cmp);
	ranking = NULL;
	rc = kiln_buf_puts(out, ",\"categories\":{");
	for (size_t i = 0; rc == 0 && i < f->cat_count; i++) {
		const char *name = f->cat_names[order[i]];
		if ((rc = kiln_buf_puts(out, i ? "," : "")) == 0 &&
		    (rc = kiln_buf_put_json_string(out, name, strlen(name))) == 0)
			rc = kiln_buf_printf(out, ":%llu", (unsigned long long)f->cat_counts[order[i]]);
	}
	free(order);
	if (rc == 0)
		rc = kiln_buf_printf(out, "},\"categories_k\":%u", f->cat_k);
	return rc;
}

/* ---- instants ---- */

bool kiln_profile_parse_time(const char *s, size_t len, int64_t *out)
{
	long double t;
	int64_t ms;

	if (!(len == 10 ? kiln_format_parse_date(s, len, &t) : kiln_format_parse_date_time(s, len, &t)))
		return false;
	t *= 1000;
	if (!(t > -2e17L && t < 2e17L))
		return false;
	/* floorl(t) without floorl's two switches of the x87 rounding mode: t
	 * as a double is within 32 of t, then steps by exact comparisons */
	ms = (int64_t)(double)t;
	while ((long double)ms > t)
		ms--;
	while ((long double)(ms + 1) <= t)
		ms++;
	if (!(ms > -100000000000000000 && ms < 100000000000000000))
		return false;
	*out = ms;
	return true;
}

int kiln_profile_add_time(kiln_profile_field *f, const char *v, size_t len)
{
	int64_t ms;

	if (!kiln_profile_parse_time(v, len, &ms))
		return 0;
	return kiln_ts_add(&f->tm, ms);
}

int kiln_profile_put_time(kiln_buf *out, const kiln_profile_field *f, int64_t ms)
{
	int64_t sec = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
	int frac = (int)(ms - sec * 1000);
	time_t t = (time_t)sec;
	struct tm tm;
	char text[48];

	int n;

	if (!gmtime_r(&t, &tm) || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900)
		return kiln_error_set(KILN_EINVALID, "profile: an instant outside the years 0000 to 9999");
	n = snprintf(text, sizeof(text), "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
	if (!f->date)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "T%02d:%02d:%02d", tm.tm_hour, tm.tm_min,
		              tm.tm_sec);
	if (!f->date && frac)
		snprintf(text + n, sizeof(text) - (size_t)n, ".%03dZ", frac);
	else if (!f->date)
		snprintf(text + n, sizeof(text) - (size_t)n, "Z");
	return kiln_buf_printf(out, "\"%s\"", text);
}

int kiln_profile_render_time(kiln_buf *out, const kiln_profile_field *f, const double *q,
                             const char *const *names, size_t count)
{
	const kiln_tsketch *s = &f->tm;
	int rc;

	if ((rc = kiln_buf_printf(out, ",\"time\":{\"count\":%llu,\"min\":", (unsigned long long)s->count)) <
	        0 ||
	    (rc = kiln_profile_put_time(out, f, s->min_ms)) < 0 ||
	    (rc = kiln_buf_puts(out, ",\"max\":")) < 0 ||
	    (rc = kiln_profile_put_time(out, f, s->max_ms)) < 0 ||
	    (rc = kiln_buf_puts(out, ",\"quantiles\":{")) < 0)
		return rc;
	for (size_t i = 0; i < count; i++)
		if ((rc = kiln_buf_printf(out, "%s\"%s\":", i ? "," : "", names[i])) < 0 ||
		    (rc = kiln_profile_put_time(out, f, kiln_ts_quantile(s, q[i]))) < 0)
			return rc;
	if ((rc = kiln_buf_printf(out, "},\"sketch\":{\"shift\":%u,\"offset\":%lld,\"counts\":[", s->shift,
	                          (long long)s->offset)) < 0)
		return rc;
	for (uint32_t i = 0; i < s->len; i++)
		if ((rc = kiln_buf_printf(out, "%s%llu", i ? "," : "",
		                          (unsigned long long)kiln_ts_bucket_count(s, i))) < 0)
			return rc;
	return kiln_buf_puts(out, "]}}");
}
