/* Sizes parsed and printed (see units.h). */
#include "core/units.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long long kiln_parse_size(const char *s)
{
	char *end;
	long long n;
	int shift = 0;

	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	n = strtoll(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	default:
		break;
	}
	if (shift && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
		end += strlen(end);
	if (*end || n > (1ll << (62 - shift)))
		return -1;
	return n << shift;
}

int kiln_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

int64_t kiln_parse_age(const char *s)
{
	char *end;
	unsigned long long v;
	int64_t unit;

	errno = 0;
	if (!s || *s < '0' || *s > '9')
		return -1;
	v = strtoull(s, &end, 10);
	if (errno || end[0] == '\0' || end[1] != '\0' || v == 0)
		return -1;
	switch (*end) {
	case 's':
		unit = 1;
		break;
	case 'm':
		unit = 60;
		break;
	case 'h':
		unit = 3600;
		break;
	case 'd':
		unit = 86400;
		break;
	case 'w':
		unit = 7 * 86400;
		break;
	default:
		return -1;
	}
	if (v > (unsigned long long)(INT64_MAX / unit))
		return -1;
	return (int64_t)v * unit;
}

void kiln_size_human(char *out, size_t cap, uint64_t bytes, bool compact)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(out, cap, "%" PRIu64 " B", bytes);
		return;
	}
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(out, cap, compact && v >= 10 ? "%.0f %s" : "%.1f %s", v, units[u]);
}
