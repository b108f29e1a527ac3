/* The ODCS v3 `quality` rules of a contract's schema object and its
 * properties: the library metrics kiln evaluates against a version's
 * profile (rowCount, nullValues, missingValues, invalidValues,
 * duplicateValues) with their threshold (mustBe, mustNotBe,
 * mustBeGreaterThan, mustBeGreaterOrEqualTo, mustBeLessThan,
 * mustBeLessOrEqualTo, mustBeBetween, mustNotBeBetween) and unit (rows or
 * percent), and the rules of other types (text, sql, custom), kept to be
 * reported as not run (never as passed). A rule with a key ODCS does not
 * define, another type, no metric (type library being the default) or a
 * threshold beyond a double is refused with its file, line and column. docs/QUALITY.md says how each metric
 * is computed. */
#ifndef KILN_CONTRACT_QUALITY_H
#define KILN_CONTRACT_QUALITY_H

#include <stdbool.h>
#include <stddef.h>

#include "contract/contract.h"

typedef enum kiln_quality_metric {
	KILN_QM_NONE = 0, /* a text, sql or custom rule: not run */
	KILN_QM_ROW_COUNT,
	KILN_QM_NULL_VALUES,
	KILN_QM_MISSING_VALUES,
	KILN_QM_INVALID_VALUES,
	KILN_QM_DUPLICATE_VALUES,
} kiln_quality_metric;

typedef enum kiln_quality_op {
	KILN_QOP_EQ = 0,
	KILN_QOP_NE,
	KILN_QOP_GT,
	KILN_QOP_GE,
	KILN_QOP_LT,
	KILN_QOP_LE,
	KILN_QOP_BETWEEN,
	KILN_QOP_NOT_BETWEEN,
} kiln_quality_op;

/* A value of an `arguments` list (missingValues, validValues): NULL text
 * for YAML null. */
typedef struct kiln_quality_value {
	const char *text;
	size_t len;
} kiln_quality_value;

typedef struct kiln_quality_rule {
	const char *id;          /* the rule's id, or "" */
	const char *type;        /* "library", "text", "sql", "custom", ... */
	const char *path;        /* the property's field path, "" for the schema object */
	const kiln_field *field; /* NULL for the schema object */
	kiln_quality_metric metric;
	const char *metric_name; /* as written */
	kiln_quality_op op;
	const char *op_name;                               /* "mustBe", ... */
	double a, b;                                       /* threshold (b: the upper end of a range) */
	bool percent;                                      /* unit: percent (else rows) */
	kiln_quality_value *missing_values, *valid_values; /* arguments */
	size_t missing_count, valid_count;
	bool has_missing, has_valid, has_other_arguments;
	const char *file; /* the contract's, for messages */
	unsigned line, column;
} kiln_quality_rule;

typedef struct kiln_quality_rules {
	kiln_quality_rule *v;
	size_t count;
} kiln_quality_rules;

/* The rules of the contract's schema object (the one it was compiled for),
 * in file order. A malformed library rule is KILN_EINVALID
 * "file:line:col: path: message". Strings point into the contract. */
int kiln_quality_rules_load(kiln_quality_rules *out, const kiln_contract *contract);
void kiln_quality_rules_free(kiln_quality_rules *rules);

/* Whether `value` meets the rule's threshold. */
bool kiln_quality_rule_holds(const kiln_quality_rule *rule, double value);

#endif
