/* Erasing a subject from a dataset (erase.h). The order makes a kill at any
 * point safe: new shards and git objects are written first (unreferenced,
 * harmless), then the planned ref moves and the ledger entry go to the
 * journal, then the raw zone and the quarantine are cleaned (idempotent),
 * then the refs move, each by compare-and-swap, then the entry joins the
 * ledger and the journal goes. */
#include "erase/erase.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "contract/contract.h"
#include "contract/validate.h"
#include "core/error.h"
#include "erase/zones.h"
#include "manifest/format.h"
#include "manifest/gc.h"
#include "manifest/repo_lock.h"
#include "manifest/verify.h"
#include "mask/screen.h"
#include "manifest/version.h"
#include "quality/profile.h"
#include "shard/fetch.h"
#include "shard/filter.h"
#include "shard/writer.h"

#define PLAN_ATTEMPTS 10

/* One shard of the dataset and what the erasure makes of it. */
typedef struct shard_info {
	kiln_split split;
	kiln_shard_entry entry;    /* sources owned */
	bool read;                 /* looked into */
	bool skip;                 /* its filter says it holds no needle: never read */
	kiln_rewrite_shard change; /* change.entry.filter owned */
	bool changed;
} shard_info;

/* A contract of the history, compiled once. */
typedef struct contract_slot {
	unsigned char digest[32];
	kiln_contract *contract;
	kiln_validator *validator;
	kiln_profile_schema *schema;
} contract_slot;

typedef struct erase_state {
	const kiln_erase_options *o;
	kiln_erase_report *out;
	shard_info *shards;
	size_t shard_count, shard_cap, sorted_count;
	kiln_rewrite_result done; /* moves and commits of earlier attempts that took effect */
	contract_slot *contracts;
	size_t contract_count;
	int level;
	char **topics;
	size_t topic_count;
	kiln_buf zst, raw;
	bool no_filter; /* KILN_ERASE_NO_FILTER: read every shard (a benchmark switch) */
} erase_state;

/* ---- what the history holds --------------------------------------------- */

static int copy_entry(kiln_shard_entry *dst, const kiln_shard_entry *src)
{
	kiln_source_range *s = NULL;

	*dst = *src;
	dst->sources = NULL;
	if (src->source_count && !(s = calloc(src->source_count, sizeof(*s))))
		return kiln_error_oom("erase");
	for (size_t i = 0; i < src->source_count; i++) {
		s[i] = src->sources[i];
		if (!(s[i].topic = strdup(src->sources[i].topic))) {
			for (size_t j = 0; j < i; j++)
				free((char *)s[j].topic);
			free(s);
			return kiln_error_oom("erase");
		}
	}
	dst->sources = s;
	dst->filter = NULL; /* the scan's; read by on_shard */
	dst->filter_len = 0;
	return 0;
}

static void free_entry(kiln_shard_entry *e)
{
	for (size_t i = 0; i < e->source_count; i++)
		free((char *)e->sources[i].topic);
	free((kiln_source_range *)e->sources);
	e->sources = NULL;
}

static int shard_info_cmp(const void *a, const void *b)
{
	return strcmp(((const shard_info *)a)->entry.hash, ((const shard_info *)b)->entry.hash);
}

static shard_info *find_shard(erase_state *st, const char *hash)
{
	shard_info key;

	memcpy(key.entry.hash, hash, 65);
	if (st->shard_count == 0)
		return NULL;
	return bsearch(&key, st->shards, st->shard_count, sizeof(*st->shards), shard_info_cmp);
}

static int add_topic(erase_state *st, const char *topic)
{
	char **v;

	for (size_t i = 0; i < st->topic_count; i++)
		if (strcmp(st->topics[i], topic) == 0)
			return 0;
	if (!(v = realloc(st->topics, (st->topic_count + 1) * sizeof(*v))))
		return kiln_error_oom("erase");
	st->topics = v;
	if (!(v[st->topic_count] = strdup(topic)))
		return kiln_error_oom("erase");
	st->topic_count++;
	return 0;
}

/* Whether a shard's filter (shard/filter.h) says it holds none of the
 * subject's needles, so it need not be read: a keep-domain needle
 * "p1_<token>@<domain>" is tested by its token part. No filter, one that
 * does not decode, a needle that is not a token, or KILN_ERASE_NO_FILTER:
 * false (the shard is read). */
static bool filter_excludes(const erase_state *st, const kiln_shard_entry *e)
{
	kiln_filter f;

	if (!e->filter || st->no_filter || kiln_filter_decode(&f, e->filter, e->filter_len, e->hash) < 0)
		return false;
	for (size_t i = 0, n = kiln_subject_token_count(st->o->subject); i < n; i++) {
		size_t len, tl;
		const char *t = kiln_subject_token(st->o->subject, i, &len);

		if (!(tl = kiln_filter_token_part(t, len)) || kiln_filter_may_hold(&f, t, tl))
			return false;
	}
	return true;
}

static int on_shard(void *ctx, kiln_split split, const kiln_shard_entry *entry)
{
	erase_state *st = ctx;
	shard_info *s;
	int rc;

	/* a shard seen on an earlier attempt keeps what was found */
	if (st->sorted_count) {
		shard_info key;

		memcpy(key.entry.hash, entry->hash, 65);
		if (bsearch(&key, st->shards, st->sorted_count, sizeof(*st->shards), shard_info_cmp))
			return 0;
	}
	if (st->shard_count == st->shard_cap) {
		size_t cap = st->shard_cap ? st->shard_cap * 2 : 64;
		shard_info *v = realloc(st->shards, cap * sizeof(*v));

		if (!v)
			return kiln_error_oom("erase");
		st->shards = v;
		st->shard_cap = cap;
	}
	s = &st->shards[st->shard_count];
	memset(s, 0, sizeof(*s));
	s->split = split;
	if ((rc = copy_entry(&s->entry, entry)) < 0)
		return rc;
	s->skip = filter_excludes(st, entry);
	st->shard_count++;
	for (size_t i = 0; i < entry->source_count; i++)
		if ((rc = add_topic(st, entry->sources[i].topic)) < 0)
			return rc;
	return 0;
}

static int on_contract(void *ctx, const char *text, size_t len)
{
	erase_state *st = ctx;
	contract_slot *v, *c;
	unsigned char digest[32];
	int rc;

	crypto_generichash(digest, sizeof(digest), (const unsigned char *)text, len, NULL, 0);
	for (size_t i = 0; i < st->contract_count; i++)
		if (memcmp(st->contracts[i].digest, digest, 32) == 0)
			return 0;
	if (!(v = realloc(st->contracts, (st->contract_count + 1) * sizeof(*v))))
		return kiln_error_oom("erase");
	st->contracts = v;
	c = &v[st->contract_count];
	memset(c, 0, sizeof(*c));
	memcpy(c->digest, digest, 32);
	if ((rc = kiln_contract_load_buffer(&c->contract, "contract.yaml", text, len, NULL)) < 0)
		return rc;
	st->contract_count++;
	if (!(c->validator = kiln_validator_new(c->contract, NULL)))
		return kiln_error_oom("erase");
	if ((rc = kiln_profile_schema_new(&c->schema, c->contract)) < 0)
		return rc;
	{
		/* categories from the data as the pipeline's run counts them */
		kiln_pii_screen *screen = NULL;
		uint32_t k =
		    st->o->profile_categories_k ? st->o->profile_categories_k : KILN_PROFILE_CATEGORIES_K;
		if ((rc = kiln_pii_screen_new(&screen)) < 0 ||
		    (rc = kiln_profile_schema_set_categories(c->schema, k, kiln_pii_screen_flags, screen,
		                                             kiln_pii_screen_free)) < 0)
			return rc;
	}
	return kiln_subject_resolve(st->o->subject, c->contract, st->o->key);
}

/* ---- one shard ---------------------------------------------------------- */

/* Reads a shard (verified) and decompresses it into st->raw. */
static int read_shard(erase_state *st, const kiln_shard_entry *e)
{
	kiln_shard_request req = {
	    .hash = e->hash, .bytes = e->bytes, .limit = e->bytes, .sink = kiln_buf_sink, .ctx = &st->zst};
	unsigned long long size;
	size_t n;
	int rc;

	kiln_buf_reset(&st->zst);
	kiln_buf_reset(&st->raw);
	if ((rc = kiln_shard_fetch(st->o->store, &req)) < 0)
		return rc;
	size = ZSTD_getFrameContentSize(st->zst.ptr, st->zst.len);
	if (size == ZSTD_CONTENTSIZE_UNKNOWN || size == ZSTD_CONTENTSIZE_ERROR || size != e->raw_bytes)
		return kiln_error_set(KILN_EINVALID,
		                      "shard %s: its frame does not hold the %llu bytes the manifest lists",
		                      e->hash, (unsigned long long)e->raw_bytes);
	if ((rc = kiln_buf_reserve(&st->raw, (size_t)size + 1)) < 0)
		return rc;
	n = ZSTD_decompress(st->raw.ptr, (size_t)size + 1, st->zst.ptr, st->zst.len);
	if (ZSTD_isError(n) || n != size)
		return kiln_error_set(KILN_EINVALID, "shard %s: does not decompress", e->hash);
	st->raw.len = n;
	return 0;
}

/* Looks into one shard; when it holds the subject, writes its successor
 * (not in a dry run) and fills s->change. */
static int erase_shard(erase_state *st, shard_info *s)
{
	kiln_buf kept = KILN_BUF_INIT(0);
	kiln_shard_writer *w = NULL;
	uint64_t erased = 0, records = 0;
	int rc;

	s->read = true;
	st->out->shards_read++;
	if ((rc = read_shard(st, &s->entry)) < 0)
		return rc;
	for (const char *p = st->raw.ptr, *end = p + st->raw.len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (kiln_subject_in_curated(st->o->subject, p, len)) {
			erased++;
		} else {
			if (kiln_buf_put(&kept, p, len) < 0 || kiln_buf_putc(&kept, '\n') < 0) {
				rc = kiln_error_oom("erase");
				goto cleanup;
			}
			records++;
		}
		p += len + (nl != NULL);
	}
	if (erased == 0)
		goto cleanup;
	s->changed = true;
	memcpy(s->change.old_hash, s->entry.hash, 65);
	s->change.erased = erased;
	s->change.old_bytes = s->entry.bytes;
	s->change.old_raw_bytes = s->entry.raw_bytes;
	s->change.drop = records == 0;
	st->out->erased[s->split] += erased;
	if (s->change.drop) {
		st->out->shards_dropped++;
		goto cleanup;
	}
	st->out->shards_rewritten++;
	if (st->o->dry_run)
		goto cleanup;
	{
		kiln_shard_writer_options wo = {.target_bytes = kept.len + 1,
		                                .level = st->level,
		                                .spool_dir = st->o->spool_dir,
		                                .zstd_threads = 1};
		const kiln_shard_entry *made;
		const kiln_source_range *src = s->entry.source_count ? &s->entry.sources[0] : NULL;
		size_t count;

		if ((rc = kiln_shard_writer_new(&w, st->o->store, &wo)) < 0 ||
		    (rc = kiln_shard_writer_append_run(
		         w, kept.ptr, kept.len, (size_t)records, src ? src->topic : "erase",
		         src ? src->partition : 0, src ? src->first : 0,
		         src ? src->first + (int64_t)records - 1 : (int64_t)records - 1)) < 0 ||
		    (rc = kiln_shard_writer_finish(w)) < 0)
			goto cleanup;
		made = kiln_shard_writer_shards(w, &count);
		if (count != 1) {
			rc = kiln_error_set(KILN_EIO, "erase: shard %s: its successor was not one shard",
			                    s->entry.hash);
			goto cleanup;
		}
		s->change.entry = made[0];
		s->change.entry.sources = s->entry.sources; /* the old line's */
		s->change.entry.source_count = s->entry.source_count;
		/* the successor's own filter (recomputed from the records kept) */
		s->change.entry.filter = NULL;
		s->change.entry.filter_len = 0;
		if (made[0].filter) {
			unsigned char *copy = malloc(made[0].filter_len);

			if (!copy) {
				rc = kiln_error_oom("erase");
				goto cleanup;
			}
			memcpy(copy, made[0].filter, made[0].filter_len);
			s->change.entry.filter = copy;
			s->change.entry.filter_len = made[0].filter_len;
		}
	}
cleanup:
	kiln_shard_writer_free(w);
	kiln_buf_free(&kept);
	return rc;
}

/* ---- profiles ----------------------------------------------------------- */

static int profile_added(void *ctx, const char *text, size_t len, const kiln_shard_entry *added, size_t n,
                         kiln_profile *out)
{
	erase_state *st = ctx;
	unsigned char digest[32];
	contract_slot *c = NULL;
	int rc;

	crypto_generichash(digest, sizeof(digest), (const unsigned char *)text, len, NULL, 0);
	for (size_t i = 0; i < st->contract_count && !c; i++)
		if (memcmp(st->contracts[i].digest, digest, 32) == 0)
			c = &st->contracts[i];
	if (!c)
		return kiln_error_set(KILN_EINVALID,
		                      "erase: a version's contract.yaml was not seen when scanning");
	if ((rc = kiln_profile_init(out, c->schema)) < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if ((rc = read_shard(st, &added[i])) < 0)
			return rc;
		for (const char *p = st->raw.ptr, *end = p + st->raw.len; p < end;) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

			if ((rc = kiln_profile_add_curated(out, c->schema, c->validator, p, l)) < 0)
				return rc;
			p += l + (nl != NULL);
		}
	}
	return 0;
}

/* ---- the versions ------------------------------------------------------- */

/* Every version's dataset.json names the key given (a token of another key
 * would never match: the erasure would find nothing and say so wrongly). */
static int check_keys(erase_state *st)
{
	kiln_du_report du = {0};
	kiln_json_scanner *sc = kiln_json_scanner_new(NULL);
	int rc;

	if (!sc)
		return kiln_error_oom("erase");
	if ((rc = kiln_gc_du(st->o->manifest, st->o->dataset, &du)) < 0)
		goto cleanup;
	for (size_t i = 0; i < du.count && rc == 0; i++) {
		char spec[KILN_MFMT_NAME_MAX * 2 + 8];
		kiln_buf text = KILN_BUF_INIT(0);
		kiln_mfmt_dataset def = {0};
		kiln_version v;

		snprintf(spec, sizeof(spec), "%s@%s", st->o->dataset, du.rows[i].commit);
		if ((rc = kiln_version_lookup(st->o->manifest, spec, &v)) < 0 ||
		    (rc = kiln_version_read(st->o->manifest, &v, "dataset.json", &text)) < 0) {
			kiln_buf_free(&text);
			break;
		}
		if (rc == 1 &&
		    (rc = kiln_mfmt_dataset_parse(sc, "dataset.json", text.ptr, text.len, &def)) == 0 &&
		    def.key_id && strcmp(def.key_id, st->o->key->id) != 0)
			rc = kiln_error_set(
			    KILN_EINVALID,
			    "%s@%s: pseudonymised with key %s, not with the key given (%s): its tokens "
			    "cannot be computed",
			    st->o->dataset, du.rows[i].name, def.key_id, st->o->key->id);
		if (rc == 0 && def.zstd_level)
			st->level = atoi(def.zstd_level);
		if (rc > 0)
			rc = 0;
		kiln_mfmt_dataset_free(&def);
		kiln_buf_free(&text);
	}
cleanup:
	kiln_du_report_free(&du);
	kiln_json_scanner_free(sc);
	return rc;
}

/* The topics (and file and stdin source names) the dataset's branches read,
 * whatever kind of source wrote the entry: the quarantine holds every
 * kind's records under the name; the raw zone only Kafka's (a file's name
 * finds nothing there unless a topic has it, whose records of the subject
 * go too). */
static int lineage_topic(void *ctx, const kiln_lineage_entry *e)
{
	return add_topic(ctx, e->topic);
}

static int branch_topics(erase_state *st)
{
	kiln_du_report du = {0};
	int rc;

	if ((rc = kiln_gc_du(st->o->manifest, st->o->dataset, &du)) < 0)
		return rc;
	for (size_t i = 0; i < du.count && rc == 0; i++)
		if (!du.rows[i].tag)
			rc = kiln_manifest_lineage(st->o->manifest, st->o->dataset, du.rows[i].name,
			                           lineage_topic, st);
	kiln_du_report_free(&du);
	return rc;
}

/* The refs that list a changed shard (a dry run's answer). */
typedef struct dry_ctx {
	erase_state *st;
	bool hit;
	uint64_t erased[KILN_SPLIT_COUNT];
} dry_ctx;

static int dry_shard(void *ctx, const kiln_shard_entry *e)
{
	dry_ctx *d = ctx;
	shard_info *s = find_shard(d->st, e->hash);

	if (s && s->changed) {
		d->hit = true;
		d->erased[s->split] += s->change.erased;
	}
	return 0;
}

static int dry_refs(erase_state *st)
{
	kiln_du_report du = {0};
	int rc;

	if ((rc = kiln_gc_du(st->o->manifest, st->o->dataset, &du)) < 0)
		return rc;
	for (size_t i = 0; i < du.count && rc == 0; i++) {
		char spec[KILN_MFMT_NAME_MAX * 2 + 8];
		dry_ctx d = {.st = st};
		kiln_version v;

		snprintf(spec, sizeof(spec), "%s@%s", st->o->dataset, du.rows[i].commit);
		if ((rc = kiln_version_lookup(st->o->manifest, spec, &v)) < 0)
			break;
		for (int s = 0; s < KILN_SPLIT_COUNT && rc >= 0; s++)
			rc = kiln_version_shards(st->o->manifest, &v, (kiln_split)s, dry_shard, &d);
		if (rc == 0 && d.hit) {
			kiln_rewrite_move *mv =
			    realloc(st->out->moves, (st->out->move_count + 1) * sizeof(*mv));
			uint64_t(*per)[KILN_SPLIT_COUNT] =
			    realloc(st->out->move_erased, (st->out->move_count + 1) * sizeof(*per));

			if (mv)
				st->out->moves = mv;
			if (per)
				st->out->move_erased = per;
			if (!mv || !per) {
				rc = kiln_error_oom("erase");
				break;
			}
			memcpy(per[st->out->move_count], d.erased, sizeof(d.erased));
			mv = &mv[st->out->move_count++];
			memset(mv, 0, sizeof(*mv));
			snprintf(mv->ref, sizeof(mv->ref), "refs/%s/%s/%s", du.rows[i].tag ? "tags" : "heads",
			         st->o->dataset, du.rows[i].name);
			mv->tag = du.rows[i].tag;
			memcpy(mv->old_commit, du.rows[i].commit, 41);
		}
	}
	kiln_du_report_free(&du);
	return rc;
}

/* Cleans (or with dry_run counts) the raw zone and the quarantine. */
static int erase_zones(erase_state *st, bool dry_run)
{
	int rc = kiln_zone_erase_raw(st->o->store, st->o->subject, (const char *const *)st->topics,
	                             st->topic_count, dry_run, &st->out->raw);

	if (rc == 0)
		rc = kiln_zone_erase_quarantine(st->o->store, st->o->subject, st->o->dataset,
		                                (const char *const *)st->topics, st->topic_count, dry_run,
		                                &st->out->quarantine);
	return rc;
}

/* ---- the entry ---------------------------------------------------------- */

static int fill_entry(erase_state *st, const kiln_rewrite_result *plan, kiln_ledger_entry *e)
{
	size_t n = 0;

	memcpy(e->id, st->out->id, sizeof(e->id));
	snprintf(e->dataset, sizeof(e->dataset), "%s", st->o->dataset);
	e->time = (int64_t)time(NULL);
	if (kiln_subject_ledger_id(st->o->subject, e->subject) < 0)
		return kiln_error_last_code();
	if (st->o->signing_key)
		kiln_verify_fingerprint(e->signer, st->o->signing_key->pk);
	e->refs = plan->moves;
	e->ref_count = plan->move_count;
	e->commits = plan->commits;
	e->commit_count = plan->commit_count;
	for (size_t i = 0; i < st->shard_count; i++)
		n += st->shards[i].changed;
	if (n && !(e->shards = calloc(n, sizeof(*e->shards))))
		return kiln_error_oom("erase");
	for (size_t i = 0; i < st->shard_count; i++) {
		const shard_info *s = &st->shards[i];
		kiln_ledger_shard *ls;

		if (!s->changed)
			continue;
		ls = &e->shards[e->shard_count++];
		ls->split = s->split;
		memcpy(ls->old_hash, s->entry.hash, 65);
		if (!s->change.drop)
			memcpy(ls->new_hash, s->change.entry.hash, 65);
		ls->erased = s->change.erased;
	}
	memcpy(e->erased, st->out->erased, sizeof(e->erased));
	e->raw = st->out->raw;
	e->quarantine = st->out->quarantine;
	return 0;
}

/* The entry's parts the plan owns are borrowed: only the shards are freed. */
static void entry_release(kiln_ledger_entry *e)
{
	free(e->shards);
	memset(e, 0, sizeof(*e));
}

/* ---- attempts ----------------------------------------------------------- */

/* Adds the plan's moves (replacing earlier ones of the same ref not taken)
 * and commits to st->done. */
static int merge_done(erase_state *st, const kiln_rewrite_result *plan)
{
	for (size_t j = 0; j < plan->move_count; j++) {
		size_t i;

		for (i = 0; i < st->done.move_count; i++)
			if (strcmp(st->done.moves[i].ref, plan->moves[j].ref) == 0)
				break;
		if (i < st->done.move_count) {
			/* moved once already: it goes from the first old to the newest new */
			memcpy(st->done.moves[i].new_id, plan->moves[j].new_id, 41);
			memcpy(st->done.moves[i].new_commit, plan->moves[j].new_commit, 41);
			continue;
		}
		kiln_rewrite_move *v = realloc(st->done.moves, (st->done.move_count + 1) * sizeof(*v));

		if (!v)
			return kiln_error_oom("erase");
		st->done.moves = v;
		v[st->done.move_count++] = plan->moves[j];
	}
	if (plan->commit_count) {
		kiln_rewrite_pair *v =
		    realloc(st->done.commits, (st->done.commit_count + plan->commit_count) * sizeof(*v));
		size_t had = st->done.commit_count;

		if (!v)
			return kiln_error_oom("erase");
		st->done.commits = v;
		/* a ref whose move lost is planned again: each rewrite once */
		for (size_t j = 0; j < plan->commit_count; j++) {
			size_t i = 0;

			while (i < had && (strcmp(v[i].old_id, plan->commits[j].old_id) != 0 ||
			                   strcmp(v[i].new_id, plan->commits[j].new_id) != 0))
				i++;
			if (i == had)
				v[st->done.commit_count++] = plan->commits[j];
		}
	}
	return 0;
}

/* The shards that held the subject, for the report. */
static int report_changed(erase_state *st)
{
	size_t n = 0;

	for (size_t i = 0; i < st->shard_count; i++)
		n += st->shards[i].changed;
	if (n == 0)
		return 0;
	if (!(st->out->changed = calloc(n, sizeof(*st->out->changed))))
		return kiln_error_oom("erase");
	for (size_t i = 0; i < st->shard_count; i++) {
		const shard_info *s = &st->shards[i];
		kiln_ledger_shard *c;

		if (!s->changed)
			continue;
		c = &st->out->changed[st->out->changed_count++];
		c->split = s->split;
		memcpy(c->old_hash, s->entry.hash, 65);
		if (!s->change.drop && !st->o->dry_run)
			memcpy(c->new_hash, s->change.entry.hash, 65);
		c->erased = s->change.erased;
	}
	return 0;
}

/* Reads the shards a commit made since the last scan lists (a run that
 * committed between the scan and the plan's walk: the plan kept them
 * unread); *out_late when one holds a needle. */
static int read_late_shards(erase_state *st, bool *out_late)
{
	size_t before = st->shard_count;
	int rc;

	*out_late = false;
	if ((rc = kiln_rewrite_scan(st->o->manifest, st->o->dataset, on_shard, NULL, st)) < 0)
		return rc;
	for (size_t i = before; i < st->shard_count; i++) {
		if (!st->shards[i].skip && (rc = erase_shard(st, &st->shards[i])) < 0)
			return rc;
		*out_late = *out_late || st->shards[i].changed;
	}
	if (st->shard_count > 1)
		qsort(st->shards, st->shard_count, sizeof(*st->shards), shard_info_cmp);
	st->sorted_count = st->shard_count;
	st->out->shards = st->shard_count;
	return 0;
}

/* ---- resume ------------------------------------------------------------- */

/* Finishes the journal's erasure; with st (the same subject's erasure
 * starting again), first cleans the zones and adds what that did to the
 * entry, so one erasure stays one entry whatever point the kill hit. */
static int resume(kiln_manifest *m, const char *dataset, const kiln_signing_key *signing_key, erase_state *st,
                  char out_id[17])
{
	kiln_buf text = KILN_BUF_INIT(0);
	kiln_json_scanner *sc = NULL;
	kiln_ledger_entry e = {0};
	kiln_rewrite_result plan = {0};
	char subject[65];
	int rc;

	out_id[0] = '\0';
	if ((rc = kiln_ledger_journal_read(m, dataset, &text)) <= 0)
		goto cleanup;
	if (!(sc = kiln_json_scanner_new(NULL))) {
		rc = kiln_error_oom("erase");
		goto cleanup;
	}
	if ((rc = kiln_ledger_parse(sc, "erase: the journal", text.ptr, text.len, &e)) < 0)
		goto cleanup;
	plan.moves = e.refs;
	plan.move_count = e.ref_count;
	rc = kiln_rewrite_apply(m, &plan, "kiln erase (resumed)", NULL);
	if (rc == KILN_EMODIFIED) {
		/* a run moved a ref since the journal was written: the entry
		 * records only the moves made; the rerun's own plan rewrites the
		 * rest (and what the run added) as an entry of its own */
		e.ref_count = kiln_rewrite_keep_applied(m, e.refs, e.ref_count);
		rc = 0;
	}
	if (rc < 0)
		goto cleanup;
	if (st && kiln_subject_ledger_id(st->o->subject, subject) == 0 && strcmp(subject, e.subject) == 0) {
		if ((rc = erase_zones(st, false)) < 0)
			goto cleanup;
		e.raw.objects += st->out->raw.objects;
		e.raw.rewritten += st->out->raw.rewritten;
		e.raw.deleted += st->out->raw.deleted;
		e.raw.records += st->out->raw.records;
		e.quarantine.objects += st->out->quarantine.objects;
		e.quarantine.rewritten += st->out->quarantine.rewritten;
		e.quarantine.deleted += st->out->quarantine.deleted;
		e.quarantine.records += st->out->quarantine.records;
		memset(&st->out->raw, 0, sizeof(st->out->raw));
		memset(&st->out->quarantine, 0, sizeof(st->out->quarantine));
	}
	if ((rc = kiln_ledger_append(m, &e, signing_key, NULL)) < 0 ||
	    (rc = kiln_ledger_journal_remove(m, dataset)) < 0)
		goto cleanup;
	memcpy(out_id, e.id, 17);
	rc = 1;
cleanup:
	kiln_ledger_entry_free(&e);
	kiln_json_scanner_free(sc);
	kiln_buf_free(&text);
	return rc;
}

int kiln_erase_resume(kiln_manifest *m, const char *dataset, const kiln_signing_key *signing_key,
                      char out_id[17])
{
	return resume(m, dataset, signing_key, NULL, out_id);
}

/* ---- erase -------------------------------------------------------------- */

static void state_free(erase_state *st)
{
	for (size_t i = 0; i < st->shard_count; i++) {
		free_entry(&st->shards[i].entry);
		free((void *)st->shards[i].change.entry.filter);
	}
	free(st->shards);
	for (size_t i = 0; i < st->contract_count; i++) {
		kiln_profile_schema_free(st->contracts[i].schema);
		kiln_validator_free(st->contracts[i].validator);
		kiln_contract_free(st->contracts[i].contract);
	}
	free(st->contracts);
	for (size_t i = 0; i < st->topic_count; i++)
		free(st->topics[i]);
	free(st->topics);
	kiln_buf_free(&st->zst);
	kiln_buf_free(&st->raw);
	kiln_rewrite_result_free(&st->done);
}

void kiln_erase_report_free(kiln_erase_report *r)
{
	if (!r)
		return;
	free(r->moves);
	free(r->move_erased);
	free(r->changed);
	memset(r, 0, sizeof(*r));
}

int kiln_erase(const kiln_erase_options *o, kiln_erase_report *out)
{
	const char *no_filter = getenv("KILN_ERASE_NO_FILTER");
	erase_state st = {.o = o,
	                  .out = out,
	                  .level = 3,
	                  .zst = KILN_BUF_INIT(0),
	                  .raw = KILN_BUF_INIT(0),
	                  .no_filter = no_filter && strcmp(no_filter, "1") == 0};
	kiln_rewrite_shard *changes = NULL;
	kiln_rewrite_result plan = {0};
	kiln_ledger_entry entry = {0};
	kiln_buf journal = KILN_BUF_INIT(0);
	size_t change_count = 0;
	bool found = false, zones_cleaned = false, late;
	int refs_lock = -1, rc;

	memset(out, 0, sizeof(*out));
	/* the subject's needles under every contract of the history */
	if ((rc = kiln_rewrite_scan(o->manifest, o->dataset, NULL, on_contract, &st)) < 0 ||
	    (rc = kiln_subject_finish(o->subject, o->dataset)) < 0)
		goto cleanup;
	if ((rc = branch_topics(&st)) < 0)
		goto cleanup;
	if (!o->dry_run && (rc = resume(o->manifest, o->dataset, o->signing_key, &st, out->resumed)) < 0)
		goto cleanup;
	if ((rc = check_keys(&st)) < 0)
		goto cleanup;
	if (!o->dry_run) {
		unsigned char r[8];

		randombytes_buf(r, sizeof(r));
		sodium_bin2hex(out->id, sizeof(out->id), r, sizeof(r));
	}
	for (unsigned attempt = 0;; attempt++) {
		out->attempts = attempt + 1;
		if (attempt >= KILN_REFS_EXCLUSIVE_AFTER && refs_lock < 0 && !o->dry_run &&
		    (rc = kiln_manifest_lock(o->manifest, KILN_REFS_LOCK, true, true, &refs_lock)) < 0)
			goto cleanup; /* runs outpaced the plans: they wait now (repo_lock.h) */
		if ((rc = kiln_rewrite_scan(o->manifest, o->dataset, on_shard, NULL, &st)) < 0)
			goto cleanup;
		if (st.shard_count > 1)
			qsort(st.shards, st.shard_count, sizeof(*st.shards), shard_info_cmp);
		st.sorted_count = st.shard_count;
		out->shards = st.shard_count;
		for (size_t i = 0; i < st.shard_count; i++)
			if (!st.shards[i].read && !st.shards[i].skip &&
			    (rc = erase_shard(&st, &st.shards[i])) < 0)
				goto cleanup;
		free(changes);
		changes = NULL;
		change_count = 0;
		for (size_t i = 0; i < st.shard_count; i++)
			change_count += st.shards[i].changed;
		if (change_count && !(changes = calloc(change_count, sizeof(*changes)))) {
			rc = kiln_error_oom("erase");
			goto cleanup;
		}
		change_count = 0;
		for (size_t i = 0; i < st.shard_count; i++)
			if (st.shards[i].changed)
				changes[change_count++] = st.shards[i].change; /* sorted: shards are */
		if (attempt == 0) {
			if ((rc = erase_zones(&st, true)) < 0)
				goto cleanup;
			found = change_count > 0 || out->raw.records > 0 || out->quarantine.records > 0 ||
			        out->raw.deleted > 0 || out->quarantine.deleted > 0;
		}
		if (o->dry_run) {
			rc = dry_refs(&st);
			goto cleanup;
		}
		if (!found) {
			out->id[0] = '\0';
			goto cleanup;
		}
		kiln_rewrite_result_free(&plan);
		{
			kiln_rewrite_options ro = {.dataset = o->dataset,
			                           .shards = changes,
			                           .shard_count = change_count,
			                           .erasure = out->id,
			                           .key = o->signing_key,
			                           .profile = profile_added,
			                           .profile_ctx = &st};

			if ((rc = kiln_rewrite_plan(o->manifest, &ro, &plan)) < 0 ||
			    (rc = read_late_shards(&st, &late)) < 0)
				goto cleanup;
			if (late && attempt + 1 < PLAN_ATTEMPTS)
				continue; /* a run committed the subject's records meanwhile: plan again */
			if (late) {
				rc = kiln_error_set(
				    KILN_EMODIFIED,
				    "erase: %s: runs kept committing records of the subject while "
				    "the erasure planned (%d attempts); run it again",
				    o->dataset, PLAN_ATTEMPTS);
				goto cleanup;
			}
		}
		if ((rc = merge_done(&st, &plan)) < 0)
			goto cleanup;
		entry_release(&entry);
		if ((rc = fill_entry(&st, &st.done, &entry)) < 0)
			goto cleanup;
		kiln_buf_reset(&journal);
		if ((rc = kiln_ledger_render(&journal, &entry)) < 0 ||
		    (rc = kiln_ledger_journal_write(o->manifest, o->dataset, &journal)) < 0)
			goto cleanup;
		if (!zones_cleaned) {
			zones_cleaned = true;
			if ((rc = erase_zones(&st, false)) < 0)
				goto cleanup;
			entry.raw = out->raw;
			entry.quarantine = out->quarantine;
			kiln_buf_reset(&journal);
			if ((rc = kiln_ledger_render(&journal, &entry)) < 0 ||
			    (rc = kiln_ledger_journal_write(o->manifest, o->dataset, &journal)) < 0)
				goto cleanup;
		}
		rc = kiln_rewrite_apply(o->manifest, &plan, "kiln erase", NULL);
		if (rc == KILN_EMODIFIED && attempt + 1 < PLAN_ATTEMPTS)
			continue; /* a run committed meanwhile: plan again over what it added */
		if (rc < 0)
			goto cleanup;
		break;
	}
	kiln_manifest_unlock(refs_lock);
	refs_lock = -1;
	if ((rc = kiln_ledger_append(o->manifest, &entry, o->signing_key, out->ledger_commit)) < 0 ||
	    (rc = kiln_ledger_journal_remove(o->manifest, o->dataset)) < 0)
		goto cleanup;
	out->commits = st.done.commit_count;
	out->moves = st.done.moves;
	out->move_count = st.done.move_count;
	st.done.moves = NULL;
	st.done.move_count = 0;
cleanup:
	kiln_manifest_unlock(refs_lock);
	if (rc == 0)
		rc = report_changed(&st);
	entry_release(&entry);
	kiln_rewrite_result_free(&plan);
	kiln_buf_free(&journal);
	free(changes);
	state_free(&st);
	return rc;
}
