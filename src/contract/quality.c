/* ODCS quality rules (see quality.h), read from the contract's YAML. */
#include "contract/quality.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "core/yaml_doc.h"

static const struct {
	const char *name;
	kiln_quality_metric metric;
} METRICS[] = {
    {"rowCount", KILN_QM_ROW_COUNT},
    {"nullValues", KILN_QM_NULL_VALUES},
    {"missingValues", KILN_QM_MISSING_VALUES},
    {"invalidValues", KILN_QM_INVALID_VALUES},
    {"duplicateValues", KILN_QM_DUPLICATE_VALUES},
};

static const struct {
	const char *name;
	kiln_quality_op op;
	bool range;
} OPS[] = {
    {"mustBe", KILN_QOP_EQ, false},
    {"mustNotBe", KILN_QOP_NE, false},
    {"mustBeGreaterThan", KILN_QOP_GT, false},
    {"mustBeGreaterOrEqualTo", KILN_QOP_GE, false},
    {"mustBeGreaterThanOrEqualTo", KILN_QOP_GE, false},
    {"mustBeLessThan", KILN_QOP_LT, false},
    {"mustBeLessOrEqualTo", KILN_QOP_LE, false},
    {"mustBeLessThanOrEqualTo", KILN_QOP_LE, false},
    {"mustBeBetween", KILN_QOP_BETWEEN, true},
    {"mustNotBeBetween", KILN_QOP_NOT_BETWEEN, true},
};

/* The other keys of an ODCS v3 quality rule (v3.0 and v3.1); any key
 * outside these and OPS is a mistake (a misspelt metric would otherwise
 * make a library rule look like free text). */
static const char *const RULE_KEYS[] = {
    "id",          "name",      "description",      "type",
    "rule",        "metric",    "arguments",        "unit",
    "validValues", "query",     "engine",           "implementation",
    "dimension",   "method",    "severity",         "businessImpact",
    "schedule",    "scheduler", "customProperties", "authoritativeDefinitions",
    "tags",
};

/* ODCS rule types: library rules kiln runs, the others it lists as not run */
static const char *const RULE_TYPES[] = {"library", "text", "sql", "custom"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

typedef struct loader {
	const kiln_contract *c;
	const kiln_yaml_doc *doc;
	kiln_quality_rules *out;
	size_t cap;
	char path[512];
} loader;

static const char *scalar(const kiln_yaml_node *n)
{
	return n && n->kind == KILN_YAML_SCALAR && !kiln_yaml_is_null(n) ? n->value : NULL;
}

static int value_list(loader *l, const kiln_yaml_node *n, const char *path, kiln_quality_value **out,
                      size_t *count)
{
	if (n->kind != KILN_YAML_SEQUENCE)
		return kiln_yaml_fail(l->doc, n, path, "expected a list of values");
	if (!(*out = calloc(n->count + 1, sizeof(**out))))
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < n->count; i++) {
		const kiln_yaml_node *v = n->items[i];
		if (v->kind != KILN_YAML_SCALAR)
			return kiln_yaml_fail(l->doc, v, path, "expected scalar values");
		if (!kiln_yaml_is_null(v))
			(*out)[i] = (kiln_quality_value){v->value, v->len};
	}
	*count = n->count;
	return 0;
}

static int threshold(loader *l, const kiln_yaml_node *n, const char *path, double *out)
{
	long double v;
	int rc = kiln_yaml_number(l->doc, n, path, &v);

	if (rc < 0)
		return rc;
	*out = (double)v;
	if (!isfinite(*out))
		return kiln_yaml_fail(l->doc, n, path, "a threshold beyond a double's range");
	return 0;
}

static bool rule_key(const char *k)
{
	for (size_t i = 0; i < COUNT(RULE_KEYS); i++)
		if (strcmp(k, RULE_KEYS[i]) == 0)
			return true;
	for (size_t i = 0; i < COUNT(OPS); i++)
		if (strcmp(k, OPS[i].name) == 0)
			return true;
	return false;
}

/* Every key of the rule one ODCS knows, and its type one of RULE_TYPES. */
static int check_keys(loader *l, const kiln_yaml_node *node, const char *ypath)
{
	const kiln_yaml_node *type = kiln_yaml_get(node, "type");
	char p[800];

	for (size_t i = 0; i < node->count; i++)
		if (node->keys[i]->kind != KILN_YAML_SCALAR || !rule_key(node->keys[i]->value)) {
			snprintf(p, sizeof(p), "%s.%s", ypath,
			         node->keys[i]->kind == KILN_YAML_SCALAR ? node->keys[i]->value : "?");
			return kiln_yaml_fail(
			    l->doc, node->keys[i], p,
			    "not a key of an ODCS quality rule (metric, rule, type, "
			    "arguments, unit, a mustBe... threshold, id, description, ...)");
		}
	if (type) {
		snprintf(p, sizeof(p), "%s.type", ypath);
		for (size_t i = 0; scalar(type) && i < COUNT(RULE_TYPES); i++)
			if (strcmp(scalar(type), RULE_TYPES[i]) == 0)
				return 0;
		return kiln_yaml_fail(l->doc, type, p, "expected library, text, sql or custom");
	}
	return 0;
}

static int read_rule(loader *l, const kiln_yaml_node *node, const char *ypath, const char *fpath,
                     const kiln_field *field)
{
	kiln_quality_rule *r;
	const char *metric;
	char p[800];
	int rc, ops = 0;

	if (node->kind != KILN_YAML_MAPPING)
		return kiln_yaml_fail(l->doc, node, ypath, "a quality rule is a mapping");
	if (KILN_ARRAY_GROW(l->out->v, l->cap, l->out->count, NULL) < 0)
		return KILN_ENOMEM;
	r = &l->out->v[l->out->count++];
	memset(r, 0, sizeof(*r));
	r->id = scalar(kiln_yaml_get(node, "id")) ? scalar(kiln_yaml_get(node, "id")) : "";
	r->path = fpath;
	r->field = field;
	r->line = node->line;
	r->column = node->column;
	r->file = l->c->file;
	if ((rc = check_keys(l, node, ypath)) < 0)
		return rc;
	metric = scalar(kiln_yaml_get(node, "metric"));
	if (!metric)
		metric = scalar(kiln_yaml_get(node, "rule")); /* ODCS v3.0's key for it */
	r->type = scalar(kiln_yaml_get(node, "type"));
	if (!r->type)
		r->type = "library"; /* ODCS's default */
	if (strcmp(r->type, "library") != 0)
		return 0; /* text, sql, custom: reported as not run */
	snprintf(p, sizeof(p), "%s.metric", ypath);
	if (!metric)
		return kiln_yaml_fail(l->doc, node, p,
		                      "a library rule needs a metric (a rule without type is one; "
		                      "free text is type: text)");
	r->metric_name = metric;
	for (size_t i = 0; i < COUNT(METRICS); i++)
		if (strcmp(metric, METRICS[i].name) == 0)
			r->metric = METRICS[i].metric;
	if (!r->metric)
		return kiln_yaml_fail(
		    l->doc,
		    kiln_yaml_get(node, "metric") ? kiln_yaml_get(node, "metric")
		                                  : kiln_yaml_get(node, "rule"),
		    p,
		    "unknown metric \"%s\" (kiln evaluates rowCount, nullValues, missingValues, "
		    "invalidValues and duplicateValues)",
		    metric);
	if ((r->metric == KILN_QM_ROW_COUNT) != (field == NULL))
		return kiln_yaml_fail(l->doc, node, p,
		                      r->metric == KILN_QM_ROW_COUNT ? "rowCount belongs to the schema object"
		                                                     : "%s belongs to a property",
		                      metric);
	for (size_t i = 0; i < COUNT(OPS); i++) {
		const kiln_yaml_node *t = kiln_yaml_get(node, OPS[i].name);
		if (!t)
			continue;
		snprintf(p, sizeof(p), "%s.%s", ypath, OPS[i].name);
		if (ops++)
			return kiln_yaml_fail(l->doc, t, p, "a rule has one threshold");
		r->op = OPS[i].op;
		r->op_name = OPS[i].name;
		if (OPS[i].range) {
			if (t->kind != KILN_YAML_SEQUENCE || t->count != 2)
				return kiln_yaml_fail(l->doc, t, p, "expected [low, high]");
			if ((rc = threshold(l, t->items[0], p, &r->a)) < 0 ||
			    (rc = threshold(l, t->items[1], p, &r->b)) < 0)
				return rc;
			if (r->a > r->b)
				return kiln_yaml_fail(l->doc, t, p, "low is above high");
		} else if ((rc = threshold(l, t, p, &r->a)) < 0) {
			return rc;
		}
	}
	if (!ops)
		return kiln_yaml_fail(
		    l->doc, node, ypath,
		    "a library rule needs a threshold (mustBe, mustNotBe, mustBeGreaterThan, "
		    "mustBeGreaterOrEqualTo, mustBeLessThan, mustBeLessOrEqualTo, mustBeBetween, "
		    "mustNotBeBetween)");
	{
		const char *unit = scalar(kiln_yaml_get(node, "unit"));
		snprintf(p, sizeof(p), "%s.unit", ypath);
		if (unit && strcmp(unit, "percent") != 0 && strcmp(unit, "rows") != 0)
			return kiln_yaml_fail(l->doc, kiln_yaml_get(node, "unit"), p,
			                      "expected rows or percent");
		r->percent = unit && strcmp(unit, "percent") == 0;
		if (r->percent && r->metric == KILN_QM_ROW_COUNT)
			return kiln_yaml_fail(l->doc, kiln_yaml_get(node, "unit"), p, "rowCount is in rows");
	}
	const kiln_yaml_node *args = kiln_yaml_get(node, "arguments");
	if (args && !kiln_yaml_is_null(args)) {
		snprintf(p, sizeof(p), "%s.arguments", ypath);
		if (args->kind != KILN_YAML_MAPPING)
			return kiln_yaml_fail(l->doc, args, p, "expected a mapping");
		for (size_t i = 0; i < args->count; i++) {
			const char *k = args->keys[i]->value;
			snprintf(p, sizeof(p), "%s.arguments.%s", ypath, k);
			if (strcmp(k, "missingValues") == 0) {
				r->has_missing = true;
				if ((rc = value_list(l, args->items[i], p, &r->missing_values,
				                     &r->missing_count)) < 0)
					return rc;
			} else if (strcmp(k, "validValues") == 0) {
				r->has_valid = true;
				if ((rc = value_list(l, args->items[i], p, &r->valid_values,
				                     &r->valid_count)) < 0)
					return rc;
			} else {
				r->has_other_arguments = true;
			}
		}
	}
	return 0;
}

static int read_rules(loader *l, const kiln_yaml_node *owner, const char *ypath, const char *fpath,
                      const kiln_field *field)
{
	const kiln_yaml_node *q = kiln_yaml_get(owner, "quality");
	char p[640];
	int rc;

	if (!q || kiln_yaml_is_null(q))
		return 0;
	snprintf(p, sizeof(p), "%s.quality", ypath);
	if (q->kind != KILN_YAML_SEQUENCE)
		return kiln_yaml_fail(l->doc, q, p, "expected a list of rules");
	for (size_t i = 0; i < q->count; i++) {
		snprintf(p, sizeof(p), "%s.quality[%zu]", ypath, i);
		if ((rc = read_rule(l, q->items[i], p, fpath, field)) < 0)
			return rc;
	}
	return 0;
}

static int walk(loader *l, const kiln_yaml_node *node, const char *ypath, const kiln_field *f)
{
	const kiln_yaml_node *props = kiln_yaml_get(node, "properties"),
	                     *items = kiln_yaml_get(node, "items");
	char p[640];
	int rc;

	if ((rc = read_rules(l, node, ypath, f->path, f->path[0] ? f : NULL)) < 0)
		return rc;
	if (props && props->kind == KILN_YAML_SEQUENCE)
		for (size_t i = 0; i < props->count && i < f->child_count; i++) {
			snprintf(p, sizeof(p), "%s.properties[%zu]", ypath, i);
			if ((rc = walk(l, props->items[i], p, f->children[i])) < 0)
				return rc;
		}
	if (items && items->kind == KILN_YAML_MAPPING && f->items) {
		snprintf(p, sizeof(p), "%s.items", ypath);
		if ((rc = walk(l, items, p, f->items)) < 0)
			return rc;
	}
	return 0;
}

int kiln_quality_rules_load(kiln_quality_rules *out, const kiln_contract *c)
{
	const kiln_yaml_node *list = kiln_yaml_get(kiln_yaml_root(c->doc), "schema");
	loader l = {.c = c, .doc = c->doc, .out = out};
	int rc = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; list && list->kind == KILN_YAML_SEQUENCE && i < list->count; i++) {
		const char *name = scalar(kiln_yaml_get(list->items[i], "name"));
		char p[64];

		if (!name || !c->schema_name || strcmp(name, c->schema_name) != 0)
			continue;
		snprintf(p, sizeof(p), "schema[%zu]", i);
		rc = walk(&l, list->items[i], p, c->root);
		break;
	}
	if (rc < 0)
		kiln_quality_rules_free(out);
	return rc;
}

void kiln_quality_rules_free(kiln_quality_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->count; i++) {
		free(r->v[i].missing_values);
		free(r->v[i].valid_values);
	}
	free(r->v);
	memset(r, 0, sizeof(*r));
}

bool kiln_quality_rule_holds(const kiln_quality_rule *r, double v)
{
	switch (r->op) {
	case KILN_QOP_EQ:
		return v == r->a;
	case KILN_QOP_NE:
		return v != r->a;
	case KILN_QOP_GT:
		return v > r->a;
	case KILN_QOP_GE:
		return v >= r->a;
	case KILN_QOP_LT:
		return v < r->a;
	case KILN_QOP_LE:
		return v <= r->a;
	case KILN_QOP_BETWEEN:
		return v >= r->a && v <= r->b;
	case KILN_QOP_NOT_BETWEEN:
		return v < r->a || v > r->b;
	}
	return false;
}
