/* Promoting a version: the governance record's inputs read from the
 * version's tree, the next version name from the dataset's tags, and the
 * kiln.signed policy recorded in the repository's config. Owns nothing
 * beyond a call; the repository is the manifest's. */
#include "manifest/promote.h"

#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "manifest/internal.h"

static int read_files(kiln_promote_inputs *out, kiln_manifest *m, const kiln_version *v, const char *spec,
                      kiln_json_scanner *scanner, kiln_buf *stats, kiln_buf *dataset, kiln_buf *lineage)
{
	char where[300];

	snprintf(where, sizeof(where), "manifest: %s:dataset.json", spec);
	if (kiln_version_read(m, v, "stats.json", stats) != 1 ||
	    kiln_version_read(m, v, "dataset.json", dataset) != 1 ||
	    kiln_version_read(m, v, "lineage.json", lineage) < 0 ||
	    kiln_stats_parse(stats->ptr, stats->len, spec, &out->stats) < 0 ||
	    kiln_mfmt_dataset_parse(scanner, where, dataset->ptr, dataset->len, &out->definition) < 0) {
		if (*kiln_error_last())
			return kiln_error_last_code() < 0 ? kiln_error_last_code() : KILN_EINVALID;
		return kiln_error_set(KILN_ENOTFOUND, "stats.json or dataset.json is missing");
	}
	snprintf(where, sizeof(where), "manifest: %s:lineage.json", spec);
	if (lineage->len &&
	    kiln_mfmt_lineage_parse(scanner, where, lineage->ptr, lineage->len, &out->lineage) < 0)
		return kiln_error_last_code() < 0 ? kiln_error_last_code() : KILN_EINVALID;
	return 0;
}

int kiln_promote_inputs_read(kiln_promote_inputs *out, kiln_manifest *manifest, const kiln_version *version,
                             const char *spec)
{
	kiln_buf stats = KILN_BUF_INIT(0), dataset = KILN_BUF_INIT(0), lineage = KILN_BUF_INIT(0);
	kiln_json_scanner *scanner = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!(scanner = kiln_json_scanner_new(NULL)))
		return kiln_error_oom(NULL);
	rc = read_files(out, manifest, version, spec, scanner, &stats, &dataset, &lineage);
	kiln_json_scanner_free(scanner);
	kiln_buf_free(&stats);
	kiln_buf_free(&dataset);
	kiln_buf_free(&lineage);
	return rc;
}

void kiln_promote_inputs_free(kiln_promote_inputs *inputs)
{
	if (!inputs)
		return;
	kiln_mfmt_dataset_free(&inputs->definition);
	kiln_mfmt_lineage_free(&inputs->lineage);
}

bool kiln_promote_version_name_ok(const char *s)
{
	if (s[0] != 'v' || s[1] < '1' || s[1] > '9')
		return false;
	for (s += 2; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

int kiln_promote_next_version(char out[32], kiln_manifest *m, const char *dataset)
{
	git_reference_iterator *it = NULL;
	char glob[200];
	const char *name;
	unsigned long max = 0;
	int gerr;

	snprintf(glob, sizeof(glob), "refs/tags/%s/v*", dataset);
	if ((gerr = git_reference_iterator_glob_new(&it, kiln_manifest_repo(m), glob)) < 0)
		return kiln_manifest_git_fail(m, gerr, glob);
	while (git_reference_next_name(&name, it) == 0) {
		const char *v = strrchr(name, '/') + 1;
		if (kiln_promote_version_name_ok(v)) {
			unsigned long n = strtoul(v + 1, NULL, 10);
			if (n > max)
				max = n;
		}
	}
	git_reference_iterator_free(it);
	snprintf(out, 32, "v%lu", max + 1);
	return 0;
}

int kiln_promote_last_version(char out[32], kiln_manifest *m, const char *dataset)
{
	char next[32];
	int rc = kiln_promote_next_version(next, m, dataset);

	if (rc < 0)
		return rc;
	snprintf(out, 32, "v%lu", strtoul(next + 1, NULL, 10) - 1);
	return strcmp(next, "v1") != 0;
}

int kiln_promote_mark_signed(kiln_manifest *m)
{
	git_config *cfg = NULL, *snap = NULL;
	const char *value = NULL;
	int gerr;

	if ((gerr = git_repository_config(&cfg, kiln_manifest_repo(m))) < 0 ||
	    (gerr = git_config_snapshot(&snap, cfg)) < 0)
		goto cleanup;
	gerr = git_config_get_string(&value, snap, KILN_VERSION_SIGNED_KEY);
	if (gerr == 0 && (strcasecmp(value, "all") == 0 || strcasecmp(value, "true") == 0))
		goto cleanup;
	gerr = git_config_set_string(cfg, KILN_VERSION_SIGNED_KEY, "tags");
cleanup:
	git_config_free(snap);
	git_config_free(cfg);
	return gerr < 0 ? kiln_manifest_git_fail(m, gerr, KILN_VERSION_SIGNED_KEY) : 0;
}
