/* Subjects to erase (see subject.h): the identifiers as given, the needles
 * (curated token texts, kept sorted and distinct), the pseudonymisation
 * domains of the contracts resolved against (for recomputing tokens in raw
 * bytes) and a copy of the key. Everything a subject holds is personal data
 * or a secret: kiln_subject_free wipes it. */
#include "erase/subject.h"

#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "mask/detect.h"
#include "mask/token.h"

#define TOKEN_CHARS  26
#define MAX_MATCHES  64
#define LEDGER_LABEL "kiln erasure subject v1"

struct ident {
	char *field; /* NULL for a token given as such */
	char *value; /* FIELD=VALUE: the value; a token: the token */
	size_t len;
	char *norm; /* the value in the email normal form (len norm_len) */
	size_t norm_len;
	bool email;    /* a resolved field normalises as an email */
	bool resolved; /* matched a pseudonymised field of some contract */
};

struct needle {
	char *p;
	size_t n;
};

struct domain {
	char *name;
	bool plain, email, keep; /* token of the value as is / email normal form / keep-domain form */
};

struct kiln_subject {
	struct ident *ids;
	size_t n_ids, cap_ids;
	struct needle *needles;
	size_t n_needles, cap_needles;
	struct domain *domains;
	size_t n_domains, cap_domains;
	kiln_key key;
	bool have_key;
	kiln_detector *detector; /* made by the first resolve */
	kiln_json_scanner *scanner;
	kiln_buf lit;  /* a decoded string literal */
	kiln_buf norm; /* a normalised value, a keep-domain needle */
	kiln_detect_match matches[MAX_MATCHES];
};

static char *dup_bytes(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	if (p) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

static void wipe_free(void *p, size_t n)
{
	if (p) {
		sodium_memzero(p, n);
		free(p);
	}
}

static void wipe_buf(kiln_buf *b)
{
	if (b->ptr)
		sodium_memzero(b->ptr, b->cap);
	kiln_buf_free(b);
}

int kiln_subject_new(kiln_subject **out)
{
	kiln_subject *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s || !(s->scanner = kiln_json_scanner_new(NULL))) {
		free(s);
		return kiln_error_oom(NULL);
	}
	s->lit = (kiln_buf)KILN_BUF_INIT(0);
	s->norm = (kiln_buf)KILN_BUF_INIT(0);
	*out = s;
	return 0;
}

void kiln_subject_free(kiln_subject *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_ids; i++) {
		free(s->ids[i].field);
		wipe_free(s->ids[i].value, s->ids[i].len);
		wipe_free(s->ids[i].norm, s->ids[i].norm_len);
	}
	free(s->ids);
	for (size_t i = 0; i < s->n_needles; i++)
		wipe_free(s->needles[i].p, s->needles[i].n);
	free(s->needles);
	for (size_t i = 0; i < s->n_domains; i++)
		free(s->domains[i].name);
	free(s->domains);
	kiln_key_wipe(&s->key);
	kiln_detector_free(s->detector);
	kiln_json_scanner_free(s->scanner);
	wipe_buf(&s->lit);
	wipe_buf(&s->norm);
	sodium_memzero(s->matches, sizeof(s->matches));
	free(s);
}

/* --- identifiers ---------------------------------------------------------- */

static bool is_b32(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '2' && c <= '7');
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static bool is_alnum(unsigned char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* "p<N>_<26 base32>" then the end or "@<domain>" (printable ASCII but '"'
 * and '\\', no space). */
static bool is_token(const char *a)
{
	size_t i = 1, d;

	if (a[0] != 'p' || !is_digit((unsigned char)a[1]))
		return false;
	while (is_digit((unsigned char)a[i]))
		i++;
	if (i > 11 || a[i] != '_')
		return false;
	for (d = 0, i++; d < TOKEN_CHARS; d++, i++)
		if (!is_b32((unsigned char)a[i]))
			return false;
	if (a[i] == '\0')
		return true;
	if (a[i] != '@' || a[i + 1] == '\0')
		return false;
	for (i++; a[i]; i++)
		if ((unsigned char)a[i] <= ' ' || (unsigned char)a[i] >= 0x7f || a[i] == '"' || a[i] == '\\')
			return false;
	return true;
}

static int needle_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);

	return c ? c : (an < bn ? -1 : an > bn);
}

/* Index of the first needle >= p[0..n) (binary search). */
static size_t needle_lower(const kiln_subject *s, const char *p, size_t n)
{
	size_t lo = 0, hi = s->n_needles;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (needle_cmp(s->needles[mid].p, s->needles[mid].n, p, n) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool needle_has(const kiln_subject *s, const char *p, size_t n)
{
	size_t i = needle_lower(s, p, n);

	return i < s->n_needles && s->needles[i].n == n && memcmp(s->needles[i].p, p, n) == 0;
}

static int needle_add(kiln_subject *s, const char *p, size_t n)
{
	size_t i = needle_lower(s, p, n);
	char *copy;

	if (i < s->n_needles && s->needles[i].n == n && memcmp(s->needles[i].p, p, n) == 0)
		return 0;
	if (KILN_ARRAY_GROW(s->needles, s->cap_needles, s->n_needles, NULL) < 0)
		return KILN_ENOMEM;
	if (!(copy = dup_bytes(p, n)))
		return kiln_error_oom(NULL);
	memmove(&s->needles[i + 1], &s->needles[i], (s->n_needles - i) * sizeof(*s->needles));
	s->needles[i] = (struct needle){copy, n};
	s->n_needles++;
	return 0;
}

int kiln_subject_add(kiln_subject *s, const char *arg, const char *where)
{
	struct ident id = {0};
	const char *eq;

	if (is_token(arg)) {
		if (!(id.value = strdup(arg)))
			return kiln_error_oom(NULL);
		id.len = strlen(arg);
	} else if (!(eq = strchr(arg, '='))) {
		if (arg[0] == 'p' && is_digit((unsigned char)arg[1]))
			return kiln_error_set(KILN_EINVALID,
			                      "%s: not a token (p<N>_ and %d base32 characters a-z2-7, "
			                      "optionally @domain)",
			                      where, TOKEN_CHARS);
		return kiln_error_set(KILN_EINVALID,
		                      "%s: expected FIELD=VALUE or a token p<N>_<%d base32 characters>",
		                      where, TOKEN_CHARS);
	} else {
		if (eq == arg)
			return kiln_error_set(KILN_EINVALID, "%s: FIELD=VALUE with an empty field path",
			                      where);
		for (const char *p = arg; p < eq; p++)
			if ((unsigned char)*p <= ' ' || *p == 0x7f)
				return kiln_error_set(
				    KILN_EINVALID, "%s: the field path holds a space or a control character",
				    where);
		if (!eq[1])
			return kiln_error_set(KILN_EINVALID, "%s: %.*s: empty value", where, (int)(eq - arg),
			                      arg);
		id.len = strlen(eq + 1);
		if (!(id.field = dup_bytes(arg, (size_t)(eq - arg))) ||
		    !(id.value = dup_bytes(eq + 1, id.len)) || !(id.norm = malloc(id.len + 1))) {
			free(id.field);
			wipe_free(id.value, id.len);
			return kiln_error_oom(NULL);
		}
		id.norm_len = kiln_token_email_normal(id.norm, id.value, id.len);
		id.norm[id.norm_len] = '\0';
	}
	if (KILN_ARRAY_GROW(s->ids, s->cap_ids, s->n_ids, NULL) < 0) {
		free(id.field);
		wipe_free(id.value, id.len);
		wipe_free(id.norm, id.norm_len);
		return KILN_ENOMEM;
	}
	s->ids[s->n_ids++] = id;
	return 0;
}

/* --- subjects files ------------------------------------------------------- */

static void subjects_free(kiln_subject **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		kiln_subject_free(v[i]);
	free(v);
}

int kiln_subjects_parse(const char *text, size_t len, const char *file, kiln_subject ***out, size_t *out_n)
{
	kiln_subject **v = NULL, *cur = NULL;
	size_t n = 0, cap = 0, lineno = 0, at = 0;
	char where[512], *line = NULL;
	int rc = 0;

	*out = NULL;
	*out_n = 0;
	while (at < len) {
		const char *p = text + at, *nl = memchr(p, '\n', len - at);
		size_t ll = nl ? (size_t)(nl - p) : len - at;
		bool blank = true;

		at += ll + (nl ? 1 : 0);
		lineno++;
		snprintf(where, sizeof(where), "%s:%zu", file, lineno);
		if (ll && p[ll - 1] == '\r')
			ll--;
		if (memchr(p, '\0', ll)) {
			rc = kiln_error_set(KILN_EINVALID, "%s: holds a NUL byte", where);
			goto cleanup;
		}
		for (size_t i = 0; i < ll && blank; i++)
			blank = p[i] == ' ' || p[i] == '\t';
		if (blank) {
			cur = NULL; /* the next identifier starts a new person */
			continue;
		}
		if (p[0] == '#')
			continue;
		if (!cur) {
			if ((rc = KILN_ARRAY_GROW(v, cap, n, NULL)) < 0)
				goto cleanup;
			if ((rc = kiln_subject_new(&cur)) < 0)
				goto cleanup;
			v[n++] = cur;
		}
		if (!(line = dup_bytes(p, ll))) {
			rc = kiln_error_oom(NULL);
			goto cleanup;
		}
		rc = kiln_subject_add(cur, line, where);
		wipe_free(line, ll);
		line = NULL;
		if (rc < 0)
			goto cleanup;
	}
	if (!n) {
		rc = kiln_error_set(KILN_EINVALID, "%s: names no subject", file);
		goto cleanup;
	}
	*out = v;
	*out_n = n;
	return 0;
cleanup:
	subjects_free(v, n);
	return rc;
}

/* --- resolving ------------------------------------------------------------ */

static int domain_note(kiln_subject *s, const char *name, bool plain, bool email, bool keep)
{
	struct domain *d = NULL;

	for (size_t i = 0; i < s->n_domains && !d; i++)
		if (strcmp(s->domains[i].name, name) == 0)
			d = &s->domains[i];
	if (!d) {
		if (KILN_ARRAY_GROW(s->domains, s->cap_domains, s->n_domains, NULL) < 0)
			return KILN_ENOMEM;
		d = &s->domains[s->n_domains];
		*d = (struct domain){0};
		if (!(d->name = strdup(name)))
			return kiln_error_oom(NULL);
		s->n_domains++;
	}
	d->plain |= plain;
	d->email |= email;
	d->keep |= keep;
	return 0;
}

/* The keep-domain needle of an email-normalised value, into s->norm:
 * "p<N>_<token of the part before the last '@'>" then the rest, written as
 * the curator writes it (JSON string characters); without '@' the token of
 * the whole. */
static int keep_domain_needle(kiln_subject *s, const char *domain, const char *v, size_t n)
{
	char token[KILN_TOKEN_MAX];
	const char *at = NULL;
	size_t tn;
	int rc;

	for (size_t i = n; i > 0 && !at; i--)
		if (v[i - 1] == '@')
			at = v + i - 1;
	tn = kiln_token(token, &s->key, domain, strlen(domain), v, at ? (size_t)(at - v) : n);
	kiln_buf_reset(&s->norm);
	if ((rc = kiln_buf_put(&s->norm, token, tn)) < 0)
		return rc;
	if (at && (rc = kiln_buf_put_json_chars(&s->norm, at, n - (size_t)(at - v))) < 0)
		return rc;
	return 0;
}

/* The token of v[0..n) in the email normal form, or as is. */
static size_t token_norm(kiln_subject *s, char out[KILN_TOKEN_MAX], const char *domain, const char *v,
                         size_t n, bool email)
{
	if (email) {
		kiln_buf_reset(&s->norm);
		if (kiln_buf_reserve(&s->norm, n) < 0)
			return 0;
		n = s->norm.len = kiln_token_email_normal(s->norm.ptr, v, n);
		v = s->norm.ptr;
	}
	return kiln_token(out, &s->key, domain, strlen(domain), v, n);
}

static int resolve_field(kiln_subject *s, const kiln_field *f)
{
	int rc;

	if (f->path && (f->pseudo_mode == KILN_PSEUDO_TOKEN || f->pseudo_mode == KILN_PSEUDO_KEEP_DOMAIN)) {
		const char *domain = f->pseudo_domain ? f->pseudo_domain : f->name;
		bool keep = f->pseudo_mode == KILN_PSEUDO_KEEP_DOMAIN;
		bool email = !keep && f->format == KILN_FORMAT_EMAIL;

		if (!domain)
			domain = f->path;
		if ((rc = domain_note(s, domain, !keep && !email, email, keep)) < 0)
			return rc;
		for (size_t i = 0; i < s->n_ids; i++) {
			struct ident *id = &s->ids[i];
			char token[KILN_TOKEN_MAX];
			size_t tn;

			if (!id->field || strcmp(id->field, f->path) != 0)
				continue;
			id->resolved = true;
			if (keep) {
				id->email = true;
				if ((rc = keep_domain_needle(s, domain, id->norm, id->norm_len)) < 0 ||
				    (rc = needle_add(s, s->norm.ptr, s->norm.len)) < 0)
					return rc;
				continue;
			}
			id->email |= email;
			if (!(tn = token_norm(s, token, domain, id->value, id->len, email)))
				return kiln_error_oom(NULL);
			if ((rc = needle_add(s, token, tn)) < 0)
				return rc;
		}
	}
	for (size_t i = 0; i < f->child_count; i++)
		if ((rc = resolve_field(s, f->children[i])) < 0)
			return rc;
	return f->items ? resolve_field(s, f->items) : 0;
}

/* The detector-domain token of a detector match's normalised form, into
 * out; 0 when out of memory. */
static size_t detector_token(kiln_subject *s, char out[KILN_TOKEN_MAX], const kiln_detect_match *m,
                             const char *text)
{
	const char *domain = kiln_detect_domain(m->kind);
	size_t nn;

	kiln_buf_reset(&s->norm);
	if (kiln_buf_reserve(&s->norm, m->len + 1) < 0)
		return 0;
	nn = kiln_detect_normalise(m->kind, text + m->start, m->len, s->norm.ptr, m->len + 1);
	return kiln_token(out, &s->key, domain, strlen(domain), s->norm.ptr, nn);
}

int kiln_subject_resolve(kiln_subject *s, const kiln_contract *contract, const kiln_key *key)
{
	int rc;

	if (s->have_key && sodium_memcmp(s->key.bytes, key->bytes, sizeof(key->bytes)) != 0)
		return kiln_error_set(KILN_EINVALID, "subject: resolved under two different keys");
	if (!s->have_key) {
		s->key = *key;
		s->have_key = true;
	}
	if (!s->detector && (rc = kiln_detector_new(&s->detector)) < 0)
		return rc;
	for (size_t i = 0; i < s->n_ids; i++) {
		struct ident *id = &s->ids[i];
		char token[KILN_TOKEN_MAX];
		size_t count, tn;

		if (!id->field) {
			if ((rc = needle_add(s, id->value, id->len)) < 0)
				return rc;
			continue;
		}
		if (!kiln_utf8_valid(id->value, id->len))
			continue;
		count = kiln_detect(s->detector, id->value, id->len, s->matches, MAX_MATCHES);
		if (count != 1 || s->matches[0].start != 0 || s->matches[0].len != id->len)
			continue;
		if (!(tn = detector_token(s, token, &s->matches[0], id->value)))
			return kiln_error_oom(NULL);
		if ((rc = needle_add(s, token, tn)) < 0)
			return rc;
	}
	return contract && contract->root ? resolve_field(s, contract->root) : 0;
}

int kiln_subject_finish(kiln_subject *s, const char *dataset)
{
	for (size_t i = 0; i < s->n_ids; i++)
		if (s->ids[i].field && !s->ids[i].resolved)
			return kiln_error_set(KILN_EINVALID,
			                      "subject: %s: not a pseudonymised field of any contract of %s",
			                      s->ids[i].field, dataset);
	return 0;
}

size_t kiln_subject_token_count(const kiln_subject *s)
{
	return s->n_needles;
}

const char *kiln_subject_token(const kiln_subject *s, size_t i, size_t *out_len)
{
	if (i >= s->n_needles)
		return NULL;
	if (out_len)
		*out_len = s->needles[i].n;
	return s->needles[i].p;
}

/* --- matching ------------------------------------------------------------- */

static bool token_char(unsigned char c)
{
	return is_b32(c) || c == '_';
}

bool kiln_subject_in_curated(const kiln_subject *s, const char *line, size_t len)
{
	for (size_t i = 0; i < s->n_needles; i++) {
		const char *n = s->needles[i].p, *p = line, *end = line + len;
		size_t nn = s->needles[i].n;

		while ((size_t)(end - p) >= nn && (p = memmem(p, (size_t)(end - p), n, nn))) {
			if ((p == line || !token_char((unsigned char)p[-1])) &&
			    (p + nn == end || !token_char((unsigned char)p[nn])))
				return true;
			p++;
		}
	}
	return false;
}

static bool ascii_eq_ci(const char *a, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
		if (x >= 'A' && x <= 'Z')
			x = (unsigned char)(x - 'A' + 'a');
		if (y >= 'A' && y <= 'Z')
			y = (unsigned char)(y - 'A' + 'a');
		if (x != y)
			return false;
	}
	return true;
}

/* Rules (a) and (b) for one decoded value. */
static bool value_matches(kiln_subject *s, const char *v, size_t n)
{
	char token[KILN_TOKEN_MAX];

	for (size_t i = 0; i < s->n_ids; i++) {
		const struct ident *id = &s->ids[i];

		if (!id->field)
			continue;
		if (id->email) {
			const char *t = v;
			size_t tn = n;

			while (tn && (*t == ' ' || (*t >= '\t' && *t <= '\r'))) {
				t++;
				tn--;
			}
			while (tn && (t[tn - 1] == ' ' || (t[tn - 1] >= '\t' && t[tn - 1] <= '\r')))
				tn--;
			if (tn == id->norm_len && ascii_eq_ci(t, id->norm, tn))
				return true;
		} else if (n == id->len && memcmp(v, id->value, n) == 0) {
			return true;
		}
	}
	if (!s->have_key || !s->n_needles)
		return false;
	for (size_t i = 0; i < s->n_domains; i++) {
		const struct domain *d = &s->domains[i];

		if (d->plain &&
		    needle_has(s, token, kiln_token(token, &s->key, d->name, strlen(d->name), v, n)))
			return true;
		if (d->email || d->keep) {
			size_t tn = token_norm(s, token, d->name, v, n, true);
			if (!tn)
				return true; /* out of memory: err on the side of erasing */
			if (d->email && needle_has(s, token, tn))
				return true;
			if (d->keep) {
				/* s->norm holds the normal form; keep_domain_needle rewrites s->norm */
				kiln_buf copy = KILN_BUF_INIT(0);
				bool hit;
				if (kiln_buf_put(&copy, s->norm.ptr, s->norm.len) < 0 ||
				    keep_domain_needle(s, d->name, copy.ptr, copy.len) < 0) {
					wipe_buf(&copy);
					return true;
				}
				hit = needle_has(s, s->norm.ptr, s->norm.len);
				wipe_buf(&copy);
				if (hit)
					return true;
			}
		}
	}
	return false;
}

/* Rule (c) on valid UTF-8 text: a detector match whose token is a needle. */
static bool detected(kiln_subject *s, const char *text, size_t len)
{
	size_t at = 0;

	if (!s->detector || !s->have_key || !s->n_needles)
		return false;
	while (at < len) {
		size_t count = kiln_detect(s->detector, text + at, len - at, s->matches, MAX_MATCHES),
		       end = 0;
		char token[KILN_TOKEN_MAX];

		if (count == SIZE_MAX || count == 0)
			return false; /* a detector limit: rules (a), (b) and (d) still apply */
		for (size_t i = 0; i < count && i < MAX_MATCHES; i++) {
			size_t tn = detector_token(s, token, &s->matches[i], text + at);
			if (!tn || needle_has(s, token, tn))
				return true;
			end = s->matches[i].start + s->matches[i].len;
		}
		if (count <= MAX_MATCHES || end == 0)
			return false;
		at += end; /* more matches than fit: look again after the last one */
	}
	return false;
}

static int hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* \uXXXX at b[0..len) (b[0] == '\\'): the code unit, or -1. */
static long hex4(const unsigned char *b, size_t len)
{
	long v = 0;

	if (len < 6 || b[1] != 'u')
		return -1;
	for (int i = 2; i < 6; i++) {
		int h = hex_value(b[i]);
		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

static void put_utf8(kiln_buf *o, unsigned long cp)
{
	char *p = o->ptr + o->len;

	if (cp < 0x80) {
		p[0] = (char)cp;
		o->len += 1;
	} else if (cp < 0x800) {
		p[0] = (char)(0xc0 | (cp >> 6));
		p[1] = (char)(0x80 | (cp & 0x3f));
		o->len += 2;
	} else if (cp < 0x10000) {
		p[0] = (char)(0xe0 | (cp >> 12));
		p[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		p[2] = (char)(0x80 | (cp & 0x3f));
		o->len += 3;
	} else {
		p[0] = (char)(0xf0 | (cp >> 18));
		p[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		p[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		p[3] = (char)(0x80 | (cp & 0x3f));
		o->len += 4;
	}
}

/* Decodes the literal starting after the '"' at b[0..len) into s->lit (its
 * escapes decoded, bad ones kept as written; never longer than the input).
 * Returns the bytes consumed, the closing quote included when present. */
static size_t decode_literal(kiln_subject *s, const unsigned char *b, size_t len)
{
	kiln_buf *o = &s->lit;
	size_t q = 0;

	kiln_buf_reset(o);
	while (q < len && b[q] != '"') {
		long u, lo;

		if (b[q] != '\\' || q + 1 >= len) {
			o->ptr[o->len++] = (char)b[q++];
			continue;
		}
		switch (b[q + 1]) {
		case '"':
		case '\\':
		case '/':
			o->ptr[o->len++] = (char)b[q + 1];
			q += 2;
			continue;
		case 'b':
			o->ptr[o->len++] = '\b';
			q += 2;
			continue;
		case 'f':
			o->ptr[o->len++] = '\f';
			q += 2;
			continue;
		case 'n':
			o->ptr[o->len++] = '\n';
			q += 2;
			continue;
		case 'r':
			o->ptr[o->len++] = '\r';
			q += 2;
			continue;
		case 't':
			o->ptr[o->len++] = '\t';
			q += 2;
			continue;
		default:
			break;
		}
		u = hex4(b + q, len - q);
		if (u >= 0xd800 && u <= 0xdbff && q + 6 < len && b[q + 6] == '\\' &&
		    (lo = hex4(b + q + 6, len - q - 6)) >= 0xdc00 && lo <= 0xdfff) {
			put_utf8(o, 0x10000 + (((unsigned long)u - 0xd800) << 10) +
			                ((unsigned long)lo - 0xdc00));
			q += 12;
		} else if (u >= 0 && (u < 0xd800 || u > 0xdfff)) {
			put_utf8(o, (unsigned long)u);
			q += 6;
		} else {
			o->ptr[o->len++] = '\\'; /* kept as written */
			q++;
		}
	}
	return q < len ? q + 1 : q;
}

/* Rule (d): value v[0..n) in b[0..len), not next to an ASCII letter or
 * digit; ci: ASCII case-insensitively. */
static bool bytes_hold(const unsigned char *b, size_t len, const char *v, size_t n, bool ci)
{
	if (!n || n > len)
		return false;
	for (size_t i = 0; i + n <= len; i++) {
		if (ci ? !ascii_eq_ci((const char *)b + i, v, n) : memcmp(b + i, v, n) != 0)
			continue;
		if ((i == 0 || !is_alnum(b[i - 1])) && (i + n == len || !is_alnum(b[i + n])))
			return true;
	}
	return false;
}

bool kiln_subject_in_raw(kiln_subject *s, const void *bytes, size_t len)
{
	const unsigned char *b = bytes;
	size_t i = 0;

	if (!len)
		return false;
	if (kiln_buf_reserve(&s->lit, len) < 0)
		return true; /* out of memory: err on the side of erasing */
	while (i < len) {
		unsigned char c = b[i];

		if (c == '"') {
			i += 1 + decode_literal(s, b + i + 1, len - i - 1);
			if (value_matches(s, s->lit.ptr, s->lit.len) ||
			    (kiln_utf8_valid(s->lit.ptr, s->lit.len) && detected(s, s->lit.ptr, s->lit.len)))
				return true;
		} else if ((c == '-' || is_digit(c)) &&
		           (i == 0 || !(is_alnum(b[i - 1]) || b[i - 1] == '_' || b[i - 1] == '.'))) {
			size_t j = i + 1;
			while (j < len && (is_digit(b[j]) || b[j] == '.' || b[j] == 'e' || b[j] == 'E' ||
			                   b[j] == '+' || b[j] == '-'))
				j++;
			if (value_matches(s, (const char *)b + i, j - i))
				return true;
			i = j;
		} else {
			i++;
		}
	}
	if (kiln_json_check(s->scanner, (const char *)b, len) == KILN_REJECT_NONE)
		return false;
	for (size_t k = 0; k < s->n_ids; k++) {
		const struct ident *id = &s->ids[k];

		if (id->field && (id->email ? bytes_hold(b, len, id->norm, id->norm_len, true)
		                            : bytes_hold(b, len, id->value, id->len, false)))
			return true;
	}
	return kiln_utf8_valid((const char *)b, len) && detected(s, (const char *)b, len);
}

int kiln_subject_ledger_id(const kiln_subject *s, char out[65])
{
	unsigned char k[32], h[32];
	crypto_generichash_state st;

	if (!s->have_key)
		return kiln_error_set(KILN_EINVALID,
		                      "subject: the ledger id needs the dataset's key (no resolve)");
	crypto_generichash(k, sizeof(k), (const unsigned char *)LEDGER_LABEL, strlen(LEDGER_LABEL),
	                   s->key.bytes, sizeof(s->key.bytes));
	crypto_generichash_init(&st, k, sizeof(k), sizeof(h));
	for (size_t i = 0; i < s->n_needles; i++) {
		crypto_generichash_update(&st, (const unsigned char *)s->needles[i].p, s->needles[i].n);
		crypto_generichash_update(&st, (const unsigned char *)"\n", 1);
	}
	crypto_generichash_final(&st, h, sizeof(h));
	sodium_bin2hex(out, 65, h, sizeof(h));
	sodium_memzero(k, sizeof(k));
	sodium_memzero(&st, sizeof(st));
	return 0;
}
