/* The manifest codec: the files of a dataset commit (docs/FORMATS.md,
 * "Manifest repository") are rendered and parsed here and nowhere else,
 * beside the rules that go with them (the names of datasets, branches and
 * tags). Everything else in kiln calls these functions. */
#ifndef KILN_MANIFEST_FORMAT_H
#define KILN_MANIFEST_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"

/* The longest dataset, branch or tag name. */
#define KILN_MFMT_NAME_MAX 128

/* Whether s[0..n) is a dataset, branch or tag name:
 * [a-z0-9][a-z0-9._-]{0,127}. (Git's own rules, "..", ".lock", are checked
 * on the whole ref name by the callers that build one.) */
bool kiln_mfmt_name_valid_n(const char *s, size_t n);

/* The same for a NUL-terminated s; NULL is not a name. */
bool kiln_mfmt_name_valid(const char *s);

#endif
