/* Standard base64 (RFC 4648 section 4: A-Z a-z 0-9 + /, padded with '=')
 * from bytes kiln did not write: the one strict decoder for signatures,
 * trusted-key lines, raw-zone records and profile sketches. libsodium
 * 1.0.18's sodium_base642bin alone decodes some bytes above 0x7f as
 * digits (0xad stood for '/'), so text another decoder such as ssh-keygen
 * refuses would pass; every byte is checked against the alphabet first. */
#ifndef KILN_CORE_BASE64_H
#define KILN_CORE_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* Whether c is a base64 digit or '=' (padding). */
bool kiln_base64_char(unsigned char c);

/* Decodes text[0..len) into out[0..cap): 0 with the decoded length in
 * *out_len, or -1 (not base64, or out too small). Bytes listed in `ignore`
 * (may be NULL), such as an armour's line breaks, are skipped. Sets no
 * error message: the caller names what it was reading. */
int kiln_base64_decode(unsigned char *out, size_t cap, const char *text, size_t len, const char *ignore,
                       size_t *out_len);

#endif
