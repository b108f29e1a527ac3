/* Record curation: compact re-serialisation with pseudonymisation (see
 * curate.h, docs/FORMATS.md for the token inputs). The curator consumes the
 * validator's token stream, fields already resolved.
 *
 * frames[i] is the container open at depth i (an object or an array, and
 * how many members were written, for the commas). `skip` counts the
 * containers of a dropped or redacted value still open: while it is non-zero
 * tokens are consumed without output. `drop_next` says the value after the
 * current key is dropped (its key was not written). */
#include "mask/curate.h"

#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "mask/detect.h"
#include "mask/token.h"

#define MAX_MATCHES 256

/* Tokens of recent values, direct-mapped: the same users, emails and
 * addresses recur across records, and an HMAC costs far more than a lookup.
 * The values are personal data: the cache is wiped when the curator goes. */
#define CACHE_SLOTS     16384
#define CACHE_VALUE_MAX 46

/* Per domain, whether the cache pays: a domain whose values rarely repeat
 * (a unique id) would only pay for the lookups, so after a trial window of
 * CACHE_TRIAL lookups with under 1 in 8 hits it bypasses the cache until the
 * next trial, CACHE_RETRY lookups later. */
#define CACHE_DOMAINS 32
#define CACHE_TRIAL   4096
#define CACHE_RETRY   (1u << 20)

struct cache_domain {
	const char *domain;
	uint32_t lookups, hits;
	bool bypass;
};

struct cache_slot {
	const char *domain; /* NULL: empty */
	uint64_t hash;
	uint8_t len, token_len;
	char value[CACHE_VALUE_MAX];
	char token[KILN_TOKEN_MAX];
};

struct cframe {
	bool is_object;
	uint32_t emitted;
};

struct kiln_curator {
	kiln_curator_options opt;
	kiln_detector *detector;
	struct cframe *frames;
	kiln_buf text;    /* a decoded string value */
	kiln_buf rewrite; /* a free-text value with its matches replaced */
	kiln_buf split;   /* the split key's curated value */
	kiln_detect_match matches[MAX_MATCHES];
	struct cache_slot *cache;
	struct cache_domain domains[CACHE_DOMAINS];

	/* the record being curated */
	kiln_buf *out;
	size_t base; /* out->len at kiln_curate_begin */
	kiln_curate_value *values;
	size_t value_count, value_cap;
	uint32_t depth, skip;
	bool drop_next, have_split;
	int rc;
	char error[256];
	const kiln_field *limit_field; /* whose detectors gave up at a PCRE2 limit */
};

int kiln_curator_new(kiln_curator **out, const kiln_curator_options *opt)
{
	kiln_curator *c = calloc(1, sizeof(*c));
	int rc;

	*out = NULL;
	if (!c)
		return kiln_error_oom(NULL);
	c->opt = *opt;
	if (!c->opt.limits.max_depth)
		c->opt.limits.max_depth = KILN_JSON_DEFAULT_DEPTH;
	c->frames = calloc((size_t)c->opt.limits.max_depth + 1, sizeof(*c->frames));
	c->cache = calloc(CACHE_SLOTS, sizeof(*c->cache));
	if (!c->frames || !c->cache) {
		kiln_curator_free(c);
		return kiln_error_oom(NULL);
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
	kiln_detector_free(c->detector);
	free(c->frames);
	kiln_buf_free(&c->text);
	kiln_buf_free(&c->rewrite);
	kiln_buf_free(&c->split);
	free(c->values);
	if (c->cache) {
		sodium_memzero(c->cache, CACHE_SLOTS * sizeof(*c->cache));
		free(c->cache);
	}
	free(c);
}

/* kiln_token through the cache. `domain` must be a string that lives as long
 * as the curator (a field's or a detector's), compared by address. */
static struct cache_domain *cache_domain(kiln_curator *c, const char *domain)
{
	for (int i = 0; i < CACHE_DOMAINS; i++) {
		struct cache_domain *d = &c->domains[i];
		if (d->domain == domain)
			return d;
		if (!d->domain) {
			d->domain = domain;
			return d;
		}
	}
	return NULL; /* more domains than slots: no cache for the rest */
}

static size_t token_of(kiln_curator *c, char out[KILN_TOKEN_MAX], const char *domain, const char *v, size_t n)
{
	struct cache_domain *d = cache_domain(c, domain);
	struct cache_slot *slot;
	uint64_t h;

	if (!d || n > CACHE_VALUE_MAX)
		return kiln_token(out, c->opt.key, domain, strlen(domain), v, n);
	if (++d->lookups == (d->bypass ? CACHE_RETRY : CACHE_TRIAL)) {
		d->bypass = !d->bypass && d->hits < CACHE_TRIAL / 8;
		d->lookups = d->hits = 0;
	}
	if (d->bypass)
		return kiln_token(out, c->opt.key, domain, strlen(domain), v, n);
	h = kiln_json_hash(v, n) ^ (uint64_t)(uintptr_t)domain * 0x9e3779b97f4a7c15ull;
	slot = &c->cache[h & (CACHE_SLOTS - 1)];
	if (slot->domain == domain && slot->hash == h && slot->len == n && memcmp(slot->value, v, n) == 0) {
		d->hits++;
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

/* Email normal form (kiln_token_email_normal) into c->rewrite. */
static int email_normal(kiln_curator *c, const char *s, size_t n, const char **out, size_t *out_len)
{
	int rc;

	kiln_buf_reset(&c->rewrite);
	if ((rc = kiln_buf_reserve(&c->rewrite, n)) < 0)
		return rc;
	c->rewrite.len = kiln_token_email_normal(c->rewrite.ptr, s, n);
	*out = c->rewrite.ptr;
	*out_len = c->rewrite.len;
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
static int put_scanned(kiln_curator *c, kiln_buf *out, const kiln_field *f, const kiln_json_token *t)
{
	const char *s;
	size_t n, count, at = 0;
	char norm[512], token[KILN_TOKEN_MAX];
	int rc;

	if ((rc = decode(c, t, &s, &n)) < 0)
		return rc;
	count = kiln_detect(c->detector, s, n, c->matches, MAX_MATCHES);
	if (count == SIZE_MAX) {
		/* never pass text unscanned; a limit is the record's fault, not the run's */
		if (kiln_error_last_code() == KILN_ELIMIT)
			c->limit_field = f;
		return kiln_error_last_code() ? kiln_error_last_code() : KILN_EIO;
	}
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
			return kiln_error_oom(NULL);
		nn = kiln_detect_normalise(m->kind, s + m->start, m->len, nb,
		                           m->len > sizeof(norm) ? m->len : sizeof(norm));
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
			return put_scanned(c, out, f, t);
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
		kiln_json_token t = {.type = KILN_JSON_STRING, .ptr = v + 1, .len = n - 2};
		if (memchr(t.ptr, '\\', t.len))
			t.flags = KILN_JSON_ESCAPED;
		if ((rc = kiln_buf_reserve(&c->split, t.len)) < 0)
			return rc;
		c->split.len = kiln_json_unescape(c->split.ptr, c->split.cap, &t);
		return 0;
	}
	return kiln_buf_put(&c->split, v, n);
}

/* Keeps the value just written at out[from..) for kiln_curate_values. */
static int observe(kiln_curator *c, const kiln_field *f, kiln_json_type type, uint32_t flags, size_t from)
{
	bool was_string = type == KILN_JSON_STRING;
	kiln_curate_value *v;
	size_t end = c->out->len;

	if (KILN_ARRAY_GROW(c->values, c->value_cap, c->value_count, NULL) < 0)
		return KILN_ENOMEM;
	v = &c->values[c->value_count++];
	if (end - from >= 2 && c->out->ptr[from] == '"') {
		/* a string (a token or a redaction of any value is one too) */
		type = KILN_JSON_STRING;
		from++;
		end--;
	}
	if (type == KILN_JSON_STRING) {
		/* a string copied as written keeps the input's flag, a token or a
		 * redaction has no escape; a rewritten value is looked at */
		kiln_pseudo_mode mode = f ? f->pseudo_mode : KILN_PSEUDO_KEEP;
		if (mode == KILN_PSEUDO_TOKEN || mode == KILN_PSEUDO_REDACT)
			flags = 0;
		else if (mode != KILN_PSEUDO_KEEP || (f && f->pii_scan) || !was_string)
			flags = memchr(c->out->ptr + from, '\\', end - from) ? KILN_JSON_ESCAPED : 0;
	}
	*v = (kiln_curate_value){.field = f,
	                         .type = type,
	                         .flags = flags & (KILN_JSON_ESCAPED | KILN_JSON_INTEGER),
	                         .offset = from - c->base,
	                         .len = end - from};
	return 0;
}

const kiln_curate_value *kiln_curate_values(const kiln_curator *c, size_t *out_count)
{
	*out_count = c->value_count;
	return c->values;
}

static int separate(kiln_buf *out, struct cframe *fr)
{
	return fr->emitted++ ? kiln_buf_putc(out, ',') : 0;
}

void kiln_curate_begin(kiln_curator *c, kiln_buf *out)
{
	c->out = out;
	c->base = out->len;
	c->value_count = 0;
	c->depth = 0;
	c->skip = 0;
	c->drop_next = false;
	c->have_split = false;
	c->rc = 0;
	c->limit_field = NULL;
}

static int curate_token(kiln_curator *c, const kiln_json_token *t, const kiln_field *f)
{
	struct cframe *top = c->depth ? &c->frames[c->depth - 1] : NULL;
	kiln_buf *out = c->out;
	size_t from;
	int rc;

	if (c->skip) {
		if (t->type == KILN_JSON_OBJECT_BEGIN || t->type == KILN_JSON_ARRAY_BEGIN)
			c->skip++;
		else if (t->type == KILN_JSON_OBJECT_END || t->type == KILN_JSON_ARRAY_END)
			c->skip--;
		return 0;
	}
	switch (t->type) {
	case KILN_JSON_KEY:
		c->drop_next = f && f->pseudo_mode == KILN_PSEUDO_DROP;
		if (c->drop_next)
			return 0;
		if ((rc = separate(out, top)) < 0 || (rc = kiln_buf_putc(out, '"')) < 0 ||
		    (rc = kiln_buf_put(out, t->ptr, t->len)) < 0)
			return rc;
		return kiln_buf_put(out, "\":", 2);
	case KILN_JSON_OBJECT_END:
	case KILN_JSON_ARRAY_END:
		c->depth--;
		return kiln_buf_putc(out, t->type == KILN_JSON_OBJECT_END ? '}' : ']');
	default:
		break;
	}

	/* a value, checked against f */
	if ((top && top->is_object && c->drop_next) ||
	    (top && !top->is_object && f && f->pseudo_mode == KILN_PSEUDO_DROP)) {
		c->drop_next = false;
		c->skip = t->type == KILN_JSON_OBJECT_BEGIN || t->type == KILN_JSON_ARRAY_BEGIN;
		return 0;
	}
	if (top && !top->is_object && (rc = separate(out, top)) < 0)
		return rc;
	if (t->type == KILN_JSON_OBJECT_BEGIN || t->type == KILN_JSON_ARRAY_BEGIN) {
		bool object = t->type == KILN_JSON_OBJECT_BEGIN;
		from = out->len;
		if (f && f->pseudo_mode == KILN_PSEUDO_REDACT && top) {
			c->skip = 1;
			if ((rc = kiln_buf_puts(out, "\"" KILN_REDACTED "\"")) < 0)
				return rc;
			return c->opt.observe && top ? observe(c, f, KILN_JSON_STRING, 0, from) : 0;
		}
		if (c->depth == c->opt.limits.max_depth)
			return kiln_error_set(KILN_ELIMIT,
			                      "record nested too deep"); /* the validator rejects it too */
		c->frames[c->depth++] = (struct cframe){.is_object = object};
		if ((rc = kiln_buf_putc(out, object ? '{' : '[')) < 0)
			return rc;
		return c->opt.observe && top ? observe(c, f, t->type, t->flags, from) : 0;
	}
	from = out->len;
	if ((rc = put_scalar(c, out, f, t)) < 0)
		return rc;
	if (c->opt.observe && (rc = observe(c, f, t->type, t->flags, from)) < 0)
		return rc;
	/* the split field is reached through objects only (kiln_contract_field_at),
	 * so it holds at most one value per record (duplicate keys are invalid) */
	if (f && f == c->opt.split_field && t->type != KILN_JSON_NULL) {
		if ((rc = note_split(c, out, from)) < 0)
			return rc;
		c->have_split = true;
	}
	return 0;
}

int kiln_curate_token(void *curator, const kiln_json_token *t, const kiln_field *field)
{
	kiln_curator *c = curator;
	int rc = curate_token(c, t, field);

	if (rc < 0) {
		c->rc = rc;
		snprintf(c->error, sizeof(c->error), "%s", kiln_error_last());
	}
	return rc;
}

const char *kiln_curate_limit_path(const kiln_curator *c)
{
	return c->rc == KILN_ELIMIT && c->limit_field ? c->limit_field->path : NULL;
}

int kiln_curate_end(kiln_curator *c, const char **out_split, size_t *out_split_len)
{
	if (c->rc < 0)
		return kiln_error_set(c->rc, "%s", c->error);
	if (c->opt.split_field && !c->have_split)
		return kiln_error_set(KILN_ENOTFOUND, "record has no value for the split key %s",
		                      c->opt.split_field->path);
	*out_split = c->split.ptr ? c->split.ptr : "";
	*out_split_len = c->split.len;
	return 0;
}
