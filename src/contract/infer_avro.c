/* An ODCS contract from an Avro schema (avro.h, kiln_infer_avro): each
 * type becomes the property the decoder's JSON (avro_decode.c) meets:
 * records objects (fields in order, required unless their union has
 * null), arrays arrays, maps any JSON value (a contract lists an
 * object's keys), enums strings
 * with their symbols, logical types string formats (date-time, date, time,
 * uuid), decimals numbers with multipleOf 10^-scale, bytes and fixed
 * base64 strings (format byte), other unions any JSON value. A record
 * inside itself is any JSON value there (its fields are not listed again). */
#include <stdio.h>
#include <string.h>

#include "contract/avro.h"
#include "contract/infer.h"
#include "core/error.h"

#define MAX_NEST 64

typedef struct infer_ctx {
	kiln_buf *b;
	const kiln_avro_node *stack[MAX_NEST];
	int depth;
} infer_ctx;

static int property(infer_ctx *c, const kiln_avro_node *n, int ind);

static int fields(infer_ctx *c, const kiln_avro_node *n, int ind)
{
	int rc;

	if (n->count == 0)
		return 0;
	if ((rc = kiln_buf_printf(c->b, "%*sproperties:\n", ind, "")) < 0)
		return rc;
	for (size_t i = 0; i < n->count; i++) {
		const kiln_avro_node *t = n->children[i];
		bool nullable = false;

		/* ["null", T] and [T, "null"]: T, optional */
		if (t->type == KILN_AVRO_UNION) {
			const kiln_avro_node *other = NULL;
			size_t others = 0;
			for (size_t k = 0; k < t->count; k++) {
				if (t->children[k]->type == KILN_AVRO_NULL)
					nullable = true;
				else
					other = t->children[k], others++;
			}
			if (nullable && others == 1)
				t = other;
		}
		if ((rc = kiln_buf_printf(c->b, "%*s- name: ", ind + 2, "")) < 0 ||
		    (rc = kiln_infer_yaml_scalar(c->b, n->names[i], strlen(n->names[i]))) < 0 ||
		    (rc = kiln_buf_putc(c->b, '\n')) < 0)
			return rc;
		if ((rc = property(c, t, ind + 4)) < 0)
			return rc;
		if (!nullable && t->type != KILN_AVRO_NULL &&
		    (rc = kiln_buf_printf(c->b, "%*srequired: true\n", ind + 4, "")) < 0)
			return rc;
	}
	return 0;
}

static int string_format(infer_ctx *c, const char *format, int ind)
{
	return kiln_buf_printf(c->b, "%*slogicalType: string\n%*slogicalTypeOptions:\n%*sformat: %s\n", ind,
	                       "", ind, "", ind + 2, "", format);
}

/* The keys of one property (its name already written) at indent ind. */
static int property(infer_ctx *c, const kiln_avro_node *n, int ind)
{
	int rc;

	if (n->doc && (rc = kiln_buf_printf(c->b, "%*sdescription: ", ind, "")) == 0 &&
	    (rc = kiln_infer_yaml_scalar(c->b, n->doc, strlen(n->doc))) == 0)
		rc = kiln_buf_putc(c->b, '\n');
	else
		rc = 0;
	if (rc < 0)
		return rc;
	switch (n->logical) {
	case KILN_AVRO_DATE:
		return string_format(c, "date", ind);
	case KILN_AVRO_TIME_MILLIS:
	case KILN_AVRO_TIME_MICROS:
		return string_format(c, "time", ind);
	case KILN_AVRO_TIMESTAMP_MILLIS:
	case KILN_AVRO_TIMESTAMP_MICROS:
		return string_format(c, "date-time", ind);
	case KILN_AVRO_UUID:
		return string_format(c, "uuid", ind);
	case KILN_AVRO_DECIMAL: {
		char step[1100] = "1";
		if (n->scale > 0) {
			snprintf(step, sizeof(step), "0.%0*d", n->scale, 1);
		}
		return kiln_buf_printf(c->b,
		                       "%*slogicalType: number\n%*slogicalTypeOptions:\n%*smultipleOf: %s\n",
		                       ind, "", ind, "", ind + 2, "", step);
	}
	case KILN_AVRO_PLAIN:
		break;
	}
	switch (n->type) {
	case KILN_AVRO_NULL:
		return kiln_buf_printf(c->b, "%*sdescription: always null\n", ind, "");
	case KILN_AVRO_BOOLEAN:
		return kiln_buf_printf(c->b, "%*slogicalType: boolean\n", ind, "");
	case KILN_AVRO_INT:
		return kiln_buf_printf(c->b,
		                       "%*slogicalType: integer\n%*slogicalTypeOptions:\n%*sformat: i32\n",
		                       ind, "", ind, "", ind + 2, "");
	case KILN_AVRO_LONG:
		return kiln_buf_printf(c->b,
		                       "%*slogicalType: integer\n%*slogicalTypeOptions:\n%*sformat: i64\n",
		                       ind, "", ind, "", ind + 2, "");
	case KILN_AVRO_FLOAT:
	case KILN_AVRO_DOUBLE:
		return kiln_buf_printf(c->b, "%*slogicalType: number\n", ind, "");
	case KILN_AVRO_STRING:
		return kiln_buf_printf(c->b, "%*slogicalType: string\n", ind, "");
	case KILN_AVRO_BYTES:
	case KILN_AVRO_FIXED:
		return string_format(c, "byte", ind);
	case KILN_AVRO_ENUM:
		if ((rc = kiln_buf_printf(
		         c->b,
		         "%*slogicalType: string\n%*scustomProperties:\n%*s- property: enum\n%*svalue: [",
		         ind, "", ind, "", ind + 2, "", ind + 4, "")) < 0)
			return rc;
		for (size_t i = 0; i < n->count; i++)
			if ((i && (rc = kiln_buf_puts(c->b, ", ")) < 0) ||
			    (rc = kiln_infer_yaml_scalar(c->b, n->names[i], strlen(n->names[i]))) < 0)
				return rc;
		return kiln_buf_puts(c->b, "]\n");
	case KILN_AVRO_ARRAY:
		if ((rc = kiln_buf_printf(c->b, "%*slogicalType: array\n%*sitems:\n", ind, "", ind, "")) < 0)
			return rc;
		return property(c, n->children[0], ind + 2);
	case KILN_AVRO_MAP:
		/* a contract lists an object's keys: a map's are not known, so
		 * its property takes any JSON value */
		return kiln_buf_printf(c->b, "%*sdescription: \"an Avro map: an object of any keys\"\n", ind,
		                       "");
	case KILN_AVRO_UNION:
		/* several kinds of value: any JSON value */
		return kiln_buf_printf(c->b, "%*sdescription: \"an Avro union: any of its branches\"\n", ind,
		                       "");
	case KILN_AVRO_RECORD:
		for (int i = 0; i < c->depth; i++)
			if (c->stack[i] == n) /* the record inside itself: not listed again */
				return kiln_buf_printf(
				    c->b, "%*sdescription: \"a %s inside itself: any JSON value\"\n", ind, "",
				    n->name);
		if ((rc = kiln_buf_printf(c->b, "%*slogicalType: object\n", ind, "")) < 0)
			return rc;
		if (c->depth >= MAX_NEST)
			return kiln_error_set(KILN_EINVALID, "the schema nests deeper than %d records",
			                      MAX_NEST);
		c->stack[c->depth++] = n;
		rc = fields(c, n, ind);
		c->depth--;
		return rc;
	}
	return 0;
}

int kiln_infer_avro(const kiln_avro_node *root, const char *name, kiln_buf *b)
{
	infer_ctx c = {.b = b};
	int rc;

	if (root->type != KILN_AVRO_RECORD)
		return kiln_error_set(KILN_EINVALID, "the schema's top level is not a record");
	if ((rc = kiln_buf_puts(b, "# Written by `kiln contract infer --avro` from the Avro schema ")) < 0 ||
	    (rc = kiln_infer_yaml_scalar(b, root->name, strlen(root->name))) < 0 ||
	    (rc = kiln_buf_puts(b, ": review it before use\n# (classification, enums of free text; "
	                           "docs/CONTRACTS.md).\napiVersion: v3.1.0\nkind: DataContract\nid: ")) <
	        0 ||
	    (rc = kiln_infer_yaml_scalar(b, name, strlen(name))) < 0 ||
	    (rc = kiln_buf_puts(b, "\nname: ")) < 0 ||
	    (rc = kiln_infer_yaml_scalar(b, name, strlen(name))) < 0 ||
	    (rc = kiln_buf_puts(b, "\nversion: 0.1.0\nstatus: draft\nschema:\n  - name: ")) < 0 ||
	    (rc = kiln_infer_yaml_scalar(b, name, strlen(name))) < 0 || (rc = kiln_buf_putc(b, '\n')) < 0)
		return rc;
	c.stack[c.depth++] = root;
	if ((rc = kiln_buf_printf(b, "    logicalType: object\n")) < 0)
		return rc;
	return fields(&c, root, 4);
}
