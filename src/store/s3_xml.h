/* The XML of S3's answers, read without an XML library: errors
 * (<Error><Code>), ListObjectsV2, InitiateMultipartUpload,
 * CompleteMultipartUpload (which can answer 200 with an <Error> inside),
 * ListMultipartUploads and ListParts. A reader walks an answer's elements
 * and reports each one that holds text (a leaf: <Key>a&amp;b</Key>) with the
 * path of element names above it ("ListBucketResult/Contents/Key") and its
 * text decoded (the five entities, numeric references, CDATA), and the end
 * of every element, so a caller collects one record (a <Contents>) at its
 * end. Declarations, comments and processing instructions are skipped,
 * attributes ignored. Anything else that is not well-formed (a tag left
 * open, a mismatched end tag, an unknown entity, a path deeper than
 * KILN_S3_XML_DEPTH, an element name of other bytes than ASCII letters,
 * digits and "_.:-", a NUL byte) is KILN_EINVALID naming the byte offset,
 * so a leaf's text holds no NUL and two names never read as one path. */
#ifndef KILN_STORE_S3_XML_H
#define KILN_STORE_S3_XML_H

#include <stdbool.h>
#include <stddef.h>

#define KILN_S3_XML_DEPTH 8

/* text: the decoded text of a leaf (NUL-terminated), or NULL at the end of
 * an element (path then names the element that ends). Non-zero stops the
 * walk and is returned. */
typedef int (*kiln_s3_xml_cb)(void *ctx, const char *path, const char *text, size_t text_len);

int kiln_s3_xml_walk(const char *xml, size_t len, kiln_s3_xml_cb cb, void *ctx);

/* The text of the first leaf at `path` ("Error/Code") into out (cap bytes,
 * cut to fit); false when there is none or the XML is not well-formed. */
bool kiln_s3_xml_find(const char *xml, size_t len, const char *path, char *out, size_t cap);

/* Decodes %XX escapes in place (keys of a list asked for with
 * encoding-type=url); false on a malformed escape or a decoded NUL. */
bool kiln_s3_xml_url_decode(char *s);

#endif
