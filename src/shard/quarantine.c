/* Quarantine objects (see quarantine.h). One open object at a time: a record
 * from another topic/partition closes the open one first. */
#include "shard/quarantine.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "shard/spool.h"

struct kiln_quarantine {
	kiln_store *store;
	const char *dataset, *branch;
	ZSTD_CCtx *cctx;
	size_t target;
	int level;
	const char *spool_dir;
	kiln_spool lines;
	char *topic;
	int32_t partition;
	int64_t first, last;
	uint64_t objects;
	kiln_buf line; /* the line being written */
	kiln_buf b64;
};

int kiln_quarantine_new(kiln_quarantine **out, kiln_store *store, const char *dataset, const char *branch,
                        size_t target, int level, const char *spool_dir)
{
	kiln_quarantine *q = calloc(1, sizeof(*q));

	*out = NULL;
	int rc;

	if (!q || !(q->cctx = ZSTD_createCCtx())) {
		free(q);
		return kiln_error_set(KILN_ENOMEM, "out of memory");
	}
	if ((rc = kiln_spool_open(&q->lines, spool_dir)) < 0) {
		ZSTD_freeCCtx(q->cctx);
		free(q);
		return rc;
	}
	q->store = store;
	q->dataset = dataset;
	q->branch = branch;
	q->target = target ? target : (64u << 20);
	q->level = level ? level : 3;
	q->spool_dir = spool_dir;
	*out = q;
	return 0;
}

void kiln_quarantine_free(kiln_quarantine *q)
{
	if (!q)
		return;
	ZSTD_freeCCtx(q->cctx);
	kiln_spool_close(&q->lines);
	kiln_buf_free(&q->line);
	kiln_buf_free(&q->b64);
	free(q->topic);
	free(q);
}

int kiln_quarantine_flush(kiln_quarantine *q)
{
	char key[1024], hash[65];
	uint64_t bytes;
	int rc;

	if (!q->lines.size)
		return 0;
	if ((size_t)snprintf(key, sizeof(key), "quarantine/%s/%d/%s/%s/%lld-%lld.jsonl.zst", q->topic,
	                     (int)q->partition, q->dataset, q->branch, (long long)q->first,
	                     (long long)q->last) >= sizeof(key))
		return kiln_error_set(KILN_EINVALID, "quarantine: topic %s: object name too long", q->topic);
	rc = kiln_spool_store(&q->lines, q->store, q->cctx, q->level, key, hash, &bytes);
	if (rc < 0)
		return rc;
	q->objects++;
	return 0;
}

int kiln_quarantine_add(kiln_quarantine *q, const char *topic, int32_t partition, int64_t offset,
                        const kiln_report *report, const char *raw, size_t raw_len)
{
	kiln_buf *b = &q->line;
	int rc;

	if (q->lines.size && (partition != q->partition || strcmp(topic, q->topic) != 0) &&
	    (rc = kiln_quarantine_flush(q)) < 0)
		return rc;
	kiln_buf_reset(b);
	if (!q->lines.size) {
		char *t = strdup(topic);
		if (!t)
			return kiln_error_set(KILN_ENOMEM, "out of memory");
		free(q->topic);
		q->topic = t;
		q->partition = partition;
		q->first = offset;
	}
	q->last = offset;
	if ((rc = kiln_buf_puts(b, "{\"topic\":")) < 0 ||
	    (rc = kiln_buf_put_json_string(b, topic, strlen(topic))) < 0 ||
	    (rc = kiln_buf_printf(b, ",\"partition\":%d,\"offset\":%lld,\"code\":\"%s\",\"path\":",
	                          (int)partition, (long long)offset, kiln_reject_name(report->v[0].code))) <
	        0 ||
	    (rc = kiln_buf_put_json_string(b, report->v[0].path, strlen(report->v[0].path))) < 0 ||
	    (rc = kiln_buf_puts(b, ",\"violations\":[")) < 0)
		return rc;
	for (size_t i = 0; i < report->kept; i++) {
		if ((rc = kiln_buf_printf(b, "%s{\"code\":\"%s\",\"path\":", i ? "," : "",
		                          kiln_reject_name(report->v[i].code))) < 0 ||
		    (rc = kiln_buf_put_json_string(b, report->v[i].path, strlen(report->v[i].path))) < 0 ||
		    (rc = kiln_buf_putc(b, '}')) < 0)
			return rc;
	}
	if ((rc = kiln_buf_printf(b, "],\"count\":%zu", report->count)) < 0)
		return rc;
	if (raw && kiln_utf8_valid(raw, raw_len)) {
		if ((rc = kiln_buf_puts(b, ",\"record\":")) < 0 ||
		    (rc = kiln_buf_put_json_string(b, raw, raw_len)) < 0)
			return rc;
	} else if (raw) {
		size_t need = sodium_base64_ENCODED_LEN(raw_len, sodium_base64_VARIANT_ORIGINAL);
		kiln_buf_reset(&q->b64);
		if ((rc = kiln_buf_reserve(&q->b64, need)) < 0)
			return rc;
		sodium_bin2base64(q->b64.ptr, need, (const unsigned char *)raw, raw_len,
		                  sodium_base64_VARIANT_ORIGINAL);
		if ((rc = kiln_buf_puts(b, ",\"record_base64\":\"")) < 0 ||
		    (rc = kiln_buf_puts(b, q->b64.ptr)) < 0 || (rc = kiln_buf_putc(b, '"')) < 0)
			return rc;
	} else if ((rc = kiln_buf_puts(b, ",\"record\":null")) < 0) {
		return rc;
	}
	if ((rc = kiln_buf_puts(b, "}\n")) < 0 || (rc = kiln_spool_write(&q->lines, b->ptr, b->len)) < 0)
		return rc;
	return q->lines.size >= q->target ? kiln_quarantine_flush(q) : 0;
}

uint64_t kiln_quarantine_objects(const kiln_quarantine *q)
{
	return q->objects;
}
