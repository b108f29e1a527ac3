/* `kiln broker`: librdkafka's mock cluster as a development and test broker.
 * Owns one producer handle (which the mock cluster needs for its bookkeeping)
 * and the cluster; prints the bootstrap servers, optionally writes them to a
 * file, and serves until SIGTERM or SIGINT. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "cli/args.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "core/error.h"
#include "core/fs.h"

#define BROKER_DEFAULT_TOPIC      "user-events"
#define BROKER_DEFAULT_PARTITIONS 4
#define BROKER_MAX_PARTITIONS     10000
#define BROKER_MAX_BROKERS        32

static const char usage_text[] =
    "usage: kiln broker [--partitions N] [--topics a,b] [--brokers N] [--port-file FILE]\n"
    "\n"
    "Starts an embedded Kafka broker, librdkafka's mock cluster, for development\n"
    "and tests, creates the topics, prints \"bootstrap: HOST:PORT,...\" on one line\n"
    "and serves until SIGTERM or SIGINT. It listens on 127.0.0.1 only, on ports\n"
    "the system picks, and keeps everything in memory.\n"
    "\n"
    "Options:\n"
    "  -p, --partitions N    partitions per topic (default 4)\n"
    "  -t, --topics A,B      topics to create (default user-events)\n"
    "  -b, --brokers N       brokers in the cluster (default 1)\n"
    "  -f, --port-file FILE  also write the bootstrap servers to FILE (written\n"
    "                        whole by rename, removed on exit)\n"
    "  -h, --help            show this help\n"
    "\n"
    "Unlike a real broker, measured with librdkafka 2.0:\n"
    "  - The group coordinator waits out a departed member's session before a\n"
    "    rejoin completes, so consumers in tests should use a short\n"
    "    session.timeout.ms (e.g. 6000).\n"
    "  - Each partition keeps only about 5 MB; older messages are dropped as if\n"
    "    by retention (150k records of ~300 B produced to 4 partitions left only\n"
    "    ~58k readable). Keep producers and consumers concurrent, or volumes small.\n"
    "\n"
    "Exit status: 0 after SIGTERM or SIGINT, 2 on bad options or a librdkafka\n"
    "error.\n";

static volatile sig_atomic_t broker_stop;

static void broker_on_signal(int sig)
{
	(void)sig;
	broker_stop = 1;
}

/* Parses a decimal integer in [min, max]; returns 0, or -1 if it is not one. */
static int parse_count(int *out, const char *s, int min, int max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

/* --partitions N into the int at out. */
static int parse_partitions(const char *cmd, const char *arg, void *out)
{
	if (parse_count(out, arg, 1, BROKER_MAX_PARTITIONS) < 0)
		return kiln_cli_fail(cmd, "--partitions: expected 1 to %d, got '%s'", BROKER_MAX_PARTITIONS,
		                     arg);
	return 0;
}

/* --brokers N into the int at out. */
static int parse_brokers(const char *cmd, const char *arg, void *out)
{
	if (parse_count(out, arg, 1, BROKER_MAX_BROKERS) < 0)
		return kiln_cli_fail(cmd, "--brokers: expected 1 to %d, got '%s'", BROKER_MAX_BROKERS, arg);
	return 0;
}

/* Writes "BOOTSTRAP\n" to path atomically (kiln_fs_write_atomic). */
static int write_port_file(const char *path, const char *bootstraps)
{
	char line[4096];
	int n;

	n = snprintf(line, sizeof(line), "%s\n", bootstraps);
	if (n < 0 || (size_t)n >= sizeof(line))
		return kiln_cli_fail("broker", "--port-file: the bootstrap list is too long");
	if (kiln_fs_write_atomic(path, line, (size_t)n, 0644) < 0)
		return kiln_cli_fail("broker", "%s", kiln_error_last());
	return 0;
}

/* Creates every comma-separated topic in list; empty names are errors. */
static int create_topics(rd_kafka_mock_cluster_t *mcluster, const char *list, int partitions, int replication)
{
	char *copy = strdup(list);
	char *p, *comma;
	int status = KILN_EXIT_USAGE;

	if (!copy)
		return kiln_cli_fail("broker", "out of memory");
	for (p = copy;; p = comma + 1) {
		rd_kafka_resp_err_t err;

		comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (!*p) {
			kiln_cli_fail("broker", "--topics: empty topic name in '%s'", list);
			goto cleanup;
		}
		err = rd_kafka_mock_topic_create(mcluster, p, partitions, replication);
		if (err) {
			kiln_cli_fail("broker", "creating topic '%s': %s", p, rd_kafka_err2str(err));
			goto cleanup;
		}
		if (!comma)
			break;
	}
	status = KILN_EXIT_OK;
cleanup:
	free(copy);
	return status;
}

int kiln_cmd_broker(int argc, char **argv)
{
	const char *topics = BROKER_DEFAULT_TOPIC, *port_file = NULL, *bootstraps;
	int partitions = BROKER_DEFAULT_PARTITIONS, brokers = 1, status;
	const kiln_cli_option rows[] = {
	    {.name = "partitions",
	     .letter = 'p',
	     .kind = KILN_CLI_CUSTOM,
	     .out = &partitions,
	     .parse = parse_partitions},
	    {.name = "topics", .letter = 't', .kind = KILN_CLI_STRING, .out = &topics},
	    {.name = "brokers",
	     .letter = 'b',
	     .kind = KILN_CLI_CUSTOM,
	     .out = &brokers,
	     .parse = parse_brokers},
	    {.name = "port-file", .letter = 'f', .kind = KILN_CLI_STRING, .out = &port_file},
	    KILN_CLI_END,
	};
	const kiln_cli_spec spec = {.cmd = "broker", .usage = usage_text, .rows = rows};
	int wrote_port_file = 0;
	rd_kafka_conf_t *conf = NULL;
	rd_kafka_t *rk = NULL;
	rd_kafka_mock_cluster_t *mcluster = NULL;
	struct sigaction sa;
	char errstr[512];

	if ((status = kiln_cli_parse(NULL, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	status = KILN_EXIT_USAGE;
	if (port_file && !*port_file)
		return kiln_cli_fail("broker", "--port-file: empty path");

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = broker_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	conf = rd_kafka_conf_new();
	/* log_level 4 keeps warnings and errors but not the notice that this
	 * bookkeeping handle has no bootstrap.servers of its own. */
	if (rd_kafka_conf_set(conf, "client.id", "kiln-broker", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK ||
	    rd_kafka_conf_set(conf, "log_level", "4", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
		kiln_cli_fail("broker", "%s", errstr);
		goto cleanup;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (!rk) {
		kiln_cli_fail("broker", "creating the librdkafka handle: %s", errstr);
		goto cleanup;
	}
	conf = NULL; /* rd_kafka_new took it */
	mcluster = rd_kafka_mock_cluster_new(rk, brokers);
	if (!mcluster) {
		kiln_cli_fail("broker", "librdkafka could not start the mock cluster");
		goto cleanup;
	}
	if (create_topics(mcluster, topics, partitions, brokers < 3 ? brokers : 3) != KILN_EXIT_OK)
		goto cleanup;
	bootstraps = rd_kafka_mock_cluster_bootstraps(mcluster);
	if (port_file) {
		if (write_port_file(port_file, bootstraps) != 0)
			goto cleanup;
		wrote_port_file = 1;
	}
	printf("bootstrap: %s\n", bootstraps);
	fflush(stdout);

	while (!broker_stop) {
		struct timespec ts = {0, 100 * 1000 * 1000};

		nanosleep(&ts, NULL);
	}
	status = KILN_EXIT_OK;
cleanup:
	if (wrote_port_file)
		unlink(port_file);
	if (mcluster)
		rd_kafka_mock_cluster_destroy(mcluster);
	if (rk)
		rd_kafka_destroy(rk);
	if (conf)
		rd_kafka_conf_destroy(conf);
	return status;
}
