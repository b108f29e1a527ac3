/* The progress bar (see progress.h). */
#include "cli/progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void scaled(char *out, size_t cap, uint64_t done, uint64_t total)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double d = (double)done, t = (double)total;
	int u = 0;

	while (t >= 1024 && u < 4) {
		d /= 1024;
		t /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, cap, "%" PRIu64 "/%" PRIu64 " B", done, total);
	else
		snprintf(out, cap, "%.1f/%.1f %s", d, t, units[u]);
}

void kiln_cli_bar_draw(kiln_cli_bar *b, uint64_t done, uint64_t total, const char *unit, uint64_t bytes_done,
                       uint64_t bytes_total, const char *label)
{
	char line[512], bytes[64], cells[21];
	int filled, n;

	if (!b->tty)
		return;
	if (b->label[0] && strcmp(b->label, label) != 0 && b->width)
		fputc('\n', stderr); /* keep the finished bar */
	snprintf(b->label, sizeof(b->label), "%s", label);
	filled = total ? (int)(20 * done / total) : 20;
	for (int i = 0; i < 20; i++)
		cells[i] = i < filled ? '#' : '.';
	cells[20] = '\0';
	scaled(bytes, sizeof(bytes), bytes_done, bytes_total);
	n = snprintf(line, sizeof(line), "[%s] %" PRIu64 "/%" PRIu64 " %s %s %s", cells, done, total, unit,
	             bytes, label);
	fprintf(stderr, "\r%s%*s", line, b->width > n ? b->width - n : 0, "");
	b->width = n;
	fflush(stderr);
}

void kiln_cli_bar_clear(kiln_cli_bar *b)
{
	if (!b->tty || !b->width)
		return;
	fprintf(stderr, "\r%*s\r", b->width, "");
	fflush(stderr);
	b->width = 0;
}

void kiln_cli_bar_end(kiln_cli_bar *b)
{
	if (b->tty && b->width)
		fputc('\n', stderr);
	b->width = 0;
}
