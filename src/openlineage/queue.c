/* The OpenLineage queue folder and delivery (see internal.h): one file per
 * event, named <epoch ms>-<pid>-<seq>.json so that names sort oldest
 * first; bounded by openlineage.queue_max_mb (the oldest dropped, counted
 * and logged); sent oldest first through libcurl (store/curl.h's
 * conventions: no redirects, http and https only) or appended to the file
 * transport's file, and removed once delivered. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/retry.h"
#include "ingest/kafka_run.h"
#include "openlineage/internal.h"
#include "store/curl.h"

#define EVENT_MAX (16u << 20) /* an event file larger than this is not ours: dropped */

/* The sender's wait after the n-th failure in a row: 1 s, doubling, 60 s at most. */
static const kiln_retry_policy sender_retry = {
    .first_us = 1000000, .max_us = 60000000, .jitter = KILN_RETRY_QUARTER};
/* close's wait between tries: 100 ms, doubling (within timeout_ms) */
static const kiln_retry_policy close_retry = {.first_us = 100000, .max_us = 1000000};

int64_t kiln_ol_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t kiln_ol_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool is_event(const char *name)
{
	size_t n = strlen(name);

	return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".json") == 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The queue's event files, oldest first; *bytes their total size. */
static int list_queue(const kiln_openlineage *ol, char ***out, size_t *n_out, uint64_t *bytes)
{
	DIR *d = opendir(ol->cfg.queue_dir);
	struct dirent *e;
	char **v = NULL;
	size_t n = 0, cap = 0;

	*out = NULL;
	*n_out = 0;
	*bytes = 0;
	if (!d)
		return kiln_error_set(KILN_EIO, "%s: %s", ol->cfg.queue_dir, strerror(errno));
	while ((e = readdir(d))) {
		struct stat st;

		if (strstr(e->d_name, ".json.tmp-")) { /* a write a kill -9 cut short */
			char path[4400];

			snprintf(path, sizeof(path), "%s/%.*s", ol->cfg.queue_dir,
			         (int)(strstr(e->d_name, ".json.tmp-") - e->d_name + 5), e->d_name);
			kiln_fs_remove_stale_temps(path);
			continue;
		}
		if (!is_event(e->d_name) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			char **nv = realloc(v, (cap = cap ? cap * 2 : 32) * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		if (!(v[n] = strdup(e->d_name)))
			break;
		n++;
		*bytes += (uint64_t)st.st_size;
	}
	closedir(d);
	if (n) /* qsort of a NULL list is undefined */
		qsort(v, n, sizeof(*v), by_name);
	*out = v;
	*n_out = n;
	return 0;
}

static void free_list(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void remove_event(const kiln_openlineage *ol, const char *name)
{
	char path[4400];

	snprintf(path, sizeof(path), "%s/%s", ol->cfg.queue_dir, name);
	unlink(path);
}

/* Drops the oldest events while the queue holds more than its bound. */
static void bound_queue(kiln_openlineage *ol)
{
	char **v;
	size_t n, dropped = 0;
	uint64_t bytes;

	if (list_queue(ol, &v, &n, &bytes) < 0)
		return;
	for (size_t i = 0; i < n && bytes > ol->cfg.queue_max_bytes; i++) {
		struct stat st;
		char path[4400];

		snprintf(path, sizeof(path), "%s/%s", ol->cfg.queue_dir, v[i]);
		if (stat(path, &st) == 0 && unlink(path) == 0) {
			bytes -= (uint64_t)st.st_size < bytes ? (uint64_t)st.st_size : bytes;
			dropped++;
		}
	}
	if (dropped) {
		atomic_fetch_add(&ol->dropped_full, dropped);
		KILN_LOG(KILN_LOG_WARN, "openlineage_dropped",
		         "the OpenLineage queue is full: the oldest events dropped",
		         KILN_F_INT("events", dropped), KILN_F_STR("queue_dir", ol->cfg.queue_dir));
	}
	free_list(v, n);
}

void kiln_ol_enqueue(kiln_openlineage *ol, const kiln_buf *event)
{
	char path[4400];
	int rc;

	pthread_mutex_lock(&ol->lock);
	snprintf(path, sizeof(path), "%s/%013lld-%010ld-%06u.json", ol->cfg.queue_dir,
	         (long long)kiln_ol_wall_ms(), (long)getpid(), ol->seq++);
	pthread_mutex_unlock(&ol->lock);
	if ((rc = kiln_fs_mkdir_p(ol->cfg.queue_dir, 0700)) < 0 ||
	    (rc = kiln_fs_write_atomic(path, event->ptr, event->len, 0600)) < 0) {
		atomic_fetch_add(&ol->dropped_full, 1);
		KILN_LOG(KILN_LOG_WARN, "openlineage_dropped", kiln_error_last());
		return;
	}
	atomic_fetch_add(&ol->queued, 1);
	bound_queue(ol);
	pthread_mutex_lock(&ol->lock);
	pthread_cond_signal(&ol->wake);
	pthread_mutex_unlock(&ol->lock);
}

/* ---- sending one event ---------------------------------------------------- */

enum { SENT, RETRY, REFUSED, GONE };

static size_t discard(char *ptr, size_t size, size_t n, void *ctx)
{
	(void)ptr;
	(void)ctx;
	return size * n;
}

static int post(kiln_openlineage *ol, const char *body, size_t len)
{
	char err[CURL_ERROR_SIZE] = "", auth[4200]; /* the token: at most 4096 bytes */
	struct curl_slist *h = NULL, *h2;
	CURL *c;
	CURLcode cc;
	long status = 0;

	if (kiln_curl_init() < 0 || !(c = curl_easy_init()))
		return RETRY;
	kiln_curl_request(c, ol->cfg.url, err);
	h = curl_slist_append(NULL, "Content-Type: application/json");
	if (h && ol->token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %.*s", (int)ol->token_len, ol->token);
		if ((h2 = curl_slist_append(h, auth)))
			h = h2;
		explicit_bzero(auth, sizeof(auth));
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)ol->cfg.timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)ol->cfg.timeout_ms);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	cc = curl_easy_perform(c);
	if (cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	curl_slist_free_all(h); /* the header's copy of the token */
	if (cc == CURLE_OK && status >= 200 && status < 300)
		return SENT;
	if (cc == CURLE_OK && status >= 400 && status < 500 && status != 408 && status != 429) {
		if (!ol->refused_logged) /* the endpoint and the status; never the body */
			KILN_LOG(
			    KILN_LOG_ERROR, "openlineage_refused",
			    "the OpenLineage endpoint refused an event: dropped (later refusals not logged)",
			    KILN_F_STR("url", ol->url_shown), KILN_F_INT("status", status));
		ol->refused_logged = true;
		return REFUSED;
	}
	atomic_fetch_add(&ol->failed_sends, 1);
	KILN_LOG_EVERY(60, KILN_LOG_WARN, "openlineage_retry",
	               cc == CURLE_OK ? "the endpoint answered an error" : err,
	               KILN_F_STR("url", ol->url_shown), KILN_F_INT("status", status));
	return RETRY;
}

/* The file transport: the event and a newline in one append. */
static int append(kiln_openlineage *ol, const char *body, size_t len)
{
	int fd = open(ol->cfg.file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	char *line = malloc(len + 1);
	int rc = RETRY;

	if (fd >= 0 && line) {
		memcpy(line, body, len);
		line[len] = '\n';
		if (kiln_fs_write_all(fd, line, len + 1, ol->cfg.file) == 0)
			rc = SENT;
	}
	if (rc != SENT) {
		atomic_fetch_add(&ol->failed_sends, 1);
		KILN_LOG_EVERY(60, KILN_LOG_WARN, "openlineage_retry",
		               fd < 0 ? strerror(errno) : kiln_error_last(),
		               KILN_F_STR("file", ol->cfg.file));
	}
	free(line);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* ---- the Kafka transport --------------------------------------------------- */

static void delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	kiln_openlineage *ol = opaque;

	(void)rk;
	if (m->err) {
		atomic_fetch_add(&ol->kafka_failed, 1);
		KILN_LOG_EVERY(60, KILN_LOG_WARN, "openlineage_retry", rd_kafka_err2str(m->err),
		               KILN_F_STR("topic", ol->cfg.kafka_topic));
	} else {
		atomic_fetch_add(&ol->kafka_delivered, 1);
	}
}

static void quiet_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	(void)rk;
	/* CONFWARN: a consumer property of source.options, ignored by a producer */
	if (level <= 4 && strcmp(fac, "CONFWARN") != 0)
		KILN_LOG_EVERY(60, KILN_LOG_WARN, "openlineage_kafka", buf, KILN_F_STR("facility", fac));
}

static rd_kafka_t *producer(kiln_openlineage *ol)
{
	rd_kafka_conf_t *conf = NULL;
	char err[512], timeout[32];

	if (ol->kafka)
		return ol->kafka;
	snprintf(timeout, sizeof(timeout), "%lld", (long long)ol->cfg.timeout_ms);
	if (kiln_kafka_producer_conf(&conf, ol->p) < 0 ||
	    rd_kafka_conf_set(conf, "message.timeout.ms", timeout, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		KILN_LOG_EVERY(60, KILN_LOG_WARN, "openlineage_retry", conf ? err : kiln_error_last());
		if (conf)
			rd_kafka_conf_destroy(conf);
		return NULL;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, delivered);
	rd_kafka_conf_set_log_cb(conf, quiet_log);
	rd_kafka_conf_set_opaque(conf, ol);
	if (!(ol->kafka = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err)))) {
		rd_kafka_conf_destroy(conf);
		KILN_LOG_EVERY(60, KILN_LOG_WARN, "openlineage_retry", err);
	}
	return ol->kafka;
}

/* One event to the topic, keyed by the job (its events stay in order in
 * one partition), delivered within timeout_ms or taken back (purged: a
 * message that was delivered all the same is sent twice, at least once). */
static int produce(kiln_openlineage *ol, const char *body, size_t len)
{
	rd_kafka_t *rk = producer(ol);
	uint64_t ok = atomic_load(&ol->kafka_delivered);
	rd_kafka_resp_err_t err;
	char key[600];

	if (!rk)
		return RETRY;
	snprintf(key, sizeof(key), "run:%s/%s", ol->cfg.namespace_, ol->job_name);
	err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(ol->cfg.kafka_topic),
	                        RD_KAFKA_V_VALUE((void *)body, len), RD_KAFKA_V_KEY(key, strlen(key)),
	                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
	if (err) {
		KILN_LOG_EVERY(60, KILN_LOG_WARN, "openlineage_retry", rd_kafka_err2str(err),
		               KILN_F_STR("topic", ol->cfg.kafka_topic));
		return err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ? REFUSED : RETRY;
	}
	if (rd_kafka_flush(rk, (int)ol->cfg.timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) {
		rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		rd_kafka_poll(rk, 0); /* the purged message's report */
	}
	if (atomic_load(&ol->kafka_delivered) > ok)
		return SENT;
	atomic_fetch_add(&ol->failed_sends, 1);
	return RETRY;
}

void kiln_ol_producer_close(kiln_openlineage *ol)
{
	if (!ol->kafka)
		return;
	rd_kafka_flush(ol->kafka, (int)ol->cfg.timeout_ms);
	rd_kafka_purge(ol->kafka, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
	rd_kafka_poll(ol->kafka, 0);
	rd_kafka_destroy(ol->kafka);
	ol->kafka = NULL;
}

static int send_one(kiln_openlineage *ol, const char *name)
{
	char path[4400];
	kiln_buf b = KILN_BUF_INIT(EVENT_MAX);
	FILE *f;
	char chunk[65536];
	size_t n;
	int rc = SENT;

	snprintf(path, sizeof(path), "%s/%s", ol->cfg.queue_dir, name);
	if (!(f = fopen(path, "rb")))
		return GONE; /* dropped from a full queue meanwhile */
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (kiln_buf_put(&b, chunk, n) < 0) {
			rc = REFUSED; /* over EVENT_MAX: not an event kiln wrote */
			break;
		}
	fclose(f);
	if (rc == SENT && kiln_buf_putc(&b, '\0') == 0)
		rc = ol->cfg.url    ? post(ol, b.ptr, b.len - 1)
		     : ol->cfg.file ? append(ol, b.ptr, b.len - 1)
		                    : produce(ol, b.ptr, b.len - 1);
	kiln_buf_free(&b);
	if (rc == SENT)
		atomic_fetch_add(&ol->sent, 1);
	else if (rc == REFUSED)
		atomic_fetch_add(&ol->refused, 1);
	if (rc != RETRY)
		remove_event(ol, name);
	return rc;
}

int kiln_ol_send_queue(kiln_openlineage *ol, int64_t deadline_ms, const atomic_bool *abort)
{
	char lock_path[4400], **v = NULL;
	size_t n = 0, i = 0;
	uint64_t bytes;
	int fd, done = 0;

	snprintf(lock_path, sizeof(lock_path), "%s/.lock", ol->cfg.queue_dir);
	if (kiln_fs_mkdir_p(ol->cfg.queue_dir, 0700) < 0 ||
	    (fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
		return 0;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		close(fd);
		return 0; /* another process is sending */
	}
	if (list_queue(ol, &v, &n, &bytes) == 0) {
		for (i = 0; i < n && kiln_ol_now_ms() < deadline_ms && !(abort && atomic_load(abort)); i++)
			if (send_one(ol, v[i]) == RETRY)
				break;
		done = i == n;
	}
	free_list(v, n);
	flock(fd, LOCK_UN);
	close(fd);
	return done;
}

void *kiln_ol_sender(void *arg)
{
	kiln_openlineage *ol = arg;
	unsigned failures = 0;

	pthread_mutex_lock(&ol->lock);
	while (!ol->stop) {
		struct timespec until;
		int64_t wait_ms = 5000; /* when all is sent: a new event wakes it earlier */
		int done;

		pthread_mutex_unlock(&ol->lock);
		done = kiln_ol_send_queue(ol, kiln_ol_now_ms() + 10 * ol->cfg.timeout_ms, &ol->stopping);
		failures = done ? 0 : failures + 1;
		if (!done)
			wait_ms =
			    (int64_t)(kiln_retry_delay_us(&sender_retry, failures, (uint32_t)rand()) / 1000);
		pthread_mutex_lock(&ol->lock);
		if (ol->stop)
			break;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += wait_ms / 1000;
		until.tv_nsec += (wait_ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		/* a new event wakes it early, unless the endpoint is failing */
		while (!ol->stop && pthread_cond_timedwait(&ol->wake, &ol->lock, &until) == 0 && failures)
			;
	}
	pthread_mutex_unlock(&ol->lock);
	return NULL;
}

void kiln_ol_flush(kiln_openlineage *ol)
{
	int64_t deadline = kiln_ol_now_ms() + ol->cfg.timeout_ms;

	for (unsigned n = 1; !kiln_ol_send_queue(ol, deadline, NULL); n++) {
		int64_t wait_ms = (int64_t)(kiln_retry_delay_us(&close_retry, n, 0) / 1000);

		if (kiln_ol_now_ms() + wait_ms >= deadline)
			break;
		usleep((useconds_t)wait_ms * 1000);
	}
}
