/* The progress bar and the progress line (see progress.h). */
#include "cli/progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void mib(char *out, size_t cap, double bytes)
{
	snprintf(out, cap, "%.1f", bytes / (1024.0 * 1024.0));
}

void kiln_cli_rate_draw(kiln_cli_rate *r, uint64_t bytes, uint64_t total, uint64_t records, const char *label)
{
	char line[256], done[32], all[32], speed[32], eta[32] = "";
	double t, elapsed, bps;
	int n;

	if (!r->tty)
		return;
	t = now_s();
	if (r->start == 0)
		r->start = t - 1e-9; /* drawn at once: no rate yet */
	else if (t - r->drawn < 0.2)
		return;
	r->drawn = t;
	elapsed = t - r->start;
	bps = elapsed > 0 ? (double)bytes / elapsed : 0;
	mib(done, sizeof(done), (double)bytes);
	mib(speed, sizeof(speed), bps);
	if (total >= bytes && total > 0)
		mib(all, sizeof(all), (double)total);
	if (elapsed < 0.01) {
		n = snprintf(line, sizeof(line), "%s: %s%s%s MiB, %" PRIu64 " records", label, done,
		             total >= bytes && total > 0 ? "/" : "", total >= bytes && total > 0 ? all : "",
		             records);
	} else if (total >= bytes && total > 0) {
		if (bps > 0) {
			unsigned left = (unsigned)((double)(total - bytes) / bps + 0.5);
			snprintf(eta, sizeof(eta), ", ETA %u:%02u", left / 60, left % 60);
		}
		n = snprintf(line, sizeof(line),
		             "%s: %s/%s MiB, %" PRIu64 " records, %s MiB/s, %.0f records/s%s", label, done,
		             all, records, speed, elapsed > 0 ? (double)records / elapsed : 0.0, eta);
	} else {
		n = snprintf(line, sizeof(line), "%s: %s MiB, %" PRIu64 " records, %s MiB/s, %.0f records/s",
		             label, done, records, speed, elapsed > 0 ? (double)records / elapsed : 0.0);
	}
	if (n < 0)
		return;
	if (n >= (int)sizeof(line))
		n = (int)sizeof(line) - 1;
	fprintf(stderr, "\r%s%*s", line, r->width > n ? r->width - n : 0, "");
	r->width = n;
	fflush(stderr);
}

void kiln_cli_rate_clear(kiln_cli_rate *r)
{
	if (!r->tty || !r->width)
		return;
	fprintf(stderr, "\r%*s\r", r->width, "");
	fflush(stderr);
	r->width = 0;
}
