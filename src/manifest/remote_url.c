/* A remote's URL as messages show it (kiln_remote_safe_url, rebase.h):
 * what pushing (remote.c) and rebasing (rebase.c) both name. */
#include "manifest/rebase.h"

#include <stdio.h>
#include <string.h>

void kiln_remote_safe_url(char *out, size_t cap, const char *url)
{
	const char *scheme = strstr(url, "://"), *at, *slash;

	if (!scheme) {
		snprintf(out, cap, "%s", url);
		return;
	}
	slash = strchr(scheme + 3, '/');
	at = memchr(scheme + 3, '@', slash ? (size_t)(slash - scheme - 3) : strlen(scheme + 3));
	if (!at)
		snprintf(out, cap, "%s", url);
	else
		snprintf(out, cap, "%.*s%s", (int)(scheme + 3 - url), url, at + 1);
}
