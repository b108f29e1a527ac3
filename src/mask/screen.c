/* The locked PII screen (see screen.h): one detector and its mutex. */
#include "mask/screen.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "mask/detect.h"

struct kiln_pii_screen {
	pthread_mutex_t lock;
	kiln_detector *detector;
};

int kiln_pii_screen_new(kiln_pii_screen **out)
{
	kiln_pii_screen *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s)
		return kiln_error_oom(NULL);
	if ((rc = kiln_detector_new(&s->detector)) < 0) {
		free(s);
		return rc;
	}
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

void kiln_pii_screen_free(void *screen)
{
	kiln_pii_screen *s = screen;

	if (!s)
		return;
	kiln_detector_free(s->detector);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int kiln_pii_screen_flags(void *screen, const char *v, size_t len)
{
	kiln_pii_screen *s = screen;
	kiln_detect_match m;
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = kiln_detect(s->detector, v, len, &m, 1);
	pthread_mutex_unlock(&s->lock);
	if (n == SIZE_MAX)
		return KILN_EIO;
	return n > 0;
}
