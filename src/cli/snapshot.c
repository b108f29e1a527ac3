/* `kiln snapshot ADDRESS`: asks a running `kiln run` (Kafka source) to
 * commit a snapshot now, through its metrics listener, and prints the
 * version it committed. */
#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/buf.h"
#include "core/json.h"

static const char usage_text[] =
    "usage: kiln snapshot HOST:PORT\n"
    "\n"
    "Asks the `kiln run` listening on HOST:PORT (the pipeline's metrics.listen)\n"
    "to commit what it has consumed, waits until the commit is on the branch,\n"
    "and prints it as JSON: {\"commit\":\"<40 hex>\",\"dataset\":...,\"branch\":...}.\n"
    "The commit is the branch tip this run last made (unchanged when there was\n"
    "nothing new). SIGUSR1 to the run does the same without waiting.\n"
    "\n"
    "Exit status: 0 when committed, 1 when the snapshot failed (the reason on\n"
    "stderr, also when there was nothing new but what was read since the last\n"
    "commit could not be committed), 2 when the run cannot be reached.\n";

/* The "error" member of the run's answer, decoded, or the answer as it is. */
static void put_reason(kiln_buf *out, const kiln_buf *body)
{
	kiln_json_scanner *s = kiln_json_scanner_new(NULL);
	kiln_json_token t;
	char reason[1024];

	if (s && body->len && kiln_json_lookup(s, body->ptr, body->len, "error", &t) == 1 &&
	    t.type == KILN_JSON_STRING) {
		size_t n = kiln_json_unescape(reason, sizeof(reason), &t);
		if (n == (size_t)-1)
			kiln_buf_put(out, t.ptr, t.len); /* longer than any kiln error: as written */
		else
			kiln_buf_put(out, reason, n);
	} else {
		kiln_buf_put(out, body->ptr ? body->ptr : "", strcspn(body->ptr ? body->ptr : "", "\n"));
	}
	kiln_json_scanner_free(s);
}

static size_t collect(char *data, size_t size, size_t n, void *ctx)
{
	return kiln_buf_put(ctx, data, size * n) < 0 ? 0 : size * n;
}

int kiln_cmd_snapshot(int argc, char **argv)
{
	const kiln_cli_option rows[] = {KILN_CLI_END};
	const kiln_cli_spec spec = {
	    .cmd = "snapshot",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected HOST:PORT (the pipeline's metrics.listen)",
	};
	kiln_buf body = KILN_BUF_INIT(1 << 20);
	char url[512], err[CURL_ERROR_SIZE] = "";
	const char *at;
	long status = 0;
	CURL *curl;
	CURLcode res;
	int first, rc;

	if ((rc = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return rc;
	at = argv[first];
	if (strncmp(at, "http://", 7) == 0)
		at += 7;
	snprintf(url, sizeof(url), "http://%.*s/v1/snapshot", (int)strcspn(at, "/"), at);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!(curl = curl_easy_init()))
		return kiln_cli_fail("snapshot", "cannot initialise libcurl");
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_POST, 1L);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, 180L);
	curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, err);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
	res = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(curl);
	if (res != CURLE_OK) {
		kiln_buf_free(&body);
		return kiln_cli_fail("snapshot", "%s: %s", url, err[0] ? err : curl_easy_strerror(res));
	}
	if (status == 200) {
		fwrite(body.ptr ? body.ptr : "", 1, body.len, stdout);
		kiln_buf_free(&body);
		return KILN_EXIT_OK;
	}
	if (status == 404) {
		kiln_buf_free(&body);
		return kiln_cli_fail("snapshot", "%s: not a kiln run with a Kafka source (HTTP 404)", url);
	}
	kiln_buf reason = KILN_BUF_INIT(4096);
	put_reason(&reason, &body);
	kiln_buf_putc(&reason, '\0');
	kiln_cli_fail("snapshot", "%s: the snapshot failed (HTTP %ld): %s", url, status,
	              reason.ptr ? reason.ptr : "");
	kiln_buf_free(&reason);
	kiln_buf_free(&body);
	return KILN_EXIT_INVALID;
}
