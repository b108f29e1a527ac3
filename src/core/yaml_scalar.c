/* Typed reads of YAML scalars (see yaml_doc.h): null, booleans, integers,
 * numbers and strings by the rules yaml_doc.h states (plain scalars only
 * for all but strings); their errors are worded by yaml_doc.c's
 * kiln_yaml_fail(). */
#include "core/yaml_doc.h"

#include "core/error.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool kiln_yaml_is_null(const kiln_yaml_node *node)
{
	static const char *const nulls[] = {"null", "Null", "NULL", "~"};
	size_t i;

	if (!node || node->kind != KILN_YAML_SCALAR || node->quoted)
		return false;
	if (node->len == 0)
		return true;
	for (i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++) {
		if (node->len == strlen(nulls[i]) && memcmp(node->value, nulls[i], node->len) == 0)
			return true;
	}
	return false;
}

static const char *kind_name(kiln_yaml_kind kind)
{
	return kind == KILN_YAML_MAPPING ? "a mapping" : "a sequence";
}

/* A plain scalar whose text is exactly `word`. */
static bool plain_is(const kiln_yaml_node *node, const char *word)
{
	size_t len = strlen(word);

	return !node->quoted && node->len == len && memcmp(node->value, word, len) == 0;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

int kiln_yaml_bool(const kiln_yaml_doc *doc, const kiln_yaml_node *node, const char *path, bool *out)
{
	assert(out);
	if (node && node->kind != KILN_YAML_SCALAR)
		return kiln_yaml_fail(doc, node, path, "expected a scalar (true or false), got %s",
		                      kind_name(node->kind));
	if (node && (plain_is(node, "true") || plain_is(node, "True") || plain_is(node, "TRUE"))) {
		*out = true;
		return 0;
	}
	if (node && (plain_is(node, "false") || plain_is(node, "False") || plain_is(node, "FALSE"))) {
		*out = false;
		return 0;
	}
	return kiln_yaml_fail(doc, node, path, "expected true or false");
}

int kiln_yaml_int64(const kiln_yaml_doc *doc, const kiln_yaml_node *node, const char *path, int64_t *out)
{
	const char *s;
	char *end;
	long long v;
	size_t i = 0;

	assert(out);
	if (node && node->kind != KILN_YAML_SCALAR)
		return kiln_yaml_fail(doc, node, path, "expected a scalar (an integer), got %s",
		                      kind_name(node->kind));
	if (!node || node->quoted)
		goto invalid;
	s = node->value;
	if (i < node->len && (s[i] == '+' || s[i] == '-'))
		i++;
	if (i == node->len)
		goto invalid;
	for (; i < node->len; i++) {
		if (!is_digit(s[i]))
			goto invalid;
	}
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end != s + node->len)
		goto invalid;
#if LLONG_MAX > INT64_MAX
	if (v < INT64_MIN || v > INT64_MAX)
		goto invalid;
#endif
	*out = (int64_t)v;
	return 0;

invalid:
	return kiln_yaml_fail(doc, node, path, "expected an integer");
}

int kiln_yaml_number(const kiln_yaml_doc *doc, const kiln_yaml_node *node, const char *path, long double *out)
{
	const char *s;
	char *end;
	long double v;
	size_t i = 0, digits;

	assert(out);
	if (node && node->kind != KILN_YAML_SCALAR)
		return kiln_yaml_fail(doc, node, path, "expected a scalar (a number), got %s",
		                      kind_name(node->kind));
	if (!node || node->quoted)
		goto invalid;
	/* [-+]? [0-9]+ ( . [0-9]+ )? ( [eE] [-+]? [0-9]+ )? */
	s = node->value;
	if (i < node->len && (s[i] == '+' || s[i] == '-'))
		i++;
	for (digits = 0; i < node->len && is_digit(s[i]); i++)
		digits++;
	if (!digits)
		goto invalid;
	if (i < node->len && s[i] == '.') {
		for (i++, digits = 0; i < node->len && is_digit(s[i]); i++)
			digits++;
		if (!digits)
			goto invalid;
	}
	if (i < node->len && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < node->len && (s[i] == '+' || s[i] == '-'))
			i++;
		for (digits = 0; i < node->len && is_digit(s[i]); i++)
			digits++;
		if (!digits)
			goto invalid;
	}
	if (i != node->len)
		goto invalid;
	errno = 0;
	v = strtold(s, &end);
	if (end != s + node->len)
		goto invalid;
	if (isinf(v) || (errno == ERANGE && fabsl(v) > 1.0L))
		return kiln_yaml_fail(doc, node, path, "expected a number (out of range)");
	/* ERANGE on a small value is underflow: the rounded value is kept */
	*out = v;
	return 0;

invalid:
	return kiln_yaml_fail(doc, node, path, "expected a number");
}

int kiln_yaml_string(const kiln_yaml_doc *doc, const kiln_yaml_node *node, const char *path, const char **out)
{
	assert(out);
	if (node && node->kind != KILN_YAML_SCALAR)
		return kiln_yaml_fail(doc, node, path, "expected a scalar (a string), got %s",
		                      kind_name(node->kind));
	if (!node || kiln_yaml_is_null(node))
		return kiln_yaml_fail(doc, node, path, "expected a string");
	*out = node->value;
	return 0;
}
