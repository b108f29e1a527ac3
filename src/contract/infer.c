/* Contract inference (see infer.h). Owns a tree of field statistics, one
 * node per property path (array elements share their array's `items`
 * node), filled record by record: a record is checked whole with the strict
 * scanner first, so a refused one leaves no trace. An object whose keys
 * cannot be listed (more than MAX_KEYS of them: a map, or a key a detector
 * fires on: personal data as a name) is kept as "open" and rendered
 * without a type, its keys and values never stored. */
#include "contract/infer.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "contract/format.h"
#include "core/array.h"
#include "core/error.h"
#include "core/json.h"
#include "core/reject.h"

#define MAX_KEYS     512 /* properties of one object before it counts as a map */
#define ENUM_MAX_LEN 64  /* longer strings never make an enum */

enum {
	T_STRING = 1u << 0,
	T_INTEGER = 1u << 1,
	T_NUMBER = 1u << 2, /* with a fraction or an exponent */
	T_BOOLEAN = 1u << 3,
	T_OBJECT = 1u << 4,
	T_ARRAY = 1u << 5,
};

/* The formats inferred, in the order one is preferred when a value meets
 * several (none of these overlaps in practice). `hostname` and `byte` are
 * left out: most words are host names and many are base64. */
static const kiln_format candidate_formats[] = {
    KILN_FORMAT_UUID,  KILN_FORMAT_DATE_TIME, KILN_FORMAT_DATE, KILN_FORMAT_TIME,
    KILN_FORMAT_EMAIL, KILN_FORMAT_IPV4,      KILN_FORMAT_IPV6, KILN_FORMAT_URI,
};
#define NFORMATS         (sizeof(candidate_formats) / sizeof(candidate_formats[0]))
#define ALL_FORMATS_MASK ((1u << NFORMATS) - 1)

/* Field names that name a person or identify one: a field called so (or
 * ending in "_" and the name) is suggested personal whatever its values.
 * The detectors find what values show; these find identifiers they cannot
 * (`user_id: u-218800`). */
static const char *const personal_names[] = {
    "user_id",    "userid",    "user",      "username",      "user_name",   "customer_id",
    "account_id", "person_id", "member_id", "patient_id",    "employee_id", "subject_id",
    "email",      "phone",     "mobile",    "first_name",    "last_name",   "full_name",
    "surname",    "birthday",  "ip",        "ip_address",    "address",     "street",
    "postcode",   "zip_code",  "ssn",       "date_of_birth", "birth_date",  "iban",
};

typedef struct infer_value {
	char *s;
	size_t len;
	uint64_t count;
} infer_value;

typedef struct node node;
struct node {
	char *name; /* decoded key, NUL-terminated (NULL: the root, array items) */
	size_t name_len;
	uint64_t hash;
	uint64_t present;                /* values seen that were not null */
	uint64_t objects;                /* object values: the denominator of the children's `required` */
	unsigned types;                  /* T_* of the values seen */
	unsigned formats;                /* candidate_formats bits every string value met so far */
	uint64_t strings, whole, inside; /* string values; whole value / part detected personal */
	bool open;                       /* keys not listed (see the top comment) */
	bool values_over;                /* more distinct strings than an enum takes */
	infer_value *values;
	size_t nvalues, values_cap;
	node **children;
	size_t nchildren, children_cap;
	node *items;
};

typedef struct frame {
	node *n;   /* the container's node; NULL under an open object */
	node *cur; /* object: the node of the current key (NULL: not kept) */
	bool is_object;
} frame;

struct kiln_infer {
	kiln_infer_options opt;
	char *name;
	node root;
	uint64_t records;
	bool root_unlisted; /* keys of the record left out: unknownFields allow */
	kiln_json_scanner *scanner;
	frame *frames;
	char *scratch; /* decoded strings */
	size_t scratch_cap;
};

static void node_clear(node *n);

static void drop_values(node *n)
{
	for (size_t i = 0; i < n->nvalues; i++)
		free(n->values[i].s);
	free(n->values);
	n->values = NULL;
	n->nvalues = n->values_cap = 0;
	n->values_over = true;
}

/* Frees what n holds below it (values, children, items), not its name. */
static void node_forget(node *n)
{
	drop_values(n);
	for (size_t i = 0; i < n->nchildren; i++) {
		node_clear(n->children[i]);
		free(n->children[i]);
	}
	free(n->children);
	n->children = NULL;
	n->nchildren = n->children_cap = 0;
	if (n->items) {
		node_clear(n->items);
		free(n->items);
		n->items = NULL;
	}
}

static void node_clear(node *n)
{
	node_forget(n);
	free(n->name);
	n->name = NULL;
}

static node *node_new(void)
{
	node *n = calloc(1, sizeof(*n));

	if (!n)
		kiln_error_oom("contract infer");
	else
		n->formats = ALL_FORMATS_MASK;
	return n;
}

static bool name_valid(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (len == 0 || len > 64)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
		      (name[i] >= '0' && name[i] <= '9') || name[i] == '.' || name[i] == '_' ||
		      name[i] == '-'))
			return false;
	return true;
}

int kiln_infer_new(kiln_infer **out, const kiln_infer_options *options)
{
	kiln_infer *in;
	kiln_json_limits limits = {0};

	*out = NULL;
	if (!options || !name_valid(options->name))
		return kiln_error_set(KILN_EINVALID, "contract infer: a contract name is 1 to 64 characters "
		                                     "of A-Z, a-z, 0-9, '.', '_' and '-'");
	if (!(in = calloc(1, sizeof(*in))))
		return kiln_error_oom("contract infer");
	in->opt = *options;
	if (!in->opt.max_depth)
		in->opt.max_depth = KILN_JSON_DEFAULT_DEPTH;
	limits.max_depth = in->opt.max_depth;
	in->root.formats = ALL_FORMATS_MASK;
	in->name = strdup(options->name);
	in->scanner = kiln_json_scanner_new(&limits);
	in->frames = calloc((size_t)in->opt.max_depth + 2, sizeof(*in->frames));
	if (!in->name || !in->scanner || !in->frames) {
		kiln_infer_free(in);
		return kiln_error_oom("contract infer");
	}
	in->opt.name = in->name;
	*out = in;
	return 0;
}

void kiln_infer_free(kiln_infer *in)
{
	if (!in)
		return;
	node_clear(&in->root);
	kiln_json_scanner_free(in->scanner);
	free(in->frames);
	free(in->scratch);
	free(in->name);
	free(in);
}

uint64_t kiln_infer_records(const kiln_infer *in)
{
	return in->records;
}

/* The decoded bytes of a string or key token (in the scratch buffer when
 * it has escapes). */
static int decode(kiln_infer *in, const kiln_json_token *t, const char **out, size_t *out_len)
{
	if (!(t->flags & KILN_JSON_ESCAPED)) {
		*out = t->ptr;
		*out_len = t->len;
		return 0;
	}
	if (t->len + 1 > in->scratch_cap) {
		size_t cap = t->len + 1 > 2 * in->scratch_cap ? t->len + 1 : 2 * in->scratch_cap;
		char *p = realloc(in->scratch, cap);
		if (!p)
			return kiln_error_oom("contract infer");
		in->scratch = p;
		in->scratch_cap = cap;
	}
	*out_len = kiln_json_unescape(in->scratch, in->scratch_cap, t);
	*out = in->scratch;
	return 0;
}

static int detect(kiln_infer *in, const char *s, size_t len)
{
	return in->opt.detect ? in->opt.detect(in->opt.detect_ctx, s, len) : KILN_INFER_DETECT_NONE;
}

/* The child of object node `o` named key[0..len): found, made, or NULL
 * when the object stops being listed (*out NULL, no error). */
static int child_of(kiln_infer *in, node *o, const char *key, size_t len, node **out)
{
	uint64_t hash = kiln_json_hash(key, len);
	node *c;
	int d;

	*out = NULL;
	for (size_t i = 0; i < o->nchildren; i++)
		if (o->children[i]->hash == hash && o->children[i]->name_len == len &&
		    memcmp(o->children[i]->name, key, len) == 0) {
			*out = o->children[i];
			return 0;
		}
	/* a new key: personal data as a name, a map's keys, or a name no
	 * contract can carry (empty, or holding NUL) are not listed */
	if ((d = detect(in, key, len)) < 0)
		return d;
	if (d != KILN_INFER_DETECT_NONE || o->nchildren >= MAX_KEYS || len == 0 || memchr(key, 0, len)) {
		if (o == &in->root) {
			in->root_unlisted = true;
		} else {
			node_forget(o);
			o->open = true;
		}
		return 0;
	}
	if (KILN_ARRAY_GROW(o->children, o->children_cap, o->nchildren, "contract infer") < 0)
		return KILN_ENOMEM;
	if (!(c = node_new()))
		return KILN_ENOMEM;
	if (!(c->name = malloc(len + 1))) {
		free(c);
		return kiln_error_oom("contract infer");
	}
	memcpy(c->name, key, len);
	c->name[len] = '\0';
	c->name_len = len;
	c->hash = hash;
	o->children[o->nchildren++] = c;
	*out = c;
	return 0;
}

/* Counts one distinct string towards an enum; past max_enum values the
 * list is dropped for good. */
static int count_value(kiln_infer *in, node *n, const char *s, size_t len)
{
	if (n->values_over)
		return 0;
	for (size_t i = 0; i < n->nvalues; i++)
		if (n->values[i].len == len && memcmp(n->values[i].s, s, len) == 0) {
			n->values[i].count++;
			return 0;
		}
	if (n->nvalues >= in->opt.max_enum || len > ENUM_MAX_LEN) {
		drop_values(n);
		return 0;
	}
	if (KILN_ARRAY_GROW(n->values, n->values_cap, n->nvalues, "contract infer") < 0)
		return KILN_ENOMEM;
	infer_value *v = &n->values[n->nvalues];
	if (!(v->s = malloc(len + 1)))
		return kiln_error_oom("contract infer");
	memcpy(v->s, s, len);
	v->s[len] = '\0';
	v->len = len;
	v->count = 1;
	n->nvalues++;
	return 0;
}

static int add_string(kiln_infer *in, node *n, const kiln_json_token *t)
{
	const char *s = NULL;
	size_t len = 0;
	int rc, d;

	if ((rc = decode(in, t, &s, &len)) < 0)
		return rc;
	n->strings++;
	for (size_t i = 0; i < NFORMATS; i++)
		if ((n->formats & (1u << i)) && !kiln_format_check(candidate_formats[i], s, len))
			n->formats &= ~(1u << i);
	if ((d = detect(in, s, len)) < 0)
		return d;
	if (d == KILN_INFER_DETECT_WHOLE)
		n->whole++;
	else if (d == KILN_INFER_DETECT_INSIDE)
		n->inside++;
	/* once anything personal was seen, no value of the field is kept */
	if (n->whole || n->inside || !in->opt.detect || !in->opt.max_enum) {
		drop_values(n);
		return 0;
	}
	return count_value(in, n, s, len);
}

/* One value token for node n (NULL: not kept). */
static int add_value(kiln_infer *in, node *n, const kiln_json_token *t)
{
	if (!n || n->open || t->type == KILN_JSON_NULL)
		return 0;
	n->present++;
	switch (t->type) {
	case KILN_JSON_STRING:
		n->types |= T_STRING;
		return add_string(in, n, t);
	case KILN_JSON_NUMBER:
		n->types |= (t->flags & KILN_JSON_INTEGER) ? T_INTEGER : T_NUMBER;
		return 0;
	case KILN_JSON_TRUE:
	case KILN_JSON_FALSE:
		n->types |= T_BOOLEAN;
		return 0;
	case KILN_JSON_OBJECT_BEGIN:
		n->types |= T_OBJECT;
		n->objects++;
		return 0;
	case KILN_JSON_ARRAY_BEGIN:
		n->types |= T_ARRAY;
		return 0;
	default:
		return 0;
	}
}

static int refuse(const char *file, uint64_t line, size_t offset, kiln_reject code, const char *why)
{
	return kiln_error_set(KILN_EINVALID, "%s:%llu:%zu: %s: %s", file, (unsigned long long)line,
	                      offset + 1, kiln_reject_name(code), why);
}

int kiln_infer_add(kiln_infer *in, const char *text, size_t len, const char *file, uint64_t line)
{
	kiln_json_token t = {0};
	kiln_reject code;
	size_t offset = 0, depth = 0;
	int rc;

	if ((code = kiln_json_check(in->scanner, text, len)) != KILN_REJECT_NONE) {
		kiln_json_scanner_error(in->scanner, &offset, NULL);
		return refuse(file, line, offset, code, "each line of a sample must be one JSON object");
	}
	kiln_json_scanner_reset(in->scanner, text, len);
	if (kiln_json_next(in->scanner, &t) != 1 || t.type != KILN_JSON_OBJECT_BEGIN)
		return refuse(file, line, t.offset, KILN_REJECT_NOT_OBJECT,
		              "each line of a sample must be one JSON object");
	in->records++;
	do {
		frame *top = depth ? &in->frames[depth - 1] : NULL;
		node *n;

		switch (t.type) {
		case KILN_JSON_OBJECT_END:
		case KILN_JSON_ARRAY_END:
			depth--;
			continue;
		case KILN_JSON_KEY:
			top->cur = NULL;
			if (top->n && !top->n->open) {
				const char *key = NULL;
				size_t klen = 0;
				if ((rc = decode(in, &t, &key, &klen)) < 0 ||
				    (rc = child_of(in, top->n, key, klen, &top->cur)) < 0)
					return rc;
			}
			continue;
		default:
			break;
		}
		/* a value: the node it counts for */
		if (!top)
			n = &in->root;
		else if (top->is_object)
			n = top->n && !top->n->open ? top->cur : NULL;
		else if (top->n) {
			if (!top->n->items && !(top->n->items = node_new()))
				return KILN_ENOMEM;
			n = top->n->items;
		} else
			n = NULL;
		if ((rc = add_value(in, n, &t)) < 0)
			return rc;
		if (t.type == KILN_JSON_OBJECT_BEGIN || t.type == KILN_JSON_ARRAY_BEGIN) {
			frame *f = &in->frames[depth++];
			f->n = n && !n->open ? n : NULL;
			f->cur = NULL;
			f->is_object = t.type == KILN_JSON_OBJECT_BEGIN;
		}
	} while ((rc = kiln_json_next(in->scanner, &t)) == 1);
	return rc < 0 ? kiln_error_set(KILN_EIO, "%s:%llu: the record changed between two scans", file,
	                               (unsigned long long)line)
	              : 0;
}

/* ---- rendering ---- */

static bool name_is_personal(const node *n)
{
	char lower[64];
	size_t len = n->name_len;

	if (!n->name || len >= sizeof(lower))
		return false;
	for (size_t i = 0; i < len; i++)
		lower[i] = (char)((n->name[i] >= 'A' && n->name[i] <= 'Z') ? n->name[i] + 32 : n->name[i]);
	lower[len] = '\0';
	for (size_t i = 0; i < sizeof(personal_names) / sizeof(personal_names[0]); i++) {
		size_t plen = strlen(personal_names[i]);
		if (len == plen && memcmp(lower, personal_names[i], plen) == 0)
			return true;
		if (len > plen && memcmp(lower + len - plen, personal_names[i], plen) == 0 &&
		    (lower[len - plen - 1] == '_' || lower[len - plen - 1] == '-' ||
		     lower[len - plen - 1] == '.'))
			return true;
	}
	return false;
}

/* The logicalType of a node's values, NULL for "any JSON value" (none
 * seen, or several kinds). */
static const char *type_of(const node *n)
{
	if (n->open)
		return NULL;
	switch (n->types) {
	case T_STRING:
		return "string";
	case T_INTEGER:
		return "integer";
	case T_NUMBER:
	case T_INTEGER | T_NUMBER:
		return "number";
	case T_BOOLEAN:
		return "boolean";
	case T_OBJECT:
		return "object";
	case T_ARRAY:
		return "array";
	default:
		return NULL;
	}
}

/* A YAML scalar for s[0..len) (valid UTF-8): plain when it reads back as
 * the same string, else double-quoted with every character YAML does not
 * print (or reads as a line break) escaped. */
static int put_scalar(kiln_buf *b, const char *s, size_t len)
{
	static const char *const reserved[] = {"true", "false", "null", "yes", "no", "on", "off", "y", "n"};
	bool plain = len > 0 && len <= 64;
	const unsigned char *p = (const unsigned char *)s;
	int rc;

	for (size_t i = 0; plain && i < len; i++)
		plain = (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') || p[i] == '_' ||
		        (i > 0 && ((p[i] >= '0' && p[i] <= '9') || p[i] == '-'));
	for (size_t i = 0; plain && i < sizeof(reserved) / sizeof(reserved[0]); i++)
		plain = !(strlen(reserved[i]) == len && strncasecmp(reserved[i], s, len) == 0);
	if (plain)
		return kiln_buf_put(b, s, len);
	if ((rc = kiln_buf_putc(b, '"')) < 0)
		return rc;
	for (size_t i = 0; i < len;) {
		uint32_t cp = p[i];
		size_t n = 1;
		if (cp >= 0xf0)
			cp &= 0x07, n = 4;
		else if (cp >= 0xe0)
			cp &= 0x0f, n = 3;
		else if (cp >= 0xc0)
			cp &= 0x1f, n = 2;
		for (size_t k = 1; k < n && i + k < len; k++)
			cp = cp << 6 | (p[i + k] & 0x3f);
		if (cp == '"' || cp == '\\')
			rc = kiln_buf_printf(b, "\\%c", (char)cp);
		else if ((cp >= 0x20 && cp < 0x7f) ||
		         (cp >= 0xa0 && cp <= 0xd7ff && cp != 0x2028 && cp != 0x2029) ||
		         (cp >= 0xe000 && cp <= 0xfffd && cp != 0xfeff) || cp >= 0x10000)
			rc = kiln_buf_put(b, s + i, n);
		else if (cp <= 0xffff)
			rc = kiln_buf_printf(b, "\\u%04X", (unsigned)cp);
		else
			rc = kiln_buf_printf(b, "\\U%08X", (unsigned)cp);
		if (rc < 0)
			return rc;
		i += n;
	}
	return kiln_buf_putc(b, '"');
}

int kiln_infer_yaml_scalar(kiln_buf *b, const char *s, size_t len)
{
	return put_scalar(b, s, len);
}

static int cmp_values(const void *a, const void *b)
{
	const infer_value *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if ((c = memcmp(x->s, y->s, n)) != 0)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

static int render_property(const kiln_infer *in, kiln_buf *b, const node *n, uint64_t parents, int ind);

static int render_properties(const kiln_infer *in, kiln_buf *b, const node *o, int ind)
{
	int rc;

	if ((rc = kiln_buf_printf(b, "%*sproperties:\n", ind, "")) < 0)
		return rc;
	for (size_t i = 0; i < o->nchildren; i++)
		if ((rc = render_property(in, b, o->children[i], o->objects, ind + 2)) < 0)
			return rc;
	return 0;
}

/* One property (n->name) or an array's items (name NULL) at indent ind. */
static int render_property(const kiln_infer *in, kiln_buf *b, const node *n, uint64_t parents, int ind)
{
	const char *type = type_of(n);
	bool scalar = type && (n->types & (T_OBJECT | T_ARRAY)) == 0;
	bool detected = n->whole || n->inside;
	bool by_name = scalar && !(n->types & T_BOOLEAN) && name_is_personal(n);
	bool pii = in->opt.classify_pii && type && strcmp(type, "string") == 0 && n->whole > 0 &&
	           n->whole * 5 >= n->strings * 4;
	bool scan = in->opt.classify_pii && detected && !pii && (!type || strcmp(type, "string") == 0);
	bool enumerate = type && strcmp(type, "string") == 0 && !detected && !by_name && !n->values_over &&
	                 n->nvalues > 0 && in->opt.detect;
	const char *format = NULL;
	int rc;

	for (size_t i = 0; type && strcmp(type, "string") == 0 && i < NFORMATS; i++)
		if (n->formats & (1u << i)) {
			format = kiln_format_name(candidate_formats[i]);
			/* digits of ids and times look like phone numbers to the
			 * detectors: a value of these formats holds nothing personal */
			if (candidate_formats[i] == KILN_FORMAT_UUID ||
			    candidate_formats[i] == KILN_FORMAT_DATE_TIME ||
			    candidate_formats[i] == KILN_FORMAT_DATE ||
			    candidate_formats[i] == KILN_FORMAT_TIME)
				pii = scan = false;
			break;
		}
	pii = pii || (in->opt.classify_pii && by_name);
	/* an enum lists values each seen twice at least, never a format's */
	for (size_t i = 0; enumerate && i < n->nvalues; i++)
		enumerate = n->values[i].count >= 2;
	enumerate = enumerate && !format;

	if (n->name) {
		if ((rc = kiln_buf_printf(b, "%*s- name: ", ind, "")) < 0 ||
		    (rc = put_scalar(b, n->name, n->name_len)) < 0 || (rc = kiln_buf_putc(b, '\n')) < 0)
			return rc;
		ind += 2;
	}
	if (type && (rc = kiln_buf_printf(b, "%*slogicalType: %s\n", ind, "", type)) < 0)
		return rc;
	if (n->name && parents > 0 && n->present == parents &&
	    (rc = kiln_buf_printf(b, "%*srequired: true\n", ind, "")) < 0)
		return rc;
	if (pii && (rc = kiln_buf_printf(b, "%*sclassification: pii\n", ind, "")) < 0)
		return rc;
	if (n->open &&
	    (rc = kiln_buf_printf(b,
	                          "%*sdescription: \"an object whose keys are not listed (a map, or "
	                          "keys that look personal): any value\"\n",
	                          ind, "")) < 0)
		return rc;
	if (format && (rc = kiln_buf_printf(b, "%*slogicalTypeOptions:\n%*sformat: %s\n", ind, "", ind + 2,
	                                    "", format)) < 0)
		return rc;
	if ((scan || enumerate) && (rc = kiln_buf_printf(b, "%*scustomProperties:\n", ind, "")) < 0)
		return rc;
	if (scan && (rc = kiln_buf_printf(b, "%*s- property: piiScan\n%*svalue: true\n", ind + 2, "", ind + 4,
	                                  "")) < 0)
		return rc;
	if (enumerate) {
		infer_value *sorted = malloc(n->nvalues * sizeof(*sorted));
		if (!sorted)
			return kiln_error_oom("contract infer");
		memcpy(sorted, n->values, n->nvalues * sizeof(*sorted));
		qsort(sorted, n->nvalues, sizeof(*sorted), cmp_values);
		rc = kiln_buf_printf(b, "%*s- property: enum\n%*svalue: [", ind + 2, "", ind + 4, "");
		for (size_t i = 0; rc == 0 && i < n->nvalues; i++)
			if ((i == 0 || (rc = kiln_buf_puts(b, ", ")) == 0))
				rc = put_scalar(b, sorted[i].s, sorted[i].len);
		free(sorted);
		if (rc < 0 || (rc = kiln_buf_puts(b, "]\n")) < 0)
			return rc;
	}
	if (type && strcmp(type, "object") == 0 && n->nchildren > 0 &&
	    (rc = render_properties(in, b, n, ind)) < 0)
		return rc;
	if (type && strcmp(type, "array") == 0 && n->items && n->items->present > 0) {
		if ((rc = kiln_buf_printf(b, "%*sitems:\n", ind, "")) < 0 ||
		    (rc = render_property(in, b, n->items, 0, ind + 2)) < 0)
			return rc;
	}
	/* an items mapping needs one key at least */
	if (!n->name && !type && !n->open &&
	    (rc = kiln_buf_printf(b, "%*sdescription: any JSON value\n", ind, "")) < 0)
		return rc;
	return 0;
}

int kiln_infer_render(const kiln_infer *in, kiln_buf *b)
{
	int rc;

	if (in->records == 0)
		return kiln_error_set(KILN_EINVALID, "no record to infer a contract from");
	if ((rc = kiln_buf_printf(
	         b,
	         "# Inferred by `kiln contract infer` from %llu record%s: review it before use.\n"
	         "# Types, required fields and formats are what every record showed; enums\n"
	         "# list the values of low-cardinality strings; classification: pii and\n"
	         "# piiScan are suggested where kiln's PII detectors fired or a field's name\n"
	         "# identifies a person (docs/CONTRACTS.md, \"Inferring a contract\").\n"
	         "apiVersion: v3.1.0\nkind: DataContract\nid: ",
	         (unsigned long long)in->records, in->records == 1 ? "" : "s")) < 0 ||
	    (rc = put_scalar(b, in->name, strlen(in->name))) < 0 || (rc = kiln_buf_puts(b, "\nname: ")) < 0 ||
	    (rc = put_scalar(b, in->name, strlen(in->name))) < 0 ||
	    (rc = kiln_buf_puts(b, "\nversion: 0.1.0\nstatus: draft\n")) < 0)
		return rc;
	if (in->root_unlisted &&
	    (rc = kiln_buf_puts(b, "# Some keys were not listed (too many, or they look personal):\n"
	                           "customProperties:\n  - property: unknownFields\n    value: allow\n")) < 0)
		return rc;
	if ((rc = kiln_buf_puts(b, "schema:\n  - name: ")) < 0 ||
	    (rc = put_scalar(b, in->name, strlen(in->name))) < 0 ||
	    (rc = kiln_buf_puts(b, "\n    logicalType: object\n")) < 0)
		return rc;
	if (in->root.nchildren > 0 && (rc = render_properties(in, b, &in->root, 4)) < 0)
		return rc;
	return 0;
}
