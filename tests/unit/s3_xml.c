/* Unit tests for src/store/s3_xml.c: the leaves and element ends of real S3
 * answers (ListObjectsV2 with URL-encoded keys, an error, a 200 answer to
 * CompleteMultipartUpload that holds an error), entities, character
 * references, CDATA, self-closing elements, and malformed XML refused with
 * the byte offset. */
#include "fixture.h"

#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "store/s3_xml.h"

/* Every event as "path=text" or "/path" (an end), one per line. */
static int record(void *ctx, const char *path, const char *text, size_t len)
{
	kiln_buf *b = ctx;

	assert_true(!text || strlen(text) == len);
	if (text)
		return kiln_buf_printf(b, "%s=%s\n", path, text);
	return kiln_buf_printf(b, "/%s\n", path);
}

static void check_walk(const char *xml, const char *want)
{
	kiln_buf b = {0};

	assert_int_equal(kiln_s3_xml_walk(xml, strlen(xml), record, &b), 0);
	assert_int_equal(kiln_buf_putc(&b, '\0'), 0);
	assert_string_equal(b.ptr, want);
	kiln_buf_free(&b);
}

static void test_list_objects_v2(void **state)
{
	static const char xml[] =
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	    "<Name>kiln</Name><Prefix>shards%2F</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys>"
	    "<EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
	    "<Contents><Key>shards/ab/a%20b%26c.jsonl.zst</Key>"
	    "<LastModified>2026-12-02T10:00:00.000Z</"
	    "LastModified><ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag>"
	    "<Size>434234</Size><StorageClass>STANDARD</StorageClass></Contents>"
	    "<Contents><Key>shards/cd/x.jsonl.zst</Key><Size>7</Size><Owner/></Contents>"
	    "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
	    "</ListBucketResult>";
	char key[64];

	(void)state;
	check_walk(xml,
	           "ListBucketResult/Name=kiln\n/ListBucketResult/Name\n"
	           "ListBucketResult/Prefix=shards%2F\n/ListBucketResult/Prefix\n"
	           "ListBucketResult/KeyCount=2\n/ListBucketResult/KeyCount\n"
	           "ListBucketResult/MaxKeys=1000\n/ListBucketResult/MaxKeys\n"
	           "ListBucketResult/EncodingType=url\n/ListBucketResult/EncodingType\n"
	           "ListBucketResult/IsTruncated=true\n/ListBucketResult/IsTruncated\n"
	           "ListBucketResult/Contents/Key=shards/ab/a%20b%26c.jsonl.zst\n"
	           "/ListBucketResult/Contents/Key\n"
	           "ListBucketResult/Contents/LastModified=2026-12-02T10:00:00.000Z\n"
	           "/ListBucketResult/Contents/LastModified\n"
	           "ListBucketResult/Contents/ETag=\"9b2cf535f27731c974343645a3985328\"\n"
	           "/ListBucketResult/Contents/ETag\n"
	           "ListBucketResult/Contents/Size=434234\n/ListBucketResult/Contents/Size\n"
	           "ListBucketResult/Contents/StorageClass=STANDARD\n"
	           "/ListBucketResult/Contents/StorageClass\n/ListBucketResult/Contents\n"
	           "ListBucketResult/Contents/Key=shards/cd/x.jsonl.zst\n/ListBucketResult/Contents/Key\n"
	           "ListBucketResult/Contents/Size=7\n/ListBucketResult/Contents/Size\n"
	           "ListBucketResult/Contents/Owner=\n/ListBucketResult/Contents/Owner\n"
	           "/ListBucketResult/Contents\n"
	           "ListBucketResult/NextContinuationToken=1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=\n"
	           "/ListBucketResult/NextContinuationToken\n/ListBucketResult\n");
	assert_true(kiln_s3_xml_find(xml, strlen(xml), "ListBucketResult/Contents/Key", key, sizeof(key)));
	assert_true(kiln_s3_xml_url_decode(key));
	assert_string_equal(key, "shards/ab/a b&c.jsonl.zst");
}

/* CompleteMultipartUpload may answer 200 and still have failed. */
static void test_errors(void **state)
{
	static const char err[] =
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>\n  "
	    "<Code>SignatureDoesNotMatch</Code>\n  <Message>The request signature we "
	    "calculated does not match</Message>\n  <RequestId>4442587FB7D0A2F9</RequestId>\n"
	    "</Error>\n";
	char code[32], small[8];

	(void)state;
	assert_true(kiln_s3_xml_find(err, strlen(err), "Error/Code", code, sizeof(code)));
	assert_string_equal(code, "SignatureDoesNotMatch");
	assert_true(kiln_s3_xml_find(err, strlen(err), "Error/Message", small, sizeof(small)));
	assert_string_equal(small, "The req"); /* cut to fit */
	assert_false(
	    kiln_s3_xml_find(err, strlen(err), "CompleteMultipartUploadResult/ETag", code, sizeof(code)));
}

static void test_text(void **state)
{
	(void)state;
	check_walk("<a><k>&lt;&amp;&gt;&quot;&apos;&#65;&#x263A;&#x1F600;</k></a>",
	           "a/k=<&>\"'A\xe2\x98\xba\xf0\x9f\x98\x80\n/a/k\n/a\n");
	check_walk("<a><k><![CDATA[<not a tag> & raw]]></k><!-- note --><e/></a>",
	           "a/k=<not a tag> & raw\n/a/k\na/e=\n/a/e\n/a\n");
	check_walk("<a >\r\n <k\tx=\"1\">v</k >\n</a>", "a/k=v\n/a/k\n/a\n");
}

static void check_bad(const char *xml, const char *what)
{
	kiln_buf b = {0};

	assert_int_equal(kiln_s3_xml_walk(xml, strlen(xml), record, &b), KILN_EINVALID);
	if (!strstr(kiln_error_last(), what))
		fail_msg("%s: %s", xml, kiln_error_last());
	kiln_buf_free(&b);
}

static void test_malformed(void **state)
{
	(void)state;
	check_bad("<a><k>v</k>", "an element left open");
	check_bad("<a><k>v</j></a>", "a mismatched end tag at byte 7");
	check_bad("</a>", "an end tag without its start");
	check_bad("<a><k>&nbsp;</k></a>", "an unknown entity");
	check_bad("<a><k>&#0;</k></a>", "a malformed character reference");
	check_bad("<a><k>&#xD800;</k></a>", "a malformed character reference");
	check_bad("<a><k", "a tag left open");
	check_bad("junk<a/>", "text outside the root element");
	check_bad("<a><b><c><d><e><f><g><h><i>x</i></h></g></f></e></d></c></b></a>", "nested too deep");
	check_bad("<a><![CDATA[x</a>", "a CDATA section left open");
	check_bad("", "empty where XML was expected");
}

/* Bytes no S3 element name or text holds (found by tests/fuzz/s3_xml_fuzz.c):
 * with a NUL in a name, <Code\0x> read as the path Error/Code, so a hostile
 * answer could pass one element for another. */
static void test_hostile_bytes(void **state)
{
	static const char nul_name[] = "<Error><Code\0x>v</Code\0x></Error>";
	static const char nul_text[] = "<Error><Code>Sig\0nature</Code></Error>";
	static const char nul_cdata[] = "<a><k><![CDATA[x\0y]]></k></a>";
	char out[32];
	kiln_buf b = {0};

	(void)state;
	assert_int_equal(kiln_s3_xml_walk(nul_name, sizeof(nul_name) - 1, record, &b), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "an invalid element name at byte 12"));
	assert_false(kiln_s3_xml_find(nul_name, sizeof(nul_name) - 1, "Error/Code", out, sizeof(out)));
	assert_int_equal(kiln_s3_xml_walk(nul_text, sizeof(nul_text) - 1, record, &b), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "a NUL byte"));
	assert_int_equal(kiln_s3_xml_walk(nul_cdata, sizeof(nul_cdata) - 1, record, &b), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "a NUL byte"));
	kiln_buf_free(&b);
	check_bad("<a><k&x>v</k&x></a>", "an invalid element name");
	check_bad("<a><\xc3\xa9>v</\xc3\xa9></a>", "an invalid element name");
	check_walk("<a><s3:K_1.x-y>v</s3:K_1.x-y></a>", "a/s3:K_1.x-y=v\n/a/s3:K_1.x-y\n/a\n");
}

static void test_url_decode(void **state)
{
	char ok[] = "a%2Fb%20c+%7e", nul[] = "a%00b", cut[] = "a%2", bad[] = "a%zz";

	(void)state;
	assert_true(kiln_s3_xml_url_decode(ok));
	assert_string_equal(ok, "a/b c+~");
	assert_false(kiln_s3_xml_url_decode(nul));
	assert_false(kiln_s3_xml_url_decode(cut));
	assert_false(kiln_s3_xml_url_decode(bad));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_list_objects_v2),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_text),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_url_decode),
	    cmocka_unit_test(test_hostile_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
