/* A data profile: per field path of the curated records, counts and
 * mergeable sketches of the values (docs/QUALITY.md, the file profile.json
 * in docs/FORMATS.md). Built from curated (already pseudonymised) values
 * only; a field the contract pseudonymises, classifies as pii or scans for
 * personal data is profiled by counts and a distinct count of its tokens,
 * never by its values. A profile merges with another (workers, snapshots):
 * fields match by path. */
#ifndef KILN_QUALITY_PROFILE_H
#define KILN_QUALITY_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/contract.h"
#include "contract/validate.h"
#include "core/buf.h"
#include "core/json.h"
#include "quality/sketch.h"

#define KILN_PROFILE_FORMAT "kiln-profile-v1"

typedef enum kiln_ptype {
	KILN_PTYPE_NULL = 0,
	KILN_PTYPE_BOOLEAN,
	KILN_PTYPE_INTEGER,
	KILN_PTYPE_NUMBER, /* with a fraction or an exponent */
	KILN_PTYPE_STRING,
	KILN_PTYPE_OBJECT,
	KILN_PTYPE_ARRAY,
	KILN_PTYPE_COUNT_
} kiln_ptype;

const char *kiln_ptype_name(kiln_ptype t);

typedef struct kiln_profile_field {
	/* what a value reads or counts first, together (a profile's fields
	 * are touched once a record each: fewer cache lines, fewer misses) */
	bool tokens;      /* profiled by counts and distinct tokens only */
	bool item;        /* an array's items (no missing count) */
	bool time;        /* a date or timestamp field: its strings as instants in `tm` */
	bool date;        /* a date field: rendered as dates, not date-times */
	bool cat_over;    /* its strings passed cat_k distinct values or held one a PII detector flags
	                     (or were never counted): no categories, whatever is merged in */
	uint32_t cat_k;   /* categories from the data: a string field without an enum, counted while it
	                     holds at most cat_k distinct values (0: enum or boolean categories, or none) */
	uint64_t present; /* values seen (nulls included) */
	uint64_t types[KILN_PTYPE_COUNT_];
	kiln_hll distinct;                  /* strings and numbers as written (tokens: the token) */
	uint64_t len_min, len_max, len_sum; /* strings, in code points (values fields) */
	uint64_t empty;                     /* strings of length 0 (values fields) */
	size_t cat_count;                   /* categories: enum values, or false/true */
	uint64_t *cat_counts;
	kiln_moments num; /* numbers (values fields) */
	kiln_ddsketch dd;
	kiln_tsketch tm;
	char *path;   /* the contract's path: "device.os", "tags[]" */
	char *parent; /* the enclosing field's path, NULL for a top-level field */
	char **cat_names;
	size_t cat_cap;
	uint32_t *cat_index; /* a cache: category indices sorted by name, NULL until a lookup builds it */
} kiln_profile_field;

/* Fields profiled per contract: the first ones in contract order (depth
 * first); the rest are counted in `omitted` and not profiled, so a profile
 * holds at most this many fields' sketches (docs/QUALITY.md, "Cost"). */
#define KILN_PROFILE_MAX_FIELDS 1024

typedef struct kiln_profile {
	uint64_t records;
	uint64_t omitted; /* contract fields past KILN_PROFILE_MAX_FIELDS */
	size_t count, cap;
	kiln_profile_field *fields;
} kiln_profile;

/* What a contract says about profiling its fields, built once and shared
 * read-only by every worker: the fields in contract order and a map from a
 * contract field to its index. */
typedef struct kiln_profile_schema kiln_profile_schema;

int kiln_profile_schema_new(kiln_profile_schema **out, const kiln_contract *contract);
void kiln_profile_schema_free(kiln_profile_schema *schema);

/* Whether a string may become a category name: 1 when a PII detector flags
 * it (the field then gets no categories), 0 when not, a negative KILN_E*
 * code on failure. Called from every thread that adds values. */
typedef int (*kiln_profile_screen_fn)(void *ctx, const char *v, size_t len);

#define KILN_PROFILE_CATEGORIES_K     20   /* profile.categories.k's default */
#define KILN_PROFILE_CATEGORIES_K_MAX 1000 /* its largest value */

/* Categories from the data: the schema's string fields without an enum
 * (neither personal nor dates or timestamps) count their values while they
 * hold at most k distinct ones, none of which `screen` flags. Without a
 * screen (the default) they get none. The schema owns ctx from here on and
 * frees it with free_ctx (may be NULL), also when this fails. */
int kiln_profile_schema_set_categories(kiln_profile_schema *schema, uint32_t k, kiln_profile_screen_fn screen,
                                       void *ctx, void (*free_ctx)(void *));

/* An empty profile with the schema's fields (records 0). */
int kiln_profile_init(kiln_profile *out, const kiln_profile_schema *schema);
void kiln_profile_free(kiln_profile *profile);
/* Back to zero counts, the fields kept. */
void kiln_profile_clear(kiln_profile *profile);

/* One curated value of `field`: its JSON type and its text as curated (a
 * string's bytes between the quotes, escapes as written). A profile from
 * kiln_profile_init(schema) takes values of that schema's contract. */
int kiln_profile_add_value(kiln_profile *p, const kiln_profile_schema *schema, const kiln_field *field,
                           kiln_json_type type, bool escaped, const char *text, size_t len);

/* Adds one curated record (a shard line, no newline) to p, as the run's
 * curate pool did when it curated it: every value's field resolved through
 * the contract (the validator's token hook, kiln_validate_hook, on the
 * curated text; the record need not be valid against the contract: tokens
 * replaced numbers, fields were dropped) and passed to kiln_profile_add_value
 * with the curated text; p->records + 1. The validator must be of the
 * schema's contract, with limits that admit the curated lines (a token is
 * longer than many values it replaced: give max_bytes room). KILN_EINVALID
 * "profile: ..." (nothing added) for a line that is not a JSON object within
 * those limits; the message names the code and byte, never a value. Profiles
 * built this way equal the run's but for floating-point rounding of the
 * numbers' mean and variance (the order values were added and merged in). */
int kiln_profile_add_curated(kiln_profile *p, const kiln_profile_schema *schema, kiln_validator *validator,
                             const char *line, size_t len);

int kiln_profile_merge(kiln_profile *into, const kiln_profile *from);

/* Missing values of a field: records (or values of its enclosing object)
 * without it; 0 for array items. */
uint64_t kiln_profile_missing(const kiln_profile *p, const kiln_profile_field *f);
/* The field's numbers' q-quantile as its sketch answers it, within the
 * numbers' [min, max] (0 without numbers). */
double kiln_profile_quantile(const kiln_profile_field *f, double q);
/* Distinct strings and numbers: HyperLogLog's estimate, never above the
 * values it counted; exact (the non-empty categories) when categories
 * count every one of them. */
uint64_t kiln_profile_distinct(const kiln_profile_field *f);
/* An instant (ms since the epoch) as profile.json writes it: "YYYY-MM-DD"
 * for a date field, else RFC 3339 UTC with milliseconds when not 0. */
int kiln_profile_put_time(kiln_buf *out, const kiln_profile_field *f, int64_t ms);
const kiln_profile_field *kiln_profile_find(const kiln_profile *p, const char *path);

/* The index of f's category named name[0..len), or -1. The first lookup
 * sorts the names (O(k log k) for k categories, kept in f->cat_index until
 * a category is added); each lookup then takes at most ceil(log2(k + 1))
 * comparisons. A profile looked up from two threads at once needs a lock. */
long kiln_profile_category(const kiln_profile_field *f, const char *name, size_t len);
/* Name comparisons made by this thread's category lookups so far (the
 * profile's own and kiln_profile_category's): tests assert the bound. */
uint64_t kiln_profile_category_probes(void);

/* Whether profile.json's profiles are ones kiln could have written for a
 * version with `valid` curated records (stats.json): total holds at most
 * `valid` records and added at most total's; per field, counts within
 * their records (or enclosing objects), types summing to present, a tokens
 * field without figures of values, numbers with min <= mean <= max, a
 * sketch counting as many values as the moments with its quantiles inside
 * [min, max] (within the sketch's accuracy), string lengths and empties
 * within the string count, categories within the values. added may be
 * NULL. 0, or KILN_EINVALID "WHERE: what" naming the field. */
int kiln_profile_check(const kiln_profile *total, const kiln_profile *added, uint64_t valid,
                       const char *where);

/* The profile as a JSON object {"records":N,"fields":[...]} (docs/FORMATS.md). */
int kiln_profile_render(kiln_buf *out, const kiln_profile *p);
/* profile.json: {"format":..., "total":..., "added":...}. */
int kiln_profile_render_file(kiln_buf *out, const kiln_profile *total, const kiln_profile *added);
/* Parses profile.json into *total and *added (either may be NULL); errors
 * are KILN_EINVALID "WHERE: what". */
int kiln_profile_parse_file(const char *text, size_t len, const char *where, kiln_profile *total,
                            kiln_profile *added);

#endif
