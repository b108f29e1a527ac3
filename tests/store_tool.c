/* Drives a store from the shell for the integration tests:
 *   store_tool URL put KEY FILE | put-new KEY FILE | get KEY | stat KEY | rm KEY | ls [PREFIX]
 * put-new stores only when KEY holds no object (exit 1 naming it when it
 * does); get writes the object to stdout; stat prints the size or "absent" (exit 0
 * either way); ls prints "KEY SIZE" lines. Options come from the environment:
 * KILN_S3_ENDPOINT, KILN_S3_HTTP=1, KILN_S3_VIRTUAL_HOST=1,
 * KILN_S3_CREDENTIALS_FILE, KILN_S3_MAX_RETRIES, KILN_S3_REGION,
 * KILN_S3_PART_SIZE_MB. Exit 1 on a store error
 * (kiln_error_last() on stderr), 2 on bad usage. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "store/store.h"

static int usage(void)
{
	fprintf(stderr, "usage: store_tool URL put KEY FILE | get KEY | stat KEY | rm KEY | ls [PREFIX]\n");
	return 2;
}

static bool env_flag(const char *name)
{
	const char *v = getenv(name);

	return v && strcmp(v, "1") == 0;
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
	(void)mtime;
	printf("%s %" PRIu64 "\n", key, size);
	return 0;
}

int main(int argc, char **argv)
{
	kiln_store_options options = {0};
	kiln_store *store = NULL;
	const char *cmd, *retries, *part;
	int rc;

	if (argc < 3)
		return usage();
	cmd = argv[2];
	if (((strcmp(cmd, "put") == 0 || strcmp(cmd, "put-new") == 0) && argc != 5) ||
	    ((strcmp(cmd, "get") == 0 || strcmp(cmd, "stat") == 0 || strcmp(cmd, "rm") == 0) && argc != 4) ||
	    (strcmp(cmd, "ls") == 0 && argc > 4))
		return usage();
	if (strcmp(cmd, "put") && strcmp(cmd, "put-new") && strcmp(cmd, "get") && strcmp(cmd, "stat") &&
	    strcmp(cmd, "rm") && strcmp(cmd, "ls"))
		return usage();
	options.endpoint = getenv("KILN_S3_ENDPOINT");
	options.http = env_flag("KILN_S3_HTTP");
	options.virtual_host = env_flag("KILN_S3_VIRTUAL_HOST");
	options.credentials_file = getenv("KILN_S3_CREDENTIALS_FILE");
	options.region = getenv("KILN_S3_REGION");
	if ((retries = getenv("KILN_S3_MAX_RETRIES")))
		options.max_retries = atoi(retries);
	if ((part = getenv("KILN_S3_PART_SIZE_MB")))
		options.part_size_mb = atoi(part);

	rc = kiln_store_open(&store, argv[1], &options);
	if (rc == 0 && strncmp(cmd, "put", 3) == 0) {
		struct stat st;

		if (stat(argv[4], &st) < 0)
			rc = kiln_error_set(KILN_ENOTFOUND, "%s: %s", argv[4], strerror(errno));
		else if (strcmp(cmd, "put-new") == 0)
			rc = kiln_store_put_file_new(store, argv[3], argv[4], (uint64_t)st.st_size);
		else
			rc = kiln_store_put_file(store, argv[3], argv[4], (uint64_t)st.st_size);
	} else if (rc == 0 && strcmp(cmd, "get") == 0) {
		rc = kiln_store_get(store, argv[3], to_stdout, NULL);
		if (rc == 0 && fflush(stdout) != 0)
			rc = kiln_error_set(KILN_EIO, "stdout: %s", strerror(errno));
	} else if (rc == 0 && strcmp(cmd, "stat") == 0) {
		uint64_t size = 0;

		rc = kiln_store_stat(store, argv[3], &size);
		if (rc == 1)
			printf("%" PRIu64 "\n", size);
		else if (rc == 0)
			printf("absent\n");
		if (rc > 0)
			rc = 0;
	} else if (rc == 0 && strcmp(cmd, "rm") == 0) {
		rc = kiln_store_remove(store, argv[3]);
	} else if (rc == 0) {
		rc = kiln_store_list(store, argc == 4 ? argv[3] : "", print_key, NULL);
	}
	kiln_store_close(store);
	if (rc != 0) {
		fprintf(stderr, "store_tool: %s\n", kiln_error_last());
		return 1;
	}
	return 0;
}
