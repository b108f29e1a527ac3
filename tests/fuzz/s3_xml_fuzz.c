/* libFuzzer target for the S3 XML reader (src/store/s3_xml.c) on hostile
 * answers: walks the input and checks what every callback gets (a path of
 * at most KILN_S3_XML_DEPTH well-formed names; text NUL-terminated at its
 * length, holding no other NUL), that a callback's value stops the walk,
 * finds the leaves the client reads (Error/Code, the listing, multipart
 * answers) and URL-decodes every leaf, aborting on a broken invariant. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "store/s3_xml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	size_t events, leaves;
};

static size_t depth_of(const char *path)
{
	size_t n = 1;

	for (const char *c = path; *c; c++)
		n += *c == '/';
	return n;
}

static int on_event(void *ctx, const char *path, const char *text, size_t len)
{
	struct seen *s = ctx;

	s->events++;
	if (!path || !*path || depth_of(path) > KILN_S3_XML_DEPTH || path[strlen(path) - 1] == '/')
		abort();
	if (text) {
		char *copy;

		s->leaves++;
		if (text[len] != '\0' || strlen(text) != len)
			abort();
		/* a listed key is URL-decoded in place: never longer, NUL-terminated */
		if (!(copy = strdup(text)))
			abort();
		if (kiln_s3_xml_url_decode(copy) && strlen(copy) > strlen(text))
			abort();
		free(copy);
	}
	return 0;
}

static int stop_at_first(void *ctx, const char *path, const char *text, size_t len)
{
	(void)ctx, (void)path, (void)text, (void)len;
	return 7;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const paths[] = {
	    "Error/Code",
	    "Error/Message",
	    "ListBucketResult/Contents/Key",
	    "ListBucketResult/NextContinuationToken",
	    "InitiateMultipartUploadResult/UploadId",
	    "ListMultipartUploadsResult/Upload/Initiated",
	};
	const char *xml = (const char *)data;
	struct seen s = {0};
	char out[64];
	int rc, first;

	rc = kiln_s3_xml_walk(xml, size, on_event, &s);
	if (rc > 0 || (rc < 0 && (rc != KILN_EINVALID || !kiln_error_last()[0])))
		abort();
	/* a callback's non-zero value stops the walk and comes back as it is */
	first = kiln_s3_xml_walk(xml, size, stop_at_first, NULL);
	if (s.events > 0 && first != 7)
		abort();
	if (s.events == 0 && first != rc)
		abort();
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		memset(out, 'x', sizeof(out));
		if (kiln_s3_xml_find(xml, size, paths[i], out, sizeof(out)) &&
		    memchr(out, '\0', sizeof(out)) == NULL)
			abort();
		if (kiln_s3_xml_find(xml, size, paths[i], out, 1) && out[0] != '\0')
			abort();
	}
	kiln_error_clear();
	return 0;
}
