/* Drives kiln's S3 client (src/store/s3_client.c) from the shell for
 * tests/integration/s3_sigv4.sh:
 *   s3_client_tool ENDPOINT BUCKET put KEY FILE | get KEY | head KEY | rm KEY | ls [PREFIX]
 * get writes the object to stdout; head prints its size; ls prints "KEY SIZE
 * MTIME" lines. Credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 * AWS_SESSION_TOKEN; AWS_REGION (default us-east-1); S3_VIRTUAL=1 for
 * virtual-hosted addressing; S3_RETRIES; S3_PART_SIZE (bytes). Plain HTTP. Exit 1 on an error
 * (kiln_error_last() on stderr, 3 for KILN_ENOTFOUND), 2 on bad usage. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "store/s3_client.h"

static int usage(void)
{
	fprintf(stderr, "usage: s3_client_tool ENDPOINT BUCKET put KEY FILE | get KEY | head KEY | rm KEY | "
	                "ls [PREFIX]\n");
	return 2;
}

static int to_stdout(void *ctx, const void *data, size_t len)
{
	(void)ctx;
	if (fwrite(data, 1, len, stdout) != len)
		return kiln_error_set(KILN_EIO, "stdout: %s", strerror(errno));
	return 0;
}

static int print_key(void *ctx, const char *key, uint64_t size, int64_t mtime)
{
	(void)ctx;
	printf("%s %" PRIu64 " %" PRId64 "\n", key, size, mtime);
	return 0;
}

int main(int argc, char **argv)
{
	const char *retries = getenv("S3_RETRIES"), *virt = getenv("S3_VIRTUAL"),
	           *part = getenv("S3_PART_SIZE");
	kiln_s3_config cfg = {0};
	kiln_s3_client *s;
	uint64_t size;
	struct stat st;
	int rc;

	if (argc < 4)
		return usage();
	cfg = (kiln_s3_config){.endpoint = argv[1],
	                       .bucket = argv[2],
	                       .http = true,
	                       .virtual_host = virt && strcmp(virt, "1") == 0,
	                       .region = getenv("AWS_REGION"),
	                       .credentials = {getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"),
	                                       getenv("AWS_SESSION_TOKEN")},
	                       .max_retries = retries ? atoi(retries) : 0,
	                       .part_size = part ? strtoull(part, NULL, 10) : 0};
	if ((rc = kiln_s3_client_new(&s, &cfg)) < 0) {
		fprintf(stderr, "s3_client_tool: %s\n", kiln_error_last());
		return 1;
	}
	if (strcmp(argv[3], "put") == 0 && argc == 6) {
		rc = stat(argv[5], &st) < 0 ? kiln_error_set(KILN_EIO, "%s: %s", argv[5], strerror(errno))
		                            : kiln_s3_put_file(s, argv[4], argv[5], (uint64_t)st.st_size);
	} else if (strcmp(argv[3], "get") == 0 && argc == 5) {
		rc = kiln_s3_get(s, argv[4], to_stdout, NULL);
	} else if (strcmp(argv[3], "head") == 0 && argc == 5) {
		if ((rc = kiln_s3_head(s, argv[4], &size)) == 0)
			printf("%" PRIu64 "\n", size);
	} else if (strcmp(argv[3], "rm") == 0 && argc == 5) {
		rc = kiln_s3_delete(s, argv[4]);
	} else if (strcmp(argv[3], "ls") == 0 && argc <= 5) {
		rc = kiln_s3_list(s, argc == 5 ? argv[4] : "", print_key, NULL);
	} else {
		kiln_s3_client_free(s);
		return usage();
	}
	kiln_s3_client_free(s);
	if (fflush(stdout) != 0 && rc == 0)
		rc = kiln_error_set(KILN_EIO, "stdout: %s", strerror(errno));
	if (rc < 0) {
		fprintf(stderr, "s3_client_tool: %s\n", kiln_error_last());
		return rc == KILN_ENOTFOUND ? 3 : 1;
	}
	return 0;
}
