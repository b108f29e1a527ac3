/* Release gates (see gates.h). */
#include "ingest/gates.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"

void kiln_gates_init(kiln_gates *g)
{
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		g->min_records[i] = -1;
	g->ratio_tolerance = -1;
	g->max_quarantine_rate = -1;
	g->contract_version = NULL;
}

/* "1.x" matches 1.anything, "1.2.x" matches 1.2.anything, else exact. */
static bool version_matches(const char *pattern, const char *version, size_t vlen)
{
	size_t plen = strlen(pattern);

	if (plen >= 2 && strcmp(pattern + plen - 2, ".x") == 0)
		return vlen >= plen - 1 && memcmp(version, pattern, plen - 1) == 0;
	return plen == vlen && memcmp(version, pattern, vlen) == 0;
}

int kiln_gates_check(const kiln_gates *g, const kiln_stats *st, const char *text, size_t len,
		     kiln_gate_result *out)
{
	kiln_json_scanner *scanner = kiln_json_scanner_new(NULL);
	kiln_json_token t;
	int n = 0, rc = 0;

	if (!scanner)
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		if (g->min_records[i] < 0)
			continue;
		kiln_gate_result *r = &out[n++];
		r->pass = st->splits[i].records >= (uint64_t)g->min_records[i];
		snprintf(r->line, sizeof(r->line), "min_records %s: %llu >= %lld: %s", kiln_split_name(i),
			 (unsigned long long)st->splits[i].records, (long long)g->min_records[i],
			 r->pass ? "pass" : "FAIL");
	}
	if (g->ratio_tolerance >= 0) {
		kiln_gate_result *r = &out[n++];
		double worst = 0;
		int worst_split = 0;
		r->pass = st->valid > 0;
		for (int i = 0; i < KILN_SPLIT_COUNT && st->valid; i++) {
			char path[64];
			double want;
			snprintf(path, sizeof(path), "split.ratios.%s", kiln_split_name(i));
			if (kiln_json_lookup(scanner, text, len, path, &t) != 1 || t.type != KILN_JSON_NUMBER) {
				rc = kiln_error_set(KILN_EINVALID, "dataset.json has no %s", path);
				goto done;
			}
			want = strtod(t.ptr, NULL);
			double share = (double)st->splits[i].records / (double)st->valid;
			if (fabs(share - want) > worst) {
				worst = fabs(share - want);
				worst_split = i;
			}
		}
		r->pass = r->pass && worst <= g->ratio_tolerance;
		snprintf(r->line, sizeof(r->line), "ratio_tolerance: largest deviation %.4f (%s) <= %.4f: %s", worst,
			 kiln_split_name(worst_split), g->ratio_tolerance, r->pass ? "pass" : "FAIL");
	}
	if (g->max_quarantine_rate >= 0) {
		kiln_gate_result *r = &out[n++];
		double rate = st->records_in ? (double)st->quarantined / (double)st->records_in : 0;
		r->pass = rate <= g->max_quarantine_rate;
		snprintf(r->line, sizeof(r->line), "max_quarantine_rate: %.4f (%llu of %llu) <= %.4f: %s", rate,
			 (unsigned long long)st->quarantined, (unsigned long long)st->records_in,
			 g->max_quarantine_rate, r->pass ? "pass" : "FAIL");
	}
	if (g->contract_version) {
		kiln_gate_result *r = &out[n++];
		if (kiln_json_lookup(scanner, text, len, "contract.version", &t) != 1 || t.type != KILN_JSON_STRING) {
			rc = kiln_error_set(KILN_EINVALID, "dataset.json has no contract.version");
			goto done;
		}
		r->pass = version_matches(g->contract_version, t.ptr, t.len);
		snprintf(r->line, sizeof(r->line), "contract_version: %.*s matches %s: %s", (int)(t.len > 64 ? 64 : t.len),
			 t.ptr, g->contract_version, r->pass ? "pass" : "FAIL");
	}
done:
	kiln_json_scanner_free(scanner);
	return rc < 0 ? rc : n;
}
