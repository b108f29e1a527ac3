/* libFuzzer target for the loose git object check kiln pull runs on what a
 * bucket holds (src/manifest/loose.c). The input is a name (its first 40
 * bytes) and the stored bytes (the rest). Invariants: the outcome is 0,
 * KILN_EINVALID or KILN_ENOMEM with a one-line message; the content-less
 * check agrees with the decoder; an accepted object is what zlib's own
 * uncompress2 gives (all the input, "<type> <size>\0" and size bytes) and
 * hashes to its name. */
#include <git2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/buf.h"
#include "core/error.h"
#include "manifest/loose.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one_line_message(void)
{
	const char *msg = kiln_error_last();

	if (!msg || !*msg || strchr(msg, '\n'))
		abort();
}

/* zlib's inflate of the whole input must be exactly the header and content. */
static void same_as_zlib(const uint8_t *z, size_t len, git_object_t type, const kiln_buf *content)
{
	char head[64];
	int hlen = snprintf(head, sizeof(head), "%s %zu", git_object_type2string(type), content->len);
	uLongf want = (uLongf)hlen + 1 + content->len, got = want + 1;
	uLong used = (uLong)len;
	unsigned char *raw = malloc(got);

	if (!raw || uncompress2(raw, &got, z, &used) != Z_OK || got != want || used != len ||
	    memcmp(raw, head, (size_t)hlen + 1) != 0 ||
	    memcmp(raw + hlen + 1, content->ptr, content->len) != 0)
		abort();
	free(raw);
}

static void run(const char *hex, const uint8_t *z, size_t len)
{
	kiln_buf content = KILN_BUF_INIT(0);
	git_object_t type = GIT_OBJECT_INVALID;
	git_oid want, got;
	int rc = kiln_git_loose_decode(&content, &type, z, len, hex), check;

	if (rc != 0 && rc != KILN_EINVALID && rc != KILN_ENOMEM)
		abort();
	check = kiln_git_loose_check(z, len, hex);
	if (check != rc && !(rc == KILN_ENOMEM || check == KILN_ENOMEM))
		abort();
	if (rc < 0) {
		one_line_message();
		if (content.len != 0)
			abort();
	} else {
		if (type != GIT_OBJECT_BLOB && type != GIT_OBJECT_TREE && type != GIT_OBJECT_COMMIT &&
		    type != GIT_OBJECT_TAG)
			abort();
		if (content.len > KILN_GIT_LOOSE_MAX || git_oid_fromstr(&want, hex) < 0 ||
		    git_odb_hash(&got, content.ptr, content.len, type) < 0 || !git_oid_equal(&want, &got))
			abort();
		same_as_zlib(z, len, type, &content);
	}
	kiln_buf_free(&content);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char hex[41];

	if (size < 40) {
		run("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391", data, size); /* the empty blob's name */
		return 0;
	}
	memcpy(hex, data, 40);
	hex[40] = '\0';
	run(hex, data + 40, size - 40);
	return 0;
}
