/* Record curation: compact re-serialisation with pseudonymisation (see
 * curate.h, docs/FORMATS.md for the token inputs).
 *
 * frames[i] is the container open at depth i and the field it follows
 * (NULL: copied as is, e.g. an unknown field's value). `skip` counts the
 * containers of a dropped or redacted value still open: while it is non-zero
 * tokens are consumed without output. `drop_next` says the value after the
 * current key is dropped (its key was not written). */
#include "mask/curate.h"

#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "mask/detect.h"
#include "mask/token.h"

#define MAX_MATCHES 256

/* Tokens of recent values, direct-mapped: the same users, emails and
 * addresses recur across records, and an HMAC costs far more than a lookup.
 * The values are personal data: the cache is wiped when the curator goes. */
#define CACHE_SLOTS 16384
#define CACHE_VALUE_MAX 46

struct cache_slot {
	const char *domain; /* NULL: empty */
	uint64_t hash;
	uint8_t len, token_len;
	char value[CACHE_VALUE_MAX];
	char token[KILN_TOKEN_MAX];
};

struct cframe {
	const kiln_field *field;
	bool is_object;
	uint32_t emitted;
};

struct kiln_curator {
	kiln_curator_options opt;
	kiln_json_scanner *scanner;
	kiln_detector *detector;
	struct cframe *frames;
	kiln_buf text;    /* a decoded string value */
	kiln_buf rewrite; /* a free-text value with its matches replaced */
	kiln_buf split;   /* the split key's curated value */
	kiln_detect_match matches[MAX_MATCHES];
	struct cache_slot *cache;
};

int kiln_curator_new(kiln_curator **out, const kiln_curator_options *opt)
{
	kiln_curator *c = calloc(1, sizeof(*c));
	int rc;

	*out = NULL;
	if (!c)
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	c->opt = *opt;
	if (!c->opt.limits.max_depth)
		c->opt.limits.max_depth = KILN_JSON_DEFAULT_DEPTH;
	c->opt.limits.allow_duplicate_keys = true; /* the validator has rejected them already */
	c->scanner = kiln_json_scanner_new(&c->opt.limits);
	c->frames = calloc((size_t)c->opt.limits.max_depth + 1, sizeof(*c->frames));
	c->cache = calloc(CACHE_SLOTS, sizeof(*c->cache));
	if (!c->scanner || !c->frames || !c->cache) {
		kiln_curator_free(c);
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	}
	if ((rc = kiln_detector_new(&c->detector)) < 0) {
		kiln_curator_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void kiln_curator_free(kiln_curator *c)
{
	if (!c)
		return;
	kiln_json_scanner_free(c->scanner);
	kiln_detector_free(c->detector);
	free(c->frames);
	kiln_buf_free(&c->text);
	kiln_buf_free(&c->rewrite);
	kiln_buf_free(&c->split);
	if (c->cache) {
		sodium_memzero(c->cache, CACHE_SLOTS * sizeof(*c->cache));
		free(c->cache);
	}
	free(c);
}

/* kiln_token through the cache. `domain` must be a string that lives as long
 * as the curator (a field's or a detector's), compared by address. */
static size_t token_of(kiln_curator *c, char out[KILN_TOKEN_MAX], const char *domain, const char *v, size_t n)
{
	struct cache_slot *slot;
	uint64_t h;

	if (n > CACHE_VALUE_MAX)
		return kiln_token(out, c->opt.key, domain, strlen(domain), v, n);
	h = kiln_json_hash(v, n) ^ (uint64_t)(uintptr_t)domain * 0x9e3779b97f4a7c15ull;
	slot = &c->cache[h & (CACHE_SLOTS - 1)];
	if (slot->domain == domain && slot->hash == h && slot->len == n && memcmp(slot->value, v, n) == 0) {
		memcpy(out, slot->token, (size_t)slot->token_len + 1);
		return slot->token_len;
	}
	size_t tn = kiln_token(out, c->opt.key, domain, strlen(domain), v, n);
	slot->domain = domain;
	slot->hash = h;
	slot->len = (uint8_t)n;
	memcpy(slot->value, v, n);
	slot->token_len = (uint8_t)tn;
	memcpy(slot->token, out, tn + 1);
	return tn;
}

/* The decoded bytes of a string token (borrowed from the text or c->text). */
static int decode(kiln_curator *c, const kiln_json_token *t, const char **out, size_t *out_len)
{
	int rc;

	if (!(t->flags & KILN_JSON_ESCAPED)) {
		*out = t->ptr;
		*out_len = t->len;
		return 0;
	}
	kiln_buf_reset(&c->text);
	if ((rc = kiln_buf_reserve(&c->text, t->len)) < 0)
		return rc;
	c->text.len = kiln_json_unescape(c->text.ptr, c->text.cap, t);
	*out = c->text.ptr;
	*out_len = c->text.len;
	return 0;
}

static bool is_trim_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

/* Email normal form: ASCII whitespace trimmed, ASCII letters lower-cased,
 * into c->rewrite. */
static int email_normal(kiln_curator *c, const char *s, size_t n, const char **out, size_t *out_len)
{
	int rc;

	while (n && is_trim_space(*s)) {
		s++;
		n--;
	}
	while (n && is_trim_space(s[n - 1]))
		n--;
	kiln_buf_reset(&c->rewrite);
	if ((rc = kiln_buf_put(&c->rewrite, s, n)) < 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (c->rewrite.ptr[i] >= 'A' && c->rewrite.ptr[i] <= 'Z')
			c->rewrite.ptr[i] = (char)(c->rewrite.ptr[i] - 'A' + 'a');
	*out = c->rewrite.ptr;
	*out_len = n;
	return 0;
}

static int put_token(kiln_curator *c, kiln_buf *out, const kiln_field *f, const char *v, size_t n)
{
	char token[KILN_TOKEN_MAX];
	size_t tn = token_of(c, token, f->pseudo_domain, v, n);
	int rc;

	if ((rc = kiln_buf_putc(out, '"')) < 0 || (rc = kiln_buf_put(out, token, tn)) < 0)
		return rc;
	return kiln_buf_putc(out, '"');
}

/* "p1_<token of the local part>@domain" for an email-like value. */
static int put_keep_domain(kiln_curator *c, kiln_buf *out, const kiln_field *f, const char *s, size_t n)
{
	char token[KILN_TOKEN_MAX];
	const char *v, *at = NULL;
	size_t vn, tn;
	int rc;

	if ((rc = email_normal(c, s, n, &v, &vn)) < 0)
		return rc;
	for (size_t i = vn; i > 0; i--)
		if (v[i - 1] == '@') {
			at = v + i - 1;
			break;
		}
	if (!at)
		return put_token(c, out, f, v, vn); /* no domain to keep */
	tn = token_of(c, token, f->pseudo_domain, v, (size_t)(at - v));
	if ((rc = kiln_buf_putc(out, '"')) < 0 || (rc = kiln_buf_put(out, token, tn)) < 0)
		return rc;
	if ((rc = kiln_buf_put_json_chars(out, at, vn - (size_t)(at - v))) < 0)
		return rc;
	return kiln_buf_putc(out, '"');
}

/* A free-text value: detected personal data replaced by tokens of the
 * detector's domain; unchanged text is written back as it was. */
static int put_scanned(kiln_curator *c, kiln_buf *out, const kiln_json_token *t)
{
	const char *s;
	size_t n, count, at = 0;
	char norm[512], token[KILN_TOKEN_MAX];
	int rc;

	if ((rc = decode(c, t, &s, &n)) < 0)
		return rc;
	count = kiln_detect(c->detector, s, n, c->matches, MAX_MATCHES);
	if (count == SIZE_MAX)
		return kiln_error_last_code() ? kiln_error_last_code() : KILN_EIO; /* never pass text unscanned */
	if (count == 0) {
		if ((rc = kiln_buf_putc(out, '"')) < 0 || (rc = kiln_buf_put(out, t->ptr, t->len)) < 0)
			return rc;
		return kiln_buf_putc(out, '"');
	}
	if (count > MAX_MATCHES)
		count = MAX_MATCHES; /* the rest of the text is redacted below */
	kiln_buf_reset(&c->rewrite);
	for (size_t i = 0; i < count; i++) {
		const kiln_detect_match *m = &c->matches[i];
		const char *domain = kiln_detect_domain(m->kind);
		char *big = NULL;
		char *nb = norm;
		size_t nn;

		if (m->len > sizeof(norm) && !(nb = big = malloc(m->len)))
			return kiln_error_set(KILN_ENOMEM, "out of memory");
		nn = kiln_detect_normalise(m->kind, s + m->start, m->len, nb, m->len > sizeof(norm) ? m->len : sizeof(norm));
		size_t tn = token_of(c, token, domain, nb, nn);
		free(big);
		if ((rc = kiln_buf_put(&c->rewrite, s + at, m->start - at)) < 0 ||
		    (rc = kiln_buf_put(&c->rewrite, token, tn)) < 0)
			return rc;
		at = m->start + m->len;
	}
	if (count == MAX_MATCHES && at < n) {
		/* more matches than one value may hold: never let the rest through */
		if ((rc = kiln_buf_puts(&c->rewrite, KILN_REDACTED)) < 0)
			return rc;
	} else if ((rc = kiln_buf_put(&c->rewrite, s + at, n - at)) < 0) {
		return rc;
	}
	return kiln_buf_put_json_string(out, c->rewrite.ptr, c->rewrite.len);
}

static int put_scalar(kiln_curator *c, kiln_buf *out, const kiln_field *f, const kiln_json_token *t)
{
	const char *v;
	size_t n;
	int rc;

	if (t->type == KILN_JSON_NULL || !f || f->pseudo_mode == KILN_PSEUDO_KEEP) {
		if (f && f->pii_scan && t->type == KILN_JSON_STRING)
			return put_scanned(c, out, t);
		if (t->type != KILN_JSON_STRING)
			return kiln_buf_put(out, t->ptr, t->len);
		if ((rc = kiln_buf_putc(out, '"')) < 0 || (rc = kiln_buf_put(out, t->ptr, t->len)) < 0)
			return rc;
		return kiln_buf_putc(out, '"');
	}
	switch (f->pseudo_mode) {
	case KILN_PSEUDO_REDACT:
		return kiln_buf_puts(out, "\"" KILN_REDACTED "\"");
	case KILN_PSEUDO_KEEP_DOMAIN:
		if (t->type == KILN_JSON_STRING) {
			if ((rc = decode(c, t, &v, &n)) < 0)
				return rc;
			return put_keep_domain(c, out, f, v, n);
		}
		/* not a string: tokenise its text */
		/* fall through */
	case KILN_PSEUDO_TOKEN:
		if (t->type == KILN_JSON_STRING) {
			if ((rc = decode(c, t, &v, &n)) < 0)
				return rc;
			if (f->format == KILN_FORMAT_EMAIL && (rc = email_normal(c, v, n, &v, &n)) < 0)
				return rc;
		} else {
			v = t->ptr; /* a number's or boolean's text as written */
			n = t->len;
		}
		return put_token(c, out, f, v, n);
	default:
		return kiln_buf_put(out, t->ptr, t->len);
	}
}

/* The curated value written at out[from..) as the split input: a string's
 * decoded content, or the text of anything else. */
static int note_split(kiln_curator *c, const kiln_buf *out, size_t from)
{
	const char *v = out->ptr + from;
	size_t n = out->len - from;
	int rc;

	kiln_buf_reset(&c->split);
	if (n >= 2 && v[0] == '"') {
		kiln_json_token t = { .type = KILN_JSON_STRING, .ptr = v + 1, .len = n - 2 };
		if (memchr(t.ptr, '\\', t.len))
			t.flags = KILN_JSON_ESCAPED;
		if ((rc = kiln_buf_reserve(&c->split, t.len)) < 0)
			return rc;
		c->split.len = kiln_json_unescape(c->split.ptr, c->split.cap, &t);
		return 0;
	}
	return kiln_buf_put(&c->split, v, n);
}

static int separate(kiln_buf *out, struct cframe *fr)
{
	return fr->emitted++ ? kiln_buf_putc(out, ',') : 0;
}

int kiln_curate(kiln_curator *c, const char *record, size_t len, kiln_buf *out, const char **out_split,
		size_t *out_split_len)
{
	const kiln_field *pending = NULL;
	kiln_json_token t;
	uint32_t depth = 0, skip = 0;
	bool drop_next = false, have_split = false;
	int rc, next;

	kiln_json_scanner_reset(c->scanner, record, len);
	while ((next = kiln_json_next(c->scanner, &t)) > 0) {
		struct cframe *top = depth ? &c->frames[depth - 1] : NULL;
		const kiln_field *f;
		size_t from;

		if (skip) {
			if (t.type == KILN_JSON_OBJECT_BEGIN || t.type == KILN_JSON_ARRAY_BEGIN)
				skip++;
			else if (t.type == KILN_JSON_OBJECT_END || t.type == KILN_JSON_ARRAY_END)
				skip--;
			continue;
		}
		switch (t.type) {
		case KILN_JSON_KEY:
			pending = NULL;
			if (top->field) {
				const char *k;
				size_t kn;
				if ((rc = decode(c, &t, &k, &kn)) < 0)
					return rc;
				pending = kiln_field_child(top->field, k, kn, t.key_hash);
			}
			drop_next = pending && pending->pseudo_mode == KILN_PSEUDO_DROP;
			if (drop_next)
				continue;
			if ((rc = separate(out, top)) < 0 || (rc = kiln_buf_putc(out, '"')) < 0 ||
			    (rc = kiln_buf_put(out, t.ptr, t.len)) < 0 || (rc = kiln_buf_put(out, "\":", 2)) < 0)
				return rc;
			continue;
		case KILN_JSON_OBJECT_END:
		case KILN_JSON_ARRAY_END:
			if ((rc = kiln_buf_putc(out, t.type == KILN_JSON_OBJECT_END ? '}' : ']')) < 0)
				return rc;
			depth--;
			continue;
		default:
			break;
		}

		/* a value: the field it follows */
		if (!top)
			f = c->opt.contract->root;
		else if (top->is_object)
			f = pending;
		else
			f = top->field ? top->field->items : NULL;
		if ((top && top->is_object && drop_next) || (top && !top->is_object && f && f->pseudo_mode == KILN_PSEUDO_DROP)) {
			drop_next = false;
			skip = t.type == KILN_JSON_OBJECT_BEGIN || t.type == KILN_JSON_ARRAY_BEGIN;
			continue;
		}
		if (top && !top->is_object && (rc = separate(out, top)) < 0)
			return rc;
		from = out->len;
		if (t.type == KILN_JSON_OBJECT_BEGIN || t.type == KILN_JSON_ARRAY_BEGIN) {
			bool object = t.type == KILN_JSON_OBJECT_BEGIN;
			if (f && f->pseudo_mode == KILN_PSEUDO_REDACT && top) {
				if ((rc = kiln_buf_puts(out, "\"" KILN_REDACTED "\"")) < 0)
					return rc;
				skip = 1;
				continue;
			}
			if ((rc = kiln_buf_putc(out, object ? '{' : '[')) < 0)
				return rc;
			c->frames[depth++] = (struct cframe){
				.field = f && f->type == (object ? KILN_LTYPE_OBJECT : KILN_LTYPE_ARRAY) ? f : NULL,
				.is_object = object,
			};
			continue;
		}
		if ((rc = put_scalar(c, out, f, &t)) < 0)
			return rc;
		if (depth == 1 && f && f == c->opt.split_field && t.type != KILN_JSON_NULL) {
			if ((rc = note_split(c, out, from)) < 0)
				return rc;
			have_split = true;
		}
	}
	if (next < 0)
		return kiln_error_set(KILN_EINVALID, "record is not valid JSON (%s)",
				      kiln_reject_name(kiln_json_scanner_error(c->scanner, NULL, NULL)));
	if (c->opt.split_field && !have_split)
		return kiln_error_set(KILN_ENOTFOUND, "record has no value for the split key %s",
				      c->opt.split_field->name);
	*out_split = c->split.ptr ? c->split.ptr : "";
	*out_split_len = c->split.len;
	return 0;
}
