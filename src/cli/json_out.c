/* The commands' shared JSON output (see json_out.h). */
#include "cli/json_out.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/error.h"

int kiln_cli_json_string(kiln_buf *b, const char *s)
{
	return s ? kiln_buf_put_json_text(b, s, strlen(s)) : kiln_buf_puts(b, "null");
}

int kiln_cli_json_string_or_null(kiln_buf *b, const char *s)
{
	return kiln_cli_json_string(b, s && *s ? s : NULL);
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool is_json_number(const char *p)
{
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return false;
	if (*p == '.') {
		if (*++p < '0' || *p > '9')
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		if (*++p == '+' || *p == '-')
			p++;
		if (*p < '0' || *p > '9')
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return *p == '\0';
}

int kiln_cli_json_number_text(kiln_buf *b, const char *text)
{
	return kiln_buf_puts(b, text && is_json_number(text) ? text : "null");
}

int kiln_cli_json_bool(kiln_buf *b, bool v)
{
	return kiln_buf_puts(b, v ? "true" : "false");
}

int kiln_cli_json_time(kiln_buf *b, const char *name, int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	char date[32];

	if (gmtime_r(&tt, &tm) && strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm))
		return kiln_buf_printf(b, "\"%s\":\"%s\",\"%s_unix\":%" PRId64, name, date, name, t);
	return kiln_buf_printf(b, "\"%s\":null,\"%s_unix\":%" PRId64, name, name, t);
}

int kiln_cli_json_version(kiln_buf *b, const kiln_version *v)
{
	int rc = 0;

	rc |= kiln_buf_puts(b, "\"dataset\":");
	rc |= kiln_cli_json_string(b, v->dataset);
	rc |= kiln_buf_puts(b, ",\"ref\":");
	rc |= kiln_cli_json_string_or_null(b, v->ref);
	rc |= kiln_buf_printf(b, ",\"commit\":\"%s\",\"tag\":", v->commit);
	rc |= kiln_cli_json_string_or_null(b, v->tag);
	rc |= kiln_buf_putc(b, ',');
	rc |= kiln_cli_json_time(b, "time", v->time);
	return rc;
}

int kiln_cli_put_buf(kiln_buf *b, int rc)
{
	bool ok = rc >= 0 && (!b->len || fwrite(b->ptr, 1, b->len, stdout) == b->len);

	kiln_buf_reset(b);
	if (rc < 0)
		return rc;
	if (!ok || ferror(stdout))
		return kiln_error_set(KILN_EIO, "stdout: write error");
	return 0;
}

int kiln_cli_write_buf(const char *cmd, kiln_buf *b, int rc)
{
	if (kiln_cli_put_buf(b, rc) < 0)
		return kiln_cli_fail(cmd, "%s", kiln_error_last());
	if (fflush(stdout) != 0 || ferror(stdout))
		return kiln_cli_fail(cmd, "stdout: write error");
	return 0;
}
