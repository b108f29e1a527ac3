/* Bump allocator: many small allocations freed together. Used for data
 * that lives and dies as one (a compiled contract, a batch). */
#ifndef KILN_CORE_ARENA_H
#define KILN_CORE_ARENA_H

#include <stddef.h>

typedef struct kiln_arena kiln_arena;

kiln_arena *kiln_arena_new(void);
/* Frees every block; NULL is fine. */
void kiln_arena_free(kiln_arena *arena);
/* Forgets every allocation but keeps the first block for reuse. */
void kiln_arena_reset(kiln_arena *arena);

/* Zeroed, 16-byte aligned memory living until free/reset; NULL when out of memory. */
void *kiln_arena_alloc(kiln_arena *arena, size_t size);
/* NUL-terminated copy of s[0..len). */
char *kiln_arena_strndup(kiln_arena *arena, const char *s, size_t len);
char *kiln_arena_printf(kiln_arena *arena, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The folder part of `path`: "" for a bare name, "/" for "/name"; NULL when
 * out of memory. */
const char *kiln_arena_dirname(kiln_arena *arena, const char *path);

#endif
