/* Unit tests for src/core/notify.c: the datagrams a service manager
 * receives on NOTIFY_SOCKET (a path and an abstract '@' name), nothing
 * without it, the watchdog's interval from WATCHDOG_USEC and WATCHDOG_PID,
 * and the reload report of src/core/config.c that goes with SIGHUP. */
#include "fixture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/notify.h"
#include "core/yaml_doc.h"

/* A datagram socket bound at `address` (a path, or '@' for abstract). */
static int bind_at(const char *address)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n = strlen(address);
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (address[0] != '@'));
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	memcpy(sa.sun_path, address, n);
	if (address[0] == '@')
		sa.sun_path[0] = '\0';
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, len), 0);
	return fd;
}

/* The next datagram, or "" when none is waiting. */
static const char *next_datagram(int fd, char *buf, size_t cap)
{
	ssize_t n = recv(fd, buf, cap - 1, MSG_DONTWAIT);

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void test_path_socket(void **state)
{
	char dir[4096], path[4200], buf[256];
	int fd;

	(void)state;
	assert_int_equal(kiln_test_tmpdir(dir, sizeof(dir), "notify"), 0);
	snprintf(path, sizeof(path), "%s/notify", dir);
	fd = bind_at(path);
	setenv("NOTIFY_SOCKET", path, 1);
	assert_true(kiln_notify("READY=1"));
	assert_string_equal(next_datagram(fd, buf, sizeof(buf)), "READY=1");
	assert_true(kiln_notifyf("STATUS=%d partition(s)", 3));
	assert_string_equal(next_datagram(fd, buf, sizeof(buf)), "STATUS=3 partition(s)");
	assert_true(kiln_notify_reloading());
	next_datagram(fd, buf, sizeof(buf));
	assert_true(strncmp(buf, "RELOADING=1\nMONOTONIC_USEC=", 27) == 0);
	assert_true(strtoull(buf + 27, NULL, 10) > 0);
	assert_string_equal(next_datagram(fd, buf, sizeof(buf)), "");
	close(fd);
	unsetenv("NOTIFY_SOCKET");
	kiln_test_rmtree(dir);
}

static void test_abstract_socket(void **state)
{
	char name[64], buf[256];
	int fd;

	(void)state;
	snprintf(name, sizeof(name), "@kiln-unit-notify-%d", (int)getpid());
	fd = bind_at(name);
	setenv("NOTIFY_SOCKET", name, 1);
	assert_true(kiln_notify("STOPPING=1"));
	assert_string_equal(next_datagram(fd, buf, sizeof(buf)), "STOPPING=1");
	close(fd);
	unsetenv("NOTIFY_SOCKET");
}

static void test_no_socket(void **state)
{
	(void)state;
	unsetenv("NOTIFY_SOCKET");
	errno = EEXIST;
	assert_false(kiln_notify("READY=1"));
	assert_int_equal(errno, EEXIST); /* never the caller's failure */
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	assert_false(kiln_notify("READY=1"));
	setenv("NOTIFY_SOCKET", "/nonexistent/kiln/notify", 1);
	assert_false(kiln_notify("READY=1"));
	unsetenv("NOTIFY_SOCKET");
}

static void test_watchdog(void **state)
{
	char dir[4096], path[4200], buf[256], pid[32];
	kiln_notify_watchdog w;
	int fd;

	(void)state;
	assert_int_equal(kiln_test_tmpdir(dir, sizeof(dir), "watchdog"), 0);
	snprintf(path, sizeof(path), "%s/notify", dir);
	fd = bind_at(path);
	setenv("NOTIFY_SOCKET", path, 1);

	unsetenv("WATCHDOG_USEC");
	kiln_notify_watchdog_init(&w);
	assert_int_equal(w.interval_us, 0);
	kiln_notify_watchdog_kick(&w);
	assert_string_equal(next_datagram(fd, buf, sizeof(buf)), "");

	/* half of WATCHDOG_USEC; the first kick at once, the next only when due */
	setenv("WATCHDOG_USEC", "30000000", 1);
	unsetenv("WATCHDOG_PID");
	kiln_notify_watchdog_init(&w);
	assert_int_equal(w.interval_us, 15000000);
	kiln_notify_watchdog_kick(&w);
	assert_string_equal(next_datagram(fd, buf, sizeof(buf)), "WATCHDOG=1");
	kiln_notify_watchdog_kick(&w);
	assert_string_equal(next_datagram(fd, buf, sizeof(buf)), "");

	/* meant for another process: no watchdog here */
	snprintf(pid, sizeof(pid), "%d", (int)getpid() + 1);
	setenv("WATCHDOG_PID", pid, 1);
	kiln_notify_watchdog_init(&w);
	assert_int_equal(w.interval_us, 0);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	kiln_notify_watchdog_init(&w);
	assert_int_equal(w.interval_us, 15000000);

	setenv("WATCHDOG_USEC", "soon", 1);
	kiln_notify_watchdog_init(&w);
	assert_int_equal(w.interval_us, 0);
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	unsetenv("NOTIFY_SOCKET");
	close(fd);
	kiln_test_rmtree(dir);
}

static kiln_yaml_doc *doc_of(const char *text)
{
	kiln_yaml_doc *doc = NULL;

	assert_int_equal(kiln_yaml_load_buffer(&doc, "t.yaml", text, strlen(text)), 0);
	return doc;
}

static void test_reload_report(void **state)
{
	static const char *const live[] = {"log", "snapshot", NULL};
	kiln_yaml_doc *started =
	    doc_of("dataset: a\nsplit: {salt: s1}\nsnapshot: {records: 100}\ntopics: [a, b]\n");
	kiln_yaml_doc *last =
	    doc_of("dataset: a\nsplit: {salt: s2}\nsnapshot: {records: 10}\ntopics: [a, b]\n");
	kiln_yaml_doc *next = doc_of("dataset: a\nsplit: {salt: s2}\nsnapshot: {records: 10, seconds: 1}\n"
	                             "topics: [a, c]\nlog: {level: warn}\nraw: {enabled: false}\n");
	kiln_buf buf = KILN_BUF_INIT(0);
	const char *applied, *ignored;

	(void)state;
	/* applied: against the config in force; ignored: against the start */
	kiln_config_reload_report(kiln_yaml_root(started), kiln_yaml_root(last), kiln_yaml_root(next), live,
	                          &buf, &applied, &ignored);
	assert_string_equal(applied, "snapshot.seconds,log");
	assert_string_equal(ignored, "split.salt,topics,raw");
	/* nothing changed */
	kiln_config_reload_report(kiln_yaml_root(next), kiln_yaml_root(next), kiln_yaml_root(next), live,
	                          &buf, &applied, &ignored);
	assert_string_equal(applied, "");
	assert_string_equal(ignored, "");
	kiln_buf_free(&buf);
	kiln_yaml_free(started);
	kiln_yaml_free(last);
	kiln_yaml_free(next);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_path_socket),   cmocka_unit_test(test_abstract_socket),
	    cmocka_unit_test(test_no_socket),     cmocka_unit_test(test_watchdog),
	    cmocka_unit_test(test_reload_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
