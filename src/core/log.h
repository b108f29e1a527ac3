/* Structured logs: one JSON object (or one plain-text line) per event on
 * stderr, each written with a single write(2) so lines from several threads
 * never interleave. An event is a fixed name plus fields holding names,
 * counts and codes, never a value taken from a record. KILN_LOG_EVERY
 * rate-limits a call site and reports how many lines it dropped. */
#ifndef KILN_CORE_LOG_H
#define KILN_CORE_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum kiln_log_level {
	KILN_LOG_DEBUG,
	KILN_LOG_INFO,
	KILN_LOG_WARN,
	KILN_LOG_ERROR,
} kiln_log_level;

/* One key and a string or integer value; a field whose key is NULL is
 * skipped, and a NULL string is written as null. Borrowed for the call. */
typedef struct kiln_log_field {
	const char *key;
	const char *str;
	long long num;
	bool is_num;
} kiln_log_field;

#define KILN_F_STR(k, v) ((kiln_log_field){.key = (k), .str = (v)})
#define KILN_F_INT(k, v) ((kiln_log_field){.key = (k), .num = (long long)(v), .is_num = true})

/* JSON lines (the default) or plain text lines
 * ("2026-11-30T03:30:00.123Z warn store_error: msg key=value"); lines below
 * min_level (default KILN_LOG_INFO) are dropped. Process-wide. */
void kiln_log_setup(bool json, kiln_log_level min_level);
/* The level named debug, info, warn or error (configs' log.level); false
 * for another name. */
bool kiln_log_level_parse(const char *name, kiln_log_level *out);
/* Where lines go (default 2); stays the caller's. For tests. */
void kiln_log_set_fd(int fd);
bool kiln_log_enabled(kiln_log_level level);

/* Writes {"ts":...,"level":...,"event":...,"msg":...,fields...} and a
 * newline. msg may be NULL (left out). Every string is JSON-escaped, bytes
 * that are not UTF-8 become U+FFFD, and a string whose escaped form passes
 * 4 KiB is cut and ends in "…", so a line is always valid JSON and at most
 * 16 KiB (fields that no longer fit are left out whole). */
void kiln_log_write(kiln_log_level level, const char *event, const char *msg, const kiln_log_field *fields,
                    size_t n);

/* KILN_LOG(KILN_LOG_WARN, "store_error", "put failed", KILN_F_STR("store", name), KILN_F_INT("attempt", 3));
 * The fields are optional. Arguments are not evaluated below the level. */
#define KILN_LOG(level, event, msg, ...)                                                                     \
	do {                                                                                                 \
		kiln_log_level kiln_log_lv_ = (level);                                                       \
		if (kiln_log_enabled(kiln_log_lv_)) {                                                        \
			const kiln_log_field kiln_log_f_[] = {{0}, __VA_ARGS__};                             \
			kiln_log_write(kiln_log_lv_, (event), (msg), kiln_log_f_,                            \
			               sizeof(kiln_log_f_) / sizeof(kiln_log_f_[0]));                        \
		}                                                                                            \
	} while (0)

/* Rate limit for one call site: zero-initialised (static), lock-free. */
typedef struct kiln_log_limiter {
	_Atomic uint64_t next_ns;    /* monotonic time before which lines are dropped */
	_Atomic uint64_t suppressed; /* dropped since the last line written */
} kiln_log_limiter;

/* true when a line may be written now (at most one per `seconds`), with
 * *suppressed_out set to the lines dropped since the last one (and reset);
 * false counts one more dropped line. */
bool kiln_log_limiter_allow(kiln_log_limiter *lim, double seconds, uint64_t *suppressed_out);
/* The same at a given monotonic time in nanoseconds (tests use a fake clock). */
bool kiln_log_limiter_allow_at(kiln_log_limiter *lim, double seconds, uint64_t now_ns,
                               uint64_t *suppressed_out);

/* KILN_LOG at most once per `seconds` from this call site (across threads);
 * the line written after some were dropped carries "suppressed":N. */
#define KILN_LOG_EVERY(seconds, level, event, msg, ...)                                                      \
	do {                                                                                                 \
		static kiln_log_limiter kiln_log_lim_;                                                       \
		kiln_log_level kiln_log_lv_ = (level);                                                       \
		uint64_t kiln_log_supp_ = 0;                                                                 \
		if (kiln_log_enabled(kiln_log_lv_) &&                                                        \
		    kiln_log_limiter_allow(&kiln_log_lim_, (seconds), &kiln_log_supp_)) {                    \
			const kiln_log_field kiln_log_f_[] = {{.key = kiln_log_supp_ ? "suppressed" : NULL,  \
			                                       .num = (long long)kiln_log_supp_,             \
			                                       .is_num = true},                              \
			                                      __VA_ARGS__};                                  \
			kiln_log_write(kiln_log_lv_, (event), (msg), kiln_log_f_,                            \
			               sizeof(kiln_log_f_) / sizeof(kiln_log_f_[0]));                        \
		}                                                                                            \
	} while (0)

#endif
