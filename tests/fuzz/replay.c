/* Replays a fuzz corpus without libFuzzer, so `make check` runs every saved
 * input through the target with any compiler, then fuzzes for a few seconds
 * (the smoke run): each round takes a corpus input, mutates it (bit flips,
 * byte sets, inserts, deletes, truncation, a splice with another input,
 * interesting values) and runs the target on the result. The mutations come
 * from a seeded generator, so a failure repeats with the seed and round it
 * prints. Corpus folder: argv[1], else the one the build names
 * (KILN_FUZZ_CORPUS).
 *
 * Environment: KILN_FUZZ_SMOKE_ROUNDS (default 1000000; 0 replays only),
 * KILN_FUZZ_SMOKE_SECONDS (default 2: the rounds stop earlier when they take
 * longer), KILN_FUZZ_SEED (default 1). The input of the round under way is
 * written to fuzz-crash-<target> in the current folder when the target
 * crashes or aborts, for replay by the libFuzzer build (make fuzz). */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_INPUT (64 * 1024)

struct input {
	unsigned char *data;
	size_t len;
};

static char crash_path[512];
static const unsigned char *current;
static size_t current_len;

/* Async-signal-safe: writes the round's input, then dies of the signal. */
static void on_fatal(int sig)
{
	if (current && crash_path[0]) {
		int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			ssize_t w = write(fd, current, current_len);
			(void)w;
			close(fd);
		}
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static size_t below(size_t n)
{
	return n ? (size_t)(rng() % n) : 0;
}

static size_t mutate(unsigned char *buf, size_t len, size_t cap, const struct input *corpus, size_t n)
{
	static const int64_t interesting[] = {0,    -1,     1,      0x7f,       0x80,
	                                      0xff, 0x7fff, 0xffff, 0x7fffffff, INT64_MAX};
	static const char *tokens[] = {
	    "\"", "\\", "\\u0000", "\\ud800", "{",        "}",    "[",     "]",  ":",
	    ",",  "\n", "\r",      "\xff",    "\xc0\x80", "null", "1e400", "-0", "18446744073709551616"};
	int steps = 1 + (int)below(4);

	for (int s = 0; s < steps; s++) {
		switch (below(8)) {
		case 0: /* flip a bit */
			if (len)
				buf[below(len)] ^= (unsigned char)(1u << below(8));
			break;
		case 1: /* set a byte */
			if (len)
				buf[below(len)] = (unsigned char)rng();
			break;
		case 2: { /* insert bytes */
			size_t k = 1 + below(8), at = below(len + 1);
			if (len + k > cap)
				break;
			memmove(buf + at + k, buf + at, len - at);
			for (size_t i = 0; i < k; i++)
				buf[at + i] = (unsigned char)rng();
			len += k;
			break;
		}
		case 3: { /* delete bytes */
			size_t at = below(len), k;
			if (!len)
				break;
			k = 1 + below(len - at < 16 ? len - at : 16);
			memmove(buf + at, buf + at + k, len - at - k);
			len -= k;
			break;
		}
		case 4: /* truncate */
			len = below(len + 1);
			break;
		case 5: { /* splice: the tail of another input */
			const struct input *o = &corpus[below(n)];
			size_t at = below(len + 1), from = below(o->len + 1), k = o->len - from;
			if (at + k > cap)
				k = cap - at;
			memcpy(buf + at, o->data + from, k);
			len = at + k;
			break;
		}
		case 6: { /* an interesting number as text */
			char t[32];
			int k = snprintf(t, sizeof(t), "%lld", (long long)interesting[below(10)]);
			size_t at = below(len + 1);
			if (len + (size_t)k > cap)
				break;
			memmove(buf + at + k, buf + at, len - at);
			memcpy(buf + at, t, (size_t)k);
			len += (size_t)k;
			break;
		}
		default: { /* a token that matters to text formats */
			const char *t = tokens[below(sizeof(tokens) / sizeof(tokens[0]))];
			size_t k = strlen(t), at = below(len + 1);
			if (len + k > cap)
				break;
			memmove(buf + at + k, buf + at, len - at);
			memcpy(buf + at, t, k);
			len += k;
			break;
		}
		}
	}
	return len;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long env_long(const char *name, long fallback)
{
	const char *v = getenv(name);
	return v && *v ? strtol(v, NULL, 10) : fallback;
}

static void run(const unsigned char *data, size_t len)
{
	current = data;
	current_len = len;
	LLVMFuzzerTestOneInput(data, len);
	current = NULL;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : KILN_FUZZ_CORPUS;
	const char *base;
	struct input *corpus = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	if (!dir || !(d = opendir(dir))) {
		fprintf(stderr, "replay: cannot open corpus folder %s\n", dir ? dir : "(none)");
		return 1;
	}
	base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
	snprintf(crash_path, sizeof(crash_path), "fuzz-crash-%s", base);
	signal(SIGSEGV, on_fatal);
	signal(SIGABRT, on_fatal);
	signal(SIGBUS, on_fatal);
	signal(SIGFPE, on_fatal);
	signal(SIGILL, on_fatal);

	while ((de = readdir(d)) != NULL) {
		char path[4096];
		unsigned char *buf;
		long len;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!(f = fopen(path, "rb")))
			continue;
		fseek(f, 0, SEEK_END);
		len = ftell(f);
		rewind(f);
		buf = malloc(len > 0 ? (size_t)len : 1);
		if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
			fprintf(stderr, "replay: cannot read %s\n", path);
			return 1;
		}
		fclose(f);
		run(buf, (size_t)len);
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			corpus = realloc(corpus, cap * sizeof(*corpus));
			if (!corpus)
				return 1;
		}
		corpus[n++] = (struct input){buf, (size_t)len};
	}
	closedir(d);
	printf("%zu passed, 0 failed (corpus inputs replayed from %s)\n", n, dir);
	if (!n)
		return 1;

	long rounds = env_long("KILN_FUZZ_SMOKE_ROUNDS", 1000000);
	long seconds = env_long("KILN_FUZZ_SMOKE_SECONDS", 2);
	long seed = env_long("KILN_FUZZ_SEED", 1);
	unsigned char *buf = malloc(FUZZ_MAX_INPUT);
	double end = now() + (double)seconds;
	long r;

	if (!buf)
		return 1;
	rng_state = 0x9e3779b97f4a7c15ull ^ (uint64_t)seed;
	printf("fuzzing %s: up to %ld rounds or %ld s, KILN_FUZZ_SEED=%ld\n", base, rounds, seconds, seed);
	fflush(stdout);
	for (r = 0; r < rounds; r++) {
		const struct input *in = &corpus[below(n)];
		size_t len = in->len < FUZZ_MAX_INPUT ? in->len : FUZZ_MAX_INPUT;

		memcpy(buf, in->data, len);
		len = mutate(buf, len, FUZZ_MAX_INPUT, corpus, n);
		/* a copy of exactly len bytes, so a read past the end is seen */
		unsigned char *exact = malloc(len ? len : 1);
		if (!exact)
			return 1;
		memcpy(exact, buf, len);
		run(exact, len);
		free(exact);
		if ((r & 63) == 63 && now() > end) {
			r++;
			break;
		}
	}
	printf("%ld passed, 0 failed (mutated rounds, KILN_FUZZ_SEED=%ld)\n", r, seed);
	for (size_t i = 0; i < n; i++)
		free(corpus[i].data);
	free(corpus);
	free(buf);
	return 0;
}
