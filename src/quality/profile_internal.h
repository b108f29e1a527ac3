/* What profile.c (accumulate, merge, render) and profile_parse.c (the
 * profile.json decoder and checks) share. */
#ifndef KILN_QUALITY_PROFILE_INTERNAL_H
#define KILN_QUALITY_PROFILE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "quality/profile.h"

/* Frees what f owns and zeroes it. */
void kiln_profile_field_free(kiln_profile_field *f);

/* Appends category name[0..len) with count to f (its lookup index is
 * dropped, rebuilt by the next search); KILN_ENOMEM, KILN_EINVALID past
 * 2^32 categories. */
int kiln_profile_add_category(kiln_profile_field *f, const char *name, size_t len, uint64_t count);
/* The same, name[0..len) known to be new to f and `at` the place in f's
 * sorted index where kiln_profile_category_at found none: the index kept
 * (the name put at `at`) instead of dropped, so the next lookup sorts
 * nothing. */
int kiln_profile_insert_category(kiln_profile_field *f, const char *name, size_t len, uint64_t count,
                                 size_t at);
/* kiln_profile_category, and *at where in f's sorted index the name is or
 * would go. */
long kiln_profile_category_at(const kiln_profile_field *f, const char *name, size_t len, size_t *at);
/* Counts one name comparison of a category lookup (kiln_profile_category_probes). */
void kiln_profile_probe(void);

/* Categories from the data (profile_values.c): v[0..len) counted in f's
 * categories, or the field's categories dropped (cat_over) when v would be
 * its cat_k + 1st name or screen flags it. */
int kiln_profile_infer_add(kiln_profile_field *f, kiln_profile_screen_fn screen, void *ctx, const char *v,
                           size_t len);
/* b's categories from the data into a's: the union while it holds at most
 * the smaller k (0: unknown) names and neither side is over, else none. */
int kiln_profile_infer_merge(kiln_profile_field *a, const kiln_profile_field *b,
                             int (*merge)(kiln_profile_field *a, const kiln_profile_field *b));
void kiln_profile_drop_categories(kiln_profile_field *f);
/* ,"categories":{...} by count (descending), then name; ,"categories_k":K */
int kiln_profile_render_inferred(kiln_buf *out, const kiln_profile_field *f);

/* A date or date-time string of f counted as an instant (one that does not
 * parse is not counted: then f's time figures are not rendered). */
int kiln_profile_add_time(kiln_profile_field *f, const char *v, size_t len);
/* ,"time":{"count","min","max","quantiles","sketch"} */
int kiln_profile_render_time(kiln_buf *out, const kiln_profile_field *f, const double *q,
                             const char *const *names, size_t count);
/* An RFC 3339 date or date-time as ms since the epoch. */
bool kiln_profile_parse_time(const char *s, size_t len, int64_t *out);

#endif
