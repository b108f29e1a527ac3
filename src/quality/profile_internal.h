/* What profile.c (accumulate, merge, render) and profile_parse.c (the
 * profile.json decoder and checks) share. */
#ifndef KILN_QUALITY_PROFILE_INTERNAL_H
#define KILN_QUALITY_PROFILE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "quality/profile.h"

/* Frees what f owns and zeroes it. */
void kiln_profile_field_free(kiln_profile_field *f);

/* Appends category name[0..len) with count to f (its lookup index is
 * dropped, rebuilt by the next search); KILN_ENOMEM, KILN_EINVALID past
 * 2^32 categories. */
int kiln_profile_add_category(kiln_profile_field *f, const char *name, size_t len, uint64_t count);

#endif
