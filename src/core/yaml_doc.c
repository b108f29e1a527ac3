/* YAML documents as position-carrying trees (see yaml_doc.h): loading,
 * the tree's accessors, --set overrides and kiln_yaml_fail's located errors
 * (yaml_scalar.c reads scalars as typed values). The first document of a stream
 * is built from libyaml's event parser with an explicit stack (no
 * recursion, at most KILN_YAML_MAX_DEPTH collections deep). The doc owns
 * one arena holding every node, item array and string; kiln_yaml_free()
 * releases it in one walk over the block list. */
#include "core/yaml_doc.h"

#include "core/arena.h"
#include "core/error.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define KILN_YAML_MAX_DEPTH   64
#define KILN_YAML_MAX_ALIASES 1000 /* bounds the work of walking a tree that shares nodes */
/* Nodes the document would have with every alias replaced by a copy of its
 * node: what a walk over the tree visits. Aliases that fan out ("billion
 * laughs") stay under the alias bound yet grow this exponentially. */
#define KILN_YAML_MAX_EXPANDED 1000000
#define QUOTE_MAX              64 /* bytes of a key or anchor shown in a message */

struct kiln_yaml_doc {
	kiln_arena *arena;
	const char *name;
	kiln_yaml_node *root;
};

/* A collection being built. Items (and keys) collect in heap arrays that are
 * copied into the arena when the collection ends. In a mapping, have_key
 * means keys[count] holds a key still waiting for its value. */
typedef struct build_frame {
	kiln_yaml_node *node;
	kiln_yaml_node **items;
	kiln_yaml_node **keys;
	size_t count;
	size_t cap;
	bool have_key;
	size_t anchor;   /* index in the anchor table, or SIZE_MAX */
	size_t expanded; /* nodes in the subtree so far, aliases expanded (itself included) */
} build_frame;

typedef struct build_anchor {
	const char *name;
	kiln_yaml_node *node;
	bool open;       /* its collection has not ended yet */
	size_t expanded; /* nodes in its subtree, aliases expanded (set when closed) */
} build_anchor;

typedef struct build_ctx {
	kiln_yaml_doc *doc;
	build_frame stack[KILN_YAML_MAX_DEPTH];
	size_t depth;
	build_anchor *anchors;
	size_t anchor_count;
	size_t anchor_cap;
	size_t alias_count;
	size_t expanded; /* nodes attached at the top level (the root's subtree) */
	unsigned flags;
} build_ctx;

static void *arena_alloc(kiln_yaml_doc *doc, size_t size, size_t align)
{
	(void)align; /* kiln_arena_alloc aligns to 16, enough for every node type */
	return kiln_arena_alloc(doc->arena, size);
}

static char *arena_strndup(kiln_yaml_doc *doc, const char *s, size_t len)
{
	if (len == SIZE_MAX)
		return NULL;
	return kiln_arena_strndup(doc->arena, s, len);
}

/* Writes s[0..len) as a message-safe quoted string: control bytes, '"' and
 * '\' escaped, cut after QUOTE_MAX bytes. */
static void quote_bytes(char *dst, size_t cap, const char *s, size_t len)
{
	size_t n = 0, i;

	assert(cap >= 8);
	dst[n++] = '"';
	for (i = 0; i < len && i < QUOTE_MAX && n + 8 < cap; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			dst[n++] = '\\';
			dst[n++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			n += (size_t)snprintf(dst + n, cap - n, "\\x%02x", c);
		} else {
			dst[n++] = (char)c;
		}
	}
	if (i < len && n + 5 < cap) {
		memcpy(dst + n, "...", 3);
		n += 3;
	}
	dst[n++] = '"';
	dst[n] = '\0';
}

static int fail_at(build_ctx *ctx, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_at(build_ctx *ctx, yaml_mark_t mark, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return kiln_error_set(KILN_EINVALID, "%s:%zu:%zu: %s", ctx->doc->name, mark.line + 1, mark.column + 1,
	                      msg);
}

static int fail_nomem(build_ctx *ctx)
{
	return kiln_error_set(KILN_ENOMEM, "%s: out of memory", ctx->doc->name);
}

static int parser_fail(build_ctx *ctx, const yaml_parser_t *parser, const char *buf, size_t len)
{
	const char *problem = parser->problem ? parser->problem : "unknown error";
	size_t line = parser->problem_mark.line + 1;
	size_t column = parser->problem_mark.column + 1;

	switch (parser->error) {
	case YAML_MEMORY_ERROR:
		return fail_nomem(ctx);
	case YAML_READER_ERROR: {
		/* the reader reports a byte offset, not a mark */
		size_t i, end = parser->problem_offset < len ? parser->problem_offset : len;

		line = 1;
		column = 1;
		for (i = 0; i < end; i++) {
			if (buf[i] == '\n') {
				line++;
				column = 1;
			} else {
				column++;
			}
		}
		break;
	}
	default:
		break;
	}
	if (parser->context)
		return kiln_error_set(KILN_EINVALID, "%s:%zu:%zu: %s (%s at %zu:%zu)", ctx->doc->name, line,
		                      column, problem, parser->context, parser->context_mark.line + 1,
		                      parser->context_mark.column + 1);
	return kiln_error_set(KILN_EINVALID, "%s:%zu:%zu: %s", ctx->doc->name, line, column, problem);
}

static kiln_yaml_node *node_new(build_ctx *ctx, kiln_yaml_kind kind, yaml_mark_t mark)
{
	kiln_yaml_node *node = arena_alloc(ctx->doc, sizeof(*node), _Alignof(kiln_yaml_node));

	if (!node)
		return NULL;
	memset(node, 0, sizeof(*node));
	node->kind = kind;
	node->line = mark.line + 1 > UINT_MAX ? UINT_MAX : (unsigned)(mark.line + 1);
	node->column = mark.column + 1 > UINT_MAX ? UINT_MAX : (unsigned)(mark.column + 1);
	return node;
}

static int anchor_add(build_ctx *ctx, const yaml_char_t *name, kiln_yaml_node *node, bool open,
                      size_t *index_out)
{
	build_anchor *a;

	if (ctx->anchor_count == ctx->anchor_cap) {
		size_t cap = ctx->anchor_cap ? ctx->anchor_cap * 2 : 8;
		build_anchor *grown = realloc(ctx->anchors, cap * sizeof(*grown));

		if (!grown)
			return fail_nomem(ctx);
		ctx->anchors = grown;
		ctx->anchor_cap = cap;
	}
	a = &ctx->anchors[ctx->anchor_count];
	a->name = arena_strndup(ctx->doc, (const char *)name, strlen((const char *)name));
	if (!a->name)
		return fail_nomem(ctx);
	a->node = node;
	a->open = open;
	a->expanded = 1;
	if (index_out)
		*index_out = ctx->anchor_count;
	ctx->anchor_count++;
	return 0;
}

static int anchor_resolve(build_ctx *ctx, const build_anchor **out, const yaml_char_t *name, yaml_mark_t mark)
{
	char quoted[QUOTE_MAX * 4 + 8];
	size_t i;

	/* the latest definition of a name wins */
	for (i = ctx->anchor_count; i-- > 0;) {
		if (strcmp(ctx->anchors[i].name, (const char *)name) != 0)
			continue;
		if (ctx->anchors[i].open) {
			quote_bytes(quoted, sizeof(quoted), (const char *)name, strlen((const char *)name));
			return fail_at(ctx, mark, "alias %s refers to a node that contains it", quoted);
		}
		*out = &ctx->anchors[i];
		return 0;
	}
	quote_bytes(quoted, sizeof(quoted), (const char *)name, strlen((const char *)name));
	return fail_at(ctx, mark, "unknown alias %s", quoted);
}

static int frame_reserve(build_ctx *ctx, build_frame *frame, bool with_keys)
{
	kiln_yaml_node **items, **keys;
	size_t cap;

	if (frame->count < frame->cap)
		return 0;
	cap = frame->cap ? frame->cap * 2 : 8;
	if (cap > SIZE_MAX / sizeof(*items))
		return fail_nomem(ctx);
	items = realloc(frame->items, cap * sizeof(*items));
	if (!items)
		return fail_nomem(ctx);
	frame->items = items;
	if (with_keys) {
		keys = realloc(frame->keys, cap * sizeof(*keys));
		if (!keys)
			return fail_nomem(ctx);
		frame->keys = keys;
	}
	frame->cap = cap;
	return 0;
}

/* Adds `expanded` nodes to a subtree count, refusing at `mark` once the
 * document would pass KILN_YAML_MAX_EXPANDED nodes with aliases expanded. */
static int count_expanded(build_ctx *ctx, size_t *total, size_t expanded, yaml_mark_t mark)
{
	if (expanded > KILN_YAML_MAX_EXPANDED - *total)
		return fail_at(ctx, mark, "more than %d nodes with aliases expanded (aliases that fan out)",
		               KILN_YAML_MAX_EXPANDED);
	*total += expanded;
	return 0;
}

/* Hands a finished node to the open collection, or makes it the root.
 * `mark` is where the node appeared in the text (an alias's own mark);
 * `expanded` is its subtree's size with aliases expanded. */
static int attach(build_ctx *ctx, kiln_yaml_node *node, size_t expanded, yaml_mark_t mark)
{
	build_frame *top;
	char quoted[QUOTE_MAX * 4 + 8];
	size_t i;
	int error;

	if (ctx->depth == 0) {
		if (!ctx->doc->root)
			ctx->doc->root = node;
		return count_expanded(ctx, &ctx->expanded, expanded, mark);
	}
	top = &ctx->stack[ctx->depth - 1];
	/* Every open collection's count covers this node: checking the
	 * innermost one at each attach keeps each count within the bound, and
	 * a collection's count is added to its parent when it closes. */
	if ((error = count_expanded(ctx, &top->expanded, expanded, mark)) < 0)
		return error;
	if (top->node->kind == KILN_YAML_SEQUENCE) {
		if ((error = frame_reserve(ctx, top, false)) < 0)
			return error;
		top->items[top->count++] = node;
		return 0;
	}
	if (top->have_key) {
		top->items[top->count++] = node;
		top->have_key = false;
		return 0;
	}
	if (node->kind != KILN_YAML_SCALAR)
		return fail_at(ctx, mark, "mapping keys must be scalars");
	for (i = 0; i < top->count; i++) {
		const kiln_yaml_node *k = top->keys[i];

		if (k->len == node->len && memcmp(k->value, node->value, node->len) == 0) {
			quote_bytes(quoted, sizeof(quoted), node->value, node->len);
			return fail_at(ctx, mark, "duplicate key %s", quoted);
		}
	}
	if ((error = frame_reserve(ctx, top, true)) < 0)
		return error;
	top->keys[top->count] = node;
	top->have_key = true;
	return 0;
}

/* The dotted key path of the value being read ("pseudonymise.key_file",
 * "pins[2]"), for messages about it; NULL at the top. */
static const char *value_path(const build_ctx *ctx, char *buf, size_t cap)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ctx->depth && len < cap; i++) {
		const build_frame *f = &ctx->stack[i];
		int n;

		if (f->node->kind == KILN_YAML_MAPPING && f->have_key)
			n = snprintf(buf + len, cap - len, "%s%s", len ? "." : "", f->keys[f->count]->value);
		else if (f->node->kind == KILN_YAML_SEQUENCE)
			n = snprintf(buf + len, cap - len, "[%zu]", f->count);
		else
			break;
		len = n < 0 ? cap : len + (size_t)n;
	}
	return buf[0] ? buf : NULL;
}

/* ${NAME} and ${NAME:-default} (NAME: [A-Za-z_][A-Za-z0-9_]*), as in Vector
 * and Fluent Bit configs; "$$" is a literal '$'. An unset (or, for ":-",
 * empty) variable takes the default; unset without one is an error. */
static int expand_env(build_ctx *ctx, kiln_yaml_node *node)
{
	const char *s = node->value, *end = s + node->len;
	char *out, *o;
	size_t cap = node->len + 1;

	/* first pass: the length, reading "$$" and ${...} as the second pass
	 * does (a "${" right after "$$" is text, not a reference) */
	for (const char *p = s; p < end; p++) {
		if (p[0] == '$' && p + 1 < end && p[1] == '$') {
			p++;
		} else if (p[0] == '$' && p + 1 < end && p[1] == '{') {
			const char *close = memchr(p, '}', (size_t)(end - p));
			const char *colon;
			char name[128];
			size_t n;
			const char *val;

			if (!close)
				return kiln_yaml_fail(ctx->doc, node, NULL, "unterminated ${ in value");
			colon = memchr(p + 2, ':', (size_t)(close - p - 2));
			n = (size_t)((colon ? colon : close) - (p + 2));
			if (n == 0 || n >= sizeof(name) || !(isalpha((unsigned char)p[2]) || p[2] == '_'))
				return kiln_yaml_fail(ctx->doc, node, NULL, "bad variable name in ${...}");
			memcpy(name, p + 2, n);
			name[n] = '\0';
			for (size_t i = 0; i < n; i++)
				if (!(isalnum((unsigned char)name[i]) || name[i] == '_'))
					return kiln_yaml_fail(ctx->doc, node, NULL,
					                      "bad variable name in ${...}");
			if (colon && (colon + 1 >= close || colon[1] != '-'))
				return kiln_yaml_fail(ctx->doc, node, NULL,
				                      "expected ${%s} or ${%s:-default}", name, name);
			val = getenv(name);
			if (colon ? (!val || !*val) : !val) {
				char path[256];

				/* systemd sets it for a unit with LoadCredential= */
				if (!colon && strcmp(name, "CREDENTIALS_DIRECTORY") == 0)
					return kiln_yaml_fail(
					    ctx->doc, node, value_path(ctx, path, sizeof(path)),
					    "environment variable %s is not set: systemd sets it for a "
					    "service with LoadCredential= (docs/OPERATIONS.md)",
					    name);
				if (!colon)
					return kiln_yaml_fail(ctx->doc, node,
					                      value_path(ctx, path, sizeof(path)),
					                      "environment variable %s is not set (write "
					                      "${%s:-default} for a default)",
					                      name, name);
				cap += (size_t)(close - colon - 2);
			} else {
				cap += strlen(val);
			}
			p = close;
		}
	}
	out = o = arena_alloc(ctx->doc, cap, 1);
	if (!out)
		return fail_nomem(ctx);
	for (const char *p = s; p < end; p++) {
		if (p[0] == '$' && p + 1 < end && p[1] == '$') {
			*o++ = '$';
			p++;
		} else if (p[0] == '$' && p + 1 < end && p[1] == '{') {
			const char *close = memchr(p, '}', (size_t)(end - p));
			const char *colon = memchr(p + 2, ':', (size_t)(close - p - 2));
			size_t n = (size_t)((colon ? colon : close) - (p + 2));
			char name[128];
			const char *val;

			memcpy(name, p + 2, n);
			name[n] = '\0';
			val = getenv(name);
			if (colon ? (!val || !*val) : !val) {
				memcpy(o, colon + 2, (size_t)(close - colon - 2));
				o += close - colon - 2;
			} else {
				size_t vl = strlen(val);
				memcpy(o, val, vl);
				o += vl;
			}
			p = close;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	node->value = out;
	node->len = (size_t)(o - out);
	return 0;
}

/* Exactly "${NAME}": one reference, no default, nothing around it. */
static bool is_one_reference(const char *s, size_t len)
{
	if (len < 4 || s[0] != '$' || s[1] != '{' || s[len - 1] != '}' ||
	    !(isalpha((unsigned char)s[2]) || s[2] == '_'))
		return false;
	for (size_t i = 3; i < len - 1; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
			return false;
	return true;
}

/* Whether s starts with ${NAME} or ${NAME:-default} whose variable is set
 * (the default form: set and not empty), so the value's start is the
 * environment's. */
static bool starts_with_set_reference(const char *s, size_t len)
{
	char name[128];
	const char *val;
	size_t n = 0;

	if (len < 4 || s[0] != '$' || s[1] != '{')
		return false;
	while (2 + n < len && (isalnum((unsigned char)s[2 + n]) || s[2 + n] == '_') && n + 1 < sizeof(name)) {
		name[n] = s[2 + n];
		n++;
	}
	if (n == 0 || 2 + n >= len || (s[2 + n] != '}' && s[2 + n] != ':'))
		return false;
	name[n] = '\0';
	val = getenv(name);
	return s[2 + n] == '}' ? val != NULL : val && *val;
}

static int on_scalar(build_ctx *ctx, const yaml_event_t *event)
{
	kiln_yaml_node *node = node_new(ctx, KILN_YAML_SCALAR, event->start_mark);
	char *value;
	int error;

	if (!node)
		return fail_nomem(ctx);
	value = arena_strndup(ctx->doc, (const char *)event->data.scalar.value, event->data.scalar.length);
	if (!value)
		return fail_nomem(ctx);
	node->value = value;
	node->len = event->data.scalar.length;
	node->quoted = event->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
	if ((ctx->flags & KILN_YAML_EXPAND_ENV) && memchr(value, '$', node->len)) {
		node->from_env = is_one_reference(value, node->len);
		node->cwd_relative = starts_with_set_reference(value, node->len);
		if ((error = expand_env(ctx, node)) < 0)
			return error;
	}
	if (event->data.scalar.anchor &&
	    (error = anchor_add(ctx, event->data.scalar.anchor, node, false, NULL)) < 0)
		return error;
	return attach(ctx, node, 1, event->start_mark);
}

static int on_alias(build_ctx *ctx, const yaml_event_t *event)
{
	const build_anchor *anchor = NULL;
	int error;

	if (++ctx->alias_count > KILN_YAML_MAX_ALIASES)
		return fail_at(ctx, event->start_mark, "more than %d aliases", KILN_YAML_MAX_ALIASES);
	if ((error = anchor_resolve(ctx, &anchor, event->data.alias.anchor, event->start_mark)) < 0)
		return error;
	return attach(ctx, anchor->node, anchor->expanded, event->start_mark);
}

static int on_start(build_ctx *ctx, const yaml_event_t *event, kiln_yaml_kind kind)
{
	const yaml_char_t *anchor =
	    kind == KILN_YAML_MAPPING ? event->data.mapping_start.anchor : event->data.sequence_start.anchor;
	build_frame *frame;
	kiln_yaml_node *node;
	int error;

	if (ctx->depth > 0) {
		const build_frame *top = &ctx->stack[ctx->depth - 1];

		if (top->node->kind == KILN_YAML_MAPPING && !top->have_key)
			return fail_at(ctx, event->start_mark, "mapping keys must be scalars");
	}
	if (ctx->depth == KILN_YAML_MAX_DEPTH)
		return fail_at(ctx, event->start_mark, "nested deeper than %d levels", KILN_YAML_MAX_DEPTH);
	node = node_new(ctx, kind, event->start_mark);
	if (!node)
		return fail_nomem(ctx);
	frame = &ctx->stack[ctx->depth];
	memset(frame, 0, sizeof(*frame));
	frame->node = node;
	frame->anchor = SIZE_MAX;
	frame->expanded = 1;
	if (anchor && (error = anchor_add(ctx, anchor, node, true, &frame->anchor)) < 0)
		return error;
	ctx->depth++;
	return 0;
}

static int on_end(build_ctx *ctx)
{
	build_frame *frame;
	kiln_yaml_node *node;
	yaml_mark_t mark = {0, 0, 0};
	size_t expanded;

	assert(ctx->depth > 0);
	frame = &ctx->stack[ctx->depth - 1];
	node = frame->node;
	assert(!frame->have_key);
	if (frame->count) {
		size_t bytes = frame->count * sizeof(kiln_yaml_node *);
		node->items = arena_alloc(ctx->doc, bytes, _Alignof(kiln_yaml_node *));
		if (!node->items)
			return fail_nomem(ctx);
		memcpy(node->items, frame->items, bytes);
		if (node->kind == KILN_YAML_MAPPING) {
			node->keys = arena_alloc(ctx->doc, bytes, _Alignof(kiln_yaml_node *));
			if (!node->keys)
				return fail_nomem(ctx);
			memcpy(node->keys, frame->keys, bytes);
		}
	}
	node->count = frame->count;
	expanded = frame->expanded;
	if (frame->anchor != SIZE_MAX) {
		ctx->anchors[frame->anchor].open = false;
		ctx->anchors[frame->anchor].expanded = expanded;
	}
	free(frame->items);
	free(frame->keys);
	memset(frame, 0, sizeof(*frame));
	ctx->depth--;
	mark.line = node->line - 1;
	mark.column = node->column - 1;
	return attach(ctx, node, expanded, mark);
}

int kiln_yaml_load_buffer(kiln_yaml_doc **out, const char *name, const char *buf, size_t len)
{
	return kiln_yaml_load_buffer_ex(out, name, buf, len, 0);
}

int kiln_yaml_load_buffer_ex(kiln_yaml_doc **out, const char *name, const char *buf, size_t len,
                             unsigned flags)
{
	build_ctx ctx;
	yaml_parser_t parser;
	yaml_event_t event;
	bool parser_ready = false, have_event = false, done = false;
	int error = 0;

	assert(out);
	*out = NULL;
	memset(&ctx, 0, sizeof(ctx));
	ctx.flags = flags;
	if (!name)
		name = "<buffer>";
	if (!buf) {
		buf = "";
		len = 0;
	}

	ctx.doc = calloc(1, sizeof(*ctx.doc));
	if (ctx.doc && !(ctx.doc->arena = kiln_arena_new())) {
		free(ctx.doc);
		ctx.doc = NULL;
	}
	if (!ctx.doc) {
		error = kiln_error_set(KILN_ENOMEM, "%s: out of memory", name);
		goto cleanup;
	}
	ctx.doc->name = arena_strndup(ctx.doc, name, strlen(name));
	if (!ctx.doc->name) {
		ctx.doc->name = name;
		error = fail_nomem(&ctx);
		goto cleanup;
	}

	if (!yaml_parser_initialize(&parser)) {
		error = fail_nomem(&ctx);
		goto cleanup;
	}
	parser_ready = true;
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);

	while (!done) {
		if (!yaml_parser_parse(&parser, &event)) {
			error = parser_fail(&ctx, &parser, buf, len);
			goto cleanup;
		}
		have_event = true;
		switch (event.type) {
		case YAML_SCALAR_EVENT:
			error = on_scalar(&ctx, &event);
			break;
		case YAML_ALIAS_EVENT:
			error = on_alias(&ctx, &event);
			break;
		case YAML_SEQUENCE_START_EVENT:
			error = on_start(&ctx, &event, KILN_YAML_SEQUENCE);
			break;
		case YAML_MAPPING_START_EVENT:
			error = on_start(&ctx, &event, KILN_YAML_MAPPING);
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			error = on_end(&ctx);
			break;
		case YAML_DOCUMENT_END_EVENT:
		case YAML_STREAM_END_EVENT:
			/* only the first document is read */
			done = true;
			break;
		default:
			break;
		}
		yaml_event_delete(&event);
		have_event = false;
		if (error < 0)
			goto cleanup;
	}
	assert(ctx.depth == 0);

	/* "---" alone yields an implicit empty scalar: an empty document */
	if (ctx.doc->root && ctx.doc->root->kind == KILN_YAML_SCALAR && !ctx.doc->root->quoted &&
	    ctx.doc->root->len == 0)
		ctx.doc->root = NULL;

	*out = ctx.doc;
	ctx.doc = NULL;

cleanup:
	if (have_event)
		yaml_event_delete(&event);
	if (parser_ready)
		yaml_parser_delete(&parser);
	while (ctx.depth > 0) {
		ctx.depth--;
		free(ctx.stack[ctx.depth].items);
		free(ctx.stack[ctx.depth].keys);
	}
	free(ctx.anchors);
	kiln_yaml_free(ctx.doc);
	return error;
}

int kiln_yaml_load_file(kiln_yaml_doc **out, const char *path)
{
	return kiln_yaml_load_file_ex(out, path, 0);
}

int kiln_yaml_load_file_ex(kiln_yaml_doc **out, const char *path, unsigned flags)
{
	FILE *fp = NULL;
	char *buf = NULL;
	size_t len = 0, cap = 0, n;
	int error = 0;

	assert(out && path);
	*out = NULL;

	fp = fopen(path, "rb");
	if (!fp) {
		int e = errno;

		error = kiln_error_set(e == ENOENT ? KILN_ENOTFOUND : KILN_EIO, "%s: cannot open: %s", path,
		                       strerror(e));
		goto cleanup;
	}
	for (;;) {
		if (len == cap) {
			size_t grown_cap = cap ? cap * 2 : 64 * 1024;
			char *grown;

			if (grown_cap < cap || !(grown = realloc(buf, grown_cap))) {
				error = kiln_error_set(KILN_ENOMEM, "%s: out of memory", path);
				goto cleanup;
			}
			buf = grown;
			cap = grown_cap;
		}
		n = fread(buf + len, 1, cap - len, fp);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(fp)) {
		error = kiln_error_set(KILN_EIO, "%s: cannot read: %s", path, strerror(errno));
		goto cleanup;
	}

	error = kiln_yaml_load_buffer_ex(out, path, buf, len, flags);

cleanup:
	if (fp)
		fclose(fp);
	free(buf);
	return error;
}

void kiln_yaml_free(kiln_yaml_doc *doc)
{
	if (!doc)
		return;
	kiln_arena_free(doc->arena);
	free(doc);
}

static const kiln_yaml_node *find_value(const kiln_yaml_node *n, const char *value, unsigned depth)
{
	if (!n || depth > 256)
		return NULL;
	if (n->kind == KILN_YAML_SCALAR)
		return n->value == value ? n : NULL;
	for (size_t i = 0; i < n->count; i++) {
		const kiln_yaml_node *hit = find_value(n->items[i], value, depth + 1);

		if (hit)
			return hit;
	}
	return NULL;
}

const kiln_yaml_node *kiln_yaml_find_value(const kiln_yaml_doc *doc, const char *value)
{
	return value ? find_value(kiln_yaml_root(doc), value, 0) : NULL;
}

const kiln_yaml_node *kiln_yaml_root(const kiln_yaml_doc *doc)
{
	return doc ? doc->root : NULL;
}

const char *kiln_yaml_name(const kiln_yaml_doc *doc)
{
	return doc ? doc->name : NULL;
}

/* The one place that words an error at a node's file, line and column (or
 * its --set path). */
int kiln_yaml_fail(const kiln_yaml_doc *doc, const kiln_yaml_node *node, const char *path, const char *fmt,
                   ...)
{
	const char *name = kiln_yaml_name(doc) ? kiln_yaml_name(doc) : "<yaml>";
	const char *sep = path && *path ? ": " : "";
	char msg[400];
	va_list ap;

	if (!path)
		path = "";
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!node)
		return kiln_error_set(KILN_EINVALID, "%s: %s%s%s", name, path, sep, msg);
	if (node->line == 0) /* set with kiln_yaml_set(): from the command line */
		return kiln_error_set(KILN_EINVALID, "--set %s%s%s", path, sep, msg);
	return kiln_error_set(KILN_EINVALID, "%s:%u:%u: %s%s%s", name, node->line, node->column, path, sep,
	                      msg);
}

const kiln_yaml_node *kiln_yaml_get(const kiln_yaml_node *map, const char *key)
{
	size_t i, len;

	if (!map || map->kind != KILN_YAML_MAPPING || !key)
		return NULL;
	len = strlen(key);
	for (i = 0; i < map->count; i++) {
		const kiln_yaml_node *k = map->keys[i];

		if (k->len == len && memcmp(k->value, key, len) == 0)
			return map->items[i];
	}
	return NULL;
}

/* Grows a mapping by one key/value pair (arrays copied into the arena). */
static int map_append(kiln_yaml_doc *doc, kiln_yaml_node *map, kiln_yaml_node *key, kiln_yaml_node *value)
{
	kiln_yaml_node **keys = kiln_arena_alloc(doc->arena, (map->count + 1) * sizeof(*keys));
	kiln_yaml_node **items = kiln_arena_alloc(doc->arena, (map->count + 1) * sizeof(*items));

	if (!keys || !items)
		return kiln_error_oom(NULL);
	if (map->count) {
		memcpy(keys, map->keys, map->count * sizeof(*keys));
		memcpy(items, map->items, map->count * sizeof(*items));
	}
	keys[map->count] = key;
	items[map->count] = value;
	map->keys = keys;
	map->items = items;
	map->count++;
	return 0;
}

static kiln_yaml_node *set_node(kiln_yaml_doc *doc, kiln_yaml_kind kind, const char *text, size_t len)
{
	kiln_yaml_node *n = kiln_arena_alloc(doc->arena, sizeof(*n));

	if (!n)
		return NULL;
	n->kind = kind;
	if (kind == KILN_YAML_SCALAR) {
		n->value = kiln_arena_strndup(doc->arena, text, len);
		n->len = len;
		if (!n->value)
			return NULL;
	}
	return n; /* line 0: from the command line */
}

/* The next key of a --set path at *p: plain up to the next '.', or
 * "quoted" (dots allowed, no '"' inside) followed by '.' or the end.
 * Sets *key and *n to the key's text and *p past it and its dot; *last when it
 * was the final key. */
static int set_path_key(const char *dotted, const char **p, const char **key, size_t *n, bool *last)
{
	const char *s = *p, *end;

	if (*s == '"') {
		end = strchr(s + 1, '"');
		if (!end)
			return kiln_error_set(KILN_EINVALID, "--set %s: unterminated \" in the path", dotted);
		if (end[1] != '.' && end[1] != '\0')
			return kiln_error_set(KILN_EINVALID,
			                      "--set %s: expected '.' or '=' after a quoted key", dotted);
		*key = s + 1;
		*n = (size_t)(end - s - 1);
		end++;
	} else {
		end = strchr(s, '.');
		if (!end)
			end = s + strlen(s);
		if (memchr(s, '"', (size_t)(end - s)))
			return kiln_error_set(KILN_EINVALID, "--set %s: a quoted key must be a whole key",
			                      dotted);
		*key = s;
		*n = (size_t)(end - s);
	}
	if (*n == 0)
		return kiln_error_set(KILN_EINVALID, "--set %s: empty key in the path", dotted);
	*last = *end == '\0';
	*p = *last ? end : end + 1;
	if (!*last && **p == '\0')
		return kiln_error_set(KILN_EINVALID, "--set %s: empty key in the path", dotted);
	return 0;
}

int kiln_yaml_set(kiln_yaml_doc *doc, const char *dotted, const char *value)
{
	kiln_yaml_node *map;
	const char *p = dotted;

	if (!doc->root) {
		doc->root = set_node(doc, KILN_YAML_MAPPING, NULL, 0);
		if (!doc->root)
			return kiln_error_oom(NULL);
	}
	map = doc->root;
	for (;;) {
		const char *key = NULL, *at = p;
		size_t n = 0;
		bool last = false;
		kiln_yaml_node *child = NULL;
		size_t i;
		int rc;

		if ((rc = set_path_key(dotted, &p, &key, &n, &last)) < 0)
			return rc;
		if (map->kind != KILN_YAML_MAPPING)
			return kiln_error_set(KILN_EINVALID, "--set %s: %.*s is not a mapping", dotted,
			                      (int)(at - dotted > 0 ? at - dotted - 1 : 0), dotted);
		for (i = 0; i < map->count; i++)
			if (map->keys[i]->len == n && memcmp(map->keys[i]->value, key, n) == 0)
				break;
		if (i < map->count)
			child = map->items[i];
		if (last) {
			kiln_yaml_node *v = set_node(doc, KILN_YAML_SCALAR, value, strlen(value));
			if (!v)
				return kiln_error_oom(NULL);
			v->cwd_relative = true; /* typed where the user is */
			if (i < map->count) {
				map->items[i] = v;
				return 0;
			}
			kiln_yaml_node *k = set_node(doc, KILN_YAML_SCALAR, key, n);
			return k ? map_append(doc, map, k, v) : kiln_error_oom(NULL);
		}
		if (!child) {
			kiln_yaml_node *k = set_node(doc, KILN_YAML_SCALAR, key, n);
			child = set_node(doc, KILN_YAML_MAPPING, NULL, 0);
			if (!k || !child || map_append(doc, map, k, child) < 0)
				return kiln_error_oom(NULL);
		}
		map = child;
	}
}

int kiln_yaml_load_config(kiln_yaml_doc **out, const char *path, char *const *sets, size_t n)
{
	kiln_yaml_doc *doc = NULL;
	int rc;

	*out = NULL;
	if ((rc = kiln_yaml_load_file_ex(&doc, path, KILN_YAML_EXPAND_ENV)) < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		const char *eq = sets[i];
		char *key;

		/* the first '=' outside a "quoted" key */
		for (bool in_quotes = false; *eq && (in_quotes || *eq != '='); eq++)
			if (*eq == '"')
				in_quotes = !in_quotes;
		if (!*eq)
			eq = NULL;

		if (!eq || eq == sets[i]) {
			rc = kiln_error_set(KILN_EINVALID, "--set %s: expected dotted.key=value", sets[i]);
			break;
		}
		if (!(key = strndup(sets[i], (size_t)(eq - sets[i])))) {
			rc = kiln_error_oom(NULL);
			break;
		}
		rc = kiln_yaml_set(doc, key, eq + 1);
		free(key);
		if (rc < 0)
			break;
	}
	if (rc < 0) {
		kiln_yaml_free(doc);
		return rc;
	}
	*out = doc;
	return 0;
}
