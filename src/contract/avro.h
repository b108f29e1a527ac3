/* Avro schemas and Avro binary records (docs/STREAMING.md, "Avro"):
 * a schema's JSON is checked by avro-c (the chosen dependency parses and
 * resolves it) and compiled into a small tree of its own that keeps what
 * avro-c 1.11 drops (logical types, precision, scale); a record's bytes are
 * decoded by walking that tree with a reader that bounds every length,
 * count and depth against the bytes left and the output allowed, so
 * hostile bytes cost at most the record limit. */
#ifndef KILN_CONTRACT_AVRO_H
#define KILN_CONTRACT_AVRO_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/reject.h"

typedef enum kiln_avro_type {
	KILN_AVRO_NULL,
	KILN_AVRO_BOOLEAN,
	KILN_AVRO_INT,
	KILN_AVRO_LONG,
	KILN_AVRO_FLOAT,
	KILN_AVRO_DOUBLE,
	KILN_AVRO_BYTES,
	KILN_AVRO_STRING,
	KILN_AVRO_RECORD,
	KILN_AVRO_ENUM,
	KILN_AVRO_ARRAY,
	KILN_AVRO_MAP,
	KILN_AVRO_UNION,
	KILN_AVRO_FIXED,
} kiln_avro_type;

typedef enum kiln_avro_logical {
	KILN_AVRO_PLAIN, /* none, or one kiln does not know (the underlying type's form) */
	KILN_AVRO_DATE,
	KILN_AVRO_TIME_MILLIS,
	KILN_AVRO_TIME_MICROS,
	KILN_AVRO_TIMESTAMP_MILLIS,
	KILN_AVRO_TIMESTAMP_MICROS,
	KILN_AVRO_DECIMAL,
	KILN_AVRO_UUID,
} kiln_avro_logical;

typedef struct kiln_avro_node kiln_avro_node;
struct kiln_avro_node {
	kiln_avro_type type;
	kiln_avro_logical logical;
	int precision, scale; /* KILN_AVRO_DECIMAL */
	int64_t size;         /* KILN_AVRO_FIXED: its bytes */
	const char *name;     /* a named type's full name, else NULL */
	const char *doc;      /* its "doc", or NULL */
	/* RECORD: fields (names[i], children[i]); ENUM: symbols (names[i]);
	 * UNION: branches (children[i]); ARRAY: items, MAP: values (children[0]) */
	size_t count;
	const char **names;
	kiln_avro_node **children;
};

typedef struct kiln_avro_schema kiln_avro_schema;

/* Compiles a schema's JSON text (name names it in messages: a file or
 * "schema id 7"). KILN_EINVALID with a one-line error (file:line:col and
 * the key path, or avro-c's message) when it is not a valid Avro schema. */
int kiln_avro_schema_parse(kiln_avro_schema **out, const char *name, const char *json, size_t len);
int kiln_avro_schema_load_file(kiln_avro_schema **out, const char *path);
const kiln_avro_node *kiln_avro_schema_root(const kiln_avro_schema *s);
void kiln_avro_schema_free(kiln_avro_schema *s);

/* Decoder bounds: output (JSON bytes) and nesting. */
#define KILN_AVRO_MAX_DEPTH          64
#define KILN_AVRO_DECIMAL_MAX_BYTES  64  /* a decimal's unscaled value: at most 155 digits */
#define KILN_AVRO_DECIMAL_MAX_DIGITS 200 /* a schema's decimal precision (and so scale) */

/* Why a record did not decode: the reject code (KILN_REJECT_AVRO_DECODE,
 * KILN_REJECT_NOT_FINITE, KILN_REJECT_TOO_LARGE), the field path ("$",
 * "items[3].price") and what was wrong (no value from the record in it). */
typedef struct kiln_avro_error {
	kiln_reject code;
	size_t offset;
	char path[256];
	const char *what; /* static */
} kiln_avro_error;

/* Decodes one Avro binary datum of schema root (all of data[0..len), no
 * byte left over) into JSON appended to out (docs/STREAMING.md's mapping),
 * writing at most max_out bytes. 0, or KILN_EINVALID with *err filled (out
 * then holds a part: the caller resets it); KILN_ENOMEM. */
int kiln_avro_decode(const kiln_avro_node *root, const unsigned char *data, size_t len, size_t max_out,
                     kiln_buf *out, kiln_avro_error *err);

/* `kiln contract infer --avro`: the ODCS v3 contract (YAML) for records of
 * schema root (a record), named name, appended to out (docs/CONTRACTS.md,
 * "Inferring a contract from an Avro schema"). KILN_EINVALID when the root
 * is not a record. */
int kiln_infer_avro(const kiln_avro_node *root, const char *name, kiln_buf *out);

#endif
