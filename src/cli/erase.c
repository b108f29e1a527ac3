/* `kiln erase DATASET --subject FIELD=VALUE... | --subjects FILE --pipeline P`:
 * erases a person from every version of a dataset, its raw zone and its
 * quarantine, records the erasure in the ledger (erase/erase.h), and with
 * --verify proves that nothing of the subject is left (docs/ERASURE.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "config.h"
#include "core/error.h"
#include "core/secret.h"
#include "erase/erase.h"
#include "erase/scan.h"
#include "erase/subject.h"
#include "ingest/pipeline.h"
#include "ingest/run_setup.h"
#include "manifest/rewrite.h"
#include "openlineage/openlineage.h"
#include "manifest/scan.h"

static const char usage_text[] =
    "usage: kiln erase DATASET (--subject FIELD=VALUE|TOKEN)... --pipeline FILE [--dry-run] [--json]\n"
    "       kiln erase DATASET --subjects FILE --pipeline FILE [--dry-run] [--json]\n"
    "       kiln erase DATASET --verify (--subject ... | --subjects FILE) --pipeline FILE [--json]\n"
    "\n"
    "Erases a person from every branch and every tag of DATASET: curated records\n"
    "whose pseudonymised fields hold the person's token, and the records of the\n"
    "raw zone and the quarantine that hold the raw value (or the token). Each\n"
    "version that held one is rewritten; promoted versions keep their names and\n"
    "are signed again with the pipeline's manifest.signing_key; the erasure is\n"
    "recorded in the ledger (refs/erasures/DATASET). Run `kiln gc --apply`\n"
    "afterwards to remove the superseded objects (docs/ERASURE.md).\n"
    "\n"
    "  --subject FIELD=VALUE  one identifier of the person: a pseudonymised field\n"
    "                         of the contract and its raw value, or a token p1_...;\n"
    "                         repeat it to name one person by several identifiers\n"
    "  --subjects FILE        one identifier per line, a blank line between persons\n"
    "  -p, --pipeline FILE    the pipeline: key, store, manifest and signing key\n"
    "  -s, --set KEY=VALUE    override a pipeline value (see kiln run --help)\n"
    "      --dry-run          say what would change (counts only), change nothing\n"
    "      --verify           scan every shard, raw and quarantine object and every\n"
    "                         object of the manifest repository; exit 0 only when\n"
    "                         nothing of the subject is found\n"
    "      --json             one JSON document on stdout\n";

typedef struct erase_opts {
	kiln_subject *subject; /* from --subject */
	const char *subjects_file, *pipeline_path;
	kiln_cli_sets sets;
	bool dry_run, verify, json;
	int bad;
} erase_opts;

static int add_subject(const char *cmd, const char *arg, void *out)
{
	erase_opts *o = out;

	if (!o->subject && kiln_subject_new(&o->subject) < 0)
		return kiln_cli_fail(cmd, "%s", kiln_error_last());
	if (kiln_subject_add(o->subject, arg, "--subject") < 0)
		return kiln_cli_fail(cmd, "%s", kiln_error_last());
	return 0;
}

static int put_zone(kiln_buf *b, const char *name, const kiln_ledger_zone *z)
{
	return kiln_buf_printf(
	    b, ",\"%s\":{\"objects\":%llu,\"rewritten\":%llu,\"deleted\":%llu,\"records\":%llu}", name,
	    (unsigned long long)z->objects, (unsigned long long)z->rewritten, (unsigned long long)z->deleted,
	    (unsigned long long)z->records);
}

static int report_json(kiln_buf *b, const char *dataset, const kiln_erase_report *r, bool dry_run)
{
	int rc =
	    kiln_buf_printf(b, "{\"dataset\":") | kiln_cli_json_string(b, dataset) |
	    kiln_buf_printf(b, ",\"dry_run\":%s,\"erasure\":", dry_run ? "true" : "false") |
	    kiln_cli_json_string_or_null(b, r->id) | kiln_buf_puts(b, ",\"resumed\":") |
	    kiln_cli_json_string_or_null(b, r->resumed) | kiln_buf_puts(b, ",\"ledger_commit\":") |
	    kiln_cli_json_string_or_null(b, r->ledger_commit) |
	    kiln_buf_printf(b,
	                    ",\"shards\":%llu,\"shards_read\":%llu,\"shards_rewritten\":%llu,"
	                    "\"shards_dropped\":%llu,\"commits_rewritten\":%llu,\"attempts\":%u,"
	                    "\"erased\":{",
	                    (unsigned long long)r->shards, (unsigned long long)r->shards_read,
	                    (unsigned long long)r->shards_rewritten, (unsigned long long)r->shards_dropped,
	                    (unsigned long long)r->commits, r->attempts);

	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		rc |= kiln_buf_printf(b, "%s\"%s\":%llu", s ? "," : "", kiln_split_name((kiln_split)s),
		                      (unsigned long long)r->erased[s]);
	rc |= kiln_buf_puts(b, "}") | put_zone(b, "raw", &r->raw) |
	      put_zone(b, "quarantine", &r->quarantine) | kiln_buf_puts(b, ",\"refs\":[");
	for (size_t i = 0; i < r->move_count; i++) {
		const kiln_rewrite_move *mv = &r->moves[i];

		rc |= kiln_buf_printf(b, "%s{\"ref\":", i ? "," : "") | kiln_cli_json_string(b, mv->ref) |
		      kiln_buf_puts(b, ",\"old_commit\":") | kiln_cli_json_string_or_null(b, mv->old_commit) |
		      kiln_buf_puts(b, ",\"new_commit\":") | kiln_cli_json_string_or_null(b, mv->new_commit) |
		      kiln_buf_puts(b, ",\"old\":") | kiln_cli_json_string_or_null(b, mv->old_id) |
		      kiln_buf_puts(b, ",\"new\":") | kiln_cli_json_string_or_null(b, mv->new_id);
		if (r->move_erased)
			rc |= kiln_buf_printf(b, ",\"records\":{\"train\":%llu,\"dev\":%llu,\"test\":%llu}",
			                      (unsigned long long)r->move_erased[i][KILN_SPLIT_TRAIN],
			                      (unsigned long long)r->move_erased[i][KILN_SPLIT_DEV],
			                      (unsigned long long)r->move_erased[i][KILN_SPLIT_TEST]);
		rc |= kiln_buf_puts(b, "}");
	}
	rc |= kiln_buf_puts(b, "],\"changed_shards\":[");
	for (size_t i = 0; i < r->changed_count; i++) {
		const kiln_ledger_shard *c = &r->changed[i];

		rc |=
		    kiln_buf_printf(b, "%s{\"split\":\"%s\",\"shard\":\"%s\",\"records\":%llu,\"successor\":",
		                    i ? "," : "", kiln_split_name(c->split), c->old_hash,
		                    (unsigned long long)c->erased) |
		    kiln_cli_json_string_or_null(b, c->new_hash) | kiln_buf_putc(b, '}');
	}
	return rc | kiln_buf_puts(b, "]}");
}

static void report_text(const char *dataset, const kiln_erase_report *r, bool dry_run)
{
	uint64_t total = 0;

	for (int s = 0; s < KILN_SPLIT_COUNT; s++)
		total += r->erased[s];
	if (r->resumed[0])
		printf("finished erasure %s, which an earlier run left half done\n", r->resumed);
	if (!dry_run && !r->id[0]) {
		printf("%s: nothing of the subject found (%llu shards read of %llu, raw zone and quarantine "
		       "searched)\n",
		       dataset, (unsigned long long)r->shards_read, (unsigned long long)r->shards);
		return;
	}
	printf("%s %s: %llu curated record%s (train %llu, dev %llu, test %llu) in %llu shard%s (%llu "
	       "rewritten, %llu "
	       "dropped; %llu of %llu read)\n",
	       dry_run ? "would erase from" : "erased from", dataset, (unsigned long long)total,
	       total == 1 ? "" : "s", (unsigned long long)r->erased[KILN_SPLIT_TRAIN],
	       (unsigned long long)r->erased[KILN_SPLIT_DEV], (unsigned long long)r->erased[KILN_SPLIT_TEST],
	       (unsigned long long)(r->shards_rewritten + r->shards_dropped),
	       r->shards_rewritten + r->shards_dropped == 1 ? "" : "s",
	       (unsigned long long)r->shards_rewritten, (unsigned long long)r->shards_dropped,
	       (unsigned long long)r->shards_read, (unsigned long long)r->shards);
	printf("raw zone: %llu record%s (%llu object%s rewritten, %llu deleted); quarantine: %llu record%s "
	       "(%llu "
	       "rewritten, %llu deleted)\n",
	       (unsigned long long)r->raw.records, r->raw.records == 1 ? "" : "s",
	       (unsigned long long)r->raw.rewritten, r->raw.rewritten == 1 ? "" : "s",
	       (unsigned long long)r->raw.deleted, (unsigned long long)r->quarantine.records,
	       r->quarantine.records == 1 ? "" : "s", (unsigned long long)r->quarantine.rewritten,
	       (unsigned long long)r->quarantine.deleted);
	for (size_t i = 0; i < r->changed_count; i++)
		printf("shard %.16s (%s): %llu record%s%s\n", r->changed[i].old_hash,
		       kiln_split_name(r->changed[i].split), (unsigned long long)r->changed[i].erased,
		       r->changed[i].erased == 1 ? "" : "s",
		       dry_run                     ? ""
		       : r->changed[i].new_hash[0] ? " erased, rewritten"
		                                   : " erased, dropped");
	for (size_t i = 0; i < r->move_count; i++) {
		const kiln_rewrite_move *mv = &r->moves[i];

		if (dry_run && r->move_erased)
			printf("would rewrite %s (%.12s): train %llu, dev %llu, test %llu\n", mv->ref,
			       mv->old_commit, (unsigned long long)r->move_erased[i][KILN_SPLIT_TRAIN],
			       (unsigned long long)r->move_erased[i][KILN_SPLIT_DEV],
			       (unsigned long long)r->move_erased[i][KILN_SPLIT_TEST]);
		else if (dry_run)
			printf("would rewrite %s (%.12s)\n", mv->ref, mv->old_commit);
		else
			printf("rewrote %s: %.12s -> %.12s%s\n", mv->ref, mv->old_commit, mv->new_commit,
			       mv->tag ? " (tag made again and signed)" : "");
	}
	if (!dry_run)
		printf("erasure %s recorded in the ledger (refs/erasures/%s at %.12s); run `kiln gc --apply` "
		       "to remove "
		       "the superseded objects\n",
		       r->id, dataset, r->ledger_commit);
}

/* ---- verify ------------------------------------------------------------- */

typedef struct verify_ctx {
	kiln_subject *subject;
	uint64_t hits, objects;
	bool json;
	kiln_buf *out;
} verify_ctx;

static int store_hit(void *ctx, const kiln_scan_hit *hit)
{
	verify_ctx *v = ctx;

	v->hits++;
	if (!v->json)
		printf("found: store object %s, record %llu\n", hit->key, (unsigned long long)hit->record);
	return 0;
}

static int git_object(void *ctx, const char *id, const char *type, const void *data, size_t len)
{
	verify_ctx *v = ctx;

	v->objects++;
	if (kiln_subject_in_curated(v->subject, data, len) || kiln_subject_in_raw(v->subject, data, len)) {
		v->hits++;
		if (!v->json)
			printf("found: manifest %s %s\n", type, id);
	}
	return 0;
}

static int git_file(void *ctx, const char *path, const void *data, size_t len)
{
	verify_ctx *v = ctx;

	if (kiln_subject_in_curated(v->subject, data, len) || kiln_subject_in_raw(v->subject, data, len)) {
		v->hits++;
		if (!v->json)
			printf("found: manifest file %s\n", path);
	}
	return 0;
}

static int resolve_contract(void *ctx, const char *text, size_t len)
{
	void **c = ctx;
	kiln_contract *contract = NULL;
	int rc = kiln_contract_load_buffer(&contract, "contract.yaml", text, len, NULL);

	if (rc == 0)
		rc = kiln_subject_resolve(c[0], contract, c[1]);
	kiln_contract_free(contract);
	return rc;
}

static int verify(kiln_run_setup *s, const char *dataset, kiln_subject *subject, bool json)
{
	verify_ctx v = {.subject = subject, .json = json};
	void *rctx[2] = {subject, &s->key};
	uint64_t store_objects = 0;
	int64_t hits;
	kiln_buf b = KILN_BUF_INIT(0);

	if (kiln_rewrite_scan(s->manifest, dataset, NULL, resolve_contract, rctx) < 0 ||
	    kiln_subject_finish(subject, dataset) < 0)
		return kiln_cli_fail("erase", "%s", kiln_error_last());
	if ((hits = kiln_erase_scan_store(s->store, subject, store_hit, &v, &store_objects)) < 0 ||
	    kiln_manifest_each_object(s->manifest, git_object, &v) < 0 ||
	    kiln_manifest_each_file(s->manifest, git_file, &v) < 0)
		return kiln_cli_fail("erase", "%s", kiln_error_last());
	if (json) {
		int rc =
		    kiln_buf_puts(&b, "{\"dataset\":") | kiln_cli_json_string(&b, dataset) |
		    kiln_buf_printf(
		        &b,
		        ",\"verified\":%s,\"found\":%llu,\"store_objects\":%llu,\"manifest_objects\":%llu}",
		        v.hits ? "false" : "true", (unsigned long long)v.hits,
		        (unsigned long long)store_objects, (unsigned long long)v.objects);

		if (kiln_cli_write_buf("erase", &b, rc) != 0) {
			kiln_buf_free(&b);
			return KILN_EXIT_USAGE;
		}
	} else if (v.hits == 0) {
		printf("%s: nothing of the subject found in %llu store objects and %llu manifest objects\n",
		       dataset, (unsigned long long)store_objects, (unsigned long long)v.objects);
	} else {
		printf("%s: the subject was found %llu time%s\n", dataset, (unsigned long long)v.hits,
		       v.hits == 1 ? "" : "s");
	}
	kiln_buf_free(&b);
	return v.hits ? KILN_EXIT_INVALID : KILN_EXIT_OK;
}

/* ---- the command -------------------------------------------------------- */

static int load_subjects(const erase_opts *o, kiln_subject ***out, size_t *n)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	if (!o->subjects_file) {
		if (!(*out = calloc(1, sizeof(**out))))
			return kiln_error_oom("erase");
		(*out)[0] = o->subject;
		*n = 1;
		return 0;
	}
	if ((rc = kiln_secret_read_file(&text, &len, o->subjects_file, "subjects file", 64u << 20)) < 0)
		return rc;
	rc = kiln_subjects_parse(text, len, o->subjects_file, out, n);
	kiln_secret_free(text, len);
	if (rc == 0 && *n == 0)
		rc = kiln_error_set(KILN_EINVALID, "%s: no subject in the file", o->subjects_file);
	return rc;
}

/* The command, named cmd in its messages ("erase", or "trace" for
 * kiln trace --subject, which is the dry run). */
int kiln_cmd_erase_as(const char *cmd, int argc, char **argv)
{
	erase_opts o = {0};
	const kiln_cli_option rows[] = {
	    {.name = "subject", .kind = KILN_CLI_CUSTOM, .out = &o, .parse = add_subject},
	    {.name = "subjects", .kind = KILN_CLI_STRING, .out = &o.subjects_file},
	    {.name = "pipeline", .letter = 'p', .kind = KILN_CLI_STRING, .out = &o.pipeline_path},
	    {.name = "set", .letter = 's', .kind = KILN_CLI_SETS, .out = &o.sets},
	    {.name = "dry-run", .kind = KILN_CLI_FLAG, .out = &o.dry_run},
	    {.name = "verify", .kind = KILN_CLI_FLAG, .out = &o.verify},
	    {.name = "json", .kind = KILN_CLI_FLAG, .out = &o.json},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {
	    .cmd = cmd,
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one DATASET",
	};
	kiln_pipeline *p = NULL;
	kiln_openlineage *ol = NULL;
	kiln_run_setup s = {0};
	kiln_subject **subjects = NULL;
	size_t subject_count = 0;
	const char *dataset;
	int first, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		goto cleanup;
	status = KILN_EXIT_USAGE;
	dataset = argv[first];
	if (!o.pipeline_path) {
		kiln_cli_fail(cmd, "--pipeline FILE is needed: it names the key, the store and the manifest");
		goto cleanup;
	}
	if (!!o.subject == !!o.subjects_file) {
		kiln_cli_fail(cmd,
		              "name the person with --subject FIELD=VALUE (repeatable) or --subjects FILE");
		goto cleanup;
	}
	if (o.verify && o.dry_run) {
		kiln_cli_fail(cmd, "--verify and --dry-run do not go together");
		goto cleanup;
	}
	if (kiln_pipeline_load(&p, o.pipeline_path, o.sets.v, o.sets.n) < 0) {
		kiln_cli_fail(cmd, "%s", kiln_error_last());
		goto cleanup;
	}
	if (strcmp(p->dataset, dataset) != 0) {
		kiln_cli_fail(cmd, "%s: the pipeline %s is for dataset %s", dataset, o.pipeline_path,
		              p->dataset);
		goto cleanup;
	}
	if (p->manifest_remote) {
		/* the next run would fetch the remote's old history back and rebase onto it */
		kiln_cli_fail(
		    cmd,
		    "%s: the pipeline shares its manifest through manifest.remote: erasing a shared "
		    "manifest is not supported yet (docs/ERASURE.md, \"Limits\")",
		    o.pipeline_path);
		goto cleanup;
	}
	s.p = p;
	if (kiln_run_setup_contract(&s) < 0 || kiln_run_setup_keys(&s) < 0 || kiln_run_setup_store(&s) < 0 ||
	    kiln_run_setup_manifest(&s) < 0 || load_subjects(&o, &subjects, &subject_count) < 0) {
		kiln_cli_fail(cmd, "%s", kiln_error_last());
		goto cleanup;
	}
	if (!o.verify && !o.dry_run && kiln_openlineage_open(&ol, p, PACKAGE_VERSION) < 0) {
		kiln_cli_fail(cmd, "%s", kiln_error_last());
		goto cleanup;
	}
	o.subject = NULL; /* owned by subjects now */
	status = KILN_EXIT_OK;
	for (size_t i = 0; i < subject_count && status == KILN_EXIT_OK; i++) {
		kiln_erase_options eo = {.dataset = dataset,
		                         .manifest = s.manifest,
		                         .store = s.store,
		                         .key = &s.key,
		                         .signing_key = p->signing_key_file ? &s.signing_key : NULL,
		                         .subject = subjects[i],
		                         .dry_run = o.dry_run,
		                         .spool_dir = NULL,
		                         .profile_categories_k = p->profile_categories_k};
		kiln_erase_report r;
		kiln_buf b = KILN_BUF_INIT(0);

		if (o.verify) {
			status = verify(&s, dataset, subjects[i], o.json);
			continue;
		}
		kiln_openlineage_begin(ol, "ERASE", false);
		if (kiln_erase(&eo, &r) < 0) {
			status = kiln_cli_fail(cmd, "%s", kiln_error_last());
			kiln_openlineage_fail(ol, kiln_error_last());
			kiln_erase_report_free(&r);
			break;
		}
		if (r.id[0]) /* something held the subject: refs moved */
			kiln_openlineage_erased(ol, dataset, &r);
		else
			kiln_openlineage_erased(ol, dataset, &(kiln_erase_report){0});
		if (o.json)
			status = kiln_cli_write_buf(cmd, &b, report_json(&b, dataset, &r, o.dry_run));
		else
			report_text(dataset, &r, o.dry_run);
		kiln_buf_free(&b);
		kiln_erase_report_free(&r);
	}
cleanup:
	for (size_t i = 0; i < subject_count; i++)
		kiln_subject_free(subjects[i]);
	free(subjects);
	kiln_subject_free(o.subject);
	kiln_openlineage_close(ol);
	kiln_run_setup_close(&s);
	kiln_pipeline_free(p);
	free(o.sets.v);
	return status;
}

int kiln_cmd_erase(int argc, char **argv)
{
	return kiln_cmd_erase_as("erase", argc, argv);
}
