/* Unit tests for the YAML document tree (src/core/yaml_doc.c): node
 * positions, styles, duplicate keys, aliases, parser errors, the depth
 * limit, the typed readers' messages and loading from files. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/yaml_doc.h"

static kiln_yaml_doc *load_ok(const char *text)
{
	kiln_yaml_doc *doc = NULL;
	int rc = kiln_yaml_load_buffer(&doc, "t.yaml", text, strlen(text));

	if (rc != 0)
		print_error("unexpected failure: %s\n", kiln_error_last());
	assert_int_equal(rc, 0);
	assert_non_null(doc);
	return doc;
}

static void load_fails(const char *text, int code, const char *message)
{
	kiln_yaml_doc *doc = (kiln_yaml_doc *)1;

	kiln_error_clear();
	assert_int_equal(kiln_yaml_load_buffer(&doc, "t.yaml", text, strlen(text)), code);
	assert_null(doc);
	assert_string_equal(kiln_error_last(), message);
	assert_int_equal(kiln_error_last_code(), code);
}

static void assert_pos(const kiln_yaml_node *node, unsigned line, unsigned column)
{
	assert_non_null(node);
	assert_int_equal(node->line, line);
	assert_int_equal(node->column, column);
}

static void assert_scalar(const kiln_yaml_node *node, const char *text, bool quoted)
{
	assert_non_null(node);
	assert_int_equal(node->kind, KILN_YAML_SCALAR);
	assert_int_equal(node->len, strlen(text));
	assert_string_equal(node->value, text);
	assert_int_equal(node->quoted, quoted);
}

static void test_nested_positions(void **state)
{
	kiln_yaml_doc *doc;
	const kiln_yaml_node *root, *server, *ports, *n;

	(void)state;
	doc = load_ok("# config\n"
	              "server:\n"
	              "  host: example\n"
	              "  ports:\n"
	              "    - 80\n"
	              "    -   443\n"
	              "  tls: {cert: a.pem}\n"
	              "name: kiln\n");
	assert_string_equal(kiln_yaml_name(doc), "t.yaml");
	root = kiln_yaml_root(doc);
	assert_int_equal(root->kind, KILN_YAML_MAPPING);
	assert_int_equal(root->count, 2);
	assert_pos(root, 2, 1);
	assert_scalar(root->keys[0], "server", false);
	assert_pos(root->keys[0], 2, 1);
	assert_scalar(root->keys[1], "name", false);
	assert_pos(root->keys[1], 8, 1);

	server = kiln_yaml_get(root, "server");
	assert_ptr_equal(server, root->items[0]);
	assert_int_equal(server->kind, KILN_YAML_MAPPING);
	assert_int_equal(server->count, 3);
	assert_pos(server, 3, 3);
	n = kiln_yaml_get(server, "host");
	assert_scalar(n, "example", false);
	assert_pos(n, 3, 9);

	ports = kiln_yaml_get(server, "ports");
	assert_int_equal(ports->kind, KILN_YAML_SEQUENCE);
	assert_int_equal(ports->count, 2);
	assert_null(ports->keys);
	assert_pos(ports, 5, 5);
	assert_scalar(ports->items[0], "80", false);
	assert_pos(ports->items[0], 5, 7);
	assert_scalar(ports->items[1], "443", false);
	assert_pos(ports->items[1], 6, 9);

	n = kiln_yaml_get(kiln_yaml_get(server, "tls"), "cert");
	assert_scalar(n, "a.pem", false);
	assert_pos(n, 7, 15);
	assert_scalar(kiln_yaml_get(root, "name"), "kiln", false);
	assert_pos(kiln_yaml_get(root, "name"), 8, 7);

	assert_null(kiln_yaml_get(root, "missing"));
	assert_null(kiln_yaml_get(root, "serve"));
	assert_null(kiln_yaml_get(ports, "server"));
	assert_null(kiln_yaml_get(NULL, "server"));
	kiln_yaml_free(doc);
}

static void test_flow_style(void **state)
{
	kiln_yaml_doc *doc;
	const kiln_yaml_node *root, *n;

	(void)state;
	doc = load_ok("{a: [1, 2, {b: c}], d: [], e: {}}");
	root = kiln_yaml_root(doc);
	assert_int_equal(root->kind, KILN_YAML_MAPPING);
	assert_pos(root, 1, 1);
	n = kiln_yaml_get(root, "a");
	assert_int_equal(n->kind, KILN_YAML_SEQUENCE);
	assert_pos(n, 1, 5);
	assert_int_equal(n->count, 3);
	assert_scalar(n->items[1], "2", false);
	assert_pos(n->items[1], 1, 9);
	assert_scalar(kiln_yaml_get(n->items[2], "b"), "c", false);
	assert_pos(kiln_yaml_get(n->items[2], "b"), 1, 16);
	n = kiln_yaml_get(root, "d");
	assert_int_equal(n->kind, KILN_YAML_SEQUENCE);
	assert_int_equal(n->count, 0);
	n = kiln_yaml_get(root, "e");
	assert_int_equal(n->kind, KILN_YAML_MAPPING);
	assert_int_equal(n->count, 0);
	kiln_yaml_free(doc);
}

static void test_scalar_styles(void **state)
{
	kiln_yaml_doc *doc;
	const kiln_yaml_node *root, *n;

	(void)state;
	doc = load_ok("plain: hello world\n"
	              "single: 'it''s'\n"
	              "double: \"a\\tb\"\n"
	              "nul: \"x\\0y\"\n"
	              "literal: |\n"
	              "  line1\n"
	              "  line2\n"
	              "folded: >\n"
	              "  one\n"
	              "  two\n"
	              "empty:\n"
	              "quoted_empty: ''\n");
	root = kiln_yaml_root(doc);
	assert_scalar(kiln_yaml_get(root, "plain"), "hello world", false);
	assert_scalar(kiln_yaml_get(root, "single"), "it's", true);
	assert_scalar(kiln_yaml_get(root, "double"), "a\tb", true);
	n = kiln_yaml_get(root, "nul");
	assert_int_equal(n->len, 3);
	assert_memory_equal(n->value, "x\0y", 4);
	assert_true(n->quoted);
	n = kiln_yaml_get(root, "literal");
	assert_scalar(n, "line1\nline2\n", true);
	assert_pos(n, 5, 10);
	assert_scalar(kiln_yaml_get(root, "folded"), "one two\n", true);
	n = kiln_yaml_get(root, "empty");
	assert_scalar(n, "", false);
	assert_true(kiln_yaml_is_null(n));
	n = kiln_yaml_get(root, "quoted_empty");
	assert_scalar(n, "", true);
	assert_false(kiln_yaml_is_null(n));
	kiln_yaml_free(doc);
}

static void test_duplicate_key(void **state)
{
	(void)state;
	load_fails("a: 1\n"
	           "b:\n"
	           "  c: 2\n"
	           "  c: 3\n",
	           KILN_EINVALID, "t.yaml:4:3: duplicate key \"c\"");
	load_fails("{x: 1, y: 2, x: 3}", KILN_EINVALID, "t.yaml:1:14: duplicate key \"x\"");
	/* quoting does not make a different key */
	load_fails("k: 1\n\"k\": 2\n", KILN_EINVALID, "t.yaml:2:1: duplicate key \"k\"");
	/* control bytes and quotes are escaped in the message */
	load_fails("\"a\\tb\\\"\": 1\n\"a\\tb\\\"\": 2\n", KILN_EINVALID,
	           "t.yaml:2:1: duplicate key \"a\\x09b\\\"\"");
}

static void test_nonscalar_key(void **state)
{
	(void)state;
	load_fails("? [a, b]\n: 1\n", KILN_EINVALID, "t.yaml:1:3: mapping keys must be scalars");
	load_fails("{{a: 1}: 2}", KILN_EINVALID, "t.yaml:1:2: mapping keys must be scalars");
	load_fails("base: &b {x: 1}\n"
	           "m:\n"
	           "  *b : 2\n",
	           KILN_EINVALID, "t.yaml:3:3: mapping keys must be scalars");
}

static void test_aliases(void **state)
{
	kiln_yaml_doc *doc;
	const kiln_yaml_node *root, *base, *n;

	(void)state;
	doc = load_ok("base: &b\n"
	              "  x: 1\n"
	              "name: &n kiln\n"
	              "copy: *b\n"
	              "list: [*n, *b]\n"
	              "*n : key from alias\n");
	root = kiln_yaml_root(doc);
	base = kiln_yaml_get(root, "base");
	assert_int_equal(base->kind, KILN_YAML_MAPPING);
	assert_ptr_equal(kiln_yaml_get(root, "copy"), base);
	n = kiln_yaml_get(root, "list");
	assert_ptr_equal(n->items[0], kiln_yaml_get(root, "name"));
	assert_ptr_equal(n->items[1], base);
	/* an alias node keeps the anchored node's position: its anchor */
	assert_pos(n->items[1], 1, 7);
	assert_scalar(kiln_yaml_get(root, "kiln"), "key from alias", false);
	kiln_yaml_free(doc);

	/* a redefined anchor: the latest definition wins */
	doc = load_ok("a: &x 1\nb: &x 2\nc: *x\n");
	assert_scalar(kiln_yaml_get(kiln_yaml_root(doc), "c"), "2", false);
	kiln_yaml_free(doc);

	load_fails("a: 1\nb: *nope\n", KILN_EINVALID, "t.yaml:2:4: unknown alias \"nope\"");
	load_fails("a: &r [1, *r]\n", KILN_EINVALID,
	           "t.yaml:1:11: alias \"r\" refers to a node that contains it");
	/* a key that repeats through an alias is still a duplicate */
	load_fails("a: &k x\nx: 1\n*k : 2\n", KILN_EINVALID, "t.yaml:3:1: duplicate key \"x\"");
}

static void test_parser_errors(void **state)
{
	(void)state;
	/* bad indentation */
	load_fails("a:\n"
	           "  b: 1\n"
	           " c: 2\n",
	           KILN_EINVALID,
	           "t.yaml:3:2: did not find expected key (while parsing a block mapping at 1:1)");
	load_fails("a: [1, 2\n", KILN_EINVALID,
	           "t.yaml:2:1: did not find expected ',' or ']' (while parsing a flow sequence at "
	           "1:4)");
	load_fails("a: 'open\n", KILN_EINVALID,
	           "t.yaml:2:1: found unexpected end of stream (while scanning a quoted scalar at "
	           "1:4)");
	/* reader errors carry a byte offset, turned into a position */
	load_fails("a: 1\nb: \xff\n", KILN_EINVALID, "t.yaml:2:4: invalid leading UTF-8 octet");
}

static void test_empty_documents(void **state)
{
	kiln_yaml_doc *doc = NULL;

	(void)state;
	assert_int_equal(kiln_yaml_load_buffer(&doc, "t.yaml", "", 0), 0);
	assert_non_null(doc);
	assert_null(kiln_yaml_root(doc));
	kiln_yaml_free(doc);
	assert_int_equal(kiln_yaml_load_buffer(&doc, "t.yaml", NULL, 0), 0);
	assert_null(kiln_yaml_root(doc));
	kiln_yaml_free(doc);

	doc = load_ok("# only a comment\n\n");
	assert_null(kiln_yaml_root(doc));
	kiln_yaml_free(doc);
	doc = load_ok("---\n");
	assert_null(kiln_yaml_root(doc));
	kiln_yaml_free(doc);
	doc = load_ok("---\n...\n");
	assert_null(kiln_yaml_root(doc));
	kiln_yaml_free(doc);

	/* an explicit null is a node */
	doc = load_ok("--- ~\n");
	assert_non_null(kiln_yaml_root(doc));
	assert_true(kiln_yaml_is_null(kiln_yaml_root(doc)));
	kiln_yaml_free(doc);

	kiln_yaml_free(NULL);
}

static void test_first_document_only(void **state)
{
	kiln_yaml_doc *doc;
	const kiln_yaml_node *root;

	(void)state;
	doc = load_ok("a: 1\n---\nb: 2\n");
	root = kiln_yaml_root(doc);
	assert_int_equal(root->count, 1);
	assert_non_null(kiln_yaml_get(root, "a"));
	assert_null(kiln_yaml_get(root, "b"));
	kiln_yaml_free(doc);
}

static char *nested(size_t depth)
{
	char *s = malloc(2 * depth + 2);
	size_t i;

	assert_non_null(s);
	for (i = 0; i < depth; i++)
		s[i] = '[';
	s[depth] = '1';
	for (i = 0; i < depth; i++)
		s[depth + 1 + i] = ']';
	s[2 * depth + 1] = '\0';
	return s;
}

static void test_depth_limit(void **state)
{
	kiln_yaml_doc *doc;
	const kiln_yaml_node *n;
	char *text;
	size_t i;

	(void)state;
	text = nested(64);
	doc = load_ok(text);
	n = kiln_yaml_root(doc);
	for (i = 0; i < 64; i++) {
		assert_int_equal(n->kind, KILN_YAML_SEQUENCE);
		assert_int_equal(n->count, 1);
		n = n->items[0];
	}
	assert_scalar(n, "1", false);
	assert_pos(n, 1, 65);
	kiln_yaml_free(doc);
	free(text);

	text = nested(65);
	load_fails(text, KILN_EINVALID, "t.yaml:1:65: nested deeper than 64 levels");
	free(text);

	/* far deeper than the limit still fails cleanly */
	text = nested(100000);
	load_fails(text, KILN_EINVALID, "t.yaml:1:65: nested deeper than 64 levels");
	free(text);
}

static void test_large_document(void **state)
{
	enum { KEYS = 3000, BIG = 200 * 1024 };
	size_t cap = KEYS * 32 + BIG + 64, len = 0, i;
	char *text = malloc(cap);
	kiln_yaml_doc *doc;
	const kiln_yaml_node *root, *n;
	char key[32];

	(void)state;
	assert_non_null(text);
	for (i = 0; i < KEYS; i++)
		len += (size_t)snprintf(text + len, cap - len, "key%zu: %zu\n", i, i * 7);
	len += (size_t)snprintf(text + len, cap - len, "big: ");
	memset(text + len, 'z', BIG);
	len += BIG;
	text[len++] = '\n';
	text[len] = '\0';

	doc = load_ok(text);
	root = kiln_yaml_root(doc);
	assert_int_equal(root->count, KEYS + 1);
	for (i = 0; i < KEYS; i += 997) {
		int64_t v;

		snprintf(key, sizeof(key), "key%zu", i);
		n = kiln_yaml_get(root, key);
		assert_int_equal(kiln_yaml_int64(doc, n, key, &v), 0);
		assert_int_equal(v, (int64_t)(i * 7));
		assert_pos(n, (unsigned)i + 1, (unsigned)strlen(key) + 3);
	}
	n = kiln_yaml_get(root, "big");
	assert_int_equal(n->len, BIG);
	assert_int_equal(n->value[BIG - 1], 'z');
	assert_int_equal(n->value[BIG], '\0');
	kiln_yaml_free(doc);
	free(text);
}

static void expect_error(int rc, const char *message)
{
	assert_int_equal(rc, KILN_EINVALID);
	assert_int_equal(kiln_error_last_code(), KILN_EINVALID);
	assert_string_equal(kiln_error_last(), message);
}

/* Aliases share nodes, so a "billion laughs" tree is small in memory but
 * exponential to walk: the loader caps how many aliases a document holds. */
static void test_alias_limit(void **state)
{
	char text[16384];
	size_t n = 0;
	kiln_yaml_doc *doc = NULL;

	(void)state;
	n += (size_t)snprintf(text + n, sizeof(text) - n, "a: &x 1\nb: [");
	for (int i = 0; i < 1000; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%s*x", i ? "," : "");
	snprintf(text + n, sizeof(text) - n, "]\n");
	doc = load_ok(text);
	kiln_yaml_free(doc);

	snprintf(text + n, sizeof(text) - n, ",*x]\n"); /* alias number 1001 */
	assert_int_equal(kiln_yaml_load_buffer(&doc, "laughs.yaml", text, strlen(text)), KILN_EINVALID);
	assert_null(doc);
	assert_non_null(strstr(kiln_error_last(), "laughs.yaml:2:"));
	assert_non_null(strstr(kiln_error_last(), "more than 1000 aliases"));
}

/* Under the alias bound, aliases that fan out still make a tree exponential
 * to walk: the loader counts nodes as if every alias were a copy of its
 * node and refuses a document past 1,000,000, naming where it went past.
 * The count below: the root 1; "a" 1 + its list 1 + 999; "b" 1 + its list 1
 * + 998 aliases of 1000 nodes each; "c" 1 + its list 1 + 994 = 1,000,000. */
static void test_expanded_limit(void **state)
{
	size_t cap = 16384, n = 0, fixed;
	char *text = malloc(cap);
	kiln_yaml_doc *doc = NULL;

	(void)state;
	assert_non_null(text);
	n += (size_t)snprintf(text + n, cap - n, "a: &a [");
	for (int i = 0; i < 999; i++)
		n += (size_t)snprintf(text + n, cap - n, "%sx", i ? "," : "");
	n += (size_t)snprintf(text + n, cap - n, "]\nb: [");
	for (int i = 0; i < 998; i++)
		n += (size_t)snprintf(text + n, cap - n, "%s*a", i ? "," : "");
	n += (size_t)snprintf(text + n, cap - n, "]\nc: [");
	fixed = n;
	for (int i = 0; i < 994; i++)
		n += (size_t)snprintf(text + n, cap - n, "%sy", i ? "," : "");
	snprintf(text + n, cap - n, "]\n");
	doc = load_ok(text);
	assert_int_equal(kiln_yaml_get(kiln_yaml_root(doc), "b")->count, 998);
	kiln_yaml_free(doc);

	snprintf(text + n, cap - n, ",y]\n"); /* node number 1,000,001 */
	doc = (kiln_yaml_doc *)1;
	assert_int_equal(kiln_yaml_load_buffer(&doc, "laughs.yaml", text, strlen(text)), KILN_EINVALID);
	assert_null(doc);
	assert_string_equal(
	    kiln_error_last(),
	    "laughs.yaml:3:4: more than 1000000 nodes with aliases expanded (aliases that fan out)");

	/* nested fan-out: 30 levels of two aliases each, about 2^30 nodes */
	n = 0;
	n += (size_t)snprintf(text + n, cap - n, "l0: &l0 [x, x]\n");
	for (int i = 1; i <= 30; i++)
		n += (size_t)snprintf(text + n, cap - n, "l%d: &l%d [*l%d, *l%d]\n", i, i, i - 1, i - 1);
	assert_true(n < fixed);
	assert_int_equal(kiln_yaml_load_buffer(&doc, "laughs.yaml", text, n), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "laughs.yaml:"));
	assert_non_null(strstr(kiln_error_last(), "nodes with aliases expanded"));
	free(text);
}

static void test_expand_env(void **state)
{
	const char *text = "a: ${KILN_T_SET}\n"
	                   "b: x-${KILN_T_UNSET:-dflt}-y\n"
	                   "c: ${KILN_T_EMPTY:-e}\n"
	                   "d: ${KILN_T_EMPTY}\n"
	                   "e: cost $$5\n"
	                   "f: \"${KILN_T_SET}\"\n";
	kiln_yaml_doc *doc = NULL;
	const kiln_yaml_node *root;

	(void)state;
	setenv("KILN_T_SET", "hello world", 1);
	setenv("KILN_T_EMPTY", "", 1);
	unsetenv("KILN_T_UNSET");
	assert_int_equal(kiln_yaml_load_buffer_ex(&doc, "p.yaml", text, strlen(text), KILN_YAML_EXPAND_ENV),
	                 0);
	root = kiln_yaml_root(doc);
	assert_string_equal(kiln_yaml_get(root, "a")->value, "hello world");
	assert_int_equal(kiln_yaml_get(root, "a")->len, 11);
	assert_string_equal(kiln_yaml_get(root, "b")->value, "x-dflt-y");
	assert_string_equal(kiln_yaml_get(root, "c")->value, "e");
	assert_string_equal(kiln_yaml_get(root, "d")->value, "");
	assert_string_equal(kiln_yaml_get(root, "e")->value, "cost $5");
	assert_string_equal(kiln_yaml_get(root, "f")->value, "hello world");
	/* from_env: the whole text was one ${NAME}, nothing written around it */
	assert_true(kiln_yaml_get(root, "a")->from_env);
	assert_false(kiln_yaml_get(root, "b")->from_env);
	assert_false(kiln_yaml_get(root, "c")->from_env); /* a default is text from the file */
	assert_true(kiln_yaml_get(root, "d")->from_env);
	assert_false(kiln_yaml_get(root, "e")->from_env);
	assert_true(kiln_yaml_get(root, "f")->from_env);
	kiln_yaml_free(doc);
	text = "a: ${KILN_T_SET}${KILN_T_SET}\nb: $${KILN_T_SET}\nc: literal\n";
	assert_int_equal(kiln_yaml_load_buffer_ex(&doc, "p.yaml", text, strlen(text), KILN_YAML_EXPAND_ENV),
	                 0);
	root = kiln_yaml_root(doc);
	assert_false(kiln_yaml_get(root, "a")->from_env);
	assert_string_equal(kiln_yaml_get(root, "b")->value, "${KILN_T_SET}");
	assert_false(kiln_yaml_get(root, "b")->from_env);
	assert_false(kiln_yaml_get(root, "c")->from_env);
	kiln_yaml_free(doc);
	text = "a: ${KILN_T_SET}\n";

	/* without the flag nothing is expanded */
	assert_int_equal(kiln_yaml_load_buffer(&doc, "p.yaml", text, strlen(text)), 0);
	assert_string_equal(kiln_yaml_get(kiln_yaml_root(doc), "a")->value, "${KILN_T_SET}");
	assert_false(kiln_yaml_get(kiln_yaml_root(doc), "a")->from_env);
	kiln_yaml_free(doc);

	/* unset without default: file:line:col */
	text = "x: 1\ny: ${KILN_T_UNSET}\n";
	assert_int_equal(kiln_yaml_load_buffer_ex(&doc, "p.yaml", text, strlen(text), KILN_YAML_EXPAND_ENV),
	                 KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "p.yaml:2:4: "));
	assert_non_null(strstr(kiln_error_last(), "KILN_T_UNSET is not set"));
	text = "y: ${KILN_T_SET\n";
	assert_int_equal(kiln_yaml_load_buffer_ex(&doc, "p.yaml", text, strlen(text), KILN_YAML_EXPAND_ENV),
	                 KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "unterminated"));
	text = "y: ${1BAD}\n";
	assert_int_equal(kiln_yaml_load_buffer_ex(&doc, "p.yaml", text, strlen(text), KILN_YAML_EXPAND_ENV),
	                 KILN_EINVALID);
}

/* "$$" is a literal '$' in both passes of the expansion: the "${" after it
 * is text, so it is neither refused as a bad reference nor expanded into
 * room that the first pass did not count (issue 25, found by yaml_fuzz). */
static void test_expand_env_escaped_reference(void **state)
{
	char long_value[4096 + 1];
	const char *text = "a: cost $${x\n"
	                   "b: $${x:-${KILN_T_LONG}}\n";
	kiln_yaml_doc *doc = NULL;
	const kiln_yaml_node *root;
	const char *b;

	(void)state;
	memset(long_value, 'v', sizeof(long_value) - 1);
	long_value[sizeof(long_value) - 1] = '\0';
	setenv("KILN_T_LONG", long_value, 1);
	assert_int_equal(kiln_yaml_load_buffer_ex(&doc, "p.yaml", text, strlen(text), KILN_YAML_EXPAND_ENV),
	                 0);
	root = kiln_yaml_root(doc);
	assert_string_equal(kiln_yaml_get(root, "a")->value, "cost ${x");
	b = kiln_yaml_get(root, "b")->value;
	assert_int_equal(kiln_yaml_get(root, "b")->len, strlen("${x:-}") + 4096);
	assert_memory_equal(b, "${x:-", 5);
	assert_memory_equal(b + 5, long_value, 4096);
	assert_string_equal(b + 5 + 4096, "}");
	kiln_yaml_free(doc);
	unsetenv("KILN_T_LONG");
}

static void test_set(void **state)
{
	const char *text = "split:\n  salt: a\nlist: [1]\n";
	kiln_yaml_doc *doc = load_ok(text);
	const kiln_yaml_node *root = kiln_yaml_root(doc), *n;
	bool b;

	(void)state;
	assert_int_equal(kiln_yaml_set(doc, "split.salt", "b"), 0);
	assert_int_equal(kiln_yaml_set(doc, "split.ratios.train", "0.5"), 0);
	assert_int_equal(kiln_yaml_set(doc, "flag", "true"), 0);
	root = kiln_yaml_root(doc);
	assert_string_equal(kiln_yaml_get(kiln_yaml_get(root, "split"), "salt")->value, "b");
	n = kiln_yaml_get(kiln_yaml_get(kiln_yaml_get(root, "split"), "ratios"), "train");
	assert_non_null(n);
	assert_string_equal(n->value, "0.5");
	assert_int_equal(kiln_yaml_bool(doc, kiln_yaml_get(root, "flag"), "flag", &b), 0);
	assert_true(b);
	/* errors on set nodes name --set, not a position */
	assert_int_equal(kiln_yaml_int64(doc, kiln_yaml_get(root, "flag"), "flag", &(int64_t){0}),
	                 KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "--set flag: "));
	assert_int_equal(kiln_yaml_set(doc, "list.x", "1"), KILN_EINVALID);
	assert_int_equal(kiln_yaml_set(doc, "a..b", "1"), KILN_EINVALID);
	kiln_yaml_free(doc);
}

/* A key with dots (librdkafka's properties) is addressed in double quotes:
 * source.options."sasl.mechanism" sets the key "sasl.mechanism" in
 * source.options, next to a key of the same name that came from the file. */
static void test_set_quoted_key(void **state)
{
	const char *text = "source:\n  options: {session.timeout.ms: \"6000\", sasl.mechanism: GSSAPI}\n";
	kiln_yaml_doc *doc = load_ok(text);
	const kiln_yaml_node *opts;

	(void)state;
	assert_int_equal(kiln_yaml_set(doc, "source.options.\"sasl.mechanism\"", "PLAIN"), 0);
	assert_int_equal(kiln_yaml_set(doc, "source.options.\"sasl.username\"", "kiln"), 0);
	assert_int_equal(kiln_yaml_set(doc, "\"source\".\"options\".\"client.id\"", "c1"), 0);
	opts = kiln_yaml_get(kiln_yaml_get(kiln_yaml_root(doc), "source"), "options");
	assert_int_equal(opts->count, 4);
	assert_string_equal(kiln_yaml_get(opts, "sasl.mechanism")->value, "PLAIN");
	assert_string_equal(kiln_yaml_get(opts, "sasl.username")->value, "kiln");
	assert_string_equal(kiln_yaml_get(opts, "client.id")->value, "c1");
	assert_string_equal(kiln_yaml_get(opts, "session.timeout.ms")->value, "6000");
	assert_null(kiln_yaml_get(opts, "sasl"));
	/* unquoted, the dots still nest */
	assert_int_equal(kiln_yaml_set(doc, "source.options.sasl.mechanism", "X"), 0);
	assert_non_null(kiln_yaml_get(kiln_yaml_get(opts, "sasl"), "mechanism"));

	expect_error(kiln_yaml_set(doc, "source.\"options", "1"),
	             "--set source.\"options: unterminated \" in the path");
	expect_error(kiln_yaml_set(doc, "source.\"opt\"ions", "1"),
	             "--set source.\"opt\"ions: expected '.' or '=' after a quoted key");
	expect_error(kiln_yaml_set(doc, "source.op\"t\"", "1"),
	             "--set source.op\"t\": a quoted key must be a whole key");
	expect_error(kiln_yaml_set(doc, "source.\"\"", "1"), "--set source.\"\": empty key in the path");
	expect_error(kiln_yaml_set(doc, "source.", "1"), "--set source.: empty key in the path");
	kiln_yaml_free(doc);
}

static void test_fail_format(void **state)
{
	kiln_yaml_doc *doc;
	const kiln_yaml_node *n;

	(void)state;
	doc = load_ok("a:\n  b: 1\n");
	n = kiln_yaml_get(kiln_yaml_get(kiln_yaml_root(doc), "a"), "b");
	expect_error(kiln_yaml_fail(doc, n, "a.b", "must be %d or more", 2),
	             "t.yaml:2:6: a.b: must be 2 or more");
	expect_error(kiln_yaml_fail(doc, n, NULL, "bad"), "t.yaml:2:6: bad");
	expect_error(kiln_yaml_fail(doc, n, "", "bad"), "t.yaml:2:6: bad");
	expect_error(kiln_yaml_fail(doc, NULL, "a.c", "is required"), "t.yaml: a.c: is required");
	expect_error(kiln_yaml_fail(doc, NULL, NULL, "is required"), "t.yaml: is required");
	kiln_yaml_free(doc);
}

static const char *reader_text = "t: true\n"
                                 "T: True\n"
                                 "f: FALSE\n"
                                 "qb: 'true'\n"
                                 "yes: yes\n"
                                 "i: -42\n"
                                 "ip: +7\n"
                                 "imax: 9223372036854775807\n"
                                 "imin: -9223372036854775808\n"
                                 "ibig: 9223372036854775808\n"
                                 "ihex: 0x10\n"
                                 "ifrac: 1.5\n"
                                 "qi: \"12\"\n"
                                 "sign: '-'\n"
                                 "d: 2.5e-3\n"
                                 "dint: 17\n"
                                 "dneg: -0.25E+2\n"
                                 "dinf: .inf\n"
                                 "dnan: .nan\n"
                                 "ddot: .5\n"
                                 "dtrail: 1.\n"
                                 "dexp: 1e\n"
                                 "dhuge: 1e999999\n"
                                 "s: hello\n"
                                 "qnull: \"null\"\n"
                                 "n1: null\n"
                                 "n2: ~\n"
                                 "n3: NULL\n"
                                 "n4:\n"
                                 "nn: nULL\n"
                                 "map: {x: 1}\n"
                                 "seq: [1]\n"
                                 "dtiny: 1e-999999\n";

static void test_bool_reader(void **state)
{
	kiln_yaml_doc *doc;
	const kiln_yaml_node *root;
	bool b = false;

	(void)state;
	doc = load_ok(reader_text);
	root = kiln_yaml_root(doc);
	assert_int_equal(kiln_yaml_bool(doc, kiln_yaml_get(root, "t"), "t", &b), 0);
	assert_true(b);
	assert_int_equal(kiln_yaml_bool(doc, kiln_yaml_get(root, "T"), "T", &b), 0);
	assert_true(b);
	assert_int_equal(kiln_yaml_bool(doc, kiln_yaml_get(root, "f"), "f", &b), 0);
	assert_false(b);
	expect_error(kiln_yaml_bool(doc, kiln_yaml_get(root, "qb"), "opts.qb", &b),
	             "t.yaml:4:5: opts.qb: expected true or false");
	expect_error(kiln_yaml_bool(doc, kiln_yaml_get(root, "yes"), "yes", &b),
	             "t.yaml:5:6: yes: expected true or false");
	expect_error(kiln_yaml_bool(doc, kiln_yaml_get(root, "map"), "map", &b),
	             "t.yaml:31:6: map: expected a scalar (true or false), got a mapping");
	expect_error(kiln_yaml_bool(doc, NULL, "gone", &b), "t.yaml: gone: expected true or false");
	kiln_yaml_free(doc);
}

static void test_int64_reader(void **state)
{
	kiln_yaml_doc *doc;
	const kiln_yaml_node *root;
	int64_t v = 0;

	(void)state;
	doc = load_ok(reader_text);
	root = kiln_yaml_root(doc);
	assert_int_equal(kiln_yaml_int64(doc, kiln_yaml_get(root, "i"), "i", &v), 0);
	assert_int_equal(v, -42);
	assert_int_equal(kiln_yaml_int64(doc, kiln_yaml_get(root, "ip"), "ip", &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(kiln_yaml_int64(doc, kiln_yaml_get(root, "imax"), "imax", &v), 0);
	assert_true(v == INT64_MAX);
	assert_int_equal(kiln_yaml_int64(doc, kiln_yaml_get(root, "imin"), "imin", &v), 0);
	assert_true(v == INT64_MIN);
	expect_error(kiln_yaml_int64(doc, kiln_yaml_get(root, "ibig"), "ibig", &v),
	             "t.yaml:10:7: ibig: expected an integer");
	expect_error(kiln_yaml_int64(doc, kiln_yaml_get(root, "ihex"), "ihex", &v),
	             "t.yaml:11:7: ihex: expected an integer");
	expect_error(kiln_yaml_int64(doc, kiln_yaml_get(root, "ifrac"), "ifrac", &v),
	             "t.yaml:12:8: ifrac: expected an integer");
	expect_error(kiln_yaml_int64(doc, kiln_yaml_get(root, "qi"), "qi", &v),
	             "t.yaml:13:5: qi: expected an integer");
	expect_error(kiln_yaml_int64(doc, kiln_yaml_get(root, "n4"), "n4", &v),
	             "t.yaml:29:4: n4: expected an integer");
	expect_error(kiln_yaml_int64(doc, kiln_yaml_get(root, "seq"), "seq", &v),
	             "t.yaml:32:6: seq: expected a scalar (an integer), got a sequence");
	kiln_yaml_free(doc);

	/* a lone sign is not an integer */
	doc = load_ok("- -\n- +\n");
	expect_error(kiln_yaml_int64(doc, kiln_yaml_root(doc)->items[1], "[1]", &v),
	             "t.yaml:2:3: [1]: expected an integer");
	kiln_yaml_free(doc);
}

static void test_number_reader(void **state)
{
	kiln_yaml_doc *doc;
	const kiln_yaml_node *root;
	long double v = 0;

	(void)state;
	doc = load_ok(reader_text);
	root = kiln_yaml_root(doc);
	assert_int_equal(kiln_yaml_number(doc, kiln_yaml_get(root, "d"), "d", &v), 0);
	assert_true(v > 0.0024L && v < 0.0026L);
	assert_int_equal(kiln_yaml_number(doc, kiln_yaml_get(root, "dint"), "dint", &v), 0);
	assert_true(v == 17.0L);
	assert_int_equal(kiln_yaml_number(doc, kiln_yaml_get(root, "dneg"), "dneg", &v), 0);
	assert_true(v == -25.0L);
	assert_int_equal(kiln_yaml_number(doc, kiln_yaml_get(root, "i"), "i", &v), 0);
	assert_true(v == -42.0L);
	/* underflow rounds toward zero and is accepted */
	assert_int_equal(kiln_yaml_number(doc, kiln_yaml_get(root, "dtiny"), "dtiny", &v), 0);
	assert_true(v >= 0.0L && v < 1e-300L);
	expect_error(kiln_yaml_number(doc, kiln_yaml_get(root, "dinf"), "dinf", &v),
	             "t.yaml:18:7: dinf: expected a number");
	expect_error(kiln_yaml_number(doc, kiln_yaml_get(root, "dnan"), "dnan", &v),
	             "t.yaml:19:7: dnan: expected a number");
	expect_error(kiln_yaml_number(doc, kiln_yaml_get(root, "ddot"), "ddot", &v),
	             "t.yaml:20:7: ddot: expected a number");
	expect_error(kiln_yaml_number(doc, kiln_yaml_get(root, "dtrail"), "dtrail", &v),
	             "t.yaml:21:9: dtrail: expected a number");
	expect_error(kiln_yaml_number(doc, kiln_yaml_get(root, "dexp"), "dexp", &v),
	             "t.yaml:22:7: dexp: expected a number");
	expect_error(kiln_yaml_number(doc, kiln_yaml_get(root, "dhuge"), "dhuge", &v),
	             "t.yaml:23:8: dhuge: expected a number (out of range)");
	expect_error(kiln_yaml_number(doc, kiln_yaml_get(root, "ihex"), "ihex", &v),
	             "t.yaml:11:7: ihex: expected a number");
	expect_error(kiln_yaml_number(doc, kiln_yaml_get(root, "qi"), "qi", &v),
	             "t.yaml:13:5: qi: expected a number");
	expect_error(kiln_yaml_number(doc, kiln_yaml_get(root, "s"), "s", &v),
	             "t.yaml:24:4: s: expected a number");
	expect_error(kiln_yaml_number(doc, kiln_yaml_get(root, "map"), "map", &v),
	             "t.yaml:31:6: map: expected a scalar (a number), got a mapping");
	kiln_yaml_free(doc);
}

static void test_string_reader(void **state)
{
	kiln_yaml_doc *doc;
	const kiln_yaml_node *root;
	const char *s = NULL;

	(void)state;
	doc = load_ok(reader_text);
	root = kiln_yaml_root(doc);
	assert_int_equal(kiln_yaml_string(doc, kiln_yaml_get(root, "s"), "s", &s), 0);
	assert_string_equal(s, "hello");
	assert_int_equal(kiln_yaml_string(doc, kiln_yaml_get(root, "qnull"), "qnull", &s), 0);
	assert_string_equal(s, "null");
	assert_int_equal(kiln_yaml_string(doc, kiln_yaml_get(root, "t"), "t", &s), 0);
	assert_string_equal(s, "true");
	assert_int_equal(kiln_yaml_string(doc, kiln_yaml_get(root, "nn"), "nn", &s), 0);
	assert_string_equal(s, "nULL");
	expect_error(kiln_yaml_string(doc, kiln_yaml_get(root, "n1"), "n1", &s),
	             "t.yaml:26:5: n1: expected a string");
	expect_error(kiln_yaml_string(doc, kiln_yaml_get(root, "n2"), "n2", &s),
	             "t.yaml:27:5: n2: expected a string");
	expect_error(kiln_yaml_string(doc, kiln_yaml_get(root, "n3"), "n3", &s),
	             "t.yaml:28:5: n3: expected a string");
	expect_error(kiln_yaml_string(doc, kiln_yaml_get(root, "n4"), "n4", &s),
	             "t.yaml:29:4: n4: expected a string");
	expect_error(kiln_yaml_string(doc, kiln_yaml_get(root, "seq"), "seq", &s),
	             "t.yaml:32:6: seq: expected a scalar (a string), got a sequence");
	expect_error(kiln_yaml_string(doc, NULL, "gone", &s), "t.yaml: gone: expected a string");
	kiln_yaml_free(doc);
}

static void test_load_file(void **state)
{
	char path[] = "/tmp/kiln_yaml_doc_XXXXXX";
	const char *text = "a:\n  - x\n  - {b: oops}\n";
	char expected[128];
	kiln_yaml_doc *doc = NULL;
	const kiln_yaml_node *n;
	int fd;
	bool b;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);

	assert_int_equal(kiln_yaml_load_file(&doc, path), 0);
	assert_string_equal(kiln_yaml_name(doc), path);
	n = kiln_yaml_get(kiln_yaml_get(kiln_yaml_root(doc), "a")->items[1], "b");
	assert_pos(n, 3, 9);
	snprintf(expected, sizeof(expected), "%s:3:9: a[1].b: expected true or false", path);
	expect_error(kiln_yaml_bool(doc, n, "a[1].b", &b), expected);
	kiln_yaml_free(doc);
	unlink(path);

	doc = (kiln_yaml_doc *)1;
	assert_int_equal(kiln_yaml_load_file(&doc, path), KILN_ENOTFOUND);
	assert_null(doc);
	snprintf(expected, sizeof(expected), "%s: cannot open: %s", path, strerror(ENOENT));
	assert_string_equal(kiln_error_last(), expected);
	assert_int_equal(kiln_error_last_code(), KILN_ENOTFOUND);
}

/* A config: ${NAME:-default} expanded, --set applied, the caller's --set
 * strings left as they were. */
static void test_load_config(void **state)
{
	char path[] = "/tmp/kiln_yaml_doc_XXXXXX";
	const char *text = "a: ${KILN_TEST_UNSET_NAME:-dflt}\nb: {c: 1}\n";
	char set1[] = "b.c=2", set2[] = "d=new", set3[] = "b.\"e.f=g\"=h=i", bad[] = "=x";
	char *sets[] = {set1, set2, set3}, *bads[] = {bad};
	kiln_yaml_doc *doc = NULL;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(kiln_yaml_load_config(&doc, path, sets, 3), 0);
	/* the first '=' outside quotes ends the path */
	assert_string_equal(kiln_yaml_get(kiln_yaml_get(kiln_yaml_root(doc), "b"), "e.f=g")->value, "h=i");
	assert_string_equal(kiln_yaml_get(kiln_yaml_root(doc), "a")->value, "dflt");
	assert_string_equal(kiln_yaml_get(kiln_yaml_get(kiln_yaml_root(doc), "b"), "c")->value, "2");
	assert_string_equal(kiln_yaml_get(kiln_yaml_root(doc), "d")->value, "new");
	assert_string_equal(set1, "b.c=2");
	kiln_yaml_free(doc);
	doc = (kiln_yaml_doc *)1;
	expect_error(kiln_yaml_load_config(&doc, path, bads, 1), "--set =x: expected dotted.key=value");
	assert_null(doc);
	unlink(path);
}

static void test_load_file_errors(void **state)
{
	char path[] = "/tmp/kiln_yaml_doc_XXXXXX";
	const char *text = "a: 1\na: 2\n";
	char expected[128];
	kiln_yaml_doc *doc = NULL;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(kiln_yaml_load_file(&doc, path), KILN_EINVALID);
	assert_null(doc);
	snprintf(expected, sizeof(expected), "%s:2:1: duplicate key \"a\"", path);
	assert_string_equal(kiln_error_last(), expected);
	unlink(path);

	/* an empty file: a NULL root */
	memcpy(path + strlen(path) - 6, "XXXXXX", 6);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(kiln_yaml_load_file(&doc, path), 0);
	assert_non_null(doc);
	assert_null(kiln_yaml_root(doc));
	kiln_yaml_free(doc);
	unlink(path);

	/* a directory opens but cannot be read */
	assert_int_equal(kiln_yaml_load_file(&doc, "/tmp"), KILN_EIO);
	assert_null(doc);
	assert_non_null(strstr(kiln_error_last(), "/tmp: cannot"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nested_positions),
	    cmocka_unit_test(test_alias_limit),
	    cmocka_unit_test(test_expanded_limit),
	    cmocka_unit_test(test_expand_env),
	    cmocka_unit_test(test_expand_env_escaped_reference),
	    cmocka_unit_test(test_set),
	    cmocka_unit_test(test_set_quoted_key),
	    cmocka_unit_test(test_flow_style),
	    cmocka_unit_test(test_scalar_styles),
	    cmocka_unit_test(test_duplicate_key),
	    cmocka_unit_test(test_nonscalar_key),
	    cmocka_unit_test(test_aliases),
	    cmocka_unit_test(test_parser_errors),
	    cmocka_unit_test(test_empty_documents),
	    cmocka_unit_test(test_first_document_only),
	    cmocka_unit_test(test_depth_limit),
	    cmocka_unit_test(test_large_document),
	    cmocka_unit_test(test_fail_format),
	    cmocka_unit_test(test_bool_reader),
	    cmocka_unit_test(test_int64_reader),
	    cmocka_unit_test(test_number_reader),
	    cmocka_unit_test(test_string_reader),
	    cmocka_unit_test(test_load_file),
	    cmocka_unit_test(test_load_file_errors),
	    cmocka_unit_test(test_load_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
