/* JSONTestSuite conformance: every y_ case accepted, every n_ case
 * rejected, every i_ case scanned without crashing. Reads the folder named by
 * JSONTESTSUITE_DIR (default ../shared/conformance/JSONTestSuite/test_parsing
 * beside the source tree) and skips (exit 77) when it is absent.
 *
 * RFC 8259 only says names SHOULD be unique, and the suite accepts
 * duplicated keys (y_object_duplicated_key*), so the syntax check runs with
 * allow_duplicate_keys; kiln's record validation rejects them on top. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

static char *read_all(const char *path, size_t *out_len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, len = 0, n;

	if (!f)
		return NULL;
	do {
		if (len == cap) {
			char *p = realloc(buf, cap ? cap * 2 : 4096);
			if (!p) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = p;
			cap = cap ? cap * 2 : 4096;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	*out_len = len;
	return buf;
}

int main(void)
{
	const char *dir = getenv("JSONTESTSUITE_DIR");
	char fallback[4096];
	kiln_json_limits limits = {.allow_duplicate_keys = true};
	kiln_json_scanner *s = kiln_json_scanner_new(&limits);
	int passed = 0, failed = 0, tolerated = 0;
	struct dirent *de;
	DIR *d;

	if (!dir || !*dir) {
		snprintf(fallback, sizeof(fallback), "%s/../shared/conformance/JSONTestSuite/test_parsing",
		         KILN_SRCDIR);
		dir = fallback;
	}
	d = opendir(dir);
	if (!d) {
		printf("SKIP: JSONTestSuite not found at %s\n", dir);
		kiln_json_scanner_free(s);
		return 77;
	}
	while ((de = readdir(d)) != NULL) {
		const char *name = de->d_name;
		char path[8192];
		size_t len = 0;
		char *text;
		kiln_reject r;

		if (!((name[0] == 'y' || name[0] == 'n' || name[0] == 'i') && name[1] == '_'))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		text = read_all(path, &len);
		if (!text) {
			printf("FAIL %s: cannot read\n", name);
			failed++;
			continue;
		}
		r = kiln_json_check(s, text, len);
		free(text);
		if (name[0] == 'i') {
			tolerated++;
			continue;
		}
		if ((name[0] == 'y') == (r == KILN_REJECT_NONE)) {
			passed++;
		} else {
			printf("FAIL %s: %s\n", name, name[0] == 'y' ? kiln_reject_name(r) : "accepted");
			failed++;
		}
	}
	closedir(d);
	kiln_json_scanner_free(s);
	printf("%d passed, %d failed (%d implementation-defined cases scanned)\n", passed, failed, tolerated);
	if (passed + failed == 0) {
		printf("FAIL: no y_ or n_ case in %s\n", dir);
		return 1;
	}
	return failed ? 1 : 0;
}
