/* libFuzzer target for contract inference (kiln contract infer): every
 * input is a sample, one record per line, fed to kiln_infer_add with kiln's
 * PII detectors (lines it refuses must leave no trace). Checks that the
 * contract rendered for the accepted lines loads, that every accepted line
 * is valid against it, and that no string a detector flags (a personal
 * value) appears in it as a scalar. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "contract/infer.h"
#include "contract/validate.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "mask/detect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kiln_detector *detector;
static kiln_json_scanner *scanner;

static int detect(void *ctx, const char *s, size_t len)
{
	kiln_detect_match m[2];
	size_t n = kiln_detect(ctx, s, len, m, 2);

	if (n == SIZE_MAX)
		return KILN_INFER_DETECT_INSIDE;
	if (n == 0)
		return KILN_INFER_DETECT_NONE;
	return n == 1 && m[0].start == 0 && m[0].len == len ? KILN_INFER_DETECT_WHOLE
	                                                    : KILN_INFER_DETECT_INSIDE;
}

/* true when s[0..n) is a whole scalar of the YAML (plain or quoted, in a
 * flow list or not), not a part of a longer one. */
static bool holds_scalar(const kiln_buf *yaml, const char *s, size_t n)
{
	const char *end = yaml->ptr + yaml->len;

	for (const char *p = yaml->ptr; p < end; p++) {
		const char *hit = memmem(p, (size_t)(end - p), s, n);
		if (!hit)
			return false;
		char before = hit > yaml->ptr ? hit[-1] : ' ', after = hit + n < end ? hit[n] : '\n';
		if (strchr(" \"[", before) && strchr("\",]\n", after))
			return true;
		p = hit;
	}
	return false;
}

/* Aborts when a string of the record that a detector flags (6 bytes or
 * more, so that a short one matching a field name by chance is not taken
 * for a leak) appears in the contract text. */
static void check_no_personal_value(const char *rec, size_t len, const kiln_buf *yaml)
{
	kiln_json_token t;
	char buf[4096];

	kiln_json_scanner_reset(scanner, rec, len);
	while (kiln_json_next(scanner, &t) == 1) {
		if (t.type != KILN_JSON_STRING && t.type != KILN_JSON_KEY)
			continue;
		if (t.len >= sizeof(buf))
			continue;
		size_t n = kiln_json_unescape(buf, sizeof(buf), &t);
		if (n == (size_t)-1 || n < 6 || detect(detector, buf, n) == KILN_INFER_DETECT_NONE)
			continue;
		if (holds_scalar(yaml, buf, n)) {
			fprintf(stderr, "a flagged value is in the contract:\n%.*s\n", (int)yaml->len,
			        yaml->ptr);
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	kiln_infer *in = NULL;
	kiln_contract *k = NULL;
	kiln_validator *v = NULL;
	kiln_buf yaml = KILN_BUF_INIT(0);
	size_t accepted[64][2], naccepted = 0;

	if (!detector && kiln_detector_new(&detector) < 0)
		abort();
	if (!scanner && !(scanner = kiln_json_scanner_new(NULL)))
		abort();
	if (kiln_infer_new(&in, &(kiln_infer_options){.name = "fuzz",
	                                              .classify_pii = size % 2 == 0,
	                                              .detect = detect,
	                                              .detect_ctx = detector,
	                                              .max_enum = 4}) < 0)
		abort();
	for (size_t at = 0, line = 1; at < size && naccepted < 64; line++) {
		const char *nl = memchr(text + at, '\n', size - at);
		size_t len = nl ? (size_t)(nl - (text + at)) : size - at;

		if (kiln_infer_add(in, text + at, len, "fuzz", line) == 0) {
			accepted[naccepted][0] = at;
			accepted[naccepted++][1] = len;
		} else if (kiln_error_last_code() != KILN_EINVALID) {
			abort();
		}
		at += len + 1;
	}
	if (naccepted == 0) {
		if (kiln_infer_render(in, &yaml) != KILN_EINVALID)
			abort();
		goto done;
	}
	if (kiln_infer_render(in, &yaml) < 0)
		abort();
	if (kiln_contract_load_buffer(&k, "fuzz.yaml", yaml.ptr, yaml.len, NULL) < 0) {
		fprintf(stderr, "%s\n%.*s\n", kiln_error_last(), (int)yaml.len, yaml.ptr);
		abort();
	}
	if (!(v = kiln_validator_new(k, &(kiln_validator_options){.unknown_fields = -1})))
		abort();
	for (size_t i = 0; i < naccepted; i++) {
		kiln_report r;
		if (kiln_validate(v, text + accepted[i][0], accepted[i][1], &r) != 0) {
			fprintf(stderr, "record %zu: %s at %s\n%.*s\n", i, kiln_reject_name(r.v[0].code),
			        r.v[0].path, (int)yaml.len, yaml.ptr);
			abort();
		}
		check_no_personal_value(text + accepted[i][0], accepted[i][1], &yaml);
	}
done:
	kiln_validator_free(v);
	kiln_contract_free(k);
	kiln_infer_free(in);
	kiln_buf_free(&yaml);
	return 0;
}
