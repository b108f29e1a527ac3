/* `kiln cat DATASET@REF --split S`: streams a version's records to stdout as
 * JSON Lines, shard by shard, each shard's bytes verified against its name
 * before a byte of it is written; optionally one rank's share, shuffled by
 * a seed (the same assignment as `kiln ls` and kiln_reader_assign). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/share.h"
#include "core/error.h"
#include "core/fs.h"

static const char usage_text[] =
    "usage: kiln cat DATASET[@REF] [--split train|dev|test] [--rank R --world-size W]\n"
    "                [--shuffle-seed S] [--epoch E] [--shuffle-buffer N]\n"
    "                [--resume STATE] [--state-file FILE [--state-every N]]\n"
    "                [--manifest REPO] [--store URL]\n"
    "\n"
    "Writes the records of one split of a version (default: train) to stdout as\n"
    "JSON Lines, shard after shard. Each shard is downloaded, its BLAKE2b-256\n"
    "checked against its name, and only then decompressed: a corrupt or\n"
    "tampered shard stops the stream before any of its bytes are written.\n"
    "Without --shuffle-seed shards come in hash order; with it, in an order\n"
    "every worker computes alike from the seed. With --rank/--world-size, the\n"
    "i-th shard of that order goes to rank i mod W (docs/READING.md).\n"
    "\n"
    "Options:\n"
    "  --split NAME          train, dev or test (default: train)\n"
    "  --rank R              this worker's rank, 0 <= R < W (default 0)\n"
    "  --world-size W        how many workers share the split (default 1)\n"
    "  --shuffle-seed S      shuffle the shard order with seed S (0..2^64-1)\n"
    "  --epoch E             the epoch: each reshuffles the shards from seed and\n"
    "                        epoch (default 0: the seed's own order)\n"
    "  --shuffle-buffer N    also shuffle records through a buffer of N records\n"
    "  --resume STATE        go on where a state (its JSON, or a file holding it)\n"
    "                        left off: exactly the records that come next\n"
    "  --state-file FILE     write the state to FILE (atomically) every\n"
    "                        --state-every records (default 10000), at the end,\n"
    "                        and on SIGTERM/SIGINT (then exit 130 or 143)\n"
    "  -m, --manifest REPO   the manifest repository (default: $KILN_MANIFEST)\n"
    "  --store URL           the object store, file://DIR or s3://BUCKET/PREFIX,\n"
    "                        or a cache node http://HOST:PORT (default: $KILN_STORE)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 on success; 2 on a shard that fails verification (hash\n"
    "mismatch, broken zstd frame; `kiln verify --deep` checks them all), a bad\n"
    "reference, a missing repository, store setting or object, or another error.\n";

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

typedef struct cursor_opts {
	uint64_t epoch, buffer, every;
	const char *resume, *state_file;
	bool epoch_seen, buffer_seen;
} cursor_opts;

/* The state in state_file, atomically (a temporary file beside it, renamed). */
static int save_state(const kiln_cursor *c, const char *path)
{
	static bool swept;
	char st[KILN_CURSOR_STATE_SIZE + 1];
	size_t n;
	int rc;

	if (!swept) { /* temporaries of a killed reader, once */
		kiln_fs_remove_stale_temps(path);
		swept = true;
	}
	if ((rc = kiln_cursor_state(c, st, sizeof(st) - 1)) < 0)
		return rc;
	n = strlen(st);
	st[n++] = '\n';
	return kiln_fs_write_atomic(path, st, n, 0644);
}

/* --resume: the state's JSON, or a file holding it (all of it: the cursor
 * refuses anything after the state but whitespace). out: room for
 * KILN_CURSOR_STATE_MAX + 1 bytes. */
static int read_resume(const char *arg, char *out)
{
	size_t n = 0;
	int fd;

	if (arg[0] == '{') {
		if (strlen(arg) > KILN_CURSOR_STATE_MAX)
			return kiln_error_set(KILN_EINVALID, "--resume: a state is at most %d bytes",
			                      KILN_CURSOR_STATE_MAX);
		strcpy(out, arg);
		return 0;
	}
	if ((fd = open(arg, O_RDONLY | O_CLOEXEC)) < 0)
		return kiln_error_set(KILN_EINVALID, "--resume %s: %s", arg, strerror(errno));
	while (n <= KILN_CURSOR_STATE_MAX) {
		ssize_t got = read(fd, out + n, KILN_CURSOR_STATE_MAX + 1 - n);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int e = errno;

			close(fd);
			return kiln_error_set(KILN_EINVALID, "--resume %s: %s", arg, strerror(e));
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	if (n > KILN_CURSOR_STATE_MAX)
		return kiln_error_set(KILN_EINVALID, "--resume %s: more than %d bytes: not a cursor state",
		                      arg, KILN_CURSOR_STATE_MAX);
	if (memchr(out, '\0', n))
		return kiln_error_set(KILN_EINVALID, "--resume %s: a NUL byte: not a cursor state", arg);
	out[n] = '\0';
	return 0;
}

/* The records through a cursor: epochs, the shuffle buffer, resume and state. */
static int cat_cursor(kiln_reader *r, const kiln_share *share, const cursor_opts *co)
{
	kiln_cursor_options o = {.version = KILN_CURSOR_OPTIONS_VERSION,
	                         .split = share->split,
	                         .rank = (unsigned)share->rank,
	                         .world = (unsigned)share->world,
	                         .seed = share->seed,
	                         .shuffle = share->shuffle,
	                         .epoch = co->epoch,
	                         .shuffle_buffer = (size_t)co->buffer};
	/* SA_RESTART: a write blocked on a full pipe goes on; the loop stops after it */
	struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART};
	kiln_cursor *c = NULL;
	char resume[KILN_CURSOR_STATE_MAX + 1];
	uint64_t since = 0;
	const char *data;
	size_t len, count;
	int rc = 0;

	if ((rc = kiln_cursor_open(&c, r, &o)) < 0)
		return rc;
	if (co->resume &&
	    ((rc = read_resume(co->resume, resume)) < 0 || (rc = kiln_cursor_restore(c, resume)) < 0))
		goto done;
	if (co->state_file) {
		sigemptyset(&sa.sa_mask);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
	}
	/* in batches (the shard's lines as they are), cut so that a state is
	 * saved after exactly every `every` records; without a state file or a
	 * shuffle buffer a batch is the rest of the shard in hand, one write()
	 * of the verified text without a scan for its lines */
	while (!stop_signal) {
		size_t max = 1 << 16, max_bytes = 1 << 20;

		if (!co->state_file && !co->buffer)
			max = max_bytes = SIZE_MAX;
		if (co->state_file && co->every - since < max)
			max = (size_t)(co->every - since);
		if ((rc = kiln_cursor_next_batch(c, max, max_bytes, &data, &len, &count)) <= 0)
			break;
		if (fwrite(data, 1, len, stdout) != len) {
			rc = kiln_error_set(KILN_EIO, "stdout: write error: %s", strerror(errno));
			goto done;
		}
		if (co->state_file && (since += count) >= co->every) {
			since = 0;
			if (fflush(stdout) != 0) {
				rc = kiln_error_set(KILN_EIO, "stdout: write error: %s", strerror(errno));
				goto done;
			}
			if ((rc = save_state(c, co->state_file)) < 0)
				goto done;
		}
	}
	if (rc < 0)
		goto done;
	if (fflush(stdout) != 0) {
		rc = kiln_error_set(KILN_EIO, "stdout: write error: %s", strerror(errno));
		goto done;
	}
	if (co->state_file)
		rc = save_state(c, co->state_file);
done:
	kiln_cursor_close(c);
	return rc;
}

int kiln_cmd_cat(int argc, char **argv)
{
	kiln_share share;
	cursor_opts co = {.every = 10000};
	kiln_cli_option rows[KILN_SHARE_NROWS + 6];
	const kiln_cli_spec spec = {
	    .cmd = "cat",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one DATASET[@REF] (see kiln cat --help)",
	};
	kiln_reader *r = NULL;
	kiln_reader_shard *shards;
	size_t *idx = NULL, nidx = 0;
	int first, status;

	kiln_share_init(&share);
	kiln_share_rows(rows, &share);
	rows[KILN_SHARE_NROWS] = (kiln_cli_option){.name = "epoch",
	                                           .kind = KILN_CLI_U64,
	                                           .out = &co.epoch,
	                                           .seen = &co.epoch_seen,
	                                           .max = UINT64_MAX,
	                                           .bad = "--epoch wants a number"};
	rows[KILN_SHARE_NROWS + 1] = (kiln_cli_option){.name = "shuffle-buffer",
	                                               .kind = KILN_CLI_U64,
	                                               .out = &co.buffer,
	                                               .seen = &co.buffer_seen,
	                                               .max = 1u << 24,
	                                               .bad = "--shuffle-buffer wants a number 0..16777216"};
	rows[KILN_SHARE_NROWS + 2] =
	    (kiln_cli_option){.name = "resume", .kind = KILN_CLI_STRING, .out = &co.resume};
	rows[KILN_SHARE_NROWS + 3] =
	    (kiln_cli_option){.name = "state-file", .kind = KILN_CLI_STRING, .out = &co.state_file};
	rows[KILN_SHARE_NROWS + 4] = (kiln_cli_option){.name = "state-every",
	                                               .kind = KILN_CLI_U64,
	                                               .out = &co.every,
	                                               .min = 1,
	                                               .max = UINT64_MAX,
	                                               .bad = "--state-every wants a positive number"};
	rows[KILN_SHARE_NROWS + 5] = KILN_CLI_END;
	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (kiln_share_open("cat", &share, argv[first], &r, &shards, &idx, &nidx) != 0)
		return KILN_EXIT_USAGE;
	/* one way to read: the cursor (epoch 0 without a buffer is the order of
	 * kiln ls --rank --world-size) */
	if (cat_cursor(r, &share, &co) < 0) {
		fflush(stdout); /* what was verified and written stays written */
		goto fail;
	}
	if (stop_signal) {
		status = 128 + (int)stop_signal;
		goto cleanup;
	}
	status = KILN_EXIT_OK;
	goto cleanup;
fail:
	kiln_cli_fail("cat", "%s", kiln_error_last());
cleanup:
	free(idx);
	kiln_reader_close(r);
	return status;
}
