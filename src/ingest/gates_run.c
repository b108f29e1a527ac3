/* Every release gate of a pipeline against one version (gates_run.h): the
 * orchestration `kiln promote` and `kiln report` share. The gates
 * themselves are gates.c's; this file finds what they compare with (the
 * baseline's profile, the last vN's contract, the pipeline's rules). */
#include "ingest/gates_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/compat.h"
#include "contract/quality.h"
#include "core/buf.h"
#include "core/error.h"
#include "quality/profile.h"

/* The error set, with prefix before its message; returns its code. */
static int wrap(const char *prefix)
{
	char msg[1024];
	int code = kiln_error_last_code();

	snprintf(msg, sizeof(msg), "%s", kiln_error_last());
	return kiln_error_set(code < 0 ? code : KILN_EINVALID, "%s%s", prefix, msg);
}

/* The version's profile for a gate: read and checked by
 * kiln_version_profile, and whole (its records all that stats.json counts
 * valid: a branch with commits made with profile.enabled: false has a
 * profile of part of its records only). 1, or <= 0 with the error set. */
static int gate_profile(kiln_manifest *m, const kiln_version *v, const char *spec, kiln_profile *out)
{
	kiln_buf text = KILN_BUF_INIT(0);
	kiln_stats stats;
	int rc;

	if ((rc = kiln_version_profile(m, v, spec, out, NULL)) <= 0)
		return rc;
	if ((rc = kiln_version_read(m, v, "stats.json", &text)) >= 0 &&
	    (rc = kiln_stats_parse(text.ptr, text.len, spec, &stats)) == 0 && out->records != stats.valid)
		rc =
		    kiln_error_set(KILN_EINVALID,
		                   "%s: its profile covers %llu of its %llu valid records (commits made with "
		                   "profile.enabled: false): a gate needs a profile of every record",
		                   spec, (unsigned long long)out->records, (unsigned long long)stats.valid);
	kiln_buf_free(&text);
	if (rc < 0) {
		kiln_profile_free(out);
		return rc;
	}
	return 1;
}

/* The drift gate's result into *out: the version's profile against the
 * baseline's (the highest vN, or the one the pipeline names). */
static int drift_gate(const kiln_pipeline *p, kiln_manifest *m, const kiln_version *v, const char *spec,
                      kiln_gate_result *out)
{
	kiln_profile now = {0}, base = {0};
	kiln_version bv;
	char base_name[40], base_spec[300];
	int have_base = 1, rc = -1;

	if (strcmp(p->gates.drift_baseline, "previous") == 0) {
		if ((have_base = kiln_promote_last_version(base_name, m, v->dataset)) < 0)
			goto fail;
	} else {
		snprintf(base_name, sizeof(base_name), "%s", p->gates.drift_baseline);
	}
	if (gate_profile(m, v, spec, &now) <= 0)
		goto fail;
	if (have_base) {
		snprintf(base_spec, sizeof(base_spec), "%s@%s", v->dataset, base_name);
		if (kiln_version_resolve(m, base_spec, &bv) < 0 ||
		    gate_profile(m, &bv, base_spec, &base) <= 0)
			goto fail;
	}
	if (kiln_gates_drift(&p->gates, have_base ? &base : NULL, base_name, &now, out) < 0)
		goto fail;
	rc = 0;
	goto done;
fail:
	rc = wrap("drift gate: ");
done:
	kiln_profile_free(&now);
	kiln_profile_free(&base);
	return rc;
}

/* The quality rules of the pipeline's contract; when it has any, it must
 * be the contract the version was curated under (its digest in
 * dataset.json). The rules point into *contract (free it after them). */
static int load_rules(const kiln_pipeline *p, const kiln_promote_inputs *in, const char *spec,
                      kiln_contract **contract, kiln_quality_rules *out)
{
	kiln_contract_options copt = {.schema = p->schema};
	char digest[80];
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = kiln_contract_load(contract, p->contract, &copt)) < 0 ||
	    (rc = kiln_quality_rules_load(out, *contract)) < 0)
		return rc;
	snprintf(digest, sizeof(digest), "blake2b-256:%s", (*contract)->digest_hex);
	if (out->count &&
	    (!in->definition.contract_digest || strcmp(in->definition.contract_digest, digest) != 0))
		return kiln_error_set(
		    KILN_EINVALID,
		    "%s: the pipeline's contract %s (%s) is not the one the version was curated under (%s): "
		    "its quality rules would not be the version's",
		    spec, p->contract, digest,
		    in->definition.contract_digest ? in->definition.contract_digest : "unknown");
	return 0;
}

/* The contract_compatible gate: the version's contract.yaml against the
 * highest vN's; a breaking change fails it (contract/compat.h). */
static int compat_gate(const kiln_pipeline *p, kiln_manifest *m, const kiln_version *v, const char *spec,
                       kiln_gate_result *out)
{
	kiln_buf a = KILN_BUF_INIT(0), b = KILN_BUF_INIT(0), list = KILN_BUF_INIT(0);
	kiln_contract *old = NULL, *now = NULL;
	kiln_contract_compat *diff = NULL;
	kiln_version bv;
	kiln_contract_options copts = {.schema = p->schema};
	char base_name[32], base_spec[300];
	int rc = -1, found;

	if ((found = kiln_promote_last_version(base_name, m, v->dataset)) < 0)
		goto fail;
	if (!found) {
		out->pass = true;
		snprintf(out->line, sizeof(out->line),
		         "contract_compatible: no promoted version to compare with: pass");
		return 0;
	}
	snprintf(base_spec, sizeof(base_spec), "%s@%s", v->dataset, base_name);
	if (kiln_version_resolve(m, base_spec, &bv) < 0 ||
	    (found = kiln_version_read(m, &bv, "contract.yaml", &a)) < 0 ||
	    (found && (found = kiln_version_read(m, v, "contract.yaml", &b)) < 0))
		goto fail;
	if (!found) {
		kiln_error_set(KILN_ENOTFOUND,
		               "%s or %s has no contract.yaml (made before kiln kept the contract)", spec,
		               base_spec);
		goto fail;
	}
	if (kiln_contract_load_buffer(&old, base_spec, a.ptr, a.len, &copts) < 0 ||
	    kiln_contract_load_buffer(&now, spec, b.ptr, b.len, &copts) < 0 ||
	    kiln_contract_compat_diff(&diff, old, now) < 0)
		goto fail;
	if (kiln_contract_compat_breaking_list(&list, diff, 4) < 0)
		goto fail;
	out->pass = diff->breaking == 0;
	if (out->pass)
		snprintf(out->line, sizeof(out->line),
		         "contract_compatible with %s: %zu changes, none breaking: pass", base_name,
		         diff->count);
	else
		snprintf(out->line, sizeof(out->line),
		         "contract_compatible with %s: %zu of %zu changes breaking (%s): FAIL", base_name,
		         diff->breaking, diff->count, list.ptr);
	rc = 0;
	goto done;
fail:
	rc = wrap("contract_compatible gate: ");
done:
	kiln_contract_compat_free(diff);
	kiln_contract_free(old);
	kiln_contract_free(now);
	kiln_buf_free(&a);
	kiln_buf_free(&b);
	kiln_buf_free(&list);
	return rc;
}

int kiln_gates_run(kiln_gate_result **out, size_t *out_n, const kiln_pipeline *p, kiln_manifest *m,
                   const kiln_version *v, const kiln_promote_inputs *in, const char *spec)
{
	kiln_quality_rules rules = {0};
	kiln_contract *contract = NULL;
	kiln_gate_result *results = NULL;
	int n, rc;

	*out = NULL;
	*out_n = 0;
	if ((rc = load_rules(p, in, spec, &contract, &rules)) < 0)
		goto done;
	if (!(results = calloc(KILN_GATES_MAX + rules.count, sizeof(*results)))) {
		rc = kiln_error_oom(NULL);
		goto done;
	}
	if ((n = kiln_gates_check(&p->gates, &in->stats, &in->definition, results)) < 0) {
		char msg[1024];

		snprintf(msg, sizeof(msg), "%s", kiln_error_last());
		rc = kiln_error_set(n, "%s: %s", spec, msg);
		goto done;
	}
	if (p->gates.contract_compatible) {
		if ((rc = compat_gate(p, m, v, spec, &results[n])) < 0)
			goto done;
		n++;
	}
	if (p->gates.drift) {
		if ((rc = drift_gate(p, m, v, spec, &results[n])) < 0)
			goto done;
		n++;
	}
	if (rules.count) {
		kiln_profile profile = {0};
		int q = -1;

		if (gate_profile(m, v, spec, &profile) > 0)
			q = kiln_gates_quality(&rules, &profile, &in->stats, &results[n]);
		kiln_profile_free(&profile);
		if (q < 0) {
			rc = wrap("quality rules: ");
			goto done;
		}
		n += q;
	}
	*out = results;
	*out_n = (size_t)n;
	results = NULL;
	rc = 0;
done:
	free(results);
	kiln_quality_rules_free(&rules);
	kiln_contract_free(contract);
	return rc;
}
