/* A profile field's categories: adding one, and the lookup by name through
 * a sorted index kept as a cache (profile.h); what profile.c (enum
 * categories, merges) and profile_values.c (categories from the data) both
 * call, so neither calls the other for them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "quality/profile_internal.h"

static _Thread_local uint64_t probes;

uint64_t kiln_profile_category_probes(void)
{
	return probes;
}

void kiln_profile_probe(void)
{
	probes++;
}

static int append_category(kiln_profile_field *f, const char *name, size_t len, uint64_t count)
{
	if (f->cat_count == f->cat_cap) {
		size_t cap = f->cat_cap ? f->cat_cap * 2 : 4;
		char **names = realloc(f->cat_names, cap * sizeof(*names));
		uint64_t *counts;

		if (!names)
			return kiln_error_oom(NULL);
		f->cat_names = names;
		if (!(counts = realloc(f->cat_counts, cap * sizeof(*counts))))
			return kiln_error_oom(NULL);
		f->cat_counts = counts;
		f->cat_cap = cap;
	}
	if (f->cat_count >= UINT32_MAX)
		return kiln_error_set(KILN_EINVALID, "profile: more than 2^32 categories");
	if (!(f->cat_names[f->cat_count] = strndup(name, len)))
		return kiln_error_oom(NULL);
	f->cat_counts[f->cat_count++] = count;
	return 0;
}

int kiln_profile_add_category(kiln_profile_field *f, const char *name, size_t len, uint64_t count)
{
	int rc = append_category(f, name, len, count);

	free(f->cat_index);
	f->cat_index = NULL;
	return rc;
}

int kiln_profile_insert_category(kiln_profile_field *f, const char *name, size_t len, uint64_t count,
                                 size_t at)
{
	uint32_t *index;
	int rc;

	if (!f->cat_index || at > f->cat_count)
		return kiln_profile_add_category(f, name, len, count);
	if (!(index = realloc(f->cat_index, (f->cat_count + 1) * sizeof(*index)))) {
		free(f->cat_index);
		f->cat_index = NULL;
		return kiln_error_oom(NULL);
	}
	f->cat_index = index;
	if ((rc = append_category(f, name, len, count)) < 0) {
		free(f->cat_index);
		f->cat_index = NULL;
		return rc;
	}
	/* a new name: no equal one to order it after, the index stays sorted */
	memmove(index + at + 1, index + at, (f->cat_count - 1 - at) * sizeof(*index));
	index[at] = (uint32_t)(f->cat_count - 1);
	return 0;
}

/* a category name against name[0..len) */
static int name_cmp(const char *cat, const char *name, size_t len)
{
	size_t clen = strlen(cat);
	int c = memcmp(cat, name, clen < len ? clen : len);

	probes++;
	return c ? c : (clen > len) - (clen < len);
}

static _Thread_local const kiln_profile_field *sorting_field; /* the same, per thread */

static int cat_index_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = strcmp(sorting_field->cat_names[x], sorting_field->cat_names[y]);

	return c ? c : (x > y) - (x < y);
}

long kiln_profile_category_at(const kiln_profile_field *cf, const char *name, size_t len, size_t *at)
{
	kiln_profile_field *f = (kiln_profile_field *)cf; /* the index is a cache */
	size_t lo = 0, hi;

	*at = 0;
	if (!f->cat_count)
		return -1;
	if (!f->cat_index) {
		if (!(f->cat_index = malloc(f->cat_count * sizeof(*f->cat_index))))
			return -1;
		for (size_t i = 0; i < f->cat_count; i++)
			f->cat_index[i] = (uint32_t)i;
		sorting_field = f;
		qsort(f->cat_index, f->cat_count, sizeof(*f->cat_index), cat_index_cmp);
		sorting_field = NULL;
	}
	/* the first of equal names (ties sort by index) */
	hi = f->cat_count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (name_cmp(f->cat_names[f->cat_index[mid]], name, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	if (lo < f->cat_count && name_cmp(f->cat_names[f->cat_index[lo]], name, len) == 0)
		return f->cat_index[lo];
	return -1;
}

long kiln_profile_category(const kiln_profile_field *f, const char *name, size_t len)
{
	size_t at;

	return kiln_profile_category_at(f, name, len, &at);
}
