/* The manifest codec: the files of a dataset commit (docs/FORMATS.md,
 * "Manifest repository") are rendered and parsed here and nowhere else,
 * beside the rules that go with them (the names of datasets, branches and
 * tags). Everything else in kiln calls these functions. Parsers take the
 * caller's scanner (reused file after file) and a `where` that starts every
 * error message ("manifest: refs/heads/ds/main:stats.json"); renderers
 * append to a kiln_buf and return 0 or KILN_ENOMEM. */
#ifndef KILN_MANIFEST_FORMAT_H
#define KILN_MANIFEST_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/json.h"
#include "manifest/manifest.h"

/* ---- names ---------------------------------------------------------------- */

/* The longest dataset, branch or tag name. */
#define KILN_MFMT_NAME_MAX 128

/* Whether s[0..n) is a dataset, branch or tag name:
 * [a-z0-9][a-z0-9._-]{0,127}. (Git's own rules, "..", ".lock", are checked
 * on the whole ref name by the callers that build one.) */
bool kiln_mfmt_name_valid_n(const char *s, size_t n);

/* The same for a NUL-terminated s; NULL is not a name. */
bool kiln_mfmt_name_valid(const char *s);

/* ---- integers ------------------------------------------------------------- */

/* Counts and offsets are JSON integers (no fraction, no exponent). These read
 * a number token: 0 with the value in *out; KILN_MFMT_NOT_INTEGER when t is
 * not an integer, is negative for the unsigned reader or has a magnitude
 * beyond 64 bits; KILN_MFMT_OUT_OF_RANGE when it is outside int64 or
 * [lo, hi]. Nothing is written to *out on failure. */
#define KILN_MFMT_NOT_INTEGER  (-1)
#define KILN_MFMT_OUT_OF_RANGE (-2)
int kiln_mfmt_token_u64(const kiln_json_token *t, uint64_t *out);
int kiln_mfmt_token_i64(const kiln_json_token *t, int64_t lo, int64_t hi, int64_t *out);

/* ---- stats.json ----------------------------------------------------------- */

/* Parses a stats.json text into *out (zeroed first; absent members stay 0).
 * KILN_EINVALID "WHERE: what" for anything the format does not allow. */
int kiln_mfmt_stats_parse(kiln_json_scanner *scanner, const char *where, const char *text, size_t len,
                          kiln_stats *out);

/* Appends the stats.json text of s (codes with no record left out). */
int kiln_mfmt_stats_render(kiln_buf *out, const kiln_stats *s);

/* ---- lineage.json --------------------------------------------------------- */

/* A list of lineage entries; owned[i] says whether v[i]'s strings (source,
 * topic, path, prefix_blake2b) were allocated by the list and are freed with
 * it, else they are borrowed from the caller. */
typedef struct kiln_mfmt_lineage {
	kiln_lineage_entry *v;
	bool *owned;
	size_t n, cap;
} kiln_mfmt_lineage;

/* Frees the owned strings and the arrays; the list is empty again. */
void kiln_mfmt_lineage_free(kiln_mfmt_lineage *l);

/* Appends a copy of *e (its strings borrowed, or owned when `owned`). */
int kiln_mfmt_lineage_push(kiln_mfmt_lineage *l, const kiln_lineage_entry *e, bool owned);

/* The index of the entry for source/topic/partition, or -1. */
ptrdiff_t kiln_mfmt_lineage_find(const kiln_mfmt_lineage *l, const char *source, const char *topic,
                                 int32_t partition);

/* Whether another entry of l has l->v[i]'s topic and partition (another
 * source kind wrote it): listings then name the kind ("file:tickets/0"). */
bool kiln_mfmt_lineage_shared(const kiln_mfmt_lineage *l, size_t i);

/* Sorts the entries by topic (byte order), partition, then source (byte
 * order), the file's order. */
void kiln_mfmt_lineage_sort(kiln_mfmt_lineage *l);

/* The kind of source an entry without "source" (written before it
 * existed) was written by, from its shape: KILN_LINEAGE_KAFKA without a
 * path, KILN_LINEAGE_STDIN with KILN_LINEAGE_STDIN_PATH,
 * KILN_LINEAGE_DIRECTORY with a path and a topic holding
 * KILN_LINEAGE_DIR_SEP, else KILN_LINEAGE_FILE (static). The migration of
 * older lineage.json files. */
const char *kiln_mfmt_lineage_kind_of_shape(const char *topic, const char *path);

/* NULL when e's "source" is a kind name ([a-z][a-z0-9_-]{0,31}) that
 * agrees with its shape ("kafka" without a path, "file" with one other
 * than "-" and a topic without '=', "stdin" with "-", "directory" with a
 * path and a topic with '='; a kind the manifest does not know the shape
 * of with any), else what is wrong (static). */
const char *kiln_mfmt_lineage_source_wrong(const kiln_lineage_entry *e);

/* Parses a lineage.json text, appending its entries (owned) to *out; an
 * entry without "source" gets kiln_mfmt_lineage_kind_of_shape's. Two
 * entries for one source, topic and partition, an unknown key, a missing
 * "topic", "partition" or "next", a file entry without all of "path",
 * "bytes" and "prefix_blake2b", a "source" that is not a kind name
 * ([a-z][a-z0-9_-]{0,31}) or one that contradicts the entry's shape
 * (kiln_mfmt_lineage_source_wrong) are KILN_EINVALID "WHERE: what". */
int kiln_mfmt_lineage_parse(kiln_json_scanner *scanner, const char *where, const char *text, size_t len,
                            kiln_mfmt_lineage *out);

/* Appends the lineage.json text of l's entries, in l's order (sort first). */
int kiln_mfmt_lineage_render(kiln_buf *out, const kiln_mfmt_lineage *l);

/* ---- dataset.json --------------------------------------------------------- */

/* The members of dataset.json, each as text: strings decoded, numbers as
 * written (NULL when absent). The parser owns the strings it sets (freed by
 * kiln_mfmt_dataset_free); a struct filled for rendering borrows them. */
typedef struct kiln_mfmt_dataset {
	const char *name;
	/* "contract" */
	const char *contract_id, *contract_version, *contract_api_version, *contract_schema, *contract_digest;
	/* "pseudonymisation": the key and token definition */
	bool have_pseudonymisation;
	const char *token_scheme, *key_id, *key_version, *token_prefix, *redact_marker;
	/* "split": the split definition; ratios by kiln_split */
	bool have_split;
	const char *split_scheme, *split_key, *split_salt, *ratios[KILN_SPLIT_COUNT];
	/* "shards" */
	const char *shard_format, *shard_compression, *zstd_level, *target_bytes, *shard_hash, *shard_key;
	/* "dedup", only written by a commit of a pipeline with dedup: its key
	 * paths as their JSON array (kiln_mfmt_dedup_key_render: parsed back to
	 * the same text), its window in seconds (NULL both: no dedup) */
	const char *dedup_key, *dedup_window_seconds;
	bool owned;
} kiln_mfmt_dataset;

/* Appends dedup.key's text, a JSON array of the count paths in order
 * (["order_id","customer.tier"]): what dataset.json holds and what two
 * definitions compare. */
int kiln_mfmt_dedup_key_render(kiln_buf *out, const char *const *paths, size_t count);

/* Reads the members above from a dataset.json text (other members are
 * skipped, absent ones left NULL: files written by hand or by tests may hold
 * less). KILN_EINVALID "WHERE: what" when the text is not a JSON object. */
int kiln_mfmt_dataset_parse(kiln_json_scanner *scanner, const char *where, const char *text, size_t len,
                            kiln_mfmt_dataset *out);
void kiln_mfmt_dataset_free(kiln_mfmt_dataset *d);

/* Appends the dataset.json text of d (every member must be set but dedup's,
 * written only when dedup_key is; the number members' text is written as it
 * is, dedup_key too). */
int kiln_mfmt_dataset_render(kiln_buf *out, const kiln_mfmt_dataset *d);

/* The definition rule: a branch keeps one pseudonymisation key and one split
 * definition for its whole history, so tokens and splits of old and new
 * shards agree. NULL when a and b define the same ones, else the part that
 * differs, "pseudonymisation" or "split" (a part present in only one of them
 * differs too). */
const char *kiln_mfmt_dataset_definition_differs(const kiln_mfmt_dataset *a, const kiln_mfmt_dataset *b);

/* ---- the governance record ------------------------------------------------ */

/* What a promoted version's annotated tag message records (docs/RELEASES.md):
 * the version, where it came from, its source offsets, contract, key, split
 * and counts, and the release gates' result lines. */
typedef struct kiln_mfmt_governance {
	const char *dataset, *version;       /* "user-events", "v3" */
	const char *commit;                  /* 40 hex */
	const char *from;                    /* the ref it was promoted from, or the commit */
	const kiln_mfmt_lineage *lineage;    /* its lineage.json (may be empty) */
	const kiln_mfmt_dataset *definition; /* its dataset.json; absent members print as "?" */
	const kiln_stats *stats;             /* its stats.json */
	const char *const *gates;            /* result lines; none: "none configured" */
	size_t gate_count;
} kiln_mfmt_governance;

/* Appends the tag message for g (NUL not included). */
int kiln_mfmt_governance_render(kiln_buf *out, const kiln_mfmt_governance *g);

/* ---- splits/<split>/<hh>.jsonl -------------------------------------------- */

/* The top-level "shard" value of one line (without its newline), checked to
 * be valid JSON holding 64 lower-case hex digits starting with hh (the
 * file's name): *out_hash points at them in text. */
int kiln_mfmt_shard_line_hash(kiln_json_scanner *scanner, const char *where, const char *text, size_t len,
                              const char hh[2], const char **out_hash);

/* Appends one line for e (without the newline): "shard", "bytes",
 * "raw_bytes", "records" and "sources", in that order. */
int kiln_mfmt_shard_line_render(kiln_buf *out, const kiln_shard_entry *e);

/* The hash of a line that starts the way kiln_mfmt_shard_line_render
 * writes it ({"shard":"<64 hex>"...), read without parsing the line: true
 * with the hash in out (NUL-terminated). false: parse the line instead. */
bool kiln_mfmt_shard_line_fast_hash(const char *text, size_t len, char out[65]);

/* How much of a line kiln_mfmt_shard_line_parse reads. */
typedef enum kiln_mfmt_line_mode {
	/* "shard", "bytes", "raw_bytes" and "records" required, "sources" parsed */
	KILN_MFMT_LINE_FULL,
	/* the references only (gc, du): "shard" required, the counts read when
	 * present (0 otherwise), "sources" skipped; strings and sources unused */
	KILN_MFMT_LINE_REFS,
} kiln_mfmt_line_mode;

/* Parses one line (docs/FORMATS.md) into out; keys the format does not name
 * are skipped. Topic strings are written into `strings` (reset by the
 * caller) and out->sources points into `sources`, grown as needed (owned by
 * the caller): no allocation per line once both have grown. Errors are
 * KILN_EINVALID "WHERE: what". */
int kiln_mfmt_shard_line_parse(kiln_json_scanner *scanner, const char *where, kiln_mfmt_line_mode mode,
                               const char *line, size_t len, kiln_shard_entry *out, kiln_buf *strings,
                               kiln_source_range **sources, size_t *sources_cap);

/* kiln_mfmt_shard_line_parse in KILN_MFMT_LINE_FULL mode, errors starting
 * "shard line: ", with a scanner of its own (the first) or the caller's. */
int kiln_shard_line_parse(const char *line, size_t len, kiln_shard_entry *out, kiln_buf *strings,
                          kiln_source_range **sources, size_t *sources_cap);
int kiln_shard_line_parse_with(kiln_json_scanner *scanner, const char *line, size_t len,
                               kiln_shard_entry *out, kiln_buf *strings, kiln_source_range **sources,
                               size_t *sources_cap);

#endif
