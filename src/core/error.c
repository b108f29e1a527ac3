/* Thread-local last-error slot (see error.h). */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_message[512];
static _Thread_local int last_code;

int kiln_error_set(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_message, sizeof(last_message), fmt, ap);
	va_end(ap);
	last_code = code;
	return code;
}

int kiln_error_oom(const char *area)
{
	if (area)
		return kiln_error_set(KILN_ENOMEM, "%s: out of memory", area);
	return kiln_error_set(KILN_ENOMEM, "out of memory");
}

const char *kiln_error_last(void)
{
	return last_message;
}

int kiln_error_last_code(void)
{
	return last_code;
}

void kiln_error_clear(void)
{
	last_message[0] = '\0';
	last_code = 0;
}
