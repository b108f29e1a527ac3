/* AWS Signature Version 4 (see sigv4.h). */
#include "store/sigv4.h"

#include <ctype.h>
#include <stdbool.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define MAX_HEADERS 32

void kiln_sigv4_sha256_hex(char out[65], const void *data, size_t len)
{
	unsigned char digest[crypto_hash_sha256_BYTES];

	crypto_hash_sha256(digest, data, len);
	sodium_bin2hex(out, 65, digest, sizeof(digest));
}

static bool unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/* Appends s URI-encoded; keep_slash for paths. */
static int encode(kiln_buf *out, const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	int rc;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (unreserved(*p) || (keep_slash && *p == '/'))
			rc = kiln_buf_putc(out, (char)*p);
		else
			rc = kiln_buf_printf(out, "%%%c%c", hex[*p >> 4], hex[*p & 15]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int kiln_sigv4_encode_path(kiln_buf *out, const char *path)
{
	if (!path || !*path)
		return kiln_buf_putc(out, '/');
	return encode(out, path, true);
}

struct encoded_pair {
	char *name, *value;
};

static int by_name_then_value(const void *a, const void *b)
{
	const struct encoded_pair *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

static char *encoded_copy(const char *s)
{
	kiln_buf b = {0};

	if (encode(&b, s, false) < 0 || kiln_buf_putc(&b, '\0') < 0) {
		kiln_buf_free(&b);
		return NULL;
	}
	return b.ptr;
}

int kiln_sigv4_query(kiln_buf *out, const kiln_sigv4_pair *query, size_t count)
{
	struct encoded_pair *e = count ? calloc(count, sizeof(*e)) : NULL;
	int rc = 0;

	if (count && !e)
		return kiln_error_oom(NULL);
	for (size_t i = 0; i < count && rc == 0; i++)
		if (!(e[i].name = encoded_copy(query[i].name)) ||
		    !(e[i].value = encoded_copy(query[i].value ? query[i].value : "")))
			rc = kiln_error_oom(NULL);
	if (rc == 0 && count > 1)
		qsort(e, count, sizeof(*e), by_name_then_value);
	for (size_t i = 0; i < count && rc == 0; i++)
		rc = kiln_buf_printf(out, "%s%s=%s", i ? "&" : "", e[i].name, e[i].value);
	for (size_t i = 0; i < count; i++) {
		free(e[i].name);
		free(e[i].value);
	}
	free(e);
	return rc;
}

/* A header to sign: its lower-case name and its value with spaces trimmed
 * and runs of spaces collapsed (AWS's canonical form). */
struct canonical_header {
	char name[64];
	kiln_buf value;
};

static int by_header_name(const void *a, const void *b)
{
	return strcmp(((const struct canonical_header *)a)->name, ((const struct canonical_header *)b)->name);
}

static int add_header(struct canonical_header *h, size_t *n, const char *name, const char *value)
{
	size_t len = strlen(name);
	bool space = false;
	int rc;

	if (*n == MAX_HEADERS)
		return kiln_error_set(KILN_EINVALID, "sigv4: more than %d headers to sign", MAX_HEADERS);
	if (len == 0 || len >= sizeof(h->name))
		return kiln_error_set(KILN_EINVALID, "sigv4: a header name of %zu bytes", len);
	for (size_t i = 0; i <= len; i++)
		h[*n].name[i] = (char)tolower((unsigned char)name[i]);
	if (strcmp(h[*n].name, "authorization") == 0)
		return kiln_error_set(KILN_EINVALID, "sigv4: Authorization is not signed");
	for (size_t i = 0; i < *n; i++)
		if (strcmp(h[i].name, h[*n].name) == 0)
			return kiln_error_set(KILN_EINVALID, "sigv4: header %s given twice", h[*n].name);
	memset(&h[*n].value, 0, sizeof(h[*n].value));
	(*n)++;
	for (const char *p = value; *p; p++) {
		if (*p == '\r' || *p == '\n')
			return kiln_error_set(KILN_EINVALID, "sigv4: header %s: a line break in its value",
			                      h[*n - 1].name);
		if (*p == ' ' || *p == '\t') {
			space = h[*n - 1].value.len > 0;
			continue;
		}
		if ((space && (rc = kiln_buf_putc(&h[*n - 1].value, ' ')) < 0) ||
		    (rc = kiln_buf_putc(&h[*n - 1].value, *p)) < 0)
			return rc;
		space = false;
	}
	return kiln_buf_putc(&h[*n - 1].value, '\0');
}

static void amz_date(char out[17], time_t now)
{
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* The headers signed, sorted; *n of them (free their values). */
static int signed_headers(struct canonical_header h[MAX_HEADERS], size_t *n, const kiln_sigv4_request *r,
                          const kiln_sigv4_credentials *c)
{
	char date[17];
	int rc;

	*n = 0;
	amz_date(date, r->now);
	if ((rc = add_header(h, n, "host", r->host)) < 0 ||
	    (rc = add_header(h, n, "x-amz-content-sha256", r->payload_sha256)) < 0 ||
	    (rc = add_header(h, n, "x-amz-date", date)) < 0 ||
	    (c->session_token && (rc = add_header(h, n, "x-amz-security-token", c->session_token)) < 0))
		return rc;
	for (size_t i = 0; i < r->header_count; i++)
		if ((rc = add_header(h, n, r->headers[i].name, r->headers[i].value)) < 0)
			return rc;
	qsort(h, *n, sizeof(*h), by_header_name);
	return 0;
}

static void free_headers(struct canonical_header *h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		kiln_buf_free(&h[i].value);
}

static int canonical(kiln_buf *out, kiln_buf *names, const kiln_sigv4_request *r,
                     const kiln_sigv4_credentials *c)
{
	struct canonical_header h[MAX_HEADERS];
	size_t n = 0;
	int rc;

	if (!r->payload_sha256 || !r->host || !r->method)
		return kiln_error_set(KILN_EINVALID, "sigv4: a request without method, host or payload hash");
	if ((rc = signed_headers(h, &n, r, c)) < 0)
		goto done;
	if ((rc = kiln_buf_printf(out, "%s\n", r->method)) < 0 ||
	    (rc = kiln_sigv4_encode_path(out, r->path)) < 0 || (rc = kiln_buf_putc(out, '\n')) < 0 ||
	    (rc = kiln_sigv4_query(out, r->query, r->query_count)) < 0 || (rc = kiln_buf_putc(out, '\n')) < 0)
		goto done;
	for (size_t i = 0; i < n; i++)
		if ((rc = kiln_buf_printf(out, "%s:%s\n", h[i].name, h[i].value.ptr)) < 0 ||
		    (rc = kiln_buf_printf(names, "%s%s", i ? ";" : "", h[i].name)) < 0)
			goto done;
	if ((rc = kiln_buf_printf(out, "\n%.*s\n%s", (int)names->len, names->ptr, r->payload_sha256)) < 0)
		goto done;
done:
	free_headers(h, n);
	return rc;
}

int kiln_sigv4_canonical_request(kiln_buf *out, const kiln_sigv4_request *r, const kiln_sigv4_credentials *c)
{
	kiln_buf names = {0};
	int rc = canonical(out, &names, r, c);

	kiln_buf_free(&names);
	return rc;
}

static void hmac(unsigned char out[32], const void *key, size_t key_len, const char *msg, size_t msg_len)
{
	crypto_auth_hmacsha256_state st;

	crypto_auth_hmacsha256_init(&st, key, key_len);
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)msg, msg_len);
	crypto_auth_hmacsha256_final(&st, out);
	sodium_memzero(&st, sizeof(st));
}

int kiln_sigv4_sign(kiln_sigv4_signed *out, const kiln_sigv4_request *r, const kiln_sigv4_credentials *c)
{
	kiln_buf creq = {0}, names = {0}, to_sign = {0}, secret = {0};
	unsigned char key[32], sig[32];
	char date[17], creq_hash[65];
	int rc;

	memset(out, 0, sizeof(*out));
	if (!c || !c->access_key || !*c->access_key || !c->secret_key || !*c->secret_key)
		return kiln_error_set(KILN_EINVALID, "sigv4: no credentials");
	amz_date(date, r->now);
	if ((rc = canonical(&creq, &names, r, c)) < 0)
		goto done;
	kiln_sigv4_sha256_hex(creq_hash, creq.ptr, creq.len);
	if ((rc = kiln_buf_printf(&to_sign, "AWS4-HMAC-SHA256\n%s\n%.8s/%s/%s/aws4_request\n%s", date, date,
	                          r->region, r->service, creq_hash)) < 0 ||
	    (rc = kiln_buf_printf(&secret, "AWS4%s", c->secret_key)) < 0)
		goto done;
	hmac(key, secret.ptr, secret.len, date, 8);
	hmac(key, key, sizeof(key), r->region, strlen(r->region));
	hmac(key, key, sizeof(key), r->service, strlen(r->service));
	hmac(key, key, sizeof(key), "aws4_request", 12);
	hmac(sig, key, sizeof(key), to_sign.ptr, to_sign.len);
	sodium_bin2hex(out->signature, sizeof(out->signature), sig, sizeof(sig));
	if (snprintf(out->authorization, sizeof(out->authorization),
	             "Authorization: AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, "
	             "SignedHeaders=%.*s, Signature=%s",
	             c->access_key, date, r->region, r->service, (int)names.len, names.ptr,
	             out->signature) >= (int)sizeof(out->authorization)) {
		rc = kiln_error_set(KILN_EINVALID, "sigv4: the Authorization header is too long");
		goto done;
	}
	snprintf(out->amz_date, sizeof(out->amz_date), "x-amz-date: %s", date);
	snprintf(out->content_sha256, sizeof(out->content_sha256), "x-amz-content-sha256: %s",
	         r->payload_sha256);
	if (c->session_token)
		rc = kiln_buf_printf(&out->security_token, "x-amz-security-token: %s", c->session_token);
	else
		rc = kiln_buf_putc(&out->security_token, '\0');
done:
	sodium_memzero(key, sizeof(key));
	if (secret.ptr)
		sodium_memzero(secret.ptr, secret.len);
	kiln_buf_free(&secret);
	kiln_buf_free(&creq);
	kiln_buf_free(&names);
	kiln_buf_free(&to_sign);
	if (rc < 0)
		kiln_sigv4_signed_free(out);
	return rc;
}

void kiln_sigv4_signed_free(kiln_sigv4_signed *out)
{
	if (out->security_token.ptr)
		sodium_memzero(out->security_token.ptr, out->security_token.len);
	kiln_buf_free(&out->security_token);
}
