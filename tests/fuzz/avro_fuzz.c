/* libFuzzer target for the Avro decoder and schema compiler
 * (src/contract/avro_schema.c, avro_decode.c) on hostile bytes. The first
 * byte picks what the rest is: 's' a schema's JSON (a registry's answer:
 * compiled, then a few fixed datums decoded with it), anything else a datum
 * decoded with one of three schemas (every type, a recursive record, an
 * array of maps of nulls). Aborts when a decode succeeds with output that
 * is not one strict JSON value (a map's repeated key aside), when an error has no code or path, or when the
 * output passes its bound. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "contract/avro.h"
#include "core/error.h"
#include "core/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* avro-c 1.11 leaks what it allocated for some schemas it refuses (its
 * avro_schema_enum_ns and avro_schema_fixed_ns error paths): its own, at
 * most once per refused schema (kiln refuses the registry's answer and
 * stops); LeakSanitizer is told so in a sanitizer build, nothing else is
 * suppressed. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libavro.so\n";
}

#define MAX_OUT 8192

static const char *const schemas[] = {
    "{\"type\":\"record\",\"name\":\"Ev\",\"fields\":["
    "{\"name\":\"b\",\"type\":\"boolean\"},{\"name\":\"i\",\"type\":\"int\"},{\"name\":\"l\",\"type\":"
    "\"long\"},"
    "{\"name\":\"f\",\"type\":\"float\"},{\"name\":\"d\",\"type\":\"double\"},{\"name\":\"by\",\"type\":"
    "\"bytes\"},"
    "{\"name\":\"s\",\"type\":\"string\"},"
    "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"C\",\"symbols\":[\"A\",\"B\"]}},"
    "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":\"long\"}},"
    "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":[\"null\",\"string\"]}},"
    "{\"name\":\"fx\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"size\":3}},"
    "{\"name\":\"dt\",\"type\":{\"type\":\"int\",\"logicalType\":\"date\"}},"
    "{\"name\":\"tm\",\"type\":{\"type\":\"int\",\"logicalType\":\"time-millis\"}},"
    "{\"name\":\"ts\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}},"
    "{\"name\":\"dec\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":30,\"scale\":3}"
    "},"
    "{\"name\":\"id\",\"type\":{\"type\":\"string\",\"logicalType\":\"uuid\"}}]}",
    "{\"type\":\"record\",\"name\":\"N\",\"fields\":[{\"name\":\"v\",\"type\":\"long\"},"
    "{\"name\":\"next\",\"type\":[\"null\",\"N\"]}]}",
    "{\"type\":\"array\",\"items\":{\"type\":\"map\",\"values\":\"null\"}}",
};

static void check(const kiln_avro_node *root, const uint8_t *data, size_t size)
{
	kiln_buf out = {0};
	kiln_avro_error err;
	int rc = kiln_avro_decode(root, data, size, MAX_OUT, &out, &err);

	if (out.len > MAX_OUT)
		abort();
	if (rc == 0) {
		kiln_json_scanner *sc = kiln_json_scanner_new(NULL);
		if (!sc)
			abort();
		/* a map's keys may repeat in Avro's bytes: the validator then
		 * rejects the record as duplicate_key, like any JSON record */
		kiln_reject r = kiln_json_check(sc, out.ptr ? out.ptr : "", out.len);
		if (r != KILN_REJECT_NONE && r != KILN_REJECT_DUPLICATE_KEY)
			abort();
		kiln_json_scanner_free(sc);
	} else if (rc == KILN_EINVALID) {
		if (err.code == KILN_REJECT_NONE || !err.path[0] || !err.what || err.offset > size)
			abort();
	}
	kiln_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static kiln_avro_schema *fixed[3];
	kiln_avro_schema *s;

	if (size == 0)
		return 0;
	if (data[0] == 's') {
		static const uint8_t datums[][6] = {{0}, {2, 4, 6, 0}, {1, 1, 1, 1, 1, 1}};
		if (kiln_avro_schema_parse(&s, "fuzz", (const char *)data + 1, size - 1) == 0) {
			for (size_t i = 0; i < sizeof(datums) / sizeof(datums[0]); i++)
				check(kiln_avro_schema_root(s), datums[i], sizeof(datums[i]));
			kiln_avro_schema_free(s);
		}
		return 0;
	}
	unsigned k = data[0] % 3;
	if (!fixed[k] && kiln_avro_schema_parse(&fixed[k], "fixed", schemas[k], strlen(schemas[k])) < 0)
		abort();
	check(kiln_avro_schema_root(fixed[k]), data + 1, size - 1);
	return 0;
}
