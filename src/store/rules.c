/* What the store front end and every backend share, below both: what a
 * key and a list prefix are, the retry policy of a backend's requests, and
 * the check of a file handed to put_file. (store.c registers the backends
 * and dispatches to them; a backend uses these, never store.c.) */
#include "store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"

#define KEY_MAX 1024

static bool key_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
	       c == '_' || c == '=' || c == '-';
}

bool kiln_store_key_valid(const char *key)
{
	const char *seg;
	size_t len;

	if (!key)
		return false;
	len = strlen(key);
	if (len == 0 || len > KEY_MAX)
		return false;
	seg = key;
	for (const char *p = key;; p++) {
		if (*p == '/' || *p == '\0') {
			size_t n = (size_t)(p - seg);

			if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
				return false;
			if (*p == '\0')
				return true;
			seg = p + 1;
		} else if (!key_char(*p)) {
			return false;
		}
	}
}

bool kiln_store_prefix_valid(const char *prefix)
{
	size_t len = strlen(prefix);
	const char *last;

	if (len == 0)
		return true;
	if (len > KEY_MAX)
		return false;
	if (prefix[len - 1] == '/') {
		char copy[KEY_MAX + 1];

		memcpy(copy, prefix, len - 1);
		copy[len - 1] = '\0';
		return kiln_store_key_valid(copy);
	}
	/* complete segments must be keys; the last may be any run of key chars */
	last = strrchr(prefix, '/');
	for (const char *p = last ? last + 1 : prefix; *p; p++)
		if (!key_char(*p))
			return false;
	if (last) {
		char copy[KEY_MAX + 1];
		size_t n = (size_t)(last - prefix);

		memcpy(copy, prefix, n);
		copy[n] = '\0';
		return kiln_store_key_valid(copy);
	}
	return true;
}

const kiln_retry_policy kiln_store_retry = {
    .first_us = 100000, .max_us = 5000000, .jitter = KILN_RETRY_QUARTER};

int kiln_store_check_upload(int fd, const char *path, uint64_t size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return kiln_error_set(KILN_EIO, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return kiln_error_set(KILN_EINVALID, "%s: not a regular file", path);
	if ((uint64_t)st.st_size != size)
		return kiln_error_set(KILN_EINVALID, "%s: is %" PRIu64 " bytes, expected %" PRIu64, path,
		                      (uint64_t)st.st_size, size);
	return 0;
}
