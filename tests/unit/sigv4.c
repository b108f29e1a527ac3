/* Unit tests for src/store/sigv4.c: AWS's published Signature V4 examples
 * for S3 (GET Object with a range, PUT Object with a '$' in the key and a
 * storage class, GET Bucket lifecycle with an empty query value, GET Bucket
 * with two query parameters), their canonical requests byte for byte, and
 * the rules that make S3 differ from a generic signer: the path encoded
 * once, '/' kept in paths and encoded in queries, header values trimmed,
 * the session token signed, and requests that cannot be signed refused.
 * tests/integration/sigv4_botocore.py checks the same code against
 * botocore on generated requests. */
#include "fixture.h"

#include <string.h>

#include "core/error.h"
#include "store/sigv4.h"

/* The examples' credentials and time: 20130524T000000Z. */
static const kiln_sigv4_credentials example_creds = {
    .access_key = "AKIAIOSFODNN7EXAMPLE", .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"};
#define EXAMPLE_TIME ((time_t)1369353600)
#define EXAMPLE_HOST "examplebucket.s3.amazonaws.com"

static kiln_sigv4_request example(const char *method, const char *path)
{
	return (kiln_sigv4_request){.method = method,
	                            .host = EXAMPLE_HOST,
	                            .path = path,
	                            .payload_sha256 = KILN_SIGV4_EMPTY_SHA256,
	                            .region = "us-east-1",
	                            .service = "s3",
	                            .now = EXAMPLE_TIME};
}

static void check_signature(const kiln_sigv4_request *r, const char *want)
{
	kiln_sigv4_signed s;

	assert_int_equal(kiln_sigv4_sign(&s, r, &example_creds), 0);
	assert_string_equal(s.signature, want);
	kiln_sigv4_signed_free(&s);
}

static void check_canonical(const kiln_sigv4_request *r, const char *want)
{
	kiln_buf b = {0};

	assert_int_equal(kiln_sigv4_canonical_request(&b, r, &example_creds), 0);
	assert_int_equal(kiln_buf_putc(&b, '\0'), 0);
	assert_string_equal(b.ptr, want);
	kiln_buf_free(&b);
}

static void test_get_object(void **state)
{
	kiln_sigv4_pair range = {"Range", "bytes=0-9"};
	kiln_sigv4_request r = example("GET", "/test.txt");
	kiln_sigv4_signed s;

	(void)state;
	r.headers = &range;
	r.header_count = 1;
	check_canonical(&r, "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
	                    "x-amz-content-sha256:" KILN_SIGV4_EMPTY_SHA256 "\n"
	                    "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-"
	                    "date\n" KILN_SIGV4_EMPTY_SHA256);
	check_signature(&r, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	assert_int_equal(kiln_sigv4_sign(&s, &r, &example_creds), 0);
	assert_string_equal(s.authorization,
	                    "Authorization: AWS4-HMAC-SHA256 "
	                    "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
	                    "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
	                    "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	assert_string_equal(s.amz_date, "x-amz-date: 20130524T000000Z");
	assert_string_equal(s.content_sha256, "x-amz-content-sha256: " KILN_SIGV4_EMPTY_SHA256);
	assert_string_equal(s.security_token.ptr, "");
	kiln_sigv4_signed_free(&s);
}

static void test_put_object(void **state)
{
	static const char body[] = "Welcome to Amazon S3.";
	char hash[65];
	kiln_sigv4_pair headers[] = {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
	                             {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
	kiln_sigv4_request r = example("PUT", "/test$file.text");

	(void)state;
	kiln_sigv4_sha256_hex(hash, body, strlen(body));
	assert_string_equal(hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
	r.payload_sha256 = hash;
	r.headers = headers;
	r.header_count = 2;
	check_canonical(
	    &r, "PUT\n/test%24file.text\n\ndate:Fri, 24 May 2013 00:00:00 GMT\n"
	        "host:examplebucket.s3.amazonaws.com\n"
	        "x-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072\n"
	        "x-amz-date:20130524T000000Z\nx-amz-storage-class:REDUCED_REDUNDANCY\n\n"
	        "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n"
	        "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
	check_signature(&r, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

static void test_bucket_lifecycle(void **state)
{
	kiln_sigv4_pair q = {"lifecycle", ""};
	kiln_sigv4_request r = example("GET", "/");

	(void)state;
	r.query = &q;
	r.query_count = 1;
	check_canonical(
	    &r,
	    "GET\n/\nlifecycle=\nhost:examplebucket.s3.amazonaws.com\n"
	    "x-amz-content-sha256:" KILN_SIGV4_EMPTY_SHA256 "\n"
	    "x-amz-date:20130524T000000Z\n\nhost;x-amz-content-sha256;x-amz-date\n" KILN_SIGV4_EMPTY_SHA256);
	check_signature(&r, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

static void test_list_objects(void **state)
{
	/* given out of order: the canonical query sorts them */
	kiln_sigv4_pair q[] = {{"prefix", "J"}, {"max-keys", "2"}};
	kiln_sigv4_request r = example("GET", "/");

	(void)state;
	r.query = q;
	r.query_count = 2;
	check_signature(&r, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

static void check_encoded(bool path, const char *in, const char *want)
{
	kiln_buf b = {0};
	kiln_sigv4_pair q = {in, in};

	if (path)
		assert_int_equal(kiln_sigv4_encode_path(&b, in), 0);
	else
		assert_int_equal(kiln_sigv4_query(&b, &q, 1), 0);
	assert_int_equal(kiln_buf_putc(&b, '\0'), 0);
	assert_string_equal(b.ptr, want);
	kiln_buf_free(&b);
}

static void test_encoding(void **state)
{
	(void)state;
	check_encoded(true, "/shards/ab/x.jsonl.zst", "/shards/ab/x.jsonl.zst");
	check_encoded(true, "/a b+c%d~e", "/a%20b%2Bc%25d~e");
	check_encoded(true, "/caf\xc3\xa9", "/caf%C3%A9");
	check_encoded(true, "", "/");
	/* a query encodes '/' too, and keeps the value's own '=' encoded */
	check_encoded(false, "a/b=c", "a%2Fb%3Dc=a%2Fb%3Dc");
}

/* Header values are trimmed and inner runs of spaces collapsed; names are
 * lower-cased; the session token is a signed header. */
static void test_headers_and_token(void **state)
{
	kiln_sigv4_credentials creds = example_creds;
	kiln_sigv4_pair h[] = {{"X-Amz-Meta-Note", "  two   spaces\tand a tab  "}};
	kiln_sigv4_request r = example("HEAD", "/k");
	kiln_sigv4_signed s;
	kiln_buf b = {0};

	(void)state;
	creds.session_token = "FQoGZXIvYXdzEXAMPLE//token==";
	r.headers = h;
	r.header_count = 1;
	assert_int_equal(kiln_sigv4_canonical_request(&b, &r, &creds), 0);
	assert_int_equal(kiln_buf_putc(&b, '\0'), 0);
	assert_non_null(strstr(b.ptr, "\nx-amz-meta-note:two spaces and a tab\n"));
	assert_non_null(strstr(b.ptr, "\nx-amz-security-token:FQoGZXIvYXdzEXAMPLE//token==\n"));
	assert_non_null(
	    strstr(b.ptr, "\nhost;x-amz-content-sha256;x-amz-date;x-amz-meta-note;x-amz-security-token\n"));
	kiln_buf_free(&b);
	assert_int_equal(kiln_sigv4_sign(&s, &r, &creds), 0);
	assert_string_equal(s.security_token.ptr, "x-amz-security-token: FQoGZXIvYXdzEXAMPLE//token==");
	kiln_sigv4_signed_free(&s);
}

static void test_refused(void **state)
{
	kiln_sigv4_credentials none = {0};
	kiln_sigv4_pair twice[] = {{"Range", "bytes=0-1"}, {"range", "bytes=2-3"}};
	kiln_sigv4_pair broken[] = {{"x-amz-meta-a", "one\r\nInjected: yes"}};
	kiln_sigv4_pair auth[] = {{"Authorization", "x"}};
	kiln_sigv4_request r = example("GET", "/k");
	kiln_sigv4_signed s;

	(void)state;
	assert_int_equal(kiln_sigv4_sign(&s, &r, &none), KILN_EINVALID);
	r.headers = twice;
	r.header_count = 2;
	assert_int_equal(kiln_sigv4_sign(&s, &r, &example_creds), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "range given twice"));
	r.headers = broken;
	r.header_count = 1;
	assert_int_equal(kiln_sigv4_sign(&s, &r, &example_creds), KILN_EINVALID);
	assert_non_null(strstr(kiln_error_last(), "line break"));
	r.headers = auth;
	assert_int_equal(kiln_sigv4_sign(&s, &r, &example_creds), KILN_EINVALID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_get_object),       cmocka_unit_test(test_put_object),
	    cmocka_unit_test(test_bucket_lifecycle), cmocka_unit_test(test_list_objects),
	    cmocka_unit_test(test_encoding),         cmocka_unit_test(test_headers_and_token),
	    cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
