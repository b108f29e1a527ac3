/* Signs one request with kiln's Signature V4 code for
 * tests/integration/sigv4_botocore.py:
 *   sigv4_tool METHOD HOST PATH PAYLOAD_SHA256 REGION SERVICE EPOCH
 *              ACCESS_KEY SECRET_KEY TOKEN|- [q NAME VALUE | h NAME VALUE]...
 * prints the signature, then the Authorization header, then the canonical
 * request. Exit 1 when kiln refuses to sign (the message on stderr), 2 on
 * bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "store/sigv4.h"

#define MAX_PAIRS 64

int main(int argc, char **argv)
{
	kiln_sigv4_pair query[MAX_PAIRS], headers[MAX_PAIRS];
	kiln_sigv4_request r = {0};
	kiln_sigv4_credentials c = {0};
	kiln_sigv4_signed s;
	kiln_buf creq = {0};

	if (argc < 11 || (argc - 11) % 3 != 0 || (argc - 11) / 3 > MAX_PAIRS) {
		fprintf(stderr, "usage: sigv4_tool METHOD HOST PATH PAYLOAD_SHA256 REGION SERVICE EPOCH "
		                "ACCESS_KEY SECRET_KEY TOKEN|- [q NAME VALUE | h NAME VALUE]...\n");
		return 2;
	}
	r = (kiln_sigv4_request){.method = argv[1],
	                         .host = argv[2],
	                         .path = argv[3],
	                         .payload_sha256 = argv[4],
	                         .region = argv[5],
	                         .service = argv[6],
	                         .now = (time_t)strtoll(argv[7], NULL, 10),
	                         .query = query,
	                         .headers = headers};
	c = (kiln_sigv4_credentials){.access_key = argv[8],
	                             .secret_key = argv[9],
	                             .session_token = strcmp(argv[10], "-") ? argv[10] : NULL};
	for (int i = 11; i < argc; i += 3) {
		kiln_sigv4_pair p = {argv[i + 1], argv[i + 2]};
		if (strcmp(argv[i], "q") == 0)
			query[r.query_count++] = p;
		else if (strcmp(argv[i], "h") == 0)
			headers[r.header_count++] = p;
		else
			return 2;
	}
	if (kiln_sigv4_sign(&s, &r, &c) < 0 || kiln_sigv4_canonical_request(&creq, &r, &c) < 0) {
		fprintf(stderr, "sigv4_tool: %s\n", kiln_error_last());
		return 1;
	}
	printf("%s\n%s\n%.*s\n", s.signature, s.authorization, (int)creq.len, creq.ptr);
	kiln_sigv4_signed_free(&s);
	kiln_buf_free(&creq);
	return 0;
}
