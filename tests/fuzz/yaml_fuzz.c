/* libFuzzer target for YAML (core/yaml_doc.c, yaml_scalar.c): the input is
 * loaded as a document (plain, then with ${NAME} expansion), every node is
 * walked through the accessors, the config readers (core/config.c) and the
 * reload diff run on it, and it is compiled as a contract
 * (contract/contract.c), the main YAML kiln reads from others. Checks the
 * tree's shape and that a walk stays within the loader's node bound
 * (aliases that fan out, "billion laughs", are refused at load). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "core/arena.h"
#include "core/config.h"
#include "core/error.h"
#include "core/yaml_doc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The loader's bound on a walk's nodes (KILN_YAML_MAX_EXPANDED). */
#define WALK_MAX 1000000

static void walk(const kiln_yaml_doc *doc, const kiln_yaml_node *n, size_t *visited, unsigned depth)
{
	if (++*visited > WALK_MAX || depth > 200 || n->line == 0 || n->column == 0)
		abort();
	if (n->kind == KILN_YAML_SCALAR) {
		const char *s;
		int64_t i;
		long double d;
		bool b;

		if (!n->value || n->value[n->len] != '\0' || n->count != 0)
			abort();
		if (kiln_yaml_string(doc, n, "fuzz", &s) == 0 && s != n->value)
			abort();
		if (kiln_yaml_int64(doc, n, "fuzz", &i) == 0 && kiln_yaml_is_null(n))
			abort();
		kiln_yaml_number(doc, n, "fuzz", &d);
		if (kiln_yaml_bool(doc, n, "fuzz", &b) == 0 && (n->quoted || kiln_yaml_is_null(n)))
			abort();
		return;
	}
	if (n->count && !n->items)
		abort();
	for (size_t i = 0; i < n->count; i++) {
		if (!n->items[i])
			abort();
		if (n->kind == KILN_YAML_MAPPING) {
			const kiln_yaml_node *k = n->keys[i];

			if (!k || k->kind != KILN_YAML_SCALAR)
				abort();
			/* keys are unique: lookup finds this one (a key with a NUL
			 * inside is not reachable by a C string) */
			if (strlen(k->value) == k->len && kiln_yaml_get(n, k->value) != n->items[i])
				abort();
		}
		walk(doc, n->items[i], visited, depth + 1);
	}
}

static void on_change(void *ctx, const char *path)
{
	if (!path)
		abort();
	++*(size_t *)ctx;
}

static void config(const kiln_yaml_doc *doc, const kiln_yaml_node *root)
{
	static const char *const allowed[] = {"name", "size", "count", NULL};
	kiln_arena *arena = kiln_arena_new();
	kiln_config c = {doc, arena, "", "docs/PIPELINES.md"};
	const char *s = NULL;
	int64_t i = 0;
	size_t z = 0, changes = 0;

	if (!arena)
		abort();
	kiln_config_check_keys(&c, root, "fuzz", allowed);
	kiln_config_string(&c, root, "fuzz", "name", false, &s);
	kiln_config_int(&c, root, "fuzz", "count", -5, 1000, &i);
	if (kiln_config_size(&c, root, "fuzz", "size", 1024, &z) == 0 && z != 0 && z < 1024)
		abort();
	if (i < -5 || i > 1000)
		abort();
	kiln_config_changed(root, root, on_change, &changes);
	if (changes != 0)
		abort();
	kiln_config_changed(NULL, root, on_change, &changes);
	kiln_arena_free(arena);
}

/* A variable longer than an arena block, for inputs that expand it: an
 * expansion written past the room counted for it cannot go unnoticed. */
static void setup(void)
{
	static char value[70000];

	if (value[0])
		return;
	memset(value, 'v', sizeof(value) - 1);
	setenv("KILN_FUZZ_LONG", value, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	kiln_contract *contract = NULL;

	setup();

	for (unsigned flags = 0; flags <= KILN_YAML_EXPAND_ENV; flags += KILN_YAML_EXPAND_ENV) {
		kiln_yaml_doc *doc = NULL;
		const kiln_yaml_node *root;
		size_t visited = 0;
		int rc = kiln_yaml_load_buffer_ex(&doc, "fuzz.yaml", text, size, flags);

		if (rc < 0) {
			/* one line, naming the file */
			if (doc || strncmp(kiln_error_last(), "fuzz.yaml", 9) != 0 ||
			    strchr(kiln_error_last(), '\n'))
				abort();
			continue;
		}
		if ((root = kiln_yaml_root(doc))) {
			walk(doc, root, &visited, 0);
			config(doc, root);
			kiln_yaml_set(doc, "fuzz.\"a.b\".c", "1");
		}
		kiln_yaml_free(doc);
	}
	if (kiln_contract_load_buffer(&contract, "fuzz.yaml", text, size, NULL) == 0) {
		if (!contract)
			abort();
		kiln_contract_free(contract);
	} else if (strchr(kiln_error_last(), '\n')) {
		abort();
	}
	return 0;
}
