/* The manifest codec (see format.h): the naming rules and every manifest
 * file's renderer and parser. Stateless; nothing here touches git. */
#include "manifest/format.h"

#include <string.h>

/* ---- names ---------------------------------------------------------------- */

bool kiln_mfmt_name_valid_n(const char *s, size_t n)
{
	if (!s || n == 0 || n > KILN_MFMT_NAME_MAX || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

bool kiln_mfmt_name_valid(const char *s)
{
	return s && kiln_mfmt_name_valid_n(s, strnlen(s, KILN_MFMT_NAME_MAX + 1));
}
