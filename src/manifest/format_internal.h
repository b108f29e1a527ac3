/* What the manifest codec's files (format.c, format_dataset.c, replayed.c) share: the
 * reader of one manifest file over the JSON scanner. Every error it sets is
 * KILN_EINVALID with the message "WHERE: WHAT" (a scanner error names its
 * rejection code and byte offset). Nothing outside the codec includes it. */
#ifndef KILN_MANIFEST_FORMAT_INTERNAL_H
#define KILN_MANIFEST_FORMAT_INTERNAL_H

#include <stddef.h>

#include "core/json.h"

typedef struct kiln_mfmt_jreader {
	kiln_json_scanner *scanner; /* borrowed */
	const char *where;          /* names the file in messages; borrowed */
} kiln_mfmt_jreader;

/* Resets the scanner to text; its top-level value must be an object ("WHAT"). */
int kiln_mfmt_jr_begin(kiln_mfmt_jreader *r, const char *text, size_t len, const char *what);

/* The next token into *t; the end of the text is an error. */
int kiln_mfmt_jr_next(kiln_mfmt_jreader *r, kiln_json_token *t);

/* Skips the value that follows a key. */
int kiln_mfmt_jr_skip(kiln_mfmt_jreader *r);

/* After the top-level value: nothing but whitespace. */
int kiln_mfmt_jr_end(kiln_mfmt_jreader *r);

/* Sets the error "WHERE: WHAT" and returns KILN_EINVALID. */
int kiln_mfmt_jr_bad(const kiln_mfmt_jreader *r, const char *what);

#endif
