/* Bump allocator over a chain of blocks (see arena.h). The head block is the
 * one being filled; older blocks hang off `next`. */
#include "core/arena.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_SIZE (64u * 1024)

struct block {
	struct block *next;
	size_t size, used;
	_Alignas(16) unsigned char data[];
};

struct kiln_arena {
	struct block *head;
};

static struct block *block_new(size_t size)
{
	struct block *b = malloc(sizeof(*b) + size);

	if (!b)
		return NULL;
	b->next = NULL;
	b->size = size;
	b->used = 0;
	return b;
}

kiln_arena *kiln_arena_new(void)
{
	return calloc(1, sizeof(kiln_arena));
}

void kiln_arena_free(kiln_arena *a)
{
	if (!a)
		return;
	kiln_arena_reset(a);
	free(a->head);
	free(a);
}

void kiln_arena_reset(kiln_arena *a)
{
	struct block *b, *keep;

	if (!a->head)
		return;
	/* keep the oldest block (the usual size), free the rest */
	for (keep = a->head; keep->next; keep = keep->next)
		;
	for (b = a->head; b != keep;) {
		struct block *next = b->next;
		free(b);
		b = next;
	}
	keep->used = 0;
	a->head = keep;
}

void *kiln_arena_alloc(kiln_arena *a, size_t size)
{
	struct block *b = a->head;
	size_t need = (size + 15) & ~(size_t)15;

	if (need < size)
		return NULL;
	if (!b || b->size - b->used < need) {
		bool own = need > BLOCK_SIZE / 4;
		struct block *nb = block_new(own ? need : BLOCK_SIZE);
		if (!nb)
			return NULL;
		if (own && b) {
			/* a large allocation gets its own block, parked behind the head */
			nb->next = b->next;
			b->next = nb;
			nb->used = need;
			memset(nb->data, 0, size);
			return nb->data;
		}
		nb->next = b;
		a->head = b = nb;
	}
	void *p = b->data + b->used;
	b->used += need;
	memset(p, 0, size);
	return p;
}

char *kiln_arena_strndup(kiln_arena *a, const char *s, size_t len)
{
	char *p = kiln_arena_alloc(a, len + 1);

	if (!p)
		return NULL;
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

char *kiln_arena_printf(kiln_arena *a, const char *fmt, ...)
{
	va_list ap;
	int n;
	char *p;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	p = kiln_arena_alloc(a, (size_t)n + 1);
	if (!p)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

const char *kiln_arena_dirname(kiln_arena *arena, const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return "";
	if (slash == path)
		return "/";
	return kiln_arena_strndup(arena, path, (size_t)(slash - path));
}
