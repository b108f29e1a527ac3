/* Strict single-pass JSON scanner (see json.h).
 *
 * State: `state` says what may come next; the bit stack `kinds` says, per
 * open container, whether it is an object (1) or an array (0); `depth` is
 * the number of open containers. For duplicate detection every key of every
 * open object sits in `keys` (objects nest, so the keys of the innermost
 * object are the tail starting at frame_first[depth]); `table` indexes the
 * keys of large objects by a keyed hash (SipHash-2-4 under a key drawn per
 * scanner), so keys crafted to collide cannot make the probes quadratic: the
 * unkeyed kiln_json_hash, which contracts match keys with, is public and
 * collisions of it can be made at will. Slots stamped with an older `gen`
 * are empty, so a reset costs nothing; slots left by closed objects are
 * harmless because a hit must point into the innermost object's tail and
 * compare equal. */
#include "core/json.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

enum scan_state {
	S_VALUE,        /* a value: top level, after ':' or after ',' in an array */
	S_ARRAY_FIRST,  /* a value or ']' */
	S_OBJECT_FIRST, /* a key or '}' */
	S_KEY,          /* a key (after ',' in an object) */
	S_AFTER_VALUE,  /* ',' or the closing bracket of the innermost container */
	S_DONE,         /* only whitespace may follow */
	S_ERROR,
};

/* Objects with fewer keys are checked for duplicates by a linear scan of
 * their hashes; larger ones through the table. */
#define LINEAR_KEYS 32

struct key_entry {
	uint64_t hash;       /* kiln_json_hash of the decoded key */
	uint64_t table_hash; /* the keyed hash, when `indexed` */
	size_t offset;       /* of the raw key bytes in the text */
	uint32_t len;
	uint16_t flags;
	bool indexed; /* in `table`: a key of a large object */
};

struct key_slot {
	uint32_t gen;
	uint32_t index;
};

struct kiln_json_scanner {
	kiln_json_limits limits;
	const unsigned char *text, *pos, *end;
	uint32_t depth;
	enum scan_state state;
	uint8_t *kinds; /* bit stack, max_depth bits */

	struct key_entry *keys;
	uint32_t nkeys, keys_cap;
	uint32_t *frame_first;  /* max_depth + 1 entries */
	uint64_t *frame_filter; /* max_depth + 1 entries: bit (hash >> 58) per key */
	struct key_slot *table;
	uint32_t table_mask, table_used, gen;
	unsigned char table_key[crypto_shorthash_KEYBYTES];
	uint64_t probes; /* table slots visited, for kiln_json_scanner_probes */
	char *scratch;   /* two halves for decoding escaped keys */
	size_t scratch_cap;

	kiln_reject error;
	size_t error_offset;
	kiln_json_token error_token;
};

/* 1 for bytes a string may hold without a closer look. */
static const uint8_t plain_byte[256] = {
#define R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
    R16(0), R16(0), /* 0x00-0x1F control */
    1,      1,      0,      1,      1,      1,      1,      1,
    1,      1,      1,      1,      1,      1,      1,      1, /* 0x20-0x2F, '"' = 0x22 */
    R16(1), R16(1),                                            /* 0x30-0x4F */
    1,      1,      1,      1,      1,      1,      1,      1,
    1,      1,      1,      1,      0,      1,      1,      1,      /* 0x50-0x5F, '\\' = 0x5C */
    R16(1), R16(1),                                                 /* 0x60-0x7F */
    R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), /* non-ASCII */
#undef R16
};

static inline bool is_ws(unsigned char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
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

size_t kiln_utf8_count(const char *s, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xC0) != 0x80;
	return n;
}

kiln_json_scanner *kiln_json_scanner_new(const kiln_json_limits *limits)
{
	kiln_json_scanner *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	if (limits)
		s->limits = *limits;
	if (s->limits.max_depth == 0)
		s->limits.max_depth = KILN_JSON_DEFAULT_DEPTH;
	s->kinds = calloc(s->limits.max_depth / 8 + 1, 1);
	s->frame_first = calloc((size_t)s->limits.max_depth + 1, sizeof(*s->frame_first));
	s->frame_filter = calloc((size_t)s->limits.max_depth + 1, sizeof(*s->frame_filter));
	s->keys_cap = 64;
	s->keys = malloc(s->keys_cap * sizeof(*s->keys));
	s->table_mask = 255;
	s->table = calloc((size_t)s->table_mask + 1, sizeof(*s->table));
	s->gen = 1;
	randombytes_buf(s->table_key, sizeof(s->table_key));
	if (!s->kinds || !s->frame_first || !s->frame_filter || !s->keys || !s->table) {
		kiln_json_scanner_free(s);
		return NULL;
	}
	return s;
}

void kiln_json_scanner_free(kiln_json_scanner *s)
{
	if (!s)
		return;
	free(s->kinds);
	free(s->frame_first);
	free(s->frame_filter);
	free(s->keys);
	free(s->table);
	free(s->scratch);
	free(s);
}

static void next_generation(kiln_json_scanner *s)
{
	if (++s->gen == 0) {
		memset(s->table, 0, ((size_t)s->table_mask + 1) * sizeof(*s->table));
		s->gen = 1;
	}
	s->table_used = 0;
}

void kiln_json_scanner_reset(kiln_json_scanner *s, const char *text, size_t len)
{
	s->text = (const unsigned char *)text;
	s->pos = s->text;
	s->end = s->text + len;
	s->depth = 0;
	s->state = S_VALUE;
	s->nkeys = 0;
	s->error = KILN_REJECT_NONE;
	s->error_offset = 0;
	next_generation(s);
	if (s->limits.max_bytes && len > s->limits.max_bytes) {
		s->state = S_ERROR;
		s->error = KILN_REJECT_TOO_LARGE;
		s->error_offset = s->limits.max_bytes;
	}
}

static const unsigned char *scan_utf8(const unsigned char *p, const unsigned char *end);

/* A byte the grammar cannot take that does not start valid UTF-8 makes the
 * text invalid_utf8 rather than json_syntax, outside strings as inside. */
static int fail(kiln_json_scanner *s, kiln_reject code, const unsigned char *at)
{
	if (code == KILN_REJECT_JSON_SYNTAX && at < s->end && *at >= 0x80 && !scan_utf8(at, s->end))
		code = KILN_REJECT_INVALID_UTF8;
	s->state = S_ERROR;
	s->error = code;
	s->error_offset = (size_t)(at - s->text);
	return -1;
}

kiln_reject kiln_json_scanner_error(const kiln_json_scanner *s, size_t *out_offset,
                                    kiln_json_token *out_token)
{
	if (out_offset)
		*out_offset = s->error_offset;
	if (out_token && s->error == KILN_REJECT_DUPLICATE_KEY)
		*out_token = s->error_token;
	return s->error;
}

/* Validates one UTF-8 sequence starting at p (a byte >= 0x80). Returns the
 * byte after it, or NULL. Ranges from Unicode Table 3-7. */
static const unsigned char *scan_utf8(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = p[0], lo = 0x80, hi = 0xBF;
	int n;

	if (c >= 0xC2 && c <= 0xDF)
		n = 1;
	else if (c >= 0xE0 && c <= 0xEF) {
		n = 2;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 3;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else
		return NULL;
	if (end - p <= n)
		return NULL;
	if (p[1] < lo || p[1] > hi)
		return NULL;
	for (int i = 2; i <= n; i++)
		if ((p[i] & 0xC0) != 0x80)
			return NULL;
	return p + n + 1;
}

static int read_hex4(const unsigned char *p, const unsigned char *end, unsigned *out)
{
	unsigned v = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int h = hex_value(p[i]);
		if (h < 0)
			return -1;
		v = v << 4 | (unsigned)h;
	}
	*out = v;
	return 0;
}

/* p is at a backslash. Returns the byte after the escape, or NULL with the
 * error recorded. */
static const unsigned char *scan_escape(kiln_json_scanner *s, const unsigned char *p)
{
	const unsigned char *end = s->end;
	unsigned cp, lo;

	if (end - p < 2) {
		fail(s, KILN_REJECT_JSON_SYNTAX, end);
		return NULL;
	}
	switch (p[1]) {
	case '"':
	case '\\':
	case '/':
	case 'b':
	case 'f':
	case 'n':
	case 'r':
	case 't':
		return p + 2;
	case 'u':
		break;
	default:
		fail(s, KILN_REJECT_JSON_SYNTAX, p);
		return NULL;
	}
	if (read_hex4(p + 2, end, &cp) < 0) {
		fail(s, KILN_REJECT_JSON_SYNTAX, p);
		return NULL;
	}
	if (cp >= 0xDC00 && cp <= 0xDFFF) {
		fail(s, KILN_REJECT_INVALID_UTF8, p); /* lone low surrogate */
		return NULL;
	}
	if (cp < 0xD800 || cp > 0xDBFF)
		return p + 6;
	if (end - p < 12 || p[6] != '\\' || p[7] != 'u' || read_hex4(p + 8, end, &lo) < 0 || lo < 0xDC00 ||
	    lo > 0xDFFF) {
		fail(s, KILN_REJECT_INVALID_UTF8, p); /* high surrogate not followed by a low one */
		return NULL;
	}
	return p + 12;
}

/* First byte at or after p that is not plain string content, or end. */
static inline const unsigned char *skip_plain(const unsigned char *p, const unsigned char *end)
{
#ifdef __SSE2__
	const __m128i quote = _mm_set1_epi8('"');
	const __m128i bslash = _mm_set1_epi8('\\');
	const __m128i space = _mm_set1_epi8(0x20);

	while (end - p >= 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
		/* signed compare: true for 0x00-0x1F and for every byte >= 0x80 */
		__m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
		                         _mm_cmplt_epi8(v, space));
		unsigned mask = (unsigned)_mm_movemask_epi8(m);
		if (mask)
			return p + __builtin_ctz(mask);
		p += 16;
	}
#endif
	while (p < end && plain_byte[*p])
		p++;
	return p;
}

/* p is at the opening quote. Fills ptr/len/flags of *tok and returns the byte
 * after the closing quote, or NULL with the error recorded. */
static inline __attribute__((always_inline)) const unsigned char *
scan_string(kiln_json_scanner *s, const unsigned char *p, kiln_json_token *tok)
{
	const unsigned char *end = s->end, *q = p + 1;
	uint32_t flags = KILN_JSON_ASCII;

	for (;;) {
		q = skip_plain(q, end);
		if (q == end) {
			fail(s, KILN_REJECT_JSON_SYNTAX, p); /* unterminated */
			return NULL;
		}
		if (*q == '"')
			break;
		if (*q == '\\') {
			flags |= KILN_JSON_ESCAPED;
			q = scan_escape(s, q);
			if (!q)
				return NULL;
		} else if (*q < 0x20) {
			fail(s, KILN_REJECT_JSON_SYNTAX, q); /* raw control character */
			return NULL;
		} else {
			const unsigned char *next = scan_utf8(q, end);
			if (!next) {
				fail(s, KILN_REJECT_INVALID_UTF8, q);
				return NULL;
			}
			flags &= ~KILN_JSON_ASCII;
			q = next;
		}
	}
	tok->ptr = (const char *)p + 1;
	tok->len = (size_t)(q - p - 1);
	tok->flags = flags;
	return q + 1;
}

static const unsigned char *scan_number(kiln_json_scanner *s, const unsigned char *p, kiln_json_token *tok)
{
	const unsigned char *end = s->end, *q = p;
	uint32_t flags = KILN_JSON_INTEGER;

	if (*q == '-')
		q++;
	if (q == end)
		goto bad;
	if (*q == '0')
		q++;
	else if (*q >= '1' && *q <= '9')
		while (++q < end && is_digit(*q))
			;
	else
		goto bad;
	if (q < end && *q == '.') {
		flags = 0;
		if (++q == end || !is_digit(*q))
			goto bad;
		while (++q < end && is_digit(*q))
			;
	}
	if (q < end && (*q == 'e' || *q == 'E')) {
		flags = 0;
		if (++q < end && (*q == '+' || *q == '-'))
			q++;
		if (q == end || !is_digit(*q))
			goto bad;
		while (++q < end && is_digit(*q))
			;
	}
	tok->ptr = (const char *)p;
	tok->len = (size_t)(q - p);
	tok->flags = flags;
	return q;
bad:
	fail(s, KILN_REJECT_JSON_SYNTAX, q);
	return NULL;
}

size_t kiln_json_unescape(char *out, size_t cap, const kiln_json_token *tok)
{
	const unsigned char *p = (const unsigned char *)tok->ptr, *end = p + tok->len;
	size_t n = 0;

	if (!(tok->flags & KILN_JSON_ESCAPED)) {
		if (tok->len > cap)
			return (size_t)-1;
		memcpy(out, tok->ptr, tok->len);
		return tok->len;
	}
	while (p < end) {
		unsigned cp = 0;
		char c;

		if (*p != '\\') {
			if (n == cap)
				return (size_t)-1;
			out[n++] = (char)*p++;
			continue;
		}
		switch (p[1]) {
		case 'b':
			c = '\b';
			break;
		case 'f':
			c = '\f';
			break;
		case 'n':
			c = '\n';
			break;
		case 'r':
			c = '\r';
			break;
		case 't':
			c = '\t';
			break;
		case 'u':
			c = 0;
			break;
		default:
			c = (char)p[1];
			break;
		}
		if (c || p[1] != 'u') {
			if (n == cap)
				return (size_t)-1;
			out[n++] = c;
			p += 2;
			continue;
		}
		read_hex4(p + 2, end, &cp);
		p += 6;
		if (cp >= 0xD800 && cp <= 0xDBFF) {
			unsigned lo = 0;
			read_hex4(p + 2, end, &lo);
			cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			p += 6;
		}
		size_t need = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
		if (cap - n < need)
			return (size_t)-1;
		switch (need) {
		case 1:
			out[n++] = (char)cp;
			break;
		case 2:
			out[n++] = (char)(0xC0 | cp >> 6);
			out[n++] = (char)(0x80 | (cp & 0x3F));
			break;
		case 3:
			out[n++] = (char)(0xE0 | cp >> 12);
			out[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
			out[n++] = (char)(0x80 | (cp & 0x3F));
			break;
		default:
			out[n++] = (char)(0xF0 | cp >> 18);
			out[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
			out[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
			out[n++] = (char)(0x80 | (cp & 0x3F));
			break;
		}
	}
	return n;
}

static int ensure_scratch(kiln_json_scanner *s, size_t half)
{
	if (half * 2 <= s->scratch_cap)
		return 0;
	char *p = realloc(s->scratch, half * 2);
	if (!p)
		return -1;
	s->scratch = p;
	s->scratch_cap = half * 2;
	return 0;
}

static bool key_equal(kiln_json_scanner *s, const struct key_entry *e, const kiln_json_token *tok)
{
	kiln_json_token old = {.type = KILN_JSON_KEY,
	                       .flags = e->flags,
	                       .ptr = (const char *)s->text + e->offset,
	                       .len = e->len};
	size_t a, b;

	if (!((e->flags | tok->flags) & KILN_JSON_ESCAPED))
		return e->len == tok->len && memcmp(old.ptr, tok->ptr, tok->len) == 0;
	/* decoded lengths never exceed raw ones */
	if (ensure_scratch(s, (e->len > tok->len ? e->len : tok->len) + 1) < 0)
		return false;
	a = kiln_json_unescape(s->scratch, e->len, &old);
	b = kiln_json_unescape(s->scratch + s->scratch_cap / 2, tok->len, tok);
	return a == b && memcmp(s->scratch, s->scratch + s->scratch_cap / 2, a) == 0;
}

static uint64_t keyed_hash(const kiln_json_scanner *s, const char *key, size_t len)
{
	unsigned char h[crypto_shorthash_BYTES];
	uint64_t v;

	crypto_shorthash(h, (const unsigned char *)key, len, s->table_key);
	memcpy(&v, h, sizeof(v));
	return v;
}

/* The keyed hash of a recorded key's decoded bytes (uses the scratch). */
static int entry_keyed_hash(kiln_json_scanner *s, struct key_entry *e)
{
	if (e->flags & KILN_JSON_ESCAPED) {
		kiln_json_token old = {.type = KILN_JSON_KEY,
		                       .flags = e->flags,
		                       .ptr = (const char *)s->text + e->offset,
		                       .len = e->len};
		if (ensure_scratch(s, (size_t)e->len + 1) < 0)
			return -1;
		e->table_hash = keyed_hash(s, s->scratch, kiln_json_unescape(s->scratch, e->len, &old));
	} else {
		e->table_hash = keyed_hash(s, (const char *)s->text + e->offset, e->len);
	}
	e->indexed = true;
	return 0;
}

uint64_t kiln_json_scanner_probes(const kiln_json_scanner *s)
{
	return s->probes;
}

static void table_insert(kiln_json_scanner *s, uint64_t hash, uint32_t index)
{
	uint32_t slot = (uint32_t)hash & s->table_mask;

	while (s->table[slot].gen == s->gen) {
		slot = (slot + 1) & s->table_mask;
		s->probes++;
	}
	s->table[slot].gen = s->gen;
	s->table[slot].index = index;
	s->table_used++;
}

static int table_rebuild(kiln_json_scanner *s)
{
	size_t size = (size_t)s->table_mask + 1;

	/* every indexed key is reinserted: keep the load under a quarter
	 * whatever the number of live keys */
	while ((uint64_t)s->nkeys * 4 >= size)
		size *= 2;
	if (size != (size_t)s->table_mask + 1) {
		struct key_slot *t = calloc(size, sizeof(*t));
		if (!t)
			return -1;
		free(s->table);
		s->table = t;
		s->table_mask = (uint32_t)size - 1;
		s->gen = 0;
	}
	next_generation(s);
	for (uint32_t i = 0; i < s->nkeys; i++)
		if (s->keys[i].indexed)
			table_insert(s, s->keys[i].table_hash, i);
	return 0;
}

static int duplicate(kiln_json_scanner *s, const kiln_json_token *tok)
{
	s->error_token = *tok;
	return fail(s, KILN_REJECT_DUPLICATE_KEY, (const unsigned char *)tok->ptr - 1);
}

/* Hashes the key token and, unless duplicates are allowed, records it in the
 * innermost object. Returns -1 with the error recorded on a duplicate. */
static int note_key(kiln_json_scanner *s, kiln_json_token *tok)
{
	uint32_t first = s->frame_first[s->depth];
	bool large = s->nkeys - first >= LINEAR_KEYS;
	uint64_t th = 0;
	uint32_t slot;

	if (tok->flags & KILN_JSON_ESCAPED) {
		if (ensure_scratch(s, tok->len + 1) < 0)
			return fail(s, KILN_REJECT_TOO_LARGE, (const unsigned char *)tok->ptr);
		size_t n = kiln_json_unescape(s->scratch, tok->len, tok);
		tok->key_hash = kiln_json_hash(s->scratch, n);
		if (large && !s->limits.allow_duplicate_keys)
			th = keyed_hash(s, s->scratch, n);
	} else {
		tok->key_hash = kiln_json_hash(tok->ptr, tok->len);
		if (large && !s->limits.allow_duplicate_keys)
			th = keyed_hash(s, tok->ptr, tok->len);
	}
	if (s->limits.allow_duplicate_keys)
		return 0;

	if (!large) {
		/* small object: a 64-bit filter of its key hashes usually proves the
		 * key new; otherwise compare against its keys directly */
		uint64_t bit = 1ull << (tok->key_hash >> 58);
		if (s->frame_filter[s->depth] & bit) {
			for (uint32_t i = first; i < s->nkeys; i++)
				if (s->keys[i].hash == tok->key_hash && key_equal(s, &s->keys[i], tok))
					return duplicate(s, tok);
		}
		s->frame_filter[s->depth] |= bit;
	} else {
		for (slot = (uint32_t)th & s->table_mask; s->table[slot].gen == s->gen;
		     slot = (slot + 1) & s->table_mask) {
			uint32_t i = s->table[slot].index;
			s->probes++;
			if (i >= first && i < s->nkeys && s->keys[i].indexed && s->keys[i].table_hash == th &&
			    key_equal(s, &s->keys[i], tok))
				return duplicate(s, tok);
		}
	}
	if (s->nkeys == s->keys_cap) {
		struct key_entry *k = realloc(s->keys, (size_t)s->keys_cap * 2 * sizeof(*k));
		if (!k || s->keys_cap >= UINT32_MAX / 4)
			return fail(s, KILN_REJECT_TOO_LARGE, (const unsigned char *)tok->ptr);
		s->keys = k;
		s->keys_cap *= 2;
	}
	s->keys[s->nkeys++] =
	    (struct key_entry){.hash = tok->key_hash,
	                       .table_hash = th,
	                       .offset = (size_t)((const unsigned char *)tok->ptr - s->text),
	                       .len = (uint32_t)tok->len,
	                       .flags = (uint16_t)tok->flags,
	                       .indexed = large};
	if (s->nkeys - first < LINEAR_KEYS)
		return 0;
	/* large object: index it (all of it when it just grew out of the linear range) */
	for (uint32_t i = s->nkeys - first == LINEAR_KEYS ? first : s->nkeys - 1; i < s->nkeys; i++) {
		if (!s->keys[i].indexed && entry_keyed_hash(s, &s->keys[i]) < 0)
			return fail(s, KILN_REJECT_TOO_LARGE, (const unsigned char *)tok->ptr);
		if ((s->table_used + 1) * 2 > s->table_mask + 1) {
			if (table_rebuild(s) < 0)
				return fail(s, KILN_REJECT_TOO_LARGE, (const unsigned char *)tok->ptr);
			return 0; /* the rebuild indexed every key */
		}
		table_insert(s, s->keys[i].table_hash, i);
	}
	return 0;
}

static inline bool top_is_object(const kiln_json_scanner *s)
{
	uint32_t i = s->depth - 1;
	return s->kinds[i >> 3] >> (i & 7) & 1;
}

static int open_container(kiln_json_scanner *s, const unsigned char *p, bool object, kiln_json_token *out)
{
	uint32_t i = s->depth;

	if (i >= s->limits.max_depth)
		return fail(s, KILN_REJECT_TOO_DEEP, p);
	if (object) {
		s->kinds[i >> 3] |= (uint8_t)(1u << (i & 7));
		s->frame_first[i + 1] = s->nkeys;
		s->frame_filter[i + 1] = 0;
	} else {
		s->kinds[i >> 3] &= (uint8_t) ~(1u << (i & 7));
	}
	out->type = object ? KILN_JSON_OBJECT_BEGIN : KILN_JSON_ARRAY_BEGIN;
	out->depth = i;
	s->depth = i + 1;
	s->state = object ? S_OBJECT_FIRST : S_ARRAY_FIRST;
	return 1;
}

/* A value (or container) ended just before q. A ',' right there, as in
 * compact text, is taken now, so the next call starts at the key or value
 * it announces instead of going through S_AFTER_VALUE first; what follows
 * is checked exactly as S_AFTER_VALUE would have after the ','. */
static inline void after_value(kiln_json_scanner *s, const unsigned char *q)
{
	if (s->depth && q < s->end && *q == ',') {
		s->pos = q + 1;
		s->state = top_is_object(s) ? S_KEY : S_VALUE;
	} else {
		s->pos = q;
		s->state = s->depth ? S_AFTER_VALUE : S_DONE;
	}
}

/* The closing bracket is at s->pos - 1. */
static int close_container(kiln_json_scanner *s, bool object, kiln_json_token *out)
{
	if (object)
		s->nkeys = s->frame_first[s->depth];
	s->depth--;
	out->type = object ? KILN_JSON_OBJECT_END : KILN_JSON_ARRAY_END;
	out->depth = s->depth;
	after_value(s, s->pos);
	return 1;
}

int kiln_json_next(kiln_json_scanner *s, kiln_json_token *out)
{
	const unsigned char *p = s->pos, *end = s->end, *q;
	unsigned char c;
	int rc;

	if (s->state == S_ERROR)
		return -1;
again:
	while (p < end && is_ws(*p))
		p++;
	if (p == end) {
		if (s->state == S_DONE) {
			s->pos = p;
			return 0;
		}
		return fail(s, KILN_REJECT_JSON_SYNTAX, p);
	}
	c = *p;
	out->offset = (size_t)(p - s->text);
	out->ptr = (const char *)p;
	out->len = 1;
	out->flags = 0;
	out->depth = s->depth;

	switch (s->state) {
	case S_AFTER_VALUE:
		if (c == ',') {
			p++;
			s->state = top_is_object(s) ? S_KEY : S_VALUE;
			goto again;
		}
		if ((c == '}' && top_is_object(s)) || (c == ']' && !top_is_object(s))) {
			s->pos = p + 1;
			return close_container(s, c == '}', out);
		}
		return fail(s, KILN_REJECT_JSON_SYNTAX, p);
	case S_OBJECT_FIRST:
		if (c == '}') {
			s->pos = p + 1;
			return close_container(s, true, out);
		}
		/* fall through */
	case S_KEY:
		if (c != '"')
			return fail(s, KILN_REJECT_JSON_SYNTAX, p);
		q = scan_string(s, p, out);
		if (!q)
			return -1;
		out->type = KILN_JSON_KEY;
		if (note_key(s, out) < 0)
			return -1;
		while (q < end && is_ws(*q))
			q++;
		if (q == end || *q != ':')
			return fail(s, KILN_REJECT_JSON_SYNTAX, q);
		s->pos = q + 1;
		s->state = S_VALUE;
		return 1;
	case S_ARRAY_FIRST:
		if (c == ']') {
			s->pos = p + 1;
			return close_container(s, false, out);
		}
		/* fall through */
	case S_VALUE:
		break;
	case S_DONE:
	case S_ERROR:
		return fail(s, KILN_REJECT_JSON_SYNTAX, p);
	}

	switch (c) {
	case '{':
	case '[':
		rc = open_container(s, p, c == '{', out);
		if (rc > 0)
			s->pos = p + 1;
		return rc;
	case '"':
		q = scan_string(s, p, out);
		if (!q)
			return -1;
		out->type = KILN_JSON_STRING;
		break;
	case 't':
		if (end - p < 4 || memcmp(p, "true", 4) != 0)
			return fail(s, KILN_REJECT_JSON_SYNTAX, p);
		out->type = KILN_JSON_TRUE;
		out->len = 4;
		q = p + 4;
		break;
	case 'f':
		if (end - p < 5 || memcmp(p, "false", 5) != 0)
			return fail(s, KILN_REJECT_JSON_SYNTAX, p);
		out->type = KILN_JSON_FALSE;
		out->len = 5;
		q = p + 5;
		break;
	case 'n':
		if (end - p < 4 || memcmp(p, "null", 4) != 0)
			return fail(s, KILN_REJECT_JSON_SYNTAX, p);
		out->type = KILN_JSON_NULL;
		out->len = 4;
		q = p + 4;
		break;
	default:
		if (c != '-' && !is_digit(c))
			return fail(s, KILN_REJECT_JSON_SYNTAX, p);
		q = scan_number(s, p, out);
		if (!q)
			return -1;
		out->type = KILN_JSON_NUMBER;
		break;
	}
	after_value(s, q);
	return 1;
}

kiln_reject kiln_json_check(kiln_json_scanner *s, const char *text, size_t len)
{
	kiln_json_token tok;
	int rc;

	kiln_json_scanner_reset(s, text, len);
	while ((rc = kiln_json_next(s, &tok)) > 0)
		;
	return rc < 0 ? s->error : KILN_REJECT_NONE;
}

bool kiln_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;

	while (p < end) {
		if (*p < 0x80) {
			p++;
			continue;
		}
		if (!(p = scan_utf8(p, end)))
			return false;
	}
	return true;
}

int kiln_json_lookup(kiln_json_scanner *s, const char *text, size_t len, const char *path,
                     kiln_json_token *out)
{
	/* The path's segment for each depth; a value matches when every open
	 * object's current key equals the segment at its depth. */
	const char *seg[16];
	size_t seg_len[16], nseg = 0;
	bool match[17] = {true};
	const char *p = path;
	kiln_json_token t;
	uint32_t depth = 0;
	int rc;

	while (*p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		if (nseg == 16 || n == 0)
			return -1;
		seg[nseg] = p;
		seg_len[nseg++] = n;
		p += n + (dot ? 1 : 0);
	}
	if (nseg == 0)
		return -1;
	kiln_json_scanner_reset(s, text, len);
	while ((rc = kiln_json_next(s, &t)) > 0) {
		switch (t.type) {
		case KILN_JSON_OBJECT_BEGIN:
		case KILN_JSON_ARRAY_BEGIN:
			depth++;
			if (depth <= nseg)
				match[depth] = false;
			if (t.type == KILN_JSON_ARRAY_BEGIN && depth <= nseg)
				match[depth] = false; /* paths do not enter arrays */
			break;
		case KILN_JSON_OBJECT_END:
		case KILN_JSON_ARRAY_END:
			depth--;
			break;
		case KILN_JSON_KEY:
			if (depth <= nseg) {
				bool eq = !(t.flags & KILN_JSON_ESCAPED) && t.len == seg_len[depth - 1] &&
				          memcmp(t.ptr, seg[depth - 1], t.len) == 0;
				match[depth] = eq && match[depth - 1];
				if (match[depth] && depth == nseg) {
					/* the value follows */
					if ((rc = kiln_json_next(s, out)) <= 0)
						return -1;
					return 1;
				}
			}
			break;
		default:
			break;
		}
	}
	return rc < 0 ? -1 : 0;
}
