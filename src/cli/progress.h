/* The progress bar of the commands that move many objects (`kiln cache sync
 * --once`, `kiln push`): one line on stderr, drawn only on a terminal,
 * "[#####.....] 12/40 shards 1.2/3.4 MiB LABEL". */
#ifndef KILN_CLI_PROGRESS_H
#define KILN_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct kiln_cli_bar {
	bool tty;  /* draw at all */
	int width; /* characters last drawn */
	char label[160];
} kiln_cli_bar;

/* Draws the bar over the last one. A new label keeps the finished bar on its
 * line and starts the next one below it. unit: what done/total count
 * ("shards", "objects"). */
void kiln_cli_bar_draw(kiln_cli_bar *bar, uint64_t done, uint64_t total, const char *unit,
                       uint64_t bytes_done, uint64_t bytes_total, const char *label);
/* Erases the bar (before another line goes to stderr); the next draw puts it back. */
void kiln_cli_bar_clear(kiln_cli_bar *bar);
/* Ends the bar's line, keeping it. */
void kiln_cli_bar_end(kiln_cli_bar *bar);

/* The progress line of a command that reads a file (`kiln run` of a file
 * or stdin source, `kiln validate`): one line on stderr, drawn only on a
 * terminal, at the first call and then at most every 0.2 s, "LABEL:
 * 12.3/45.6 MiB, 120000 records, 34.5 MiB/s, 210000 records/s, ETA 0:02"
 * (no total: no ETA; the first: no rates). */
typedef struct kiln_cli_rate {
	bool tty;
	int width;           /* characters last drawn */
	double start, drawn; /* monotonic seconds: the first call, the last draw */
} kiln_cli_rate;

void kiln_cli_rate_draw(kiln_cli_rate *rate, uint64_t bytes, uint64_t total, uint64_t records,
                        const char *label);
/* Erases the line (before the command's summary). */
void kiln_cli_rate_clear(kiln_cli_rate *rate);

#endif
