/* libFuzzer target for src/erase/subject.c: the input is parsed as a
 * --subjects file (errors are one line naming the file, never a crash),
 * then searched as the bytes of a record as it arrived against a fixed
 * subject resolved under a fixed contract and key (the tolerant literal
 * scan, the detectors and the byte search see hostile bytes: not JSON, not
 * UTF-8, cut short, escapes half written). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "core/error.h"
#include "erase/subject.h"
#include "mask/key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char contract_yaml[] = "apiVersion: v3.1.0\n"
                                    "kind: DataContract\n"
                                    "id: fuzz\n"
                                    "name: Fuzz\n"
                                    "version: 1.0.0\n"
                                    "status: active\n"
                                    "schema:\n"
                                    "  - name: rec\n"
                                    "    logicalType: object\n"
                                    "    properties:\n"
                                    "      - name: customer_id\n"
                                    "        logicalType: string\n"
                                    "        classification: pii\n"
                                    "      - name: email\n"
                                    "        logicalType: string\n"
                                    "        classification: pii\n"
                                    "        logicalTypeOptions:\n"
                                    "          format: email\n"
                                    "        customProperties:\n"
                                    "          - property: pseudonymisation\n"
                                    "            value: keep-domain\n"
                                    "      - name: note\n"
                                    "        logicalType: string\n"
                                    "        customProperties:\n"
                                    "          - property: piiScan\n"
                                    "            value: true\n";

static kiln_subject *fixed_subject(void)
{
	static kiln_subject *s;
	kiln_contract *contract;
	unsigned char bytes[32];
	kiln_key key;

	if (s)
		return s;
	for (int i = 0; i < 32; i++)
		bytes[i] = (unsigned char)i;
	kiln_key_init(&key, bytes, 1);
	if (kiln_contract_load_buffer(&contract, "fuzz.yaml", contract_yaml, strlen(contract_yaml), NULL) <
	        0 ||
	    kiln_subject_new(&s) < 0 || kiln_subject_add(s, "customer_id=C-1001", "fuzz") < 0 ||
	    kiln_subject_add(s, "email=Alice@Example.com", "fuzz") < 0 ||
	    kiln_subject_add(s, "p1_ywd2osczrl6czew7p66qqreiuy", "fuzz") < 0 ||
	    kiln_subject_resolve(s, contract, &key) < 0 || kiln_subject_finish(s, "fuzz") < 0)
		abort();
	kiln_contract_free(contract);
	kiln_key_wipe(&key);
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kiln_subject **v = NULL;
	size_t n = 0;
	int rc = kiln_subjects_parse((const char *)data, size, "fuzz.txt", &v, &n);

	if (rc == 0) {
		if (!n || !v)
			abort();
		for (size_t i = 0; i < n; i++) {
			kiln_subject_token_count(v[i]);
			kiln_subject_free(v[i]);
		}
		free(v);
	} else if (rc != KILN_EINVALID || strncmp(kiln_error_last(), "fuzz.txt", 8) != 0 ||
	           strchr(kiln_error_last(), '\n')) {
		abort();
	}
	kiln_subject_in_raw(fixed_subject(), data, size);
	kiln_subject_in_curated(fixed_subject(), (const char *)data, size);
	return 0;
}
