/* Strict standard base64 decoding over libsodium (see base64.h). */
#include "core/base64.h"

#include <sodium.h>
#include <string.h>

bool kiln_base64_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
	       c == '/' || c == '=';
}

int kiln_base64_decode(unsigned char *out, size_t cap, const char *text, size_t len, const char *ignore,
                       size_t *out_len)
{
	const char *end = NULL;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		if (!kiln_base64_char(c) && !(ignore && c != '\0' && strchr(ignore, c)))
			return -1;
	}
	if (sodium_base642bin(out, cap, text, len, ignore, out_len, &end, sodium_base64_VARIANT_ORIGINAL) !=
	        0 ||
	    end != text + len)
		return -1;
	return 0;
}
