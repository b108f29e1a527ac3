/* A PII screen: the free-text detectors (detect.h) behind a lock, for a
 * caller that asks from several threads whether a value looks personal
 * (the data profile, before a string becomes a category name). One
 * detector, serialised: callers ask rarely (a new name, not every value). */
#ifndef KILN_MASK_SCREEN_H
#define KILN_MASK_SCREEN_H

#include <stddef.h>

typedef struct kiln_pii_screen kiln_pii_screen;

int kiln_pii_screen_new(kiln_pii_screen **out);
/* Takes void * to serve as a callback's context; NULL is accepted. */
void kiln_pii_screen_free(void *screen);
/* 1 when a detector finds personal data in v[0..len) (valid UTF-8), 0 when
 * none does, a negative KILN_E* code when detection failed. */
int kiln_pii_screen_flags(void *screen, const char *v, size_t len);

#endif
