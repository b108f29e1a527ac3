/* HMAC-SHA-256 from precomputed states (mask/hmac.h). The key's libsodium
 * state holds the SHA-256 chaining values after the ipad block (ictx) and
 * after the opad block (octx); a MAC continues each with the message and
 * the inner digest, padded as FIPS 180-4 says. The compression function is
 * the CPU's SHA-NI instructions (SHA256RNDS2, SHA256MSG1/2) when cpuid says
 * they are there, decided once per process. */
#include "mask/hmac.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define KILN_HAVE_SHA_NI 1
#endif

#ifdef KILN_HAVE_SHA_NI

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* One 64-byte block into the chaining values h[0..8) (a..h). The state is
 * kept as the two registers the instructions want, ABEF and CDGH; four
 * message words per step, scheduled with SHA256MSG1/MSG2. */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_ni(uint32_t h[8],
                                                                    const unsigned char block[64])
{
	const __m128i byteswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
	__m128i abef, cdgh, abef_in, cdgh_in, tmp, w[4];

	tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1);  /* c d a b */
	cdgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B); /* e f g h */
	abef = _mm_alignr_epi8(tmp, cdgh, 8);
	cdgh = _mm_blend_epi16(cdgh, tmp, 0xF0);
	abef_in = abef;
	cdgh_in = cdgh;

#pragma GCC unroll 16
	for (int i = 0; i < 16; i++) {
		__m128i msg;

		if (i < 4) {
			w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(block + 16 * i)), byteswap);
		} else {
			/* W[t] for t = 4i..4i+3: W[t-16] + s0(W[t-15]) (MSG1), + W[t-7..t-4]
			 * (the last two groups shifted by one word), + s1(W[t-2]) (MSG2) */
			__m128i prev = w[(i - 1) & 3], prev2 = w[(i - 2) & 3];
			__m128i x = _mm_sha256msg1_epu32(w[i & 3], w[(i + 1) & 3]);

			x = _mm_add_epi32(x, _mm_alignr_epi8(prev, prev2, 4));
			w[i & 3] = _mm_sha256msg2_epu32(x, prev);
		}
		msg = _mm_add_epi32(w[i & 3], _mm_loadu_si128((const __m128i *)&round_constants[4 * i]));
		cdgh = _mm_sha256rnds2_epu32(cdgh, abef, msg);
		abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(msg, 0x0E));
	}
	abef = _mm_add_epi32(abef, abef_in);
	cdgh = _mm_add_epi32(cdgh, cdgh_in);

	tmp = _mm_shuffle_epi32(abef, 0x1B);  /* f e b a */
	cdgh = _mm_shuffle_epi32(cdgh, 0xB1); /* d c h g */
	_mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(tmp, cdgh, 0xF0));
	_mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(cdgh, tmp, 8));
}

static bool cpu_has_sha_ni(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3))
		return false;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return false;
	return (b & (1u << 29)) != 0; /* CPUID.(EAX=7,ECX=0):EBX.SHA[bit 29] */
}

/* A message fed in pieces, compressed a block at a time. */
typedef struct sha_stream {
	uint32_t h[8];
	unsigned char block[64];
	size_t fill;
} sha_stream;

static void stream_feed(sha_stream *s, const unsigned char *p, size_t n)
{
	while (n > 0) {
		size_t take = 64 - s->fill < n ? 64 - s->fill : n;

		memcpy(s->block + s->fill, p, take);
		s->fill += take;
		p += take;
		n -= take;
		if (s->fill == 64) {
			compress_ni(s->h, s->block);
			s->fill = 0;
		}
	}
}

/* Pads the message of `total` bytes (counting the key block) and writes
 * the big-endian digest. */
static void stream_finish(sha_stream *s, uint64_t total, unsigned char out[32])
{
	uint64_t bits = total * 8;

	s->block[s->fill++] = 0x80;
	if (s->fill > 56) {
		memset(s->block + s->fill, 0, 64 - s->fill);
		compress_ni(s->h, s->block);
		s->fill = 0;
	}
	memset(s->block + s->fill, 0, 56 - s->fill);
	for (int i = 0; i < 8; i++)
		s->block[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
	compress_ni(s->h, s->block);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (unsigned char)(s->h[i] >> 24);
		out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
		out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
		out[4 * i + 3] = (unsigned char)s->h[i];
	}
}

static void hmac_ni(unsigned char mac[32], const crypto_auth_hmacsha256_state *base, const void *a,
                    size_t a_len, const void *b, size_t b_len, const void *c, size_t c_len)
{
	sha_stream s;
	unsigned char inner[32];

	memcpy(s.h, base->ictx.state, sizeof(s.h));
	s.fill = 0;
	stream_feed(&s, a, a_len);
	stream_feed(&s, b, b_len);
	stream_feed(&s, c, c_len);
	stream_finish(&s, 64 + (uint64_t)a_len + b_len + c_len, inner);

	memcpy(s.h, base->octx.state, sizeof(s.h));
	s.fill = 0;
	stream_feed(&s, inner, sizeof(inner));
	stream_finish(&s, 64 + sizeof(inner), mac);
	sodium_memzero(&s, sizeof(s));
	sodium_memzero(inner, sizeof(inner));
}

#endif /* KILN_HAVE_SHA_NI */

/* -1 not decided yet, 0 portable, 1 SHA-NI; allow_accel 0 forces portable. */
static int accel = -1, allow_accel = 1;

bool kiln_hmac_sha256_accelerated(void)
{
	int v = __atomic_load_n(&accel, __ATOMIC_RELAXED);

	if (v < 0) {
#ifdef KILN_HAVE_SHA_NI
		v = cpu_has_sha_ni();
#else
		v = 0;
#endif
		__atomic_store_n(&accel, v, __ATOMIC_RELAXED);
	}
	return v && __atomic_load_n(&allow_accel, __ATOMIC_RELAXED);
}

void kiln_hmac_sha256_allow_accel(bool allow)
{
	__atomic_store_n(&allow_accel, allow ? 1 : 0, __ATOMIC_RELAXED);
}

void kiln_hmac_sha256_3(unsigned char mac[32], const crypto_auth_hmacsha256_state *base, const void *a,
                        size_t a_len, const void *b, size_t b_len, const void *c, size_t c_len)
{
	crypto_auth_hmacsha256_state state;

#ifdef KILN_HAVE_SHA_NI
	/* the states must be exactly one block in: a 32-byte key's ipad/opad */
	if (kiln_hmac_sha256_accelerated() && base->ictx.count == 512 && base->octx.count == 512) {
		hmac_ni(mac, base, a, a_len, b, b_len, c, c_len);
		return;
	}
#endif
	state = *base;
	crypto_auth_hmacsha256_update(&state, a, a_len);
	crypto_auth_hmacsha256_update(&state, b, b_len);
	crypto_auth_hmacsha256_update(&state, c, c_len);
	crypto_auth_hmacsha256_final(&state, mac); /* wipes the state copy */
}
