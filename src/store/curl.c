/* libcurl's shared parts for the HTTP backends (see curl.h). */
#include "store/curl.h"

#include "core/error.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static CURLcode init_code;

static void init_curl(void)
{
	init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int kiln_curl_init(void)
{
	pthread_once(&init_once, init_curl);
	if (init_code != CURLE_OK)
		return kiln_error_set(KILN_EIO, "libcurl: %s", curl_easy_strerror(init_code));
	return 0;
}

void kiln_curl_pool_init(kiln_curl_pool *p)
{
	pthread_mutex_init(&p->lock, NULL);
	p->count = 0;
}

void kiln_curl_pool_free(kiln_curl_pool *p)
{
	for (size_t i = 0; i < p->count; i++)
		curl_easy_cleanup(p->idle[i]);
	p->count = 0;
	pthread_mutex_destroy(&p->lock);
}

CURL *kiln_curl_take(kiln_curl_pool *p)
{
	CURL *c = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->count > 0)
		c = p->idle[--p->count];
	pthread_mutex_unlock(&p->lock);
	return c ? c : curl_easy_init();
}

void kiln_curl_give(kiln_curl_pool *p, CURL *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&p->lock);
	if (p->count < KILN_CURL_POOL_MAX) {
		p->idle[p->count++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	if (c)
		curl_easy_cleanup(c);
}

void kiln_curl_request(CURL *e, const char *url, char errbuf[CURL_ERROR_SIZE])
{
	curl_easy_reset(e);
	errbuf[0] = '\0';
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, KILN_CURL_CONNECT_S);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, KILN_CURL_STALL_S);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "kiln");
}

bool kiln_curl_retriable(CURLcode cc, long status)
{
	if (cc == CURLE_OK)
		return (status >= 500 && status != 501 && status != 505) || status == 429 || status == 408;
	switch (cc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
}
